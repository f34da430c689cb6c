#include "vramfit/spec/model_spec.hpp"

#include "vramfit/core/bytes.hpp"

namespace vramfit::spec {

// torch.nn.Linear(in, out, bias) holds an out x in weight and an out-long bias; GPT-2's
// Conv1D holds the transposed weight (in x out) and the same bias: the count is the same.
std::uint64_t Linear::params() const {
  const std::uint64_t one = checked_add(checked_mul(in_features, out_features, "parameters"),
                                        bias ? out_features : 0, "parameters");
  return checked_mul(one, copies, "parameters");
}

// The parts of a decoder-only causal LM, as model.parameters() yields them: embeddings,
// every decoder layer, the final norm and an untied lm_head. Tied weights are one tensor,
// counted once (model.parameters() deduplicates shared Parameters). A vision-language model
// adds its vision tower and projector (spec.vision).
std::uint64_t count_params(const ModelSpec& spec) {
  std::uint64_t total = checked_add(spec.embedding_params, spec.lm_head_params, "parameters");
  total = checked_add(total, spec.final_norm_params, "parameters");
  for (const LayerGroup& g : spec.layers) {
    std::uint64_t layer = checked_add(g.norm_params, g.other_params, "parameters");
    for (const Linear& l : g.linears) layer = checked_add(layer, l.params(), "parameters");
    total = checked_add(total, checked_mul(layer, g.count, "parameters"), "parameters");
  }
  if (spec.vision) total = checked_add(total, spec.vision->params(), "parameters");
  return total;
}

}  // namespace vramfit::spec
