// The MoE types users bring from the Hub (issue #16): glm4_moe, ernie4_5_moe, hunyuan_v1_moe and
// dots1 are laid out exactly (their Hub configs against the models transformers 5.17 builds from
// them, tests/unit/spec/data/arch/transformers_counts.json "real:*"), and the types whose layers
// vramfit does not model (linear attention, state-space and convolution layers) stay refused.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "../../cli/cli_helper.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

const std::filesystem::path kArch = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch";

ModelSpec real(const std::string& name) {
  return from_config_text(vramfit::test::read_text(kArch / "real" / (name + ".json")), "config.json");
}

std::vector<Diagnostic> diags_of(const std::string& text) {
  try {
    (void)from_config_text(text, "config.json");
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

/// Layers of each kind: {dense, sparse}.
std::pair<std::uint64_t, std::uint64_t> dense_and_sparse(const ModelSpec& s) {
  std::uint64_t dense = 0, sparse = 0;
  for (const LayerGroup& g : s.layers) (g.moe ? sparse : dense) += g.count;
  return {dense, sparse};
}

bool has_note(const ModelSpec& s, const std::string& part) {
  for (const auto& n : s.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("moe types: every Hub config in data/arch/real counts what transformers builds from it", "[spec][arch]") {
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(kArch / "transformers_counts.json"));
  std::size_t checked = 0;
  for (const auto& r : counts["results"]) {
    const std::string id = r["id"];
    if (id.rfind("real:", 0) != 0) continue;
    INFO(id);
    REQUIRE(r.contains("params"));
    CHECK(real(id.substr(5)).params == r["params"].get<std::uint64_t>());
    ++checked;
  }
  CHECK(checked == 13);
}

TEST_CASE("moe types: glm4_moe (GLM-4.5, GLM-4.5-Air)", "[spec][arch]") {
  // zai-org/GLM-4.5-Air: 1 dense layer, 45 of 128 experts (8 a token) + a shared one, q/k/v
  // biases, half the head rotated; 106852245504 as Glm4MoeForCausalLM built by transformers 5.17.
  const ModelSpec air = real("glm-4.5-air");
  CHECK(air.params == 106852245504ULL);
  CHECK(dense_and_sparse(air) == std::pair<std::uint64_t, std::uint64_t>{1, 45});
  CHECK(air.moe.num_experts == 128);
  CHECK(air.moe.experts_per_token == 8);
  CHECK(air.moe.expert_intermediate == 1408);
  CHECK(air.moe.shared_intermediate == 1408);
  CHECK(air.head_dim == 128);
  CHECK(air.num_kv_heads == 8);
  CHECK_FALSE(air.qk_norm);
  // inv_freq and original_inv_freq of 32 (128 * 0.5 / 2) and e_score_correction_bias (128 fp32) per MoE layer.
  CHECK(air.buffer_bytes == 2 * 32 * 4 + 45 * 128 * 4);
  CHECK(has_note(air, "multi-token-prediction layer"));
  // zai-org/GLM-4.5: 3 dense layers, 160 experts, q/k norms.
  const ModelSpec full = real("glm-4.5");
  CHECK(full.params == 352797814784ULL);
  CHECK(dense_and_sparse(full) == std::pair<std::uint64_t, std::uint64_t>{3, 89});
  CHECK(full.qk_norm);
  // Without the shared expert and the first dense layer the count falls by exactly their weights.
  nlohmann::json j = nlohmann::json::parse(vramfit::test::read_text(kArch / "real/glm-4.5-air.json"));
  j["n_shared_experts"] = 0;
  j["first_k_dense_replace"] = 0;
  const ModelSpec bare = from_config(j, "config.json");
  CHECK(bare.params == 106852245504ULL - 45 * 3ULL * 4096 * 1408 - 3ULL * 4096 * 10944 + 128ULL * 4096 +
                           3ULL * 4096 * 1408 * 128);
}

TEST_CASE("moe types: ernie4_5_moe (ERNIE-4.5-21B-A3B)", "[spec][arch]") {
  // baidu/ERNIE-4.5-21B-A3B-PT: layers 1..27 sparse (moe_layer_start_index 1, end -1: the last),
  // 64 experts (moe_k 6), a shared MLP of 2 x 1536, the e_score_correction_bias parameter, tied.
  const ModelSpec s = real("ernie-4.5-21b-a3b");
  CHECK(s.params == 21825437888ULL);
  CHECK(dense_and_sparse(s) == std::pair<std::uint64_t, std::uint64_t>{1, 27});
  CHECK(s.moe.num_experts == 64);
  CHECK(s.moe.experts_per_token == 6);
  CHECK(s.moe.shared_intermediate == 3072);
  CHECK(s.tied_embeddings);
  // moe_layer_interval 2 between start 2 and end 8: layers 3, 5, 7 (Ernie4_5_MoeDecoderLayer).
  nlohmann::json j = nlohmann::json::parse(vramfit::test::read_text(kArch / "real/ernie-4.5-21b-a3b.json"));
  j["moe_layer_start_index"] = 2;
  j["moe_layer_end_index"] = 8;
  j["moe_layer_interval"] = 2;
  CHECK(dense_and_sparse(from_config(j, "config.json")) == std::pair<std::uint64_t, std::uint64_t>{25, 3});
  // use_bias adds biases the fused experts' layout does not show: refused, naming the key.
  j["use_bias"] = true;
  const auto d = diags_of(j.dump());
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: use_bias");
  j.erase("use_bias");
  j.erase("moe_k");
  const auto k = diags_of(j.dump());
  REQUIRE(k.size() == 1);
  CHECK(k[0].field == "config.json: moe_k");
}

TEST_CASE("moe types: hunyuan_v1_moe (Hunyuan-A13B) and dots1 (dots.llm1)", "[spec][arch]") {
  // tencent/Hunyuan-A13B-Instruct: every layer sparse, 64 experts of intermediate_size, moe_topk
  // given per layer, a shared MLP as wide, q/k norms; tied.
  const ModelSpec h = real("hunyuan-a13b");
  CHECK(h.params == 80393183232ULL);
  CHECK(dense_and_sparse(h) == std::pair<std::uint64_t, std::uint64_t>{0, 32});
  CHECK(h.moe.num_experts == 64);
  CHECK(h.moe.experts_per_token == 8);
  CHECK(h.moe.shared_intermediate == 3072);
  CHECK(h.qk_norm);
  // A per-layer moe_topk that varies: the largest sizes every layer's activations, said in a note.
  nlohmann::json j = nlohmann::json::parse(vramfit::test::read_text(kArch / "real/hunyuan-a13b.json"));
  j["moe_topk"][3] = 12;
  const ModelSpec uneven = from_config(j, "config.json");
  CHECK(uneven.moe.experts_per_token == 12);
  CHECK(has_note(uneven, "moe_topk differs between layers"));
  j["moe_topk"][3] = "8";
  REQUIRE(diags_of(j.dump()).size() == 1);
  CHECK(diags_of(j.dump())[0].field == "config.json: moe_topk");

  // rednote-hilab/dots.llm1.inst: 1 dense layer, 128 experts (6 a token) and 2 shared, q/k norms.
  const ModelSpec d = real("dots.llm1");
  CHECK(d.params == 142774373888ULL);
  CHECK(dense_and_sparse(d) == std::pair<std::uint64_t, std::uint64_t>{1, 61});
  CHECK(d.moe.shared_intermediate == 2 * 1408);
  CHECK(d.qk_norm);
  CHECK(d.sliding_layers == 0);
}

TEST_CASE("moe types: linear-attention and state-space types stay refused, naming model_type", "[spec][arch]") {
  // Hub configs (trimmed to their size-bearing keys) of types whose layers vramfit does not
  // model: each is exit 2 on model_type, with the keys that show the structure.
  const std::pair<const char*, const char*> refused[] = {
      {"lfm2-1.2b", "\"conv_L_cache\""},  // (qwen3_next is laid out: tests/unit/spec/hybrid_test.cpp)
      {"falcon-h1-1.5b", "\"mamba_d_state\""},           {"granite-4.0-h-small", "\"mamba_d_state\""},
      {"kimi-linear-48b-a3b", "\"linear_attn_config\""},  {"minimax-text-01", "\"attn_type_list\""},
  };
  for (const auto& [name, key] : refused) {
    INFO(name);
    const std::string text = vramfit::test::read_text(kArch / "refused" / (std::string(name) + ".json"));
    const auto d = diags_of(text);
    REQUIRE(d.size() == 1);
    CHECK(d[0].field == "config.json: model_type");
    const std::string type = nlohmann::json::parse(text)["model_type"];
    CHECK(d[0].problem.rfind("model_type '" + type + "' is not one vramfit knows", 0) == 0);
    CHECK(d[0].problem.find(key) != std::string::npos);
    // Not even with the checkpoint's exact weights (their state caches are not modelled).
    CHECK_THROWS_AS(from_config_text(text, "config.json", UnknownType::generic), InputError);
  }
}

TEST_CASE("moe types: a config without n_routed_experts gets the config class's default, as transformers builds it",
          "[spec][arch]") {
  // Glm4MoeConfig n_routed_experts=128, DeepseekV3Config 256 (transformers 5.17): a config.json that
  // omits the key is built with that many experts, never laid out dense.
  for (const auto& [name, experts] : {std::pair<std::string, std::uint64_t>{"glm-4.5-air", 128}}) {
    auto cfg = nlohmann::json::parse(vramfit::test::read_text(kArch / "real" / (name + ".json")));
    REQUIRE(cfg["n_routed_experts"] == experts);
    const ModelSpec with = from_config_text(cfg.dump(), "config.json");
    cfg.erase("n_routed_experts");
    const ModelSpec without = from_config_text(cfg.dump(), "config.json");
    CHECK(without.params == with.params);
    CHECK(dense_and_sparse(without) == dense_and_sparse(with));
    cfg["n_routed_experts"] = nullptr;  // an explicit null: no experts (DeepseekV2's dense reading)
    CHECK(dense_and_sparse(from_config_text(cfg.dump(), "config.json")).second == 0);
  }
}

// Session 7's types (minimax_m2, arcee, apertus) at their published sizes (tests/unit/spec/data/
// arch/s7: the Hub models' dimensions written out, counted by transformers 5.17 on the meta device
// in counts_s7.json with their parameter shapes and buffers).
TEST_CASE("minimax_m2 arcee and apertus at full size count what transformers builds", "[spec][arch]") {
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(kArch / "s7/counts_s7.json"));
  std::size_t checked = 0;
  for (const auto& c : counts["results"]) {
    const std::string id = c["id"];
    if (id.find("-dims") == std::string::npos) continue;  // the mini configs: tests/accuracy/arch
    INFO(id);
    const ModelSpec s = from_config_text(vramfit::test::read_text(kArch / "s7" / (id + ".json")), "config.json");
    CHECK(s.params == c["params"].get<std::uint64_t>());
    CHECK(s.notes.size() == (s.model_type == "minimax_m2" ? 2u : 0u));
    ++checked;
  }
  CHECK(checked == 4);
  // Exact values, so that a change of the counts file cannot pass unseen.
  const ModelSpec m = from_config_text(vramfit::test::read_text(kArch / "s7/minimax-m2-dims.json"), "config.json");
  CHECK(m.params == 228689748992ULL);
  CHECK(m.moe.num_experts == 256);
  CHECK(m.moe.experts_per_token == 8);
  CHECK(m.moe.expert_intermediate == 1536);
  CHECK(m.moe.shared_intermediate == 0);
  // 5.17 ignores rotary_dim 64: inv_freq and original_inv_freq of 64 fp32 each; the
  // e_score_correction_bias buffer, 256 a layer (counted fp32).
  CHECK(m.buffer_bytes == 2 * 64 * 4 + 62 * 256 * 4);
  const ModelSpec a = from_config_text(vramfit::test::read_text(kArch / "s7/apertus-8b-dims.json"), "config.json");
  CHECK(a.params == 8053338176ULL);
  CHECK_FALSE(a.gated_mlp);
  CHECK(a.activation == Activation::xielu);
  CHECK(a.buffer_bytes == 2 * 64 * 4 + 32 * 8);  // rotary + xIELU's beta and eps per layer
  const ModelSpec f = from_config_text(vramfit::test::read_text(kArch / "s7/afm-4.5b-dims.json"), "config.json");
  CHECK(f.params == 4619184640ULL);
  CHECK_FALSE(f.gated_mlp);
  CHECK(f.activation == Activation::relu2);
  REQUIRE(f.layers.size() == 1);
  REQUIRE(f.layers[0].linears.size() == 6);
  CHECK(f.layers[0].linears[4].name == "up_proj");
  CHECK(f.layers[0].linears[5].name == "down_proj");
}

TEST_CASE("minimax_m2: what transformers does not build is said", "[spec][arch]") {
  const ModelSpec m = from_config_text(vramfit::test::read_text(kArch / "s7/minimax-m2-dims.json"), "config.json");
  REQUIRE(m.notes.size() == 2);
  CHECK(m.notes[0] == "the 3 multi-token-prediction modules (num_mtp_modules) are not built by transformers and are "
                      "not counted");
  CHECK(m.notes[1].starts_with("rotary_dim is not read by transformers for this model_type"));
}

TEST_CASE("session 8 MoE types: GLM-4.7-Flash, K-EXAONE's layer lists, granitemoeshared's shared MLP", "[spec][arch]") {
  // GLM-4.7-Flash's published dimensions (Glm4MoeLiteConfig's defaults, 29,943,390,976 parameters
  // in transformers 5.17, transformers_counts.json): 20 heads over hidden 2048 were refused as
  // "does not divide hidden_size", though MLA sizes its heads from qk_nope/qk_rope/v_head_dim.
  const char* flash = R"({"model_type":"glm4_moe_lite","hidden_size":2048,"intermediate_size":10240,
    "moe_intermediate_size":1536,"num_hidden_layers":47,"num_attention_heads":20,"num_key_value_heads":20,
    "n_shared_experts":1,"n_routed_experts":64,"num_experts_per_tok":4,"kv_lora_rank":512,"q_lora_rank":768,
    "qk_rope_head_dim":64,"v_head_dim":256,"qk_nope_head_dim":192,"first_k_dense_replace":1,
    "num_nextn_predict_layers":1,"vocab_size":154880,"max_position_embeddings":202752,"tie_word_embeddings":false})";
  const ModelSpec f = from_config_text(flash, "config.json");
  CHECK(f.params == 29943390976ULL);
  CHECK(dense_and_sparse(f) == std::pair<std::uint64_t, std::uint64_t>{1, 46});
  CHECK(f.head_dim == 256);
  CHECK(f.kv_lora_rank == 512);
  // Without q_lora_rank, Glm4MoeLiteConfig's default 768 (DeepseekV3Config's is 1536).
  nlohmann::json nq = nlohmann::json::parse(flash);
  nq.erase("q_lora_rank");
  const ModelSpec fq = from_config(nq, "config.json");
  CHECK(fq.q_lora_rank == 768);
  CHECK(fq.params == f.params);
  CHECK(has_note(fq, "q_lora_rank is absent: used the config class's default 768"));
  // mlp_layer_types decides, first_k_dense_replace is not read (Glm4MoeLiteConfig).
  nlohmann::json lt = nlohmann::json::parse(flash);
  lt["num_hidden_layers"] = 4;
  lt["first_k_dense_replace"] = 3;
  CHECK(dense_and_sparse(from_config(lt, "config.json")) == std::pair<std::uint64_t, std::uint64_t>{1, 3});
  lt["mlp_layer_types"] = {"dense", "dense", "sparse", "dense"};
  CHECK(dense_and_sparse(from_config(lt, "config.json")) == std::pair<std::uint64_t, std::uint64_t>{3, 1});
  lt["mlp_layer_types"] = {"dense", "sparse"};
  auto d = diags_of(lt.dump());
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: mlp_layer_types");
  CHECK(d[0].problem == "2 entries for num_hidden_layers 4");
  lt["mlp_layer_types"] = {"dense", "sparse", "moe", "dense"};
  d = diags_of(lt.dump());
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "expected \"dense\" or \"sparse\", got \"moe\"");

  // exaone_moe: first_k_dense_replace (1 when absent) without mlp_layer_types.
  const char* kex = R"({"model_type":"exaone_moe","hidden_size":256,"intermediate_size":512,"moe_intermediate_size":64,
    "num_experts":8,"num_experts_per_tok":2,"num_shared_experts":1,"num_hidden_layers":6,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":64,"vocab_size":1000,"sliding_window":128,"first_k_dense_replace":2})";
  CHECK(dense_and_sparse(from_config_text(kex, "config.json")) == std::pair<std::uint64_t, std::uint64_t>{2, 4});
  nlohmann::json k1 = nlohmann::json::parse(kex);
  k1.erase("first_k_dense_replace");
  const ModelSpec e = from_config(k1, "config.json");
  CHECK(dense_and_sparse(e) == std::pair<std::uint64_t, std::uint64_t>{1, 5});
  CHECK(e.moe.shared_intermediate == 64);
  CHECK(e.sliding_layers == 5);  // all but every 4th (layer 3): 6 - 6 / 4

  // granitemoeshared: shared_mlp.input_linear (H -> 2 x 96) and output_linear, beside the experts.
  const char* gms = R"({"model_type":"granitemoeshared","hidden_size":256,"intermediate_size":64,
    "shared_intermediate_size":96,"num_local_experts":4,"num_experts_per_tok":2,"num_hidden_layers":2,
    "num_attention_heads":4,"vocab_size":1000})";
  const ModelSpec g = from_config_text(gms, "config.json");
  CHECK(g.moe.shared_intermediate == 96);
  nlohmann::json g0 = nlohmann::json::parse(gms);
  g0["shared_intermediate_size"] = 0;
  CHECK(g.params - from_config(g0, "config.json").params == 2 * (256 * 2 * 96 + 96 * 256));
}

