// Every row of the model-type table builds, and counts what transformers builds from the
// config class's defaults (tests/unit/spec/data/arch/transformers_counts.json, made on an H200
// with transformers 5.17 by tests/unit/spec/data/arch/count.py, models built on the meta device).
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/architectures.hpp"
#include "vramfit/spec/parse.hpp"
#include "../../cli/cli_helper.hpp"

using namespace vramfit::spec;

namespace {

const std::filesystem::path kSource = VRAMFIT_SOURCE_DIR;

/// Glm4MoeConfig's defaults have 96 heads over hidden 4096 and no head_dim: Glm4MoeAttention
/// floors hidden // heads (42), where vramfit asks for head_dim (every GLM-4.5 config gives
/// 128). The default is counted with the floored value written out.
void with_floored_head_dim(nlohmann::json& config) {
  const auto h = config.value("hidden_size", 0ULL), n = config.value("num_attention_heads", 0ULL);
  if (config.value("head_dim", nlohmann::json()).is_null() && n != 0 && h % n != 0) config["head_dim"] = h / n;
}

}  // namespace

TEST_CASE("architectures: every row counts what transformers builds from its defaults", "[spec][arch]") {
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(kSource / "tests/unit/spec/data/arch/transformers_counts.json"));
  REQUIRE(counts["transformers"] == "5.17.0");
  const auto vision = nlohmann::json::parse(vramfit::test::read_text(kSource / "tests/unit/spec/data/vision.json"));
  const std::string hand_counts = vramfit::test::read_text(kSource / "tests/unit/spec/config_test.cpp");
  const std::string hybrid_counts = vramfit::test::read_text(kSource / "tests/unit/spec/hybrid_test.cpp");
  for (const Architecture& a : architectures()) {
    INFO(a.model_type);
    if (a.source.starts_with("remote code:")) {
      // trust_remote_code types are not in transformers 5.17: config_test.cpp counts a real config
      // of theirs by hand from the modeling file.
      CHECK(hand_counts.find("\"model_type\":\"" + std::string(a.model_type) + "\"") != std::string::npos);
      continue;
    }
    const nlohmann::json* found = nullptr;
    for (const auto& r : counts["results"])
      if (r["id"] == std::string(a.model_type) + ":default") found = &r;
    if (found == nullptr) {
      // The language models of vision-language types: counted whole against transformers in
      // vision_test.cpp (tests/unit/spec/data/vision.json, the "total" of each case).
      // Types newer than the counts file (ministral3): their parameters are checked on a measured
      // config instead (tests/accuracy/arch, exact against the model built on the H200).
      bool in_vision = false;
      for (const auto& c : vision["cases"])
        in_vision = in_vision || c["config"]["text_config"].value("model_type", "") == a.model_type;
      for (const auto& f : std::filesystem::directory_iterator(kSource / "tests/accuracy/arch/models"))
        in_vision = in_vision || nlohmann::json::parse(vramfit::test::read_text(f.path())).value("model_type", "") == a.model_type;
      // Types added without a device session (qwen3_5_text, qwen3_5_moe_text): hybrid_test.cpp counts
      // their config classes' defaults by hand from the 5.17 modeling files, the arithmetic written out.
      in_vision = in_vision ||
                  hybrid_counts.find("{\"model_type\": \"" + std::string(a.model_type) + "\"") != std::string::npos;
      CHECK(in_vision);
      continue;
    }
    if (!found->contains("params")) {
      // The config class's defaults do not build in transformers 5.17 (hunyuan_v1_dense: a null
      // head_dim meets the rope scaling's alpha): the type's parameters are checked on a
      // measured config instead (tests/accuracy/arch, exact against the model built on the H200).
      bool measured = false;
      for (const auto& f : std::filesystem::directory_iterator(kSource / "tests/accuracy/arch/models"))
        measured = measured || nlohmann::json::parse(vramfit::test::read_text(f.path())).value("model_type", "") == a.model_type;
      CHECK(measured);
      continue;
    }
    nlohmann::json config = (*found)["config"];
    // DeepseekV2Config leaves num_experts_per_tok null (parameters do not depend on it); every
    // real config sets it (DeepSeek-V2: 6).
    if (config["num_experts_per_tok"].is_null() && config.contains("n_routed_experts")) config["num_experts_per_tok"] = 6;
    with_floored_head_dim(config);
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
  const std::string readme = vramfit::test::read_text(kSource / "README.md");
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

TEST_CASE("architectures: a config's architectures class names its row", "[spec][arch]") {
  // vLLM's registry picks the implementation by the class: <model_type without underscores>ForCausalLM.
  const auto type_of = [](std::string_view c) {
    const Architecture* a = find_architecture_by_class(c);
    return a == nullptr ? std::string_view("none") : a->model_type;
  };
  // Not a causal LM class, a prefix of one, an unknown or empty name: none.
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"DeepseekV3ForCausalLM", "deepseek_v3"},   {"GptOssForCausalLM", "gpt_oss"},
      {"GPTNeoXForCausalLM", "gpt_neox"},         {"Qwen3MoeForCausalLM", "qwen3_moe"},
      {"Llama4ForCausalLM", "llama4_text"},       {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
      {"MiniMaxM2ForCausalLM", "minimax_m2"},     {"Gemma3ForConditionalGeneration", "none"},
      {"GPT2LMHeadModel", "none"},                {"DeepseekV32ForCausalLM", "none"},
      {"DeepseekForCausalLM", "none"},            {"ForCausalLM", "none"},
      {"", "none"}};
  for (const auto& [cls, type] : cases) {
    INFO(cls);
    CHECK(type_of(cls) == type);
  }
  // Each row's own class finds that row, not another read alike (the first match is returned).
  for (const Architecture& a : architectures()) {
    std::string cls;
    const std::string_view type = a.model_type.ends_with("_text") ? a.model_type.substr(0, a.model_type.size() - 5)
                                                                  : a.model_type;
    for (const char ch : type)
      if (ch != '_') cls += ch;
    INFO(a.model_type);
    CHECK(type_of(cls + "ForCausalLM") == a.model_type);
  }
}

