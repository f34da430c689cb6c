// qwen3_next, the first hybrid type (and qwen3_5 / qwen3_5_moe below): Gated DeltaNet linear-attention
// layers beside gated full attention (src/spec/hybrid.cpp lays them out; src/engine/state_cache.cpp
// sizes their states and their forward). Parameters checked against transformers 5.17's count of Qwen3NextConfig's
// defaults (transformers_counts.json: 79,674,391,296, architectures_test.cpp) and on the Hub config
// of Qwen3-Next-80B-A3B, whose sizes are those defaults.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "../../../src/engine/state_cache.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/vision.hpp"
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

// --- qwen3_5 / qwen3_5_moe (session 11, arch5) ---------------------------------------------------
// Qwen3.5's language models are qwen3_next's hybrid with Qwen3_5GatedDeltaNet's split projections
// (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; transformers 5.17 models/qwen3_5/modeling_qwen3_5.py)
// and Qwen3.5's vision tower (Qwen3_5VisionModel: Qwen3-VL's without the deepstack mergers). No device
// this session: every count below is worked out by hand from the 5.17 modeling files (the arithmetic is
// written out), and the engine's rules are qwen3_next's, measured there (tests/accuracy/hybrid).

namespace {

std::string qwen35_397b() { return vramfit::test::read_text(kHybrid / "qwen3.5-397b-a17b.json"); }

/// Qwen3_5TextConfig()'s defaults written out (configuration_qwen3_5.py; layer_types from
/// full_attention_interval 4: 24 linear, 8 full).
constexpr const char* kQwen35TextDefaults = R"({"model_type": "qwen3_5_text", "vocab_size": 248320,
    "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 32768, "tie_word_embeddings": false})";

/// Qwen3_5MoeTextConfig()'s defaults written out (configuration_qwen3_5_moe.py: 30 linear, 10 full).
constexpr const char* kQwen35MoeTextDefaults = R"({"model_type": "qwen3_5_moe_text", "vocab_size": 248320,
    "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "max_position_embeddings": 32768, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts": 256, "num_experts_per_tok": 8})";

/// Qwen3.5-27B's sizes (the Hub config's text_config and vision_config, as THUDM/slime's
/// scripts/models/qwen3.5-27B.sh and the Qwen3.5-27B configs quoted in public repositories give them:
/// hidden 5120, 64 layers, 24 heads over 4 kv heads of 256, MLP 17408, 16 key / 48 value linear heads
/// of 128; vision out_hidden_size 5120, no deepstack).
std::string qwen35_27b() {
  nlohmann::json t = nlohmann::json::parse(kQwen35TextDefaults);
  t["hidden_size"] = 5120;
  t["intermediate_size"] = 17408;
  t["num_hidden_layers"] = 64;
  t["num_attention_heads"] = 24;
  t["linear_num_value_heads"] = 48;
  t["max_position_embeddings"] = 262144;
  t["mtp_num_hidden_layers"] = 1;
  nlohmann::json c = {{"model_type", "qwen3_5"}, {"tie_word_embeddings", false}, {"text_config", t},
                      {"vision_config", {{"model_type", "qwen3_5_vision"}, {"deepstack_visual_indexes", nlohmann::json::array()},
                                         {"out_hidden_size", 5120}}}};
  return c.dump();
}

}  // namespace

