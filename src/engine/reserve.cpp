// The caching allocator's reserve: what PyTorch holds in freed blocks beyond the allocated peak.

#include "reserve.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <deque>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "activations.hpp"
#include "vramfit/engine/allocator.hpp"
#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/optimizers.hpp"
#include "vramfit/engine/process.hpp"
#include "vramfit/spec/architectures.hpp"

namespace vramfit::engine::detail {

namespace {

using spec::Mode;
using spec::Workload;

// The caching allocator's reserve above the allocated peak: the bytes it holds cached in freed
// blocks that the peak's own requests could not reuse (c10/cuda/CUDACachingAllocator.cpp: a
// request takes the best-fitting cached block of its pool, larger blocks are split, freed
// blocks merge only with free neighbours of the same segment, nothing goes back to the driver
// within a step). Two kinds of freed blocks differ in how well they are reused:
//  - the loss's logits-sized tensors (the logits, their fp32 copy, log-softmax and its
//    gradient): each is one block above 10 MiB with a segment of its own (its size rounded to
//    2 MiB), allocated and freed in an order where a cached one is rarely the size the next
//    request needs (a bf16 block cannot hold the fp32 copy; two of them are alive at once in
//    backward), so a share of them stays cached at the peak;
//  - the layers' activations and temporaries: many blocks of a few sizes repeated per layer, that
//    later layers reuse; with checkpointing the recomputed layer's blocks come on top of the
//    saved inputs, without it the activations are alive at the peak (not cached).
// LoRA, and full training where training_reserve does not replay it (single GPU, peak while the
// activations are alive): reserve = L x logits +
// A x the rest of the transient memory, in thousandths (fitted per mode on shared/truth and
// tests/accuracy/alloc/snapshots, the H200 _snapshot() runs; snapshots show the logits-sized
// segments as the largest ones cached at the peak):
//                      default L, A     expandable_segments:True L, A
//    train              280,   0            160,   0
//    train + ckpt       140, 270            340,  20
//    LoRA               100,  90            100,  70
//    LoRA + ckpt        220, 250            160, 290
//  Measured reserve / logits part for LoRA + ckpt: 0.19 .. 0.33 over 11 public cases.
// Inference and generation: the share of the transient memory that stays reserved (medians over
// shared/truth of (peak_reserved - peak_allocated) / (peak_allocated - resident)): inference
// 548, generate 349 thousandths (generation is replayed instead, generate_reserve below, except
// with a quantized cache, MoE layers or several GPUs): the freed layer blocks stay cached when the larger logits (or
// the grown KV cache) take new segments. With expandable_segments:True the freed tail of the
// one segment is extended in place for them: the reserve is the page rounding (20 MiB), as
// measured (forward and generate _snapshot() runs: 13 to 224 MiB reserved beyond the peak).
// Phases after backward freed the activations (its end, the optimizer step): the freed activation
// blocks stay cached while gradients and step temporaries of other sizes take new segments: 750
// thousandths of what backward started with (median over the 22 cases of shared/truth and
// tests/accuracy/h200 whose peak is there: 0.75, quartiles 0.57, 0.88).
// `peak` is the phase the reserve is computed for.
Bytes reserve_for(const Workload& w, const Acc& peak, const std::vector<Acc>& phases, Bytes resident) {
  const Bytes transient = Bytes::saturating_sub(peak.total(), resident);
  const bool after_backward = peak.id == PhaseId::backward_end || peak.id == PhaseId::backward_last_layer ||
                              peak.id == PhaseId::optimizer_step;
  if (!w.trains() && w.expandable_segments) return Bytes{20ULL << 20};  // one 20 MiB page of the large pool
  if (w.trains() && !after_backward && w.sharding == spec::Sharding::none) {
    const Bytes logits = peak.part(ComponentId::logits);
    const Bytes rest = Bytes::saturating_sub(transient, logits);
    struct Pair {
      std::uint64_t logits, rest;
    };
    const bool lora = spec::uses_lora(w.mode);
    const bool ckpt = w.checkpointing;
    Pair f = lora ? (ckpt ? Pair{220, 250} : Pair{100, 90}) : (ckpt ? Pair{140, 270} : Pair{280, 0});
    if (w.expandable_segments) f = lora ? (ckpt ? Pair{160, 290} : Pair{100, 70}) : (ckpt ? Pair{340, 20} : Pair{160, 0});
    return (Bytes{logits.value() / 1000 * f.logits} + Bytes{rest.value() / 1000 * f.rest}).round_up(kSegmentRound);
  }
  if (w.mode == Mode::inference && w.sharding == spec::Sharding::none) {
    // A forward pass: every layer's freed blocks stay cached (later layers reuse them) when the
    // logits, larger than any of them, take a segment of their own, so the reserve at the logits
    // is the layers' largest transient memory, plus 300 thousandths of the logits (fitted).
    // Measured reserve over that layer transient: 0.8 .. 1.4 on the long-sequence forwards of
    // tests/accuracy/alloc/snapshots (qwen2.5-0.5b s32768: 1466 MiB for 1136 MiB). On
    // shared/truth forward, median |device error| 4.60 -> 3.94 %, under by > 5 % 18.4 -> 7.9 %.
    Bytes layers;
    for (const auto& ph : phases)
      if (ph.id != PhaseId::forward_logits) layers = std::max(layers, Bytes::saturating_sub(ph.total(), resident));
    const Bytes logits = peak.part(ComponentId::logits);
    return (layers + Bytes{logits.value() / 1000 * 300}).round_up(kSegmentRound);
  }
  std::uint64_t permille = 70;
  if (w.mode == Mode::inference) permille = 548;
  if (w.mode == Mode::generate) permille = 349;
  if (spec::uses_lora(w.mode)) permille = 183;
  // Data-parallel training keeps more in reserve: DDP's gradient buckets, and FSDP's
  // all-gather and reduce-scatter streams, whose freed blocks the compute stream cannot reuse.
  // Medians over tests/accuracy/sharded (peak_reserved - peak_allocated over the transient
  // memory): DDP 156 thousandths (21 cases), FSDP full shard and shard-grad-op 350 (36 cases).
  if (w.trains() && w.sharding == spec::Sharding::ddp) permille = 156;
  if (w.trains() && (w.sharding == spec::Sharding::fsdp || w.sharding == spec::Sharding::fsdp_grad_op ||
                     w.sharding == spec::Sharding::zero3))
    permille = 350;
  Bytes basis = transient;
  if (w.trains() && after_backward) {
    for (const auto& ph : phases)
      if (ph.id == PhaseId::backward_start)
        basis = ph.part(ComponentId::activations) + ph.part(ComponentId::autocast_cache) + ph.part(ComponentId::logits);
    permille = 750;
  }
  // expandable_segments:True for sharded training and the phases after backward:
  // shared/truth/results/expandable-segments.jsonl (10 training cases): the median reserve
  // ratio drops from 70 to 55 thousandths.
  if (w.expandable_segments) permille = permille * 55 / 70;
  return Bytes{basis.value() / 1000 * permille}.round_up(kSegmentRound);
}

const Acc* phase_of(const std::vector<Acc>& phases, PhaseId id) {
  for (const auto& ph : phases)
    if (ph.id == id) return &ph;
  return nullptr;
}

// The workload's PYTORCH_CUDA_ALLOC_CONF as the allocator model takes it.
AllocConf alloc_conf(const Workload& w) {
  AllocConf c;
  c.expandable_segments = w.expandable_segments;
  if (w.alloc.max_split_size_mb != 0) c.max_split_size = w.alloc.max_split_size_mb << 20;
  c.roundup_power2_divisions = static_cast<std::uint32_t>(std::min<std::uint64_t>(w.alloc.roundup_power2_divisions, 1U << 16));
  return c;
}

// The bytes of one tensor of `width` values per token over the batch, in the compute dtype.
std::uint64_t tokens_bytes(const Workload& w, std::uint64_t width) {
  return checked_mul(checked_mul(checked_mul(w.batch, w.seq), width), precision_of(w).compute);
}

// The replays below are pure functions of the sizes and settings they read, and the advisor, the
// tier search and fit --solve estimate one workload many times (vramfit estimate --model
// llama-3.1-8b --mode train --gpu h100-80gb: 32 replays, 30 of them the same): the last results
// are kept per thread, keyed by every value the replay reads and compared whole (no hash, so no
// collision can return another workload's reserve).
template <class F>
Reserve memoized(std::vector<std::uint64_t> key, F&& replay) {
  struct Entry {
    std::vector<std::uint64_t> key;
    Reserve value;
  };
  constexpr std::size_t kEntries = 16;
  thread_local std::deque<Entry> cache;
  for (const auto& e : cache)
    if (e.key == key) return e.value;
  const Reserve value = replay();
  if (cache.size() == kEntries) cache.pop_front();
  cache.push_back({std::move(key), value});
  return value;
}

// What a replay gives: the reserve beyond its allocated peak.
Reserve replayed(const CachingAllocator& a) {
  Reserve r;
  r.bytes = Bytes{a.peak_reserved() - a.peak_allocated()};
  r.replayed = true;
  r.oom = a.oom();
  r.alloc_retries = a.alloc_retries();
  return r;
}

void append_conf(std::vector<std::uint64_t>& key, const AllocConf& c) {
  key.insert(key.end(), {c.expandable_segments ? 1U : 0U, c.max_split_size, c.roundup_power2_divisions,
                         std::bit_cast<std::uint64_t>(c.garbage_collection_threshold)});
}

// cuBLAS's workspace on sm90 (aten/src/ATen/cuda/CublasHandlePool.cpp: 4096 KiB x 8): the
// backward thread's, allocated through the caching allocator at the process's first backward.
constexpr std::uint64_t kBackwardWorkspace = 32ULL << 20;

// A process that ran earlier cases (engine::ProcessHistory): the segment its backward thread's
// cuBLAS workspace pins, made in a fresh allocator before the case's build, the workspace kept at
// its offset and the rest of the segment free for the case's requests (best fit takes them there
// as it took them in the recorded process). Returns whether anything was pinned. Not with
// expandable segments (one growing segment per pool: not this placement).
bool seed_history(CachingAllocator& a, const ProcessHistory* h, const Workload& w) {
  if (h == nullptr || h->pinned_segment == 0 || a.segments() != 0 || alloc_conf(w).expandable_segments) return false;
  a.free(a.malloc(h->pinned_segment));
  const std::uint64_t before = h->pinned_offset > CachingAllocator::kSmallSize ? h->pinned_offset : 0;
  const CachingAllocator::Handle pre = before > 0 ? a.malloc(before) : CachingAllocator::Handle{};
  (void)a.malloc(kBackwardWorkspace);
  if (before > 0) a.free(pre);
  return true;
}

// The memo key of a replay after `h` (nothing for a process of its own, so those keys are unchanged).
void append_history(std::vector<std::uint64_t>& key, const ProcessHistory* h) {
  if (h != nullptr) key.insert(key.end(), {1U, h->pinned_segment, h->pinned_offset});
}

struct LayerSizes {
  std::uint64_t hidden, q, kv, inter;
};

// The model's parameters as the process that runs the workload made them: measure.py builds the
// model with AutoModelForCausalLM.from_config under torch.device("cuda"), so transformers allocates
// each parameter on the GPU as its module is constructed (then initialises it in place): the token
// embedding, the position table (gpt2), each decoder layer's linears in module order with their
// biases, the norms, the final norm, the lm_head (a tied one is allocated, then freed when tied:
// its segment goes back at the empty_cache() before the case). Recorded builds (H200, torch 2.11,
// transformers 5.17; tests/accuracy/alloc/fresh): this order exactly, and the free bytes they leave
// cached, which the workload's own requests rarely fit: qwen2.5-1.5b bf16 175 MiB in the large pool
// (each 26.25 MiB MLP weight in a 28 MiB segment, 4.5 MiB q/o weights in 20 MiB segments) + 14.7 in
// the small pool, llama-3.1-8b 128 (8 MiB k/v weights two to a 20 MiB segment), gpt2 10.8.
// Returns false (nothing allocated) for weights this order does not describe (quantized, MoE).
bool replay_build(CachingAllocator& a, const spec::ModelSpec& m, const Precision& p) {
  if (p.quantized || std::any_of(m.layers.begin(), m.layers.end(), [](const auto& g) { return g.moe; })) return false;
  const std::uint64_t e = p.param;
  const std::uint64_t tokens = checked_mul(checked_mul(m.vocab_size, m.hidden_size), e);
  const std::uint64_t embed = checked_mul(m.embedding_params, e);
  a.malloc(std::min(tokens, embed));
  if (embed > tokens) a.malloc(embed - tokens);  // the position table
  for (const auto& g : m.layers)
    for (std::uint64_t i = 0; i < g.count; ++i) {
      for (const auto& l : g.linears) {
        a.malloc(checked_mul(checked_mul(checked_mul(l.in_features, l.out_features), l.copies), e));
        if (l.bias) a.malloc(checked_mul(checked_mul(l.out_features, l.copies), e));
      }
      a.malloc(checked_mul(g.norm_params + g.other_params, e));
    }
  a.malloc(checked_mul(m.final_norm_params, e));
  a.malloc(m.buffer_bytes);
  a.malloc(checked_mul(m.lm_head_params, e));
  return true;
}

// The key of replay_build's allocations, for the memo.
void append_build(std::vector<std::uint64_t>& key, const spec::ModelSpec& m, const Precision& p) {
  key.insert(key.end(), {p.param, p.quantized ? 1U : 0U, m.vocab_size, m.hidden_size, m.embedding_params,
                         m.final_norm_params, m.buffer_bytes, m.lm_head_params, m.layers.size()});
  for (const auto& g : m.layers) {
    key.insert(key.end(), {g.count, g.moe ? 1U : 0U, g.norm_params, g.other_params, g.linears.size()});
    for (const auto& l : g.linears) key.insert(key.end(), {l.in_features, l.out_features, l.copies, l.bias ? 1U : 0U});
  }
}

// One forward pass over the decoder layers, op by op as a pre-norm layer allocates in eager
// PyTorch (the real trace of gpt2-medium b32 s256 n256 on the H200 shows this order): norm, q,
// k, v, rotated q and k, attention output and its reshaped copy, o_proj, the residual sum; norm,
// gate, up, act, act * up, down, the residual sum. With `keys`/`values` each layer's keys and
// values stay allocated (a KV cache), else they are freed after attention. Returns the last
// hidden states (still allocated).
CachingAllocator::Handle replay_layers(CachingAllocator& a, const LayerSizes& z, std::uint64_t layers,
                                       std::vector<CachingAllocator::Handle>* keys,
                                       std::vector<CachingAllocator::Handle>* values) {
  const auto free_all = [&](std::initializer_list<CachingAllocator::Handle> hs) {
    for (const auto h : hs) a.free(h);
  };
  auto h = a.malloc(z.hidden);
  for (std::uint64_t l = 0; l < layers; ++l) {
    const auto ln1 = a.malloc(z.hidden), qp = a.malloc(z.q), kp = a.malloc(z.kv), v = a.malloc(z.kv);
    const auto qr = a.malloc(z.q), kr = a.malloc(z.kv);
    free_all({qp, kp});
    const auto at = a.malloc(z.q);
    a.free(qr);
    if (keys != nullptr && values != nullptr) {
      (*keys)[l] = kr;
      (*values)[l] = v;
    } else {
      free_all({kr, v});
    }
    const auto at2 = a.malloc(z.q);
    a.free(at);
    const auto o = a.malloc(z.hidden);
    free_all({at2, ln1});
    const auto r = a.malloc(z.hidden);
    free_all({h, o});
    const auto ln2 = a.malloc(z.hidden), gate = a.malloc(z.inter), up = a.malloc(z.inter), act = a.malloc(z.inter);
    a.free(gate);
    const auto mul = a.malloc(z.inter);
    free_all({act, up});
    const auto down = a.malloc(z.hidden);
    free_all({mul, ln2});
    h = a.malloc(z.hidden);
    free_all({r, down});
  }
  return h;
}

// Generation with a DynamicCache in the compute dtype: the allocation sequence of the step, replayed
// through the allocator model (engine/allocator.cpp), gives the reserve. Each decode step's
// DynamicCache.update runs torch.cat(old, new) per layer for the keys, then the values: a block one
// token longer is allocated while the old one is alive, then the old one is freed. The old blocks
// are just too small for the next request and merge only with free neighbours of their own segment,
// so the caches walk through new segments (requests above 10 MiB get segments of their size rounded
// to 2 MiB). Where the prompt's keys and values sit among the prefill's freed intermediates decides
// which neighbours they get, so the prefill is replayed op by op (replay_layers).
// Measured (tests/accuracy/alloc/traces, fresh processes, reserved beyond the peak allocated):
// gpt2-medium b32 s256 n256 2993 MiB, replayed 2952; snapshots gpt2-medium b8 s512 n512 478 MiB
// (replayed 448), b16 s512 n256 (held out) 1081 MiB (replayed 1024). Smaller caches (GQA models)
// leave 100-500 MiB that the replay gets to within about half (llama-3.2-1b b32 s256 n256: 150,
// replayed 104). At most 64 decode steps (and 16384 layer updates) are replayed, each advancing
// the cache by the same number of tokens (stride 1 to 16 changed the replayed reserve of the
// gpt2-medium case by under 1 %).
std::optional<Reserve> generate_reserve(const spec::ModelSpec& m, const Workload& w, const std::vector<Acc>& phases,
                                       std::uint64_t capacity,
                                      const ProcessHistory* h) {
  const Acc* prefill = phase_of(phases, PhaseId::prefill);
  const Acc* decode = phase_of(phases, PhaseId::decode);
  // Quantized caches dequantize instead of concatenating (not this sequence); MoE layers route
  // tokens through experts (not this MLP).
  if (prefill == nullptr || decode == nullptr || (w.kv_cache && !is_float_compute(*w.kv_cache)) ||
      m.intermediate_size == 0 || std::any_of(m.layers.begin(), m.layers.end(), [](const auto& g) { return g.moe; }))
    return std::nullopt;
  // Bounded work: at most 4096 layers (else the closed form), and about 16384 cache updates.
  constexpr std::uint64_t kMaxLayers = 4096;
  const std::uint64_t layers = std::max<std::uint64_t>(m.num_layers, 1);
  if (layers > kMaxLayers) return std::nullopt;
  const std::uint64_t total = std::max<std::uint64_t>(checked_add(w.seq, w.new_tokens), 1);
  // One layer's keys (or values) at the end; a cache position's share of it.
  const std::uint64_t layer_end = decode->part(ComponentId::kv_cache).value() / (2 * layers);
  const auto kv_at = [&](std::uint64_t positions) {
    return layer_end / total * positions + layer_end % total * positions / total;
  };
  const std::uint64_t kv = kv_at(w.seq);
  const std::uint64_t logits = decode->part(ComponentId::logits).value();
  const LayerSizes sizes{tokens_bytes(w, m.hidden_size), tokens_bytes(w, checked_mul(m.num_heads, m.head_dim)), kv,
                         tokens_bytes(w, m.intermediate_size)};
  // The allocator model rounds sizes up to 2 MiB: keep them far from 2^64.
  constexpr std::uint64_t kMaxBlock = 1ULL << 60;
  if (std::max({sizes.hidden, sizes.q, sizes.inter, layer_end, logits}) > kMaxBlock) return std::nullopt;
  std::vector<std::uint64_t> key{sizes.hidden, sizes.q, sizes.kv, sizes.inter, layers, layer_end, total, logits,
                                 w.seq, w.new_tokens};
  append_conf(key, alloc_conf(w));
  key.push_back(capacity);
  const Precision p = precision_of(w);
  append_build(key, m, p);
  append_history(key, h);
  return memoized(std::move(key), [&] {
    CachingAllocator a(alloc_conf(w), capacity);
    // After earlier cases of the process, from the segment their backward workspace pins (the
    // workspace is in the replay's allocated bytes as in the estimate's kCublasWorkspace).
    seed_history(a, h, w);
    // The model is built first in the same process: the generation's requests start from its
    // segments (their free bytes stay reserved unless a request fits them).
    replay_build(a, m, p);
    a.empty_cache();
    a.reset_peaks();
    std::vector<CachingAllocator::Handle> keys(layers), values(layers);
    const auto last = replay_layers(a, sizes, layers, &keys, &values);
    a.free(a.malloc(logits));
    a.free(last);
    const std::uint64_t max_steps = std::clamp<std::uint64_t>(16384 / layers, 1, 64);
    const std::uint64_t stride = std::max<std::uint64_t>(1, w.new_tokens / max_steps + (w.new_tokens % max_steps != 0));
    for (std::uint64_t t = 0; t < w.new_tokens;) {
      t = std::min(t + stride, w.new_tokens);
      const std::uint64_t size = kv_at(w.seq + t);
      for (std::uint64_t l = 0; l < layers; ++l) {
        const auto k = a.malloc(size);
        a.free(keys[l]);
        keys[l] = k;
        const auto v = a.malloc(size);
        a.free(values[l]);
        values[l] = v;
      }
      a.free(a.malloc(logits));
    }
    return replayed(a);
  });
}

// A forward pass (measure.py's run_forward: model(input_ids, use_cache=False) under inference_mode,
// logits for every position) on one GPU, op by op as eager PyTorch allocates in transformers 5's
// llama-family and gpt2 layers, replayed through the allocator model from the built model's
// segments (replay_build). Recorded (tests/accuracy/alloc/fresh, one-case processes): gpt2-medium
// b8 s1024: ln_1, c_attn, SDPA's output, its contiguous transpose, c_proj, the residual sum, ln_2,
// c_fc, gelu_new's chain (0.5 x, x^3, ..., each an intermediate-sized tensor), c_proj, the sum;
// then ln_f and the logits, which take a segment of their own while every layer's freed blocks
// stay cached: the reserve is about the layers' largest footprint, not a share of the logits.
// Llama's RMSNorm works in fp32 (x.float(), pow, x * rsqrt: fp32 hidden-sized tensors), rotary
// embeddings make q * cos, rotate_half(q) (a negated half and a cat), its product with sin, and the
// sum (the same for k); eager attention makes the scores, scaled, masked, the fp32 copy and softmax,
// the cast back (llama; gpt2: scores, scaled, masked, softmax), with k and v repeated to the query
// heads, and a 4-D additive mask for the pass. Fresh-process reserve beyond the peak, measured /
// replayed (MiB): see the [trace] table. Returns nullopt where the sequence is not this one.
std::optional<Reserve> forward_reserve(const spec::ModelSpec& m, const Workload& w, std::uint64_t capacity,
                                      const ProcessHistory* history) {
  const Precision p = precision_of(w);
  // The two layer shapes replayed, told by their features: GPT-2's (learned positions, LayerNorm,
  // c_fc and gelu) and the pre-norm RMSNorm layer with rotary q/k and a gated MLP (llama, mistral,
  // qwen2, smollm2); variations of the latter (per-head q/k norms, gemma's fp32 norm scale and
  // scaled embeddings, soft-capped scores, parallel residuals) keep the closed form.
  const bool gpt2 = m.learned_positions && m.norm == spec::Norm::layer && !m.gated_mlp;
  const bool llama = !m.learned_positions && m.norm == spec::Norm::rms && m.gated_mlp && !m.qk_norm &&
                     !m.norm_fp32_scale && !m.scaled_embeddings && !m.parallel_residual && m.attn_logit_softcap == 0;
  if ((!llama && !gpt2) || p.quantized || p.autocast || m.intermediate_size == 0 || m.kv_lora_rank != 0 ||
      m.num_layers == 0 || m.num_layers > 4096 || w.sequence_packing || w.images > 0 || m.sliding_window > 0 ||
      std::any_of(m.layers.begin(), m.layers.end(), [](const auto& g) { return g.moe; }))
    return std::nullopt;
  if (const spec::Architecture* row = spec::find_architecture(m.model_type);
      row != nullptr && (row->eager_only || row->multi_query_math_sdpa))
    return std::nullopt;
  const bool eager = w.attention == spec::Attention::eager;
  const std::uint64_t e = p.compute;
  const bool math_sdpa = !eager && e == 4 && m.num_kv_heads < m.num_heads;
  const std::uint64_t tokens = checked_mul(w.batch, w.seq);
  const std::uint64_t hidden = tokens_bytes(w, m.hidden_size), q = tokens_bytes(w, checked_mul(m.num_heads, m.head_dim));
  const std::uint64_t kv = tokens_bytes(w, checked_mul(m.num_kv_heads, m.head_dim));
  const std::uint64_t inter = tokens_bytes(w, m.intermediate_size);
  const std::uint64_t hidden32 = checked_mul(checked_mul(tokens, m.hidden_size), 4);
  // Sizes past 2^60 bytes keep the closed form (the score matrix grows with seq^2: a 10^9-token
  // context must not overflow here).
  constexpr std::uint64_t kMaxBlock = 1ULL << 60;
  std::uint64_t scores = 0;
  if (__builtin_mul_overflow(w.batch, m.num_heads, &scores) || __builtin_mul_overflow(scores, w.seq, &scores) ||
      __builtin_mul_overflow(scores, w.seq, &scores) || scores > kMaxBlock / 8)
    return std::nullopt;
  const std::uint64_t mask = eager && !gpt2 ? checked_mul(checked_mul(tokens, w.seq), e) : 0;
  const std::uint64_t copies = m.final_logit_softcap > 0 || m.scaled_logits ? 2 : 1;
  const std::uint64_t logits = checked_mul(checked_mul(tokens, m.vocab_size), e);
  const std::uint64_t rope = gpt2 ? 0 : checked_mul(checked_mul(tokens, m.head_dim), e);
  if (std::max({hidden32, q, inter, logits, mask}) > kMaxBlock) return std::nullopt;
  std::vector<std::uint64_t> key{hidden, q, kv, inter, hidden32, scores, mask, copies, logits, rope,
                                 eager ? 1U : 0U, math_sdpa ? 1U : 0U, gpt2 ? 1U : 0U, static_cast<std::uint64_t>(m.activation),
                                 m.gated_mlp ? 1U : 0U, static_cast<std::uint64_t>(m.norm), m.num_layers,
                                 checked_mul(checked_mul(w.batch, w.seq), 8)};
  append_conf(key, alloc_conf(w));
  key.push_back(capacity);
  append_build(key, m, p);
  append_history(key, history);
  return memoized(std::move(key), [&] {
    using H = CachingAllocator::Handle;
    CachingAllocator a(alloc_conf(w), capacity);
    seed_history(a, history, w);  // as in generate_reserve
    replay_build(a, m, p);
    a.empty_cache();
    const H ids = a.malloc(checked_mul(tokens, 8));
    a.reset_peaks();
    const auto norm = [&](H x) {
      (void)x;
      if (m.norm == spec::Norm::layer) return a.malloc(hidden);
      const H x32 = e == 4 ? CachingAllocator::Handle{} : a.malloc(hidden32);
      a.free(a.malloc(hidden32));  // pow(2), before the mean
      const H y = a.malloc(hidden32);
      if (e != 4) a.free(x32);
      const H c = e == 4 ? CachingAllocator::Handle{} : a.malloc(hidden);
      const H o = a.malloc(hidden);
      if (e != 4) a.free(c);
      a.free(y);
      return o;
    };
    const auto rotate = [&](std::uint64_t size) {
      const H c = a.malloc(size), neg = a.malloc(size / 2), rh = a.malloc(size);
      a.free(neg);
      const H s = a.malloc(size);
      a.free(rh);
      const H out = a.malloc(size);
      a.free(c);
      a.free(s);
      return out;
    };
    const auto attention = [&](std::uint64_t kv_width) {
      if (math_sdpa) {
        // SDPA's math backend (fp32 with grouped heads: no fused kernel takes enable_gqa in fp32,
        // engine/activations.cpp): k and v repeated to every head, q and k scaled, the scores
        // plus the causal bias, softmax, the product with v.
        const H rk = a.malloc(q), rv = a.malloc(q), qs = a.malloc(q), ks = a.malloc(q);
        const H s1 = a.malloc(checked_mul(scores, e));
        a.free(qs);
        a.free(ks);
        const H s2 = a.malloc(checked_mul(scores, e));
        a.free(s1);
        const H sm = a.malloc(checked_mul(scores, e));
        a.free(s2);
        const H out = a.malloc(q);
        a.free(sm);
        a.free(rk);
        a.free(rv);
        return out;
      }
      if (!eager) return a.malloc(q);  // SDPA's output
      std::vector<H> rep;
      if (kv_width != q) rep = {a.malloc(q), a.malloc(q)};  // repeat_kv of k and v
      const H s1 = a.malloc(checked_mul(scores, e)), s2 = a.malloc(checked_mul(scores, e));
      a.free(s1);
      const H s3 = a.malloc(checked_mul(scores, e));
      a.free(s2);
      H sm;
      if (gpt2) {
        sm = a.malloc(checked_mul(scores, e));
      } else {
        const H c32 = e == 4 ? CachingAllocator::Handle{} : a.malloc(checked_mul(scores, 4));
        const H s32 = a.malloc(checked_mul(scores, 4));
        if (e != 4) a.free(c32);
        sm = e == 4 ? s32 : a.malloc(checked_mul(scores, e));
        if (e != 4) a.free(s32);
      }
      a.free(s3);
      const H out = a.malloc(q);
      a.free(sm);
      for (const H r : rep) a.free(r);
      return out;
    };
    // The embedding's output (and gpt2's position embeddings) stay referenced by the model's
    // forward (`inputs_embeds`) until it returns, just before the logits (the recorded trace frees
    // them there).
    const H embed = a.malloc(hidden);
    H h = embed, pos = CachingAllocator::Handle{};
    if (gpt2) {
      pos = a.malloc(tokens_bytes(w, m.hidden_size) / std::max<std::uint64_t>(w.batch, 1));
      h = a.malloc(hidden);
    }
    const H cos = rope > 0 ? a.malloc(rope) : CachingAllocator::Handle{}, sin = rope > 0 ? a.malloc(rope) : CachingAllocator::Handle{};
    const H mask_h = mask > 0 ? a.malloc(mask) : CachingAllocator::Handle{};
    for (std::uint64_t l = 0; l < m.num_layers; ++l) {
      const H n1 = norm(h);
      H at;
      if (gpt2) {
        const H qkv = a.malloc(checked_add(q, 2 * kv));
        at = attention(kv);
        a.free(qkv);
      } else {
        const H qp = a.malloc(q), kp = a.malloc(kv), v = a.malloc(kv);
        const H qe = rotate(q), ke = rotate(kv);
        a.free(qp);
        a.free(kp);
        at = attention(kv);
        a.free(qe);
        a.free(ke);
        a.free(v);
      }
      const H t = a.malloc(q);  // transpose(1, 2).contiguous()
      a.free(at);
      const H op = a.malloc(hidden);
      a.free(t);
      a.free(n1);
      const H r = a.malloc(hidden);
      a.free(op);
      if (h != embed) a.free(h);
      const H n2 = norm(r);
      H act;
      if (m.gated_mlp) {
        const H g = a.malloc(inter), ag = a.malloc(inter);
        a.free(g);
        const H u = a.malloc(inter);
        act = a.malloc(inter);
        a.free(ag);
        a.free(u);
      } else if (m.activation == spec::Activation::gelu_tanh_python) {
        // gelu_new: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), left to right.
        const H fc = a.malloc(inter), half = a.malloc(inter);
        H t1 = a.malloc(inter);
        for (int i = 0; i < 5; ++i) {  // * 0.044715, x +, * sqrt(2 / pi), tanh, 1 +
          const H t2 = a.malloc(inter);
          a.free(t1);
          t1 = t2;
        }
        act = a.malloc(inter);
        a.free(half);
        a.free(t1);
        a.free(fc);
      } else {
        const H fc = a.malloc(inter);
        act = a.malloc(inter);
        a.free(fc);
      }
      const H d = a.malloc(hidden);
      a.free(act);
      a.free(n2);
      h = a.malloc(hidden);
      a.free(d);
      a.free(r);
    }
    const H fin = norm(h);
    if (h != embed) a.free(h);
    a.free(embed);
    if (gpt2) a.free(pos);
    H lg = a.malloc(checked_mul(logits, 1));
    if (copies > 1) {
      const H more = a.malloc(logits);
      a.free(lg);
      lg = more;
    }
    a.free(fin);
    a.free(lg);
    a.free(ids);
    if (mask > 0) a.free(mask_h);
    if (rope > 0) {
      a.free(cos);
      a.free(sin);
    }
    return replayed(a);
  });
}

// Full training on one GPU: three steps of the loop measure.py runs (forward, loss, backward,
// optimizer.step(), zero_grad(set_to_none=True)) synthesized block by block and replayed through
// the allocator model; the reserve is the replay's peak reserved minus its peak allocated.
// Why three steps: the recorded steps (tests/accuracy/alloc/traces) make one segment per
// logits-sized tensor in the first step (bf16 logits, their fp32 copy, log-softmax, and in
// backward their gradients); the gradients and the optimizer state created in that step take
// those cached segments (best fit), as do the second step's checkpointed layer inputs, so the
// second step's logits need new segments (qwen2.5-1.5b ckpt: one more 9496 MiB segment; the
// third step adds none). Per layer, as eager PyTorch allocates: forward keeps the layer's saved
// tensors (norm outputs, rotated q and k, v, attention output and its reshaped copy, the residual,
// gate, up, act, act x up) or, checkpointed, only its input, which backward recomputes from;
// backward allocates each op's input gradients and the weight gradients (kept until zero_grad) as
// it frees what the op saved. Under autocast each linear's weight is cast to 16 bits per layer
// (kept until forward ends; in a recompute, until the layer's backward ends). The loss: bf16
// logits, the fp32 copy, log-softmax (saved); backward: nll's and log-softmax's fp32 gradients,
// the bf16 gradient. The first step allocates the optimizer state per parameter; every step the
// optimizer's temporaries (one list over the parameters, as foreach AdamW's). Replayed against the
// recorded steps (reserved beyond the peak allocated, fresh processes): qwen2.5-1.5b bf16 b8 s2048
// ckpt 9776 MiB measured / 10057 replayed, qwen2.5-7b bf16 b4 s2048 ckpt 17052 / 17037,
// qwen2.5-0.5b fp32-amp b4 s1024 2981 / 3007, gpt2-medium fp32-amp b16 s1024 ckpt 3477 / 3363
// (tests/accuracy/alloc_trace_test.cpp). Not reproduced: qwen2.5-0.5b fp32-amp b8 s2048 in a
// process of its own reserved 1239 MiB; its recorded sequence replayed here reserves 10732 (a
// fourth 9496 MiB logits segment in the second step). Which of several equal-size free blocks a
// request takes decides it: broken by the highest address instead of the lowest, that replay gives
// 1239 (and qwen2.5-1.5b fp32-amp 7075 instead of the measured 5466): the order of cudaMalloc's
// addresses, which the model does not know. Recorded again from CUDA's init with the build
// (tests/accuracy/alloc/fresh/traces_s10/fresh, alloc_recorded_test.cpp): replayed with the
// segments' real addresses, qwen2.5-0.5b gives 1239 and qwen2.5-1.5b 5466 exactly, and so does
// gemma-2-2b bf16 b3 s1024 (8490 MiB; 5006 with the model's addresses; its estimate 4253): later
// segments get lower addresses (top-down, except those of 20 MiB and less), so among equal free
// blocks PyTorch takes the newest. Numbering this model's segments top-down leaves this sequence's
// 10761 as it is (its build and steps do not leave those equal blocks at the same moments).
// The backward thread's cuBLAS workspace: the autograd engine runs backward on a device thread of
// its own (torch/csrc/autograd/engine.cpp, one per CUDA device), whose cuBLAS handle has no
// workspace yet; aten/src/ATen/cuda/CublasHandlePool.cpp keeps one per (handle, stream), allocated
// through the caching allocator at the handle's first use and never freed. So every training
// process allocates 32 MiB (sm90's 4096 KiB x 8) at the first backward's first matmul: measured in
// all 29 training and LoRA cases run one process each (tests/accuracy/alloc/fresh/one_process.jsonl),
// 12 events after forward ends, after the lm_head's weight gradient and before its input gradient,
// carved from a cached block (best fit), never a new segment. When that block is a freed fp32-logits
// segment the later steps' logits cannot reuse it: qwen2.5-1.5b fp32-amp SGD b4 s1024 reserves
// 3768 MiB (replayed 1897 without the workspace, 4237 with it), smollm2-135m Adafactor 1196
// (430 -> 1167), llama-3.1-8b bf16 b4 s2048 ckpt 12521 (8168 -> 12172).
// The sizes one training step's blocks are made of, in bytes (per tensor over the batch, or per
// parameter element for the gradients, the optimizer state and the step's temporaries, as the
// engine counts them in engine/optimizers.cpp).
struct TrainSizes {
  std::uint64_t hidden = 0, q = 0, kv = 0, inter = 0, logits16 = 0, logits32 = 0;
  std::uint64_t grad = 0, state = 0, temp = 0;
  std::uint64_t temp_total = 0;  // the step's temporaries at their most (the optimizer_step component)
  std::uint64_t hidden32 = 0;  // a residual-stream tensor in fp32
  std::uint64_t scores = 0;    // SDPA's math backend: one b x heads x s x s fp32 block (0: a fused kernel)
  std::uint64_t rank = 0;      // LoRA: the adapters' rank (0: full training)
  std::uint64_t adapter = 4;   // LoRA: the adapters' dtype, in bytes
  std::uint64_t tokens = 0;    // batch x sequence
};

// One parameter tensor, in module order, with its role.
struct ParamTensor {
  std::uint64_t elems;
  spec::Role role;
  std::uint64_t layer;  // decoder layer, or kMaxTrainLayers for the embedding and head
  bool bias = false;    // a linear's bias: a Parameter of its own after the weight
};

// Bounded work (about 110 allocator calls per layer and step, 3 steps): deeper models keep the
// closed form.
constexpr std::uint64_t kMaxTrainLayers = 200;

// The sizes of a full-training (or LoRA) step training_reserve can replay, or nullopt for the
// workloads it does not describe (offloaded activations but LoRA's without checkpointing
// (TrainingReplay::offload), the optimizer in backward, accumulation, selective or
// every-N checkpointing, MoE layers, no MLP, too deep, a block beyond 2^60 bytes).
// LoRA (peft, one GPU): the adapters' elements, the sum over the adapted linears of rank x (in +
// out) (engine/estimate.cpp lora_params); 0 where the LoRA step is not replayed: QLoRA (4-bit base,
// bitsandbytes' dequantization), Unsloth's kernels (their own saved tensors), autocast over fp32
// weights (casts per op, not this sequence), adapters on MoE experts, a loss other than
// transformers' (chunked, fused, cut: the replay's loss builds the whole logits; replayed, the 6
// measured chunked LoRA cases of tests/accuracy/levers were -0.1 .. +23.0 % over, their device
// total on the share +0.9 .. +5.6 %), torch.compile (the compiled layers save other tensors and
// `all` compiles the loss; replayed, the 12 compiled LoRA cases of levers/results/compile.jsonl
// were +1.3 .. +33.8 % over, on the share -0.4 .. +4.4 %).
std::uint64_t replayed_lora_elems(const spec::ModelSpec& m, const Workload& w) {
  if (w.mode != Mode::lora || w.lora.unsloth_kernels || precision_of(w).autocast || precision_of(w).quantized ||
      w.loss != spec::Loss::hf || w.compile != spec::Compile::none)
    return 0;
  // The replayed layer's slots (TrainingReplay::lora_forward): up to three attention inputs (q,
  // k, v or one fused), one attention output, two MLP inputs (gate, up or one fused), one down.
  std::uint64_t n = 0;
  for (const auto& g : m.layers) {
    std::array<std::uint64_t, 4> slots{};
    for (const auto& l : g.linears) {
      if (!lora_targets(w, l)) continue;
      if (l.expert || l.copies != 1) return 0;
      switch (l.role) {
        case spec::Role::attn_in: ++slots[0]; break;
        case spec::Role::attn_out: ++slots[1]; break;
        case spec::Role::mlp_in: ++slots[2]; break;
        case spec::Role::mlp_out: ++slots[3]; break;
        default: return 0;
      }
      n = checked_add(n, checked_mul(checked_mul(w.lora.rank, checked_add(l.in_features, l.out_features)), g.count));
    }
    if (slots[0] > 3 || slots[1] > 1 || slots[2] > 2 || slots[3] > 1) return 0;
  }
  return n;
}

std::optional<TrainSizes> train_sizes(const spec::ModelSpec& m, const Workload& w, const std::vector<Acc>& phases) {
  const Acc* step = phase_of(phases, PhaseId::optimizer_step);
  const std::uint64_t adapters = replayed_lora_elems(m, w);
  if ((w.mode != Mode::train && adapters == 0) || step == nullptr || (w.activation_offload && adapters == 0) ||
      (w.activation_offload && w.checkpointing) || w.optimizer_in_backward ||
      w.grad_accum > 1 || w.checkpoint_selective || w.checkpoint_every > 1 || m.intermediate_size == 0 ||
      m.params == 0 || std::any_of(m.layers.begin(), m.layers.end(), [](const auto& g) { return g.moe; }))
    return std::nullopt;
  if (m.num_layers == 0 || m.num_layers > kMaxTrainLayers) return std::nullopt;
  const std::uint64_t e = precision_of(w).compute;
  const std::uint64_t tokens = checked_mul(w.batch, w.seq);
  TrainSizes z;
  z.hidden = tokens_bytes(w, m.hidden_size);
  z.q = tokens_bytes(w, checked_mul(m.num_heads, m.head_dim));
  z.kv = tokens_bytes(w, checked_mul(m.num_kv_heads, m.head_dim));
  z.inter = tokens_bytes(w, m.intermediate_size);
  z.logits16 = checked_mul(checked_mul(tokens, m.vocab_size), e);
  z.logits32 = checked_mul(checked_mul(tokens, m.vocab_size), 4);
  z.hidden32 = checked_mul(checked_mul(tokens, m.hidden_size), 4);
  // Per trained element: the whole model's, or LoRA's adapters'.
  const std::uint64_t trained = adapters > 0 ? adapters : m.params;
  z.grad = step->part(ComponentId::gradients).value() / trained;
  z.state = step->part(ComponentId::optimizer_state).value() / trained;
  z.temp = step->part(ComponentId::optimizer_step).value() / trained;
  z.temp_total = step->part(ComponentId::optimizer_step).value();
  z.rank = adapters > 0 ? w.lora.rank : 0;
  z.adapter = precision_of(w).adapter;
  z.tokens = tokens;
  constexpr std::uint64_t kMaxBlock = 1ULL << 60;
  // fp32 with grouped heads: no fused SDPA kernel takes enable_gqa in fp32 (forward_reserve's math_sdpa).
  if (w.attention != spec::Attention::eager && e == 4 && m.num_kv_heads < m.num_heads &&
      (__builtin_mul_overflow(checked_mul(w.batch, m.num_heads), checked_mul(w.seq, w.seq), &z.scores) ||
       __builtin_mul_overflow(z.scores, 4, &z.scores) || z.scores > kMaxBlock))
    return std::nullopt;
  if (std::max({z.hidden, z.q, z.inter, z.logits32, checked_mul(m.embedding_params, 8)}) > kMaxBlock) return std::nullopt;
  // LoRA's blocks: lora_A's output over the batch, each adapter's input, output and weights in fp32.
  if (adapters > 0) {
    std::uint64_t widest = 0;
    for (const auto& g : m.layers)
      for (const auto& l : g.linears) widest = std::max({widest, l.in_features, l.out_features, w.lora.rank});
    if (checked_mul(checked_mul(tokens, widest), 4) > kMaxBlock ||
        checked_mul(checked_mul(widest, w.lora.rank), 4) > kMaxBlock)
      return std::nullopt;
  }
  return z;
}

// The parameter tensors in module order: the embedding, each layer's linears (the weight, then
// the bias: each its own Parameter, so its own gradient, optimizer states and step temporaries)
// and its norms, the lm_head. Counted as one block, a 6 MiB weight and its 6 KiB bias no longer
// pack two to a freed 12 MiB segment as the recorded steps' do: pythia-410m bf16 AdamW b2 x 1024
// (traces_s14) made nine new 20 MiB segments for the first step's optimizer states (reserve 386
// MiB beyond the peak, recorded 234).
std::vector<ParamTensor> param_tensors(const spec::ModelSpec& m) {
  std::vector<ParamTensor> params;
  params.push_back({m.embedding_params, spec::Role::other, kMaxTrainLayers});
  std::uint64_t layer = 0;
  for (const auto& g : m.layers)
    for (std::uint64_t i = 0; i < g.count; ++i, ++layer) {
      for (const auto& l : g.linears) {
        const std::uint64_t bias = l.bias ? checked_mul(l.out_features, l.copies) : 0;
        params.push_back({l.params() - bias, l.role, layer});
        if (bias > 0) params.push_back({bias, l.role, layer, true});
      }
      if (g.norm_params + g.other_params > 0) params.push_back({g.norm_params + g.other_params, spec::Role::other, layer});
    }
  if (m.lm_head_params > 0) params.push_back({m.lm_head_params, spec::Role::other, kMaxTrainLayers});
  return params;
}

// LoRA's trained tensors in module order: each adapted linear's lora_A (rank x in) and lora_B
// (out x rank), with the linear's role and layer (peft's LoraLayer.update_layer makes them in
// that order; the frozen base has no gradient and no optimizer state).
std::vector<ParamTensor> adapter_tensors(const spec::ModelSpec& m, const Workload& w) {
  std::vector<ParamTensor> params;
  std::uint64_t layer = 0;
  for (const auto& g : m.layers)
    for (std::uint64_t i = 0; i < g.count; ++i, ++layer)
      for (const auto& l : g.linears)
        if (lora_targets(w, l)) {
          params.push_back({checked_mul(w.lora.rank, l.in_features), l.role, layer});
          params.push_back({checked_mul(w.lora.rank, l.out_features), l.role, layer});
        }
  return params;
}

// Three steps of full training replayed block by block through the allocator model (the order is
// described above training_reserve). One step: forward (layer_forward per layer), the loss and its
// backward (loss), backward per layer from the last (layer_backward), the embedding's gradient
// (embedding_grad), the optimizer (optimizer_step).
class TrainingReplay {
 public:
  using H = CachingAllocator::Handle;

