// --images N and --image-size WxH on vision-language configs (issue #16 item 3).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::estimate;
using vramfit::test::require_usage_error;
using vramfit::test::TempDir;
using json = nlohmann::json;

namespace {

/// The config.json of one case of tests/unit/spec/data/vision.json, written to `dir`.
std::string vlm_config(const TempDir& dir, const std::string& name) {
  std::ifstream f(std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/vision.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const json all = json::parse(ss.str());
  for (const json& c : all["cases"])
    if (c["name"] == name) return dir.write(name + ".json", c["config"].dump());
  FAIL("no fixture " << name);
  return {};
}

json ok_json(const CliResult& r) {
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("images: the image tokens join the prompt, the tower is a phase of its own", "[cli][images]") {
  const TempDir dir;
  const std::string cfg = vlm_config(dir, "qwen2_vl-small");
  const json j = ok_json(estimate({"--config", cfg, "--seq", "64", "--images", "2", "--image-size", "448x448", "--json"}));
  CHECK(j["workload"]["images"] == 2);
  CHECK(j["workload"]["image_size"] == json::array({448, 448}));
  CHECK(j["workload"]["seq"] == 64);  // the text tokens, as given
  const json& t = j["image_tokens"];
  CHECK(t["per_image"] == 258);  // 16 x 16 merged patches + <|vision_start|> + <|vision_end|>
  CHECK(t["per_sequence"] == 516);
  CHECK(t["seq"] == 580);
  CHECK(t["tower_sequences_per_image"] == 1);
  CHECK(t["tower_sequence_len"] == 1024);
  bool tower = false;
  for (const json& p : j["phases"]) tower = tower || p["id"] == "vision_tower";
  CHECK(tower);

  // The language model's phases are the text-only ones at 64 + 516 tokens: the peak is the max
  // of theirs and the tower's (here the language model's).
  const json text = ok_json(estimate({"--config", cfg, "--seq", "580", "--json"}));
  CHECK(text["image_tokens"].is_null());
  CHECK(text["workload"]["images"] == 0);
  CHECK(text["workload"]["image_size"].is_null());
  CHECK(j["peak_phase"] == text["peak_phase"]);
  CHECK(j["peak_allocated_bytes"] == text["peak_allocated_bytes"]);

  // The same through generate and training: the prompt is the longer sequence, and the peak
  // the larger of the language model's and the tower's phase (generate's prefill keeps only the
  // last position's logits, so there the tower's is the larger).
  for (const char* mode : {"generate", "train", "lora"}) {
    INFO(mode);
    const json a = ok_json(estimate({"--config", cfg, "--mode", mode, "--seq", "64", "--images", "2", "--image-size",
                                     "448", "--json"}));
    const json b = ok_json(estimate({"--config", cfg, "--mode", mode, "--seq", "580", "--json"}));
    std::uint64_t tower_phase = 0;
    for (const json& p : a["phases"])
      if (p["id"] == "vision_tower") tower_phase = p["bytes"];
    REQUIRE(tower_phase > 0);
    CHECK(a["peak_allocated_bytes"] == std::max(tower_phase, b["peak_allocated_bytes"].get<std::uint64_t>()));
  }
}

TEST_CASE("images: the tower's phase sets the peak when its activations are the larger", "[cli][images]") {
  // llava with a CLIP tower at 224 / 16 (196 tokens an image), whose hidden states of every
  // layer stay alive: the engine takes the larger of the tower's phase and the language
  // model's.
  const TempDir dir;
  const std::string cfg = vlm_config(dir, "llava-proj-multi");
  const json j = ok_json(estimate({"--config", cfg, "--seq", "8", "--images", "64", "--json"}));
  CHECK(j["image_tokens"]["per_image"] == 196);
  std::uint64_t tower = 0, other = 0;
  for (const json& p : j["phases"]) {
    const std::uint64_t b = p["bytes"];
    if (p["id"] == "vision_tower")
      tower = b;
    else
      other = std::max(other, b);
  }
  REQUIRE(tower > 0);
  CHECK(j["peak_allocated_bytes"] == std::max(tower, other));
}

TEST_CASE("images: bad --images and --image-size exit 2 naming the flag", "[cli][images]") {
  const TempDir dir;
  const std::string qwen = vlm_config(dir, "qwen2_vl-small");
  const std::string llava = vlm_config(dir, "llava");
  require_usage_error(estimate({"--config", qwen, "--images", "-1"}),
                      "vramfit: error: --images: -1 is negative (give a positive whole number, e.g. --images 4)\n");
  require_usage_error(estimate({"--config", qwen, "--images", "4097"}),
                      "vramfit: error: --images: 4097 images per sequence is more than vramfit models (at most 4096) "
                      "(give the images of one sequence (one prompt), e.g. --images 4)\n");
  require_usage_error(estimate({"--config", qwen, "--images", "two"}),
                      "vramfit: error: --images: 'two' is not a whole number (give a positive whole number, e.g. "
                      "--images 4)\n");
  require_usage_error(estimate({"--config", llava, "--images", "1", "--image-size", "672x672"}),
                      "vramfit: error: --image-size: llava resizes every image to 336x336, so the size does not change "
                      "its tokens (drop --image-size)\n");
  require_usage_error(estimate({"--config", qwen, "--image-size", "448"}),
                      "vramfit: error: --image-size: no images to size (add --images N (images per sequence), or drop "
                      "--image-size)\n");
  require_usage_error(estimate({"--config", qwen, "--images", "1", "--image-size", "448x0"}),
                      "vramfit: error: --image-size: '448x0' is not WIDTHxHEIGHT in pixels (give e.g. --image-size "
                      "1024x768, or --image-size 448 for 448x448)\n");
  require_usage_error(estimate({"--config", qwen, "--images", "1", "--image-size", "70000x448"}),
                      "vramfit: error: --image-size: 70000x448 is not a size vramfit models (1 to 65536 pixels a side) "
                      "(give WIDTHxHEIGHT in pixels, e.g. --image-size 1024x768)\n");
  require_usage_error(estimate({"--config", qwen, "--images", "1", "--image-size", "20000x28"}),
                      "vramfit: error: --image-size: 20000x28: the Qwen-VL processor refuses an aspect ratio above 200 "
                      "(give a less elongated size)\n");
  require_usage_error(estimate({"--model", "smollm2-135m", "--images", "1"}),
                      "vramfit: error: --images: smollm2-135m has no vision tower (its config has no vision_config), so "
                      "it takes no images (drop --images, or give a vision-language model (llava, llava_next, qwen2_vl, "
                      "qwen2_5_vl, qwen3_vl, qwen3_5, qwen3_5_moe, gemma3, paligemma, idefics3, internvl, mistral3, llama4))\n");
  // The text report's heading says the images.
  const CliResult text = estimate({"--config", qwen, "--images", "2", "--image-size", "448x448"});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("2 images of 448x448 per sequence") != std::string::npos);
  CHECK(text.out.find("258 tokens each joined the prompt") != std::string::npos);
  // 0 images is text only, as without the flag.
  const json zero = ok_json(estimate({"--config", qwen, "--images", "0", "--json"}));
  CHECK(zero["image_tokens"].is_null());
}

TEST_CASE("images: fit --solve seq solves the text tokens, the position note counts the images", "[cli][images]") {
  const TempDir dir;
  const std::string cfg = vlm_config(dir, "qwen2_vl-small");
  const CliResult r = vramfit::test::run_cli({"fit", "--data-dir", vramfit::test::fixture_dir(), "--config", cfg,
                                              "--images", "4", "--image-size", "1036", "--budget", "24GiB", "--solve",
                                              "seq", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const std::uint64_t value = j["value"];
  bool noted = false;
  for (const json& n : j["notes"]) {
    const std::string s = n;
    // 4 x (1369 + 2) image tokens beside the text tokens solved.
    if (s.find("max_position_embeddings") != std::string::npos)
      noted = s.rfind(std::to_string(value + 4 * 1371) + " tokens exceed", 0) == 0;
  }
  CHECK(noted);
}
