#pragma once
// Hybrid models: decoder layers whose token mixer is linear attention beside attention layers
// (qwen3_next's Gated DeltaNet). src/spec/config.cpp builds the row's attention layers as for any
// type; lay_out_linear_attention then gives the linear-attention layers their modules.

#include <string>

#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/architectures.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::spec {

/// For a row with a LinearMixer: reads `obj`'s layer_types (or full_attention_interval) and
/// linear_* keys (the config class's defaults where absent), swaps the attention modules of the
/// linear-attention layers in `spec.layers` for the Gated DeltaNet's (in_proj_qkvz, in_proj_ba, or
/// in_proj_qkv, in_proj_z, in_proj_b, in_proj_a for LinearMixer::gated_delta_net_split; conv1d,
/// dt_bias, A_log, the gated norm, out_proj), gives the full-attention layers their gated
/// q_proj (2 x heads x head_dim outputs) and fills `spec.linear_attention`. Problems go to `diags`,
/// each naming `prefix` + the key. Does nothing for a row without one.
void lay_out_linear_attention(const nlohmann::json& obj, const std::string& prefix, const Architecture& row,
                              ModelSpec& spec, Diagnostics& diags);

/// Throws InputError naming `field` when `spec` has linear-attention layers: the serving engines'
/// state caches (vLLM's, llama.cpp's) are not modelled.
void refuse_linear_attention(const ModelSpec& spec, const std::string& field);

}  // namespace vramfit::spec
