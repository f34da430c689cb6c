// The vision half of a vision-language config.json: the vision tower and the projector.
//
// Each row below follows the module tree transformers 5.17 builds for the model type
// (src/transformers/models/<type>/modeling_<type>.py and the vision models they call), so that
// the tower's and the projector's parameters equal what `model.parameters()` yields for them.
// Checked against models built on the meta device (tests/unit/spec/data/vision.json).
// Defaults for absent keys follow the vision config classes (configuration_<type>.py).

#include "vramfit/spec/vision.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"
#include "checked.hpp"

namespace vramfit::spec {

std::uint64_t VisionSpec::params() const { return checked_add(tower_params, projector_params, "parameters"); }

namespace {

using nlohmann::json;

// No real dimension comes near 2^40; larger values are typos and would overflow products.
constexpr std::uint64_t kMaxDim = 1ULL << 40;

using detail::add;  // checked products and sums of dimensions (spec/checked.hpp)
using detail::mul;

/// torch.nn.Linear(in, out, bias): out x in weights and out biases.
std::uint64_t linear(std::uint64_t in, std::uint64_t out, bool bias) { return add(mul(in, out), bias ? out : 0); }
/// nn.LayerNorm(n): weight and bias.
std::uint64_t layer_norm(std::uint64_t n) { return mul(2, n); }
/// RMSNorm(n): weight only.
std::uint64_t rms_norm(std::uint64_t n) { return n; }

/// Reads sizes out of one JSON object (vision_config or the top level), falling back to the
/// config class's default for an absent or null key, and collecting a diagnostic for a bad one.
class Keys {
 public:
  Keys(const json& obj, std::string prefix, Diagnostics& diags) : obj_(obj), prefix_(std::move(prefix)), diags_(diags) {}

  [[nodiscard]] bool has(std::string_view key) const {
    const auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  [[nodiscard]] const json* find(std::string_view key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  /// A positive integer (0 allowed with zero_ok), `dflt` when absent.
  std::uint64_t uint(std::string_view key, std::uint64_t dflt, bool zero_ok = false) {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (v->is_number_unsigned() || (v->is_number_integer() && v->get<std::int64_t>() >= 0)) {
      const auto n = v->get<std::uint64_t>();
      if ((n > 0 || zero_ok) && n <= kMaxDim) return n;
    }
    diags_.add(prefix_ + std::string(key),
               fmt::format("expected a {} integer, got {}", zero_ok ? "non-negative" : "positive", json_excerpt(*v)),
               "check the value against the model's config.json on the Hugging Face Hub");
    return dflt;
  }

  /// A boolean, `dflt` when absent.
  bool flag(std::string_view key, bool dflt) {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (v->is_boolean()) return v->get<bool>();
    diags_.add(prefix_ + std::string(key), fmt::format("expected true or false, got {}", json_excerpt(*v)),
               "write true or false without quotes");
    return dflt;
  }

  /// The length of a list (an integer counts as a list of one), `dflt` when absent.
  std::uint64_t list_len(std::string_view key, std::uint64_t dflt) {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (v->is_array()) return v->size();
    if (v->is_number_integer()) return 1;
    diags_.add(prefix_ + std::string(key), fmt::format("expected a list of integers, got {}", json_excerpt(*v)),
               "check the value against the model's config.json on the Hugging Face Hub");
    return dflt;
  }

  /// A string, `dflt` when absent.
  std::string str(std::string_view key, std::string dflt) {
    const json* v = find(key);
    if (v == nullptr) return dflt;
    if (v->is_string()) return v->get<std::string>();
    diags_.add(prefix_ + std::string(key), fmt::format("expected a string, got {}", json_excerpt(*v)),
               "check the value against the model's config.json on the Hugging Face Hub");
    return dflt;
  }

  [[nodiscard]] std::string field(std::string_view key) const { return prefix_ + std::string(key); }
  Diagnostics& diags() { return diags_; }

 private:
  const json& obj_;
  std::string prefix_;
  Diagnostics& diags_;
};


/// Side of a square size that a config may write as N or [N, N] (InternVL: image_size [448, 448]).
std::uint64_t side(Keys& v, std::string_view key, std::uint64_t dflt) {
  const json* j = v.find(key);
  if (j != nullptr && j->is_array()) {
    if (j->size() == 2 && (*j)[0].is_number_unsigned() && (*j)[0] == (*j)[1] && (*j)[0].get<std::uint64_t>() > 0 &&
        (*j)[0].get<std::uint64_t>() <= kMaxDim)
      return (*j)[0].get<std::uint64_t>();
    v.diags().add(v.field(key), fmt::format("expected a size or a square [N, N], got {}", json_excerpt(*j)),
                  "check the value against the model's config.json on the Hugging Face Hub");
    return dflt;
  }
  return v.uint(key, dflt);
}

/// Patches along one side; a diagnostic when the patch is larger than the image.
std::uint64_t per_side(Keys& v, std::uint64_t image, std::uint64_t patch) {
  if (patch > image) {
    v.diags().add(v.field("patch_size"), fmt::format("{} is larger than image_size {}", patch, image),
                  "check the value against the model's config.json on the Hugging Face Hub");
    return 1;
  }
  return image / patch;
}

/// The sizes every ViT-style tower shares, with the vision config class's defaults.
struct Vit {
  std::uint64_t H = 0, L = 0, heads = 0, I = 0, patch = 0, image = 0, C = 3;
  std::uint64_t side = 0;  ///< patches along one side of the image
  [[nodiscard]] std::uint64_t patches() const { return mul(side, side); }
};

struct VitDefaults {
  std::uint64_t H, L, heads, I, patch, image;
};

Vit read_vit(Keys& v, const VitDefaults& d, std::string_view heads_key = "num_attention_heads") {
  Vit t;
  t.H = v.uint("hidden_size", d.H);
  t.L = v.uint("num_hidden_layers", d.L, /*zero_ok=*/true);
  t.heads = v.uint(heads_key, d.heads);
  t.I = v.uint("intermediate_size", d.I);
  t.patch = side(v, "patch_size", d.patch);
  t.image = side(v, "image_size", d.image);
  t.C = v.uint("num_channels", 3);
  t.side = per_side(v, t.image, t.patch);
  if (t.H % t.heads != 0)
    v.diags().add(v.field(heads_key), fmt::format("{} does not divide hidden_size {}", t.heads, t.H),
                  "check the value against the model's config.json on the Hugging Face Hub");
  return t;
}

/// A patch embedding: Conv2d(C, H, kernel=stride=patch) (or an equivalent Linear over C*p*p).
std::uint64_t patch_embed(const Vit& t, bool bias) { return linear(mul(mul(t.C, t.patch), t.patch), t.H, bias); }

/// One pre-norm encoder layer of CLIP, SigLIP and Idefics3 (modeling_clip.py CLIPEncoderLayer,
/// modeling_siglip.py SiglipEncoderLayer): q, k, v, out with biases, fc1/fc2 with biases,
/// layer_norm1/2.
std::uint64_t vit_layer(const Vit& t) {
  return add(add(mul(4, linear(t.H, t.H, true)), add(linear(t.H, t.I, true), linear(t.I, t.H, true))),
             mul(2, layer_norm(t.H)));
}

/// position_ids, an int64 buffer of the embeddings (CLIP, SigLIP; persistent=False, still
/// resident on the device).
std::uint64_t position_ids_bytes(std::uint64_t positions) { return mul(positions, 8); }

/// Rotary inv_freq + original_inv_freq of `dim` rotary channels: dim/2 fp32 each.
std::uint64_t rotary_bytes(std::uint64_t dim) { return mul(2 * ((dim + 1) / 2), 4); }

/// The MLP's width-I tensors of a tower layer. Alive at once at inference: fc1's output and
/// the activation's (one fused kernel: gelu, gelu_pytorch_tanh); quick_gelu (x *
/// sigmoid(1.702 x), transformers/activations.py QuickGELUActivation) and gated MLPs (gate, up,
/// act(gate), act(gate) * up) hold about four. Measured (tests/accuracy/vision, vision tower
/// alone): SigLIP 2.2, Qwen2-VL (quick_gelu) 3.7, CLIP (quick_gelu) 3.3 widths.
void set_mlp(VisionSpec& s, const std::string& act, bool gated) {
  s.mlp_live = gated || act == "quick_gelu" ? 4 : 2;
  // Saved for backward (training): fc1's output and the activation's (one fused kernel); quick_gelu
  // also its sigmoid (mul saves both factors); a gated MLP gate, up, act(gate) and the product.
  s.mlp_saved = gated ? 4 : act == "quick_gelu" ? 3 : 2;
}

// --- towers ------------------------------------------------------------------------------------
// Each reads vision_config with its class's defaults (configuration_<type>.py) and fills the
// tower's parameters and buffers, and the sizes later steps need.

/// CLIPVisionModel (models/clip/modeling_clip.py): class embedding, Conv2d without bias,
/// learned positions for the patches + CLS, pre_layrnorm, the encoder, post_layernorm.
void clip_tower(Keys& v, VisionSpec& s) {
  const Vit t = read_vit(v, {768, 12, 12, 3072, 32, 224});  // CLIPVisionConfig
  const std::uint64_t positions = add(t.patches(), 1);
  s.tower_params = add(add(add(t.H, patch_embed(t, false)), mul(positions, t.H)),
                       add(add(layer_norm(t.H), mul(t.L, vit_layer(t))), layer_norm(t.H)));
  s.buffer_bytes = position_ids_bytes(positions);
  s.hidden = t.H, s.layers = t.L, s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch, s.image_size = t.image;
  s.cls_token = true;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "quick_gelu"), false);  // CLIPVisionConfig's default
}

/// SiglipVisionModel (models/siglip/modeling_siglip.py): Conv2d with bias, learned positions,
/// the encoder, post_layernorm and, when vision_use_head, the attention-pooling head (a probe,
/// nn.MultiheadAttention, a LayerNorm and an MLP). Idefics3's vision model
/// (models/idefics3/modeling_idefics3.py) is the same without a head or position_ids.
void siglip_tower(Keys& v, VisionSpec& s, bool idefics3) {
  const Vit t = idefics3 ? read_vit(v, {1152, 12, 16, 3072, 32, 224})   // Idefics3VisionConfig
                         : read_vit(v, {768, 12, 12, 3072, 16, 224});   // SiglipVisionConfig
  std::uint64_t n = add(add(patch_embed(t, true), mul(t.patches(), t.H)),
                        add(mul(t.L, vit_layer(t)), layer_norm(t.H)));
  if (!idefics3 && v.flag("vision_use_head", true)) {
    const std::uint64_t head = add(add(t.H, add(linear(t.H, mul(3, t.H), true), linear(t.H, t.H, true))),
                                   add(layer_norm(t.H), add(linear(t.H, t.I, true), linear(t.I, t.H, true))));
    n = add(n, head);
  }
  s.tower_params = n;
  s.buffer_bytes = idefics3 ? 0 : position_ids_bytes(t.patches());
  s.hidden = t.H, s.layers = t.L, s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch, s.image_size = t.image;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "gelu_pytorch_tanh"), false);
}

