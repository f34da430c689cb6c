// A plausible shape for a bare parameter count (`--params 7e9`).
//
// The engine sizes the weights (and gradients, optimizer state) from spec.params, which is
// the user's number exactly; the shape only drives what depends on layers and widths
// (activations, KV cache, LoRA adapters). We take the real model of the nearest size from a
// table and change its depth until its own count lands near the user's.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::spec {

namespace {

/// A reference decoder shape. Widths are those of the named model's config.json; every
/// row is laid out Llama-style (SwiGLU, RMSNorm, rotary, untied lm_head).
struct ShapeRow {
  std::string_view like;  // the real model it copies
  std::uint64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab;
};

constexpr ShapeRow kShapes[] = {
    // A toy decoder for counts below a million (no real model is this small).
    {"a toy decoder", 64, 4, 4, 4, 16, 176, 256},
    // TinyStories-class models: hidden 256, Llama-2 tokenizer (32000).
    {"a tiny Llama", 256, 8, 4, 4, 64, 688, 32000},
    // HuggingFaceTB/SmolLM2-135M and -360M (config.json).
    {"SmolLM2-135M", 576, 30, 9, 3, 64, 1536, 49152},
    {"SmolLM2-360M", 960, 32, 15, 5, 64, 2560, 49152},
    // meta-llama/Llama-3.2-1B, -3B and Llama-3.1-8B (config.json).
    {"Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128256},
    {"Llama-3.2-3B", 3072, 28, 24, 8, 128, 8192, 128256},
    {"Llama-3.1-8B", 4096, 32, 32, 8, 128, 14336, 128256},
    // Llama-2-13B's widths (5120 x 40, MLP 13824) with Llama-3's GQA and vocabulary.
    {"Llama-2-13B", 5120, 40, 40, 8, 128, 13824, 128256},
    // LLaMA-33B's widths (6656 x 60, MLP 17920) with Llama-3's GQA and vocabulary.
    {"LLaMA-33B", 6656, 60, 52, 8, 128, 17920, 128256},
    // meta-llama/Llama-3.1-70B and -405B (config.json).
    {"Llama-3.1-70B", 8192, 80, 64, 8, 128, 28672, 128256},
    {"Llama-3.1-405B", 16384, 126, 128, 8, 128, 53248, 128256},
};

/// Parameters of one Llama layer: q, k, v, o projections, gate/up/down MLP, two RMSNorms.
std::uint64_t layer_params(const ShapeRow& r) {
  const std::uint64_t q = r.hidden * r.heads * r.head_dim;
  const std::uint64_t kv = 2 * r.hidden * r.kv_heads * r.head_dim;
  const std::uint64_t o = r.heads * r.head_dim * r.hidden;
  const std::uint64_t mlp = 3 * r.hidden * r.intermediate;
  return q + kv + o + mlp + 2 * r.hidden;
}

/// Embedding, untied lm_head and final norm.
std::uint64_t fixed_params(const ShapeRow& r) { return 2 * r.vocab * r.hidden + r.hidden; }

std::uint64_t row_params(const ShapeRow& r, std::uint64_t layers) {
  return fixed_params(r) + layers * layer_params(r);
}

}  // namespace

ModelSpec from_param_count(std::uint64_t params) {
  // The row whose own count is nearest on a log scale.
  const double target = static_cast<double>(params == 0 ? 1 : params);
  const ShapeRow* best = &kShapes[0];
  double best_dist = 1e300;
  for (const ShapeRow& r : kShapes) {
    const double dist = std::fabs(std::log(static_cast<double>(row_params(r, r.layers)) / target));
    if (dist < best_dist) {
      best_dist = dist;
      best = &r;
    }
  }
  const ShapeRow& row = *best;

  // Depth that lands nearest the target, at least one layer. Beyond the largest row the
  // depth is capped at four times its own (about 1.6e12 parameters): no real model is
  // deeper, and the weights still use the user's count.
  const std::uint64_t per_layer = layer_params(row);
  const std::uint64_t fixed = fixed_params(row);
  std::uint64_t layers = 1;
  if (params > fixed) layers = (params - fixed + per_layer / 2) / per_layer;
  if (layers < 1) layers = 1;
  const bool largest = &row == &kShapes[std::size(kShapes) - 1];
  const std::uint64_t cap = 4 * row.layers;
  const bool capped = largest && layers > cap;
  if (capped) layers = cap;

  ModelSpec spec;
  spec.name = fmt::format("--params {}", params);
  spec.source = "params";
  spec.model_type = "llama";
  spec.family = "llama";
  spec.hidden_size = row.hidden;
  spec.num_layers = layers;
  spec.num_heads = row.heads;
  spec.num_kv_heads = row.kv_heads;
  spec.head_dim = row.head_dim;
  spec.intermediate_size = row.intermediate;
  spec.vocab_size = row.vocab;
  spec.max_positions = 131072;  // Llama-3.1's context
  spec.tied_embeddings = false;
  spec.gated_mlp = true;
  spec.norm = Norm::rms;
  spec.activation = Activation::silu;

  LayerGroup g;
  g.count = layers;
  const std::uint64_t H = row.hidden;
  const auto add = [&g](Role role, std::string name, std::uint64_t in, std::uint64_t out) {
    Linear l;
    l.role = role;
    l.name = std::move(name);
    l.in_features = in;
    l.out_features = out;
    g.linears.push_back(std::move(l));
  };
  add(Role::attn_in, "q_proj", H, row.heads * row.head_dim);
  add(Role::attn_in, "k_proj", H, row.kv_heads * row.head_dim);
  add(Role::attn_in, "v_proj", H, row.kv_heads * row.head_dim);
  add(Role::attn_out, "o_proj", row.heads * row.head_dim, H);
  add(Role::mlp_in, "gate_proj", H, row.intermediate);
  add(Role::mlp_in, "up_proj", H, row.intermediate);
  add(Role::mlp_out, "down_proj", row.intermediate, H);
  g.norm_params = 2 * H;
  spec.layers.push_back(std::move(g));
  spec.embedding_params = row.vocab * H;
  spec.lm_head_params = row.vocab * H;
  spec.final_norm_params = H;
  // LlamaRotaryEmbedding: inv_freq and original_inv_freq, head_dim/2 fp32 values each.
  spec.buffer_bytes = 2 * (row.head_dim / 2) * 4;

  const std::uint64_t shape_params = count_params(spec);
  spec.params = params;  // the engine sizes weights from this: the user's number, exactly

  spec.notes.push_back(fmt::format(
      "--params gives only a count: assumed a Llama-3-like shape after {} (hidden {}, {} layer(s), {} heads, "
      "{} "
      "KV heads, head_dim {}, MLP {}, vocab {}, untied lm_head)",
      row.like, row.hidden, layers, row.heads, row.kv_heads, row.head_dim, row.intermediate, row.vocab));
  spec.notes.push_back(
      fmt::format("that shape has {} parameters; weights, gradients and optimizer state use your count, {}",
                  shape_params, params));
  if (capped) {
    spec.notes.push_back(fmt::format(
        "no real model is this large: the shape is capped at {} layers of {}'s width", cap, row.like));
  } else if (params < shape_params / 2) {
    spec.notes.push_back(
        "no decoder is this small: activations come from the smallest shape vramfit assumes");
  }
  spec.notes.push_back("pass --config (a config.json) or --model (a preset) for an exact estimate");
  return spec;
}

}  // namespace vramfit::spec