  // `h`: the process ran earlier cases; their backward already made the workspace (seed_history).
  TrainingReplay(const spec::ModelSpec& m, const Workload& w, const TrainSizes& z, const std::vector<ParamTensor>& params,
                 std::uint64_t capacity, const ProcessHistory* h = nullptr)
      : m_(m),
        z_(z),
        params_(params),
        autocast_(precision_of(w).autocast),
        ckpt_(w.checkpointing),
        a_(alloc_conf(w), capacity) {
    lora_ = z.rank > 0;
    amp_ = !lora_ && autocast_ && !ckpt_ && precision_of(w).residual == 4 && amp_layers();
    fp32_norms_ = !lora_ && !autocast_ && precision_of(w).compute == 2 && fp32_norm_layers();
    neox_ = !lora_ && !autocast_ && precision_of(w).compute == 2 && w.compile == spec::Compile::none &&
            w.loss == spec::Loss::hf && neox_layers();
    // Recorded eager with transformers' loss: --compile's layers save other tensors, a chunked or
    // fused loss never builds the whole logits (both keep llama's layer_forward).
    llama16_ = !lora_ && !autocast_ && !ckpt_ && !neox_ && precision_of(w).compute == 2 &&
               w.compile == spec::Compile::none && w.loss == spec::Loss::hf && llama16_layers();
    if (lora_) lora_setup(w);
    const OptimizerTraits& o = traits(w.optimizer);
    if (o.state_tensors > 1 && o.state_bytes_8bit == 0 && o.state_bytes_fp32 == 0 && !o.factored &&
        z_.state % o.state_tensors == 0)
      state_tensors_ = o.state_tensors;
    // A for-loop Adam step (engine/optimizers.cpp's per_param_x2): its two temporaries are one
    // parameter's, made and freed parameter by parameter (_single_tensor_adam: `denom =
    // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`), not one list over all of them;
    // bytes per element from the step's component (2 x the largest parameter). One-process
    // device total, llama-3.2-1b bf16 AdamW(foreach=False) b3 x 1024 checkpointed (heldout):
    // -5.81 % -> within 5 % (median of the file 0.61 -> 0.41 %). Adafactor's step (row and
    // column means, then one full-size estimate per matrix) is another sequence: replaying it
    // as this one sent smollm2-135m Adafactor (heldout-exp) from -0.1 to -4.3 %, so it stays a list.
    if (!lora_ && o.temp == StepTemp::per_param_x2 && !params_.empty()) {
      std::uint64_t largest = 0;
      for (const auto& pr : params_) largest = std::max(largest, pr.elems);
      if (largest > 0) loop_temp_ = z_.temp_total / (2 * largest);
    }
    // LoRA after earlier cases too: cudaMalloc's top-down layout from the pinned segment on. Recorded
    // (heldout-arch's process, res12 traces): gemma-2-2b LoRA r64 b1 x 1024 after gemma's training
    // pinned its 3000 MiB segment made new logits segments in its first two steps (reserved 15864 ->
    // 16864 MiB in the second); replayed in creation order its second step reused the first's and
    // the reserve was 635 MiB (measured 1742, device total -6.6 %), top-down 1635 (-1.0 %). Over the
    // four truth files 7 other LoRA cases replayed after a pinned segment move 0.0 to 0.3 points
    // closer, none further.
    if (lora_) a_.top_down_addresses();
    if (seed_history(a_, h, w)) {
      seeded_ = true;
      workspace_ = H{};
    } else {
      // A process of its own (or this case's is the process's first backward): segments laid out as
      // cudaMalloc placed them from CUDA's init (engine/allocator.cpp). After earlier cases their
      // freed address ranges are reused in an order not recorded, so a seeded replay numbers its
      // segments in the order it makes them (with the fresh layout, two public qwen2.5-7b
      // checkpointed cases replayed after the gpt2-medium workspace's segment lose a logits segment
      // the process made: one-process device totals -7.7 and -8.3 %, against -2.8 and -1.8 %).
      // Forward and generation replays keep creation order too: with this layout 4 of the 38
      // one-case forwards of tests/accuracy/alloc/fresh move beyond 17 % (eager llama-3.2-1b b4
      // s1024 +39 %), not understood yet.
      a_.top_down_addresses();
    }
    // The model is built first in the same process (replay_build, as generate_reserve and
    // forward_reserve do): the steps start from its segments, whose free bytes stay reserved
    // unless a request fits them (one-process runs, start_reserved - start_allocated: 8 MiB for
    // qwen2.5-1.5b bf16, 115 MiB for qwen2.5-0.5b fp32 in 82 segments).
    replay_build(a_, m, precision_of(w));
    // get_peft_model then moves each adapter to its base layer's device (peft
    // LoraLayer._move_adapter_to_device_of_base_layer): A and B allocated after the build.
    if (lora_)
      for (const auto& pr : params_) (void)a_.malloc(checked_mul(pr.elems, z_.adapter));
    a_.empty_cache();
    a_.reset_peaks();
  }

