// What autograd keeps for backward, layer by layer, and what a forward creates on the way.
//
// Every term below is a tensor that a Hugging Face decoder layer creates and that PyTorch's
// autograd saves (derivatives.yaml: which inputs or outputs each op's backward needs) or
// that lives only during the forward. Sizes are bytes per token (x batch*seq) or per token
// per key position (x batch*seq*seq, attention scores). Names in comments refer to
// transformers 5 modeling code (modeling_llama.py, modeling_gpt2.py, ...) and to peft's
// lora/layer.py. Each rule was checked against the H200 truth in shared/truth: the per-layer
// saved bytes it predicts match the measured ones within ~1% for llama, qwen2 and gpt2, in
// bf16, fp32, fp32 + bf16 autocast, LoRA and eager attention.

#include "activations.hpp"
#include "checked.hpp"
#include "levers.hpp"

#include <algorithm>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/architectures.hpp"

namespace vramfit::engine::detail {

namespace {

using spec::Linear;
using spec::ModelSpec;
using spec::Workload;

constexpr std::uint64_t kFp32 = 4;
constexpr std::uint64_t kHalf = 2;

bool frozen_base(const Workload& w) { return spec::uses_lora(w.mode); }

bool is_role(const Linear& l, spec::Role r) { return l.role == r; }

// How many of a layer's linears play role `r`.
std::ptrdiff_t count_role(const spec::LayerGroup& g, spec::Role r) {
  return std::count_if(g.linears.begin(), g.linears.end(), [r](const Linear& l) { return is_role(l, r); });
}

// Bytes per token that a norm keeps for its own backward, for an input of `width` elements.
// llama RMSNorm: `x.to(float32)` (a copy unless already fp32) saved by pow; the normalised
// tensor, cast back, saved by `weight * x` only when the weight trains (autograd saves an
// operand only for the other operand's gradient). gemma RMSNorm: `x.float()`, and the fp32
// normalised tensor saved by `* (1 + weight)`. LayerNorm (native kernel): input + mean/rstd.
std::uint64_t norm_internal(const ModelSpec& m, std::uint64_t width, std::uint64_t in_bytes,
                            bool weight_trains) {
  if (m.norm == spec::Norm::layer) return add(mul(width, in_bytes), 2 * kFp32);
  if (m.norm_fp32_scale) return add(mul(width, kFp32), weight_trains ? mul(width, kFp32) : 0);
  return add(mul(width, kFp32), weight_trains ? mul(width, in_bytes) : 0);
}

// Bytes per token that the consumers of one activation (`width` elements of `bytes` each)
// keep: trained linears save their input (one shared tensor, or under autocast a 16-bit
// copy each when the activation is fp32); frozen linears save nothing (mm saves its input
// only for the weight's gradient); a LoRA adapter saves peft's fp32 cast of the input
// (`_cast_input_dtype` to the fp32 adapter), or with dropout the fp32 dropout output and
// its 1-byte mask.
template <typename Pred>
std::uint64_t consumers_saved(const spec::LayerGroup& g, const Workload& w, const Precision& p,
                              std::uint64_t width, std::uint64_t bytes, Pred is_consumer) {
  std::uint64_t total = 0;
  bool shared_saved = false;
  for (const auto& l : g.linears) {
    if (!is_consumer(l)) continue;
    if (!frozen_base(w)) {
      if (p.autocast && bytes != p.compute) {
        total = add(total, mul(width, p.compute));
      } else if (!shared_saved) {
        total = add(total, mul(width, bytes));
        shared_saved = true;
      }
    } else if (lora_targets(w, l)) {
      if (w.lora.dropout > 0) {
        total = add(total, mul(width, p.adapter + 1));
      } else if (p.autocast) {
        // Under autocast lora_A's matmul runs on its own 16-bit cast of the input (not a leaf:
        // never cached), which mm saves: one per adapter. Measured (tests/accuracy/levers, LoRA
        // on fp32 weights): counting peft's fp32 input instead was 3-6% high.
        total = add(total, mul(width, p.compute));
      } else if (bytes == p.adapter) {
        if (!shared_saved) total = add(total, mul(width, p.adapter));
        shared_saved = true;
      } else {
        total = add(total, mul(width, p.adapter));
      }
    }
  }
  return total;
}

// Norms of a layer beyond the two pre-norms, from its norm parameters (RMSNorm: h weights;
// LayerNorm: h weights + h biases; per-head q/k norms are narrower and do not count).
std::uint64_t extra_norms(const ModelSpec& m, const spec::LayerGroup& g) {
  const std::uint64_t per_norm = mul(m.hidden_size, m.norm == spec::Norm::layer ? 2 : 1);
  if (per_norm == 0) return 0;
  const std::uint64_t norms = g.norm_params / per_norm;
  return norms > 2 ? norms - 2 : 0;
}

// FalconAttention with multi_query (one k/v head, without new_decoder_architecture) hands SDPA
// one k/v head beside many query heads and a mask: the math backend runs and materialises the
// scores as eager attention does (measured, tests/accuracy/arch: a 4096-token prefill of a
// 32-head falcon took 5.05 GB of transient memory, about 10 bytes a score).
bool math_attention(const ModelSpec& m, const Workload& w) {
  if (w.attention == spec::Attention::eager) return true;
  const spec::Architecture* row = spec::find_architecture(m.model_type);
  if (row == nullptr) return false;
  // A row's multi_query_math_sdpa (falcon): one k/v head beside several query heads.
  if (row->multi_query_math_sdpa && m.num_kv_heads == 1 && m.num_heads > 1) return true;
  // A row's eager_only (gptj, bloom, mpt): transformers has no SDPA path for the type.
  return row->eager_only;
}

// Sliding-window layers need an explicit boolean mask once the sequence exceeds the window;
// packed rows need one always (levers.hpp, packed_sdpa_mask).
bool masked_sdpa(const ModelSpec& m, const Workload& w) {
  if (packed_sdpa_mask(w)) return true;
  return m.sliding_window > 0 && m.sliding_layers > 0 && w.seq > m.sliding_window;
}

// q, k and v come out of one projection (c_attn, query_key_value, qkv_proj): the layer's only
// linear reading the attention norm's output. MLA's two (q_a/q and kv_a) are not fused.
bool fused_qkv(const spec::LayerGroup& g) { return count_role(g, spec::Role::attn_in) == 1; }

// gate and up come out of one projection (Phi3MLP, GlmMLP: gate_up_proj): a gated MLP whose
// only linear reading the norm's output is that fused one.
bool fused_gate_up(const ModelSpec& m, const spec::LayerGroup& g) {
  return m.gated_mlp && count_role(g, spec::Role::mlp_in) == 1;
}

bool gpt2_style(const ModelSpec& m) { return m.learned_positions; }

// Unsloth's kernels (--lora-kernels unsloth; unsloth/kernels/fast_lora.py, rms_layernorm.py,
// rope_embedding.py). Its RMSNorm and RoPE kernels replace the model's in every layer;
// patch_peft_model (unsloth/models/llama.py) gives a block to a fused LoRA autograd function
// only when every projection of the block has an adapter and no bias and lora_dropout is 0
// (LoRA_QKV: q, k and v; LoRA_W: o; LoRA_MLP: gate, up and down); otherwise peft's forward runs.
bool unsloth(const Workload& w) { return spec::uses_lora(w.mode) && w.lora.unsloth_kernels; }

bool unsloth_patched(const spec::LayerGroup& g, const Workload& w, spec::Role r, std::ptrdiff_t count) {
  if (!unsloth(w) || w.lora.dropout > 0 || count_role(g, r) != count) return false;
  return std::all_of(g.linears.begin(), g.linears.end(),
                     [&](const Linear& l) { return l.role != r || (!l.bias && lora_targets(w, l)); });
}

std::uint64_t sum_params(const spec::LayerGroup& g) {
  std::uint64_t s = 0;
  for (const auto& l : g.linears) s = add(s, l.params());
  return s;
}

// The expert slots a token runs through: its top-k, or every expert where the row runs them
// densely (Llama4TextMoe: hidden_states.repeat(E) weighted by scores that are 0 off the top-k).
std::uint64_t expert_slots(const ModelSpec& m) {
  const spec::Architecture* row = spec::find_architecture(m.model_type);
  return row != nullptr && row->dense_experts ? m.moe.num_experts : m.moe.experts_per_token;
}

// The MLP (or MoE) width that runs per token.
std::uint64_t mlp_width(const ModelSpec& m, const spec::LayerGroup& g) {
  if (!g.moe) return g.intermediate != 0 ? g.intermediate : m.intermediate_size;
  return add(mul(expert_slots(m), m.moe.expert_intermediate), m.moe.shared_intermediate);
}

}  // namespace

bool lora_targets(const Workload& w, const Linear& l) {
  if (!spec::uses_lora(w.mode)) return false;
  // peft (>= 0.17) wraps MoE expert parameters too under all-linear (target_parameters):
  // measured on olmoe-1b-7b, 189M trainable parameters with r=16.
  if (w.lora.all_linear) return true;
  // The rule spec::validate checks the targets with: what it accepts, the engine adapts.
  return std::any_of(w.lora.targets.begin(), w.lora.targets.end(),
                     [&](const std::string& t) { return spec::lora_target_matches(t, l.name); });
}

Precision precision_of(const Workload& w) {
  Precision p;
  switch (w.weights) {
    case DType::fp32:
      p.param = kFp32;
      if (w.fsdp_param_dtype) {
        // FSDP's MixedPrecisionPolicy: fp32 shards stored, the model runs on 16-bit gathered
        // parameters (engine/levers): 16-bit activations and no autocast casts.
        p.compute = kHalf;
        p.residual = kHalf;
        p.adapter = kHalf;
        break;
      }
      p.autocast = w.autocast.has_value();
      p.compute = p.autocast ? kHalf : kFp32;
      p.residual = kFp32;
      break;
    case DType::fp16:
    case DType::bf16:
      p.param = kHalf;
      p.compute = kHalf;
      p.residual = kHalf;
      break;
    default:
      // 8/4-bit weights compute in 16 bits (bitsandbytes compute dtype).
      p.param = kHalf;
      p.compute = kHalf;
      p.residual = kHalf;
      p.quantized = true;
      break;
  }
  // --lora-dtype bf16/fp16: the adapters compute in 16 bits; peft's input cast is then a no-op.
  if (w.lora.half_adapters && spec::uses_lora(w.mode) && !w.fsdp_param_dtype) p.adapter = kHalf;
  return p;
}

namespace {

// One decoder layer's saved tensors as layer_saved adds them up, block by block: the layer's
// widths and dtypes, and the running tally.
struct LayerTally {
  const ModelSpec& m;
  const spec::LayerGroup& g;
  const Workload& w;
  const Precision& p;
  const std::uint64_t h = m.hidden_size;
  // A group's own attention widths where its layers differ from the model's (gemma4_text).
  const std::uint64_t hd = g.head_dim != 0 ? g.head_dim : m.head_dim;
  const std::uint64_t qw = mul(m.num_heads, hd);
  const std::uint64_t kvw = mul(g.kv_heads != 0 ? g.kv_heads : m.num_kv_heads, hd);
  const std::uint64_t c = p.compute;
  const std::uint64_t r = p.residual;
  const bool trains = !frozen_base(w);
  // The norm's output: fp32 when the residual stream is fp32 (its ops run in fp32, autocast
  // or not), else the 16-bit compute dtype.
  const std::uint64_t norm_out = r;
  LayerSaved s = {};