/// PixtralVisionModel (models/pixtral/modeling_pixtral.py): Conv2d without bias, ln_pre (RMS),
/// layers of RMS-normed attention (q, k, v, o without bias) and a gated MLP without bias; a 2-D
/// rotary embedding of head_dim channels.
void pixtral_tower(Keys& v, VisionSpec& s) {
  const Vit t = read_vit(v, {1024, 24, 16, 4096, 16, 1024});  // PixtralVisionConfig
  const std::uint64_t head_dim = v.uint("head_dim", t.H / t.heads);
  const std::uint64_t layer = add(add(mul(2, rms_norm(t.H)), mul(4, linear(t.H, t.H, false))),
                                  mul(3, linear(t.H, t.I, false)));
  s.tower_params = add(add(patch_embed(t, false), rms_norm(t.H)), mul(t.L, layer));
  s.buffer_bytes = rotary_bytes(head_dim);
  s.hidden = t.H, s.layers = t.L, s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch, s.image_size = t.image;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "gelu"), true);
}

/// Qwen2-VL's ViT (models/qwen2_vl/modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel):
/// a Conv3d over temporal_patch_size frames without bias, blocks of LayerNorms, a fused qkv and
/// proj with biases and an fc1/fc2 MLP of embed_dim * mlp_ratio; the PatchMerger (ln_q and a
/// two-layer MLP over merge^2 patches into the language model's width) is the projector.
void qwen2_vl_tower(Keys& v, VisionSpec& s) {
  const std::uint64_t E = v.uint("embed_dim", 1280);
  const std::uint64_t L = v.uint("depth", 32, true);
  const std::uint64_t heads = v.uint("num_heads", 16);
  const std::uint64_t ratio = v.uint("mlp_ratio", 4);
  const std::uint64_t out = v.uint("hidden_size", 3584);
  const std::uint64_t C = v.uint("in_channels", 3), p = v.uint("patch_size", 14), tp = v.uint("temporal_patch_size", 2);
  const std::uint64_t m = v.uint("spatial_merge_size", 2);
  const std::uint64_t I = mul(E, ratio);
  const std::uint64_t block = add(add(mul(2, layer_norm(E)), add(linear(E, mul(3, E), true), linear(E, E, true))),
                                  add(linear(E, I, true), linear(I, E, true)));
  s.tower_params = add(mul(mul(mul(C, tp), mul(p, p)), E), mul(L, block));
  const std::uint64_t ctx = mul(E, mul(m, m));
  s.projector_params = add(layer_norm(E), add(linear(ctx, ctx, true), linear(ctx, out, true)));
  if (E % heads != 0)
    v.diags().add(v.field("num_heads"), fmt::format("{} does not divide embed_dim {}", heads, E),
                  "check the value against the model's config.json on the Hugging Face Hub");
  s.buffer_bytes = rotary_bytes(E / heads / 2);  // VisionRotaryEmbedding(head_dim // 2)
  s.hidden = E, s.layers = L, s.heads = heads, s.intermediate = I, s.patch = p, s.merge = m;
  s.pixels_per_patch = mul(mul(C, tp), mul(p, p));
  set_mlp(s, v.str("hidden_act", "quick_gelu"), false);
}