  Reserve run() {
    for (int s = 0; s < 3; ++s) amp_ ? amp_step() : fp32_norms_ ? fp32_norm_step() : step();
    Reserve r = replayed(a_);
    // LoRA: the reserve only; its peak keeps the engine's requested bytes (no block rounding).
    if (!lora_) r.excess = {regions_[0].excess, regions_[1].excess, regions_[2].excess, regions_[3].excess};
    return r;
  }

  // Where this replay's backward put the workspace (after run(); nullopt when seeded).
  [[nodiscard]] std::optional<CachingAllocator::Place> workspace_place() const {
    if (seeded_ || !workspace_) return std::nullopt;
    return a_.place_of(*workspace_);
  }

 private:
  void free_all(std::initializer_list<H> hs) {
    for (const auto h : hs) a_.free(h);
  }
  // Frees `h` unless it is kNoHandle (a block the sequence did not make, or one its caller frees).
  void free_if(H h) {
    if (h != kNoHandle) a_.free(h);
  }

  // The regions of a step (Reserve::Excess: forward, loss, backward, optimizer step), each kept
  // from the step that allocated most in it (the first of equals, as max_memory_allocated()).
  struct Region {
    std::uint64_t peak = 0;
    Bytes excess;
  };
  std::array<Region, 4> regions_{};
  // Ends region `r` and begins the next.
  void next_region(std::size_t r) {
    if (a_.region_peak() > regions_[r].peak) regions_[r] = {a_.region_peak(), Bytes{a_.region_excess()}};
    a_.begin_region();
  }

