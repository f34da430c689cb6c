// The caching allocator's reserve: what PyTorch holds in freed blocks beyond the allocated peak.

#include "reserve.hpp"

#include <algorithm>

#include "vramfit/engine/constants.hpp"

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
// Training and LoRA (single GPU, peak while the activations are alive): reserve = L x logits +
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
// 548, generate 349 thousandths: the freed layer blocks stay cached when the larger logits (or
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
  const bool after_backward = peak.id == "backward_end" || peak.id == "backward_last_layer" ||
                              peak.id == "optimizer_step";
  if (!w.trains() && w.expandable_segments) return Bytes{20ULL << 20};  // one 20 MiB page of the large pool
  if (w.trains() && !after_backward && w.sharding == spec::Sharding::none) {
    Bytes logits;
    for (const auto& [k, v] : peak.parts)
      if (k == "logits") logits += v;
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
      if (ph.id != "forward_logits") layers = std::max(layers, Bytes::saturating_sub(ph.total(), resident));
    Bytes logits;
    for (const auto& [k, v] : peak.parts)
      if (k == "logits") logits += v;
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
      if (ph.id == "backward_start") {
        basis = Bytes{};
        for (const auto& [k, v] : ph.parts)
          if (k == "activations" || k == "autocast_cache" || k == "logits") basis += v;
      }
    permille = 750;
  }
  // expandable_segments:True for sharded training and the phases after backward:
  // shared/truth/results/expandable-segments.jsonl (10 training cases): the median reserve
  // ratio drops from 70 to 55 thousandths.
  if (w.expandable_segments) permille = permille * 55 / 70;
  return Bytes{basis.value() / 1000 * permille}.round_up(kSegmentRound);
}

}  // namespace

Bytes allocator_reserve(const Workload& w, const std::vector<Acc>& phases, Bytes peak_allocated, Bytes resident) {
  // The caching allocator never gives memory back within a step (no empty_cache), so what
  // it holds at its worst is the largest of each phase's allocation plus that phase's reserve,
  // which can come after the allocated peak (gradients after freed activations).
  Bytes reserved = peak_allocated;
  for (const auto& ph : phases) reserved = std::max(reserved, ph.total() + reserve_for(w, ph, phases, resident));
  return reserved - peak_allocated;
}

}  // namespace vramfit::engine::detail
