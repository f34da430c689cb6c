// The linear-attention layers of hybrid models (see state_cache.hpp). Everything below follows
// transformers 5.17's models/qwen3_next/modeling_qwen3_next.py on the path it takes without the
// flash-linear-attention (`fla`) and `causal-conv1d` packages (the H200 measured here has
// neither): Qwen3NextGatedDeltaNet.forward -> causal_conv1d_fn (F.conv1d) -> torch_chunk_gated_delta_rule
// for a prompt, causal_conv1d_update and torch_recurrent_gated_delta_rule for a decode step; and
// cache_utils.py's LinearAttentionLayer for the states. With those packages installed the fused
// kernels allocate other temporaries (not modelled). Measured: tests/accuracy/hybrid.
// qwen3_5 / qwen3_5_moe (models/qwen3_5/modeling_qwen3_5.py Qwen3_5GatedDeltaNet.forward) run the
// same conv, chunked rule, recurrent step and states from split projections: no
// fix_query_key_value_ordering and no torch.cat of q, k and v (LinearMixer::gated_delta_net_split).
// Not measured on the H200: they follow the rules measured on qwen3_next.
#include "state_cache.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "checked.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/architectures.hpp"

namespace vramfit::engine::detail {

namespace {

constexpr std::uint64_t kFp32 = 4;
/// torch_chunk_gated_delta_rule's chunk_size: the sequence is padded to a multiple of it.
constexpr std::uint64_t kChunk = 64;

}  // namespace

std::uint64_t attention_layers(const spec::ModelSpec& m) noexcept {
  return m.num_layers - std::min(m.linear_attention.layers, m.num_layers);
}

Bytes linear_state_cache(const spec::ModelSpec& m, std::uint64_t batch, const Precision& p) {
  const spec::LinearAttention& la = m.linear_attention;
  if (la.layers == 0) return Bytes{};
  // LinearAttentionLayer.lazy_initialization: conv_states zeros of (*conv_states.shape[:-1],
  // conv_kernel_size) in mixed_qkv's dtype (the compute dtype); recurrent_states
  // zeros_like(last_recurrent_state), which torch_chunk_gated_delta_rule makes in fp32.
  const std::uint64_t conv = mul(mul(batch, la.conv_dim()), la.conv_kernel, p.compute);
  const std::uint64_t recurrent = mul(mul(batch, la.value_heads), mul(la.key_head_dim, la.value_head_dim), kFp32);
  return Bytes{mul(la.layers, add(conv, recurrent))};
}

Bytes linear_attention_forward(const spec::ModelSpec& m, std::uint64_t batch, std::uint64_t seq, const Precision& p) {
  const spec::LinearAttention& la = m.linear_attention;
  if (la.layers == 0 || batch == 0 || seq == 0) return Bytes{};
  const std::uint64_t c = p.compute;
  const std::uint64_t hv = la.value_heads;
  const std::uint64_t kd = mul(la.key_heads, la.key_head_dim);
  const std::uint64_t vd = mul(hv, la.value_head_dim);
  const std::uint64_t conv = la.conv_dim();
  const std::uint64_t tokens = mul(batch, seq);
  const std::uint64_t padded = mul(batch, seq + (kChunk - seq % kChunk) % kChunk);
  const spec::Architecture* row = spec::find_architecture(m.model_type);
  const bool split = row != nullptr && row->linear_mixer == spec::LinearMixer::gated_delta_net_split;
  const bool grouped = !split && la.key_heads > 1;  // fix_query_key_value_ordering's reshapes copy
  const bool repeated = hv > la.key_heads;          // repeat_interleave of q and k to the value heads

  // Alive in the model beside the layer, per token: its input (the residual), the input norm's
  // output and Qwen3NextModel.forward's inputs_embeds.
  const std::uint64_t stream = mul(3, m.hidden_size);
  // Qwen3NextGatedDeltaNet.forward's locals that live through the whole call, per token:
  // projected_states_qkvz (2 key_dim + 2 value_dim) and _ba (2 value heads); z reshaped to heads (a
  // copy when there are several key-head groups); the conv's silu output (conv_dim), which q, k and v
  // are views of; q and k repeated to the value heads; beta (b.sigmoid()).
  // Qwen3_5GatedDeltaNet.forward's: z (in_proj_z, value_dim; its reshape is a view), b and a (a value
  // head each), the silu output, the repeats and beta; in_proj_qkv's output (conv_dim) is only
  // `mixed_qkv`, freed when the conv's output replaces it (the prefill's update_conv_state returns it
  // as is).
  std::uint64_t locals = split ? add(vd, mul(2, hv), conv) : add(add(mul(2, kd), mul(2, vd)), mul(2, hv), conv);
  if (grouped) locals = add(locals, vd, mul(2, hv));  // z, and b and a reshaped
  if (repeated) locals = add(locals, mul(2, hv, la.key_head_dim));
  locals = add(locals, hv);
  const std::uint64_t caller = add(mul(add(stream, locals), c), mul(hv, kFp32));  // + g (fp32)

  // The conv moment: the q/k/v copies and their torch.cat (conv_dim) beside F.conv1d's padded
  // output and its silu (conv_dim each), while the locals above but the silu output and the
  // repeats are alive. Split: in_proj_qkv's output (conv_dim), z, b and a beside the conv's output
  // and its silu (causal_conv1d_fn's F.conv1d(...)[:, :, :seq_len] keeps the padded output alive).
  std::uint64_t at_conv =
      split ? add(mul(3, conv), vd, mul(2, hv)) : add(add(mul(2, kd), mul(2, vd)), mul(3, conv));
  if (grouped) at_conv = add(at_conv, mul(2, vd), mul(2, kd));  // the v and z reshapes, the q/k copies
  const Bytes conv_moment{mul(tokens, add(stream, at_conv), c)};

  // torch_chunk_gated_delta_rule, per padded token, fp32: q and k (value heads x key_head_dim) and v
  // after the transpose / fp32 copy and F.pad; v_beta and k_beta; decayed_k_beta; new_values and
  // k_cumdecay (solve_triangular); core_attn_out; three chunk x chunk matrices a head per chunk
  // (pairwise_decay, ut_system, intra_chunk_attn: 64 values a token); the padded beta and decay. Its
  // peak is where `query = query * cum_decay.exp()` (then key) makes a new copy beside the old one:
  // 6 key-sized, 4 value-sized and 3 chunk-sized tensors.
  const std::uint64_t qk = mul(hv, la.key_head_dim);
  const std::uint64_t v = vd;
  const std::uint64_t chunk_mats = mul(hv, kChunk);
  const std::uint64_t decay_moment = add(add(mul(6, qk), mul(4, v)), mul(3, chunk_mats), mul(2, hv));
  // While ut_system is made (k_beta @ key^T, then * pairwise_decay), before the solves: q, k, k_beta,
  // v, v_beta and four chunk-sized matrices (only larger for tiny heads).
  const std::uint64_t ut_moment = add(add(mul(3, qk), mul(2, v)), mul(4, chunk_mats), mul(2, hv));
  const std::uint64_t inner = mul(padded, std::max(decay_moment, ut_moment), kFp32);
  const Bytes chunk_moment{add(mul(tokens, caller), inner)};
  return std::max(conv_moment, chunk_moment);
}

Bytes linear_attention_decode(const spec::ModelSpec& m, std::uint64_t batch, const Precision&) {
  const spec::LinearAttention& la = m.linear_attention;
  if (la.layers == 0) return Bytes{};
  // torch_recurrent_gated_delta_rule over one token: `state * decay_t` (a new state), then
  // `state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)`: the outer product and the sum beside it, while
  // the cached state (initial_state.to(value) is the same fp32 tensor) stays: 3 fp32 states.
  const std::uint64_t state = mul(mul(batch, la.value_heads), mul(la.key_head_dim, la.value_head_dim), kFp32);
  return Bytes{mul(3, state)};
}

void refuse_linear_attention_training(const spec::ModelSpec& m, const spec::Workload& w) {
  if (m.linear_attention.layers == 0 || w.mode == spec::Mode::inference || w.mode == spec::Mode::generate) return;
  throw InputError(
      "--mode",
      fmt::format("{} of model_type '{}' ({} Gated DeltaNet linear-attention layers) is not estimated: the backward of "
                  "those layers keeps what the kernel package decides (transformers' torch path or "
                  "flash-linear-attention's fused kernels save different tensors), and it was not measured",
                  spec::name_of(w.mode), m.model_type, m.linear_attention.layers),
      "estimate --mode inference or --mode generate for this model; training hybrid models is not supported yet");
}

}  // namespace vramfit::engine::detail