  // The gradients of layer `l`'s parameters whose role is one of `roles`, kept until zero_grad.
  void grad_of(std::uint64_t l, std::initializer_list<spec::Role> roles) {
    for (const auto& pr : params_)
      if (pr.layer == l && std::find(roles.begin(), roles.end(), pr.role) != roles.end())
        grads_.push_back(a_.malloc(checked_mul(pr.elems, z_.grad)));
  }

  // One layer's forward: its saved tensors (all freed when !keep), the autocast casts of its
  // weights into `casts`; the layer's output last. fp32 with grouped heads runs SDPA's math
  // backend (math_attention): recorded (traces_s10/fresh, qwen3-0.6b fp32 AdamW-forloop b6 s1536
  // checkpointed, a process of its own), per layer two b x heads x s x s fp32 blocks (864 MiB:
  // scores, softmax) and a bool mask in forward, and in backward the recompute's two plus three
  // gradients; that trace replayed through the allocator model reserves 3072 MiB beyond the peak
  // (measured 3144). Without these blocks this sequence reserved 1592 (device total -4.9 %), with
  // them 3464 (+1.8 %). Eager attention's scores are not in this sequence.
  std::vector<H> layer_forward(std::uint64_t l, bool keep, std::vector<H>& casts) {
    if (autocast_)
      for (const auto& pr : params_)
        if (pr.layer == l && pr.role != spec::Role::other) casts.push_back(a_.malloc(checked_mul(pr.elems, 2)));
    std::vector<H> saved, math;
    const H ln1 = a_.malloc(z_.hidden), qp = a_.malloc(z_.q), kp = a_.malloc(z_.kv), v = a_.malloc(z_.kv),
            qr = a_.malloc(z_.q), kr = a_.malloc(z_.kv);
    free_all({qp, kp});
    const H at = z_.scores > 0 ? math_attention(keep, math) : a_.malloc(z_.q);
    const H at2 = a_.malloc(z_.q), o = a_.malloc(z_.hidden), r = a_.malloc(z_.hidden);
    a_.free(o);
    const H ln2 = a_.malloc(z_.hidden), gate = a_.malloc(z_.inter), up = a_.malloc(z_.inter), act = a_.malloc(z_.inter),
            mul = a_.malloc(z_.inter), down = a_.malloc(z_.hidden), out = a_.malloc(z_.hidden);
    a_.free(down);
    saved = {ln1, qr, kr, v, at, at2, r, ln2, gate, up, act, mul};
    if (z_.scores > 0 && keep) saved.insert(saved.end(), math.begin(), math.end());
    if (!keep) {
      for (const H h : saved) a_.free(h);
      saved.clear();
    }
    saved.push_back(out);  // last: the layer's output
    return saved;
  }

  // SDPA's math backend, as recorded (traces_s10/fresh, qwen3-0.6b fp32 b6 s1536 checkpointed):
  // k and v repeated to every head, q and k scaled, the scores, softmax (a b x heads x s x s bool
  // mask in between), the product with v. With grad, the repeated v, the scaled q and k and the
  // softmax stay for backward (into `saved`: rv, qs, ks, probs); without, all is freed. Returns
  // the output.
  H math_attention(bool keep, std::vector<H>& saved) {
    const H rk = a_.malloc(z_.q), rv = a_.malloc(z_.q), qs = a_.malloc(z_.q), ks = a_.malloc(z_.q);
    const H s1 = a_.malloc(z_.scores);
    if (!keep) free_all({qs, ks});
    const H probs = a_.malloc(z_.scores);
    a_.free(a_.malloc(z_.scores / 4));
    a_.free(s1);
    const H out = a_.malloc(z_.q);
    a_.free(rk);
    if (keep) {
      saved = {rv, qs, ks, probs};
    } else {
      free_all({rv, probs});
    }
    return out;
  }

  // The 16-bit logits; soft-capped (gemma-2's final_logit_softcap: / cap, tanh saved in `th`,
  // * cap) when the model caps them.
  H logits(H& th) {
    H lg = a_.malloc(z_.logits16);
    th = kNoHandle;
    if (m_.final_logit_softcap > 0) {
      const H q = a_.malloc(z_.logits16);
      a_.free(lg);
      th = a_.malloc(z_.logits16);
      a_.free(q);
      lg = a_.malloc(z_.logits16);
    }
    return lg;
  }

  // transformers' loss over the 16-bit logits `lg` (ForCausalLMLoss: `logits.float()`, then
  // cross_entropy's log-softmax) and its backward down to the logits' 16-bit gradient (returned):
  // the fp32 copy freed once log-softmax has it, then `with_copy`, `lg` and `after`; the
  // log-softmax's and the copy's gradients; the soft-capping's backward when `th` (its saved tanh).
  // Every training replay's loss: loss, amp_loss, lora_loss, fp32_norm_step, llama16_loss.
  H cross_entropy(H lg, H with_copy = kNoHandle, const std::vector<H>& after = {}, H th = kNoHandle) {
    const H lf = a_.malloc(z_.logits32), ls = a_.malloc(z_.logits32);
    a_.free(lf);
    free_if(with_copy);
    a_.free(lg);
    for (const H h : after) a_.free(h);
    const H g1 = a_.malloc(z_.logits32), g2 = a_.malloc(z_.logits32);
    free_all({g1, ls});
    H g3 = a_.malloc(z_.logits16);
    a_.free(g2);
    if (th != kNoHandle) {
      const H x1 = a_.malloc(z_.logits16);
      a_.free(g3);
      const H x2 = a_.malloc(z_.logits16);
      free_all({x1, th});
      g3 = a_.malloc(z_.logits16);
      a_.free(x2);
    }
    return g3;
  }

  // The final norm, the logits, their fp32 copy and log-softmax; the forward's casts freed; the
  // loss's backward down to the gradient of the last hidden state (returned), the lm_head's
  // gradient kept. `h`: the last layer's output.
  H loss(H h, const std::vector<H>& casts) {
    const H norm = a_.malloc(z_.hidden);
    const H g3 = cross_entropy(a_.malloc(z_.logits16), kNoHandle, casts);
    if (!workspace_) {
      lm_head_grad();
      workspace_ = a_.malloc(kBackwardWorkspace);
    }
    if (neox_) return neox_final_norm_backward(norm, g3, h);
    const H gh = a_.malloc(z_.hidden);
    if (grads_.empty()) lm_head_grad();
    free_all({g3, norm, h});
    return gh;
  }

  // Layer `l`'s backward from the gradient of its output `gh` (freed): the recompute under
  // checkpointing, each op's input gradients as it frees what the op saved, the weight gradients.
  // Returns the gradient of the layer's input.
  H layer_backward(std::uint64_t l, H gh) {
    std::vector<H> recast;
    std::vector<H> sv = saved_[l];
    if (ckpt_) {
      sv = layer_forward(l, true, recast);
      a_.free(sv.back());
      sv.pop_back();
    }
    const H ln1 = sv[0], qr = sv[1], kr = sv[2], v = sv[3], at = sv[4], at2 = sv[5], r = sv[6], ln2 = sv[7],
            gate = sv[8], up = sv[9], act = sv[10], mul = sv[11];
    const H gm = a_.malloc(z_.inter);
    grad_of(l, {spec::Role::mlp_out});
    const H gact = a_.malloc(z_.inter), gup = a_.malloc(z_.inter);
    free_all({gm, mul, act});
    const H ggate = a_.malloc(z_.inter);
    free_all({gact, gate});
    const H gln2 = a_.malloc(z_.hidden);
    grad_of(l, {spec::Role::mlp_in, spec::Role::router});
    free_all({ggate, gup, up, ln2});
    const H gr = a_.malloc(z_.hidden);
    free_all({gln2, r});
    const H gat2 = a_.malloc(z_.q);
    grad_of(l, {spec::Role::attn_out});
    a_.free(at2);
    const H gat = a_.malloc(z_.q);
    a_.free(gat2);
    if (z_.scores > 0) {
      // The math backend's backward, as recorded: the softmax's gradient (two score-sized
      // blocks and a transient), the scaled q's and k's gradients, the repeated v's.
      const H rv = sv[12], qs = sv[13], ks = sv[14], probs = sv[15];
      const H gp = a_.malloc(z_.scores), gs = a_.malloc(z_.scores);
      a_.free(a_.malloc(z_.scores));
      free_all({probs, gp});
      const H gqs = a_.malloc(z_.q), gks = a_.malloc(z_.q);
      free_all({ks, qs, gs});
      const H grv = a_.malloc(z_.q);
      free_all({gqs, gks, grv, rv});
    }
    const H gq = a_.malloc(z_.q), gk = a_.malloc(z_.kv), gv = a_.malloc(z_.kv);
    free_all({gat, at, qr, kr, v});
    const H gq2 = a_.malloc(z_.q), gk2 = a_.malloc(z_.kv);
    free_all({gq, gk});
    const H gln1 = a_.malloc(z_.hidden);
    grad_of(l, {spec::Role::attn_in, spec::Role::attn_inner, spec::Role::other});
    free_all({gq2, gk2, gv, ln1});
    const H gin = a_.malloc(z_.hidden);
    free_all({gln1, gr, gh});
    for (const H c : recast) a_.free(c);
    if (ckpt_) a_.free(inputs_[l]);
    return gin;
  }

  // The embedding's dense gradient from `gh` (freed); tied weights sum it with the lm_head's out
  // of place.
  void embedding_grad(H gh) {
    const H ge = a_.malloc(checked_mul(m_.embedding_params, z_.grad));
    a_.free(gh);
    if (m_.tied_embeddings) {
      const H sum = a_.malloc(checked_mul(m_.embedding_params, z_.grad));
      free_all({ge, grads_.front()});
      grads_.front() = sum;
    } else {
      grads_.push_back(ge);
    }
  }

  // optimizer.step(): the state per parameter at the first step, each state tensor a block of its
  // own (torch/optim/adamw.py _init_group: exp_avg, then exp_avg_sq, parameter by parameter; one
  // block of both put gemma-2-2b's 40.5 MiB states where the recorded step has gradients), the
  // step's temporaries (one list over the parameters, as foreach AdamW's); then
  // zero_grad(set_to_none=True).
  void optimizer_step() {
    if (state_.empty() && z_.state > 0)
      for (const auto& pr : params_)
        for (std::uint64_t i = 0; i < state_tensors_; ++i)
          state_.push_back(a_.malloc(checked_mul(pr.elems, z_.state / state_tensors_)));
    if (loop_temp_ > 0) {
      for (const auto& pr : params_) {
        const H sq = a_.malloc(checked_mul(pr.elems, loop_temp_));   // exp_avg_sq.sqrt()
        const H den = a_.malloc(checked_mul(pr.elems, loop_temp_));  // ... / bias_correction2_sqrt
        a_.free(sq);
        a_.free(den);  // after param.addcdiv_(exp_avg, denom)
      }
    } else if (z_.temp > 0) {
      std::vector<H> temps;
      for (const auto& pr : params_) temps.push_back(a_.malloc(checked_mul(pr.elems, z_.temp)));
      for (const H t : temps) a_.free(t);
    }
    for (const H g : grads_) a_.free(g);
  }

  // --- LoRA (peft 0.21, one GPU): the frozen base, the adapters, what they save -----------------
  // peft/tuners/lora/layer.py Linear.forward, per adapted linear: `result = self.base_layer(x)`;
  // `x = self._cast_input_dtype(x, lora_A.weight.dtype)` (a copy: the adapters are fp32 unless
  // --lora-dtype); `result = result + lora_B(lora_A(dropout(x))) * scaling` (dropout is Identity at
  // p = 0, else its output and a 1-byte mask); `result.to(torch_result_dtype)`. lora_A's matmul saves
  // its input (x, or the dropout's output), lora_B's saves lora_A's output; the product by the scaling
  // and the sum save nothing. The frozen base linears save nothing (mm saves an operand only for the
  // other's gradient), so a layer keeps its norms' fp32 copies (RMSNorm's `x.to(float32)`; LayerNorm
  // and fp32 streams keep their input), SDPA's rotated q and k, v and output, the MLP's gate, up and
  // act, and each adapter's two tensors: engine/activations.cpp's layer_saved, tensor by tensor.
  // Recorded (res12 traces, heldout's process, gpt2-medium LoRA r64 all-linear b2 x 1024
  // checkpointed): c_attn's adapter under no_grad allocates the bf16 base output (12 MiB), x in fp32
  // (8), A's output (0.5), B's (24), the scaled (24), the sum (24), the bf16 cast (12), freeing each
  // as above; the loss as full training's without the lm_head's gradient, the backward thread's
  // workspace after the lm_head's input gradient (its first matmul).
  struct Adapter {
    spec::Role role;
    std::uint64_t in, out;  // features
  };
  struct AdapterSaved {
    H x = kNoHandle, mask = kNoHandle, a = kNoHandle;  // lora_A's input (kNoHandle: the layer's own), its output
  };
  struct LoraSaved {
    H ns1 = kNoHandle, qr = kNoHandle, kr = kNoHandle, v = kNoHandle, at = kNoHandle, r = kNoHandle,
      ns2 = kNoHandle, gate = kNoHandle, up = kNoHandle, act = kNoHandle, out = kNoHandle;
    std::vector<AdapterSaved> ad;  // in the order of adapters_[layer]
  };

  void lora_setup(const Workload& w) {
    e_ = precision_of(w).compute;
    dropout_ = w.lora.dropout > 0;
    offload_ = w.activation_offload;
    // RMSNorm over a 16-bit stream saves its fp32 copy; LayerNorm (and any norm over an fp32
    // stream) saves its input, which the layer then keeps.
    norm_copy_ = m_.norm != spec::Norm::layer && e_ != 4 ? z_.hidden32 : 0;
    adapters_.assign(m_.num_layers, {});
    std::uint64_t layer = 0;
    for (const auto& g : m_.layers)
      for (std::uint64_t i = 0; i < g.count; ++i, ++layer)
        for (const auto& l : g.linears)
          if (lora_targets(w, l)) adapters_[layer].push_back({l.role, l.in_features, l.out_features});
  }

  std::uint64_t tok(std::uint64_t features, std::uint64_t bytes) const {
    return checked_mul(checked_mul(z_.tokens, features), bytes);
  }

  // One adapter's forward after its base output `base` (freed): returns the layer's output.
  H adapter_forward(const Adapter& ad, H base, bool keep, std::vector<AdapterSaved>& saved) {
    const bool cast = z_.adapter != e_;
    AdapterSaved s;
    if (cast) s.x = m(tok(ad.in, z_.adapter));
    if (dropout_) {
      s.mask = m(tok(ad.in, 1));
      const H d = m(tok(ad.in, z_.adapter));
      free_if(s.x);
      s.x = d;
    }
    s.a = m(tok(z_.rank, z_.adapter));
    const H b = m(tok(ad.out, z_.adapter));
    if (!keep) f(s.a), s.a = kNoHandle;
    const H sc = m(tok(ad.out, z_.adapter));
    f(b);
    H out;
    if (cast) {
      const H sum = m(tok(ad.out, z_.adapter));
      f(sc), f(base);
      out = m(tok(ad.out, e_));
      f(sum);
    } else {
      out = m(tok(ad.out, e_));
      f(sc), f(base);
    }
    if (keep) saved.push_back(s);
    else free_if(s.x), free_if(s.mask);
    return out;
  }

  // The adapters of `role` in layer `l` over the base outputs `outs` (each replaced by its
  // adapted output; a fused projection's one adapter goes to the first).
  void adapt(std::uint64_t l, spec::Role role, std::initializer_list<H*> outs, bool keep, LoraSaved& s) {
    auto it = outs.begin();
    for (const auto& ad : adapters_[l]) {
      if (ad.role != role) continue;
      if (it == outs.end()) break;
      **it = adapter_forward(ad, **it, keep, s.ad);
      ++it;
    }
  }

