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
};
/// What the caching allocator holds once the model is built as transformers builds it (each
/// parameter allocated as its module is constructed) and the cache emptied; nullopt for weights
/// whose build is not modelled (quantized, MoE).
struct Built {
  std::uint64_t reserved = 0, allocated = 0;
};
std::optional<Built> built_model(const spec::ModelSpec& m, const spec::Workload& w);

/// `history`: the case runs after earlier cases in the same process (engine::estimate_in_process),
/// and this updates it; nullptr: a process of its own.
Reserve allocator_reserve(const spec::ModelSpec& m, const spec::Workload& w, const std::vector<Acc>& phases,
                          Bytes peak_allocated, Bytes resident, ProcessHistory* history = nullptr);

}  // namespace vramfit::engine::detail
