// qwen3_next, the first hybrid type: Gated DeltaNet linear-attention layers beside gated full
// attention (src/spec/hybrid.cpp lays them out; src/engine/state_cache.cpp sizes their states and
// their forward). Parameters checked against transformers 5.17's count of Qwen3NextConfig's
// defaults (transformers_counts.json: 79,674,391,296, architectures_test.cpp) and on the Hub config
// of Qwen3-Next-80B-A3B, whose sizes are those defaults.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "../../../src/engine/state_cache.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "../../cli/cli_helper.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

const std::filesystem::path kHybrid = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch/hybrid";

std::string next80b() { return vramfit::test::read_text(kHybrid / "qwen3-next-80b-a3b.json"); }

std::vector<Diagnostic> diags_of(const std::string& text) {
  try {
    (void)from_config_text(text, "config.json");
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

/// A small qwen3_next config (4 layers) with `key` set to `value` (JSON text).
std::string small_with(const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(next80b());
  j["num_hidden_layers"] = 4;
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j[key] = nlohmann::json::parse(value);
  return j.dump();
}

}  // namespace

TEST_CASE("hybrid: Qwen3-Next-80B-A3B counts transformers' 79,674,391,296 parameters", "[spec][hybrid]") {
  const ModelSpec s = from_config_text(next80b(), "config.json");
  CHECK(s.model_type == "qwen3_next");
  CHECK(s.params == 79'674'391'296ULL);
  // Qwen3NextConfig.__post_init__: layer_types from full_attention_interval 4.
  CHECK(s.num_layers == 48);
  CHECK(s.linear_attention.layers == 36);
  CHECK(s.linear_attention.key_heads == 16);
  CHECK(s.linear_attention.value_heads == 32);
  CHECK(s.linear_attention.key_head_dim == 128);
  CHECK(s.linear_attention.value_head_dim == 128);
  CHECK(s.linear_attention.conv_kernel == 4);
  CHECK(s.linear_attention.conv_dim() == 8192);
  REQUIRE(s.layers.size() == 24);  // (3 linear, 1 full) x 12
  const LayerGroup& lin = s.layers[0];
  const LayerGroup& full = s.layers[1];
  CHECK(lin.count == 3);
  CHECK(lin.linear_attention);
  CHECK(lin.moe);
  CHECK(full.count == 1);
  CHECK_FALSE(full.linear_attention);
  REQUIRE(lin.linears.size() >= 3);
  CHECK(lin.linears[0].name == "in_proj_qkvz");
  CHECK(lin.linears[0].out_features == 12288);
  CHECK(lin.linears[1].name == "in_proj_ba");
  CHECK(lin.linears[1].out_features == 64);
  CHECK(lin.linears[2].name == "out_proj");
  CHECK(lin.linears[2].in_features == 4096);
  // conv1d (8192 x 1 x 4), dt_bias and A_log (32 each) beside the router's and experts' linears.
  CHECK(lin.other_params == full.other_params + 32768 + 64);
  // Input and post-attention norms (2048 each) and the gated norm (head_v_dim), no q/k norms.
  CHECK(lin.norm_params == 2 * 2048 + 128);
  CHECK(full.norm_params == 2 * 2048 + 2 * 256);
  CHECK(full.linears[0].name == "q_proj");
  CHECK(full.linears[0].out_features == 2 * 16 * 256);  // queries and their sigmoid gate
  // One rotary table over a quarter of head_dim (64 dims: 32 + 32 fp32 inv_freq values).
  CHECK(s.buffer_bytes == 256);
}

TEST_CASE("hybrid: layer_types lays out exactly the layers it names", "[spec][hybrid]") {
  const ModelSpec s = from_config_text(
      small_with("layer_types", R"(["full_attention","linear_attention","attention","linear_attention"])"), "config.json");
  CHECK(s.linear_attention.layers == 2);
  REQUIRE(s.layers.size() == 4);
  CHECK_FALSE(s.layers[0].linear_attention);
  CHECK(s.layers[1].linear_attention);
  CHECK_FALSE(s.layers[2].linear_attention);  // the legacy "attention" is full attention
  // full_attention_interval without layer_types: every second layer full.
  const ModelSpec t = from_config_text(small_with("full_attention_interval", "2"), "config.json");
  CHECK(t.linear_attention.layers == 2);
  REQUIRE(t.layers.size() == 4);
  CHECK(t.layers[0].linear_attention);
  CHECK_FALSE(t.layers[1].linear_attention);
}

TEST_CASE("hybrid: a qwen3_next config transformers cannot build is refused, naming the key", "[spec][hybrid]") {
  auto d = diags_of(small_with("layer_types", R"(["linear_attention","full_attention"])"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: layer_types");
  CHECK(d[0].problem == "2 entries for num_hidden_layers 4");

  d = diags_of(small_with("layer_types", R"(["linear_attention","sliding_attention","mamba","full_attention"])"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: layer_types");
  CHECK(d[0].problem ==
        "'sliding_attention' (layer 1) is not a kind model_type 'qwen3_next' builds: its layers are "
        "\"linear_attention\" (Gated DeltaNet) or \"full_attention\"");

  d = diags_of(small_with("linear_num_value_heads", "24"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: linear_num_value_heads");
  CHECK(d[0].problem == "24 is not a multiple of linear_num_key_heads 16");

  d = diags_of(small_with("linear_conv_kernel_dim", "0"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: linear_conv_kernel_dim");
  CHECK(d[0].problem == "expected a positive integer (up to 2^40), got 0");
}

TEST_CASE("hybrid: states, KV layers and the Gated DeltaNet's transients, exact", "[engine][hybrid]") {
  const ModelSpec s = from_config_text(next80b(), "config.json");
  const engine::detail::Precision p;  // bf16
  CHECK(engine::detail::attention_layers(s) == 12);
  // Per linear layer: conv 1 x 8192 x 4 x 2 bytes + recurrent 32 x 128 x 128 x 4 bytes.
  CHECK(engine::detail::linear_state_cache(s, 1, p).value() == 36ULL * (65'536 + 2'097'152));
  CHECK(engine::detail::linear_state_cache(s, 3, p).value() == 3ULL * 36 * (65'536 + 2'097'152));
  // torch_chunk_gated_delta_rule's peak (per padded token: 6 x 4096 + 4 x 4096 + 3 x 2048 + 64 fp32)
  // beside the layer's locals (78,272 bytes a token); 4000 tokens pad to 4032.
  CHECK(engine::detail::linear_attention_forward(s, 1, 4096, p).value() == 4096ULL * 78'272 + 4096ULL * 47'168 * 4);
  CHECK(engine::detail::linear_attention_forward(s, 2, 4000, p).value() == 2'147'627'008ULL);
  // A decode step: three fp32 states of 32 x 128 x 128.
  CHECK(engine::detail::linear_attention_decode(s, 1, p).value() == 3ULL * 2'097'152);
  // A model without linear-attention layers: nothing.
  ModelSpec plain = s;
  plain.linear_attention = {};
  CHECK(engine::detail::linear_attention_forward(plain, 1, 4096, p).value() == 0);
  CHECK(engine::detail::linear_state_cache(plain, 1, p).value() == 0);
  CHECK(engine::detail::attention_layers(plain) == 48);
}

TEST_CASE("hybrid: training modes and serving engines are refused with exit 2", "[cli][hybrid]") {
  const vramfit::test::TempDir dir;
  const std::string cfg = dir.write("config.json", next80b());
  for (const std::string mode : {"train", "lora", "qlora"}) {
    INFO(mode);
    const auto r = vramfit::test::estimate({"--config", cfg, "--mode", mode, "--seq", "1024"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--mode: " + mode + " of model_type 'qwen3_next' (36 Gated DeltaNet linear-attention layers) "
                     "is not estimated: the backward of those layers keeps what the kernel package decides") !=
          std::string::npos);
  }
  const auto v = vramfit::test::estimate({"--config", cfg, "--engine", "vllm"});
  CHECK(v.code == 2);
  CHECK(v.err.find("--engine: model_type 'qwen3_next' has 36 Gated DeltaNet linear-attention layers: a serving "
                   "engine's state cache for them is not modelled") != std::string::npos);
  // Inference and generate are estimated.
  CHECK(vramfit::test::estimate({"--config", cfg, "--mode", "generate", "--seq", "4096", "--new-tokens", "256"}).code != 2);
  CHECK(vramfit::test::estimate({"--config", cfg, "--mode", "inference", "--seq", "4096"}).code != 2);
}
