// Tests of image_load / image_work: the tokens an image adds to the prompt and its sequences
// through the vision tower, per processor (transformers 5.17), on the configs of
// tests/unit/spec/data/vision.json. The expected counts are worked out by hand from the
// processors' formulas (each case says which), not read back from vramfit.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/vision.hpp"
#include "vramfit/spec/workload.hpp"

using namespace vramfit;
using namespace vramfit::spec;
using nlohmann::json;

namespace {

VisionSpec vision(const std::string& name) {
  std::ifstream f(std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/vision.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const json all = json::parse(ss.str());
  for (const json& c : all["cases"])
    if (c["name"] == name) {
      const json& cfg = c["config"];
      const json& t = cfg.contains("text_config") ? cfg["text_config"] : cfg;
      return *vision_from_config(cfg, name, t.value("hidden_size", std::uint64_t{0}));
    }
  FAIL("no fixture " << name);
  return {};
}

}  // namespace

TEST_CASE("images: Qwen2-VL smart_resize, 14px patches merged 2x2", "[spec][vision][images]") {
  // image_processing_qwen2_vl.py smart_resize(factor 28, min_pixels 3136, max_pixels 12845056):
  // sides rounded to multiples of 28, scaled into the pixel bounds; one token per 2x2 patches,
  // plus <|vision_start|> and <|vision_end|>.
  const VisionSpec v = vision("qwen2_vl");
  REQUIRE(takes_any_size(v));
  struct Case { std::uint64_t w, h, rw, rh, patches, tokens; };
  const Case cases[] = {
      {448, 448, 448, 448, 1024, 256},          // 16 x 16 tokens
      {1036, 1036, 1036, 1036, 5476, 1369},     // 37 x 37
      {1000, 500, 1008, 504, 2592, 648},        // round(35.7) = 36, round(17.9) = 18 multiples of 28
      {8000, 8000, 3584, 3584, 65536, 16384},   // above max_pixels: scaled down to 128 x 28 a side
      {20, 20, 56, 56, 16, 4},                  // below min_pixels: scaled up to 56 x 56
      {1920, 1080, 1932, 1092, 10764, 2691},    // 69 x 39 multiples of 28
  };
  for (const Case& c : cases) {
    INFO(c.w << "x" << c.h);
    const ImageLoad l = image_load(v, c.w, c.h);
    CHECK(l.width == c.rw);
    CHECK(l.height == c.rh);
    CHECK(l.sequences == 1);
    CHECK(l.sequence_len == c.patches);
    CHECK(l.prompt_tokens == c.tokens + 2);
  }
  // No size given: 1024 x 1024 (Qwen-VL's towers have no native size): round(36.6) = 37 -> 1036.
  const ImageWork iw = image_work(v, 3, 0, 0);
  CHECK(iw.per_image.width == 1036);
  CHECK(iw.prompt_tokens == 3 * (1369 + 2));
}

TEST_CASE("images: fixed-size towers", "[spec][vision][images]") {
  // LlavaProcessor: (336 / 14)^2 = 576 patches, the CLS token dropped (strategy "default");
  // the CLIP tower sees 577 tokens. Any image is resized to 336 x 336.
  const VisionSpec llava = vision("llava");
  CHECK_FALSE(takes_any_size(llava));
  ImageLoad l = image_load(llava, 336, 336);
  CHECK(l.prompt_tokens == 576);
  CHECK(l.sequence_len == 577);
  CHECK(l.sequences == 1);
  CHECK(image_work(llava, 4, 0, 0).prompt_tokens == 4 * 576);
  // Gemma3Processor: <start_of_image> + mm_tokens_per_image (256) + <end_of_image>; the SigLIP
  // tower sees (224 / 16)^2 = 196 patches (this fixture's vision_config).
  const VisionSpec gemma = vision("gemma3");
  CHECK_FALSE(takes_any_size(gemma));
  l = image_load(gemma, 224, 224);
  CHECK(l.prompt_tokens == 258);
  CHECK(l.sequence_len == 196);
  // PaliGemmaProcessor: image_seq_length = (224 / 14)^2 = 256 tokens, no markers.
  const VisionSpec pali = vision("paligemma");
  l = image_load(pali, 224, 224);
  CHECK(l.prompt_tokens == 256);
  CHECK(l.sequence_len == 256);
}

TEST_CASE("images: llava_next anyres pinpoints, newline per row", "[spec][vision][images]") {
  // LlavaNextProcessor._get_number_of_features: the best pinpoint of [[336,672],[672,336],
  // [672,672],[1008,336],[336,1008]] (h, w); unpadded features of the grid + one newline per
  // row + the base image's 576.
  const VisionSpec v = vision("llava_next");
  REQUIRE(takes_any_size(v));
  // 672 x 672: the 2 x 2 grid, 48 x 48 features, 48 newlines: 2304 + 48 + 576.
  ImageLoad l = image_load(v, 672, 672);
  CHECK(l.prompt_tokens == 2928);
  CHECK(l.sequences == 5);
  CHECK(l.sequence_len == 577);
  // 1000 x 500 (w x h): select_best_resolution keeps 672 x 336 pixels with pinpoints 336x672,
  // 672x672 and 336x1008; 336x672 wastes none: a 1 x 2 grid, 24 x 48 features, the aspect
  // (2.0) equal so the width is unpadded to round(1000 x 24 / 500) = 48: 1152 + 24 newlines + 576.
  l = image_load(v, 1000, 500);
  CHECK(l.sequences == 3);
  CHECK(l.prompt_tokens == 1152 + 24 + 576);
}

TEST_CASE("images: pixtral grid with break tokens (mistral3)", "[spec][vision][images]") {
  // PixtralImageProcessor: longest side at most 1540, sides up to multiples of 14 (ceil);
  // PixtralProcessor: per row of 2x2-merged patches the tokens and an [IMG_BREAK], the last one
  // [IMG_END]. 1024 x 768 -> 1036 x 770: 74 x 55 patches, 37 x 27 tokens, 27 x (37 + 1).
  const VisionSpec v = vision("mistral3");
  REQUIRE(takes_any_size(v));
  const ImageLoad l = image_load(v, 1024, 768);
  CHECK(l.width == 1036);
  CHECK(l.height == 770);
  CHECK(l.sequence_len == 74 * 55);
  CHECK(l.prompt_tokens == 27 * 38);
}

TEST_CASE("images: idefics3 tiles", "[spec][vision][images]") {
  // Idefics3ImageProcessor: longest side to 4 x 512, cut into 512 tiles (4 x 4) plus the global
  // image; per tile (512 / 16 / 4)^2 = 64 tokens. Idefics3Processor: per tile <fake><row_r_col_c>
  // + 64, a newline per row, then \n <fake><global-img> + 64 + <fake>: 16 x 66 + 4 + 68.
  const VisionSpec v = vision("idefics3-smol");
  const ImageLoad l = image_load(v, 1024, 1024);
  CHECK(l.sequences == 17);
  CHECK(l.sequence_len == 1024);
  CHECK(l.prompt_tokens == 16 * 66 + 4 + 68);
}

TEST_CASE("images: internvl tiles of the closest aspect ratio, with a thumbnail", "[spec][vision][images]") {
  // GotOcr2ImageProcessor.crop_to_patches (max 12 tiles of 448): the grid whose cols / rows is
  // closest to width / height, a larger grid of the same ratio only for an image of more than
  // half its pixels; a thumbnail when there are several. InternVLProcessor: <img> + 256 tokens
  // per tile ((448 / 14 / 2)^2) + </img>.
  const VisionSpec v = vision("internvl");
  REQUIRE(takes_any_size(v));
  ImageLoad l = image_load(v, 448, 448);  // 1 x 1 (2 x 2 would need more than 401408 pixels)
  CHECK(l.sequences == 1);
  CHECK(l.sequence_len == 1025);  // 32 x 32 patches + CLS
  CHECK(l.prompt_tokens == 256 + 2);
  l = image_load(v, 896, 448);  // 2 x 1 + thumbnail
  CHECK(l.sequences == 3);
  CHECK(l.prompt_tokens == 3 * 256 + 2);
}

TEST_CASE("images: llama4 canvases of up to 16 tiles", "[spec][vision][images]") {
  // Llama4ImageProcessor get_best_fit: the smallest upscale (else the largest downscale) of the
  // canvases r x c of 448 tiles, then the smallest area; a global tile when there are several.
  // Llama4Processor: <|image_start|>, per tile 256 tokens ((448 / 14)^2 x 0.5^2 after the pixel
  // shuffle) and a separator, <|image|>, the global tile's 256, <|image_end|>.
  const VisionSpec v = vision("llama4");
  REQUIRE(takes_any_size(v));
  ImageLoad l = image_load(v, 448, 448);  // one tile, no global tile, no separators
  CHECK(l.sequences == 1);
  CHECK(l.prompt_tokens == 3 + 256);
  l = image_load(v, 896, 448);  // 1 x 2 at scale 1, + the global tile
  CHECK(l.sequences == 3);
  CHECK(l.prompt_tokens == 3 + 256 + 2 * 256 + 2);
}

TEST_CASE("images: --images is checked against the model", "[spec][vision][images]") {
  // spec::validate: a text model, a cross-attention model (mllama) and sizes on fixed-size
  // towers are refused naming the flag.
  ModelSpec m;
  m.name = "m";
  m.num_layers = 1;
  m.num_heads = 1;
  m.hidden_size = 64;
  Workload w;
  w.images = 1;
  Diagnostics d;
  validate(w, m, d);
  REQUIRE_FALSE(d.empty());
  CHECK(d.items().front().field == "--images");
  m.vision = vision("mllama-small");
  Diagnostics d2;
  validate(w, m, d2);
  REQUIRE_FALSE(d2.empty());
  CHECK(d2.items().front().field == "--images");
  CHECK(d2.items().front().problem ==
        "mllama reads images through cross-attention layers, whose image states vramfit does not model");
}

TEST_CASE("images: the doctor's candidate sizes cover the image tokens", "[spec][vision][images]") {
  // engine::single_requests (what `explain` matches an OOM's size against): the logits of the
  // whole sequence, text and image tokens.
  std::ifstream f(std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/vision/configs/qwen2_vl-small.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const ModelSpec m = from_config_text(ss.str(), "qwen2_vl-small.json");
  Workload img;
  img.seq = 64;
  img.images = 1;
  img.image_width = img.image_height = 448;
  Workload text;
  text.seq = 64 + 258;
  const auto a = engine::single_requests(m, img);
  const auto b = engine::single_requests(m, text);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].size == b[i].size);
  }
}