  // A pre-norm: RMSNorm's fp32 copy (saved), pow, the normalised fp32 product, its cast and the
  // weight's product (the output); LayerNorm's kernel makes its output only.
  std::pair<H, H> lora_norm(bool keep) {
    if (norm_copy_ == 0) return {kNoHandle, m(z_.hidden)};
    const H x32 = m(norm_copy_);
    f(m(z_.hidden32));
    const H y = m(z_.hidden32), c = m(z_.hidden);
    f(y);
    const H o = m(z_.hidden);
    f(c);
    if (!keep) f(x32);
    return {keep ? x32 : kNoHandle, o};
  }

  // One layer's forward from its input `h` (kept: the next layer's residual, or the checkpoint's
  // input); with `keep`, what backward needs stays (LoraSaved), else all is freed.
  LoraSaved lora_forward(std::uint64_t l, H h, bool keep) {
    LoraSaved s;
    const bool input_saved = norm_copy_ == 0;  // LayerNorm keeps its input
    H ln1;
    std::tie(s.ns1, ln1) = lora_norm(keep);
    H qp = m(z_.q), kp = m(z_.kv), v = m(z_.kv);
    adapt(l, spec::Role::attn_in, {&qp, &kp, &v}, keep, s);
    f(ln1);
    const H qr = m(z_.q), kr = m(z_.kv);
    f(qp), f(kp);
    const H at = m(z_.q);
    H at2 = m(z_.q);  // transpose(1, 2).contiguous(), o_proj's input
    H o = m(z_.hidden);
    adapt(l, spec::Role::attn_out, {&o}, keep, s);
    f(at2);
    const H r = m(z_.hidden);
    f(o);
    if (keep) s.qr = qr, s.kr = kr, s.v = v, s.at = at;
    else f(qr), f(kr), f(v), f(at);
    // The layer's input: the checkpoint keeps it (inputs_), else the residual sum was its last use.
    if (!ckpt_ && (!(keep && input_saved) || offload_)) f(h);
    H ln2;
    std::tie(s.ns2, ln2) = lora_norm(keep);
    H gate = m(z_.inter), up = m(z_.inter);
    adapt(l, spec::Role::mlp_in, {&gate, &up}, keep, s);
    f(ln2);
    const H act = m(z_.inter), mul = m(z_.inter);
    H down = m(z_.hidden);
    adapt(l, spec::Role::mlp_out, {&down}, keep, s);
    f(mul);
    s.out = m(z_.hidden);
    f(down);
    if (keep) s.gate = gate, s.up = up, s.act = act;
    else f(gate), f(up), f(act);
    if (keep && input_saved) s.r = r;
    else f(r);
    return s;
  }

  // One adapter's backward from the gradient `go` of its output (not freed): lora_B's and lora_A's
  // weight gradients (kept until zero_grad), the gradient of x cast back to the layer's dtype
  // (returned, summed into the input's); `go` becomes the base output's gradient (`result.to`'s
  // backward makes an fp32 copy, the sum's hands the base its own cast; the caller frees it).
  H adapter_backward(const Adapter& ad, H& go, const AdapterSaved& s) {
    const bool cast = z_.adapter != e_;
    H gsc;
    if (cast) {
      const H g32 = m(tok(ad.out, z_.adapter));
      go = m(tok(ad.out, e_));
      gsc = m(tok(ad.out, z_.adapter));
      f(g32);
    } else {
      gsc = m(tok(ad.out, z_.adapter));
    }
    grads_.push_back(m(checked_mul(checked_mul(ad.out, z_.rank), z_.grad)));  // lora_B.weight.grad
    const H ga = m(tok(z_.rank, z_.adapter));
    f(gsc), f(s.a);
    grads_.push_back(m(checked_mul(checked_mul(ad.in, z_.rank), z_.grad)));  // lora_A.weight.grad
    H gx = m(tok(ad.in, z_.adapter));
    f(ga);
    free_if(s.x);
    if (dropout_) {
      const H gd = m(tok(ad.in, z_.adapter));
      f(gx), f(s.mask);
      gx = gd;
    }
    if (cast) {
      const H ge = m(tok(ad.in, e_));
      f(gx);
      gx = ge;
    }
    return gx;
  }

  // The backward of the linears of `role` in layer `l` from their outputs' gradients `gos` (freed
  // when `owned`; the residual's gradient also flows on): each adapter's, then the frozen base's
  // input gradient (`in` bytes), summed into one (returned; autograd's InputBuffer adds in place).
  H linears_backward(std::uint64_t l, spec::Role role, std::vector<H> gos, bool owned, std::uint64_t in, LoraSaved& s,
                     std::size_t next_ad) {
    H gin = kNoHandle;
    const auto sum = [&](H g) {
      if (gin == kNoHandle) gin = g;
      else f(g);
    };
    std::vector<bool> own(gos.size(), owned);
    std::size_t k = 0;
    for (const auto& ad : adapters_[l]) {
      if (ad.role != role || k == gos.size()) continue;
      H g = gos[k];
      const H gx = adapter_backward(ad, g, s.ad[next_ad++]);
      if (g != gos[k]) {
        if (own[k]) f(gos[k]);
        gos[k] = g, own[k] = true;
      }
      sum(gx);
      ++k;
    }
    for (std::size_t i = 0; i < gos.size(); ++i) {
      const H gx = m(in);
      if (own[i]) f(gos[i]);
      sum(gx);
    }
    return gin;
  }

  // A pre-norm's backward from its output's gradient `gn` (freed): RMSNorm's fp32 chain (two fp32
  // temporaries), the saved copy freed; returns the input's gradient.
  H lora_norm_backward(H gn, H saved) {
    if (norm_copy_ > 0) {
      const H t1 = m(z_.hidden32), t2 = m(z_.hidden32);
      f(gn), f(t1);
      const H gi = m(z_.hidden);
      f(t2), f(saved);
      return gi;
    }
    const H gi = m(z_.hidden);
    f(gn);
    return gi;
  }

  // --activation-offload (torch.autograd.graph.save_on_cpu): each saved tensor is copied to pinned
  // host memory as it is saved and its GPU block freed (LayerNorm's saved input too); backward's
  // unpack copies it back to a new GPU block, here when the layer's backward begins (the engine
  // counts one layer's saved tensors on the GPU then). Measured (tests/accuracy/levers/results/
  // levers.jsonl, LoRA r16 bf16 offloaded, reserve beyond the peak measured / replayed, MiB):
  // llama-3.2-1b b2 x 1024 921 / 957, b4 x 2048 3917 / 3643; qwen2.5-0.5b 1130 / 897, 3441 / 3285;
  // smollm2-360m 467 / 785, 1419 / 1431 (the share gave 116 to 1426: device totals -6.4 .. -13.6 %,
  // now -1.6 .. +13.3 %).
  std::vector<H*> saved_handles(LoraSaved& s) {
    std::vector<H*> hs{&s.ns1, &s.qr, &s.kr, &s.v, &s.at, &s.r, &s.ns2, &s.gate, &s.up, &s.act};
    for (auto& a : s.ad) hs.insert(hs.end(), {&a.x, &a.mask, &a.a});
    return hs;
  }
  void offload(std::uint64_t l) {
    std::vector<std::uint64_t>& sizes = offloaded_[l];
    sizes.clear();
    for (H* h : saved_handles(lora_saved_[l])) {
      sizes.push_back(*h == kNoHandle ? 0 : a_.block_size(*h));
      free_if(*h);
    }
  }
  void reload(std::uint64_t l) {
    if (norm_copy_ == 0) inputs_[l] = m(z_.hidden);  // LayerNorm's saved input
    const std::vector<H*> hs = saved_handles(lora_saved_[l]);
    for (std::size_t i = 0; i < hs.size(); ++i) *hs[i] = offloaded_[l][i] == 0 ? kNoHandle : m(offloaded_[l][i]);
  }

  H lora_backward(std::uint64_t l, H gh) {
    if (offload_) reload(l);
    if (ckpt_) {
      lora_saved_[l] = lora_forward(l, inputs_[l], true);
      f(lora_saved_[l].out);
    }
    LoraSaved& s = lora_saved_[l];
    // adapters were saved in forward order: attn_in, attn_out, mlp_in, mlp_out; walk them backward.
    std::vector<std::size_t> first(4, 0);
    {
      std::size_t i = 0;
      const spec::Role order[4] = {spec::Role::attn_in, spec::Role::attn_out, spec::Role::mlp_in, spec::Role::mlp_out};
      for (int r = 0; r < 4; ++r) {
        first[static_cast<std::size_t>(r)] = i;
        for (const auto& ad : adapters_[l])
          if (ad.role == order[r]) ++i;
      }
    }
    // down_proj
    const H gmul = linears_backward(l, spec::Role::mlp_out, {gh}, false, z_.inter, s, first[3]);
    const H gact = m(z_.inter), gup = m(z_.inter);
    f(gmul), f(s.act);
    const H ggate = m(z_.inter);
    f(gact), f(s.gate), f(s.up);
    const H gln2 = linears_backward(l, spec::Role::mlp_in, {ggate, gup}, true, z_.hidden, s, first[2]);
    const H gr2 = lora_norm_backward(gln2, s.ns2);
    const H gr = m(z_.hidden);  // the residual's gradient: gh + the norm's
    f(gr2), f(gh);
    free_if(s.r);
    const H gat2 = linears_backward(l, spec::Role::attn_out, {gr}, false, z_.q, s, first[1]);
    const H gat = m(z_.q);
    f(gat2);
    const H gq = m(z_.q), gk = m(z_.kv), gv = m(z_.kv);
    f(gat), f(s.at), f(s.qr), f(s.kr), f(s.v);
    const H gq2 = m(z_.q), gk2 = m(z_.kv);
    f(gq), f(gk);
    const H gln1 = linears_backward(l, spec::Role::attn_in, {gq2, gk2, gv}, true, z_.hidden, s, first[0]);
    const H gi1 = lora_norm_backward(gln1, s.ns1);
    const H gin = m(z_.hidden);
    f(gi1), f(gr);
    if (ckpt_ || norm_copy_ == 0) f(inputs_[l]);
    return gin;
  }

  // The final norm, the logits, their fp32 copy and log-softmax (the frozen lm_head saves nothing);
  // the loss's backward: the lm_head's input gradient is backward's first matmul (the workspace
  // comes with it), then the final norm's; `h` (the last layer's output) freed.
  H lora_loss(H h) {
    const auto [ns, norm] = lora_norm(true);
    H th = kNoHandle;
    const H lg = logits(th);
    const H g3 = cross_entropy(lg, norm, {}, th);
    const H gx = m(z_.hidden);
    if (!workspace_) workspace_ = m(kBackwardWorkspace);
    f(g3);
    const H gi = lora_norm_backward(gx, ns);
    f(h);
    return gi;
  }

  void step() {
    grads_.clear();
    const std::uint64_t layers = m_.num_layers;
    std::vector<H> casts;
    inputs_.clear();
    saved_.assign(layers, {});
    if (neox_) neox_saved_.assign(layers, {});
    if (llama16_) llama16_saved_.assign(layers, {});
    a_.begin_region();
    H h = a_.malloc(z_.hidden);
    if (lora_) lora_saved_.assign(layers, {});
    if (offload_) offloaded_.assign(layers, {});
    for (std::uint64_t l = 0; l < layers; ++l) {
      inputs_.push_back(h);
      if (lora_) {
        lora_saved_[l] = lora_forward(l, h, !ckpt_);
        if (offload_) offload(l);
        h = lora_saved_[l].out;
        continue;
      }
      if (neox_) {
        neox_saved_[l] = neox_forward(l, !ckpt_);
        h = neox_saved_[l].out;
        continue;
      }
      if (llama16_) {
        llama16_saved_[l] = llama16_forward(l);
        h = llama16_saved_[l].out;
        continue;
      }
      auto sv = layer_forward(l, !ckpt_, casts);
      h = sv.back();
      sv.pop_back();
      saved_[l] = std::move(sv);
    }
    next_region(0);
    H gh = lora_ ? lora_loss(h) : llama16_ ? llama16_loss(h) : loss(h, casts);
    next_region(1);
    for (std::uint64_t l = layers; l-- > 0;)
      if (llama16_) llama16_backward(l);
      else gh = lora_ ? lora_backward(l, gh) : neox_ ? neox_backward(l, gh) : layer_backward(l, gh);
    if (lora_) a_.free(gh);  // the frozen embedding takes no gradient
    else embedding_grad(gh);
    next_region(2);
    optimizer_step();
    next_region(3);
  }


  // Under autocast over fp32 weights without checkpointing, op by op as the recorded steps of
  // qwen2.5-1.5b and qwen2.5-0.5b fp32-amp (tests/accuracy/alloc/fresh/traces_s8) allocate and free
  // (blocks under 1 MiB left out): the residual stream and RMSNorm's tensors are fp32; each linear
  // casts its weight and its input to 16 bits, and its matmul saves both casts until the layer's
  // backward (not until forward ends); the rotary embeddings come out fp32 (cos and sin follow the
  // fp32 hidden states) and SDPA saves 16-bit casts of q and k. In backward one fp32 gradient of
  // the residual stream is accumulated in place through every layer; each weight's gradient comes
  // out 16-bit and is cast to the fp32 .grad; each linear's input gradient is cast to fp32.
  // The llama-family layer (three q/k/v projections, o_proj, gate and up, down) and GPT-2's
  // (gpt2_forward / gpt2_backward below); other layers keep step().
  static constexpr H kNoHandle = std::numeric_limits<H>::max();
  struct AmpLinears {
    std::uint64_t q = 0, k = 0, v = 0, o = 0, gate = 0, up = 0, down = 0;  // parameter elements
  };
  struct AmpSaved {
    H xr1, n1, qo, ko, vo, cq, ck, cv, xq, xk, xv, kc, qc, at, co, r, xr2, cg, xg, g, act, cu, xu, u, mul, cd, out;
    H mask1, drop1, half, x32, th, one, xd, mask2;  // GPT-2's layer
  };

  bool amp_layers() {
    const bool llama = !m_.learned_positions && m_.norm == spec::Norm::rms && m_.gated_mlp && !m_.qk_norm &&
                       !m_.norm_fp32_scale && !m_.parallel_residual && m_.kv_lora_rank == 0;
    gpt2_ = m_.learned_positions && m_.norm == spec::Norm::layer && !m_.gated_mlp &&
            m_.activation == spec::Activation::gelu_tanh_python && !m_.parallel_residual;
    if (!llama && !gpt2_) return false;
    lin_.assign(m_.num_layers, {});
    std::vector<std::vector<std::uint64_t>> in(m_.num_layers), mlp(m_.num_layers);
    std::vector<std::uint32_t> outs(m_.num_layers), downs(m_.num_layers);
    for (const auto& pr : params_) {
      if (pr.layer >= m_.num_layers || pr.bias) continue;
      AmpLinears& l = lin_[pr.layer];
      if (pr.role == spec::Role::attn_in) in[pr.layer].push_back(pr.elems);
      else if (pr.role == spec::Role::mlp_in) mlp[pr.layer].push_back(pr.elems);
      else if (pr.role == spec::Role::attn_out) l.o = pr.elems, ++outs[pr.layer];
      else if (pr.role == spec::Role::mlp_out) l.down = pr.elems, ++downs[pr.layer];
      else if (pr.role != spec::Role::other) return false;
    }
    for (std::uint64_t i = 0; i < m_.num_layers; ++i) {
      if (gpt2_) {  // c_attn, attn.c_proj, c_fc, mlp.c_proj
        if (in[i].size() != 1 || mlp[i].size() != 1 || outs[i] != 1 || downs[i] != 1) return false;
        lin_[i].q = in[i][0], lin_[i].up = mlp[i][0];
        continue;
      }
      if (in[i].size() != 3 || mlp[i].size() != 2 || outs[i] != 1 || downs[i] != 1) return false;
      lin_[i].q = in[i][0], lin_[i].k = in[i][1], lin_[i].v = in[i][2], lin_[i].gate = mlp[i][0], lin_[i].up = mlp[i][1];
    }
    return true;
  }

  H m(std::uint64_t bytes) { return a_.malloc(bytes); }
  void f(H h) { a_.free(h); }
  std::uint64_t cast(std::uint64_t elems) const { return checked_mul(elems, 2); }
  // The lm_head's weight gradient, kept with the others (the embedding's size when the two are tied:
  // lm_head_params is 0 then).
  void lm_head_grad() { grads_.push_back(m(checked_mul(std::max(m_.lm_head_params, m_.embedding_params), z_.grad))); }

  // RMSNorm in fp32: pow (freed after the mean), x * rsqrt (saved), weight * that (the output).
  std::pair<H, H> amp_norm() {
    f(m(z_.hidden32));
    const H xr = m(z_.hidden32);
    return {xr, m(z_.hidden32)};
  }

  // RMSNorm's backward from the gradient `gn` of its output: its temporaries, the input's
  // gradient (kept when `keep`, else summed in place into the residual's), `input` freed.
  H amp_norm_backward(H gn, H xr, H input, bool keep) {
    const H a1 = m(z_.hidden32), a2 = m(z_.hidden32);
    f(m(checked_mul(z_.hidden32, 2)));
    f(a2), f(gn), f(xr);
    const H b1 = m(z_.hidden32), b2 = m(z_.hidden32);
    f(b1), f(a1);
    if (!keep) f(b2);
    const H c1 = m(z_.hidden32), c2 = m(z_.hidden32), c3 = m(z_.hidden32), c4 = m(z_.hidden32);
    f(c3), f(c2), f(c1), f(input), f(c4);
    return keep ? b2 : kNoHandle;
  }