/// Qwen2.5-VL's ViT (models/qwen2_5_vl/modeling_qwen2_5_vl.py): as Qwen2-VL's, with RMSNorms,
/// a gated MLP with biases, and a merger whose norm is an RMSNorm, into out_hidden_size.
void qwen2_5_vl_tower(Keys& v, VisionSpec& s) {
  const std::uint64_t H = v.uint("hidden_size", 3584);
  const std::uint64_t L = v.uint("depth", 32, true);
  const std::uint64_t heads = v.uint("num_heads", 16);
  const std::uint64_t I = v.uint("intermediate_size", 3420);
  const std::uint64_t out = v.uint("out_hidden_size", 3584);
  const std::uint64_t C = v.uint("in_channels", 3), p = v.uint("patch_size", 14), tp = v.uint("temporal_patch_size", 2);
  const std::uint64_t m = v.uint("spatial_merge_size", 2);
  const std::uint64_t block = add(add(mul(2, rms_norm(H)), add(linear(H, mul(3, H), true), linear(H, H, true))),
                                  add(mul(2, linear(H, I, true)), linear(I, H, true)));
  s.tower_params = add(mul(mul(mul(C, tp), mul(p, p)), H), mul(L, block));
  const std::uint64_t ctx = mul(H, mul(m, m));
  s.projector_params = add(rms_norm(H), add(linear(ctx, ctx, true), linear(ctx, out, true)));
  if (H % heads != 0)
    v.diags().add(v.field("num_heads"), fmt::format("{} does not divide hidden_size {}", heads, H),
                  "check the value against the model's config.json on the Hugging Face Hub");
  s.buffer_bytes = rotary_bytes(H / heads / 2);
  s.hidden = H, s.layers = L, s.heads = heads, s.intermediate = I, s.patch = p, s.merge = m;
  s.pixels_per_patch = mul(mul(C, tp), mul(p, p));
  set_mlp(s, v.str("hidden_act", "silu"), true);
}

/// Qwen3-VL's ViT (models/qwen3_vl/modeling_qwen3_vl.py): a Conv3d with bias, learned
/// positions (num_position_embeddings), LayerNorm blocks with biased qkv/proj and an fc1/fc2
/// MLP; the merger (LayerNorm over hidden, then fc1/fc2) and one deepstack merger per
/// deepstack_visual_indexes entry (LayerNorm after the shuffle, over hidden * merge^2).
void qwen3_vl_layout(Keys& v, VisionSpec& s, bool deepstack_mergers);
void qwen3_vl_tower(Keys& v, VisionSpec& s) { qwen3_vl_layout(v, s, true); }
/// Qwen3.5's ViT (models/qwen3_5/modeling_qwen3_5.py Qwen3_5VisionModel, and qwen3_5_moe's): Qwen3-VL's
/// modules and Qwen3_5VisionConfig's defaults (the same as Qwen3VLVisionConfig's) without the deepstack
/// mergers, whatever deepstack_visual_indexes says (Qwen3_5VisionConfig has no such key; the MoE's keeps
/// it, empty by default, and builds none either). Its rotary module keeps inv_freq and original_inv_freq,
/// head_dim / 4 fp32 values each: rotary_bytes(head_dim / 2), as Qwen3-VL's.
void qwen3_5_tower(Keys& v, VisionSpec& s) { qwen3_vl_layout(v, s, false); }
void qwen3_vl_layout(Keys& v, VisionSpec& s, bool deepstack_mergers) {
  const std::uint64_t H = v.uint("hidden_size", 1152);
  const std::uint64_t L = v.uint("depth", 27, true);
  const std::uint64_t heads = v.uint("num_heads", 16);
  const std::uint64_t I = v.uint("intermediate_size", 4304);
  const std::uint64_t out = v.uint("out_hidden_size", 3584);
  const std::uint64_t C = v.uint("in_channels", 3), p = v.uint("patch_size", 16), tp = v.uint("temporal_patch_size", 2);
  const std::uint64_t m = v.uint("spatial_merge_size", 2);
  const std::uint64_t positions = v.uint("num_position_embeddings", 2304);
  const std::uint64_t deepstack = deepstack_mergers ? v.list_len("deepstack_visual_indexes", 3) : 0;
  const std::uint64_t block = add(add(mul(2, layer_norm(H)), add(linear(H, mul(3, H), true), linear(H, H, true))),
                                  add(linear(H, I, true), linear(I, H, true)));
  s.tower_params = add(add(linear(mul(mul(C, tp), mul(p, p)), H, true), mul(positions, H)), mul(L, block));
  const std::uint64_t ctx = mul(H, mul(m, m));
  const std::uint64_t mlp = add(linear(ctx, ctx, true), linear(ctx, out, true));
  s.projector_params = add(add(layer_norm(H), mlp), mul(deepstack, add(layer_norm(ctx), mlp)));
  if (H % heads != 0)
    v.diags().add(v.field("num_heads"), fmt::format("{} does not divide hidden_size {}", heads, H),
                  "check the value against the model's config.json on the Hugging Face Hub");
  s.buffer_bytes = rotary_bytes(H / heads / 2);
  s.hidden = H, s.layers = L, s.heads = heads, s.intermediate = I, s.patch = p, s.merge = m;
  s.pixels_per_patch = mul(mul(C, tp), mul(p, p));
  set_mlp(s, v.str("hidden_act", "gelu_pytorch_tanh"), false);
}

