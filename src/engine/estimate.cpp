// The memory-accounting engine: the phases of a step, what is allocated at the worst moment
// of each, and the peak over them.
//
// Phases (training, steady state from the second step, as torch.cuda.max_memory_allocated()
// sees them; shared/truth's per-step figures show the same order):
//   forward_end     every saved activation, plus the loss: the 16-bit logits, their fp32
//                   copy (`logits.float()` in transformers' ForCausalLMLoss) and the saved
//                   log_softmax output
//   backward_start  nll_loss and log_softmax backward: two more fp32 logits-sized gradients
//                   while the saved log_softmax output is still alive (3 x fp32 logits)
//   backward_end    all gradients; the embedding's dense gradient (added to the tied
//                   lm_head's); one layer's saved tensors (or its recompute, checkpointed)
//   optimizer_step  gradients + optimizer state + the step's temporaries
// Inference: the logits (all positions), the MLP's intermediates, eager attention's scores.
// Generation: the prefill (cache + one layer's intermediates + last-token logits) and the
// last decode step (the whole cache + torch.cat's copy of one layer's keys + logits).

#include "vramfit/engine/estimate.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "activations.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/optimizers.hpp"

namespace vramfit::engine {

namespace {

using detail::Precision;
using spec::Mode;
using spec::ModelSpec;
using spec::Workload;

// Component ids, in report order, with their descriptions (ids are API: JSON readers use them).
struct ComponentInfo {
  std::string_view id;
  std::string_view description;
};
constexpr std::array<ComponentInfo, 13> kComponents{{
    {"weights", "model parameters and buffers as stored"},
    {"lora_adapters", "LoRA A and B matrices (fp32, as peft creates them)"},
    {"cublas_workspace", "cuBLAS/cuBLASLt workspaces allocated through PyTorch's allocator"},
    {"gradients", "parameter gradients (.grad), in the parameters' dtype"},
    {"optimizer_state", "optimizer state tensors (moments, momentum)"},
    {"optimizer_step", "temporaries of optimizer.step()"},
    {"autocast_cache", "16-bit copies of fp32 weights made by autocast, kept for backward"},
    {"activations", "tensors saved for backward (or live intermediates, in inference)"},
    {"kv_cache", "keys and values of every layer for every token"},
    {"logits", "logits, their fp32 copy, log-softmax and their gradients"},
    {"temporaries", "short-lived buffers at the peak (gradients flowing through a layer)"},
    {"sharding_buffers", "multi-GPU buffers: DDP gradient buckets, FSDP/ZeRO-3 gathered layers"},
    {"allocator_reserve", "reserved by PyTorch's caching allocator beyond the allocated peak"},
}};

std::string_view describe(std::string_view id) {
  for (const auto& c : kComponents)
    if (c.id == id) return c.description;
  if (id == "cuda_context") return "CUDA context, cuBLAS handles and kernel images (outside PyTorch)";
  return "";
}

// A phase under construction: bytes per component id.
struct Acc {
  std::string id;
  std::vector<std::pair<std::string, Bytes>> parts;
  void add(std::string_view part, Bytes b) {
    for (auto& [k, v] : parts)
      if (k == part) {
        v += b;
        return;
      }
    parts.emplace_back(std::string(part), b);
  }
  [[nodiscard]] Bytes total() const {
    Bytes t;
    for (const auto& [k, v] : parts) t += v;
    return t;
  }
};

std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return checked_mul(a, b); }
std::uint64_t mul(std::uint64_t a, std::uint64_t b, std::uint64_t c) { return checked_mul(checked_mul(a, b), c); }

// --- weights ------------------------------------------------------------------------------

bool quantized(DType t) { return !is_float_compute(t); }

// Bytes per parameter of a quantized linear weight, scales included (bitsandbytes and GPTQ
// formats; sources: bitsandbytes functional.py quantize_4bit (blocksize 64, fp32 absmax),
// LLM.int8 (int8 + one fp32 scale per output row, counted apart), GPTQ (group 128, fp16
// scales + packed 4-bit zeros)).
Bytes quantized_linear_bytes(const spec::Linear& l, DType t) {
  const std::uint64_t n = l.params();
  switch (t) {
    case DType::nf4: return bytes_of_bits(n, 4) + Bytes{(n + 63) / 64 * 4};
    case DType::int4: return bytes_of_bits(n, 4) + Bytes{(n + 127) / 128 * 2} + bytes_of_bits((n + 127) / 128, 4);
    case DType::int8: return Bytes{n} + Bytes{mul(l.out_features, l.copies, 4)};
    case DType::fp8: return Bytes{n} + Bytes{4};
    default: return Bytes{mul(n, bits_of(t) / 8)};
  }
}

Bytes weight_bytes(const ModelSpec& m, const Workload& w, const Precision& p) {
  if (!quantized(w.weights)) return Bytes{mul(m.params, p.param)} + Bytes{m.buffer_bytes};
  // Quantized: the decoder's linears are packed; embeddings, lm_head and norms stay 16-bit
  // (bitsandbytes and GPTQ skip them).
  Bytes b{m.buffer_bytes};
  std::uint64_t packed_params = 0;
  for (const auto& g : m.layers)
    for (const auto& l : g.linears) {
      b += quantized_linear_bytes(l, w.weights) * g.count;
      packed_params = checked_add(packed_params, mul(l.params(), g.count));
    }
  const std::uint64_t rest = m.params > packed_params ? m.params - packed_params : 0;
  return b + Bytes{mul(rest, 2)};
}

std::uint64_t lora_params(const ModelSpec& m, const Workload& w) {
  if (!spec::uses_lora(w.mode)) return 0;
  std::uint64_t n = 0;
  for (const auto& g : m.layers)
    for (const auto& l : g.linears)
      if (detail::lora_targets(w, l))
        n = checked_add(n, mul(w.lora.rank, checked_add(l.in_features, l.out_features), mul(l.copies, g.count)));
  return n;
}

std::uint64_t largest_param(const ModelSpec& m) {
  std::uint64_t big = std::max(m.embedding_params, m.lm_head_params);
  for (const auto& g : m.layers)
    for (const auto& l : g.linears) big = std::max(big, mul(l.in_features, l.out_features, l.expert ? l.copies : 1));
  return big;
}

// Adafactor's factored state: rows + columns for each matrix, the full tensor for vectors
// (torch/optim/_adafactor.py: row_var / col_var, variance for 1-D parameters).
std::uint64_t adafactor_state_elems(const ModelSpec& m) {
  std::uint64_t n = 0;
  for (const auto& g : m.layers) {
    for (const auto& l : g.linears)
      n = checked_add(n, mul(checked_add(l.in_features, l.out_features) + (l.bias ? l.out_features : 0),
                             mul(l.copies, g.count)));
    n = checked_add(n, mul(g.norm_params + g.other_params, g.count));
  }
  n = checked_add(n, checked_add(m.vocab_size, m.hidden_size));
  if (m.lm_head_params) n = checked_add(n, checked_add(m.vocab_size, m.hidden_size));
  return checked_add(n, m.final_norm_params);
}

// Adafactor over LoRA adapters: A (r x in) and B (out x r) are matrices: rows + columns.
std::uint64_t lora_adafactor_elems(const ModelSpec& m, const Workload& w) {
  std::uint64_t n = 0;
  for (const auto& g : m.layers)
    for (const auto& l : g.linears)
      if (detail::lora_targets(w, l))
        n = checked_add(n, mul(2 * w.lora.rank + l.in_features + l.out_features, mul(l.copies, g.count)));
  return n;
}

// --- what is trained, and the optimizer ------------------------------------------------------

struct Training {
  Bytes grads;
  Bytes state;
  Bytes step_temp;
  Bytes embedding_grad;  // the dense embedding gradient, allocated last in backward
};

Training training_terms(const ModelSpec& m, const Workload& w, const Precision& p, std::uint64_t adapters) {
  Training t;
  const auto& opt = traits(w.optimizer);
  const bool full = w.mode == Mode::train;
  const std::uint64_t trainable = full ? m.params : adapters;
  const std::uint64_t bytes = full ? p.param : 4;  // peft keeps adapters in fp32
  t.grads = Bytes{mul(trainable, bytes)};
  std::uint64_t state = mul(trainable, opt.state_tensors, bytes);
  if (opt.state_bytes_8bit) {
    // two uint8 states + an fp32 absmax per 2048-value block for each (bitsandbytes).
    state = checked_add(mul(trainable, opt.state_bytes_8bit), mul((trainable + 2047) / 2048, 2 * 4));
  }
  if (opt.factored) state = mul(full ? adafactor_state_elems(m) : lora_adafactor_elems(m, w), bytes);
  t.state = Bytes{state};
  const std::uint64_t largest = full ? largest_param(m) : adapters;
  switch (opt.temp) {
    case StepTemp::none: break;
    case StepTemp::all_params: t.step_temp = Bytes{mul(trainable, bytes)}; break;
    case StepTemp::largest_param_x2: t.step_temp = Bytes{mul(largest, 2, bytes)}; break;
  }
  if (full) t.embedding_grad = Bytes{mul(m.embedding_params, bytes)};
  return t;
}

// --- per-token activations summed over layers ------------------------------------------------

struct Saved {
  Bytes per_tokens;  // activations proper
  Bytes fixed;       // autocast weight copies
  Bytes one_layer;   // the largest layer's saved tensors (recompute / last layer)
  Bytes one_layer_fixed;
  Bytes ckpt_inputs;  // checkpointing: the saved layer inputs
  Bytes bwd_transient;
};

Saved saved_terms(const ModelSpec& m, const Workload& w, const Precision& p, std::uint64_t tokens) {
  Saved s;
  for (const auto& g : m.layers) {
    const auto ls = detail::layer_saved(m, g, w, p);
    const Bytes layer = Bytes{mul(ls.per_token, tokens)} + Bytes{mul(ls.per_token_position, tokens, w.seq)};
    s.per_tokens += layer * g.count;
    s.fixed += Bytes{ls.fixed} * g.count;
    s.one_layer = std::max(s.one_layer, layer);
    s.one_layer_fixed = std::max(s.one_layer_fixed, Bytes{ls.fixed});
    s.bwd_transient = std::max(s.bwd_transient, Bytes{mul(detail::backward_layer_transient(m, g, p), tokens)});
    // Checkpointing keeps each layer's input (the residual stream).
    s.ckpt_inputs += Bytes{mul(m.hidden_size, p.residual, tokens)} * g.count;
  }
  return s;
}

std::uint64_t kv_bytes_per_token(const ModelSpec& m, const Precision& p, std::uint64_t layers_full) {
  // Hugging Face's DynamicCache keeps keys and values per layer; multi-head latent attention
  // (deepseek) caches the decompressed per-head keys (nope + rope) and values.
  std::uint64_t width = 2 * m.num_kv_heads * m.head_dim;
  if (m.kv_lora_rank > 0)
    width = m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.num_heads * m.v_head_dim;
  return mul(width, p.compute, layers_full);
}

Bytes kv_cache(const ModelSpec& m, const Precision& p, std::uint64_t batch, std::uint64_t positions) {
  const std::uint64_t sliding = std::min(m.sliding_layers, m.num_layers);
  const std::uint64_t full = m.num_layers - sliding;
  Bytes b{mul(kv_bytes_per_token(m, p, full), batch, positions)};
  if (sliding > 0) {
    // Sliding-window layers keep at most the window.
    const std::uint64_t kept = m.sliding_window > 0 ? std::min(positions, m.sliding_window) : positions;
    b += Bytes{mul(kv_bytes_per_token(m, p, sliding), batch, kept)};
  }
  return b;
}

// --- the breakdown ----------------------------------------------------------------------------

Breakdown finish(std::vector<Acc> phases, Bytes resident, const Workload& w, std::vector<std::string> notes);
void shard(std::vector<Acc>& phases, const ModelSpec& m, const Workload& w, const Precision& p);

Breakdown estimate_inference(const ModelSpec& m, const Workload& w, const Precision& p, Acc base,
                             std::vector<std::string> notes) {
  const std::uint64_t tokens = mul(w.batch, w.seq);
  std::vector<Acc> phases;
  std::uint64_t mlp = 0;
  std::uint64_t attn_tok = 0;
  std::uint64_t attn_pos = 0;
  for (const auto& g : m.layers) {
    const auto ip = detail::inference_layer_peak(m, g, w, p);
    mlp = std::max(mlp, ip.mlp_per_token);
    attn_tok = std::max(attn_tok, ip.attn_per_token);
    attn_pos = std::max(attn_pos, ip.attn_per_token_position);
  }
  const std::uint64_t vocab_bytes = mul(m.vocab_size, p.compute);
  // Soft-capped logits (gemma2): divide, tanh and multiply each make a logits-sized tensor.
  const std::uint64_t logit_copies = m.final_logit_softcap > 0 ? 2 : 1;

  if (w.mode == Mode::inference) {
    Acc logits = base;
    logits.id = "forward_logits";
    logits.add("logits", Bytes{mul(tokens, vocab_bytes, logit_copies)});
    logits.add("activations", Bytes{mul(tokens, m.hidden_size, p.compute)});
    phases.push_back(logits);
    Acc layer = base;
    layer.id = "forward_layer";
    layer.add("activations", Bytes{mul(tokens, mlp)});
    phases.push_back(layer);
    if (attn_pos > 0) {
      Acc a = base;
      a.id = "forward_attention";
      a.add("activations", Bytes{mul(tokens, attn_tok)} + Bytes{mul(tokens, w.seq, attn_pos)});
      phases.push_back(a);
    }
    shard(phases, m, w, p);
    return finish(std::move(phases), base.total(), w, std::move(notes));
  }

  // generate: prefill then decode, logits for the last position only (logits_to_keep=1),
  // upcast to fp32 for the logits processors.
  const Bytes last_logits{mul(w.batch, m.vocab_size, p.compute + 4)};
  Acc prefill = base;
  prefill.id = "prefill";
  prefill.add("kv_cache", kv_cache(m, p, w.batch, w.seq));
  prefill.add("activations", Bytes{mul(tokens, mlp)});
  prefill.add("logits", last_logits);
  phases.push_back(prefill);
  if (attn_pos > 0) {
    Acc a = base;
    a.id = "prefill_attention";
    a.add("kv_cache", kv_cache(m, p, w.batch, w.seq));
    a.add("activations", Bytes{mul(tokens, attn_tok)} + Bytes{mul(tokens, w.seq, attn_pos)});
    phases.push_back(a);
  }
  Acc decode = base;
  decode.id = "decode";
  const std::uint64_t positions = checked_add(w.seq, w.new_tokens);
  const Bytes cache = kv_cache(m, p, w.batch, positions);
  decode.add("kv_cache", cache);
  // torch.cat in DynamicCache.update copies one layer's keys (then values) per step.
  decode.add("temporaries", Bytes{cache.value() / std::max<std::uint64_t>(2 * m.num_layers, 1)});
  decode.add("logits", last_logits);
  phases.push_back(decode);
  shard(phases, m, w, p);
  return finish(std::move(phases), base.total(), w, std::move(notes));
}

Breakdown estimate_training(const ModelSpec& m, const Workload& w, const Precision& p, Acc base,
                            std::uint64_t adapters, std::vector<std::string> notes) {
  const std::uint64_t tokens = mul(w.batch, w.seq);
  const Training t = training_terms(m, w, p, adapters);
  const Saved s = saved_terms(m, w, p, tokens);
  const auto head = detail::head_saved(m, w, p);
  const Bytes head_saved = Bytes{mul(head.per_token, tokens)} + Bytes{mul(head.per_token_position, tokens, w.seq)};
  const Bytes head_fixed{head.fixed};

  const Bytes l4{mul(tokens, m.vocab_size, 4)};
  const Bytes lc{mul(tokens, m.vocab_size, p.compute)};
  // Gemma-2 soft-capping: tanh's output is saved for backward.
  const Bytes softcap = m.final_logit_softcap > 0 ? lc : Bytes{};

  std::vector<Acc> phases;
  base.add("optimizer_state", t.state);
  // With gradient accumulation the gradients of earlier micro-batches stay during forward.
  const Bytes held_grads = w.grad_accum > 1 ? t.grads : Bytes{};

  const Bytes acts = w.checkpointing ? s.ckpt_inputs + head_saved : s.per_tokens + head_saved;
  const Bytes kept_copies = (w.checkpointing ? Bytes{} : s.fixed) + head_fixed;

  Acc fwd = base;
  fwd.id = "forward_end";
  fwd.add("activations", acts);
  // Under checkpointing autocast's cache still holds every cast until the forward ends.
  fwd.add("autocast_cache", w.checkpointing ? s.fixed + head_fixed : kept_copies);
  fwd.add("logits", l4 + lc + softcap + (p.compute != 4 ? l4 : Bytes{}));
  fwd.add("gradients", held_grads);
  phases.push_back(fwd);

  Acc bstart = base;
  bstart.id = "backward_start";
  bstart.add("activations", acts);
  bstart.add("autocast_cache", kept_copies);
  bstart.add("logits", l4 * 3 + softcap);
  bstart.add("gradients", held_grads);
  phases.push_back(bstart);

  if (w.checkpointing) {
    // The last layer is recomputed first: its saved tensors exist with every layer input.
    Acc rec = base;
    rec.id = "backward_recompute";
    rec.add("activations", s.ckpt_inputs + s.one_layer);
    rec.add("autocast_cache", head_fixed + Bytes{s.one_layer_fixed});
    rec.add("temporaries", s.bwd_transient);
    rec.add("gradients", w.grad_accum > 1 ? t.grads
                         : Bytes{w.mode == Mode::train ? mul(m.lm_head_params, p.param) : 0});
    phases.push_back(rec);
  }

  // The end of backward: the first layer's saved tensors (or recompute) with nearly every
  // gradient, then the embedding's gradient (for tied weights a dense copy added into the
  // lm_head's .grad).
  Acc last = base;
  last.id = "backward_last_layer";
  last.add("gradients", Bytes::saturating_sub(t.grads, t.embedding_grad));
  last.add("activations", s.one_layer);
  last.add("autocast_cache", Bytes{s.one_layer_fixed});
  last.add("temporaries", s.bwd_transient);
  phases.push_back(last);

  Acc end = base;
  end.id = "backward_end";
  end.add("gradients", t.grads);
  Bytes emb_tmp{mul(tokens, m.hidden_size, p.compute)};
  // Tied weights: autograd's InputBuffer sums the lm_head's and the embedding's gradients
  // out of place before AccumulateGrad, so both inputs and the sum coexist (measured:
  // llama-3.2-1b fp32 SGD-momentum, backward end = grads + 2 x vocab x hidden fp32).
  if (m.tied_embeddings && w.mode == Mode::train) emb_tmp += t.embedding_grad * 2;
  end.add("temporaries", emb_tmp);
  phases.push_back(end);

  Acc step = base;
  step.id = "optimizer_step";
  step.add("gradients", t.grads);
  step.add("optimizer_step", t.step_temp);
  phases.push_back(step);
  shard(phases, m, w, p);
  return finish(std::move(phases), base.total(), w, std::move(notes));
}

// --- many GPUs ---------------------------------------------------------------------------------

// Which components a strategy divides across the GPUs (per-GPU figure = total / gpus).
// Sources: PyTorch DDP (a full replica; the Reducer's gradient buckets are a second copy of
// the gradients unless gradient_as_bucket_view=True), DeepSpeed ZeRO stages 1/2/3 (the ZeRO
// paper, Rajbhandari et al. 2020: stage 1 shards optimizer state, 2 also gradients, 3 also
// parameters), FSDP full shard (= ZeRO-3; each layer's parameters are all-gathered before
// use, with the next one prefetched), Megatron-style tensor parallelism (matmuls split
// across GPUs, activations inside attention and MLP split too), Accelerate's
// device_map="auto" (whole layers per GPU, run one GPU at a time).
struct ShardRule {
  spec::Sharding id;
  bool weights, grads, state, activations;
};
constexpr std::array<ShardRule, 8> kShardRules{{
    {spec::Sharding::none, false, false, false, false},
    {spec::Sharding::ddp, false, false, false, false},
    {spec::Sharding::zero1, false, false, true, false},
    {spec::Sharding::zero2, false, true, true, false},
    {spec::Sharding::zero3, true, true, true, false},
    {spec::Sharding::fsdp, true, true, true, false},
    {spec::Sharding::tp, true, true, true, true},
    {spec::Sharding::device_map, true, true, true, true},
}};

const ShardRule& shard_rule(spec::Sharding s) {
  for (const auto& r : kShardRules)
    if (r.id == s) return r;
  return kShardRules[0];
}

Bytes ceil_div(Bytes b, std::uint64_t n) { return Bytes{n <= 1 ? b.value() : b.value() / n + (b.value() % n ? 1 : 0)}; }

// Rewrites every phase into the figure of the busiest GPU.
void shard(std::vector<Acc>& phases, const ModelSpec& m, const Workload& w, const Precision& p) {
  const std::uint64_t n = w.gpus;
  if (n <= 1 || w.sharding == spec::Sharding::none) return;
  const ShardRule& rule = shard_rule(w.sharding);
  std::uint64_t layer_params = 0;
  for (const auto& g : m.layers) {
    std::uint64_t one = g.norm_params + g.other_params;
    for (const auto& l : g.linears) one = checked_add(one, l.params());
    layer_params = std::max(layer_params, one);
  }
  const Bytes layer_bytes{mul(layer_params, p.param)};
  // The busiest GPU of a layer split also holds the larger of the embedding and lm_head.
  const Bytes edge{mul(std::max(m.embedding_params, m.lm_head_params), p.param)};
  for (auto& ph : phases) {
    Bytes grads;
    for (auto& [k, v] : ph.parts) {
      const bool split = (k == "weights" && rule.weights) || (k == "gradients" && rule.grads) ||
                         ((k == "optimizer_state" || k == "optimizer_step") && rule.state) ||
                         ((k == "activations" || k == "kv_cache" || k == "autocast_cache") && rule.activations &&
                          w.sharding == spec::Sharding::tp) ||
                         (k == "kv_cache" && w.sharding == spec::Sharding::device_map) ||
                         (k == "lora_adapters" && rule.weights);
      if (k == "gradients") grads = v;
      if (split) v = ceil_div(v, n);
      if (k == "weights" && w.sharding == spec::Sharding::device_map) v += edge;
    }
    switch (w.sharding) {
      case spec::Sharding::ddp:
        if (w.trains()) ph.add("sharding_buffers", grads.value() ? grads : Bytes{mul(m.params, p.param)});
        break;
      case spec::Sharding::zero3:
      case spec::Sharding::fsdp:
        // The gathered layer and the prefetched next one; in backward also its full gradients.
        ph.add("sharding_buffers", layer_bytes * (ph.id.rfind("backward", 0) == 0 && w.trains() ? 3 : 2));
        break;
      case spec::Sharding::zero1:
      case spec::Sharding::zero2:
        // DeepSpeed's reduce bucket (reduce_bucket_size, 5e8 elements by default), at most the gradients.
        if (w.trains()) ph.add("sharding_buffers", std::min(Bytes{mul(500000000, p.param)}, Bytes{mul(m.params, p.param)}));
        break;
      default: break;
    }
  }
}

// The caching allocator's reserve above the allocated peak. Freed blocks of one size are
// not reused for another; activations and gradients of different shapes interleave.
//  - Peak while the activations are alive (forward end, backward start, inference): the
//    share of the step's transient memory that stays reserved (medians over shared/truth
//    of (peak_reserved - peak_allocated) / (peak_allocated - resident)): inference 548,
//    generate 349, full training 70, LoRA 183 thousandths.
//  - Phases after backward freed them (its end, the optimizer step): the freed activation
//    blocks stay cached while gradients and step temporaries of other sizes take new
//    segments: 750 thousandths of what backward started with (median over the 22 cases of
//    shared/truth and tests/accuracy/h200 whose peak is there: 0.75, quartiles 0.57, 0.88).
// `peak` is the phase the reserve is computed for.
Bytes reserve_for(const Workload& w, const Acc& peak, const std::vector<Acc>& phases, Bytes resident) {
  std::uint64_t permille = 70;
  if (w.mode == Mode::inference) permille = 548;
  if (w.mode == Mode::generate) permille = 349;
  if (spec::uses_lora(w.mode)) permille = 183;
  Bytes basis = Bytes::saturating_sub(peak.total(), resident);
  const bool after_backward = peak.id == "backward_end" || peak.id == "backward_last_layer" ||
                              peak.id == "optimizer_step";
  if (w.trains() && after_backward) {
    for (const auto& ph : phases)
      if (ph.id == "backward_start") {
        basis = Bytes{};
        for (const auto& [k, v] : ph.parts)
          if (k == "activations" || k == "autocast_cache" || k == "logits") basis += v;
      }
    permille = 750;
  }
  // expandable_segments:True grows segments in place instead of caching freed blocks of
  // fixed sizes. shared/truth/results/expandable-segments.jsonl (10 training cases): the
  // median reserve ratio drops from 70 to 55 thousandths (from -77% to +77% case by case).
  if (w.expandable_segments) permille = permille * 55 / 70;
  return Bytes{basis.value() / 1000 * permille}.round_up(kSegmentRound);
}

Breakdown finish(std::vector<Acc> phases, Bytes resident, const Workload& w, std::vector<std::string> notes) {
  Breakdown b;
  const Acc* peak = &phases.front();
  for (const auto& ph : phases) {
    b.phases.push_back({ph.id, ph.total()});
    if (ph.total() > peak->total()) peak = &ph;
  }
  b.peak_phase = peak->id;
  b.peak_allocated = peak->total();
  for (const auto& info : kComponents) {
    if (info.id == "allocator_reserve") continue;
    Bytes v;
    for (const auto& [k, x] : peak->parts)
      if (k == info.id) v = x;
    b.components.push_back({std::string(info.id), v, std::string(info.description), true});
  }
  // The caching allocator never gives memory back within a step (no empty_cache), so what
  // it holds at its worst is the largest of each phase's allocation plus that phase's reserve,
  // which can come after the allocated peak (gradients after freed activations).
  Bytes reserved = b.peak_allocated;
  for (const auto& ph : phases) reserved = std::max(reserved, ph.total() + reserve_for(w, ph, phases, resident));
  b.allocator_reserve = reserved - b.peak_allocated;
  b.cuda_context = kCudaContext;
  b.components.push_back({"allocator_reserve", b.allocator_reserve, std::string(describe("allocator_reserve")), false});
  b.components.push_back({"cuda_context", b.cuda_context, std::string(describe("cuda_context")), false});
  b.device_total = b.peak_allocated + b.allocator_reserve + b.cuda_context;
  b.notes = std::move(notes);
  return b;
}

}  // namespace

