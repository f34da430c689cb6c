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
//  - --loss cce: Apple's Cut Cross-Entropy (ml-cross-entropy, cut_cross_entropy/cce.py): no
//    logits in global memory; forward keeps a per-token logsumexp, backward recomputes the
//    logits tile by tile and writes the lm_head's gradients (kLossRows has each kind's bytes).
//  - --packing: transformers' masking_utils (find_packed_sequence_indices, sdpa_mask) and
//    PyTorch's SDPA (attention.cpp, convert_boolean_attn_mask): see packed_sdpa_mask.
//  - --fsdp-mixed-precision: torch.distributed.fsdp MixedPrecisionPolicy (FSDP2
//    _fsdp_param.py / _fsdp_collectives.py): each unit's parameters are all-gathered in
//    param_dtype, its unsharded gradients reduce-scattered in reduce_dtype (fp32).

#include "levers.hpp"

#include <algorithm>
#include <array>

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

std::uint64_t unsloth_chunk_rows(std::uint64_t tokens, std::uint64_t v) {
  // get_chunk_size: exact = tokens * v * 4 / target (fp32 logits over the 4 GiB target); one
  // chunk when exact <= 1, else ceil(exact / 4) * 4 chunks; torch.chunk's rows per chunk.
  if (tokens == 0) return 0;
  constexpr std::uint64_t kTarget = 4ULL << 30;
  const std::uint64_t logits = mul(tokens, v, kFp32);
  std::uint64_t chunks = 1;
  if (logits > kTarget) {
    const std::uint64_t exact = (logits + kTarget - 1) / kTarget;  // ceil(exact)
    chunks = (exact + 3) / 4 * 4;
  }
  return (tokens + chunks - 1) / chunks;
}

