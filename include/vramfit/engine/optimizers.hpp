#pragma once

#include <cstdint>
#include <string_view>

#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

/// How temporaries of an optimizer's step() scale.
enum class StepTemp {
  none,             ///< in-place updates only
  all_params,       ///< one temporary as large as all parameters together (foreach kernels)
  largest_param_x2, ///< two temporaries as large as the largest parameter (for-loop kernels)
  /// ... made and freed parameter by parameter, each pair one parameter's size (_single_tensor_adam:
  /// `(exp_avg_sq.sqrt() / bias_correction2_sqrt)`): the same peak, and the allocator replay
  /// (engine/reserve.cpp) allocates them in that order.
  per_param_x2,
};

/// Memory facts of one optimizer (see the table in optimizers.cpp for sources).
struct OptimizerTraits {
  spec::Optimizer id;
  /// State bytes per parameter = state_tensors * (bytes of the parameter's dtype), plus
  /// state_fixed_bytes per parameter (quantized states) and factored states (adafactor).
  std::uint64_t state_tensors = 0;   ///< full-size state tensors in the parameter's dtype
  std::uint64_t state_bytes_8bit = 0;  ///< bytes per parameter of 8-bit states (bitsandbytes)
  std::uint64_t state_bytes_fp32 = 0;  ///< bytes per parameter of fp32 states whatever the dtype
  bool factored = false;             ///< adafactor: row + column second moments for matrices
  /// bitsandbytes paged optimizers: the state lives in CUDA unified memory (cudaMallocManaged),
  /// outside PyTorch's allocator, and is evicted to host memory when the GPU runs short.
  bool paged = false;
  StepTemp temp = StepTemp::none;
  std::string_view summary;
};

/// The traits of `o` (every Optimizer has a row).
const OptimizerTraits& traits(spec::Optimizer o) noexcept;

}  // namespace vramfit::engine