/// MllamaVisionModel (models/mllama/modeling_mllama.py): class embedding, Conv2d without bias,
/// gated positional embeddings (one per patch + CLS, and one per tile per aspect ratio),
/// gated pre- and post-tile embeddings, layernorm_pre/post, num_hidden_layers local layers
/// (q, k, v, o without bias, fc1/fc2 with bias, two LayerNorms) and num_global_layers gated
/// ones (two scalar gates more).
void mllama_tower(Keys& v, VisionSpec& s) {
  const Vit t = read_vit(v, {1280, 32, 16, 5120, 14, 448}, "attention_heads");  // MllamaVisionConfig
  const std::uint64_t G = v.uint("num_global_layers", 8, true);
  const std::uint64_t tiles = v.uint("max_num_tiles", 4);
  const std::uint64_t ratios = add(v.list_len("supported_aspect_ratios", 8), 1);  // max_aspect_ratio_id + 1
  const std::uint64_t positions = add(t.patches(), 1);
  const std::uint64_t layer = add(add(mul(4, linear(t.H, t.H, false)), add(linear(t.H, t.I, true), linear(t.I, t.H, true))),
                                  mul(2, layer_norm(t.H)));
  const std::uint64_t gated_pos = add(add(1, mul(positions, t.H)), mul(ratios, mul(mul(tiles, positions), t.H)));
  const std::uint64_t tile_pos = add(1, mul(ratios, mul(tiles, t.H)));
  s.tower_params = add(add(add(t.H, patch_embed(t, false)), add(gated_pos, mul(2, tile_pos))),
                       add(mul(2, layer_norm(t.H)), add(mul(t.L, layer), mul(G, add(layer, 2)))));
  s.hidden = t.H, s.layers = add(t.L, G), s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch,
  s.image_size = t.image, s.max_tiles = tiles;
  s.cls_token = true;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "gelu"), false);
}

/// InternVLVisionModel (models/internvl/modeling_internvl.py): CLS token, optional mask token
/// and absolute positions, a Conv2d with bias; layers with layer-scale vectors lambda_1/2,
/// q/k/v (attention_bias), a biased output projection, optional q/k RMSNorms over the width,
/// fc1/fc2 and two norms (norm_type); a final norm unless use_mean_pooling.
void internvl_tower(Keys& v, VisionSpec& s) {
  const Vit t = read_vit(v, {1024, 24, 16, 4096, 14, 448});  // InternVLVisionConfig
  const bool qkv_bias = v.flag("attention_bias", false);
  const bool qk_norm = v.flag("use_qk_norm", false);
  const std::string norm_type = v.str("norm_type", "layer_norm");
  if (norm_type != "layer_norm" && norm_type != "rms_norm")
    v.diags().add(v.field("norm_type"), fmt::format("unknown norm_type '{}'", norm_type), "use layer_norm or rms_norm");
  const auto norm = [&](std::uint64_t n) { return norm_type == "rms_norm" ? rms_norm(n) : layer_norm(n); };
  const std::uint64_t layer =
      add(add(mul(2, t.H), add(mul(3, linear(t.H, t.H, qkv_bias)), linear(t.H, t.H, true))),
          add(add(qk_norm ? mul(2, rms_norm(t.H)) : 0, add(linear(t.H, t.I, true), linear(t.I, t.H, true))),
              mul(2, norm(t.H))));
  std::uint64_t n = add(add(t.H, patch_embed(t, true)), mul(t.L, layer));
  if (v.flag("use_mask_token", false)) n = add(n, t.H);
  if (v.flag("use_absolute_position_embeddings", true)) n = add(n, mul(add(t.patches(), 1), t.H));
  if (!v.flag("use_mean_pooling", true)) n = add(n, norm(t.H));
  s.tower_params = n;
  s.hidden = t.H, s.layers = t.L, s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch, s.image_size = t.image;
  s.cls_token = true;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "gelu"), false);
}

/// Llama4VisionModel (models/llama4/modeling_llama4.py): a Linear over unfolded patches without
/// bias, class embedding, learned positions, layernorm_pre/post, layers with biased q/k/v/o and
/// fc1/fc2 and two LayerNorms; the pixel-shuffle adapter (fc1 intermediate -> projector_input_dim,
/// fc2 projector_input_dim -> projector_output_dim, no biases) counts as projector; a complex64
/// 2-D rotary table (patches + CLS) x head_dim/2.
void llama4_tower(Keys& v, VisionSpec& s) {
  const Vit t = read_vit(v, {768, 34, 16, 5632, 14, 448});  // Llama4VisionConfig
  const std::uint64_t pin = v.uint("projector_input_dim", 4096), pout = v.uint("projector_output_dim", 4096);
  const std::uint64_t positions = add(t.patches(), 1);
  const std::uint64_t layer = add(add(mul(4, linear(t.H, t.H, true)), add(linear(t.H, t.I, true), linear(t.I, t.H, true))),
                                  mul(2, layer_norm(t.H)));
  s.tower_params = add(add(add(patch_embed(t, false), t.H), mul(positions, t.H)),
                       add(mul(2, layer_norm(t.H)), mul(t.L, layer)));
  s.projector_params = add(linear(t.I, pin, false), linear(pin, pout, false));
  s.buffer_bytes = mul(mul(positions, t.H / t.heads / 2), 8);
  s.hidden = t.H, s.layers = t.L, s.heads = t.heads, s.intermediate = t.I, s.patch = t.patch, s.image_size = t.image;
  s.cls_token = true;
  s.pixels_per_patch = mul(t.C, mul(t.patch, t.patch));
  set_mlp(s, v.str("hidden_act", "gelu"), false);
}


// --- the outer model types --------------------------------------------------------------------

/// What the outer config adds: the projector, and how images become tokens.
struct Outer {
  Keys& top;             ///< the config's top level
  std::uint64_t text_hidden;
  VisionSpec& s;
};

/// LlavaMultiModalProjector (models/llava/modeling_llava.py): linear_1 from the tower's width
/// times the number of vision_feature_layer entries, GELU, linear_2; biases per
/// multimodal_projector_bias.
void llava_projector(Outer& o) {
  const std::uint64_t layers = o.top.list_len("vision_feature_layer", 1);
  const bool bias = o.top.flag("multimodal_projector_bias", true);
  o.s.projector_params = add(linear(mul(o.s.hidden, layers), o.text_hidden, bias), linear(o.text_hidden, o.text_hidden, bias));
}

/// Tokens per image of a fixed-size tower: one per patch, the CLS token dropped unless
/// vision_feature_select_strategy is "full" (LlavaProcessor).
void patch_tokens(Outer& o) {
  const std::uint64_t side = o.s.patch == 0 ? 0 : o.s.image_size / o.s.patch;
  const bool full = o.top.str("vision_feature_select_strategy", "default") == "full";
  o.s.tokens = ImageTokens::fixed;
  o.s.tokens_per_image = add(mul(side, side), full ? 1 : 0);
}

void llava(Outer& o) {
  llava_projector(o);
  patch_tokens(o);
  // LlavaModel.get_image_features runs the tower with output_hidden_states=True to pick
  // vision_feature_layer: every layer's hidden states are alive until it returns.
  o.s.keeps_hidden_states = true;
}