namespace {

/// What one loss kind's bytes depend on.
struct LossInput {
  const spec::ModelSpec& m;
  const spec::Workload& w;
  const Precision& p;
  std::uint64_t tokens;
  Bytes lc;       ///< the logits in the compute dtype
  Bytes l4;       ///< their fp32 upcast / log-softmax
  Bytes softcap;  ///< Gemma-2 soft-capping: tanh's output, saved for backward
  bool upcast;    ///< `.float()` is a copy (the compute dtype is 16-bit)
};

std::uint64_t head_params(const spec::ModelSpec& m) { return m.lm_head_params ? m.lm_head_params : m.embedding_params; }

LossBytes hf_loss(const LossInput& in) {
  // Forward's end: the 16-bit logits, their fp32 copy and the saved log_softmax output.
  // Backward: nll_loss's and log_softmax's fp32 gradients beside the saved output.
  return {in.l4 + in.lc + in.softcap + (in.upcast ? in.l4 : Bytes{}), in.l4 * 3 + in.softcap};
}

Bytes ceil_chunk(Bytes b) { return Bytes{b.value() / kLossChunks + (b.value() % kLossChunks ? 1 : 0)}; }

void chunked_head_backward(LossBytes& out, const LossInput& in, Bytes lc_chunk) {
  // Full training: once every chunk's loss backward has run, the lm_head matmuls' backward
  // nodes run, the last chunk's first. Each makes its chunk's vocab x hidden weight gradient in
  // the matmul's dtype (mm_mat2_backward: a transposed view of the product), frees its chunk's
  // logits gradient, and autograd's InputBuffer (torch/csrc/autograd/input_buffer.cpp,
  // accumulate) adds the gradient to the earlier chunks': the first sum out of place (the buffer
  // holds a view whose base shares its storage: can_accumulate_inplace is false), the later
  // ones in place into that fresh sum. The moments: the first product beside every chunk's
  // gradient, the second beside 7 of 8, the first sum (three vocab x hidden tensors) beside 6
  // of 8 (measured, tests/accuracy/levers/results/chunked_probe.jsonl: 3 x V x h and 6 chunks
  // at the backward's peak on llama-3.2-1b, qwen2.5-0.5b and smollm2-360m, eager and compiled).
  if (in.w.mode != spec::Mode::train) return;  // a frozen lm_head: its input's gradient only
  const Bytes vh{mul(head_params(in.m), in.p.compute)};
  const Bytes chunk = std::min(lc_chunk, in.lc);
  struct Moment {
    Bytes logits, gradients, temporaries;
  };
  const std::array<Moment, 3> moments{{{in.lc, Bytes{}, vh},
                                       {in.lc - chunk, vh, vh},
                                       {Bytes::saturating_sub(in.lc, chunk * 2), vh, vh * 2}}};
  const auto total = [](const Moment& x) { return x.logits + x.gradients + x.temporaries; };
  const Moment* top = &moments[0];
  for (const auto& x : moments)
    if (total(x) > total(*top)) top = &x;
  out.head_logits = top->logits;
  out.head_gradients = top->gradients;
  out.head_temporaries = top->temporaries;
  out.head_grad_summed = kLossChunks > 1;
}

LossBytes chunked_loss(const LossInput& in) {
  // Forward: every chunk's saved fp32 log_softmax output (all of them: l4), the 16-bit logits
  // the recipe holds until the loss is computed, and the last chunk's fp32 upcast. Backward
  // runs every chunk's loss backward first (autograd's ready queue takes the node created last:
  // the losses' nodes come after the 8 lm_head matmuls'): at the first, nll_loss's and
  // log_softmax's fp32 gradients beside every saved output; each chunk then frees its saved
  // output and leaves its 16-bit gradient (measured: 2 fp32 chunks above backward's start).
  const Bytes l4_chunk = ceil_chunk(in.l4);
  const Bytes lc_chunk = ceil_chunk(in.lc);
  LossBytes out{in.l4 + in.lc + in.softcap + (in.upcast ? l4_chunk : Bytes{}), in.l4 + l4_chunk * 2 + in.softcap};
  chunked_head_backward(out, in, lc_chunk);
  return out;
}

LossBytes fused_linear_loss(const LossInput& in) {
  // liger_kernel/ops/fused_linear_cross_entropy.py (v0.8.2), fused_linear_cross_entropy_forward:
  // grad_input = zeros_like(_input); grad_weight = zeros_like(weight) when the lm_head trains
  // (accum_dtype None: the weight's dtype); loss_1d fp32 and `target != ignore_index` (bool) per
  // token. Per chunk of `rows` tokens: logits_chunk = _input_chunk @ weight.t() in the compute
  // dtype; liger_cross_entropy_kernel upcasts in registers and writes the gradient into
  // logits_chunk in place (nothing allocated); then
  //   grad_input[rows] = grad_logits_chunk @ weight        (a rows x hidden temporary), and
  //   grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()
  // : a vocab x hidden product in the compute dtype and its fp32 copy, both alive at `.float()`.
  // An fp32 grad_weight (fp32 weights) takes torch.addmm(..., out_dtype=float32, out=grad_weight)
  // instead on torch >= 2.8 (#1239): nothing but the input chunk's 16-bit cast under autocast.
  // Under autocast the fp32 weight is cast per matmul: weight.t() is a view, never cached.
  // The gradients are returned from forward and saved for backward (ctx.save_for_backward).
  const auto& m = in.m;
  const Precision& p = in.p;
  const std::uint64_t h = m.hidden_size;
  const std::uint64_t v = m.vocab_size;
  const std::uint64_t rows = fused_linear_chunk_rows(in.tokens, h, v);
  const bool trains_head = in.w.mode == spec::Mode::train;
  const Bytes grad_input{mul(in.tokens, h, p.residual)};
  const Bytes grad_weight = trains_head ? Bytes{mul(head_params(m), p.param)} : Bytes{};
  const Bytes per_token{mul(in.tokens, kFp32 + 1)};  // loss_1d and target_mask
  const Bytes chunk{mul(rows, v, p.compute)};
  const Bytes weight_cast = p.autocast ? Bytes{mul(v, h, p.compute)} : Bytes{};
  const Bytes input_cast = p.residual != p.compute ? Bytes{mul(rows, h, p.compute)} : Bytes{};
  // The three steps of a chunk, each beside the chunk's logits.
  const Bytes logits_step = weight_cast + input_cast;
  // `grad_logits_chunk @ weight`: autocast caches this cast of a trained weight (a leaf, not a
  // view): head_saved's autocast copy already counts it; a frozen one is cast per use.
  const Bytes grad_input_step = Bytes{mul(rows, h, p.compute)} + (trains_head ? Bytes{} : weight_cast);
  Bytes grad_weight_step;
  if (trains_head) {
    if (p.param == kFp32 && p.compute != kFp32) grad_weight_step = input_cast;    // addmm out_dtype
    else grad_weight_step = Bytes{mul(v, h, p.compute)} + (p.compute != kFp32 ? Bytes{mul(v, h, kFp32)} : Bytes{});
  }
  const Bytes step = std::max({logits_step, grad_input_step, grad_weight_step});
  return {grad_input + grad_weight + per_token + chunk + step, grad_input + grad_weight};
}

LossBytes cce_loss(const LossInput& in) {
  // Apple's ml-cross-entropy, cut_cross_entropy/cce.py (LinearCrossEntropyFunction) with
  // linear_cross_entropy's defaults (impl "cce", shift=True as its transformers patch calls it,
  // filter_eps "auto", accum_e_fp32 = accum_c_fp32 = False). The logits exist only as tiles in
  // the kernels' on-chip memory. Forward: valids (the token indices with a target: nonzero,
  // summed to int64), lse (fp32), the negated target logit (fp32), logit_avg (fp32 per vocabulary
  // entry, for the backward's vocabulary sort); it saves e (the lm_head's input, already counted
  // by head_saved), c (the lm_head weight), lse, targets, valids and logit_avg. Under autocast e
  // and c are cast to 16 bits and those casts saved (the bytes head_saved counts for the lm_head's
  // input and autocast's weight copy). Backward (cce_backward.py): argsort(logit_avg) as int32,
  // de = zeros_like(e), dc = zeros_like(c) when the lm_head trains, both in the 16-bit dtype
  // they were computed in, then `.to()` the original dtypes (an fp32 copy beside the 16-bit one
  // under autocast).
  const auto& m = in.m;
  const Precision& p = in.p;
  const std::uint64_t h = m.hidden_size;
  const std::uint64_t v = m.vocab_size;
  const bool trains_head = in.w.mode == spec::Mode::train;
  const Bytes saved{checked_add(mul(in.tokens, kFp32 + 8), mul(v, kFp32))};  // lse, valids, logit_avg
  const Bytes de{mul(in.tokens, h, p.compute)};
  const Bytes dc = trains_head ? Bytes{mul(head_params(m), p.compute)} : Bytes{};
  const Bytes de_final = p.residual != p.compute ? Bytes{mul(in.tokens, h, p.residual)} : Bytes{};
  const Bytes dc_final = trains_head && p.param != p.compute ? Bytes{mul(head_params(m), p.param)} : Bytes{};
  // dc is cast first, then de; each 16-bit tensor is freed when its name is rebound.
  const Bytes grads = std::max({de + dc, de + dc + dc_final, de + (dc_final.value() ? dc_final : dc) + de_final});
  LossBytes b;
  b.forward_end = saved + Bytes{mul(in.tokens, kFp32)};         // + the per-token nll
  b.backward_start = saved + Bytes{mul(v, kFp32)} + grads;      // + vocab_ordering (int32)
  return b;
}

LossBytes unsloth_loss(const LossInput& in) {
  // Unsloth's UnslothFusedLoss (unsloth_zoo 2026.8.13, fused_losses/cross_entropy_loss.py), which
  // unsloth 2026.8.19's CausalLM forward calls (models/llama.py, unsloth_fused_ce_loss; Apple's
  // Cut Cross-Entropy is off on torch >= 2.8: unsloth_zoo/__init__.py UNSLOTH_ENABLE_CCE=0).
  // Forward: the shifted labels (int64), grad_inputs = empty_like(hidden_states), grad_lm_head =
  // zeros_like(lm_head.weight) when it trains; then per chunk (torch.chunk of the tokens into
  // get_chunk_size's n_chunks: 1 when the fp32 logits fit target_gb = min(free / 2, 4 GiB), else
  // the next multiple of 4 that keeps a chunk's fp32 logits under it; 4 GiB is taken, a GPU with
  // 8 GiB free or more) a compiled torch.func.grad_and_value of `linear(x, W).float()` and
  // cross_entropy: the chunk's logits and their gradient in the compute dtype (Inductor fuses the
  // upcast, the softmax and its gradient), then the gradient's matmuls: the chunk's grad_input
  // (copied into grad_inputs) and grad_lm_head's chunk (rows x hidden, vocab x hidden), added in
  // place. grad_inputs and grad_lm_head are saved; backward returns `grad * scale_factor` of
  // each: a second copy of both.
  const auto& m = in.m;
  const Precision& p = in.p;
  const std::uint64_t h = m.hidden_size;
  const std::uint64_t v = m.vocab_size;
  const std::uint64_t rows = unsloth_chunk_rows(in.tokens, v);
  const bool trains_head = in.w.mode == spec::Mode::train;
  const Bytes grad_input{mul(in.tokens, h, p.residual)};
  const Bytes grad_weight = trains_head ? Bytes{mul(head_params(m), p.param)} : Bytes{};
  const Bytes labels{mul(in.tokens, 8)};
  const Bytes chunk{mul(rows, v, p.compute)};
  // Measured (tests/accuracy/levers/results/loss_unsloth.jsonl, H200, bf16): the forward peaks
  // 2.02 chunks of 16-bit logits above what it leaves: the logits, their gradient and the chunk's
  // grad_input; the lm_head's vocab x hidden chunk gradient comes once the logits are freed.
  const Bytes grad_chunk{mul(rows, h, p.compute)};
  const Bytes head_chunk = trains_head ? Bytes{mul(v, h, p.param)} : Bytes{};
  const Bytes step = chunk + grad_chunk + std::max(chunk, head_chunk);
  return {grad_input + grad_weight + labels + step, (grad_input + grad_weight) * 2 + labels};
}

/// One row per `--loss` kind (spec::Loss order): where it comes from and what it allocates.
struct LossRow {
  spec::Loss loss;
  bool full_logits;        ///< builds every token's logits with torch ops (torch.compile can fuse them)
  bool saves_head_input;   ///< the lm_head's input stays saved for backward
  LossBytes (*bytes)(const LossInput&);
};

constexpr std::array<LossRow, 5> kLossRows{{
    // transformers' ForCausalLMLoss (loss/loss_utils.py): `logits.float()`, cross_entropy.
    {spec::Loss::hf, true, true, hf_loss},
    // torchtune's CEWithChunkedOutputLoss (modules/loss/ce_chunked_output_loss.py).
    {spec::Loss::chunked, true, true, chunked_loss},
    // Liger's LigerFusedLinearCrossEntropyFunction: gradients computed in forward.
    {spec::Loss::fused_linear, false, false, fused_linear_loss},
    // Apple's Cut Cross-Entropy: saves e and c, recomputes the logits tile by tile in backward.
    {spec::Loss::cce, false, true, cce_loss},
    // Unsloth's UnslothFusedLoss: gradients computed in forward, chunk by chunk.
    {spec::Loss::unsloth, false, false, unsloth_loss},
}};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < kLossRows.size(); ++i)
    if (static_cast<std::size_t>(kLossRows[i].loss) != i) return false;
  return true;
}
static_assert(rows_in_order(), "kLossRows: one row per spec::Loss, in its order");

