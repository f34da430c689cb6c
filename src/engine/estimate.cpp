// The memory-accounting engine: the phases of a step, what is allocated at the worst moment
// of each, and the peak over them (phase ids: engine::PhaseId).
//
// Phases (training, steady state from the second step, as torch.cuda.max_memory_allocated()
// sees them; shared/truth's per-step figures show the same order):
//   forward_end     every saved activation, plus the loss: the 16-bit logits, their fp32
//                   copy (`logits.float()` in transformers' ForCausalLMLoss) and the saved
//                   log_softmax output
//   backward_start  nll_loss and log_softmax backward: two more fp32 logits-sized gradients
//                   while the saved log_softmax output is still alive (3 x fp32 logits)
//   backward_recompute  (checkpointing) every layer input with the last layer recomputed
//   backward_last_layer, backward_end
//                   all gradients; the embedding's dense gradient (added to the tied
//                   lm_head's); one layer's saved tensors (or its recompute, checkpointed)
//   optimizer_step  gradients + optimizer state + the step's temporaries
// Inference (forward_logits, forward_layer, forward_attention): the logits (all positions), the
// MLP's intermediates, eager attention's scores.
// Generation: the prefill (cache + one layer's intermediates + last-token logits) and the
// last decode step (the whole cache + torch.cat's copy of one layer's keys + logits).
// With --images a vision_tower phase comes first; `load` is what is resident before the step.

#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/process.hpp"
#include "vramfit/engine/upper_bound.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "activations.hpp"
#include "checked.hpp"
#include "levers.hpp"
#include "phase.hpp"
#include "reserve.hpp"
#include "state_cache.hpp"
#include "weights.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/context.hpp"
#include "vramfit/engine/optimizers.hpp"
#include "vramfit/spec/architectures.hpp"