Breakdown estimate(const ModelSpec& m, const Workload& w) {
  const Precision p = detail::precision_of(w);
  std::vector<std::string> notes;
  Acc base;
  base.id = "load";
  base.add("weights", weight_bytes(m, w, p));
  const std::uint64_t adapters = lora_params(m, w);
  if (adapters) base.add("lora_adapters", Bytes{mul(adapters, 4)});
  base.add("cublas_workspace", kCublasWorkspace);
  if (p.quantized) {
    // bitsandbytes / GPTQ kernels dequantize one linear's weight to 16 bits per matmul
    // (bitsandbytes MatMul4Bit: F.dequantize_4bit(B).to(A.dtype)), in forward and backward.
    std::uint64_t largest = 0;
    for (const auto& g : m.layers)
      for (const auto& l : g.linears) largest = std::max(largest, mul(l.in_features, l.out_features));
    base.add("temporaries", Bytes{mul(largest, 2)});
    notes.emplace_back("quantized weights: packed sizes follow the formats (block scales included); the "
                       "kernels' own buffers beyond one dequantized weight are not measured");
  }

  if (w.gpus > 1 && w.sharding != spec::Sharding::none)
    notes.push_back(fmt::format("per-GPU figures for {} GPUs with {}: sharding follows the ZeRO/FSDP/TP rules "
                                "(not yet measured on several GPUs)", w.gpus, spec::name_of(w.sharding)));

  if (w.mode == Mode::inference || w.mode == Mode::generate) return estimate_inference(m, w, p, base, notes);
  return estimate_training(m, w, p, base, adapters, notes);
}

}  // namespace vramfit::engine