TEST_CASE("qwen3_5: the config classes' defaults, counted by hand from the 5.17 modeling files", "[spec][hybrid]") {
  // Qwen3_5TextConfig(): H 4096, I 12288, 32 layers (24 Gated DeltaNet, 8 attention), V 248320.
  //   Gated DeltaNet layer: in_proj_qkv 4096 x (2 x 16 x 128 + 32 x 128 = 8192) = 33,554,432; in_proj_z
  //   4096 x 4096 = 16,777,216; in_proj_b, in_proj_a 4096 x 32 each = 262,144; conv1d 8192 x 4 = 32,768;
  //   dt_bias, A_log 32 each = 64; norm (head_v_dim) 128; out_proj 4096 x 4096 = 16,777,216: 67,403,968.
  //   Attention layer: q_proj 4096 x 2 x 16 x 256 = 33,554,432; k_proj, v_proj 4096 x 4 x 256 each =
  //   8,388,608; o_proj 4096 x 4096 = 16,777,216; q_norm, k_norm 256 each: 58,720,768.
  //   Every layer: MLP 3 x 4096 x 12288 = 150,994,944 and two norms of 4096: 151,003,136.
  //   24 x 67,403,968 + 8 x 58,720,768 + 32 x 151,003,136 = 1,617,695,232 + 469,766,144 + 4,832,100,352;
  //   embeddings and lm_head 2 x 248320 x 4096 = 2,034,237,440; final norm 4096: 8,953,803,264.
  const ModelSpec dense = from_config_text(kQwen35TextDefaults, "config.json");
  CHECK(dense.model_type == "qwen3_5_text");
  CHECK(dense.params == 8'953'803'264ULL);
  CHECK(dense.linear_attention.layers == 24);
  CHECK(dense.intermediate_size == 12288);
  REQUIRE(dense.layers.size() == 16);  // (3 linear, 1 full) x 8
  const LayerGroup& lin = dense.layers[0];
  REQUIRE(lin.linears.size() == 8);
  CHECK(lin.linears[0].name == "in_proj_qkv");
  CHECK(lin.linears[0].out_features == 8192);
  CHECK(lin.linears[1].name == "in_proj_z");
  CHECK(lin.linears[1].out_features == 4096);
  CHECK(lin.linears[2].name == "in_proj_b");
  CHECK(lin.linears[2].out_features == 32);
  CHECK(lin.linears[3].name == "in_proj_a");
  CHECK(lin.linears[3].out_features == 32);
  CHECK(lin.linears[4].name == "out_proj");
  CHECK(lin.linears[5].name == "gate_proj");
  CHECK(lin.norm_params == 2 * 4096 + 128);
  CHECK(lin.other_params == dense.layers[1].other_params + 8192 * 4 + 2 * 32);  // conv1d, dt_bias, A_log
  CHECK(dense.layers[1].linears[0].name == "q_proj");
  CHECK(dense.layers[1].linears[0].out_features == 2 * 16 * 256);

  // Qwen3_5MoeTextConfig(): H 2048, 40 layers (30 Gated DeltaNet, 10 attention), 256 experts of 512,
  // a shared expert of 512, V 248320.
  //   Gated DeltaNet layer: in_proj_qkv 2048 x 8192 = 16,777,216; in_proj_z 2048 x 4096 = 8,388,608;
  //   in_proj_b, in_proj_a 2 x 2048 x 32 = 131,072; conv1d 32,768; dt_bias, A_log 64; norm 128; out_proj
  //   4096 x 2048 = 8,388,608: 33,718,464.
  //   Attention layer: q_proj 2048 x 8192 = 16,777,216; k_proj, v_proj 2048 x 512 each = 2,097,152;
  //   o_proj 4096 x 2048 = 8,388,608; q/k norms 512: 27,263,488.
  //   Every layer: router 256 x 2048 = 524,288; experts 256 x 3 x 512 x 2048 = 805,306,368; shared expert
  //   3 x 2048 x 512 = 3,145,728; shared_expert_gate 2048; two norms 4096: 808,982,528.
  //   30 x 33,718,464 + 10 x 27,263,488 + 40 x 808,982,528 = 1,011,553,920 + 272,634,880 + 32,359,301,120;
  //   embeddings and lm_head 2 x 248320 x 2048 = 1,017,118,720; final norm 2048: 34,660,610,688.
  const ModelSpec moe = from_config_text(kQwen35MoeTextDefaults, "config.json");
  CHECK(moe.model_type == "qwen3_5_moe_text");
  CHECK(moe.params == 34'660'610'688ULL);
  CHECK(moe.linear_attention.layers == 30);
  CHECK(moe.intermediate_size == 0);
  for (const LayerGroup& g : moe.layers) CHECK(g.moe);

  // The composite defaults (Qwen3_5Config(), Qwen3_5MoeConfig(): an empty text_config takes the text
  // config class's defaults, an absent vision_config Qwen3_5VisionConfig's): the language model above plus
  // the tower: Conv3d 3 x 2 x 16 x 16 x 1152 + 1152 = 1,770,624; pos_embed 2304 x 1152 = 2,654,208; 27
  // blocks of 2 LayerNorms (4 x 1152), qkv 1152 x 3456 + 3456, proj 1152 x 1152 + 1152, fc1 1152 x 4304 +
  // 4304, fc2 4304 x 1152 + 1152 = 15,239,504 each (411,466,608); the merger: LayerNorm 2 x 1152, fc1
  // 4608 x 4608 + 4608, fc2 4608 x 3584 + 3584 (out_hidden_size 3584) = 37,759,232. Tower 415,891,440 +
  // merger 37,759,232 = 453,650,672; no deepstack mergers.
  const ModelSpec outer = from_config_text(R"({"model_type": "qwen3_5", "text_config": {}})", "config.json");
  CHECK(outer.model_type == "qwen3_5_text");
  REQUIRE(outer.vision);
  CHECK(outer.vision->tower_params == 415'891'440ULL);
  CHECK(outer.vision->projector_params == 37'759'232ULL);
  CHECK(outer.params == 8'953'803'264ULL + 453'650'672ULL);
  const ModelSpec outer_moe = from_config_text(R"({"model_type": "qwen3_5_moe", "text_config": {}})", "config.json");
  CHECK(outer_moe.model_type == "qwen3_5_moe_text");
  REQUIRE(outer_moe.vision);
  CHECK(outer_moe.params == 34'660'610'688ULL + 453'650'672ULL);
  // A deepstack_visual_indexes list builds nothing in Qwen3.5 (Qwen3_5VisionModel deletes the mergers).
  const ModelSpec listed = from_config_text(
      R"({"model_type": "qwen3_5_moe", "text_config": {}, "vision_config": {"deepstack_visual_indexes": [8, 16, 24]}})",
      "config.json");
  CHECK(listed.params == outer_moe.params);
}

TEST_CASE("qwen3_5: Qwen3.5-397B-A17B's Hub config counts 396,802,360,816 parameters", "[spec][hybrid]") {
  // tests/unit/spec/data/arch/hybrid/qwen3.5-397b-a17b.json: the Hub config.json as
  // ai-dynamo/aiconfigurator keeps it (src/aiconfigurator/model_configs/Qwen--Qwen3.5-397B-A17B_config.json).
  // H 4096, 60 layers (45 Gated DeltaNet, 15 attention), 512 experts of 1024 (10 a token), a shared expert
  // of 1024, 16 key / 64 value linear heads of 128, 32 heads over 2 kv heads of 256.
  //   Gated DeltaNet layer: in_proj_qkv 4096 x (4096 + 8192) = 50,331,648; in_proj_z 4096 x 8192 =
  //   33,554,432; in_proj_b, in_proj_a 2 x 4096 x 64 = 524,288; conv1d 12288 x 4 = 49,152; dt_bias, A_log
  //   128; norm 128; out_proj 8192 x 4096 = 33,554,432: 118,014,208.
  //   Attention layer: q_proj 4096 x 16384 = 67,108,864; k_proj, v_proj 4096 x 512 each = 4,194,304;
  //   o_proj 8192 x 4096 = 33,554,432; q/k norms 512: 104,858,112.
  //   Every layer: router 512 x 4096 = 2,097,152; experts 512 x 3 x 1024 x 4096 = 6,442,450,944; shared
  //   expert 3 x 4096 x 1024 = 12,582,912; its gate 4096; norms 8192: 6,457,143,296.
  //   45 x 118,014,208 + 15 x 104,858,112 + 60 x 6,457,143,296 = 5,310,639,360 + 1,572,871,680 +
  //   387,428,597,760; embeddings and lm_head 2 x 248320 x 4096 = 2,034,237,440; final norm 4096:
  //   396,346,350,336. The tower as Qwen3_5VisionConfig's (415,891,440) and the merger into 4096: LayerNorm
  //   2304, fc1 4608 x 4608 + 4608, fc2 4608 x 4096 + 4096 = 40,119,040; 396,802,360,816 in all (the model
  //   card's "397B in total"; the checkpoint's MTP layer is not built).
  const ModelSpec s = from_config_text(qwen35_397b(), "config.json");
  CHECK(s.model_type == "qwen3_5_moe_text");
  CHECK(s.params == 396'802'360'816ULL);
  REQUIRE(s.vision);
  CHECK(s.vision->tower == "qwen3_vl");
  CHECK(s.vision->projector_params == 40'119'040ULL);
  CHECK(s.linear_attention.layers == 45);
  CHECK(s.linear_attention.value_heads == 64);
  CHECK(s.linear_attention.conv_dim() == 12288);
  CHECK(s.max_positions == 262144);
  CHECK(s.moe.num_experts == 512);
  CHECK(s.moe.experts_per_token == 10);
  CHECK(s.moe.shared_intermediate == 1024);
  CHECK(s.moe.shared_expert_gate);
  // The partial rotary share of Qwen3_5TextConfig.__post_init__ (the file has no rope_parameters).
  CHECK(s.partial_rotary_factor == 0.25);
  bool mtp_note = false;
  for (const std::string& n : s.notes)
    mtp_note = mtp_note || n == "the 1 multi-token-prediction layer(s) (mtp_num_hidden_layers; the checkpoint's "
                                "mtp.* weights) are not built by transformers and are not counted";
  CHECK(mtp_note);
}

TEST_CASE("qwen3_5: Qwen3.5-27B's sizes count 27,356,728,560 parameters", "[spec][hybrid]") {
  //   Gated DeltaNet layer: in_proj_qkv 5120 x (4096 + 6144) = 52,428,800; in_proj_z 5120 x 6144 =
  //   31,457,280; in_proj_b, in_proj_a 2 x 5120 x 48 = 491,520; conv1d 10240 x 4 = 40,960; dt_bias, A_log
  //   96; norm 128; out_proj 6144 x 5120 = 31,457,280: 115,876,064.
  //   Attention layer: q_proj 5120 x 12288 = 62,914,560; k_proj, v_proj 5120 x 1024 each = 10,485,760;
  //   o_proj 6144 x 5120 = 31,457,280; q/k norms 512: 104,858,112.
  //   Every layer: MLP 3 x 5120 x 17408 = 267,386,880; norms 10240: 267,397,120.
  //   48 x 115,876,064 + 16 x 104,858,112 + 64 x 267,397,120 = 5,562,051,072 + 1,677,729,792 +
  //   17,113,415,680; embeddings and lm_head 2 x 248320 x 5120 = 2,542,796,800; final norm 5120:
  //   26,895,998,464. Tower 415,891,440; merger into 5120: 2304 + 21,238,272 + 4608 x 5120 + 5120 =
  //   44,838,656; in all 27,356,728,560.
  // Published: the Qwen3.6-27B checkpoint (the same model_type and sizes) has total_size 55.56 GB of bf16
  // in its model.safetensors.index.json (eadst.com/blog/325): 27.78B. Its MTP layer (mtp.fc 10240 x 5120 =
  // 52,428,800, one attention layer with its MLP 104,858,112 + 267,397,120, three norms 15,360), which
  // transformers does not build, is 424,699,392: 27,356,728,560 + 424,699,392 = 27,781,427,952, 55.56 GB.
  const ModelSpec s = from_config_text(qwen35_27b(), "config.json");
  CHECK(s.model_type == "qwen3_5_text");
  CHECK(s.params == 27'356'728'560ULL);
  CHECK(s.linear_attention.layers == 48);
  CHECK(s.linear_attention.conv_dim() == 10240);
}

TEST_CASE("qwen3_5: Qwen3.5-35B-A3B's sizes count 35,107,181,936 parameters", "[spec][hybrid]") {
  // Qwen3.5-35B-A3B's text_config has Qwen3_5MoeTextConfig's default sizes (H 2048, 40 layers, 16 key / 32
  // value linear heads, 16 heads over 2 kv heads, 256 experts of 512 with 8 a token, a shared expert of
  // 512: its model card, and the config quoted in public repositories) and vision out_hidden_size 2048:
  // the text model 34,660,610,688 (above); the tower 415,891,440 and the merger into 2048 (2304 +
  // 21,238,272 + 4608 x 2048 + 2048 = 30,679,808): 35,107,181,936, the card's "35B in total". Its MTP
  // layer (fc 4096 x 2048 = 8,388,608, an attention layer 27,263,488 with its MoE block and norms
  // 808,982,528, three norms 6144: 844,640,768) is not built: 35,951,822,704 with it, 71.9 GB of bf16 (the
  // "72 GB BF16" quoted for the checkpoint).
  nlohmann::json t = nlohmann::json::parse(kQwen35MoeTextDefaults);
  t["max_position_embeddings"] = 262144;
  t["mtp_num_hidden_layers"] = 1;
  const nlohmann::json c = {{"model_type", "qwen3_5_moe"}, {"tie_word_embeddings", false}, {"text_config", t},
                            {"vision_config", {{"model_type", "qwen3_5_moe_vision"}, {"out_hidden_size", 2048}}}};
  const ModelSpec s = from_config_text(c.dump(), "config.json");
  CHECK(s.params == 35'107'181'936ULL);
  REQUIRE(s.vision);
  CHECK(s.vision->projector_params == 30'679'808ULL);
}

TEST_CASE("qwen3_5: the split Gated DeltaNet's forward, states and a generate's cache, exact", "[engine][hybrid]") {
  const ModelSpec s = from_config_text(qwen35_27b(), "config.json");
  const engine::detail::Precision p;  // bf16
  CHECK(engine::detail::attention_layers(s) == 16);
  // Per linear layer and sequence: conv 10240 x 4 x 2 bytes = 81,920 + recurrent 48 x 128 x 128 x 4 bytes
  // = 3,145,728; 48 layers.
  CHECK(engine::detail::linear_state_cache(s, 1, p).value() == 48ULL * (81'920 + 3'145'728));
  // The forward of one linear layer over 4096 tokens (a multiple of the chunk of 64). Per token, 16-bit:
  // the stream 3 x 5120 = 15360; Qwen3_5GatedDeltaNet's locals: z 6144, b and a 96, the conv's silu output
  // 10240, q and k repeated to 48 heads 12288, beta 48 (28,816); g 48 fp32: (15360 + 28816) x 2 + 192 =
  // 88,544 bytes. torch_chunk_gated_delta_rule at `query * cum_decay.exp()`, fp32 per padded token: 6 x
  // 6144 + 4 x 6144 + 3 x 48 x 64 + 2 x 48 = 70,752 values. No fix_query_key_value_ordering copies and
  // no torch.cat: the conv moment (in_proj_qkv's output, z, b, a, the conv's output and its silu: 3 x
  // 10240 + 6144 + 96) is 4096 x (15360 + 36960) x 2 = 428,605,440, below.
  CHECK(engine::detail::linear_attention_forward(s, 1, 4096, p).value() ==
        4096ULL * 88'544 + 4096ULL * 70'752 * 4);  // 1,521,876,992
  // A decode step: three fp32 states of 48 x 128 x 128.
  CHECK(engine::detail::linear_attention_decode(s, 2, p).value() == 3ULL * 2 * 3'145'728);

  // A long generate (the last decode step is the peak): keys and values of the 16 attention layers (2 x 4
  // kv heads x 256, bf16) at every position, and the 48 linear layers' states.
  vramfit::spec::Workload w;
  w.mode = vramfit::spec::Mode::generate;
  w.batch = 1;
  w.seq = 16;
  w.new_tokens = 20000;
  const vramfit::engine::Breakdown b = vramfit::engine::estimate(s, w);
  const auto* kv = b.find(vramfit::engine::ComponentId::kv_cache);
  REQUIRE(kv != nullptr);
  CHECK(kv->bytes.value() == 16ULL * 2 * 4 * 256 * 20016 * 2 + 48ULL * (81'920 + 3'145'728));
}

TEST_CASE("qwen3_5: training modes and serving engines are refused with exit 2, images are estimated", "[cli][hybrid]") {
  const vramfit::test::TempDir dir;
  const std::string cfg = dir.write("config.json", qwen35_397b());
  for (const std::string mode : {"train", "lora", "qlora"}) {
    INFO(mode);
    const auto r = vramfit::test::estimate({"--config", cfg, "--mode", mode, "--seq", "1024"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--mode: " + mode + " of model_type 'qwen3_5_moe_text' (45 Gated DeltaNet linear-attention "
                     "layers) is not estimated: the backward of those layers keeps what the kernel package decides") !=
          std::string::npos);
  }
  for (const std::string engine : {"vllm", "llama.cpp"}) {
    INFO(engine);
    const auto v = vramfit::test::estimate({"--config", cfg, "--engine", engine});
    CHECK(v.code == 2);
    CHECK(v.err.find("--engine: model_type 'qwen3_5_moe_text' has 45 Gated DeltaNet linear-attention layers: a "
                     "serving engine's state cache for them is not modelled") != std::string::npos);
  }
  // Inference, generate and images (Qwen3.5's tower is Qwen3-VL's) are estimated.
  CHECK(vramfit::test::estimate({"--config", cfg, "--mode", "generate", "--seq", "4096", "--new-tokens", "256"}).code != 2);
  CHECK(vramfit::test::estimate({"--config", cfg, "--mode", "inference", "--seq", "4096", "--images", "2"}).code != 2);
  // A config transformers cannot build names the key, as for qwen3_next.
  nlohmann::json bad = nlohmann::json::parse(qwen35_397b());
  bad["text_config"]["linear_num_value_heads"] = 40;
  const auto d = diags_of(bad.dump());
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: text_config.linear_num_value_heads");
  CHECK(d[0].problem == "40 is not a multiple of linear_num_key_heads 16");
  bad = nlohmann::json::parse(qwen35_397b());
  bad["text_config"]["layer_types"][3] = "mamba";
  const auto e = diags_of(bad.dump());
  REQUIRE(e.size() == 1);
  CHECK(e[0].field == "config.json: text_config.layer_types");
  CHECK(e[0].problem ==
        "'mamba' (layer 3) is not a kind model_type 'qwen3_5_moe_text' builds: its layers are \"linear_attention\" "
        "(Gated DeltaNet) or \"full_attention\"");
}

TEST_CASE("qwen3_5: a checkpoint's mtp.* tensors are not counted (transformers does not load them)", "[spec][hybrid]") {
  // Qwen3_5PreTrainedModel._keys_to_ignore_on_load_unexpected = [r"^mtp.*"]: the MTP layer stays on disk.
  ModelSpec s = from_config_text(qwen35_27b(), "config.json");
  const std::vector<TensorInfo> tensors{
      {"model.language_model.embed_tokens.weight", "BF16", {248320, 5120}, 248320ULL * 5120},
      {"lm_head.weight", "BF16", {248320, 5120}, 248320ULL * 5120},
      {"model.language_model.layers.0.mlp.up_proj.weight", "BF16", {17408, 5120}, 17408ULL * 5120},
      {"mtp.fc.weight", "BF16", {5120, 10240}, 52'428'800},
      {"mtp.norm.weight", "BF16", {5120}, 5120}};
  apply_checkpoint(s, tensors);
  CHECK(s.params == 2ULL * 248320 * 5120 + 17408ULL * 5120);
  bool note = false;
  for (const std::string& n : s.notes)
    note = note || n == "the checkpoint's 2 mtp.* tensors (52433920 values: the multi-token-prediction layer) are not "
                        "loaded by transformers and are not counted";
  CHECK(note);
  // A model without linear-attention layers counts every tensor of its checkpoint, as before.
  ModelSpec plain;
  plain.params = 1;
  apply_checkpoint(plain, {{"w", "BF16", {10}, 10}, {"mtp.fc.weight", "BF16", {4}, 4}});
  CHECK(plain.params == 14);
}

TEST_CASE("qwen3_5: an image's tokens follow Qwen3-VL's processor (patch 16, 2x2 merge)", "[spec][hybrid]") {
  const ModelSpec s = from_config_text(qwen35_397b(), "config.json");
  REQUIRE(s.vision);
  // 448 x 448: smart_resize to multiples of 32 keeps 448 (within 65536 .. 16777216 pixels); 28 x 28 = 784
  // patches through the tower, 784 / 4 = 196 tokens + <|vision_start|> <|vision_end|> in the prompt.
  const ImageWork w = image_work(*s.vision, 2, 448, 448);
  CHECK(w.per_image.sequence_len == 784);
  CHECK(w.per_image.prompt_tokens == 198);
  CHECK(w.prompt_tokens == 396);
  // 100 x 100 is scaled up to the minimum of 65536 pixels: 256 x 256 (ceil(100 x 2.56 / 32) x 32), 256 tokens.
  CHECK(image_work(*s.vision, 1, 100, 100).per_image.sequence_len == 256);
}
