// The memory levers of training stacks, as re-estimates of what is allocated (issue #18).
//
// Sources, per lever:
//  - autocast's weight cache: aten/src/ATen/autocast_mode.cpp (cached_cast).
//  - --loss hf: transformers' ForCausalLMLoss (loss/loss_utils.py) upcasts the whole logits
//    (`logits.float()`) before cross_entropy, whose log_softmax output is saved.
//  - --loss chunked: torchtune's CEWithChunkedOutputLoss (torchtune/modules/loss/
//    ce_chunked_output_loss.py): the model returns its logits in 8 chunks; each chunk is
//    upcast and goes through cross_entropy on its own, so one chunk's fp32 copy exists at a
//    time; every chunk's saved log_softmax output stays until backward.
//  - --loss fused-linear: Liger's LigerFusedLinearCrossEntropyFunction (liger_kernel/ops/
//    fused_linear_cross_entropy.py): forward runs lm_head and the loss chunk by chunk, writes
//    the loss gradient into the chunk's logits in place, and keeps grad_input (tokens x
//    hidden) and grad_weight (the lm_head's shape, when it trains) for backward.
//  - --packing: transformers' masking_utils (find_packed_sequence_indices, sdpa_mask) and
//    PyTorch's SDPA (attention.cpp, convert_boolean_attn_mask): see packed_sdpa_mask.
//  - --fsdp-mixed-precision: torch.distributed.fsdp MixedPrecisionPolicy (FSDP2
//    _fsdp_param.py / _fsdp_collectives.py): each unit's parameters are all-gathered in
//    param_dtype, its unsharded gradients reduce-scattered in reduce_dtype (fp32).

#include "levers.hpp"

#include <algorithm>

#include "checked.hpp"

namespace vramfit::engine::detail {

namespace {

constexpr std::uint64_t kFp32 = 4;

bool fsdp(spec::Sharding s) { return s == spec::Sharding::fsdp || s == spec::Sharding::fsdp_grad_op; }

}  // namespace

bool autocast_caches_weights(const spec::Workload& w) {
  // requires_grad: only full training trains the weights; is_view: FSDP's unsharded
  // parameters are views into the all-gather output (FSDP2 FSDPParam.init_unsharded_param,
  // FSDP1's flat parameter views).
  return w.mode == spec::Mode::train && !fsdp(w.sharding);
}

std::uint64_t fused_linear_chunk_rows(std::uint64_t tokens, std::uint64_t h, std::uint64_t v) {
  if (tokens == 0) return 0;
  const std::uint64_t inc = h == 0 ? 1 : std::max<std::uint64_t>(1, (v + h - 1) / h);
  const std::uint64_t want = (tokens + inc - 1) / inc;
  std::uint64_t rows = 1;
  while (rows < want) rows *= 2;
  return std::min(rows, tokens);
}

LossBytes loss_bytes(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p, std::uint64_t tokens) {
  const Bytes lc{mul(tokens, m.vocab_size, p.compute)};  // the logits in the compute dtype
  const Bytes l4{mul(tokens, m.vocab_size, kFp32)};      // their fp32 upcast / log-softmax
  // Gemma-2 soft-capping: tanh's output is saved for backward.
  const Bytes softcap = m.final_logit_softcap > 0 ? lc : Bytes{};
  const bool upcast = p.compute != kFp32;  // `.float()` is a copy only from 16 bits
  LossBytes b;
  if (w.compile == spec::Compile::all && w.loss != spec::Loss::fused_linear) {
    // A compiled cross-entropy (torchtune's compile_loss; the loss inside a compiled model):
    // Inductor fuses the upcast, log_softmax and nll into reductions, and the partitioner saves
    // the 16-bit logits it was given and a per-row logsumexp instead of the fp32 log-softmax;
    // backward recomputes exp(x - lse) and writes the gradient in the logits' dtype. Measured
    // (tests/accuracy/levers/results/compile.jsonl, checkpointed LoRA): forward's end holds
    // one 16-bit logits tensor, backward's start two. Chunked, the same: every chunk's logits
    // stay saved, and autograd runs every chunk's loss backward (created last) before the
    // lm_head chunks' matmuls, so all the chunks' gradients are alive together (measured: the
    // compiled chunked loss peaks with the compiled hf loss, within 0.5 %).
    b.forward_end = lc + softcap;
    b.backward_start = lc * 2 + softcap;
    return b;
  }
  switch (w.loss) {
    case spec::Loss::hf:
      // Forward's end: the 16-bit logits, their fp32 copy and the saved log_softmax output.
      // Backward: nll_loss's and log_softmax's fp32 gradients beside the saved output.
      b.forward_end = l4 + lc + softcap + (upcast ? l4 : Bytes{});
      b.backward_start = l4 * 3 + softcap;
      break;
    case spec::Loss::chunked: {
      // Every chunk's saved fp32 log_softmax output (all of them: l4), the 16-bit logits the
      // recipe holds until the loss is computed, and the last chunk's fp32 upcast. Backward
      // runs chunk by chunk: two fp32 gradients and the 16-bit one of one chunk.
      const Bytes l4_chunk = Bytes{l4.value() / kLossChunks + (l4.value() % kLossChunks ? 1 : 0)};
      const Bytes lc_chunk = Bytes{lc.value() / kLossChunks + (lc.value() % kLossChunks ? 1 : 0)};
      b.forward_end = l4 + lc + softcap + (upcast ? l4_chunk : Bytes{});
      b.backward_start = l4 + l4_chunk * 2 + lc_chunk + softcap;
      break;
    }
    case spec::Loss::fused_linear: {
      // grad_input (the hidden states' shape), grad_weight (when the lm_head trains), the fp32
      // per-token losses, and at forward's last chunk its logits and grad_input's slice.
      const std::uint64_t h = m.hidden_size;
      const std::uint64_t rows = fused_linear_chunk_rows(tokens, h, m.vocab_size);
      const Bytes grad_input{mul(tokens, h, p.compute)};
      const std::uint64_t head = m.lm_head_params ? m.lm_head_params : m.embedding_params;
      const Bytes grad_weight = w.mode == spec::Mode::train ? Bytes{mul(head, p.param)} : Bytes{};
      const Bytes chunk{mul(rows, m.vocab_size, p.compute)};
      const Bytes chunk_out{mul(rows, h, p.compute)};
      b.forward_end = grad_input + grad_weight + Bytes{mul(tokens, kFp32)} + chunk + chunk_out;
      b.backward_start = grad_input + grad_weight;
      break;
    }
  }
  return b;
}

std::uint64_t lm_head_input_not_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p) {
  if (w.loss != spec::Loss::fused_linear || w.mode != spec::Mode::train) return 0;
  // head_saved's "lm_head's input" term (activations.cpp): the final norm's output.
  return mul(m.hidden_size, p.autocast ? p.compute : p.residual);
}