  // q * cos, rotate_half (the negated half, the cat), its product with sin, the sum: fp32 where
  // cos and sin are. `s16`: the 16-bit projection output's size.
  H amp_rope(std::uint64_t s16) {
    const H a = m(2 * s16), neg = m(s16 / 2), cat = m(s16);
    f(neg);
    const H b = m(2 * s16);
    f(cat);
    const H e = m(2 * s16);
    f(a), f(b);
    return e;
  }

  H amp_rope_backward(std::uint64_t s16, H g32) {
    const H t1 = m(2 * s16), t2 = m(s16);
    f(t1);
    const H t3 = m(s16 / 2), res = m(s16);
    f(t3);
    const H t4 = m(s16);
    f(t2), f(t4);
    const H t5 = m(2 * s16), t6 = m(s16);
    f(t5), f(g32), f(t6);
    return res;
  }

  AmpSaved amp_forward(std::uint64_t l) {
    const AmpLinears& w = lin_[l];
    AmpSaved s{};
    std::tie(s.xr1, s.n1) = amp_norm();
    s.cq = m(cast(w.q)), s.xq = m(z_.hidden), s.qo = m(z_.q);
    s.ck = m(cast(w.k)), s.xk = m(z_.hidden), s.ko = m(z_.kv);
    s.cv = m(cast(w.v)), s.xv = m(z_.hidden), s.vo = m(z_.kv);
    const H qe = amp_rope(z_.q), ke = amp_rope(z_.kv);
    f(s.qo), f(s.ko);
    s.kc = m(z_.kv), s.qc = m(z_.q), s.at = m(z_.q);
    s.co = m(cast(w.o));
    const H oo = m(z_.hidden);
    f(qe), f(ke), f(s.n1);
    s.r = m(z_.hidden32);
    f(oo);
    H n2;
    std::tie(s.xr2, n2) = amp_norm();
    s.cg = m(cast(w.gate)), s.xg = m(z_.hidden), s.g = m(z_.inter), s.act = m(z_.inter);
    s.cu = m(cast(w.up)), s.xu = m(z_.hidden), s.u = m(z_.inter), s.mul = m(z_.inter);
    s.cd = m(cast(w.down));
    const H d = m(z_.hidden);
    f(n2);
    s.out = m(z_.hidden32);
    f(d);
    return s;
  }

  // GPT-2's layer under autocast over fp32 weights, as the recorded gpt2-medium fp32-amp b8 s1024
  // steps allocate (traces_s8/default): LayerNorm in fp32, the fused c_attn (its weight and input
  // cast, its 16-bit output saved as SDPA's q, k, v), c_proj, the residual dropout (a 1-byte mask
  // and its output), gelu_new's chain (0.5 x in 16 bits, then x cast to fp32 for pow and every
  // later term fp32: the fp32 x, tanh and 1 + tanh saved), the MLP's c_proj on a 16-bit cast of
  // the fp32 activation. Backward: the bias gradients' reductions are transients of 64 and 132 MiB
  // there, counted as one and two intermediate-sized 16-bit blocks.
  std::uint64_t dropout_mask() const { return m_.hidden_dropout > 0 ? z_.hidden32 / 4 : 0; }

  AmpSaved gpt2_forward(std::uint64_t l) {
    const AmpLinears& w = lin_[l];
    const std::uint64_t qkv = checked_add(z_.q, checked_mul(z_.kv, 2)), i32 = checked_mul(z_.inter, 2);
    AmpSaved s{};
    const H ln1 = m(z_.hidden32);
    s.cq = m(cast(w.q)), s.xq = m(z_.hidden), s.qo = m(qkv);
    s.at = m(z_.q);
    s.co = m(cast(w.o));
    const H po = m(z_.hidden);
    s.mask1 = m(dropout_mask());
    s.drop1 = dropout_mask() > 0 ? m(z_.hidden) : po;
    if (dropout_mask() > 0) f(po);
    s.r = m(z_.hidden32);
    f(ln1);
    const H ln2 = m(z_.hidden32);
    s.cu = m(cast(w.up)), s.xu = m(z_.hidden);
    const H fc = m(z_.inter);
    s.half = m(z_.inter), s.x32 = m(i32);
    const H p = m(i32), c = m(i32);
    f(p);
    const H sum = m(i32);
    f(c);
    const H sc = m(i32);
    f(sum);
    s.th = m(i32);
    f(sc);
    s.one = m(i32);
    const H act = m(i32);
    f(fc);
    s.cd = m(cast(w.down)), s.xd = m(z_.inter);
    const H po2 = m(z_.hidden);
    f(act);
    s.mask2 = m(dropout_mask());
    const H drop2 = dropout_mask() > 0 ? m(z_.hidden) : po2;
    if (dropout_mask() > 0) f(po2);
    s.out = m(z_.hidden32);
    f(ln2), f(s.drop1), f(drop2);
    return s;
  }

  // The gradient of a dropout's output from the fp32 residual gradient: its 16-bit cast, times the mask.
  H gpt2_dropout_backward(H mask) {
    const H g16 = m(z_.hidden);
    if (dropout_mask() == 0) return g16;
    const H gd = m(z_.hidden);
    f(g16), f(mask);
    return gd;
  }

  void gpt2_backward(std::uint64_t l) {
    const AmpLinears& w = lin_[l];
    AmpSaved& s = amp_saved_[l];
    const std::uint64_t qkv = checked_add(z_.q, checked_mul(z_.kv, 2)), i32 = checked_mul(z_.inter, 2);
    H g = gpt2_dropout_backward(s.mask2);
    const H gx4 = m(z_.inter), gw4 = m(cast(w.down));
    f(m(z_.inter));
    f(g), f(s.xd), f(s.cd);
    const H g32 = m(i32);
    f(gx4);
    amp_weight_grad(gw4, w.down);
    // gelu_new's backward
    const H t1 = m(i32), t2 = m(i32), gh1 = m(z_.inter);
    f(t2), f(g32), f(s.one), f(s.half);
    const H t3 = m(i32);
    f(t1), f(s.th);
    const H t4 = m(i32);
    f(t3);
    const H gx = m(z_.inter), t5 = m(i32);
    f(t4);
    const H t6 = m(i32), t7 = m(i32), t8 = m(i32);
    f(t7), f(t6), f(t5), f(s.x32);
    const H t9 = m(z_.inter);
    f(t8), f(t9);
    const H t10 = m(z_.inter);
    f(gh1), f(t10);
    gpt2_norm_linear_backward(gx, s.xu, s.cu, w.up, s.r);  // c_fc, then ln_2
    // attention's c_proj and SDPA
    g = gpt2_dropout_backward(s.mask1);
    const H gx2 = m(z_.hidden), gw2 = m(cast(w.o));
    f(m(z_.inter));
    f(g), f(s.co);
    amp_weight_grad(gw2, w.o);
    const H gq = m(z_.q), gk = m(z_.kv), gv = m(z_.kv);
    f(m(checked_mul(z_.q, 2)));
    f(gx2), f(s.qo), f(s.at);
    const H gqkv = m(qkv);
    f(gq), f(gk), f(gv);
    gpt2_norm_linear_backward(gqkv, s.xq, s.cq, w.q, inputs_[l]);  // c_attn, then ln_1
  }

  // The backward of a linear fed by a LayerNorm (c_fc after ln_2, c_attn after ln_1), as recorded:
  // the input's and the weight's 16-bit gradients, a transient of 2 x intermediate bytes (the bias
  // gradient's reduction), then the output gradient `go` and the saved casts of the input `x` and
  // weight `cw` freed; the input gradient cast to fp32 and the 16-bit one freed; the weight's .grad
  // (amp_weight_grad); the LayerNorm's fp32 input gradient, summed into the residual's gradient,
  // and what the norm saved (`saved`: the residual stream's tensor) freed.
  void gpt2_norm_linear_backward(H go, H x, H cw, std::uint64_t elems, H saved) {
    const H gx = m(z_.hidden), gw = m(cast(elems));
    f(m(checked_mul(z_.inter, 2)));
    f(go), f(x), f(cw);
    const H gn = m(z_.hidden32);
    f(gx);
    amp_weight_grad(gw, elems);
    const H gi = m(z_.hidden32);
    f(gn), f(saved), f(gi);
  }

  // The 16-bit gradient `gw` of a weight of `elems` elements cast to its fp32 .grad (kept).
  void amp_weight_grad(H gw, std::uint64_t elems) {
    grads_.push_back(m(checked_mul(elems, z_.grad)));
    f(gw);
  }

  // A q/k/v projection's backward from its output's gradient `go`: the input's 16-bit gradient
  // cast to fp32 (the first one becomes the norm's gradient, the others are summed into it).
  void amp_in_backward(H go, bool contiguous, std::uint64_t out16, H x, H cw, std::uint64_t elems, H& gn) {
    if (contiguous) {
      const H c = m(out16);
      f(go);
      go = c;
    }
    const H gx = m(z_.hidden), gw = m(cast(elems));
    f(go), f(x), f(cw);
    const H g32 = m(z_.hidden32);
    f(gx);
    if (gn == kNoHandle) gn = g32;
    else f(g32);
    amp_weight_grad(gw, elems);
  }

  void amp_backward(std::uint64_t l) {
    const AmpLinears& w = lin_[l];
    AmpSaved& s = amp_saved_[l];
    const H gd = m(z_.hidden), gwd = m(cast(w.down)), gmul = m(z_.inter);
    f(gd), f(s.cd), f(s.mul);
    amp_weight_grad(gwd, w.down);
    const H gact = m(z_.inter), gup = m(z_.inter);
    f(gmul), f(s.u), f(s.act);
    const H gwu = m(cast(w.up)), gxu = m(z_.hidden);
    f(gup), f(s.cu), f(s.xu);
    const H gn2 = m(z_.hidden32);
    f(gxu);
    amp_weight_grad(gwu, w.up);
    const H gg = m(z_.inter);
    f(gact), f(s.g);
    const H gwg = m(cast(w.gate)), gxg = m(z_.hidden);
    f(gg), f(s.cg), f(s.xg);
    const H t = m(z_.hidden32);
    f(gxg), f(t);
    amp_weight_grad(gwg, w.gate);
    amp_norm_backward(gn2, s.xr2, s.r, false);
    const H go = m(z_.hidden), gwo = m(cast(w.o)), gat = m(z_.q);
    f(go), f(s.co);
    amp_weight_grad(gwo, w.o);
    const H gq = m(z_.q), gk = m(z_.kv), gv = m(z_.kv);
    f(m(checked_mul(z_.q, 4)));  // SDPA's backward workspace (48.19 MiB for 12 MiB of q)
    f(gat), f(s.kc), f(s.qc), f(s.at);
    const H gq32 = m(checked_mul(z_.q, 2));
    f(gq);
    const H gk32 = m(checked_mul(z_.kv, 2));
    f(gk);
    const H gko = amp_rope_backward(z_.kv, gk32), gqo = amp_rope_backward(z_.q, gq32);
    H gn1 = kNoHandle;
    amp_in_backward(gv, false, z_.kv, s.xv, s.cv, w.v, gn1);
    f(s.vo);
    amp_in_backward(gko, true, z_.kv, s.xk, s.ck, w.k, gn1);
    amp_in_backward(gqo, true, z_.q, s.xq, s.cq, w.q, gn1);
    amp_norm_backward(gn1, s.xr1, inputs_[l], false);
  }

  // The final norm, lm_head (its weight and input cast, saved), the logits, their fp32 copy and
  // log-softmax; the loss's backward down to the gradient of the residual stream (returned).
  H amp_loss(H h) {
    H xr = kNoHandle, n;
    if (gpt2_) n = m(z_.hidden32);  // LayerNorm's output (its mean and rstd are small)
    else std::tie(xr, n) = amp_norm();
    const std::uint64_t head = checked_mul(m_.vocab_size, m_.hidden_size);
    const H cw = m(cast(head)), x = m(z_.hidden);
    const H g3 = cross_entropy(m(z_.logits16), n);
    const H gw = m(cast(head));
    if (!workspace_) workspace_ = m(kBackwardWorkspace);
    const H gx = m(z_.hidden);
    f(g3), f(cw), f(x);
    const H gn = m(z_.hidden32);
    f(gx);
    lm_head_grad();
    f(gw);
    if (!gpt2_) return amp_norm_backward(gn, xr, h, true);
    const H gi = m(z_.hidden32);
    f(gn), f(h);
    return gi;
  }

  void amp_step() {
    grads_.clear();
    inputs_.clear();
    amp_saved_.assign(m_.num_layers, {});
    a_.begin_region();
    H h = m(z_.hidden32);  // the embedding's output (fp32 weights)
    for (std::uint64_t l = 0; l < m_.num_layers; ++l) {
      inputs_.push_back(h);
      amp_saved_[l] = gpt2_ ? gpt2_forward(l) : amp_forward(l);
      h = amp_saved_[l].out;
    }
    next_region(0);
    const H gh = amp_loss(h);
    next_region(1);
    for (std::uint64_t l = m_.num_layers; l-- > 0;) gpt2_ ? gpt2_backward(l) : amp_backward(l);
    embedding_grad(gh);
    next_region(2);
    optimizer_step();
    next_region(3);
  }

  std::vector<AmpLinears> lin_;
  std::vector<AmpSaved> amp_saved_;

  // Gemma's decoder layer (GemmaRMSNorm, norm_fp32_scale) in 16-bit weights without autocast, op
  // by op as the recorded gemma-2-2b bf16 b3 x 1024 steps allocate (tests/accuracy/alloc/fresh/
  // traces_s10/fresh, a process of its own; transformers' gemma2/modeling_gemma2.py, torch 2.11):
  // each norm works in fp32 (`x.float()` saved by pow and x * rsqrt, the pow, the normalised
  // tensor saved by `* (1 + weight.float())`, that product, its cast back), four norms a layer with
  // gemma2's sandwich (post_attention_layernorm and post_feedforward_layernorm on the branches'
  // outputs before each residual sum; two with gemma's), the rotary embeddings as in llama, SDPA's
  // output, gelu_pytorch_tanh as one kernel. A layer's input is freed when the layer returns
  // (the first layer's, the scaled embedding, when the model's forward returns). Backward: one
  // 16-bit gradient of the residual stream through every layer (each branch's input gradient is
  // summed into it in place); each norm's backward allocates eight fp32 tensors and a transient
  // of two (the weight's gradient reduced over the tokens) before its input's 16-bit gradient.
  bool fp32_norm_layers() {
    if (!m_.norm_fp32_scale || m_.norm != spec::Norm::rms || !m_.gated_mlp || m_.qk_norm || m_.parallel_residual ||
        m_.learned_positions || m_.kv_lora_rank != 0 || m_.hidden_size == 0 || z_.scores > 0)
      return false;
    for (const auto& g : m_.layers) {
      const std::uint64_t norms = g.norm_params / m_.hidden_size;
      if (g.norm_params % m_.hidden_size != 0 || g.other_params != 0 || (norms != 2 && norms != 4)) return false;
      if (&g != &m_.layers.front() && norms != sandwich_norms_) return false;
      sandwich_norms_ = norms;
      std::uint32_t in = 0, mlp = 0, out = 0, down = 0;
      for (const auto& l : g.linears) {
        if (l.role == spec::Role::attn_in) ++in;
        else if (l.role == spec::Role::mlp_in) ++mlp;
        else if (l.role == spec::Role::attn_out) ++out;
        else if (l.role == spec::Role::mlp_out) ++down;
        else return false;
        if (l.copies != 1) return false;
      }
      if (in != 3 || mlp != 2 || out != 1 || down != 1) return false;
    }
    return true;
  }

  // The gradient of the `index`-th parameter of layer `l` with role `role` (module order), kept.
  void grad_one(std::uint64_t l, spec::Role role, std::uint32_t index) {
    std::uint32_t i = 0;
    for (const auto& pr : params_)
      if (pr.layer == l && pr.role == role && i++ == index) grads_.push_back(m(checked_mul(pr.elems, z_.grad)));
  }

  struct NormSaved {
    H x32 = kNoHandle, normed = kNoHandle;
  };
  struct Fp32NormSaved {
    NormSaved n1, n2, n3, n4;  // input, post-attention, pre-feedforward, post-feedforward (n2, n4: sandwich)
    H ln1 = kNoHandle, v = kNoHandle, qr = kNoHandle, kr = kNoHandle, at = kNoHandle, ln2 = kNoHandle;
    H gate = kNoHandle, act = kNoHandle, up = kNoHandle, mul = kNoHandle, out = kNoHandle;
  };

  // GemmaRMSNorm on a 16-bit input: returns its 16-bit output.
  H fp32_norm(NormSaved& n) {
    n.x32 = m(z_.hidden32);
    f(m(z_.hidden32));  // pow(2)
    n.normed = m(z_.hidden32);
    const H scaled = m(z_.hidden32), out = m(z_.hidden);
    f(scaled);
    return out;
  }

  // Its backward from the gradient `g` of its output (freed when `free_g`): returns the input's.
  H fp32_norm_backward(H g, bool free_g, NormSaved& n) {
    const H a = m(z_.hidden32);  // g.float()
    if (free_g) f(g);
    const H b = m(z_.hidden32), c = m(z_.hidden32);
    f(m(checked_mul(z_.hidden32, 2)));
    f(b), f(a), f(n.normed);
    return rms_backward_fp32(c, n.x32);
  }

