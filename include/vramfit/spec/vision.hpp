#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace vramfit::spec {

/// How a vision-language model turns one image into tokens of the language model's prompt
/// (what its processor in transformers does).
enum class ImageTokens {
  fixed,  ///< the same count whatever the image's size (llava, gemma3, paligemma)
  grid,   ///< any size: resized to a multiple of patch x merge, one token per merged patch (qwen2_vl ...)
  tiles,  ///< cut into tiles of image_size, a fixed count per tile (idefics3, internvl, llava_next, llama4)
  cross,  ///< none in the prompt: the language model cross-attends to the tower's states (mllama)
};

/// The vision tower and multimodal projector of a vision-language config, counted exactly as
/// transformers 5.17 builds them (the vision module, e.g. `model.vision_tower` or
/// `model.visual`, plus the projector or connector that maps its features into the language
/// model's embedding space).
struct VisionSpec {
  std::string model_type;   ///< the outer model_type ("llava", "qwen2_vl", ...)
  std::string tower;        ///< the tower's kind: "clip", "siglip", "qwen2_vl", "pixtral", ...
  std::string source;       ///< the transformers modeling file the count follows

  std::uint64_t hidden = 0;        ///< the tower's width
  std::uint64_t layers = 0;        ///< encoder layers (mllama: local + global)
  std::uint64_t heads = 0;
  std::uint64_t intermediate = 0;  ///< the tower's MLP width
  std::uint64_t patch = 0;         ///< patch side in pixels
  std::uint64_t image_size = 0;    ///< the tower's input side in pixels (a tile's for tiled models)
  std::uint64_t merge = 1;         ///< patches merged into one token per side (pixel shuffle / patch merger)

  std::uint64_t tower_params = 0;      ///< the vision encoder's parameters
  std::uint64_t projector_params = 0;  ///< projector / connector / merger (+ llava_next's image_newline)
  std::uint64_t buffer_bytes = 0;      ///< the tower's registered buffers (position ids, rotary tables)

  ImageTokens tokens = ImageTokens::fixed;
  std::uint64_t tokens_per_image = 0;  ///< fixed: per image; tiles: per tile
  std::uint64_t max_tiles = 0;         ///< tiles: the processor's default maximum
  bool cls_token = false;              ///< the tower prepends a CLS token to each sequence (CLIP, InternViT, mllama, llama4)
  std::uint64_t min_pixels = 0;        ///< grid (Qwen-VL): smart_resize's bounds (the image processor's defaults)
  std::uint64_t max_pixels = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pinpoints;  ///< llava_next: image_grid_pinpoints (h, w)
  std::uint64_t pixels_per_patch = 0;  ///< input values per patch token (channels x patch^2, x temporal_patch_size for Qwen-VL)
  std::uint64_t mlp_live = 2;          ///< tensors of the MLP's width alive at once in a tower layer (activations)
  std::uint64_t mlp_saved = 2;         ///< tensors of the MLP's width a tower layer saves for backward (training)
  bool keeps_hidden_states = false;    ///< the tower runs with output_hidden_states=True (llava: vision_feature_layer)
  std::uint64_t markers = 0;           ///< fixed: prompt tokens around each image's tokens (gemma3: boi + eoi)

  [[nodiscard]] std::uint64_t params() const;  ///< tower + projector, checked
};

/// What one image of a given size costs: the tower's sequences (tiles) of sequence_len patch
/// tokens each, and the tokens it adds to the language model's prompt (markers included).
struct ImageLoad {
  std::uint64_t width = 0, height = 0;  ///< the size the processor resizes it to
  std::uint64_t sequences = 0;          ///< sequences through the tower (tiles + a global image)
  std::uint64_t sequence_len = 0;       ///< tokens per sequence in the tower (patches + CLS)
  std::uint64_t prompt_tokens = 0;      ///< tokens the image adds to the prompt (0 for cross-attention)
};

/// The tokens one image adds to the prompt (markers included) and its sequences through the
/// tower, for `images` images per sequence.
struct ImageWork {
  ImageLoad per_image;            ///< one image
  std::uint64_t images = 0;       ///< images per sequence
  std::uint64_t prompt_tokens = 0;  ///< images x per_image.prompt_tokens: added to each sequence
};

/// True when the processor keeps the image's size or aspect (grid and tiles): --image-size
/// changes the count; fixed towers resize every image to image_size.
[[nodiscard]] bool takes_any_size(const VisionSpec& v);

/// The size used when none is given: the tower's image_size square (Qwen-VL: 1024 x 1024,
/// its towers having no native size).
[[nodiscard]] std::pair<std::uint64_t, std::uint64_t> native_image_size(const VisionSpec& v);

/// One image of width x height pixels, as transformers 5.17's processor for the type handles it.
[[nodiscard]] ImageLoad image_load(const VisionSpec& v, std::uint64_t width, std::uint64_t height);

/// `images` images of width x height per sequence (0 x 0: native_image_size).
[[nodiscard]] ImageWork image_work(const VisionSpec& v, std::uint64_t images, std::uint64_t width,
                                   std::uint64_t height);

/// The vision part of a multimodal config.json (one with `vision_config`), or nullopt when
/// the config has none. `text_hidden` is the language model's hidden size (projectors map
/// into it). Unknown multimodal types, or a vision_config this cannot count exactly, throw
/// InputError naming the key: never a silent wrong number.
std::optional<VisionSpec> vision_from_config(const nlohmann::json& config, std::string_view origin,
                                             std::uint64_t text_hidden);

}  // namespace vramfit::spec