TEST_CASE("architectures: a scaled logits head is a property of the row", "[spec][arch]") {
  // CohereForCausalLM: `logits = logits * self.logit_scale` after lm_head.
  REQUIRE(find_architecture("cohere") != nullptr);
  CHECK(find_architecture("cohere")->scaled_logits);
  CHECK(find_architecture("cohere2")->scaled_logits);
  CHECK_FALSE(find_architecture("llama")->scaled_logits);
  CHECK_FALSE(find_architecture("gemma2")->scaled_logits);  // soft-capped, counted apart
}

namespace {

std::size_t count_role(const LayerGroup& g, Role r) {
  std::size_t n = 0;
  for (const Linear& l : g.linears) n += l.role == r ? 1 : 0;
  return n;
}

const Linear* find_linear(const ModelSpec& s, const std::string& name, std::size_t nth = 0) {
  for (const LayerGroup& g : s.layers)
    for (const Linear& l : g.linears)
      if (l.name == name && nth-- == 0) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("architectures: every builder gives each decoder linear its role", "[spec][arch]") {
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(kSource / "tests/unit/spec/data/arch/transformers_counts.json"));
  std::size_t built = 0;
  for (const Architecture& a : architectures()) {
    const std::string id = std::string(a.model_type) + ":default";
    const nlohmann::json* found = nullptr;
    for (const auto& r : counts["results"])
      if (r["id"] == id && r.contains("params")) found = &r;
    if (found == nullptr) continue;  // vision-language text models and configs that do not build by default
    nlohmann::json config = (*found)["config"];
    if (config["num_experts_per_tok"].is_null() && config.contains("n_routed_experts")) config["num_experts_per_tok"] = 6;
    with_floored_head_dim(config);
    INFO(id);
    const ModelSpec s = from_config(config, "config.json");
    ++built;
    for (const LayerGroup& g : s.layers) {
      for (const Linear& l : g.linears) {
        INFO(l.name);
        CHECK(l.role != Role::other);
      }
      // One output projection per block; the norms' outputs always have a reader.
      CHECK(count_role(g, Role::attn_out) == 1);
      CHECK(count_role(g, Role::attn_in) >= 1);
      CHECK(count_role(g, Role::mlp_in) >= 1);
      CHECK(count_role(g, Role::mlp_out) >= 1);
      CHECK(count_role(g, Role::router) == (g.moe ? (s.moe.shared_expert_gate ? 2u : 1u) : 0u));
    }
  }
  CHECK(built >= 30);
}

TEST_CASE("architectures: roles where names are ambiguous or internal", "[spec][arch]") {
  // GPT-2 names both output projections c_proj: the attention's (hidden -> hidden) comes first.
  const ModelSpec gpt2 = from_config(nlohmann::json{{"model_type", "gpt2"}, {"n_embd", 768}, {"n_layer", 2},
                                                    {"n_head", 12}, {"vocab_size", 50257}, {"n_positions", 1024}},
                                     "config.json");
  REQUIRE(find_linear(gpt2, "c_proj", 0) != nullptr);
  CHECK(find_linear(gpt2, "c_proj", 0)->role == Role::attn_out);
  CHECK(find_linear(gpt2, "c_proj", 0)->in_features == 768);
  REQUIRE(find_linear(gpt2, "c_proj", 1) != nullptr);
  CHECK(find_linear(gpt2, "c_proj", 1)->role == Role::mlp_out);
  CHECK(find_linear(gpt2, "c_proj", 1)->in_features == 3072);
  CHECK(find_linear(gpt2, "c_attn")->role == Role::attn_in);
  CHECK(find_linear(gpt2, "c_fc")->role == Role::mlp_in);

  // DeepSeek's multi-head latent attention: q_a and kv_a read the norm, q_b and kv_b read them.
  const ModelSpec ds = from_config(
      nlohmann::json{{"model_type", "deepseek_v3"}, {"hidden_size", 1024}, {"num_hidden_layers", 2},
                     {"num_attention_heads", 8}, {"num_key_value_heads", 8}, {"intermediate_size", 2048},
                     {"moe_intermediate_size", 256}, {"n_routed_experts", 8}, {"num_experts_per_tok", 2},
                     {"n_shared_experts", 1}, {"first_k_dense_replace", 1}, {"q_lora_rank", 384},
                     {"kv_lora_rank", 128}, {"qk_nope_head_dim", 64}, {"qk_rope_head_dim", 32}, {"v_head_dim", 64},
                     {"vocab_size", 32000}, {"max_position_embeddings", 4096}},
      "config.json");
  CHECK(find_linear(ds, "q_a_proj")->role == Role::attn_in);
  CHECK(find_linear(ds, "kv_a_proj_with_mqa")->role == Role::attn_in);
  CHECK(find_linear(ds, "q_b_proj")->role == Role::attn_inner);
  CHECK(find_linear(ds, "kv_b_proj")->role == Role::attn_inner);
  CHECK(find_linear(ds, "gate")->role == Role::router);
  CHECK(find_linear(ds, "shared_experts.gate_proj")->role == Role::mlp_in);
  CHECK(find_linear(ds, "shared_experts.down_proj")->role == Role::mlp_out);
  CHECK(find_linear(ds, "gate_proj")->role == Role::mlp_in);  // the dense first layer's

  // gemma's RMSNorm scales in fp32: a property the builder sets, not a name prefix.
  const auto small = [](const char* type) {
    return nlohmann::json{{"model_type", type},     {"hidden_size", 256}, {"num_hidden_layers", 2},
                          {"num_attention_heads", 4}, {"num_key_value_heads", 1}, {"head_dim", 64},
                          {"intermediate_size", 512}, {"vocab_size", 1000}, {"max_position_embeddings", 2048}};
  };
  CHECK(from_config(small("gemma2"), "config.json").norm_fp32_scale);
  CHECK_FALSE(from_config(small("llama"), "config.json").norm_fp32_scale);
}

TEST_CASE("architectures: config.cpp decides nothing by model_type name", "[spec][arch]") {
  // What a type does differently is a field of its row (architectures.hpp): the builder lays out
  // rows and never tests a type's name, so adding a type is writing a row (#16).
  const std::string src = vramfit::test::read_text(kSource / "src/spec/config.cpp");
  CHECK(src.find("model_type ==") == std::string::npos);
  CHECK(src.find("model_type !=") == std::string::npos);
  CHECK(src.find("find_architecture(\"") == std::string::npos);
}

// --- session 10 (arch3): gemma4_text, minicpm3, youtu --------------------------------------------

namespace {

/// gen_s10.py's gemma4-e2b-mini: Gemma-4-E2B's layout narrowed (10 layers, 5 and 9 full, the last 4
/// KV-shared with a double-wide MLP, per-layer inputs of 256).
constexpr const char* kGemma4E2bMini = R"({"model_type": "gemma4_text", "hidden_size": 1024,
    "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
    "global_head_dim": 512, "num_hidden_layers": 10, "num_kv_shared_layers": 4, "use_double_wide_mlp": true,
    "hidden_size_per_layer_input": 256, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
    "sliding_window": 512, "max_position_embeddings": 131072, "final_logit_softcapping": 30.0,
    "tie_word_embeddings": true})";

