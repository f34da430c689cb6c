#pragma once

#include <string_view>

#include "vramfit/spec/model_spec.hpp"

namespace vramfit::engine {

/// llama.cpp's estimate (engine/llamacpp.cpp) lays out every decoder layer with the model's one
/// attention width and one KV cache per layer unless it lays them out per layer (its layer_attn:
/// gemma4_text); vLLM's (engine/vllm.cpp) does too unless it lays the layers out per kind (its
/// layer_kinds: gemma4_text). A model whose layers differ
/// (gemma4_text: full layers of global_head_dim, KV-shared layers that cache nothing, double-wide
/// MLPs) would get a KV cache and KV-token count computed for layers it does not have: refused,
/// InputError naming `--engine` and the fix (the transformers estimate, which lays them out).
void require_uniform_layers(const spec::ModelSpec& m, std::string_view engine);

}  // namespace vramfit::engine