/// LlavaNext adds image_newline (one learned vector of the text width) to Llava's parts; the
/// processor tiles the image (anyres): the base image plus the best grid of image_grid_pinpoints.
void llava_next(Outer& o) {
  llava_projector(o);
  o.s.projector_params = add(o.s.projector_params, o.text_hidden);
  patch_tokens(o);
  o.s.keeps_hidden_states = true;  // as llava
  o.s.tokens = ImageTokens::tiles;
  // LlavaNextConfig's default image_grid_pinpoints (configuration_llava_next.py), as (h, w).
  o.s.pinpoints = {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}};
  const json* pp = o.top.find("image_grid_pinpoints");
  if (pp != nullptr) {
    o.s.pinpoints.clear();
    bool ok = pp->is_array() && !pp->empty();
    if (ok)
      for (const json& e : *pp) {
        if (!(e.is_array() && e.size() == 2 && e[0].is_number_unsigned() && e[1].is_number_unsigned())) {
          ok = false;
          break;
        }
        const auto h = e[0].get<std::uint64_t>(), w = e[1].get<std::uint64_t>();
        if (h < o.s.image_size || w < o.s.image_size || h > kMaxDim || w > kMaxDim) {
          ok = false;
          break;
        }
        o.s.pinpoints.emplace_back(h, w);
      }
    if (!ok)
      o.top.diags().add(o.top.field("image_grid_pinpoints"),
                        fmt::format("expected a list of [height, width] pairs of at least image_size pixels, got {}",
                                    json_excerpt(*pp)),
                        "check the value against the model's config.json on the Hugging Face Hub");
  }
}

/// Qwen2-VL, 2.5-VL, 3-VL: the merger was counted with the tower; images take any size.
/// smart_resize's bounds are those of the released checkpoints' preprocessor_config.json
/// (Qwen/Qwen2-VL-7B-Instruct, Qwen/Qwen2.5-VL-7B-Instruct: min_pixels 3136 = 56 x 56,
/// max_pixels 12845056 = 28 x 28 x 16384; Qwen3-VL: shortest_edge 65536, longest_edge
/// 16777216), not Qwen2VLImageProcessor's class default max of 28 x 28 x 1280, which no
/// released checkpoint uses.
void qwen_vl(Outer& o) {
  o.s.tokens = ImageTokens::grid;
  const bool v3 = o.s.tower == "qwen3_vl";
  o.s.min_pixels = v3 ? 65536 : 56 * 56;
  o.s.max_pixels = v3 ? 16777216 : 28 * 28 * 16384;
}

/// Gemma3MultiModalProjector (models/gemma3/modeling_gemma3.py): mm_input_projection_weight
/// (vision width x text width) and mm_soft_emb_norm (Gemma RMSNorm over the vision width);
/// mm_tokens_per_image per image after average pooling.
void gemma3(Outer& o) {
  o.s.projector_params = add(mul(o.s.hidden, o.text_hidden), rms_norm(o.s.hidden));
  o.s.tokens = ImageTokens::fixed;
  o.s.tokens_per_image = o.top.uint("mm_tokens_per_image", 256);
  // Gemma3Processor: each image is <start_of_image>, mm_tokens_per_image <image_soft_token>,
  // <end_of_image> (the "\n\n" around them is text).
  o.s.markers = 2;
}

/// PaliGemmaMultiModalProjector (models/paligemma/modeling_paligemma.py): one biased Linear
/// from the vision width to projection_dim; one token per patch.
void paligemma(Outer& o) {
  const std::uint64_t proj = o.top.uint("projection_dim", 2048);
  o.s.projector_params = linear(o.s.hidden, proj, true);
  const std::uint64_t side = o.s.image_size / o.s.patch;
  o.s.tokens = ImageTokens::fixed;
  o.s.tokens_per_image = mul(side, side);
}

/// Idefics3Connector (models/idefics3/modeling_idefics3.py): pixel shuffle by scale_factor,
/// then one Linear without bias from width * scale^2 to the text width.
void idefics3(Outer& o) {
  const std::uint64_t scale = o.top.uint("scale_factor", 2);
  o.s.projector_params = linear(mul(o.s.hidden, mul(scale, scale)), o.text_hidden, false);
  o.s.merge = scale;
  const std::uint64_t side = o.s.image_size / o.s.patch / scale;
  o.s.tokens = ImageTokens::tiles;
  o.s.tokens_per_image = mul(side, side);
}

/// InternVLMultiModalProjector (models/internvl/modeling_internvl.py): LayerNorm over
/// width * (1/downsample_ratio)^2, linear_1 into the text width, GELU, linear_2, with biases.
void internvl(Outer& o) {
  const json* r = o.top.find("downsample_ratio");
  std::uint64_t inv = 2;
  if (r != nullptr) {
    const double d = r->is_number() ? r->get<double>() : 0;
    if (d > 0 && d <= 1 && std::abs(1 / d - std::round(1 / d)) < 1e-9)
      inv = static_cast<std::uint64_t>(std::round(1 / d));
    else
      o.top.diags().add(o.top.field("downsample_ratio"), fmt::format("expected 1/N (0.5, 0.25), got {}", json_excerpt(*r)),
                        "check the value against the model's config.json on the Hugging Face Hub");
  }
  const std::uint64_t in = mul(o.s.hidden, mul(inv, inv));
  o.s.projector_params = add(layer_norm(in), add(linear(in, o.text_hidden, true), linear(o.text_hidden, o.text_hidden, true)));
  o.s.merge = inv;
  const std::uint64_t side = o.s.image_size / o.s.patch / inv;
  o.s.tokens = ImageTokens::tiles;
  o.s.tokens_per_image = mul(side, side);
  o.s.max_tiles = 12;  // GotOcr2ImageProcessor max_patches
}

/// Mistral3MultiModalProjector (models/mistral3/modeling_mistral3.py): RMSNorm over the vision
/// width, the patch merger (a Linear without bias from width * merge^2 to width), linear_1
/// into the text width, GELU, linear_2 (biases per multimodal_projector_bias).
void mistral3(Outer& o) {
  const std::uint64_t m = o.top.uint("spatial_merge_size", 2);
  const bool bias = o.top.flag("multimodal_projector_bias", false);
  o.s.projector_params = add(add(rms_norm(o.s.hidden), linear(mul(o.s.hidden, mul(m, m)), o.s.hidden, false)),
                             add(linear(o.s.hidden, o.text_hidden, bias), linear(o.text_hidden, o.text_hidden, bias)));
  o.s.merge = m;
  o.s.tokens = ImageTokens::grid;
  o.s.keeps_hidden_states = true;  // Mistral3Model.get_image_features: output_hidden_states=True
}

/// MllamaForConditionalGeneration's multi_modal_projector: one biased Linear from
/// vision_output_dim to the text width. Images are cross-attended, not prompt tokens.
void mllama(Outer& o, Keys& v) {
  const std::uint64_t out = v.uint("vision_output_dim", 7680);
  o.s.projector_params = linear(out, o.text_hidden, true);
  o.s.tokens = ImageTokens::cross;
  const std::uint64_t side = o.s.image_size / o.s.patch;
  o.s.tokens_per_image = add(mul(side, side), 1);  // per tile, CLS included
}