  void tok(std::uint64_t b) { s.per_token = add(s.per_token, b); }
  void pos(std::uint64_t b) { s.per_token_position = add(s.per_token_position, b); }
  void attention_block();
  void mlp_block();
  void unsloth_attention_block();
  void unsloth_mlp_block();
};

}  // namespace

// --- attention block -------------------------------------------------------------------
void LayerTally::attention_block() {
  if (unsloth(w)) return unsloth_attention_block();
  tok(norm_internal(m, h, r, trains));
  tok(consumers_saved(g, w, p, h, norm_out, [](const Linear& l) { return is_role(l, spec::Role::attn_in); }));

  const bool eager = math_attention(m, w);
  const bool rotary = !gpt2_style(m);
  const bool fused = fused_qkv(g);
  // Whether transpose(1, 2).contiguous() before o_proj copies SDPA's output: the fused kernels
  // (flash, memory-efficient, cuDNN) allocate it (batch, seq, heads, dim) and return a
  // transposed view, so the call is a no-op unless the kernel's output came back
  // heads-major (the math backend, fused-QKV rotary rows, rotary_cat rows; see below).
  bool sdpa_out_copied = true;
  if (m.qk_norm) {
    // q_norm / k_norm over each head: the fp32 copy (pow) and, when training, the 16-bit
    // normalised tensor (weight * x).
    tok(mul(add(qw, kvw), kFp32 + (trains ? c : 0)));
  }
  if (!eager) {
    // SDPA (flash / memory-efficient kernels) saves q, k, v, its output and the fp32
    // logsumexp. Rotary embeddings make new q and k; under autocast they come out fp32
    // (cos/sin follow the fp32 hidden states) and SDPA saves 16-bit casts of them.
    if (c == kFp32 && m.num_kv_heads < m.num_heads) {
      // fp32 with grouped-query heads: no fused kernel takes enable_gqa in fp32, so the math
      // backend runs: repeated k and v and the fp32 attention probabilities are saved.
      tok(mul(qw, 3, kFp32));
      pos(mul(m.num_heads, kFp32));
      sdpa_out_copied = true;
      if (m.attention_dropout > 0) pos(mul(m.num_heads, 1 + kFp32));
    } else if (masked_sdpa(m, w) && m.num_kv_heads < m.num_heads) {
      // An explicit mask (sliding windows) rules out enable_gqa (transformers'
      // use_gqa_in_sdpa): repeat_kv copies k and v to every head; the efficient kernel runs.
      tok(mul(qw, 3, c));
      sdpa_out_copied = false;
    } else {
      const std::uint64_t qk_bytes = c;
      if (fused) {
        // v is a view of the fused projection: the whole buffer stays alive. With rotary
        // q and k beside that strided v, the output comes back in (batch, heads, seq, dim)
        // layout, so `.contiguous()` copies it for o_proj, which saves the copy when it
        // trains: measured on phi-3-mini and pythia-410m (H200, bf16: one more hidden-sized
        // tensor per layer in full training, none under LoRA).
        tok(mul(add(qw, mul(2, kvw)), c));
        if (rotary) tok(add(mul(add(qw, kvw), qk_bytes), trains ? mul(qw, c) : 0));
        sdpa_out_copied = rotary;
      } else {
        tok(add(mul(add(qw, kvw), qk_bytes), mul(kvw, c)));
        // A row's rotary_cat: q is (batch, heads, seq, dim)-contiguous after torch.cat, and so is
        // SDPA's output: transpose(1, 2).contiguous() copies it, and a trained o_proj saves the copy.
        const spec::Architecture* row = spec::find_architecture(m.model_type);
        sdpa_out_copied = rotary && row != nullptr && row->rotary_cat;
        if (trains && sdpa_out_copied) tok(mul(qw, c));
      }
    }
    tok(add(mul(qw, c), mul(m.num_heads, kFp32)));  // output + logsumexp
    pos(packed_mask_bias(w, p));                     // packed rows: the additive mask SDPA saves
  } else if (gpt2_style(m)) {
    // GPT-2 eager: q, k, v stay views of c_attn's output; the scores go through softmax
    // (fp32 under autocast), a cast back, dropout (mask + output); matmul saves the last.
    tok(mul(add(qw, mul(2, kvw)), c));
    const std::uint64_t soft = p.autocast ? kFp32 : c;
    std::uint64_t per = soft;
    if (m.attention_dropout > 0)
      per = add(per, 1 + c);
    else if (p.autocast)
      per = add(per, c);
    pos(mul(m.num_heads, per));
    if (trains) tok(mul(qw, c));  // merged heads, saved by c_proj
  } else {
    // llama-style eager: repeat_kv copies k and v to every head when heads are grouped
    // (otherwise they stay the rotary k and the projection's v, a view of a fused buffer);
    // softmax(dtype=float32) is saved (4 bytes), and its cast to the query's dtype (or
    // autocast's 16-bit cast for matmul) is saved by the second matmul (2 more bytes) unless
    // that cast is a no-op (fp32 compute).
    const bool grouped = m.num_kv_heads < m.num_heads;
    // A row's fp32_qk (gptj): the scores' matmul saves fp32 copies of q and k (the 16-bit
    // ones are not kept), and v.
    const spec::Architecture* row = spec::find_architecture(m.model_type);
    if (row != nullptr && row->fp32_qk && c != kFp32 && !grouped && !fused) {
      tok(add(mul(add(qw, kvw), kFp32), mul(kvw, c)));
    } else {
      tok(mul(qw, c));  // q after rotary
      if (grouped)
        tok(mul(qw, 2, c));
      else
        tok(add(mul(kvw, c), fused ? mul(add(qw, mul(2, kvw)), c) : mul(kvw, c)));
    }
    std::uint64_t per = kFp32;
    if (c != kFp32) per = add(per, kHalf);
    if (m.attention_dropout > 0) per = add(per, 1 + c);
    // A row's sink_logits (granite_swa's eager_attention_forward): torch.logsumexp over the
    // masked scores, for the sink's sigmoid scale, saves them for its backward (measured: training
    // was 5.34% under without them).
    if (row != nullptr && row->sink_logits) per = add(per, c);
    pos(mul(m.num_heads, per));
    if (trains) tok(mul(qw, c));  // transpose(1, 2).contiguous() saved by o_proj
  }
  // The attention output feeds o_proj: with SDPA, a trained o_proj saves the output SDPA
  // already keeps; a frozen one saves nothing, its adapter an fp32 copy. A 16-bit adapter
  // (--lora-dtype bf16, or FSDP's 16-bit param_dtype) takes its input uncast (peft
  // _cast_input_dtype is a no-op), no dropout, no autocast: lora_A saves that same tensor,
  // SDPA's output, unless .contiguous() copied it. Measured (tests/accuracy/levers, H200,
  // --lora-dtype bf16): counting a copy was +1.6% to +3.2% on llama-3.2-1b and smollm2-360m.
  // A row's attention output gate (afmoe: `output * sigmoid(gate_proj(x))`; laguna: a per-head softplus of
  // g_proj's fp32 copy): in training the activation saves its output (and softplus its fp32 input), and
  // o_proj reads the gated product, a new tensor it saves.
  if (const spec::Architecture* gated = spec::find_architecture(m.model_type);
      trains && gated != nullptr && !gated->attn_gate.empty()) {
    for (const auto& l : g.linears)
      if (l.name == gated->attn_gate) tok(mul(l.out_features, l.out_features < qw ? c + kFp32 : c));
    tok(mul(qw, c));
  }
  const bool adapter_shares_sdpa_out =
      !eager && !sdpa_out_copied && p.adapter == c && w.lora.dropout == 0 && !p.autocast;
  if (!trains && !adapter_shares_sdpa_out)
    tok(consumers_saved(g, w, p, qw, c, [](const Linear& l) { return is_role(l, spec::Role::attn_out); }));
  if (m.hidden_dropout > 0) tok(h);  // residual dropout mask (1 byte)
}

// --- Unsloth's layer (--lora-kernels unsloth) ---------------------------------------------
// LlamaDecoderLayer_fast_forward / LlamaAttention_fast_forward (unsloth/models/llama.py) with
// the autograd functions of unsloth/kernels, each saving only what its backward reads.
void LayerTally::unsloth_attention_block() {
  // Fast_RMS_Layernorm saves its 16-bit input X (the layer's input), the weight and r, one
  // fp32 inverse RMS per row; it computes in fp32 inside the Triton kernel (no fp32 copy).
  tok(add(mul(h, r), kFp32));
  // LoRA_QKV saves X (the norm's output, in the compute dtype) and the adapters; Q, K and V
  // are not saved. The adapters run as X @ A.to(dtype): no fp32 copy of X.
  if (unsloth_patched(g, w, spec::Role::attn_in, 3))
    tok(mul(h, c));
  else
    tok(consumers_saved(g, w, p, h, norm_out, [](const Linear& l) { return is_role(l, spec::Role::attn_in); }));
  if (m.qk_norm) tok(mul(add(qw, kvw), kFp32));  // per-head norms as the model runs them, frozen
  // Fast_RoPE_Embedding_QK clones the strided q and k views and rotates the clones in place,
  // saving cos and sin only; flash-attn / SDPA saves the rotated q and k, v (a view of the
  // projection's output), its output and the fp32 logsumexp.
  tok(add(mul(add(qw, kvw), c), mul(kvw, c)));
  tok(add(mul(qw, c), mul(m.num_heads, kFp32)));
  pos(packed_mask_bias(w, p));
  // LoRA_W saves o_proj's input, attention's output reshaped (a view of what attention saved).
  if (!unsloth_patched(g, w, spec::Role::attn_out, 1))
    tok(consumers_saved(g, w, p, qw, c, [](const Linear& l) { return is_role(l, spec::Role::attn_out); }));
  if (m.hidden_dropout > 0) tok(h);
}

void LayerTally::unsloth_mlp_block() {
  // The norm: the residual after attention (a new tensor of the residual add) and r.
  if (!m.parallel_residual) tok(add(mul(h, r), kFp32));
  if (unsloth_patched(g, w, spec::Role::mlp_in, 2) && unsloth_patched(g, w, spec::Role::mlp_out, 1)) {
    // LoRA_MLP saves X (the norm's output), e = X @ gate and g = X @ up; act(e) * g, down's
    // input, is made in forward and freed, then recomputed from e and g in backward
    // (swiglu_DWf_DW_dfg_kernel writes it and both derivatives into DW, e and g in place).
    tok(add(mul(h, c), mul(2, m.intermediate_size, c)));
  } else {
    // peft's forward for the MLP: the model's act(gate) * up, peft's adapters as in mlp_block.
    tok(consumers_saved(g, w, p, h, norm_out, [](const Linear& l) { return is_role(l, spec::Role::mlp_in); }));
    const bool down_adapted = std::any_of(g.linears.begin(), g.linears.end(), [&](const Linear& l) {
      return is_role(l, spec::Role::mlp_out) && lora_targets(w, l);
    });
    tok(mul(3, m.intermediate_size, c));
    if (down_adapted) tok(mul(m.intermediate_size, p.adapter + (w.lora.dropout > 0 ? 1 : 0)));
  }
  if (m.hidden_dropout > 0) tok(h);
  tok(mul(extra_norms(m, g), add(mul(h, c), kFp32)));  // sandwich norms: Unsloth's kernel, X and r
}

// --- MLP block ---------------------------------------------------------------------------
void LayerTally::mlp_block() {
  if (unsloth(w) && !g.moe && m.gated_mlp) return unsloth_mlp_block();
  if (!m.parallel_residual) tok(norm_internal(m, h, r, trains));
  tok(consumers_saved(g, w, p, h, norm_out, [](const Linear& l) { return is_role(l, spec::Role::mlp_in); }));
  if (g.moe) {
    // Router: the fp32 softmax over experts; each token's top-k slots gather their hidden
    // state, run a gated expert MLP and are weighted by the routing score.
    const std::uint64_t k = expert_slots(m);
    const std::uint64_t ie = m.moe.expert_intermediate;
    tok(mul(m.moe.num_experts, kFp32));
    const bool experts_adapted = std::any_of(g.linears.begin(), g.linears.end(),
                                             [&](const Linear& l) { return l.expert && lora_targets(w, l); });
    // Dense experts (llama4) with frozen weights: routed_in * scores saves the repeated hidden
    // state (the scores take a gradient), bmm saves no input: h a slot, not 2h (measured,
    // tests/accuracy/arch: llama4 LoRA was 2.7-3.9% over with 2h).
    const spec::Architecture* row = spec::find_architecture(m.model_type);
    const bool dense_frozen = row != nullptr && row->dense_experts && !trains && !experts_adapted;
    tok(mul(k, add(mul(dense_frozen ? 1 : 2, h, c), mul(trains || experts_adapted ? 4 : 3, ie, c))));
    if (!trains && experts_adapted) {
      // LoRA on expert parameters: peft adds B @ A to each expert's weight, and the merged
      // weights are saved for backward (one copy of the layer's experts in the compute
      // dtype), with the product before down_proj. Measured on olmoe-1b-7b (H200, r=16,
      // all-linear): the estimate lands 2.5% above the measured peak.
      std::uint64_t expert_params = 0;
      for (const auto& l : g.linears)
        if (l.expert) expert_params = add(expert_params, l.params());
      s.fixed = add(s.fixed, mul(expert_params, c));
    }
    if (m.moe.shared_intermediate > 0) tok(mul(trains ? 4 : 3, m.moe.shared_intermediate, c));
  } else {
    const std::uint64_t I = mlp_width(m, g);
    const bool down_saves = trains || std::any_of(g.linears.begin(), g.linears.end(), [&](const Linear& l) {
                              return is_role(l, spec::Role::mlp_out) && lora_targets(w, l);
                            });
    const std::uint64_t down_in_bytes = [&] {
      if (frozen_base(w)) {
        if (p.autocast && w.lora.dropout == 0) return p.compute;  // autocast's cast, as above
        return p.adapter + (w.lora.dropout > 0 ? 1 : 0);
      }
      return c;
    }();
    if (m.gated_mlp) {
      // silu(gate) saves gate; act * up saves both; down_proj saves the product.
      tok(mul(3, I, c));
      if (down_saves) tok(mul(I, down_in_bytes));
    } else if (m.activation == spec::Activation::gelu_tanh_python) {
      // GPT-2's gelu_new in Python: pow saves x, tanh its output, the last mul both factors.
      // Under autocast pow runs in fp32, so x, tanh and 1+tanh are fp32 copies.
      if (p.autocast) {
        tok(mul(I, 3 * kFp32 + kHalf));
        if (down_saves) tok(mul(I, frozen_base(w) ? down_in_bytes : kHalf));
      } else {
        tok(mul(4, I, c));
        if (down_saves) tok(mul(I, down_in_bytes));
      }
    } else if (m.activation == spec::Activation::xielu) {
      // XIELUActivation._xielu_python (transformers 5.17 without the xielu CUDA package):
      // `alpha_p * x * x` saves x and alpha_p * x, expm1 its result, `(expm1 - x) * alpha_n` its
      // left side when alpha_n trains, torch.where its boolean mask; down saves the output.
      tok(add(mul(trains ? 4 : 3, I, c), I));
      if (down_saves) tok(mul(I, down_in_bytes));
    } else {
      // A native activation (gelu, relu; relu2: relu saves its output, which square saves): saves
      // its input; down saves the output. Plain relu saves its result (derivatives.yaml: relu's
      // backward is threshold_backward(grad, result, 0)), the very tensor down saves when down
      // takes it as it is (same dtype): one tensor, not two.
      tok(mul(I, c));
      if (down_saves && !(m.activation == spec::Activation::relu && down_in_bytes == c)) tok(mul(I, down_in_bytes));
    }
  }
  if (m.hidden_dropout > 0) tok(h);
  // Sandwich norms (gemma2/3: post-attention and post-feedforward) normalise the block
  // outputs, which are in the compute dtype, before the residual add.
  tok(mul(extra_norms(m, g), norm_internal(m, h, c, trains)));
}

LayerSaved layer_saved(const ModelSpec& m, const spec::LayerGroup& g, const Workload& w, const Precision& p) {
  LayerTally t{m, g, w, p};
  t.attention_block();
  t.mlp_block();
  // Autocast keeps a 16-bit copy of every weight of the layer until backward has used it
  // (torch.autocast caches casts of leaf tensors; mm saves the cast weight).
  if (p.autocast) t.s.fixed = add(t.s.fixed, mul(sum_params(g), kHalf));
  return t.s;
}

LayerSaved head_saved(const ModelSpec& m, const Workload& w, const Precision& p) {
  LayerSaved s;
  const bool trains = !frozen_base(w);
  const std::uint64_t h = m.hidden_size;
  s.per_token = norm_internal(m, h, p.residual, trains);
  // Unsloth's final norm is its Fast_RMS_Layernorm: the last layer's output (16-bit) and r.
  if (unsloth(w)) s.per_token = add(mul(h, p.residual), kFp32);
  if (trains) s.per_token = add(s.per_token, mul(h, p.autocast ? p.compute : p.residual));  // lm_head's input
  if (m.embedding_dropout > 0) s.per_token = add(s.per_token, h);                           // dropout mask
  // The (batch, 1, seq, seq) boolean sliding-window mask, shared by the layers, saved by SDPA.
  if (masked_sdpa(m, w) && w.attention == spec::Attention::sdpa) s.per_token_position = 1;
  if (p.autocast) s.fixed = mul(m.vocab_size, h, kHalf);
  return s;
}

InferencePeak inference_layer_peak(const ModelSpec& m, const spec::LayerGroup& g, const Workload& w,
                                   const Precision& p) {
  InferencePeak s;
  const std::uint64_t h = m.hidden_size;
  const std::uint64_t c = p.compute;
  // MLP: act(gate) and up alive while their product is made, plus the layer's input, the
  // norm output and two more hidden-sized buffers (measured: qwen2.5/llama prefill on H200,
  // 3*I + 4*h per token within 2%).
  s.mlp_per_token = add(mul(3, mlp_width(m, g), c), mul(4, h, c));
  // A fused gate_up_proj (Phi3MLP, GlmMLP): `gate, up = gate_up.chunk(2)` keeps the whole
  // 2I output alive while act(gate) and the product are made: 4I, not 3I (measured, tests/
  // accuracy/arch: phi3 and glm generates were 3.0% and 2.6% under with 3I).
  if (!g.moe && fused_gate_up(m, g)) s.mlp_per_token = add(mul(4, m.intermediate_size, c), mul(4, h, c));
  // A tanh GELU written in Python (NewGELUActivation, `gelu_new`: 0.5 * x * (1 + tanh(sqrt(2/pi)
  // * (x + 0.044715 * x^3)))) keeps fc's output, 0.5 * x and two temporaries of the chain
  // alive at once: 4I, not 3I (measured, tests/accuracy/arch: phi generate -3.57% -> 0.04%).
  if (!g.moe && !m.gated_mlp && m.activation == spec::Activation::gelu_tanh_python)
    s.mlp_per_token = add(mul(4, m.intermediate_size, c), mul(4, h, c));
  // XIELUActivation._xielu_python evaluates torch.where's arguments in turn: the mask (1 byte)
  // and the positive branch (I) stay alive while the negative one is built from two more
  // temporaries and their sum, beside the input: 5I + mask, not 3I.
  if (!g.moe && !m.gated_mlp && m.activation == spec::Activation::xielu)
    s.mlp_per_token = add(mul(5, m.intermediate_size, c), m.intermediate_size, mul(4, h, c));
  const spec::Architecture* row = spec::find_architecture(m.model_type);
  if (g.moe && row != nullptr && row->grouped_experts) {
    // integrations/moe.py, grouped_mm_experts_forward, per top-k slot: the gathered hidden
    // state and its copy sorted by expert (2h), the gate_up output (2I), act(gate) and the
    // product (2I) while the product is made; then act(gate) freed, the down output (h): the
    // larger of 2h + 4I and 3h + 3I. Per token beside them: the layer input, the norm output
    // and the zeroed output (3h), and a shared expert's output waiting for the routed ones (h);
    // the shared expert itself runs first as a dense MLP. Measured (tests/accuracy/arch,
    // generate of 4096 tokens): olmoe/qwen3_moe/granitemoe were 6-8% under with 3kI + 4h.
    const std::uint64_t k = m.moe.experts_per_token;
    const std::uint64_t ie = m.moe.expert_intermediate;
    const std::uint64_t si = m.moe.shared_intermediate;
    // Then `weighted_out = proj_out * sample_weights_g` and its reordered copy beside the gathered
    // input and the down output: 2h + 2w, w = h, or 2h where the row's router hands fp32 weights
    // to a 16-bit model (the product is promoted; glm4_moe generates were 3.6-7.3% under without).
    const std::uint64_t wo = row->fp32_routing_weights && c != kFp32 ? mul(2, h) : h;
    const std::uint64_t slot =
        std::max({add(mul(2, h), mul(4, ie)), add(mul(3, h), mul(3, ie)), add(mul(2, h), mul(2, wo))});
    const std::uint64_t routed = add(mul(k, slot), mul(si > 0 ? 4 : 3, h));
    const std::uint64_t shared = si > 0 ? add(mul(3, si), mul(4, h)) : 0;
    s.mlp_per_token = mul(std::max(routed, shared), c);
  }
  if (g.moe && row != nullptr && row->dense_experts) {
    // Llama4TextMoe / Llama4TextExperts, every expert on every token; per expert slot: the
    // repeated, score-weighted hidden state (h), gate_up's output (2I: gate and up are views
    // of it), act(gate) and the product while the product is made (2I), then the down output
    // (h) beside the product: the larger of h + 4I and 2h + 3I. Beside them the layer input,
    // the norm output and two hidden-sized buffers (4h, as the dense rule). The shared expert
    // runs after, beside the routed output (E x h). Measured (tests/accuracy/arch, generate of
    // 4096 tokens): 6.4% and 12.1% under with the top-k rule at k = E.
    const std::uint64_t E = m.moe.num_experts;
    const std::uint64_t ie = m.moe.expert_intermediate;
    const std::uint64_t slot = std::max(add(h, mul(4, ie)), add(mul(2, h), mul(3, ie)));
    const std::uint64_t routed = add(mul(E, slot), mul(4, h));
    const std::uint64_t shared = add(add(mul(E, h), mul(3, m.moe.shared_intermediate)), mul(4, h));
    s.mlp_per_token = mul(std::max(routed, shared), c);
  }
  if (math_attention(m, w) && row != nullptr && row->attention_sinks && !gpt2_style(m)) {
    // gpt_oss eager_attention_forward: scores (scaled, masked), their concatenation with the
    // sinks, the max-shifted logits and softmax in the compute dtype: three score-sized
    // buffers at the peak, plus the 4-D additive mask. Measured: 5 (llama's fp32 softmax
    // rule) was 30.5% over on a 4096-token prefill.
    const std::uint64_t qw = mul(m.num_heads, g.head_dim != 0 ? g.head_dim : m.head_dim);
    const std::uint64_t kvw = mul(g.kv_heads != 0 ? g.kv_heads : m.num_kv_heads, g.head_dim != 0 ? g.head_dim : m.head_dim);
    s.attn_per_token_position = add(mul(m.num_heads, 3, c), c);
    s.attn_per_token = mul(add(mul(6, h), mul(2, kvw), qw > h ? qw - h : 0), c);
  } else if (math_attention(m, w)) {
    const std::uint64_t qw = mul(m.num_heads, g.head_dim != 0 ? g.head_dim : m.head_dim);
    const std::uint64_t kvw = mul(g.kv_heads != 0 ? g.kv_heads : m.num_kv_heads, g.head_dim != 0 ? g.head_dim : m.head_dim);
    if (gpt2_style(m)) {
      // matmul, scale and mask each make a score matrix; softmax in the compute dtype.
      s.attn_per_token_position = mul(m.num_heads, 3, c);
      s.attn_per_token = mul(4, h, c);
    } else {
      // scores, scaled, masked; softmax(dtype=float32) converts first (4 bytes) and writes
      // 4 bytes; then the cast back: 5 score-sized buffers in 16-bit units at the peak, plus
      // the 4-D additive mask (one value per token and key position).
      s.attn_per_token_position = add(mul(m.num_heads, c == kFp32 ? 12 : 10), c);
      if (row != nullptr && row->eager_scores != 0 && c != kFp32)
        s.attn_per_token_position = add(mul(m.num_heads, row->eager_scores, kHalf), c);
      s.attn_per_token = mul(add(mul(6, h), mul(2, kvw), qw > h ? qw - h : 0), c);
      if (row != nullptr && row->fp32_qk && c != kFp32) s.attn_per_token = add(s.attn_per_token, mul(qw, 2, kFp32));
    }
  }
  return s;
}

std::uint64_t pre_norm_saved(const ModelSpec& m, const Workload& w, const Precision& p) {
  return norm_internal(m, m.hidden_size, p.residual, !frozen_base(w));
}

ForwardTransient forward_transient(const ModelSpec& m, const Workload& w, const Precision& p) {
  // The forward's peak, where no logits are built (--loss fused-linear, cce, unsloth), is inside
  // the last decoder layer or the final norm: beside every tensor autograd saved so far, tensors
  // that Python references keep alive for a while. Measured (tests/accuracy/levers/results/
  // loss.jsonl, peak minus what forward leaves): 8 h bytes a token in full training (bf16) and
  // 12 h + 2 I in LoRA, at 0.99-1.01 of the sums below.
  ForwardTransient t;
  const std::uint64_t h = m.hidden_size;
  const std::uint64_t r = p.residual;
  const std::uint64_t c = p.compute;
  const bool trains = !frozen_base(w);
  // LlamaModel.forward's `inputs_embeds` stays referenced until the model returns (the layers'
  // residual adds save nothing, so nothing else would keep it).
  const std::uint64_t embeds = mul(h, r);
  // The final norm (LlamaRMSNorm.forward): its input (the last layer's output, which the model's
  // local still holds), `hidden_states.to(torch.float32)` (saved by pow: head_saved; the input
  // itself when the stream is fp32), the normalised fp32 product `hidden_states * rsqrt(...)`,
  // and `.to(input_dtype)`, saved by `self.weight * ...` only when the weight trains. Gemma's
  // norm makes its fp32 product `* (1 + weight)` before type_as; LayerNorm's kernel saves its
  // input and makes its output only.
  std::uint64_t norm = embeds;
  if (unsloth(w)) {
    // Unsloth's Fast_RMS_Layernorm saves its 16-bit input (head_saved): no fp32 copy.
  } else if (m.norm == spec::Norm::layer) {
  } else {
    if (r != kFp32) norm = add(norm, mul(h, r));  // the input (when fp32, the saved x32 itself)
    norm = add(norm, mul(h, kFp32));              // the normalised fp32 product
    if (!m.norm_fp32_scale && r != kFp32 && !trains) norm = add(norm, mul(h, r));  // the unsaved cast
  }
  t.final_norm = norm;
  // Its backward, right after the loss's (autograd through LlamaRMSNorm): mul's gradient of the
  // fp32 copy (grad * rsqrt) waits for pow's while mean's backward expands its gradient and pow's
  // makes `x.pow(1)`, `2 * ...` and the product: four fp32 hidden-sized tensors at once. (Gemma's
  // norm runs the same chain; LayerNorm's and Unsloth's kernels write one gradient.)
  if (!unsloth(w) && m.norm != spec::Norm::layer) t.norm_backward = mul(4, h, kFp32);
  // The last layer's MLP output linear (LlamaMLP.forward: `self.down_proj(self.act_fn(
  // self.gate_proj(x)) * self.up_proj(x))`). Alive while it runs: inputs_embeds, the layer's
  // input (the model's loop variable), the residual after attention, the MLP's input x (the
  // post-attention norm's output), the product (down's argument; saved only by a trained
  // down_proj, and by nothing under checkpointing, whose layer saves only its input), under
  // checkpointing and LoRA the adapter's cast of it (peft's local `x`), and down's output: with an
  // adapter (peft Linear.forward) the base result, then `lora_B(lora_A(x)) * scaling` and
  // `result + ...` in the adapter's dtype (lora_B's output is freed once scaled: a product by a
  // number saves neither factor), 16-bit under autocast.
  if (m.layers.empty()) return t;
  const spec::LayerGroup& g = m.layers.back();
  if (g.moe || m.parallel_residual || unsloth_patched(g, w, spec::Role::mlp_out, 1)) return t;
  const std::uint64_t I = mlp_width(m, g);
  bool down_adapted = false;
  bool has_down = false;
  for (const auto& l : g.linears)
    if (l.role == spec::Role::mlp_out) {
      has_down = true;
      down_adapted = down_adapted || lora_targets(w, l);
    }
  if (!has_down) return t;
  std::uint64_t mlp = mul(4, h, r);
  if (w.checkpointing || !trains) mlp = add(mlp, mul(I, c));  // the product, unless saved
  const std::uint64_t adapter = p.autocast ? c : p.adapter;
  if (w.checkpointing && down_adapted && w.lora.dropout == 0) mlp = add(mlp, mul(I, adapter));
  mlp = add(mlp, mul(h, c));                                                  // base result
  if (down_adapted) mlp = add(mlp, mul(2, h, adapter));                       // scaled, sum
  t.mlp_out = mlp;
  t.has_mlp_moment = true;
  return t;
}

std::uint64_t backward_layer_transient(const ModelSpec& m, const spec::LayerGroup& g, const Workload& w,
                                       const Precision& p) {
  // LoRA_MLP's backward (unsloth/kernels/fast_lora.py): DW = dY @ down (one intermediate-sized
  // tensor); the SwiGLU's derivatives are written into e and g in place and dX into X
  // (matmul(..., out=X)); beside them the incoming gradient and the residual's sum of two.
  if (unsloth_patched(g, w, spec::Role::mlp_in, 2) && unsloth_patched(g, w, spec::Role::mlp_out, 1) && !g.moe)
    return mul(add(m.intermediate_size, mul(2, m.hidden_size)), p.compute);
  // Gradients of the MLP intermediates (act, up, gate) and of the hidden state.
  return mul(add(mul(3, mlp_width(m, g)), mul(2, m.hidden_size)), p.compute);
}

}  // namespace vramfit::engine::detail