const LossRow& loss_row(spec::Loss l) { return kLossRows.at(static_cast<std::size_t>(l)); }

}  // namespace

LossBytes loss_bytes(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p, std::uint64_t tokens) {
  const Bytes lc{mul(tokens, m.vocab_size, p.compute)};
  const Bytes l4{mul(tokens, m.vocab_size, kFp32)};
  const Bytes softcap = m.final_logit_softcap > 0 ? lc : Bytes{};
  if (w.compile == spec::Compile::all && loss_row(w.loss).full_logits) {
    // A compiled cross-entropy (torchtune's compile_loss; the loss inside a compiled model):
    // Inductor fuses the upcast, log_softmax and nll into reductions, and the partitioner saves
    // the 16-bit logits it was given and a per-row logsumexp instead of the fp32 log-softmax;
    // backward recomputes exp(x - lse) and writes the gradient in the logits' dtype. Measured
    // (tests/accuracy/levers/results/compile.jsonl, checkpointed LoRA): forward's end holds
    // one 16-bit logits tensor, backward's start two.
    if (w.loss != spec::Loss::chunked) return {lc + softcap, lc * 2 + softcap};
    // Chunked: every chunk's 16-bit logits stay saved; each chunk's compiled backward (all of
    // them before the lm_head's, as in eager) writes the chunk's 16-bit gradient, then frees
    // what it saved: one chunk above backward's start (measured, results/chunked.jsonl, LoRA on
    // the 3 models), then the lm_head's backward as in eager.
    const Bytes lc_chunk = ceil_chunk(lc);
    LossBytes out{lc + softcap, lc + lc_chunk + softcap};
    chunked_head_backward(out, {m, w, p, tokens, lc, l4, softcap, p.compute != kFp32}, lc_chunk);
    return out;
  }
  return loss_row(w.loss).bytes({m, w, p, tokens, lc, l4, softcap, p.compute != kFp32});
}

