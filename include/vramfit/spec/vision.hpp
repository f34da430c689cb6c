#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

  [[nodiscard]] std::uint64_t params() const;  ///< tower + projector, checked
};

/// The vision part of a multimodal config.json (one with `vision_config`), or nullopt when
/// the config has none. `text_hidden` is the language model's hidden size (projectors map
/// into it). Unknown multimodal types, or a vision_config this cannot count exactly, throw
/// InputError naming the key: never a silent wrong number.
std::optional<VisionSpec> vision_from_config(const nlohmann::json& config, std::string_view origin,
                                             std::uint64_t text_hidden);

}  // namespace vramfit::spec