namespace vramfit::engine {

namespace {

using detail::Acc;
using detail::Precision;
using spec::Mode;
using spec::ModelSpec;
using spec::Workload;

using detail::mul;

// --- weights (weights.cpp) and adapters -----------------------------------------------------

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
      n = checked_add(n, mul(checked_add(checked_add(l.in_features, l.out_features), l.bias ? l.out_features : 0),
                             mul(l.copies, g.count)));
    n = checked_add(n, mul(checked_add(g.norm_params, g.other_params), g.count));
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
        n = checked_add(n, mul(checked_add(mul(w.lora.rank, 2), checked_add(l.in_features, l.out_features)),
                               mul(l.copies, g.count)));
  return n;
}

// --- what is trained, and the optimizer ------------------------------------------------------

struct Training {
  Bytes one_grad;       // the largest trained parameter's gradient (optimizer in backward)
  Bytes one_step_temp;  // the step's temporaries for that parameter alone
  Bytes grads;
  Bytes state;
  Bytes step_temp;
  Bytes embedding_grad;  // the dense embedding gradient, allocated last in backward
  Bytes paged_state;     // paged optimizers' state, outside PyTorch's allocator
};

Training training_terms(const ModelSpec& m, const Workload& w, const Precision& p, std::uint64_t adapters) {
  Training t;
  const auto& opt = traits(w.optimizer);
  const bool full = w.mode == Mode::train;
  const std::uint64_t trainable = full ? m.params : adapters;
  // peft keeps adapters in fp32 unless --lora-dtype makes them 16-bit.
  const std::uint64_t bytes = full ? p.param : (w.lora.half_adapters ? 2 : 4);
  // Master weights: the optimizer updates an fp32 copy of the 16-bit parameters, so its
  // moments and temporaries are fp32 too.
  const std::uint64_t state_bytes = w.master_weights ? 4 : bytes;
  t.grads = Bytes{mul(trainable, bytes)};
  std::uint64_t state = mul(trainable, opt.state_tensors, state_bytes);
  if (opt.state_bytes_fp32) state = mul(trainable, opt.state_bytes_fp32);
  if (opt.state_bytes_8bit) {
    // two uint8 states + an fp32 absmax per 2048-value block for each (bitsandbytes).
    state = checked_add(mul(trainable, opt.state_bytes_8bit), mul(trainable / 2048 + (trainable % 2048 != 0), 2 * 4));
  }
  if (opt.factored) state = mul(full ? adafactor_state_elems(m) : lora_adafactor_elems(m, w), state_bytes);
  if (w.master_weights) state = checked_add(state, mul(trainable, 4));
  const std::uint64_t largest = full ? largest_param(m) : adapters;
  switch (opt.temp) {
    case StepTemp::none: break;
    case StepTemp::all_params: t.step_temp = Bytes{mul(trainable, state_bytes)}; break;
    case StepTemp::largest_param_x2:
    case StepTemp::per_param_x2: t.step_temp = Bytes{mul(largest, 2, state_bytes)}; break;
  }
  // ...and its gradients are upcast to an fp32 copy for the step (DeepSpeed's fp32 gradient
  // partition, Apex's master gradients).
  if (w.master_weights) t.step_temp += Bytes{mul(trainable, 4)};
  // One parameter at a time (optimizer in backward): its gradient and its own step.
  t.one_grad = Bytes{mul(largest, bytes)};
  switch (opt.temp) {
    case StepTemp::none: break;
    case StepTemp::all_params: t.one_step_temp = Bytes{mul(largest, state_bytes)}; break;
    case StepTemp::largest_param_x2:
    case StepTemp::per_param_x2: t.one_step_temp = Bytes{mul(largest, 2, state_bytes)}; break;
  }
  if (w.master_weights) t.one_step_temp += Bytes{mul(largest, 4)};
  if (opt.paged)
    t.paged_state = Bytes{state};
  else
    t.state = Bytes{state};
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
  Bytes ckpt_acts;    // what checkpointing keeps: checkpointed layers' inputs (or their
                      // selective saves), the other layers' whole saved tensors
  Bytes ckpt_fixed;   // autocast copies saved by the layers checkpointing leaves alone
  Bytes bwd_transient;
};

Saved saved_terms(const ModelSpec& m, const Workload& w, const Precision& p, std::uint64_t tokens) {
  Saved s;
  std::uint64_t first = 0;  // index of the group's first layer
  for (const auto& g : m.layers) {
    auto ls = detail::layer_saved(m, g, w, p);
    // --compile: what the compiled layer recomputes instead of saving (engine/levers).
    ls.per_token -= std::min(ls.per_token, detail::compiled_layer_not_saved(m, g, w, p));
    const Bytes layer = Bytes{mul(ls.per_token, tokens)} + Bytes{mul(ls.per_token_position, tokens, w.seq)};
    s.per_tokens += layer * g.count;
    s.fixed += Bytes{ls.fixed} * g.count;
    s.one_layer = std::max(s.one_layer, layer);
    s.one_layer_fixed = std::max(s.one_layer_fixed, Bytes{ls.fixed});
    s.bwd_transient = std::max(s.bwd_transient, Bytes{mul(detail::backward_layer_transient(m, g, w, p), tokens)});
    // Checkpointing keeps each layer's input (the residual stream).
    s.ckpt_inputs += Bytes{mul(m.hidden_size, p.residual, tokens)} * g.count;
    // Selective checkpointing (engine/levers): every N-th layer, or an op-level policy.
    const std::uint64_t wrapped = detail::checkpointed_layers(first, g.count, w.checkpoint_every);
    const Bytes kept = w.checkpoint_selective ? Bytes{mul(detail::selective_layer_saved(m, g, p), tokens)}
                                              : Bytes{mul(m.hidden_size, p.residual, tokens)};
    s.ckpt_acts += kept * wrapped + layer * (g.count - wrapped);
    s.ckpt_fixed += Bytes{ls.fixed} * (g.count - wrapped);
    first = checked_add(first, g.count);
  }
  return s;
}

// Elements (keys + values) one token adds to the cache over `layers` layers. Hugging Face's
// DynamicCache keeps keys and values per layer; multi-head latent attention without the spec's
// mla_latent_cache caches the decompressed per-head keys (nope + rope) and values (every MLA row of
// transformers 5.17 keeps the latent: src/spec/architectures.cpp).
std::uint64_t kv_elems_per_token(const ModelSpec& m, std::uint64_t layers) {
  // A row's cache_all_heads (falcon, new_decoder_architecture): keys and values are broadcast
  // to every query head before the cache keeps them (measured, tests/accuracy/arch: a 4096-token
  // generate was 15.84% under with num_kv_heads).
  const spec::Architecture* row = spec::find_architecture(m.model_type);
  const std::uint64_t heads = row != nullptr && row->cache_all_heads && m.num_kv_heads > 1 ? m.num_heads : m.num_kv_heads;
  std::uint64_t width = mul(2, heads, m.head_dim);
  if (m.kv_lora_rank > 0)
    width = mul(m.num_heads, checked_add(checked_add(m.qk_nope_head_dim, m.qk_rope_head_dim), m.v_head_dim));
  // MLA whose cache keeps the compressed latent (spec mla_latent_cache: MiniCPM3Attention,
  // YoutuAttention call past_key_values.update(k_pass, k_rot) before expand_kv): kv_lora_rank
  // "keys" and qk_rope_head_dim "values", one head.
  if (m.kv_lora_rank > 0 && m.mla_latent_cache) width = checked_add(m.kv_lora_rank, m.qk_rope_head_dim);
  return mul(width, layers);
}

// Keys + values a token adds over the full-attention and over the sliding layers: the spec's
// sums when its layers differ in width (gemma4_text: full layers of global_head_dim, KV-shared
// layers caching nothing), else the per-layer width times the layers of each kind.
std::pair<std::uint64_t, std::uint64_t> kv_full_and_sliding_per_token(const ModelSpec& m) {
  if (m.kv_full_per_token != 0 || m.kv_sliding_per_token != 0) return {m.kv_full_per_token, m.kv_sliding_per_token};
  // Linear-attention layers (hybrids) keep states instead (detail::linear_state_cache).
  const std::uint64_t attn = detail::attention_layers(m);
  const std::uint64_t sliding = std::min(m.sliding_layers, attn);
  return {kv_elems_per_token(m, attn - sliding), kv_elems_per_token(m, sliding)};
}

// The cache at `positions` tokens, and the per-step copy of one layer's keys and values.
struct KvCache {
  Bytes cache;
  Bytes step_temp;  // decode: torch.cat's copy of one layer's keys (then values), or a
                    // quantized cache's dequantized keys and values of one layer
};

// Hugging Face's QuantizedCache (cache_implementation="quantized", quanto/HQQ backends):
// values quantized in groups of q_group_size 64 with a 16-bit scale and zero point per group,
// the latest tokens (up to residual_length 128) kept in the compute dtype; each decode step
// dequantizes a layer's whole keys and values to attend over them.
constexpr std::uint64_t kQuantCacheGroup = 64;
constexpr std::uint64_t kQuantCacheResidual = 128;

// What the kv_cache component holds for this model and workload, in words: the generic "every
// layer for every token" is wrong for sliding-window, latent (MLA), hybrid and quantized caches.
std::string kv_cache_description(const ModelSpec& m, const Workload& w) {
  const std::uint64_t attn = detail::attention_layers(m);
  const std::uint64_t sliding = m.sliding_window > 0 ? std::min(m.sliding_layers, attn) : 0;
  std::string what = m.kv_lora_rank > 0 && m.mla_latent_cache
                         ? fmt::format("the compressed latent (kv_lora_rank {} + rope {}): {} layers for every token",
                                       m.kv_lora_rank, m.qk_rope_head_dim, attn)
                         : fmt::format("keys and values: {} layers for every token", attn - sliding);
  if (sliding > 0)
    what = fmt::format("{}{} sliding-window layers for at most {} tokens (the whole prompt at the prefill)",
                       attn > sliding ? what + ", " : std::string("keys and values: "), sliding, m.sliding_window);
  std::uint64_t shared = 0;
  for (const auto& g : m.layers)
    if (g.kv_shared) shared += g.count;
  if (shared > 0) what += fmt::format(" ({} KV-shared layers among them cache nothing)", shared);
  if (m.linear_attention.layers > 0)
    what += fmt::format("; conv and recurrent states of {} linear-attention layers", m.linear_attention.layers);
  if (w.kv_cache && !is_float_compute(*w.kv_cache) && *w.kv_cache != DType::fp8)
    what += fmt::format("; quantized to {} in groups of {} (the latest {} tokens in 16-bit)",
                        name_of(*w.kv_cache), kQuantCacheGroup, kQuantCacheResidual);
  else if (w.kv_cache)
    what += fmt::format("; stored as {}", name_of(*w.kv_cache));
  return what;
}

KvCache kv_cache(const ModelSpec& m, const Workload& w, const Precision& p, std::uint64_t positions,
                 std::uint64_t residual_tokens, bool prefill = false) {
  const auto [full_per_token, sliding_per_token] = kv_full_and_sliding_per_token(m);
  // Sliding-window layers keep at most the window, once decoding: at the prefill,
  // DynamicSlidingWindowLayer.update (transformers 5.17 cache_utils.py) keeps
  // `full_key_states[:, :, -self.sliding_window + 1:, :]`, a view of the whole prompt's keys (and
  // values), so each sliding layer holds the prompt's storage until the first decode step's cat
  // replaces it (measured: vaultgemma, ministral and gemma3 generates of 4096 tokens over a 512- or
  // 1024-token window were 4.2-6.6% under with the window).
  const bool float_cache = !w.kv_cache || is_float_compute(*w.kv_cache);
  const std::uint64_t kept =
      m.sliding_window > 0 && !(prefill && float_cache) ? std::min(positions, m.sliding_window) : positions;
  const std::uint64_t elems = checked_add(mul(full_per_token, w.batch, positions), mul(sliding_per_token, w.batch, kept));
  const std::uint64_t layer_elems = mul(kv_elems_per_token(m, 1), w.batch, positions);
  KvCache kv;
  const DType store = w.kv_cache.value_or(DType::bf16);
  if (!w.kv_cache || is_float_compute(store)) {
    const std::uint64_t bytes = w.kv_cache ? bits_of(store) / 8 : p.compute;
    kv.cache = Bytes{mul(elems, bytes)};
  } else if (store == DType::fp8) {
    // fp8 caches (vLLM, TensorRT-LLM) store one byte per value; attention kernels read them.
    kv.cache = Bytes{elems};
  } else {
    const std::uint64_t residual = std::min(residual_tokens, positions);
    const std::uint64_t quantized =
        elems - std::min(elems, mul(checked_add(full_per_token, sliding_per_token), w.batch, residual));
    kv.cache = bytes_of_bits(quantized, bits_of(store)) +
               Bytes{mul((quantized + kQuantCacheGroup - 1) / kQuantCacheGroup, 2 * p.compute)} +
               Bytes{mul(elems - quantized, p.compute)};
    kv.step_temp = Bytes{mul(layer_elems, p.compute)};
    return kv;
  }
  // torch.cat in DynamicCache.update copies one layer's keys (then values) per step.
  kv.step_temp = Bytes{kv.cache.value() / std::max<std::uint64_t>(2 * detail::attention_layers(m), 1)};
  if (m.kv_lora_rank > 0 && m.mla_latent_cache) {
    // expand_kv at each layer's attention: kv_b_proj's output (heads x (qk_nope + v_head_dim); the
    // values are a view of it) and the new key_states (heads x (qk_nope + qk_rope)) over every
    // cached position, alive together with the cache.
    const std::uint64_t expanded = mul(m.num_heads, checked_add(checked_add(mul(2, m.qk_nope_head_dim), m.qk_rope_head_dim),
                                                                m.v_head_dim));
    kv.step_temp += Bytes{mul(mul(expanded, w.batch), positions, p.compute)};
  }
  return kv;
}

// --- the breakdown ----------------------------------------------------------------------------

Breakdown finish(const ModelSpec& m, std::vector<Acc> phases, Bytes resident, const Workload& w, std::vector<std::string> notes,
                 Bytes paged = {}, ProcessHistory* history = nullptr);
void shard(std::vector<Acc>& phases, const ModelSpec& m, const Workload& w, const Precision& p);
Bytes paged_share(Bytes paged, const Workload& w);

Breakdown estimate_inference(const ModelSpec& m, const Workload& w, const Precision& p, Acc base,
                             std::vector<std::string> notes, Bytes tower, ProcessHistory* history) {
  const std::uint64_t tokens = mul(w.batch, w.seq);
  std::vector<Acc> phases;
  if (tower.value() > 0) {
    // --images: the vision tower runs over the images before the language model, and frees its
    // activations before it (only the projected features, counted with the prompt, remain).
    Acc t = base;
    t.id = PhaseId::vision_tower;
    t.add(ComponentId::activations, tower);
    phases.push_back(t);
  }
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
  // Soft-capped logits (gemma2): divide, tanh and multiply each make a logits-sized tensor;
  // cohere's `logits * logit_scale` makes one more (measured, tests/accuracy/arch).
  const std::uint64_t logit_copies = m.final_logit_softcap > 0 || m.scaled_logits ? 2 : 1;

  if (w.mode == Mode::inference) {
    Acc logits = base;
    logits.id = PhaseId::forward_logits;
    logits.add(ComponentId::logits, Bytes{mul(tokens, vocab_bytes, logit_copies)});
    logits.add(ComponentId::activations, Bytes{mul(tokens, m.hidden_size, p.compute)});
    phases.push_back(logits);
    Acc layer = base;
    layer.id = PhaseId::forward_layer;
    // A hybrid's linear-attention layer, when its chunked forward needs more than the MLP.
    layer.add(ComponentId::activations, std::max(Bytes{mul(tokens, mlp)}, detail::linear_attention_forward(m, w.batch, w.seq, p)));
    phases.push_back(layer);
    if (attn_pos > 0) {
      Acc a = base;
      a.id = PhaseId::forward_attention;
      a.add(ComponentId::activations, Bytes{mul(tokens, attn_tok)} + Bytes{mul(tokens, w.seq, attn_pos)});
      phases.push_back(a);
    }
    shard(phases, m, w, p);
    return finish(m, std::move(phases), base.total(), w, std::move(notes), {}, history);
  }

  // generate: prefill then decode, logits for the last position only (logits_to_keep=1),
  // upcast to fp32 for the logits processors.
  const Bytes last_logits{mul(w.batch, m.vocab_size, p.compute + 4)};
  Acc prefill = base;
  prefill.id = PhaseId::prefill;
  KvCache prompt_cache = kv_cache(m, w, p, w.seq, 0, /*prefill=*/true);
  // A hybrid's linear-attention layers cache their conv and recurrent states beside the keys and values.
  const Bytes states = detail::linear_state_cache(m, w.batch, p);
  prompt_cache.cache += states;
  prefill.add(ComponentId::kv_cache, prompt_cache.cache);
  prefill.add(ComponentId::activations, std::max(Bytes{mul(tokens, mlp)}, detail::linear_attention_forward(m, w.batch, w.seq, p)));
  prefill.add(ComponentId::logits, last_logits);
  phases.push_back(prefill);
  if (attn_pos > 0) {
    Acc a = base;
    a.id = PhaseId::prefill_attention;
    a.add(ComponentId::kv_cache, prompt_cache.cache);
    a.add(ComponentId::activations, Bytes{mul(tokens, attn_tok)} + Bytes{mul(tokens, w.seq, attn_pos)});
    phases.push_back(a);
  }
  Acc decode = base;
  decode.id = PhaseId::decode;
  const std::uint64_t positions = checked_add(w.seq, w.new_tokens);
  const KvCache cache = kv_cache(m, w, p, positions, std::min(w.new_tokens, kQuantCacheResidual));
  decode.add(ComponentId::kv_cache, cache.cache + states);
  decode.add(ComponentId::temporaries, std::max(cache.step_temp, detail::linear_attention_decode(m, w.batch, p)));
  decode.add(ComponentId::logits, last_logits);
  phases.push_back(decode);
  shard(phases, m, w, p);
  return finish(m, std::move(phases), base.total(), w, std::move(notes), {}, history);
}

Breakdown estimate_training(const ModelSpec& m, const Workload& w, const Precision& p, Acc base,
                            std::uint64_t adapters, std::vector<std::string> notes, Bytes tower, Bytes tower_saved,
                            ProcessHistory* history) {
  const std::uint64_t tokens = mul(w.batch, w.seq);
  const Training t = training_terms(m, w, p, adapters);
  const Saved s = saved_terms(m, w, p, tokens);
  const auto head = detail::head_saved(m, w, p);
  // A fused linear cross-entropy runs the lm_head without autograd: its input is not saved.
  const std::uint64_t head_per_token =
      head.per_token - detail::lm_head_input_not_saved(m, w, p) + detail::frozen_head_input_saved(m, w, p);
  const Bytes head_saved = Bytes{mul(head_per_token, tokens)} + Bytes{mul(head.per_token_position, tokens, w.seq)};
  const Bytes head_fixed{head.fixed};
  const detail::LossBytes loss = detail::loss_bytes(m, w, p, tokens);

  std::vector<Acc> phases;
  base.add(ComponentId::optimizer_state, t.state);
  // With gradient accumulation the gradients of earlier micro-batches stay during forward.
  const Bytes held_grads = w.grad_accum > 1 ? t.grads : Bytes{};

  Bytes acts = w.checkpointing ? s.ckpt_acts + head_saved : s.per_tokens + head_saved;
  Bytes kept_copies = (w.checkpointing ? s.ckpt_fixed : s.fixed) + head_fixed;
  // Under checkpointing autocast's cache still holds every cast until the forward ends; casts
  // it does not cache (frozen or FSDP weights) are dropped with the checkpointed layer.
  Bytes fwd_copies = w.checkpointing && detail::autocast_caches_weights(w) ? s.fixed + head_fixed : kept_copies;
  Bytes fwd_acts = acts;
  if (w.activation_offload) {
    // save_on_cpu packs every saved tensor to host memory as it is saved: one layer's tensors
    // are on the GPU while it runs (forward) or is unpacked (backward); autocast's cache still
    // holds its casts until forward ends.
    fwd_acts = s.one_layer;
    acts = Bytes{};
    fwd_copies = detail::autocast_caches_weights(w) ? s.fixed + head_fixed : Bytes{s.one_layer_fixed};
    kept_copies = Bytes{};
  }

  if (tower.value() > 0) {
    // --images: the vision tower's forward, before the language model's (as in inference).
    Acc vt = base;
    vt.id = PhaseId::vision_tower;
    vt.add(ComponentId::activations, tower);
    vt.add(ComponentId::gradients, held_grads);
    phases.push_back(vt);
  }

  // --images, full training: the tower ran first and its saved tensors stay through the language
  // model's forward and backward; its backward comes last, so at the language model's first layer
  // the tower's (and projector's) gradients do not exist yet.
  const Bytes tower_grads{w.mode == Mode::train && tower_saved.value() > 0 && m.vision
                              ? mul(m.vision->params(), p.param)
                              : 0};
  fwd_acts += tower_saved;
  acts += tower_saved;

  // Whether head_saved counts the lm_head's input (the final norm's output), and its bytes.
  const bool head_input_saved = (w.mode == Mode::train && detail::lm_head_input_not_saved(m, w, p) == 0) ||
                                detail::frozen_head_input_saved(m, w, p) > 0;
  const Bytes head_input{head_input_saved ? mul(m.hidden_size, p.autocast ? p.compute : p.residual, tokens) : 0};
  if (!w.activation_offload) {
    // The forward's last decoder layer and final norm (engine/activations, forward_transient):
    // where no logits are built, the forward peaks there, before the head and the loss. At the
    // last layer's MLP output every saved tensor but the head's exists; at the final norm all.
    const auto ft = detail::forward_transient(m, w, p);
    Bytes saved = fwd_acts;
    // The final norm's output is the lm_head's input: alive at the norm whether or not the head
    // saves it (head_saved counts it only where it is saved).
    const std::uint64_t norm_out = head_input_saved ? 0 : mul(m.hidden_size, p.residual);
    Bytes transient{mul(checked_add(ft.final_norm, norm_out), tokens)};
    const Bytes before_head = Bytes::saturating_sub(fwd_acts, head_saved);
    const Bytes at_mlp{mul(ft.mlp_out, tokens)};
    if (ft.has_mlp_moment && before_head + at_mlp > saved + transient) {
      saved = before_head;
      transient = at_mlp;
    }
    Acc layer = base;
    layer.id = PhaseId::forward_layer;
    layer.add(ComponentId::activations, saved);
    layer.add(ComponentId::temporaries, transient);
    layer.add(ComponentId::autocast_cache, fwd_copies);
    layer.add(ComponentId::gradients, held_grads);
    phases.push_back(layer);
  }

  Acc fwd = base;
  fwd.id = PhaseId::forward_end;
  fwd.add(ComponentId::activations, fwd_acts);
  fwd.add(ComponentId::autocast_cache, fwd_copies);
  fwd.add(ComponentId::logits, loss.forward_end);
  fwd.add(ComponentId::gradients, held_grads);
  phases.push_back(fwd);

  Acc bstart = base;
  bstart.id = PhaseId::backward_start;
  bstart.add(ComponentId::activations, acts);
  bstart.add(ComponentId::autocast_cache, kept_copies);
  bstart.add(ComponentId::gradients, held_grads);
  // The final norm's backward follows the loss's: every saved tensor but the lm_head's input
  // (freed with the loss's or the lm_head's backward), the lm_head's gradient (accumulated, or for
  // tied weights waiting for the embedding's), the norm's fp32 temporaries; the loss's own tensors
  // are freed. Where the loss builds no logits it is the larger (measured, results/loss.jsonl,
  // full training with cce: 14 h a token above the loss's backward).
  const Bytes head_grad{w.mode == Mode::train ? mul(m.lm_head_params ? m.lm_head_params : m.embedding_params, p.param) : 0};
  const Bytes norm_bwd{w.activation_offload ? 0 : mul(detail::forward_transient(m, w, p).norm_backward, tokens)};
  if (head_grad + norm_bwd > loss.backward_start + std::min(head_input, acts)) {
    bstart.parts = base.parts;  // rebuilt without the lm_head's input
    bstart.add(ComponentId::activations, acts - std::min(head_input, acts));
    bstart.add(ComponentId::autocast_cache, kept_copies);
    bstart.add(ComponentId::gradients, held_grads + head_grad);
    bstart.add(ComponentId::temporaries, norm_bwd);
  } else {
    bstart.add(ComponentId::logits, loss.backward_start);
  }
  if (loss.head_gradients + loss.head_temporaries > Bytes{}) {
    // A chunked loss's lm_head backward, after the loss's (engine/levers.cpp,
    // chunked_head_backward): the chunks' weight gradients summed beside the waiting logits
    // gradients, every saved tensor still alive.
    Acc lm = base;
    lm.id = PhaseId::backward_start;
    lm.add(ComponentId::activations, acts);
    lm.add(ComponentId::autocast_cache, kept_copies);
    lm.add(ComponentId::gradients, held_grads + loss.head_gradients);
    lm.add(ComponentId::logits, loss.head_logits);
    lm.add(ComponentId::temporaries, loss.head_temporaries);
    if (lm.total() > bstart.total()) bstart = lm;
  }
  phases.push_back(bstart);

  if (w.checkpointing) {
    // The last layer is recomputed first: its saved tensors exist with every layer input.
    Acc rec = base;
    rec.id = PhaseId::backward_recompute;
    rec.add(ComponentId::activations, (w.activation_offload ? Bytes{} : s.ckpt_acts) + s.one_layer + tower_saved);
    rec.add(ComponentId::autocast_cache, head_fixed + Bytes{s.one_layer_fixed});
    rec.add(ComponentId::temporaries, s.bwd_transient);
    rec.add(ComponentId::gradients, w.grad_accum > 1 ? t.grads
                         : Bytes{w.mode == Mode::train ? mul(m.lm_head_params, p.param) : 0});
    phases.push_back(rec);
  }

  // The end of backward: the first layer's saved tensors (or recompute) with nearly every
  // gradient, then the embedding's gradient (for tied weights a dense copy added into the
  // lm_head's .grad).
  // Optimizer in backward: each parameter is stepped and its gradient freed as soon as it is
  // accumulated, so backward holds one parameter's gradient and step temporaries (a tied
  // lm_head's gradient waits in autograd's InputBuffer for the embedding's until the end).
  const bool in_bwd = w.optimizer_in_backward;
  Acc last = base;
  last.id = PhaseId::backward_last_layer;
  last.add(ComponentId::gradients, in_bwd ? t.one_grad + (m.tied_embeddings ? t.embedding_grad : Bytes{})
                               : Bytes::saturating_sub(Bytes::saturating_sub(t.grads, t.embedding_grad), tower_grads));
  if (in_bwd) last.add(ComponentId::optimizer_step, t.one_step_temp);
  last.add(ComponentId::activations, s.one_layer + tower_saved);
  last.add(ComponentId::autocast_cache, Bytes{s.one_layer_fixed});
  last.add(ComponentId::temporaries, s.bwd_transient);
  phases.push_back(last);

  Acc end = base;
  end.id = PhaseId::backward_end;
  end.add(ComponentId::gradients, in_bwd ? t.one_grad : t.grads);
  if (in_bwd) end.add(ComponentId::optimizer_step, t.one_step_temp);
  Bytes emb_tmp{mul(tokens, m.hidden_size, p.compute)};
  // Tied weights: autograd's InputBuffer sums the lm_head's and the embedding's gradients
  // out of place before AccumulateGrad, so both inputs and the sum coexist (measured:
  // llama-3.2-1b fp32 SGD-momentum, backward end = grads + 2 x vocab x hidden fp32).
  // --fsdp-mixed-precision: the unsharded gradients are in param_dtype until FSDP2's
  // reduce-scatter copies a unit to reduce_dtype, so the two inputs and their sum are 16-bit
  // (then the sum beside its fp32 copy: the same bytes). Measured (tests/accuracy/levers,
  // llama-3.2-1b FSDP2 bf16 checkpointed, 2 ranks): backward end +8.5 % with fp32 inputs.
  // A chunked loss leaves autograd's own sum of the lm_head chunks' gradients in the buffer (a
  // fresh tensor): the embedding's is added to it in place (measured, levers/results/
  // chunked_probe.jsonl: one vocab x hidden allocation at the end of backward, two with the hf loss).
  if (m.tied_embeddings && w.mode == Mode::train)
    emb_tmp += w.fsdp_param_dtype ? Bytes{mul(m.embedding_params, 2, 3)}
                                  : t.embedding_grad * (loss.head_grad_summed ? 1 : 2);
  end.add(ComponentId::temporaries, emb_tmp);
  phases.push_back(end);

  if (!in_bwd) {
    Acc step = base;
    step.id = PhaseId::optimizer_step;
    step.add(ComponentId::gradients, t.grads);
    step.add(ComponentId::optimizer_step, t.step_temp);
    phases.push_back(step);
  }
  shard(phases, m, w, p);
  return finish(m, std::move(phases), base.total(), w, std::move(notes), paged_share(t.paged_state, w), history);
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
constexpr std::array<ShardRule, 10> kShardRules{{
    {spec::Sharding::none, false, false, false, false},
    {spec::Sharding::ddp, false, false, false, false},
    {spec::Sharding::zero1, false, false, true, false},
    {spec::Sharding::zero2, false, true, true, false},
    {spec::Sharding::zero3, true, true, true, false},
    {spec::Sharding::fsdp, true, true, true, false},
    // FSDP shard-grad-op (reshard_after_forward=False): sharded like full shard; the
    // parameters gathered in forward stay until backward (sharding_buffers).
    {spec::Sharding::fsdp_grad_op, true, true, true, false},
    {spec::Sharding::tp, true, true, true, true},
    {spec::Sharding::pp, false, false, false, false},  // pipeline(): stages, not a divisor
    {spec::Sharding::device_map, true, true, true, true},
}};

const ShardRule& shard_rule(spec::Sharding s) {
  for (const auto& r : kShardRules)
    if (r.id == s) return r;
  return kShardRules[0];
}

// Parameters of the largest decoder layer: what FSDP/ZeRO-3 gathers at once, and a pipeline
// stage's unit.
std::uint64_t largest_layer_params(const ModelSpec& m) {
  std::uint64_t largest = 0;
  for (const auto& g : m.layers) {
    std::uint64_t one = checked_add(g.norm_params, g.other_params);
    for (const auto& l : g.linears) one = checked_add(one, l.params());
    largest = std::max(largest, one);
  }
  return largest;
}

Bytes ceil_div(Bytes b, std::uint64_t n) { return Bytes{n <= 1 ? b.value() : b.value() / n + (b.value() % n ? 1 : 0)}; }

bool part_is(ComponentId k, std::initializer_list<ComponentId> ids) {
  return std::find(ids.begin(), ids.end(), k) != ids.end();
}

// Pipeline parallelism (one stage per GPU, the 1F1B schedule of GPipe/PipeDream-Flush as
// Megatron-LM and torch.distributed.pipelining run it): each stage holds ceil(L/S) layers'
// parameters, gradients and state, the first also the embedding, the last the lm_head. Stage
// s keeps the activations of min(S - s, micro-batches) micro-batches in flight, so the first
// stage holds S micro-batches of its L/S layers (about one micro-batch of the whole model)
// and the last stage one micro-batch plus the logits. The busier of the two decides.
void pipeline(std::vector<Acc>& phases, const ModelSpec& m, const Workload& w) {
  const std::uint64_t stages = w.world();
  const std::uint64_t layers = std::max<std::uint64_t>(m.num_layers, 1);
  const std::uint64_t per_stage = (layers + stages - 1) / stages;
  const std::uint64_t layer_params = largest_layer_params(m);
  const std::uint64_t total = std::max<std::uint64_t>(m.params, 1);
  // Shares of the model's parameters on the first and last stages, in millionths.
  const auto share = [&](std::uint64_t edge) {
    return std::min<std::uint64_t>(1000000, mul(checked_add(mul(per_stage, layer_params), edge), 1000000) / total);
  };
  const std::uint64_t first_share = share(m.embedding_params);
  const std::uint64_t last_share = share(m.lm_head_params ? m.lm_head_params : m.embedding_params);
  const std::uint64_t in_flight = std::min(stages, w.grad_accum);
  // One stage's view of a phase: its share (millionths) of the model's parameters, its layers'
  // activations times the micro-batches it holds, and the logits only on the last stage.
  const auto stage = [&](Acc ph, std::uint64_t millionths, std::uint64_t micro_batches, bool logits) {
    for (auto& [k, v] : ph.parts) {
      if (part_is(k, {ComponentId::weights, ComponentId::gradients, ComponentId::optimizer_state,
                      ComponentId::optimizer_step, ComponentId::lora_adapters}))
        v = Bytes{v.value() / 1000000 * millionths + v.value() % 1000000 * millionths / 1000000};
      if (part_is(k, {ComponentId::activations, ComponentId::autocast_cache, ComponentId::kv_cache}))
        v = Bytes{mul(v.value() / layers, per_stage, micro_batches)};
      if (k == ComponentId::logits && !logits) v = Bytes{};
    }
    return ph;
  };
  for (auto& ph : phases) {
    const Acc first = stage(ph, first_share, in_flight, false);
    const Acc last = stage(ph, last_share, 1, true);
    ph = first.total() >= last.total() ? first : last;
  }
}

// A paged optimizer's state is optimizer state like any other: ZeRO and FSDP shard it (each
// rank's optimizer holds its shard's state; bitsandbytes pages what the rank owns), and
// ZeRO-Offload keeps it on the host.
Bytes paged_share(Bytes paged, const Workload& w) {
  if (w.sharding == spec::Sharding::none || w.sharding == spec::Sharding::pp) return paged;
  if (w.offload != spec::Offload::none) return Bytes{};
  if (!shard_rule(w.sharding).state) return paged;
  const bool data_parallel = w.sharding != spec::Sharding::tp && w.sharding != spec::Sharding::device_map;
  return ceil_div(paged, data_parallel ? w.world() : w.gpus);
}

// Rewrites every phase into the figure of the busiest GPU.
void shard(std::vector<Acc>& phases, const ModelSpec& m, const Workload& w, const Precision& p) {
  if (w.sharding == spec::Sharding::none) return;
  if (w.sharding == spec::Sharding::pp) return pipeline(phases, m, w);
  // ZeRO and FSDP shard over every GPU of every node; tensor parallelism and device_map split
  // over the GPUs of one node (across nodes, tensor-parallel groups are data-parallel replicas).
  const bool data_parallel = w.sharding != spec::Sharding::tp && w.sharding != spec::Sharding::device_map;
  const std::uint64_t n = data_parallel ? w.world() : w.gpus;
  const ShardRule& rule = shard_rule(w.sharding);
  const std::uint64_t layer_params = largest_layer_params(m);
  // FSDP gathers in the MixedPrecisionPolicy's param_dtype when one is set (engine/levers);
  // its unsharded gradients are reduce-scattered from a copy in reduce_dtype (fp32: the
  // stored dtype).
  const std::uint64_t gathered = detail::gathered_param_bytes(w, p);
  const Bytes layer_bytes{mul(layer_params, gathered)};
  // Only trained parameters have gradients to reduce: LoRA's frozen base has none (its
  // adapters' are negligible).
  const Bytes reduce_bytes{w.mode == Mode::train ? mul(layer_params, p.param) : 0};
  // The busiest GPU of a layer split also holds the larger of the embedding and lm_head.
  const Bytes edge{mul(std::max(m.embedding_params, m.lm_head_params), p.param)};
  const Bytes root_bytes{mul(checked_add(checked_add(m.embedding_params, m.lm_head_params), m.final_norm_params), gathered)};
  const bool offload_state = w.offload != spec::Offload::none;
  const bool offload_params = w.offload == spec::Offload::params;
  for (auto& ph : phases) {
    Bytes grads;
    Bytes weights;
    for (auto& [k, v] : ph.parts) {
      const bool split =
          (k == ComponentId::weights && rule.weights) || (k == ComponentId::gradients && rule.grads) ||
          (part_is(k, {ComponentId::optimizer_state, ComponentId::optimizer_step}) && rule.state) ||
          (part_is(k, {ComponentId::activations, ComponentId::kv_cache, ComponentId::autocast_cache}) &&
           rule.activations && w.sharding == spec::Sharding::tp) ||
          (k == ComponentId::kv_cache && w.sharding == spec::Sharding::device_map) ||
          (k == ComponentId::lora_adapters && rule.weights);
      if (k == ComponentId::gradients) grads = v;
      if (k == ComponentId::weights) weights = v;
      if (split) v = ceil_div(v, n);
      if (k == ComponentId::weights && w.sharding == spec::Sharding::device_map) v += edge;
      // ZeRO-Offload: the optimizer's state and step run on the CPU, and each reduced
      // gradient partition is copied out (DeepSpeed's estimator: 2 bytes per parameter on the
      // GPU for stage 2 with offload_optimizer); offload_param moves the parameters too.
      if (offload_state && part_is(k, {ComponentId::optimizer_state, ComponentId::optimizer_step, ComponentId::gradients}))
        v = Bytes{};
      if (offload_params && k == ComponentId::weights) v = Bytes{};
    }
    const bool backward = info(ph.id).backward && w.trains();
    switch (w.sharding) {
      case spec::Sharding::ddp:
        if (w.trains()) ph.add(ComponentId::sharding_buffers, grads.value() ? grads : Bytes{mul(m.params, p.param)});
        break;
      case spec::Sharding::zero3:
        // The gathered layer and the prefetched next one; in backward also its full gradients.
        ph.add(ComponentId::sharding_buffers, layer_bytes * (backward ? 3 : 2));
        break;
      case spec::Sharding::fsdp:
        // As ZeRO-3, and FSDP2 never reshards the root module after forward (its parameters
        // would be gathered again at once for backward): the embedding, lm_head and final norm
        // stay whole from forward to the end of backward. Measured on 2 and 4 ranks
        // (tests/accuracy/sharded): without it, full shard was 0.2-0.5 GiB low.
        ph.add(ComponentId::sharding_buffers, layer_bytes * 2 + (backward ? reduce_bytes : Bytes{}));
        if (ph.id != PhaseId::optimizer_step) ph.add(ComponentId::sharding_buffers, root_bytes);
        break;
      case spec::Sharding::fsdp_grad_op:
        // reshard_after_forward=False: every layer gathered in forward stays gathered until its
        // backward, so forward's end and backward hold the whole unsharded model; the optimizer
        // step sees only the shards.
        if (ph.id != PhaseId::optimizer_step)
          ph.add(ComponentId::sharding_buffers,
                 (gathered == p.param ? weights : Bytes{weights.value() / p.param * gathered}) +
                     (backward ? reduce_bytes : Bytes{}));
        break;
      case spec::Sharding::zero1:
      case spec::Sharding::zero2:
        // DeepSpeed's reduce bucket (reduce_bucket_size, 5e8 elements by default), at most the gradients.
        if (w.trains()) ph.add(ComponentId::sharding_buffers, std::min(Bytes{mul(500000000, p.param)}, Bytes{mul(m.params, p.param)}));
        break;
      case spec::Sharding::tp:
        // Across nodes, tensor-parallel groups are replicas kept in step by DDP's buckets.
        if (w.trains() && w.nodes > 1) ph.add(ComponentId::sharding_buffers, ceil_div(grads, n));
        break;
      default: break;
    }
  }
}

Breakdown finish(const ModelSpec& m, std::vector<Acc> phases, Bytes resident, const Workload& w, std::vector<std::string> notes,
                 Bytes paged, ProcessHistory* history) {
  // The caching allocator's reserve; where the step is replayed through the allocator model,
  // also what memory_allocated() counts beyond the requested bytes in each phase: it adds each
  // block's size (c10/cuda/CUDACachingAllocator.cpp, alloc_found_block), and should_split leaves
  // a large-pool block whole when 1 MiB or less would remain (a 19 MiB tensor in a fresh 20 MiB
  // segment counts 20 MiB). detail::excess_at gives the replay's excess at that phase's region.
  Bytes requested_peak;
  for (const auto& ph : phases) requested_peak = std::max(requested_peak, ph.total());
  // The context (engine/context.hpp): in a process of its own, what this workload loads after CUDA
  // init (kernels, a cuDNN attention graph per SDPA shape); never below kCudaContext, the allowance
  // for a typical process that ran other work before (the median over shared/truth's processes).
  // In a process with history (estimate_in_process), the history's context after this case.
  // Computed first: on a card of w.device_memory, the allocator can reserve what the context leaves.
  ContextState fresh;
  const std::uint64_t shapes = add_workload(fresh, m, w);
  const Bytes alone = context_bytes(fresh);
  Bytes context = std::max(kCudaContext, alone);
  if (history) {
    (void)add_workload(history->context, m, w);
    context = context_bytes(history->context);
  }
  context = w.cuda_context.value_or(context);
  // A card smaller than its context leaves the allocator nothing: 1 byte, so the replay runs out.
  const std::uint64_t capacity =
      w.device_memory == 0 ? 0 : std::max<std::uint64_t>(w.device_memory - std::min(w.device_memory, context.value()), 1);
  const detail::Reserve reserve =
      detail::allocator_reserve(m, w, phases, requested_peak, resident, history, capacity);
  if (reserve.replayed)
    for (auto& ph : phases)
      if (const Bytes x = detail::excess_at(reserve, ph.id); x.value() > 0) ph.add(ComponentId::block_rounding, x);
  Breakdown b;
  const Acc* peak = &phases.front();
  for (const auto& ph : phases) {
    b.phases.push_back({ph.id, ph.total(), ph.part(ComponentId::block_rounding)});
    if (ph.total() > peak->total()) peak = &ph;
  }
  b.peak_phase = peak->id;
  b.peak_allocated = peak->total();
  // The parts allocated within the step, in report order, as the peak phase holds them.
  for (const auto& c : kComponents)
    if (c.per_phase) b.components.push_back({c.id, peak->part(c.id), std::string(c.description), true});
  for (auto& c : b.components)
    if (c.id == ComponentId::kv_cache && c.bytes.value() > 0) c.description = kv_cache_description(m, w);
  // --lora-dtype: peft's get_peft_model(..., autocast_adapter_dtype=False) leaves the adapters
  // in the base weights' 16-bit dtype (the bytes above count 2 per parameter).
  if (w.lora.half_adapters)
    for (auto& c : b.components)
      if (c.id == ComponentId::lora_adapters)
        c.description = fmt::format("LoRA A and B matrices ({}, --lora-dtype: peft autocast_adapter_dtype=False)",
                                    w.lora.half_is_fp16 ? "fp16" : "bf16");
  b.allocator_reserve = reserve.bytes;
  b.cuda_context = context;
  if (reserve.alloc_retries > 0)
    notes.push_back(fmt::format(
        "allocator_reserve: on this card's {:.2f} GiB the caching allocator runs out of room {} time(s) over the 3 "
        "steps replayed, frees its cached segments and retries (torch.cuda.memory_stats()['num_alloc_retries']): "
        "the job runs, with a device synchronization at each retry; its reserve is what the card leaves",
        static_cast<double>(w.device_memory) / 1073741824.0, reserve.alloc_retries));
  std::string context_description(info(ComponentId::cuda_context).description);
  if (!w.cuda_context && !history && alone > kCudaContext) {
    const Bytes plans{detail::mul(shapes, kCudnnPlan.value())};
    context_description += fmt::format("; cuDNN attention plans: {} shapes x {} KiB", shapes, kCudnnPlan.value() >> 10);
    notes.push_back(fmt::format(
        "cuda_context {:.1f} MiB: CUDA context after init {:.1f} MiB, kernels {:.1f} MiB and cuDNN attention plans: {} "
        "shapes x {} KiB = {:.1f} MiB (PyTorch's SDPA keeps one compiled cuDNN graph per attention shape for the life "
        "of the process, and each generated token attends over one more key; with "
        "torch.backends.cuda.enable_cudnn_sdp(False) flash attention runs it and builds none, as --attention eager); above "
        "the {:.1f} MiB allowed for a typical process",
        static_cast<double>(alone.value()) / 1048576.0, static_cast<double>(kContextAfterInit.value()) / 1048576.0,
        static_cast<double>((alone - kContextAfterInit - plans).value()) / 1048576.0, shapes, kCudnnPlan.value() >> 10,
        static_cast<double>(plans.value()) / 1048576.0, static_cast<double>(kCudaContext.value()) / 1048576.0));
  }
  b.components.push_back({ComponentId::allocator_reserve, b.allocator_reserve,
                          std::string(info(ComponentId::allocator_reserve).description), false});
  b.components.push_back({ComponentId::cuda_context, b.cuda_context, std::move(context_description), false});
  b.device_total = b.peak_allocated + b.allocator_reserve + b.cuda_context;
  if (paged.value() > 0) {
    b.components.push_back({ComponentId::paged_optimizer_state, paged,
                            std::string(info(ComponentId::paged_optimizer_state).description), false});
    b.device_total += paged;
    notes.emplace_back("the paged optimizer's state is in unified memory: resident on the GPU while it fits, "
                       "paged out to the host when the GPU runs short (slower steps, not an OOM)");
  }
  if (w.cuda_context)
    notes.push_back(fmt::format("--cuda-context: {} outside PyTorch's allocator per GPU, as given", w.cuda_context->value()));
  if (w.alloc.async_backend)
    notes.push_back(
        "backend:cudaMallocAsync: the driver's memory pool replaces the caching allocator; its reserve is not modelled "
        "and is taken as the native allocator's (check the upper bound)");
  if (reserve.replayed && (w.alloc.max_split_size_mb != 0 || w.alloc.roundup_power2_divisions != 0))
    notes.push_back(fmt::format("{}: the allocator reserve is the step's allocations replayed through the allocator "
                                "model with these settings (garbage_collection_threshold only acts at the card's limit)",
                                alloc_conf_string(w)));
  else if (w.alloc.max_split_size_mb != 0 || w.alloc.roundup_power2_divisions != 0 ||
           w.alloc.garbage_collection_threshold != 0)
    notes.push_back(fmt::format(
        "{}: the estimate's allocator reserve does not model these settings (it is the default allocator's); only "
        "single-GPU full training and generation are replayed through the allocator model",
        alloc_conf_string(w)));
  b.notes = std::move(notes);
  return b;
}

}  // namespace

std::uint64_t compute_bytes(const Workload& w) { return detail::precision_of(w).compute; }

LossLogits loss_logits(const ModelSpec& m, const Workload& w, std::uint64_t tokens) {
  return {Bytes{mul(tokens, m.vocab_size, compute_bytes(w))}, Bytes{mul(tokens, m.vocab_size, 4)}};
}

std::vector<NamedTensor> single_requests(const ModelSpec& m, const Workload& given) {
  // --images: the logits and scores cover the image tokens too (as in estimate()).
  Workload w = given;
  if (given.images > 0 && m.vision)
    w.seq = checked_add(given.seq, spec::image_work(*m.vision, given.images, given.image_width, given.image_height).prompt_tokens);
  std::vector<NamedTensor> out;
  // Each size on its own: one that overflows 64 bits is left out, the others stay.
  const auto add = [&](std::string name, const auto& size) {
    try {
      out.push_back({std::move(name), size()});
    } catch (const InputError&) {
    }
  };
  const auto logits = [&] { return loss_logits(m, w, mul(w.batch, w.seq)); };
  add("logits_fp32", [&] { return logits().fp32; });
  add("logits", [&] { return logits().compute; });
  // Eager attention materialises batch x heads x seq x seq scores (SDPA's fused kernels never do).
  if (w.attention == spec::Attention::eager)
    add("attention_scores", [&] { return Bytes{mul(mul(w.batch, m.num_heads), mul(w.seq, w.seq), compute_bytes(w))}; });
  return out;
}

// --images: what the vision tower holds at its peak while it encodes the images of the batch
// (inference_mode; measured in tests/accuracy/vision, vision tower alone). Per tower token (the
// patches of every sequence through the tower, spec::image_load): the input pixels, three
// hidden-width tensors (residual, normed input, attention or MLP output) and the MLP's live
// width-I tensors (VisionSpec::mlp_live); llava-style towers run with output_hidden_states=True
// and keep every layer's hidden states until they return; eager attention adds one sequence's
// scores, softmax (fp32) and cast per head.
Bytes tower_activations(const spec::VisionSpec& v, const spec::ImageWork& iw, const Workload& w,
                        const Precision& p) {
  const std::uint64_t seqs = mul(w.batch, iw.images, iw.per_image.sequences);
  const std::uint64_t tokens = mul(seqs, iw.per_image.sequence_len);
  std::uint64_t per_token = checked_add(mul(v.pixels_per_patch, p.compute),
                                        mul(p.compute, checked_add(mul(3, v.hidden), mul(v.mlp_live, v.intermediate))));
  if (v.keeps_hidden_states) per_token = checked_add(per_token, mul(checked_add(v.layers, 1), v.hidden, p.compute));
  Bytes b{mul(tokens, per_token)};
  if (w.attention == spec::Attention::eager) {
    const std::uint64_t s = iw.per_image.sequence_len;
    b += Bytes{mul(mul(seqs, v.heads), mul(s, s), checked_add(mul(2, p.compute), 4))};
  }
  return b;
}

// --images, full training: what the vision tower saves for its backward, per layer and tower
// token (autograd's saved tensors of a pre-norm ViT layer: both norms' inputs and outputs, q, k,
// v, the attention output and its reshaped copy for the output projection: 8 hidden widths; the
// MLP's VisionSpec::mlp_saved widths); eager attention its probabilities per head. Under
// gradient checkpointing (transformers enables it on the tower too) each layer's input only.
// Measured: llava-small 1 image, full fine-tuning, forward peak of step 2 (tests/accuracy/vision).
Bytes tower_saved_activations(const spec::VisionSpec& v, const spec::ImageWork& iw, const Workload& w,
                              const Precision& p) {
  const std::uint64_t seqs = mul(w.batch, iw.images, iw.per_image.sequences);
  const std::uint64_t tokens = mul(seqs, iw.per_image.sequence_len);
  if (w.checkpointing) return Bytes{mul(mul(tokens, v.layers), v.hidden, p.compute)};
  Bytes b{mul(mul(tokens, v.layers), p.compute, checked_add(mul(8, v.hidden), mul(v.mlp_saved, v.intermediate)))};
  if (w.attention == spec::Attention::eager) {
    const std::uint64_t s = iw.per_image.sequence_len;
    b += Bytes{mul(mul(seqs, v.heads), mul(mul(s, s), v.layers), checked_add(p.compute, 4))};
  }
  return b;
}

namespace {

Breakdown estimate_with(const ModelSpec& m, const Workload& given, ProcessHistory* history) {
  // --images: the image tokens join each sequence's prompt (spec::image_work); from here on
  // `w.seq` is the whole sequence the language model sees.
  Workload w = given;
  std::optional<spec::ImageWork> images;
  if (given.images > 0 && m.vision) {
    images = spec::image_work(*m.vision, given.images, given.image_width, given.image_height);
    w.seq = checked_add(given.seq, images->prompt_tokens);
  }
  // The packing is the spec's (spec::set_packing, spec::resolve_packing): the weights' dtype
  // is the scheme's packed dtype, and spec::scheme_of gives a packed dtype's default scheme.
  if (w.quant.method != spec::QuantMethod::none && w.weights != spec::packed_dtype(w.quant))
    throw std::logic_error(fmt::format("engine::estimate: weights {} disagree with the scheme {} (use spec::set_packing)",
                                       vramfit::name_of(w.weights), spec::name_of(w.quant)));
  detail::refuse_linear_attention_training(m, w);
  const Precision p = detail::precision_of(w);
  std::vector<std::string> notes;
  Acc base;
  base.id = PhaseId::load;
  base.add(ComponentId::weights, detail::weight_bytes(m, w, p.param));
  const std::uint64_t adapters = lora_params(m, w);
  if (adapters) base.add(ComponentId::lora_adapters, Bytes{mul(adapters, w.lora.half_adapters ? 2 : 4)});
  base.add(ComponentId::cublas_workspace, kCublasWorkspace);
  if (p.quantized) {
    // bitsandbytes / GPTQ kernels dequantize one linear's weight to 16 bits per matmul
    // (bitsandbytes MatMul4Bit: F.dequantize_4bit(B).to(A.dtype)), in forward and backward.
    base.add(ComponentId::temporaries, detail::dequant_buffer(m));
    notes.emplace_back("quantized weights: packed sizes follow the formats (block scales included); the "
                       "kernels' own buffers beyond one dequantized weight are not measured");
    if (spec::scheme_of(w).method == spec::QuantMethod::gguf)
      notes.emplace_back("GGUF weights are sized as llama.cpp stores them; the rest follows PyTorch's allocations "
                         "(llama.cpp's own compute buffers differ), and transformers dequantizes GGUF files on load: "
                         "--dtype bf16 estimates that");
  }

  Bytes tower;
  Bytes tower_saved;
  if (images) {
    tower = tower_activations(*m.vision, *images, w, p);
    notes.push_back(fmt::format(
        "{} image{} of {}x{} per sequence: {} tokens each joined the prompt ({} text + {} = {} tokens); the vision "
        "tower's activations ({} sequence{} of {} tokens per image) peak before the language model runs",
        images->images, images->images == 1 ? "" : "s", images->per_image.width, images->per_image.height,
        images->per_image.prompt_tokens, given.seq, images->prompt_tokens, w.seq, images->per_image.sequences,
        images->per_image.sequences == 1 ? "" : "s", images->per_image.sequence_len));
    if (w.mode == Mode::train && !w.activation_offload)
      tower_saved = tower_saved_activations(*m.vision, *images, w, p);
    if (spec::uses_lora(w.mode))
      notes.push_back("LoRA with images: adapters on the vision tower's linears (peft's all-linear targets them too) "
                      "and the tower's saved activations are not counted, only its forward");
  }
  if (w.sharding != spec::Sharding::none)
    notes.push_back(fmt::format("per-GPU figures for the busiest of {} GPUs{} with {}: sharding follows the "
                                "ZeRO/FSDP/TP/pipeline rules (not measured on several GPUs)",
                                w.world(), w.nodes > 1 ? fmt::format(" ({} nodes)", w.nodes) : "",
                                spec::name_of(w.sharding)));
  if (w.offload != spec::Offload::none)
    notes.push_back(fmt::format("--offload {}: {} host memory, not counted here", spec::name_of(w.offload),
                                w.offload == spec::Offload::params
                                    ? "parameters, gradients and optimizer state live in"
                                    : "optimizer state and gradient partitions live in"));

  Breakdown b = (w.mode == Mode::inference || w.mode == Mode::generate)
                    ? estimate_inference(m, w, p, base, notes, tower, history)
                    : estimate_training(m, w, p, base, adapters, notes, tower, tower_saved, history);
  // The upper bound: the measured error of the device total for this kind of workload.
  const UpperFactor f = upper_factor(w);
  b.upper_group = f.group;
  b.upper_from = f.from;
  b.upper_permille = f.permille;
  b.upper_cases = f.cases;
  b.device_total_upper = apply_upper(b.device_total, f.permille);
  return b;
}

}  // namespace

Breakdown estimate(const ModelSpec& m, const Workload& given) { return estimate_with(m, given, nullptr); }

Breakdown estimate_in_process(const ModelSpec& m, const Workload& given, ProcessHistory& history) {
  return estimate_with(m, given, &history);
}

}  // namespace vramfit::engine