  // The fp32 end both RMSNorm backwards share (fp32_norm_backward's GemmaRMSNorm and llama16's
  // rms16_backward, each as recorded there), from `c`, the last fp32 gradient block of the
  // norm's own op: two fp32 blocks (`c` freed after them), four fp32 temporaries freed with the
  // saved fp32 input `x32`, then the input's 16-bit gradient (returned) and the second block freed.
  H rms_backward_fp32(H c, H x32) {
    const H d = m(z_.hidden32), e = m(z_.hidden32);
    f(d), f(c);
    const H t1 = m(z_.hidden32), t2 = m(z_.hidden32), t3 = m(z_.hidden32), t4 = m(z_.hidden32);
    f(t3), f(t2), f(t1), f(x32), f(t4);
    const H gi = m(z_.hidden);
    f(e);
    return gi;
  }

  // The rotary embedding over `size` bytes of q or k (the whole head in gemma's fp32_norm_forward and
  // llama16_forward; gpt_neox's rotated share, rot_): x * cos, rotate_half (the negated half, the
  // cat), its product with sin, the sum.
  H rope16(std::uint64_t size) {
    const H c = m(size), neg = m(size / 2), cat = m(size);
    f(neg);
    const H sn = m(size);
    f(cat);
    const H e = m(size);
    f(c), f(sn);
    return e;
  }

  // Its backward from the gradient `g` of its output (freed here when a handle; gpt_neox's caller
  // frees it later): the input's gradient.
  H rope16_backward(std::uint64_t size, H g) {
    const H t1 = m(size), t2 = m(size / 2), r = m(size);
    f(t2);
    const H t3 = m(size);
    f(t1), f(t3);
    const H t4 = m(size);
    free_if(g);
    f(t4);
    return r;
  }

  // One layer's forward from its input (kept: the caller frees it); all but the output freed
  // when !keep.
  Fp32NormSaved fp32_norm_forward(bool keep) {
    const bool sandwich = sandwich_norms_ == 4;
    Fp32NormSaved s;
    s.ln1 = fp32_norm(s.n1);
    const H qp = m(z_.q), kp = m(z_.kv);
    s.v = m(z_.kv);
    s.qr = rope16(z_.q);
    s.kr = rope16(z_.kv);
    f(qp), f(kp);
    s.at = m(z_.q);
    const H o = m(z_.hidden);
    H r;
    if (sandwich) {
      const H po = fp32_norm(s.n2);
      f(o);
      r = m(z_.hidden);
      f(po);
    } else {
      r = m(z_.hidden);
      f(o);
    }
    s.ln2 = fp32_norm(s.n3);
    s.gate = m(z_.inter), s.act = m(z_.inter), s.up = m(z_.inter), s.mul = m(z_.inter);
    const H d = m(z_.hidden);
    if (sandwich) {
      const H pd = fp32_norm(s.n4);
      f(d);
      s.out = m(z_.hidden);
      f(pd);
    } else {
      s.out = m(z_.hidden);
      f(d);
    }
    f(r);
    if (!keep)
      for (const H h : {s.n1.x32, s.n1.normed, s.n2.x32, s.n2.normed, s.n3.x32, s.n3.normed, s.n4.x32, s.n4.normed, s.ln1,
                        s.v, s.qr, s.kr, s.at, s.ln2, s.gate, s.act, s.up, s.mul})
        free_if(h);
    return s;
  }

  // The gated MLP's backward in 16-bit weights (gemma's fp32_norm_backward_layer, llama16_backward;
  // both recorded, see there): down's weight gradient, mul's gradient, then act's and up's (`s`'s
  // mul, up and act freed), up's weight and input gradients, gate's gradient through the
  // activation, gate's weight and input gradients (`in`, the MLP's input, freed with them), their
  // sum (returned) after which both input gradients are freed. `grad(role, k)` makes the k-th
  // linear of `role`'s weight gradient (with or without its bias's); `freed` (a handle, or
  // kNoHandle) is freed once mul's gradient is made (gemma's post-feedforward norm's gradient).
  // `up_first`: up's gradient is made before act's (llama16's sequence), else after (gemma's): two
  // blocks of one size, but which one is freed first decides the addresses best fit reuses
  // (qwen2.5-1.5b bf16 AdamW b4 x 1024, llama16: 1422 MiB of reserve; in gemma's order, 1342).
  template <class Saved, class Grad>
  H gated_mlp_backward(const Saved& s, H in, Grad grad, bool up_first, H freed = kNoHandle) {
    grad(spec::Role::mlp_out, 0);
    const H gmul = m(z_.inter);
    free_if(freed);
    f(s.mul);
    const H g1 = m(z_.inter), g2 = m(z_.inter);
    const H gup = up_first ? g1 : g2, gact = up_first ? g2 : g1;
    f(gmul), f(s.up), f(s.act);
    grad(spec::Role::mlp_in, 1);
    const H gxu = m(z_.hidden);
    f(gup);
    const H ggate = m(z_.inter);
    f(gact), f(s.gate);
    grad(spec::Role::mlp_in, 0);
    const H gxg = m(z_.hidden);
    f(ggate), f(in);
    const H sum = m(z_.hidden);
    f(gxu), f(gxg);
    return sum;
  }

  // Layer `l`'s backward; `gh` is the residual stream's gradient (kept, summed into in place).
  void fp32_norm_backward_layer(std::uint64_t l, H gh) {
    const bool sandwich = sandwich_norms_ == 4;
    Fp32NormSaved s = fp32_saved_[l];
    if (ckpt_) {
      s = fp32_norm_forward(true);
      f(s.out);
    }
    const H gd = sandwich ? fp32_norm_backward(gh, false, s.n4) : gh;
    const H sum2 = gated_mlp_backward(
        s, s.ln2, [&](spec::Role role, std::uint32_t k) { grad_one(l, role, k); }, false, sandwich ? gd : kNoHandle);
    f(fp32_norm_backward(sum2, true, s.n3));  // summed into gh
    const H go = sandwich ? fp32_norm_backward(gh, false, s.n2) : gh;
    grad_one(l, spec::Role::attn_out, 0);
    const H gat = m(z_.q);
    if (sandwich) f(go);
    const H gq = m(z_.q), gk = m(z_.kv), gv = m(z_.kv);
    f(m(checked_mul(z_.q, 4)));  // SDPA's backward workspace
    f(gat), f(s.v), f(s.qr), f(s.kr), f(s.at);
    const H rk = rope16_backward(z_.kv, gk), rq = rope16_backward(z_.q, gq);
    grad_one(l, spec::Role::attn_in, 2);
    const H xv = m(z_.hidden);
    f(gv);
    const H ck = m(z_.kv);
    f(rk);
    grad_one(l, spec::Role::attn_in, 1);
    const H xk = m(z_.hidden);
    f(ck);
    const H sum1 = m(z_.hidden);
    f(xv), f(xk);
    const H cq = m(z_.q);
    f(rq);
    grad_one(l, spec::Role::attn_in, 0);
    const H xq = m(z_.hidden);
    f(cq), f(s.ln1), f(xq);
    f(fp32_norm_backward(sum1, true, s.n1));  // summed into gh
    grad_of(l, {spec::Role::other});
    if (ckpt_) f(inputs_[l]);
  }

  void fp32_norm_step() {
    grads_.clear();
    inputs_.clear();
    fp32_saved_.assign(m_.num_layers, {});
    a_.begin_region();
    H embed = m(z_.hidden);
    if (m_.scaled_embeddings) {  // inputs_embeds * normalizer
      const H scaled = m(z_.hidden);
      f(embed);
      embed = scaled;
    }
    H h = embed;
    for (std::uint64_t l = 0; l < m_.num_layers; ++l) {
      inputs_.push_back(h);
      fp32_saved_[l] = fp32_norm_forward(!ckpt_);
      if (!ckpt_ && h != embed) f(h);
      h = fp32_saved_[l].out;
    }
    next_region(0);
    // The loss: the final norm, the logits (soft-capped: / cap, tanh saved, * cap), their fp32
    // copy and log-softmax; backward through them to the final norm's input.
    NormSaved fin;
    const H fo = fp32_norm(fin);
    f(h);
    if (!ckpt_) f(embed);
    H th = kNoHandle;
    const H lg = logits(th);
    const H g3 = cross_entropy(lg, kNoHandle, {}, th);
    lm_head_grad();
    if (!workspace_) workspace_ = m(kBackwardWorkspace);
    const H gx = m(z_.hidden);
    f(g3), f(fo);
    const H gh = fp32_norm_backward(gx, true, fin);
    next_region(1);
    for (std::uint64_t l = m_.num_layers; l-- > 0;) fp32_norm_backward_layer(l, gh);
    H ge = gh;
    if (m_.scaled_embeddings) {
      ge = m(z_.hidden);
      f(gh);
    }
    embedding_grad(ge);
    next_region(2);
    optimizer_step();
    next_region(3);
  }

  std::vector<Fp32NormSaved> fp32_saved_;
  bool fp32_norms_ = false;  // Gemma's layer (fp32_norm_step)
  std::uint64_t state_tensors_ = 1;
  // A decoder linear's slot among the four roles the layer replays count (attn_in, attn_out,
  // mlp_in, mlp_out); -1 for any other.
  static int role_slot(spec::Role r) {
    switch (r) {
      case spec::Role::attn_in: return 0;
      case spec::Role::attn_out: return 1;
      case spec::Role::mlp_in: return 2;
      case spec::Role::mlp_out: return 3;
      default: return -1;
    }
  }

  // A layer group's linears counted by role slot, as the gpt_neox and llama16 replays check
  // their layer's shape: none where a linear is an expert, a shared copy or of another role.
  static std::optional<std::array<int, 4>> role_counts(const spec::LayerGroup& g) {
    std::array<int, 4> n{};
    for (const auto& l : g.linears) {
      const int slot = role_slot(l.role);
      if (l.expert || l.copies != 1 || slot < 0) return std::nullopt;
      ++n[static_cast<std::size_t>(slot)];
    }
    return n;
  }

  // GPT-NeoX's layer (transformers' gpt_neox/modeling_gpt_neox.py, use_parallel_residual) in
  // 16-bit weights without autocast, op by op as the recorded pythia-410m bf16 AdamW b2 x 1024
  // steps allocate (tests/accuracy/alloc/fresh/traces_s14, a process of its own and measure.py's
  // one process; H100, torch 2.11, transformers 5.17; blocks under 64 KiB left out): LayerNorm's
  // output; the fused query_key_value (one 3 x q block, which v views and SDPA keeps); the partial
  // rotary on q then k (x_rot * cos, rotate_half's negated half and cat, * sin, the sum: blocks of
  // the rotated share of the heads, rotary_pct) and the cat with the pass-through part (a q-sized
  // block each); SDPA's output and logsumexp; the output's contiguous copy, dense; the second
  // LayerNorm on the layer's input (parallel residual), dense_h_to_4h, gelu, dense_4h_to_h; the
  // two residual sums. Backward takes the MLP branch first (its ops were made last), then the
  // attention branch; the layer input's gradient is the residual's gradient plus the second norm's
  // (out of place: the residual's is still the attention branch's), the first norm's summed into
  // it in place. A linear with a bias leaves a transient of 4 x its output gradient's bytes after
  // its weight gradient (the bias gradient's reduction: 16, 64, 16 and 48 MiB for dense_4h_to_h,
  // dense_h_to_4h, dense and query_key_value there); SDPA's backward a transient of 2 x q + the
  // logsumexp. Replayed through the allocator model, the trace this sequence makes reserves what
  // the recorded steps reserved (pythia-410m b2 x 1024: before this layer, replayed as llama's,
  // the one-process device total was -6.68 %).
  bool neox_layers() {
    if (!m_.parallel_residual || m_.norm != spec::Norm::layer || m_.gated_mlp || m_.learned_positions ||
        m_.qk_norm || m_.kv_lora_rank != 0 || m_.num_kv_heads != m_.num_heads || m_.hidden_size == 0 ||
        m_.activation != spec::Activation::gelu || z_.scores > 0 || z_.q != z_.hidden)
      return false;
    const std::uint64_t qkv_out = checked_mul(3, checked_mul(m_.num_heads, m_.head_dim));
    for (const auto& g : m_.layers) {
      if (g.moe || g.norm_params != checked_mul(4, m_.hidden_size) || g.other_params != 0) return false;
      if (role_counts(g) != std::array<int, 4>{1, 1, 1, 1}) return false;
      for (const auto& l : g.linears) {
        if (l.role == spec::Role::attn_in && l.out_features != qkv_out) return false;
        neox_bias_[static_cast<std::size_t>(role_slot(l.role))] = l.bias;
      }
    }
    const auto rotary = static_cast<std::uint64_t>(static_cast<double>(m_.head_dim) * m_.partial_rotary_factor);
    if (rotary == 0 || rotary > m_.head_dim) return false;
    rot_ = checked_mul(checked_mul(z_.tokens, m_.num_heads), checked_mul(rotary, 2));
    lse_ = checked_mul(checked_mul(z_.tokens, m_.num_heads), 4);
    return true;
  }

  struct NeoxSaved {
    H ln1, qkv, qe, ke, at, lse, at2, ln2, fc, act, out;
  };

  // A linear's bias-gradient reduction: a transient of 4 x its output gradient's bytes.
  void neox_bias_transient(std::size_t linear, std::uint64_t out_grad) {
    if (neox_bias_[linear]) f(m(checked_mul(out_grad, 4)));
  }

  // Layer `l`'s forward from inputs_[l]: what it saves (all freed when !keep: checkpointing's
  // forward under no_grad), and its output.
  NeoxSaved neox_forward(std::uint64_t l, bool keep) {
    (void)l;
    NeoxSaved s{};
    s.ln1 = m(z_.hidden), s.qkv = m(checked_mul(z_.q, 3));
    const H qr = rope16(rot_), kr = rope16(rot_);
    s.qe = m(z_.q);
    f(qr);
    s.ke = m(z_.q);
    f(kr);
    s.at = m(z_.q), s.lse = m(lse_), s.at2 = m(z_.q);
    const H o = m(z_.hidden);
    s.ln2 = m(z_.hidden), s.fc = m(z_.inter), s.act = m(z_.inter);
    const H down = m(z_.hidden), sum = m(z_.hidden);
    s.out = m(z_.hidden);
    f(sum), f(o), f(down);
    if (!keep) {
      for (const H h : {s.ln1, s.qkv, s.qe, s.ke, s.at, s.lse, s.at2, s.ln2, s.fc, s.act}) f(h);
    }
    return s;
  }

  // Layer `l`'s backward from the gradient `gh` of its output (freed): the recompute under
  // checkpointing, the MLP branch, the attention branch; inputs_[l] freed after the first norm's
  // backward. Returns the gradient of the layer's input.
  H neox_backward(std::uint64_t l, H gh) {
    NeoxSaved s = neox_saved_[l];
    if (ckpt_) {
      s = neox_forward(l, true);
      f(s.out);
    }
    // dense_4h_to_h, gelu, dense_h_to_4h, post_attention_layernorm
    const H gact = m(z_.inter);
    grad_of(l, {spec::Role::mlp_out});
    neox_bias_transient(3, z_.hidden);
    f(s.act);
    const H gfc = m(z_.inter);
    f(gact), f(s.fc);
    const H gln2 = m(z_.hidden);
    grad_of(l, {spec::Role::mlp_in});
    neox_bias_transient(2, z_.inter);
    f(gfc), f(s.ln2);
    const H gx2 = m(z_.hidden);
    grad_of(l, {spec::Role::other});
    f(gln2);
    const H acc = m(z_.hidden);
    f(gx2);
    // dense, SDPA, the rotary embeddings (k's first), the query_key_value's gradient and its copy
    const H gat2 = m(z_.q);
    grad_of(l, {spec::Role::attn_out});
    neox_bias_transient(1, z_.hidden);
    f(gh), f(s.at2);
    const H gq = m(z_.q), gk = m(z_.q), gv = m(z_.q);
    f(m(checked_add(checked_mul(z_.q, 2), lse_)));
    f(gat2), f(s.ke), f(s.qe), f(s.qkv), f(s.lse), f(s.at);
    const H gkr = rope16_backward(rot_, kNoHandle), gqr = rope16_backward(rot_, kNoHandle);
    const H gkf = m(z_.q);
    f(gk);
    const H tk = m(z_.q);
    f(gkr), f(tk);
    const H gqf = m(z_.q);
    f(gq);
    const H t = m(z_.q);
    f(gqr), f(t);
    const H gqkv = m(checked_mul(z_.q, 3));
    f(gqf), f(gkf), f(gv);
    const H gqkv2 = m(checked_mul(z_.q, 3));
    f(gqkv);
    const H gln1 = m(z_.hidden);
    grad_of(l, {spec::Role::attn_in});
    neox_bias_transient(0, checked_mul(z_.q, 3));
    f(gqkv2), f(s.ln1);
    const H gx1 = m(z_.hidden);
    f(gln1), f(inputs_[l]), f(gx1);
    return acc;
  }

