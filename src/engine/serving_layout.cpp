// Layer layouts the serving engines' estimates do not follow (one check for vLLM and llama.cpp).
#include "serving_layout.hpp"

#include <string>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"

namespace vramfit::engine {

void require_uniform_layers(const spec::ModelSpec& m, std::string_view engine) {
  std::string why;
  for (const spec::LayerGroup& g : m.layers) {
    if (g.kv_shared) why = "layers that reuse another layer's keys and values (no cache of their own)";
    else if (g.head_dim != 0 || g.kv_heads != 0) why = "layers whose attention head size or key/value heads differ";
    else if (g.intermediate != 0) why = "layers whose MLP width differs";
    if (!why.empty()) break;
  }
  if (why.empty() && (m.kv_full_per_token != 0 || m.kv_sliding_per_token != 0))
    why = "layers whose key/value widths differ";
  if (why.empty()) return;
  throw InputError("--engine",
                   fmt::format("model_type '{}' has {}; the {} estimate lays every layer out alike and would size "
                               "its KV cache for layers the model does not have",
                               m.model_type, why, engine),
                   "estimate it with the default engine (--engine transformers), which lays these layers out");
}

}  // namespace vramfit::engine
