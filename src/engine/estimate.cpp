// TEMPORARY STUB (being replaced by the real engine): weights only, so other modules link.
#include "vramfit/engine/estimate.hpp"

namespace vramfit::engine {

Breakdown estimate(const spec::ModelSpec& model, const spec::Workload& workload) {
  Breakdown b;
  const Bytes weights = bytes_of_bits(model.params, bits_of(workload.weights));
  b.components.push_back({"weights", weights, "model parameters", true});
  b.components.push_back({"allocator_reserve", Bytes{0}, "caching allocator reserve", false});
  b.components.push_back({"cuda_context", MiB(700), "CUDA context", false});
  b.phases.push_back({"load", weights});
  b.peak_phase = "load";
  b.peak_allocated = weights;
  b.cuda_context = MiB(700);
  b.device_total = weights + MiB(700);
  return b;
}

}  // namespace vramfit::engine