  // The final LayerNorm's backward after the loss (`norm`: its output, `g3`: the logits' 16-bit
  // gradient, `h`: the last layer's output): the lm_head's weight gradient before its input's.
  H neox_final_norm_backward(H norm, H g3, H h) {
    if (grads_.empty()) lm_head_grad();
    const H gn = m(z_.hidden);
    f(g3), f(norm);
    const H gx = m(z_.hidden);
    f(gn), f(h);
    return gx;
  }

  // The llama-family layer (RMSNorm, q/k/v with or without biases, rotary, SDPA, o_proj, gate/up/
  // down) in 16-bit weights without autocast or checkpointing, op by op as the recorded
  // qwen2.5-7b bf16 AdamW b1 x 1024 steps allocate (tests/accuracy/alloc/fresh/traces_s14, a
  // process of its own on an H100; transformers 5.17's qwen2/llama modeling, torch 2.11; blocks
  // under 64 KiB left out). RMSNorm: `x.to(float32)` (kept for backward), its square (freed), x *
  // rsqrt in fp32 (freed), its 16-bit cast (kept) and the weight's product (the output, kept by
  // the projections). The rotary embeddings of q then k as gpt_neox's over the whole head; SDPA's
  // output (o_proj's input) and logsumexp; o_proj, the residual sum; the second norm, gate, silu,
  // up, the product, down, the residual sum; the residual sums' inputs freed at the layer's end (the
  // first layer's, the embedding's output, after the final norm). Backward: one 16-bit gradient of
  // the residual stream through every layer, each norm's input gradient summed into it in place
  // (eight fp32 blocks and a 4 x hidden transient per norm); a linear without bias makes its weight
  // gradient first, one with a bias its input gradient first, then the weight's, then a transient of
  // 4 x its output gradient (the bias gradient's reduction); SDPA's backward a transient of 2 x q +
  // the logsumexp, and 2 x q more with grouped heads (k and v's gradients per query head). The same
  // trace replayed through the allocator model reserves what the run reserved (3311 MiB); this
  // sequence's reserve against llama's layer_forward's (6257 MiB there).
  bool llama16_layers() {
    if (m_.norm != spec::Norm::rms || !m_.gated_mlp || m_.qk_norm || m_.parallel_residual || m_.norm_fp32_scale ||
        m_.learned_positions || m_.kv_lora_rank != 0 || m_.hidden_size == 0 || z_.scores > 0 || m_.scaled_embeddings ||
        m_.attn_logit_softcap != 0 || m_.final_logit_softcap != 0 || m_.scaled_logits)
      return false;
    for (const auto& g : m_.layers) {
      if (g.moe || g.norm_params != checked_mul(2, m_.hidden_size) || g.other_params != 0) return false;
      if (role_counts(g) != std::array<int, 4>{3, 1, 2, 1}) return false;
      for (const auto& l : g.linears)
        if (l.bias && l.role != spec::Role::attn_in) return false;
    }
    lse_ = checked_mul(checked_mul(z_.tokens, m_.num_heads), 4);
    return true;
  }

  struct RmsSaved {
    H x32 = kNoHandle, cast = kNoHandle, out = kNoHandle;
  };
  struct Llama16Saved {
    RmsSaved n1, n2;
    H v, qr, kr, at, lse, gate, act, up, mul, out;
  };

  RmsSaved rms16() {
    RmsSaved s;
    s.x32 = m(z_.hidden32);
    f(m(z_.hidden32));
    const H n32 = m(z_.hidden32);
    s.cast = m(z_.hidden), s.out = m(z_.hidden);
    f(n32);
    return s;
  }

  // RMSNorm's backward from `g` (freed): its input's 16-bit gradient.
  H rms16_backward(H g, const RmsSaved& s) {
    const H t1 = m(z_.hidden), t2 = m(z_.hidden);
    f(m(checked_mul(z_.hidden, 4)));
    f(t2), f(g), f(s.cast);
    const H u1 = m(z_.hidden32);
    f(t1);
    return rms_backward_fp32(u1, s.x32);
  }

  // The gradients of layer `l`'s k-th linear of `role`: the weight's, then its bias's.
  void grad_linear(std::uint64_t l, spec::Role role, std::uint32_t k) {
    const auto [first, last] = linear_params(l, role, k);
    for (std::size_t p = first; p < last; ++p) grads_.push_back(m(checked_mul(params_[p].elems, z_.grad)));
  }

  // Where layer `l`'s k-th linear of `role` lies in params_: [first, last), its weight, then its
  // bias when it has one (param_tensors puts a bias right after its weight); empty when absent.
  [[nodiscard]] std::pair<std::size_t, std::size_t> linear_params(std::uint64_t l, spec::Role role,
                                                                  std::uint32_t k) const {
    std::uint32_t i = 0;
    for (std::size_t p = 0; p < params_.size(); ++p) {
      const auto& pr = params_[p];
      if (pr.layer != l || pr.role != role || pr.bias || i++ != k) continue;
      const bool bias = p + 1 < params_.size() && params_[p + 1].bias && params_[p + 1].layer == l;
      return {p, bias ? p + 2 : p + 1};
    }
    return {0, 0};
  }

  Llama16Saved llama16_forward(std::uint64_t l) {
    Llama16Saved s{};
    const H x = inputs_[l];
    s.n1 = rms16();
    const H q = m(z_.q), k = m(z_.kv);
    s.v = m(z_.kv);
    s.qr = rope16(z_.q), s.kr = rope16(z_.kv);
    f(q), f(k);
    s.at = m(z_.q), s.lse = m(lse_);
    const H o = m(z_.hidden), r = m(z_.hidden);
    f(o);
    s.n2 = rms16();
    s.gate = m(z_.inter), s.act = m(z_.inter), s.up = m(z_.inter), s.mul = m(z_.inter);
    const H down = m(z_.hidden);
    s.out = m(z_.hidden);
    f(down), f(r);
    if (l > 0) f(x);
    return s;
  }

  // Layer `l`'s backward: each norm's input gradient is summed in place into the residual
  // stream's gradient (kept by the step, not allocated here), so that gradient is no argument.
  void llama16_backward(std::uint64_t l) {
    Llama16Saved& s = llama16_saved_[l];
    const H acc =
        gated_mlp_backward(s, s.n2.out, [&](spec::Role role, std::uint32_t k) { grad_linear(l, role, k); }, true);
    grad_of(l, {spec::Role::other});
    f(rms16_backward(acc, s.n2));
    grad_linear(l, spec::Role::attn_out, 0);
    const H gat = m(z_.q);
    const H gq = m(z_.q), gk = m(z_.kv), gv = m(z_.kv);
    std::uint64_t ws = checked_add(checked_mul(z_.q, 2), lse_);
    if (z_.kv < z_.q) ws = checked_add(ws, checked_mul(z_.q, 2));
    f(m(ws));
    f(gat), f(s.kr), f(s.qr), f(s.v), f(s.lse), f(s.at);
    const H gkr = rope16_backward(z_.kv, gk), gqr = rope16_backward(z_.q, gq);
    // v_proj, k_proj (a contiguous copy of k's gradient first), q_proj (q's copy)
    const H gxv = llama16_in_backward(l, 2, gv, kNoHandle, z_.kv);
    const H ck = m(z_.kv);
    f(gkr);
    const H gxk = llama16_in_backward(l, 1, kNoHandle, ck, z_.kv);
    const H acc2 = m(z_.hidden);
    f(gxv), f(gxk);
    const H cq = m(z_.q);
    f(gqr);
    const H gxq = llama16_in_backward(l, 0, kNoHandle, cq, z_.q);
    f(s.n1.out), f(gxq);
    f(rms16_backward(acc2, s.n1));
  }

  // The k-th attention input projection's backward: its input's gradient (returned) and its
  // weight's (and bias's) in the order the linear makes them; `go` (its output's gradient) or
  // `copy` (a contiguous copy of it) freed after.
  H llama16_in_backward(std::uint64_t l, std::uint32_t k, H go, H copy, std::uint64_t out_bytes) {
    const auto [first, last] = linear_params(l, spec::Role::attn_in, k);
    const bool bias = last - first == 2;
    H gx;
    if (bias) {
      gx = m(z_.hidden);
      grad_linear(l, spec::Role::attn_in, k);
      f(m(checked_mul(out_bytes, 4)));
    } else {
      grad_linear(l, spec::Role::attn_in, k);
      gx = m(z_.hidden);
    }
    free_if(go);
    free_if(copy);
    return gx;
  }

  // The final norm after the last layer (`h`: its output): its saved tensors, then the
  // last layer's output and the embedding's output freed.
  H llama16_final_norm(H h) {
    final_n_ = rms16();
    f(h), f(inputs_[0]);
    return final_n_.out;
  }

  bool llama16_ = false;
  RmsSaved final_n_;
  std::vector<Llama16Saved> llama16_saved_;

  // The loss after llama16's final norm: the logits, their fp32 copy and log-softmax; the loss's
  // backward down to the final norm's input gradient, the residual stream's gradient (returned).
  H llama16_loss(H h) {
    const H n = llama16_final_norm(h);
    const H g3 = cross_entropy(m(z_.logits16));
    if (grads_.empty()) lm_head_grad();
    if (!workspace_) workspace_ = m(kBackwardWorkspace);
    const H gn = m(z_.hidden);
    f(g3), f(n);
    return rms16_backward(gn, final_n_);
  }

  bool neox_ = false;
  std::array<bool, 4> neox_bias_{};  // query_key_value, dense, dense_h_to_4h, dense_4h_to_h
  std::uint64_t rot_ = 0, lse_ = 0;  // the rotated share of q (bytes), SDPA's logsumexp
  std::vector<NeoxSaved> neox_saved_;

  std::uint64_t sandwich_norms_ = 0;

  const spec::ModelSpec& m_;
  const TrainSizes& z_;
  const std::vector<ParamTensor>& params_;
  const bool autocast_, ckpt_;
  bool amp_ = false;  // the autocast-over-fp32-weights sequence (amp_step)
  bool gpt2_ = false;  // ... with GPT-2's layer
  CachingAllocator a_;
  std::vector<H> state_, grads_, inputs_;
  std::vector<std::vector<H>> saved_;
  // LoRA (lora_forward ...): the adapters per layer, what each layer saved, the compute dtype's
  // bytes, peft's dropout, the bytes of RMSNorm's fp32 copy (0: the norm keeps its input).
  bool lora_ = false, dropout_ = false, offload_ = false;
  std::vector<std::vector<std::uint64_t>> offloaded_;  // --activation-offload: each layer's saved blocks' sizes
  std::uint64_t e_ = 2, norm_copy_ = 0;
  std::vector<std::vector<Adapter>> adapters_;
  std::vector<LoraSaved> lora_saved_;
  std::uint64_t loop_temp_ = 0;  // a per-parameter step's temporary, bytes per element (0: one list)
  std::optional<H> workspace_;  // the backward thread's cuBLAS workspace, kept for the process
  bool seeded_ = false;         // ... made by an earlier case of the process (seed_history)
};

std::optional<Reserve> training_reserve(const spec::ModelSpec& m, const Workload& w, const std::vector<Acc>& phases,
                                      std::uint64_t capacity, ProcessHistory* h) {
  const auto z = train_sizes(m, w, phases);
  if (!z) return std::nullopt;
  const std::vector<ParamTensor> params = z->rank > 0 ? adapter_tensors(m, w) : param_tensors(m);
  std::vector<std::uint64_t> key{z->rank, z->adapter, z->tokens, w.lora.dropout > 0 ? 1U : 0U,
                                 static_cast<std::uint64_t>(m.norm), z->scores, z->hidden32, z->hidden,  z->q,    z->kv,  z->inter, z->logits16, z->logits32, z->grad,
                                 z->state,   z->temp, z->temp_total, precision_of(w).autocast ? 1U : 0U, w.checkpointing ? 1U : 0U,
                                 m.tied_embeddings ? 1U : 0U, m.embedding_params, m.lm_head_params, m.num_layers};
  // What picks the layer's sequence (fp32_norm_layers, amp_layers) and the state's blocks.
  key.insert(key.end(), {traits(w.optimizer).state_tensors, m.norm_fp32_scale ? 1U : 0U, m.final_logit_softcap > 0 ? 1U : 0U,
                         m.scaled_embeddings ? 1U : 0U, m.qk_norm ? 1U : 0U, m.gated_mlp ? 1U : 0U,
                         m.parallel_residual ? 1U : 0U, m.learned_positions ? 1U : 0U, static_cast<std::uint64_t>(m.norm),
                         static_cast<std::uint64_t>(m.activation), m.kv_lora_rank, m.hidden_size, m.vocab_size,
                         precision_of(w).compute, precision_of(w).residual});
  append_conf(key, alloc_conf(w));
  key.push_back(capacity);
  append_build(key, m, precision_of(w));
  for (const auto& pr : params)
    key.insert(key.end(), {pr.elems, static_cast<std::uint64_t>(pr.role), pr.layer, pr.bias ? 1U : 0U});
  // The process's first backward: this case makes the workspace, and where the replay puts it
  // is what the process keeps (not memoized: the placement is an output).
  if (h != nullptr && h->pinned_segment == 0 && !h->unknown && !alloc_conf(w).expandable_segments) {
    TrainingReplay r(m, w, *z, params, capacity);
    const Reserve reserve = r.run();
    if (const auto place = r.workspace_place()) h->pinned_segment = place->segment_size, h->pinned_offset = place->offset;
    return reserve;
  }
  append_history(key, h);
  return memoized(std::move(key), [&] { return TrainingReplay(m, w, *z, params, capacity, h).run(); });
}

}  // namespace

Bytes excess_at(const Reserve& r, PhaseId phase) {
  switch (phase) {
    case PhaseId::forward_layer: return r.excess.forward;
    case PhaseId::forward_end:
    case PhaseId::backward_start: return r.excess.loss;
    case PhaseId::backward_recompute:
    case PhaseId::backward_last_layer:
    case PhaseId::backward_end: return r.excess.backward;
    case PhaseId::optimizer_step: return r.excess.step;
    default: return Bytes{};
  }
}

std::optional<Built> built_model(const spec::ModelSpec& m, const Workload& w) {
  CachingAllocator a(alloc_conf(w));
  if (!replay_build(a, m, precision_of(w))) return std::nullopt;
  a.empty_cache();
  return Built{a.reserved(), a.allocated()};
}

namespace {

// The step replayed through the allocator model, within `capacity` (0: unbounded); nullopt where
// the workload's step is not replayed.
std::optional<Reserve> replay(const spec::ModelSpec& m, const Workload& w, const std::vector<Acc>& phases,
                              std::uint64_t capacity, ProcessHistory* history) {
  if (w.sharding != spec::Sharding::none) return std::nullopt;
  if (w.mode == Mode::generate) return generate_reserve(m, w, phases, capacity, history);
  if (w.mode == Mode::train || w.mode == Mode::lora) return training_reserve(m, w, phases, capacity, history);
  if (w.mode == Mode::inference && !w.expandable_segments) return forward_reserve(m, w, capacity, history);
  return std::nullopt;
}

}  // namespace

Reserve allocator_reserve(const spec::ModelSpec& m, const Workload& w, const std::vector<Acc>& phases,
                          Bytes peak_allocated, Bytes resident, ProcessHistory* history, std::uint64_t capacity) {
  // On a card: when a new segment does not fit, PyTorch frees every cached segment with no
  // allocated block and retries (c10/cuda/CUDACachingAllocator.cpp, malloc: alloc_block ||
  // release_available_cached_blocks && alloc_block || release_cached_blocks && alloc_block), so
  // the reserve of a step that fits is bounded by the card. Measured on an H100 (79.18 GiB as CUDA
  // reports it; tests/accuracy/h100): llama-3.1-8b bf16 AdamW b4 s2048 checkpointed reserves
  // 12024 MiB less than on the H200 and runs; b1 s1024, 2116 MiB less. Where even the released
  // cache leaves a request without room, the step is replayed unbounded: what the card would need.
  if (capacity > 0) {
    ProcessHistory bounded_history = history != nullptr ? *history : ProcessHistory{};
    if (const auto r = replay(m, w, phases, capacity, history != nullptr ? &bounded_history : nullptr)) {
      if (!r->oom) {
        if (history != nullptr) *history = std::move(bounded_history);
        return *r;
      }
    }
  }
  if (const auto r = replay(m, w, phases, 0, history)) return *r;
  // The caching allocator never gives memory back within a step (no empty_cache), so what
  // it holds at its worst is the largest of each phase's allocation plus that phase's reserve,
  // which can come after the allocated peak (gradients after freed activations).
  Bytes reserved = peak_allocated;
  for (const auto& ph : phases) reserved = std::max(reserved, ph.total() + reserve_for(w, ph, phases, resident));
  if (history != nullptr && !alloc_conf(w).expandable_segments) {
    // Not replayed after earlier cases: the pinned segment and the main thread's workspace (32 MiB
    // in a segment of its own, made at init) stay reserved whatever the case fits into them; a
    // first backward not replayed leaves the process's pinned segment unknown.
    if (history->pinned_segment > 0)
      reserved = std::max(reserved, Bytes{checked_add(history->pinned_segment, kBackwardWorkspace)});
    else if (w.trains())
      history->unknown = true;
  }
  Reserve r;
  r.bytes = reserved - peak_allocated;
  return r;
}

}  // namespace vramfit::engine::detail