/// Llama4MultiModalProjector (models/llama4/modeling_llama4.py): linear_1 without bias from
/// vision_output_dim to the text width (the adapter was counted with the tower).
void llama4(Outer& o, Keys& v) {
  const std::uint64_t out = v.uint("vision_output_dim", 7680);
  o.s.projector_params = add(o.s.projector_params, linear(out, o.text_hidden, false));
  o.s.tokens = ImageTokens::tiles;
  const json* r = v.find("pixel_shuffle_ratio");
  const double ratio = r != nullptr && r->is_number() ? r->get<double>() : 0.5;
  const std::uint64_t side = o.s.image_size / o.s.patch;
  o.s.tokens_per_image = static_cast<std::uint64_t>(std::llround(static_cast<double>(mul(side, side)) * ratio * ratio));
  o.s.max_tiles = 16;  // Llama4ImageProcessor max_patches
}

using TowerFn = void (*)(Keys&, VisionSpec&);

/// The vision towers, by vision_config.model_type.
struct TowerRow {
  std::string_view vision_type;
  std::string_view tower;
  TowerFn count;
};

void siglip(Keys& v, VisionSpec& s) { siglip_tower(v, s, false); }
void idefics3_vision(Keys& v, VisionSpec& s) { siglip_tower(v, s, true); }

constexpr TowerRow kTowers[] = {
    {"clip_vision_model", "clip", clip_tower},            // models/clip/modeling_clip.py
    {"siglip_vision_model", "siglip", siglip},            // models/siglip/modeling_siglip.py
    {"pixtral", "pixtral", pixtral_tower},                // models/pixtral/modeling_pixtral.py
    {"idefics3_vision", "idefics3", idefics3_vision},     // models/idefics3/modeling_idefics3.py
    {"qwen2_vl", "qwen2_vl", qwen2_vl_tower},             // models/qwen2_vl/modeling_qwen2_vl.py
    {"qwen2_5_vl", "qwen2_5_vl", qwen2_5_vl_tower},       // models/qwen2_5_vl/modeling_qwen2_5_vl.py
    {"qwen3_vl", "qwen3_vl", qwen3_vl_tower},             // models/qwen3_vl/modeling_qwen3_vl.py
    {"qwen3_5_vision", "qwen3_vl", qwen3_5_tower},        // models/qwen3_5/modeling_qwen3_5.py
    {"mllama_vision_model", "mllama", mllama_tower},      // models/mllama/modeling_mllama.py
    {"internvl_vision", "internvl", internvl_tower},      // models/internvl/modeling_internvl.py
    {"llama4_vision_model", "llama4", llama4_tower},      // models/llama4/modeling_llama4.py
};

/// One row per vision-language model_type: the tower it builds, whether vision_config may name
/// another one (Llava builds AutoModel.from_config(vision_config)), and what the outer config
/// adds. `absent` is the vision_config the config class builds when the key is missing.
struct OuterRow {
  std::string_view model_type;
  std::string_view source;        ///< transformers modeling file
  std::string_view default_tower; ///< a kTowers vision_type
  bool any_tower;                 ///< vision_config.model_type picks the tower
  void (*finish)(Outer&);
  void (*finish_v)(Outer&, Keys&);
  std::string_view absent;        ///< JSON of the vision_config built when the key is absent
};

// Llava/LlavaNext default to CLIP ViT-L/14-336, PaliGemma to SigLIP so400m/14 at 224, Mistral3
// to Pixtral at 1540/14 (their configuration_<type>.py); the others to their vision class.
constexpr std::string_view kClipL336 =
    R"({"model_type":"clip_vision_model","hidden_size":1024,"intermediate_size":4096,"num_hidden_layers":24,"num_attention_heads":16,"image_size":336,"patch_size":14})";

constexpr OuterRow kOuters[] = {
    {"llava", "models/llava/modeling_llava.py", "clip_vision_model", true, llava, nullptr, kClipL336},
    {"llava_next", "models/llava_next/modeling_llava_next.py", "clip_vision_model", true, llava_next, nullptr, kClipL336},
    {"qwen2_vl", "models/qwen2_vl/modeling_qwen2_vl.py", "qwen2_vl", false, qwen_vl, nullptr, "{}"},
    {"qwen2_5_vl", "models/qwen2_5_vl/modeling_qwen2_5_vl.py", "qwen2_5_vl", false, qwen_vl, nullptr, "{}"},
    {"qwen3_vl", "models/qwen3_vl/modeling_qwen3_vl.py", "qwen3_vl", false, qwen_vl, nullptr, "{}"},
    // Qwen3_5Model / Qwen3_5MoeModel build their own tower whatever vision_config.model_type says (old
    // checkpoints write "qwen3_5" or "qwen3_5_moe" there; Qwen3_5Config.__post_init__ renames it).
    {"qwen3_5", "models/qwen3_5/modeling_qwen3_5.py", "qwen3_5_vision", false, qwen_vl, nullptr, "{}"},
    {"qwen3_5_moe", "models/qwen3_5_moe/modeling_qwen3_5_moe.py", "qwen3_5_vision", false, qwen_vl, nullptr, "{}"},
    {"gemma3", "models/gemma3/modeling_gemma3.py", "siglip_vision_model", false, gemma3, nullptr, "{}"},
    {"paligemma", "models/paligemma/modeling_paligemma.py", "siglip_vision_model", false, paligemma, nullptr,
     R"({"hidden_size":1152,"intermediate_size":4096,"num_hidden_layers":27,"num_attention_heads":16,"patch_size":14,"image_size":224,"vision_use_head":false})"},
    {"idefics3", "models/idefics3/modeling_idefics3.py", "idefics3_vision", false, idefics3, nullptr, "{}"},
    {"internvl", "models/internvl/modeling_internvl.py", "internvl_vision", false, internvl, nullptr, "{}"},
    {"mistral3", "models/mistral3/modeling_mistral3.py", "pixtral", false, mistral3, nullptr,
     R"({"image_size":1540,"patch_size":14})"},
    {"mllama", "models/mllama/modeling_mllama.py", "mllama_vision_model", false, nullptr, mllama, "{}"},
    {"llama4", "models/llama4/modeling_llama4.py", "llama4_vision_model", false, nullptr, llama4, "{}"},
};

const TowerRow* find_tower(std::string_view type) {
  for (const TowerRow& r : kTowers)
    if (r.vision_type == type) return &r;
  return nullptr;
}

std::string known_outer_types() {
  std::vector<std::string> names;
  for (const OuterRow& r : kOuters) names.emplace_back(r.model_type);
  return joined(names);
}