std::uint64_t kv_part(const vramfit::engine::Breakdown& b) {
  const auto* c = b.find(vramfit::engine::ComponentId::kv_cache);
  REQUIRE(c != nullptr);
  return c->bytes.value();
}

}  // namespace

TEST_CASE("gemma4_text: full layers of global_head_dim, KV-shared layers, per-layer inputs", "[spec][arch]") {
  const ModelSpec s = from_config_text(kGemma4E2bMini, "config.json");
  // Layers 0-4 sliding (own keys and values), 5 full (head_dim 512), 6-8 sliding and 9 full reading shared
  // keys and values (no k_proj / v_proj / k_norm) with a double-wide MLP.
  REQUIRE(s.layers.size() == 4);
  CHECK(s.layers[0].count == 5);
  CHECK(s.layers[0].head_dim == 0);
  CHECK_FALSE(s.layers[0].kv_shared);
  CHECK(s.layers[1].count == 1);
  CHECK(s.layers[1].head_dim == 512);
  // find_linear counts the groups' linears: group 1 is layer 5.
  CHECK(find_linear(s, "q_proj", 1)->out_features == 8 * 512);
  CHECK(find_linear(s, "k_proj", 1)->out_features == 512);
  CHECK(find_linear(s, "k_proj", 2) == nullptr);  // the shared groups compute no keys
  CHECK(s.layers[2].kv_shared);
  CHECK(s.layers[2].count == 3);
  CHECK(s.layers[2].intermediate == 4096);
  CHECK(find_linear(s, "gate_proj", 2)->out_features == 4096);
  CHECK(s.layers[3].head_dim == 512);
  CHECK(s.layers[3].kv_shared);
  CHECK(s.layers[3].count == 1);
  // Hand count (embeddings V*H, per-layer embeddings V*L*P, their projection H*L*P and norm P, final
  // norm H; each layer's q/k/v/o, q/k norms, MLP (twice as wide when shared), 4 norms, gate/projection/norm
  // of the per-layer input), checked on the H200 against transformers 5.17 (tests/accuracy/arch).
  CHECK(s.params == 1089527808);
  // Keys + values a token adds: layer 5 (1 kv head of 512) and layers 0-4 (1 of 256); the shared layers none.
  CHECK(s.kv_full_per_token == 2 * 512);
  CHECK(s.kv_sliding_per_token == 5 * 2 * 256);
  CHECK(s.sliding_layers == 8);
  CHECK(s.final_logit_softcap == 30.0);
  vramfit::spec::Workload w;
  w.mode = vramfit::spec::Mode::generate;
  w.batch = 1;
  w.seq = 16;
  w.new_tokens = 20000;
  // The last decode step (the peak of a long generation): the full layer at every position, the
  // sliding ones at the window (bf16).
  CHECK(kv_part(vramfit::engine::estimate(s, w)) == (2ULL * 512 * 20016 + 5ULL * 2 * 256 * 512) * 2);
}

