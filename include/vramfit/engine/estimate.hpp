#pragma once

#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::engine {

/// Estimates the peak GPU memory of one workload on one model (per GPU). Pure: same input,
/// same output. Throws InputError only when sizes overflow 64 bits (absurd input).
Breakdown estimate(const spec::ModelSpec& model, const spec::Workload& workload);

}  // namespace vramfit::engine
