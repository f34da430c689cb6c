#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

/// Estimates the peak GPU memory of one workload on one model (per GPU). Pure: same input,
/// same output. Throws InputError only when sizes overflow 64 bits (absurd input).
Breakdown estimate(const spec::ModelSpec& model, const spec::Workload& workload);

/// Bytes of one activation value in the workload's compute dtype (the engine's precision
/// rule): 4 for fp32 weights without autocast; 2 under autocast, for 16-bit weights, and for
/// quantized weights (their kernels compute in 16 bits).
std::uint64_t compute_bytes(const spec::Workload& workload);

/// The logits of `tokens` positions as the loss makes them (transformers' ForCausalLMLoss):
/// in the compute dtype, and their fp32 copy (`logits.float()`). Throws InputError when a
/// size overflows 64 bits.
struct LossLogits {
  Bytes compute;  ///< tokens x vocab x compute_bytes
  Bytes fp32;     ///< tokens x vocab x 4
};
LossLogits loss_logits(const spec::ModelSpec& model, const spec::Workload& workload, std::uint64_t tokens);

/// A tensor one forward of the workload requests in one piece, by name.
struct NamedTensor {
  std::string name;
  Bytes size;
};

/// The single largest requests of one forward over batch x seq tokens (seq: the prompt for
/// generate), for the OOM doctor to match a failed request against:
///   logits_fp32       the loss's fp32 copy of the logits (loss_logits().fp32)
///   logits            the logits in the compute dtype (loss_logits().compute)
///   attention_scores  eager attention's batch x heads x seq x seq scores in the compute dtype
///                     (SDPA's fused kernels never make them; eager only)
/// A size that overflows 64 bits is left out.
std::vector<NamedTensor> single_requests(const spec::ModelSpec& model, const spec::Workload& workload);

}  // namespace vramfit::engine