TEST_CASE("transformers 5.17's newest hybrid and sparse-attention types are refused, with their headers too",
          "[spec][arch]") {
  // Default configs of the config classes (transformers_counts.json, probe_s8b.py on the H200): the
  // field named is the layer kind (layer_types) or model_type with the keys of a recurrence.
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(kArch / "transformers_counts.json"));
  const std::pair<const char*, const char*> refused[] = {
      {"qwen4_exp_text", "config.json: model_type"},   {"deepseek_v4", "config.json: layer_types"},
      {"hy_v4", "config.json: layer_types"},           {"axk2", "config.json: layer_types"},
      {"inkling_text", "config.json: model_type"},     {"hrm_text", "config.json: model_type"},
  };
  for (const auto& [type, field] : refused) {
    INFO(type);
    const nlohmann::json* found = nullptr;
    for (const auto& r : counts["results"])
      if (r["id"] == std::string(type) + ":default") found = &r;
    REQUIRE(found != nullptr);
    const std::string text = (*found)["config"].dump();
    for (const UnknownType u : {UnknownType::refuse, UnknownType::generic}) {
      try {
        (void)from_config_text(text, "config.json", u);
        FAIL("estimated");
      } catch (const InputError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        CHECK(e.diagnostics()[0].field == field);
      }
    }
  }
}
