#pragma once
// Internal to the engine: the caching allocator's reserve above the allocated peak.

#include <cstdint>
#include <optional>
#include <vector>

#include "phase.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {
struct ProcessHistory;
}

namespace vramfit::engine::detail {

/// What PyTorch's caching allocator holds beyond the allocated peak over a step whose phases
/// are `phases` (`resident`: allocated before the step; `peak_allocated`: the largest phase).
struct Reserve {
  Bytes bytes;
  bool replayed = false;  ///< from the step's allocations replayed through the allocator model
  /// Replayed within a capacity (allocator_reserve's `capacity`) and a request did not fit even
  /// after the cache was released: PyTorch's OOM.
  bool oom = false;
  /// ... and how many times a new segment found no room until the cache was released
  /// (memory_stats' num_alloc_retries).
  std::uint64_t alloc_retries = 0;
  /// Replayed full training: what memory_allocated() counts beyond the requested bytes (it adds
  /// each block's size: 512-byte rounding and the blocks left whole) at the most allocated moment
  /// of each region of the step, the largest step's: forward over the layers, the loss and its
  /// backward, backward over the layers, the optimizer step.
  struct Excess {
    Bytes forward, loss, backward, step;
  } excess{};
};

/// The replay's excess at the region of the step that `phase` stands for (zero when not replayed).
Bytes excess_at(const Reserve& r, PhaseId phase);
/// What the caching allocator holds once the model is built as transformers builds it (each
/// parameter allocated as its module is constructed) and the cache emptied; nullopt for weights
/// whose build is not modelled (quantized, MoE).
struct Built {
  std::uint64_t reserved = 0, allocated = 0;
};
std::optional<Built> built_model(const spec::ModelSpec& m, const spec::Workload& w);

/// `history`: the case runs after earlier cases in the same process (engine::estimate_in_process),
/// and this updates it; nullptr: a process of its own. `capacity`: the bytes the allocator can
/// reserve on the card (its memory less the context), 0 unbounded: a replayed step that reaches it
/// releases the cache and retries as PyTorch does (its reserve is then what the card holds);
/// one that runs out even so is replayed again unbounded (the verdict then says what it needs).
Reserve allocator_reserve(const spec::ModelSpec& m, const spec::Workload& w, const std::vector<Acc>& phases,
                          Bytes peak_allocated, Bytes resident, ProcessHistory* history = nullptr,
                          std::uint64_t capacity = 0);

}  // namespace vramfit::engine::detail