TEST_CASE("gemma4_text: the MoE block beside the MLP, attention_k_eq_v", "[spec][arch]") {
  const ModelSpec s = from_config_text(R"({"model_type": "gemma4_text", "hidden_size": 1024,
      "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
      "global_head_dim": 512, "num_global_key_value_heads": 1, "attention_k_eq_v": true, "enable_moe_block": true,
      "num_experts": 16, "top_k_experts": 4, "moe_intermediate_size": 512, "hidden_size_per_layer_input": 0,
      "num_hidden_layers": 6, "vocab_size": 262144, "sliding_window": 1024})",
                                       "config.json");
  REQUIRE(s.layers.size() == 2);
  CHECK(s.layers[0].moe);
  CHECK(s.layers[1].kv_heads == 1);
  // The full layer (the last) has no v_proj: its values are its keys.
  CHECK(find_linear(s, "v_proj", 0) != nullptr);  // group 0: layers 0-4
  CHECK(find_linear(s, "v_proj", 1) == nullptr);
  CHECK(find_linear(s, "k_proj", 1)->out_features == 512);
  CHECK(find_linear(s, "experts.gate_up_proj")->copies == 16);
  CHECK(find_linear(s, "mlp.gate_proj")->shared_expert);
  CHECK(s.moe.num_experts == 16);
  CHECK(s.moe.experts_per_token == 4);
  CHECK(s.moe.shared_intermediate == 1024);
  CHECK(s.params == 478827104);
  CHECK(s.kv_full_per_token == 2 * 512);
  CHECK(s.kv_sliding_per_token == 5 * 2 * 4 * 256);
}

