// Tests of vision_from_config: the vision tower and projector of every vision-language type,
// exact against transformers 5.17 (tests/unit/spec/data/vision.json: models built on the
// meta device by data/vision_count.py, made into the fixture by data/vision_fixture.py).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/vision.hpp"

using namespace vramfit;
using namespace vramfit::spec;
using nlohmann::json;

namespace {

json fixture() {
  std::ifstream f(std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/vision.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::uint64_t text_hidden(const json& config) {
  const json& t = config.contains("text_config") ? config["text_config"] : config;
  return t.value("hidden_size", std::uint64_t{0});
}

std::string error_of(const json& config) {
  try {
    (void)vision_from_config(config, "config.json", 4096);
  } catch (const InputError& e) {
    return e.diagnostics().at(0).field + ": " + e.diagnostics().at(0).problem;
  }
  return {};
}

}  // namespace

TEST_CASE("vision: every tower and projector is exact against transformers 5.17", "[spec][vision]") {
  const json f = fixture();
  REQUIRE(f["cases"].size() == 24);
  for (const json& c : f["cases"]) {
    const std::string name = c["name"].get<std::string>();
    INFO(name);
    const auto v = vision_from_config(c["config"], name, text_hidden(c["config"]));
    REQUIRE(v.has_value());
    CHECK(v->tower_params == c["vision_tower"].get<std::uint64_t>());
    CHECK(v->projector_params == c["projector"].get<std::uint64_t>());
    CHECK(v->buffer_bytes == c["vision_buffer_bytes"].get<std::uint64_t>());
  }
}

TEST_CASE("vision: a config.json's vision_config leaves keys to the class defaults", "[spec][vision]") {
  const json f = fixture();
  const auto find = [&](const std::string& name) {
    for (const json& c : f["cases"])
      if (c["name"] == name) return c;
    FAIL(name);
    return json();
  };
  // Qwen2-VL-7B-Instruct's config.json: text keys at the top, a partial vision_config.
  const json qwen = json::parse(R"({"model_type":"qwen2_vl","hidden_size":3584,
      "vision_config":{"depth":32,"embed_dim":1280,"mlp_ratio":4,"num_heads":16,"in_chans":3,
                       "hidden_size":3584,"patch_size":14,"spatial_merge_size":2,"spatial_patch_size":14,
                       "temporal_patch_size":2}})");
  const auto q = vision_from_config(qwen, "config.json", 3584);
  REQUIRE(q);
  CHECK(q->params() == find("qwen2_vl")["vision_tower"].get<std::uint64_t>() + find("qwen2_vl")["projector"].get<std::uint64_t>());
  CHECK(q->params() == 675759104);  // model.visual, measured
  CHECK(q->tower == "qwen2_vl");
  CHECK(q->tokens == ImageTokens::grid);

  // Without a vision_config, LlavaConfig builds CLIP ViT-L/14-336: 303,507,456 + 20,979,712.
  const auto l = vision_from_config(json::parse(R"({"model_type":"llava"})"), "config.json", 4096);
  REQUIRE(l);
  CHECK(l->tower_params == 303507456);
  CHECK(l->projector_params == 20979712);
  CHECK(l->tokens_per_image == 576);

  // A text-only config has no vision part.
  CHECK_FALSE(vision_from_config(json::parse(R"({"model_type":"llama","hidden_size":8})"), "config.json", 8));
}

TEST_CASE("vision: a whole vision-language config counts the tower in its parameters", "[spec][vision]") {
  const json f = fixture();
  for (const json& c : f["cases"]) {
    const std::string name = c["name"].get<std::string>();
    INFO(name);
    // mllama's language model (cross-attention layers) has no layout yet (#16 arch): refused
    // naming the text model_type, never counted as a Llama-like decoder. llama4's (llama4_text)
    // is counted whole below, as transformers 5.17 builds Llama4ForConditionalGeneration.
    const std::string text_type = c["config"]["text_config"].value("model_type", "");
    if (text_type == "mllama_text_model") {
      std::string problem;
      try {
        (void)from_config(c["config"], name);
      } catch (const InputError& e) {
        problem = e.diagnostics().at(0).problem;
      }
      CHECK(problem.find("model_type '" + text_type + "' is not one vramfit knows") != std::string::npos);
      continue;
    }
    const ModelSpec m = from_config(c["config"], name);
    REQUIRE(m.vision);
    CHECK(m.params == count_params(m));
    CHECK(m.params == c["total"].get<std::uint64_t>());  // the whole model, as transformers builds it
    CHECK(m.vision->params() == c["vision_tower"].get<std::uint64_t>() + c["projector"].get<std::uint64_t>());
  }
}

TEST_CASE("vision: unknown vision structures exit 2 naming the key", "[spec][vision]") {
  CHECK(error_of(json::parse(R"({"model_type":"blip_2","vision_config":{"hidden_size":1408}})")) ==
        "config.json: vision_config: model_type 'blip_2' has a vision tower vramfit does not know, so its size "
        "cannot be counted");
  CHECK(error_of(json::parse(R"({"model_type":"llava","vision_config":{"model_type":"dinov2"}})")) ==
        "config.json: vision_config.model_type: vision tower 'dinov2' is not known to vramfit, so its size cannot "
        "be counted");
  CHECK(error_of(json::parse(R"({"model_type":"llava","vision_config":[1]})")) ==
        "config.json: vision_config: expected a JSON object, got [1]");
  CHECK(error_of(json::parse(R"({"model_type":"gemma3","vision_config":{"hidden_size":-4}})")) ==
        "config.json: vision_config.hidden_size: expected a positive integer, got -4");
  CHECK(error_of(json::parse(R"({"model_type":"gemma3","vision_config":{"patch_size":900}})")) ==
        "config.json: vision_config.patch_size: 900 is larger than image_size 224");
  CHECK(error_of(json::parse(R"({"model_type":"internvl","downsample_ratio":0.3})")) ==
        "config.json: downsample_ratio: expected 1/N (0.5, 0.25), got 0.3");
}