std::uint64_t compiled_layer_not_saved(const spec::ModelSpec& m, const spec::LayerGroup& g, const spec::Workload& w,
                                       const Precision& p) {
  if (w.compile == spec::Compile::none) return 0;
  std::uint64_t bytes = 0;
  // Eager saves gate's activation output and the product (activations.cpp: 4 I for a gated
  // MLP); compiled, the fused kernel's inputs gate and up are saved and both are recomputed.
  // Measured on llama-3.2-1b (H200, bf16, full training): exactly 2 I per token and layer.
  if (m.gated_mlp && !g.moe) bytes = checked_add(bytes, mul(2, m.intermediate_size, p.compute));
  // LoRA (peft casts each adapter's input to the fp32 adapter dtype, one cast per adapter in
  // eager): the casts of one input are one node after CSE. Counted for the attention input (q,
  // k, v adapters) only: the MLP pair's two casts stayed in the measurements.
  if (spec::uses_lora(w.mode) && w.lora.dropout == 0 && !p.autocast && p.adapter != p.compute) {
    std::uint64_t adapters = 0;
    for (const auto& l : g.linears)
      if (l.role == spec::Role::attn_in && lora_targets(w, l)) ++adapters;
    if (adapters > 1) bytes = checked_add(bytes, mul(adapters - 1, m.hidden_size, p.adapter));
  }
  return bytes;
}

std::uint64_t selective_layer_saved(const spec::ModelSpec& m, const spec::LayerGroup& g, const Precision& p) {
  // torchtitan (models/llama3/infra/parallelize.py, _apply_ac_to_transformer_block): the
  // policy saves aten.mm outputs except every second one (a per-layer count), the SDPA
  // kernels' outputs and aten.max; everything else is recomputed in backward.
  std::uint64_t bytes = mul(m.hidden_size, p.residual);
  std::uint64_t mm = 0;
  for (const auto& l : g.linears) {
    if (l.bias || l.expert) continue;
    if (++mm % 2 == 1) bytes = checked_add(bytes, mul(l.out_features, l.copies, p.compute));
  }
  bytes = checked_add(bytes, checked_add(mul(m.num_heads, m.head_dim, p.compute), mul(m.num_heads, kFp32)));
  return bytes;
}

std::uint64_t checkpointed_layers(std::uint64_t first, std::uint64_t count, std::uint64_t every) {
  if (every <= 1) return count;
  const auto upto = [every](std::uint64_t n) { return (n + every - 1) / every; };  // multiples of every below n
  return upto(first + count) - upto(first);
}

bool packed_sdpa_mask(const spec::Workload& w) {
  return w.sequence_packing && w.attention == spec::Attention::sdpa;
}

std::uint64_t packed_mask_bias(const spec::Workload& w, const Precision& p) {
  return packed_sdpa_mask(w) ? p.compute : 0;
}

std::uint64_t gathered_param_bytes(const spec::Workload& w, const Precision& p) {
  if (w.fsdp_param_dtype) return 2;  // bf16 / fp16 (spec::validate allows no other)
  return p.param;
}

}  // namespace vramfit::engine::detail
