#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vramfit/core/bytes.hpp"

namespace vramfit::engine {

/// One labelled part of the estimate. Ids are API (JSON readers depend on them):
/// weights, lora_adapters, gradients, optimizer_state, optimizer_step, autocast_cache,
/// activations, kv_cache, logits, temporaries, sharding_buffers, allocator_reserve, cuda_context,
/// paged_optimizer_state (only with a paged optimizer).
struct Component {
  std::string id;
  Bytes bytes;
  std::string description;
  bool in_peak_allocated = true;  ///< false for allocator_reserve and cuda_context
};

/// Allocated bytes at the worst moment of one phase of the step.
struct Phase {
  std::string id;     ///< load, forward, loss, backward, optimizer_step, prefill, decode
  Bytes allocated;
};

/// The estimate. Invariants (tested on every case):
///   sum of components with in_peak_allocated == peak_allocated
///   peak_allocated + allocator_reserve + cuda_context (+ paged_optimizer_state) == device_total
///   peak_allocated == max over phases
struct Breakdown {
  std::vector<Component> components;
  std::vector<Phase> phases;
  std::string peak_phase;        ///< the id of the phase that sets the peak
  Bytes peak_allocated;          ///< what torch.cuda.max_memory_allocated() would report
  Bytes allocator_reserve;       ///< reserved by the caching allocator beyond the peak
  Bytes cuda_context;            ///< CUDA context, cuBLAS workspace, kernel images
  Bytes device_total;            ///< what the GPU must have free before the job starts
  /// device_total times the 95th percentile of measured / estimated device totals over the
  /// measured cases of this kind of workload (data/calibration.json; engine::upper_factor).
  /// Zero when no calibration applies (serving engines): upper() is then device_total.
  Bytes device_total_upper;
  std::string upper_group;       ///< the workload's calibration group ("train/single/ckpt")
  std::string upper_from;        ///< the group whose measured cases set the factor
  std::uint64_t upper_permille = 0;  ///< the factor in thousandths (0 without calibration)
  std::size_t upper_cases = 0;   ///< measured cases behind upper_from
  std::vector<std::string> notes;  ///< assumptions and what is not modelled

  /// The upper bound of the device total: device_total_upper, never below device_total.
  [[nodiscard]] Bytes upper() const noexcept {
    return device_total_upper > device_total ? device_total_upper : device_total;
  }
  /// The component with this id, or nullptr.
  [[nodiscard]] const Component* find(std::string_view id) const noexcept;
};

}  // namespace vramfit::engine