std::string known_tower_types() {
  std::vector<std::string> names;
  for (const TowerRow& r : kTowers) names.emplace_back(r.vision_type);
  return joined(names);
}

}  // namespace

std::optional<VisionSpec> vision_from_config(const json& config, std::string_view origin, std::uint64_t text_hidden) {
  if (!config.is_object()) return std::nullopt;
  const auto vit = config.find("vision_config");
  const std::string org(origin);
  const auto mt_it = config.find("model_type");
  const std::string model_type = mt_it != config.end() && mt_it->is_string() ? mt_it->get<std::string>() : "";
  const OuterRow* row = nullptr;
  for (const OuterRow& r : kOuters)
    if (r.model_type == model_type) row = &r;
  if (vit == config.end() || vit->is_null()) {
    if (row == nullptr) return std::nullopt;
  } else if (!vit->is_object()) {
    throw InputError(org + ": vision_config", fmt::format("expected a JSON object, got {}", json_excerpt(*vit)),
                     "pass the model's config.json as published on the Hugging Face Hub");
  }
  if (row == nullptr)
    throw InputError(org + ": vision_config",
                     fmt::format("model_type '{}' has a vision tower vramfit does not know, so its size cannot be "
                                 "counted",
                                 model_type.empty() ? std::string("(none)") : model_type),
                     fmt::format("vision-language types known: {}; or estimate the language model alone by "
                                 "passing its text_config as the config",
                                 known_outer_types()));

  const json absent = json::parse(row->absent);
  const json& vision = (vit == config.end() || vit->is_null()) ? absent : *vit;
  Diagnostics diags;
  Keys top(config, org + ": ", diags);
  Keys v(vision, org + ": vision_config.", diags);

  std::string tower_type(row->default_tower);
  if (row->any_tower) tower_type = v.str("model_type", tower_type);
  const TowerRow* tower = find_tower(tower_type);
  if (tower == nullptr)
    throw InputError(org + ": vision_config.model_type",
                     fmt::format("vision tower '{}' is not known to vramfit, so its size cannot be counted", tower_type),
                     fmt::format("vision towers known: {}", known_tower_types()));

  VisionSpec s;
  s.model_type = model_type;
  s.tower = std::string(tower->tower);
  s.source = std::string(row->source);
  tower->count(v, s);
  diags.throw_if_any();
  Outer o{top, text_hidden, s};
  if (row->finish != nullptr) row->finish(o);
  if (row->finish_v != nullptr) row->finish_v(o, v);
  diags.throw_if_any();
  return s;
}

// --- images ------------------------------------------------------------------------------------

namespace {

ImageLoad tiled_load(const VisionSpec& v, std::uint64_t width, std::uint64_t height);

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

/// Qwen2-VL's smart_resize (models/qwen2_vl/image_processing_qwen2_vl.py): both sides rounded
/// to a multiple of `factor` (Python's round, half to even), then scaled down (floor) or up
/// (ceil) to keep the pixels between min_pixels and max_pixels.
std::pair<std::uint64_t, std::uint64_t> smart_resize(std::uint64_t h, std::uint64_t w, std::uint64_t factor,
                                                     std::uint64_t min_pixels, std::uint64_t max_pixels) {
  const double f = static_cast<double>(factor);
  const double hd = static_cast<double>(h), wd = static_cast<double>(w);
  auto hb = static_cast<std::uint64_t>(std::max(f, std::nearbyint(hd / f) * f));
  auto wb = static_cast<std::uint64_t>(std::max(f, std::nearbyint(wd / f) * f));
  if (static_cast<double>(hb) * static_cast<double>(wb) > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(hd * wd / static_cast<double>(max_pixels));
    hb = static_cast<std::uint64_t>(std::max(f, std::floor(hd / beta / f) * f));
    wb = static_cast<std::uint64_t>(std::max(f, std::floor(wd / beta / f) * f));
  } else if (static_cast<double>(hb) * static_cast<double>(wb) < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (hd * wd));
    hb = static_cast<std::uint64_t>(std::ceil(hd * beta / f) * f);
    wb = static_cast<std::uint64_t>(std::ceil(wd * beta / f) * f);
  }
  return {hb, wb};
}

}  // namespace

std::pair<std::uint64_t, std::uint64_t> native_image_size(const VisionSpec& v) {
  if (v.image_size == 0) return {1024, 1024};
  return {v.image_size, v.image_size};
}

bool takes_any_size(const VisionSpec& v) { return v.tokens != ImageTokens::fixed; }

ImageLoad image_load(const VisionSpec& v, std::uint64_t width, std::uint64_t height) {
  ImageLoad l;
  const std::uint64_t side = v.patch == 0 ? 0 : v.image_size / v.patch;
  const std::uint64_t cls = v.cls_token ? 1 : 0;
  switch (v.tokens) {
    case ImageTokens::fixed:
      // Resized to the tower's image_size whatever it was.
      l.width = l.height = v.image_size;
      l.sequences = 1;
      l.sequence_len = side * side + cls;
      l.prompt_tokens = v.tokens_per_image + v.markers;
      return l;
    case ImageTokens::grid: {
      if (v.min_pixels > 0) {  // Qwen2-VL family
        const auto [h, w] = smart_resize(height, width, v.patch * v.merge, v.min_pixels, v.max_pixels);
        l.height = h, l.width = w;
        l.sequences = 1;
        l.sequence_len = (h / v.patch) * (w / v.patch);
        // <|vision_start|> image pads <|vision_end|> (the chat template's markers).
        l.prompt_tokens = l.sequence_len / (v.merge * v.merge) + 2;
        return l;
      }
      // Pixtral (models/pixtral/image_processing_pixtral.py): scaled down (floor) so the
      // longest side is at most image_size, then up to whole patches; the prompt has one
      // token per merge x merge patches, an [IMG_BREAK] per row and [IMG_END].
      std::uint64_t h = height, w = width;
      const double ratio = std::max(static_cast<double>(h), static_cast<double>(w)) / static_cast<double>(v.image_size);
      if (ratio > 1) {
        h = static_cast<std::uint64_t>(std::floor(static_cast<double>(h) / ratio));
        w = static_cast<std::uint64_t>(std::floor(static_cast<double>(w) / ratio));
      }
      h = ceil_div(std::max<std::uint64_t>(h, 1), v.patch) * v.patch;
      w = ceil_div(std::max<std::uint64_t>(w, 1), v.patch) * v.patch;
      l.height = h, l.width = w;
      l.sequences = 1;
      l.sequence_len = (h / v.patch) * (w / v.patch);
      const std::uint64_t rows = h / (v.patch * v.merge), cols = w / (v.patch * v.merge);
      l.prompt_tokens = rows * (cols + 1);
      return l;
    }
    case ImageTokens::tiles:
      return tiled_load(v, width, height);
    case ImageTokens::cross: {
      // MllamaImageProcessor pads to max_image_tiles tiles, all of which go through the tower,
      // each padded to a multiple of 8 tokens (MllamaVisionModel); one <|image|> in the prompt.
      l.width = l.height = v.image_size;
      l.sequences = v.max_tiles;
      l.sequence_len = side * side + cls;
      l.sequence_len += (8 - l.sequence_len % 8) % 8;
      l.prompt_tokens = 1;
      return l;
    }
  }
  return l;
}

