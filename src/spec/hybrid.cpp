// Hybrid layer layouts (see vramfit/spec/hybrid.hpp). The modules and the config class's defaults
// are those of transformers 5.17: models/qwen3_next/modeling_qwen3_next.py (Qwen3NextGatedDeltaNet,
// Qwen3NextAttention, Qwen3NextDecoderLayer) and configuration_qwen3_next.py (Qwen3NextConfig);
// models/qwen3_5/modeling_qwen3_5.py and qwen3_5_moe/modeling_qwen3_5_moe.py (Qwen3_5GatedDeltaNet,
// split projections; Qwen3_5TextConfig / Qwen3_5MoeTextConfig keep Qwen3NextConfig's linear_* defaults).
#include "vramfit/spec/hybrid.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checked.hpp"

namespace vramfit::spec {

namespace {

using detail::add;
using detail::mul;
using nlohmann::json;

/// Qwen3NextConfig's defaults of the linear-attention keys (Qwen3_5TextConfig's and
/// Qwen3_5MoeTextConfig's are the same: 4, 128, 128, 16, 32, full_attention_interval 4).
struct GdnDefaults {
  std::uint64_t conv_kernel = 4;        ///< linear_conv_kernel_dim
  std::uint64_t key_head_dim = 128;     ///< linear_key_head_dim
  std::uint64_t value_head_dim = 128;   ///< linear_value_head_dim
  std::uint64_t key_heads = 16;         ///< linear_num_key_heads
  std::uint64_t value_heads = 32;       ///< linear_num_value_heads
  std::uint64_t full_interval = 4;      ///< full_attention_interval (popped when layer_types is absent)
};

constexpr std::string_view kFix = "give it as the model's config.json on the Hugging Face Hub has it";

/// Dimensions a config may give, up to config.cpp's bound on any dimension (2^40).
constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 40;

std::uint64_t positive(const json& obj, std::string_view key, std::uint64_t dflt, const std::string& prefix,
                       Diagnostics& diags) {
  const auto it = obj.find(key);
  if (it == obj.end()) return dflt;
  if (it->is_number_integer() && it->get<std::int64_t>() > 0 &&
      static_cast<std::uint64_t>(it->get<std::int64_t>()) <= kMaxDim)
    return it->get<std::uint64_t>();
  diags.add(prefix + std::string(key), fmt::format("expected a positive integer (up to 2^40), got {}", it->dump()),
            std::string(kFix));
  return dflt;
}

/// Which layers are linear attention: layer_types' "linear_attention" entries, or (without it)
/// Qwen3NextConfig.__post_init__'s pattern: linear unless (i + 1) % full_attention_interval == 0.
/// Empty when a diagnostic was added.
std::vector<bool> linear_layers(const json& obj, std::uint64_t layers, const GdnDefaults& d, const std::string& prefix,
                                const std::string& type, Diagnostics& diags) {
  std::vector<bool> linear;
  const auto lt = obj.find("layer_types");
  if (lt != obj.end() && !lt->is_null()) {
    if (!lt->is_array()) {
      diags.add(prefix + "layer_types", fmt::format("expected a list of layer kinds, got {}", lt->dump()),
                std::string(kFix));
      return {};
    }
    // Qwen3NextDecoderLayer reads config.layer_types[layer_idx] for every layer: a list of another
    // length was refused already (config.cpp plan_layers, transformers' layer_type_validation).
    if (lt->size() != layers) return {};
    std::uint64_t i = 0;
    for (const json& t : *lt) {
      const std::string kind = t.is_string() ? t.get<std::string>() : t.dump();
      // configuration_utils.remap_legacy_layer_types: the legacy "attention" is "full_attention".
      if (kind == "linear_attention") {
        linear.push_back(true);
      } else if (kind == "full_attention" || kind == "attention") {
        linear.push_back(false);
      } else {
        // Qwen3NextDecoderLayer builds a token mixer for these two kinds only (another kind has
        // none, and its forward fails).
        diags.add(prefix + "layer_types",
                  fmt::format("'{}' (layer {}) is not a kind {} builds: its layers are \"linear_attention\" (Gated "
                              "DeltaNet) or \"full_attention\"",
                              kind, i, type),
                  std::string(kFix));
        return {};
      }
      ++i;
    }
    return linear;
  }
  const std::uint64_t interval = positive(obj, "full_attention_interval", d.full_interval, prefix, diags);
  linear.reserve(layers);
  for (std::uint64_t i = 0; i < layers; ++i) linear.push_back((i + 1) % interval != 0);
  return linear;
}

bool same_layer(const LayerGroup& a, const LayerGroup& b) {
  if (a.moe != b.moe || a.linear_attention != b.linear_attention || a.norm_params != b.norm_params ||
      a.other_params != b.other_params || a.linears.size() != b.linears.size())
    return false;
  for (std::size_t i = 0; i < a.linears.size(); ++i) {
    const Linear& x = a.linears[i];
    const Linear& y = b.linears[i];
    if (x.name != y.name || x.in_features != y.in_features || x.out_features != y.out_features ||
        x.bias != y.bias || x.copies != y.copies || x.expert != y.expert || x.shared_expert != y.shared_expert)
      return false;
  }
  return true;
}

bool attention_module(const Linear& l) {
  return l.role == Role::attn_in || l.role == Role::attn_inner || l.role == Role::attn_out;
}

/// A Qwen3NextGatedDeltaNet (or, `split`, a Qwen3_5GatedDeltaNet) in place of the attention of `g`
/// (a layer the row laid out).
LayerGroup gated_delta_net(LayerGroup g, const ModelSpec& spec, const LinearAttention& la, bool split) {
  const std::uint64_t h = spec.hidden_size;
  const std::uint64_t key_dim = mul(la.key_heads, la.key_head_dim);
  const std::uint64_t value_dim = mul(la.value_heads, la.value_head_dim);
  std::vector<Linear> linears;
  if (split) {
    // Qwen3_5GatedDeltaNet.__init__: in_proj_qkv (key_dim * 2 + value_dim outputs), in_proj_z
    // (value_dim), in_proj_b and in_proj_a (num_v_heads each), no biases.
    linears.push_back(Linear{.name = "in_proj_qkv", .role = Role::attn_in, .in_features = h,
                             .out_features = add(mul(2, key_dim), value_dim)});
    linears.push_back(Linear{.name = "in_proj_z", .role = Role::attn_in, .in_features = h, .out_features = value_dim});
    linears.push_back(Linear{.name = "in_proj_b", .role = Role::attn_in, .in_features = h, .out_features = la.value_heads});
    linears.push_back(Linear{.name = "in_proj_a", .role = Role::attn_in, .in_features = h, .out_features = la.value_heads});
  } else {
    // in_proj_qkvz (key_dim * 2 + value_dim * 2 outputs) and in_proj_ba (num_v_heads * 2), no
    // biases.
    linears.push_back(Linear{.name = "in_proj_qkvz", .role = Role::attn_in, .in_features = h,
                             .out_features = add(mul(2, key_dim), mul(2, value_dim))});
    linears.push_back(Linear{.name = "in_proj_ba", .role = Role::attn_in, .in_features = h,
                             .out_features = mul(2, la.value_heads)});
  }
  // out_proj (value_dim -> hidden), no bias.
  linears.push_back(Linear{.name = "out_proj", .role = Role::attn_out, .in_features = value_dim, .out_features = h});
  for (const Linear& l : g.linears)
    if (!attention_module(l)) linears.push_back(l);
  g.linears = std::move(linears);
  // The row counted Qwen3NextAttention's q_norm and k_norm (head_dim each); the linear layer has
  // Qwen3NextRMSNormGated(head_v_dim) instead.
  if (spec.qk_norm) g.norm_params -= std::min(g.norm_params, mul(2, spec.head_dim));
  g.norm_params = add(g.norm_params, la.value_head_dim);
  // conv1d: depthwise Conv1d(conv_dim, conv_dim, kernel, groups=conv_dim, bias=False): conv_dim x 1 x
  // kernel; dt_bias and A_log: num_v_heads each.
  g.other_params = add(g.other_params, add(mul(la.conv_dim(), la.conv_kernel), mul(2, la.value_heads)));
  g.linear_attention = true;
  return g;
}

/// Qwen3NextAttention: q_proj makes the queries and a sigmoid gate per head (2 x heads x head_dim).
LayerGroup gated_attention(LayerGroup g, const ModelSpec& spec) {
  for (Linear& l : g.linears)
    if (l.role == Role::attn_in && l.name == "q_proj") l.out_features = mul(2, mul(spec.num_heads, spec.head_dim));
  return g;
}

}  // namespace

void lay_out_linear_attention(const json& obj, const std::string& prefix, const Architecture& row, ModelSpec& spec,
                              Diagnostics& diags) {
  if (row.linear_mixer == LinearMixer::none) return;
  const std::string type = fmt::format("model_type '{}'", spec.model_type);
  // Layers are laid out one by one below (the pattern need not be periodic).
  if (spec.num_layers > 100000) {
    diags.add(prefix + "num_hidden_layers", fmt::format("{} layers is far more than any real model has", spec.num_layers),
              std::string(kFix));
    return;
  }
  const GdnDefaults d;
  LinearAttention la;
  la.conv_kernel = positive(obj, "linear_conv_kernel_dim", d.conv_kernel, prefix, diags);
  la.key_head_dim = positive(obj, "linear_key_head_dim", d.key_head_dim, prefix, diags);
  la.value_head_dim = positive(obj, "linear_value_head_dim", d.value_head_dim, prefix, diags);
  la.key_heads = positive(obj, "linear_num_key_heads", d.key_heads, prefix, diags);
  la.value_heads = positive(obj, "linear_num_value_heads", d.value_heads, prefix, diags);
  // fix_query_key_value_ordering views the projections as num_k_heads groups of
  // num_v_heads / num_k_heads value heads, and repeat_interleave repeats q and k by that ratio
  // (Qwen3_5GatedDeltaNet too: a ratio that is not whole leaves q and k short of the value heads).
  if (la.value_heads % la.key_heads != 0)
    diags.add(prefix + "linear_num_value_heads",
              fmt::format("{} is not a multiple of linear_num_key_heads {}", la.value_heads, la.key_heads),
              std::string(kFix));
  const std::vector<bool> linear = linear_layers(obj, spec.num_layers, d, prefix, type, diags);
  if (!diags.empty()) return;

  // The row's layers, one entry per layer, then regrouped by (MLP kind, token mixer).
  std::vector<LayerGroup> out;
  std::uint64_t i = 0;
  for (const LayerGroup& g : spec.layers) {
    const LayerGroup as_linear = gated_delta_net(g, spec, la, row.linear_mixer == LinearMixer::gated_delta_net_split);
    const LayerGroup as_full = gated_attention(g, spec);
    for (std::uint64_t k = 0; k < g.count && i < linear.size(); ++k, ++i) {
      LayerGroup one = linear[i] ? as_linear : as_full;
      one.count = 1;
      if (!out.empty() && same_layer(out.back(), one))
        ++out.back().count;
      else
        out.push_back(std::move(one));
      la.layers += linear[i] ? 1 : 0;
    }
  }
  spec.layers = std::move(out);
  spec.linear_attention = la;
  spec.notes.push_back(fmt::format(
      "{} of {} layers are Gated DeltaNet linear attention: they cache a conv state and an fp32 recurrent state "
      "(no keys and values), and their forward follows transformers' torch path (torch_chunk_gated_delta_rule, "
      "without flash-linear-attention or causal-conv1d installed)",
      la.layers, spec.num_layers));
}

void refuse_linear_attention(const ModelSpec& spec, const std::string& field) {
  if (spec.linear_attention.layers == 0) return;
  throw InputError(field,
                   fmt::format("model_type '{}' has {} Gated DeltaNet linear-attention layers: a serving engine's "
                               "state cache for them is not modelled",
                               spec.model_type, spec.linear_attention.layers),
                   "estimate it with the transformers runtime: --mode inference or --mode generate, without --engine");
}

}  // namespace vramfit::spec
