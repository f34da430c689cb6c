#pragma once
// Internal to the engine: the caching allocator's reserve above the allocated peak.

#include <vector>

#include "phase.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine::detail {

/// What PyTorch's caching allocator holds beyond the allocated peak over a step whose phases
/// are `phases` (`resident`: allocated before the step; `peak_allocated`: the largest phase).
struct Reserve {
  Bytes bytes;
  bool replayed = false;  ///< from the step's allocations replayed through the allocator model
};
Reserve allocator_reserve(const spec::ModelSpec& m, const spec::Workload& w, const std::vector<Acc>& phases,
                          Bytes peak_allocated, Bytes resident);

}  // namespace vramfit::engine::detail