ImageWork image_work(const VisionSpec& v, std::uint64_t images, std::uint64_t width, std::uint64_t height) {
  if (width == 0 || height == 0) std::tie(width, height) = native_image_size(v);
  ImageWork work;
  work.per_image = image_load(v, width, height);
  work.images = images;
  work.prompt_tokens = checked_mul(images, work.per_image.prompt_tokens, "--images");
  return work;
}

namespace {

// Tiled processors: each tile is a sequence of the tower, plus a downscaled global image.
ImageLoad tiled_load(const VisionSpec& v, std::uint64_t width, std::uint64_t height) {
  ImageLoad l;
  const std::uint64_t T = v.image_size;
  const std::uint64_t side = v.patch == 0 ? 0 : T / v.patch;
  const std::uint64_t seq = side * side + (v.cls_token ? 1 : 0);
  const std::uint64_t per_tile = v.tokens_per_image;
  std::uint64_t rows = 1, cols = 1;
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  if (v.model_type == "idefics3") {
    // Idefics3ImageProcessor: longest side resized to 4 tiles, each side up to whole tiles;
    // Idefics3Processor._prompt_split_image: <fake><row_i_col_j> + tokens per tile, a newline
    // per row, then "\n<fake><global-img>" + tokens + <fake>.
    const double longest = 4.0 * static_cast<double>(T);
    const double scale = longest / std::max(h, w);
    const auto rh = static_cast<std::uint64_t>(height >= width ? longest : std::floor(h * scale));
    const auto rw = static_cast<std::uint64_t>(width >= height ? longest : std::floor(w * scale));
    rows = ceil_div(std::max<std::uint64_t>(rh, 1), T), cols = ceil_div(std::max<std::uint64_t>(rw, 1), T);
    const std::uint64_t n = rows * cols;
    l.sequences = n > 1 ? n + 1 : 1;
    l.prompt_tokens = n > 1 ? n * (per_tile + 2) + rows + 1 + per_tile + 3 : per_tile + 3;
  } else if (v.model_type == "internvl") {
    // GotOcr2ImageProcessor crop_to_patches (InternVL's processor): the grid of at most
    // max_tiles tiles whose aspect ratio is closest (ties: the larger grid when the image has
    // more than half its pixels), plus a thumbnail; <img> + tokens per tile + </img>.
    const double aspect = w / h;
    double best_diff = 1e300;
    std::uint64_t bi = 1, bj = 1;
    for (std::uint64_t n = 1; n <= v.max_tiles; ++n)  // sorted by area as the processor does
      for (std::uint64_t i = 1; i <= n; ++i) {
        if (n % i != 0) continue;
        const std::uint64_t j = n / i;
        const double diff = std::abs(aspect - static_cast<double>(i) / static_cast<double>(j));
        if (diff < best_diff) {
          best_diff = diff, bi = i, bj = j;
        } else if (diff == best_diff && h * w > 0.5 * static_cast<double>(T * T * i * j)) {
          bi = i, bj = j;
        }
      }
    cols = bi, rows = bj;
    const std::uint64_t n = rows * cols;
    l.sequences = n > 1 ? n + 1 : 1;
    l.prompt_tokens = l.sequences * per_tile + 2;
  } else if (v.model_type == "llama4") {
    // Llama4ImageProcessor get_best_fit: of the canvases of r x c tiles (r*c <= max_tiles),
    // the smallest upscale, else the largest downscale, then the smallest canvas; a global
    // tile when there are several. Llama4Processor: <|image_start|>, per tile its tokens and
    // a separator, <|image|>, the global tile's tokens, <|image_end|>.
    double chosen = -1;
    bool up = false;
    for (std::uint64_t r = 1; r <= v.max_tiles; ++r)
      for (std::uint64_t c = 1; r * c <= v.max_tiles; ++c) {
        const double s = std::min(static_cast<double>(r * T) / h, static_cast<double>(c * T) / w);
        if (s >= 1 && (!up || s < chosen)) chosen = s, up = true;
        else if (!up && s > chosen) chosen = s;
      }
    std::uint64_t area = ~0ULL;
    for (std::uint64_t r = 1; r <= v.max_tiles; ++r)
      for (std::uint64_t c = 1; r * c <= v.max_tiles; ++c) {
        const double s = std::min(static_cast<double>(r * T) / h, static_cast<double>(c * T) / w);
        if (s == chosen && r * c < area) area = r * c, rows = r, cols = c;
      }
    const std::uint64_t n = rows * cols;
    l.sequences = n > 1 ? n + 1 : 1;
    l.prompt_tokens = 3 + per_tile + (n > 1 ? n * per_tile + rows * cols : 0);
  } else {
    // LlavaNext (anyres): the pinpoint keeping the most of the image's pixels (ties: the least
    // padding), cut into tiles, plus the base image; LlavaNextProcessor._get_number_of_features:
    // the unpadded features of the grid, a newline per row, and the base image's patches.
    std::uint64_t best_h = T, best_w = T;
    double best_eff = -1, best_waste = 1e300;
    for (const auto& [ph, pw] : v.pinpoints) {
      const double scale = std::min(static_cast<double>(pw) / w, static_cast<double>(ph) / h);
      const double dw = std::floor(w * scale), dh = std::floor(h * scale);
      const double eff = std::min(dw * dh, w * h);
      const double waste = static_cast<double>(ph * pw) - eff;
      if (eff > best_eff || (eff == best_eff && waste < best_waste)) best_eff = eff, best_waste = waste, best_h = ph, best_w = pw;
    }
    rows = best_h / T, cols = best_w / T;
    l.sequences = rows * cols + 1;
    double cur_h = static_cast<double>(side * rows), cur_w = static_cast<double>(side * cols);
    if (w / h > cur_w / cur_h) {
      const double new_h = std::floor(h * (cur_w / w) + 1e-7);
      cur_h -= 2 * std::floor((cur_h - new_h) / 2);
    } else {
      const double new_w = std::floor(w * (cur_h / h) + 1e-7);
      cur_w -= 2 * std::floor((cur_w - new_w) / 2);
    }
    l.prompt_tokens = static_cast<std::uint64_t>(cur_h * cur_w + cur_h) + per_tile;
  }
  l.sequence_len = seq;
  l.width = cols * T, l.height = rows * T;
  return l;
}

}  // namespace

}  // namespace vramfit::spec