TEST_CASE("gemma4_text: a KV-shared layer with no layer of its kind to read from is refused", "[spec][arch]") {
  // 8 layers: 5 and 7 full, the last 3 shared: layer 5 would read full-attention keys nobody stored.
  try {
    (void)from_config_text(R"({"model_type": "gemma4_text", "hidden_size": 1024, "intermediate_size": 2048,
        "num_attention_heads": 8, "num_key_value_heads": 1, "num_hidden_layers": 8, "num_kv_shared_layers": 3,
        "vocab_size": 1000})",
                           "config.json");
    FAIL("accepted");
  } catch (const vramfit::InputError& e) {
    CHECK(e.diagnostics()[0].field == "config.json: num_kv_shared_layers");
    CHECK(std::string(e.what()).find("layer 5 reads the shared keys and values of the full_attention layers") !=
          std::string::npos);
  }
}

TEST_CASE("minicpm3 and youtu: dense MLA whose cache keeps the latent", "[spec][arch]") {
  // gen_s10.py's minicpm3-mini: v_head_dim left out (MiniCPM3Config: hidden / heads = 64).
  const ModelSpec m = from_config_text(R"({"model_type": "minicpm3", "hidden_size": 1024, "intermediate_size": 2560,
      "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": 768, "kv_lora_rank": 256,
      "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "num_hidden_layers": 8, "vocab_size": 73448})",
                                       "config.json");
  CHECK(m.v_head_dim == 64);
  CHECK(m.moe.num_experts == 0);
  CHECK(m.mla_latent_cache);
  CHECK(m.tied_embeddings);
  CHECK(m.scaled_embeddings);
  CHECK(m.params == 168821760);
  CHECK(find_linear(m, "kv_b_proj")->out_features == 16 * (64 + 64));
  vramfit::spec::Workload w;
  w.mode = vramfit::spec::Mode::generate;
  w.batch = 1;
  w.seq = 16;
  w.new_tokens = 20000;
  // 8 layers of (kv_lora_rank + qk_rope_head_dim) a position, bf16; not 16 heads x (64 + 32 + 64).
  const auto b = vramfit::engine::estimate(m, w);
  CHECK(kv_part(b) == 8ULL * (256 + 32) * 20016 * 2);
  // Beside it, torch.cat's copy of one layer's latent and the layer's expansion over every position:
  // kv_b_proj's output (16 x (64 + 64)) and the new keys (16 x (64 + 32)).
  const auto* temp = b.find(vramfit::engine::ComponentId::temporaries);
  REQUIRE(temp != nullptr);
  CHECK(temp->bytes.value() == 8ULL * (256 + 32) * 20016 * 2 / 16 + 16ULL * (128 + 96) * 20016 * 2);

  const ModelSpec y = from_config_text(R"({"model_type": "youtu", "hidden_size": 1024, "intermediate_size": 3072,
      "num_attention_heads": 8, "num_key_value_heads": 8, "q_lora_rank": 768, "kv_lora_rank": 512,
      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_hidden_layers": 8,
      "vocab_size": 128256})",
                                       "config.json");
  CHECK(y.params == 244083712);
  CHECK(y.mla_latent_cache);
  CHECK(y.tied_embeddings);
  CHECK_FALSE(y.scaled_embeddings);
  // Every MLA row of transformers 5.17 caches the latent (DeepseekV2/V3Attention too).
  for (const char* t : {"deepseek_v2", "deepseek_v3", "glm4_moe_lite", "axk1", "minicpm3", "youtu"}) {
    INFO(t);
    CHECK(find_architecture(t)->mla_latent_cache);
  }
}