std::uint64_t lm_head_input_not_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p) {
  if (loss_row(w.loss).saves_head_input || w.mode != spec::Mode::train) return 0;
  // head_saved's "lm_head's input" term (activations.cpp): the final norm's output.
  return mul(m.hidden_size, p.autocast ? p.compute : p.residual);
}

std::uint64_t frozen_head_input_saved(const spec::ModelSpec& m, const spec::Workload& w, const Precision& p) {
  // cce.py LinearCrossEntropyFunction.forward: ctx.save_for_backward(e, c, ...) whatever needs a
  // gradient; head_saved counts the lm_head's input only when the lm_head trains.
  if (w.loss != spec::Loss::cce || w.mode == spec::Mode::train || !w.trains()) return 0;
  return mul(m.hidden_size, p.autocast ? p.compute : p.residual);
}

std::uint64_t compiled_layer_not_saved(const spec::ModelSpec& m, const spec::LayerGroup& g, const spec::Workload& w,
                                       const Precision& p) {
  if (w.compile == spec::Compile::none) return 0;
  // Measured: the tensors autograd saves in one forward, eager beside compiled layers
  // (tests/accuracy/levers/results/compile_probe.jsonl, a saved_tensors_hooks probe, H200, bf16,
  // b2 x 1024): per token and layer, compiled saves 8 h + 2 I bytes less in full training and
  // 16 h + 2 I less in LoRA on llama-3.2-1b, qwen2.5-0.5b and smollm2-360m (within 0.3 %), and
  // the shapes say which tensors.
  std::uint64_t bytes = 0;
  const std::uint64_t h = m.hidden_size;
  // A pre-norm (RMSNorm: x.to(float32), pow, mean, rsqrt, mul, cast, mul by the weight) is one
  // fused pointwise-and-reduction chain: the partitioner saves its 16-bit input and the per-token
  // rsqrt and recomputes the fp32 copy and the normalised tensor in backward, where eager keeps
  // both (activations.cpp, norm_internal). Two per layer (one with a parallel residual).
  if (m.norm != spec::Norm::layer && !(spec::uses_lora(w.mode) && w.lora.unsloth_kernels)) {
    const std::uint64_t eager = pre_norm_saved(m, w, p);
    const std::uint64_t compiled = mul(h, p.residual);
    if (eager > compiled) bytes = checked_add(bytes, mul(eager - compiled, m.parallel_residual ? 1 : 2));
  }
  // A gated MLP: eager saves gate's output (silu's input), silu's output and up's output (the
  // product's two factors) and the product (down_proj's input, when it is saved); compiled keeps
  // gate, up and the product and recomputes silu(gate) in backward: one intermediate less.
  if (m.gated_mlp && !g.moe) bytes = checked_add(bytes, mul(m.intermediate_size, p.compute));
  // LoRA (peft casts each adapter's input to the fp32 adapter dtype, one cast per adapter in
  // eager): after CSE the adapters reading one tensor share one cast (measured: q, k and v on the
  // attention norm's output, gate and up on the MLP norm's output).
  if (spec::uses_lora(w.mode) && w.lora.dropout == 0 && !p.autocast && p.adapter != p.compute) {
    std::uint64_t attn = 0;
    std::uint64_t mlp = 0;
    for (const auto& l : g.linears) {
      if (!lora_targets(w, l)) continue;
      if (l.role == spec::Role::attn_in) ++attn;
      if (l.role == spec::Role::mlp_in && !l.expert) ++mlp;
    }
    const std::uint64_t shared = (attn > 1 ? attn - 1 : 0) + (mlp > 1 ? mlp - 1 : 0);
    bytes = checked_add(bytes, mul(shared, h, p.adapter));
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
