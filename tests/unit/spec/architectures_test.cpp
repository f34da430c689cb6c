// Every row of the model-type table builds, and counts what transformers builds from the
// config class's defaults (tests/unit/spec/data/arch/transformers_counts.json, made on an H200
// with transformers 5.17 by tests/unit/spec/data/arch/count.py, models built on the meta device).
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/spec/architectures.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit::spec;

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::filesystem::path kSource = VRAMFIT_SOURCE_DIR;

}  // namespace

TEST_CASE("architectures: every row counts what transformers builds from its defaults", "[spec][arch]") {
  const auto counts = nlohmann::json::parse(read_text(kSource / "tests/unit/spec/data/arch/transformers_counts.json"));
  REQUIRE(counts["transformers"] == "5.17.0");
  const auto vision = nlohmann::json::parse(read_text(kSource / "tests/unit/spec/data/vision.json"));
  for (const Architecture& a : architectures()) {
    INFO(a.model_type);
    const nlohmann::json* found = nullptr;
    for (const auto& r : counts["results"])
      if (r["id"] == std::string(a.model_type) + ":default") found = &r;
    if (found == nullptr) {
      // The language models of vision-language types: counted whole against transformers in
      // vision_test.cpp (tests/unit/spec/data/vision.json, the "total" of each case).
      bool in_vision = false;
      for (const auto& c : vision["cases"])
        in_vision = in_vision || c["config"]["text_config"].value("model_type", "") == a.model_type;
      CHECK(in_vision);
      continue;
    }
    REQUIRE(found->contains("params"));
    nlohmann::json config = (*found)["config"];
    // DeepseekV2Config leaves num_experts_per_tok null (parameters do not depend on it); every
    // real config sets it (DeepSeek-V2: 6).
    if (config["num_experts_per_tok"].is_null() && config.contains("n_routed_experts")) config["num_experts_per_tok"] = 6;
    const ModelSpec s = from_config(config, "config.json");
    CHECK(s.model_type == a.model_type);
    CHECK(s.family == a.family);
    CHECK(s.scaled_logits == a.scaled_logits);  // carried from the row, never decided by name
    CHECK(s.params == (*found)["params"].get<std::uint64_t>());
    CHECK_FALSE(a.source.empty());
    CHECK(find_architecture(a.model_type) == &a);
    CHECK_FALSE(not_decoder(a.model_type));
  }
}

TEST_CASE("architectures: the README lists every supported model type", "[spec][arch]") {
  const std::string readme = read_text(kSource / "README.md");
  const auto begin = readme.find("### Model types");
  REQUIRE(begin != std::string::npos);
  const auto end = readme.find("**Refused", begin);
  REQUIRE(end != std::string::npos);
  const std::string list = readme.substr(begin, end - begin);
  for (const Architecture& a : architectures()) {
    INFO(a.model_type);
    const std::string name(a.model_type);
    // As a whole word: "gemma" must not be found only inside "gemma2".
    bool whole = false;
    for (auto at = list.find(name); at != std::string::npos && !whole; at = list.find(name, at + 1)) {
      const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
      whole = (at == 0 || !word(list[at - 1])) && (at + name.size() >= list.size() || !word(list[at + name.size()]));
    }
    CHECK(whole);
  }
}

TEST_CASE("architectures: encoders and encoder-decoders are known as such", "[spec][arch]") {
  CHECK(not_decoder("bert") == NotDecoder::encoder);
  CHECK(not_decoder("deberta-v2") == NotDecoder::encoder);
  CHECK(not_decoder("t5") == NotDecoder::encoder_decoder);
  CHECK(not_decoder("mbart") == NotDecoder::encoder_decoder);
  CHECK(not_decoder("whisper") == NotDecoder::encoder_decoder);
  CHECK_FALSE(not_decoder("llama"));
  CHECK(find_architecture("bert") == nullptr);
  CHECK(find_architecture("my_llm") == nullptr);
}

TEST_CASE("architectures: a scaled logits head is a property of the row", "[spec][arch]") {
  // CohereForCausalLM: `logits = logits * self.logit_scale` after lm_head.
  REQUIRE(find_architecture("cohere") != nullptr);
  CHECK(find_architecture("cohere")->scaled_logits);
  CHECK(find_architecture("cohere2")->scaled_logits);
  CHECK_FALSE(find_architecture("llama")->scaled_logits);
  CHECK_FALSE(find_architecture("gemma2")->scaled_logits);  // soft-capped, counted apart
}
