// Tests of from_config / from_config_text: exact parameter counts and every diagnostic.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"
#include "../../cli/cli_helper.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

ModelSpec parse(const std::string& text) { return from_config_text(text, "config.json"); }

/// The diagnostics thrown while parsing `text` (empty when it parses).
std::vector<Diagnostic> diags_of(const std::string& text) {
  try {
    (void)parse(text);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

const Linear* find_linear(const LayerGroup& g, const std::string& name) {
  for (const Linear& l : g.linears)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<std::string> names_of(const LayerGroup& g) {
  std::vector<std::string> n;
  for (const Linear& l : g.linears) n.push_back(l.name);
  return n;
}

bool has_note(const ModelSpec& s, const std::string& part) {
  for (const auto& n : s.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// A small Llama config to vary in the diagnostic tests.
const char* kLlama = R"({"model_type":"llama","hidden_size":256,"intermediate_size":688,"num_hidden_layers":2,
  "num_attention_heads":8,"num_key_value_heads":2,"vocab_size":1000})";

std::string llama_with(const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(kLlama);
  j[key] = nlohmann::json::parse(value);
  return j.dump();
}

std::string llama_without(const std::string& key) {
  nlohmann::json j = nlohmann::json::parse(kLlama);
  j.erase(key);
  return j.dump();
}

}  // namespace

// --- exact counts ----------------------------------------------------------------------

TEST_CASE("config: measured truth models have the exact parameter and buffer counts", "[spec]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_TRUTH_DIR) / "models";
  if (!std::filesystem::exists(dir)) {
    WARN("no truth folder at " << dir.string() << ": skipped");
    return;
  }
  // params and buffer_bytes as measured by ../shared/truth/measure.py (transformers 5.17).
  struct Truth {
    const char* name;
    std::uint64_t params, buffers;
  };
  const Truth truths[] = {
      {"gpt2", 124439808, 0},
      {"gpt2-medium", 354823168, 0},
      {"llama-3.1-8b", 8030261248, 512},
      {"llama-3.2-1b", 1235814400, 256},
      {"qwen2.5-0.5b", 494032768, 256},
      {"qwen2.5-1.5b", 1543714304, 512},
      {"qwen2.5-7b", 7615616512, 512},
      {"smollm2-135m", 134515008, 256},
      {"smollm2-360m", 361821120, 256},
  };
  for (const Truth& t : truths) {
    INFO(t.name);
    const auto path = dir / (std::string(t.name) + ".json");
    REQUIRE(std::filesystem::exists(path));
    const ModelSpec s = from_config_text(vramfit::test::read_text(path), path.string());
    CHECK(s.params == t.params);
    CHECK(s.buffer_bytes == t.buffers);
    CHECK(s.params == count_params(s));
    CHECK(s.source == "config");
    CHECK(s.notes.empty());
  }
}

TEST_CASE("config: other architectures match transformers' counts exactly", "[spec]") {
  // Each config was built with transformers 5.17 (AutoModelForCausalLM.from_config on the
  // meta device) and counted with sum(p.numel() for p in model.parameters()) and the bytes
  // of model.buffers(). The real models among them also match their published counts:
  // Mistral-7B-v0.1 7241732096, Mixtral-8x7B 46702792704, Qwen3-0.6B 596049920,
  // Gemma-2-2b 2614341888 (Gemma 2 report + tied embedding), Phi-3-mini 3821079552,
  // OLMoE-1B-7B 6919161856, DeepSeek-V2-Lite 15706484224 (its safetensors), pythia-160m
  // 162322944 (EleutherAI/pythia README), phi-2 2779683840, gemma-2b 2506172416,
  // gemma-3-1b 999885952. "tiny-*" configs exercise options (biases, sparse steps, ...).
  struct Case {
    const char* name;
    const char* json;
    std::uint64_t params, buffers;
  };
  const Case
      cases[] =
          {
              {"deepseek-v2-lite",
               R"({"model_type":"deepseek_v2","hidden_size":2048,"intermediate_size":10944,"moe_intermediate_size":1408,"num_hidden_layers":27,"num_attention_heads":16,"num_key_value_heads":16,"n_shared_experts":2,"n_routed_experts":64,"num_experts_per_tok":6,"first_k_dense_replace":1,"moe_layer_freq":1,"kv_lora_rank":512,"q_lora_rank":null,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,"vocab_size":102400,"max_position_embeddings":163840,"tie_word_embeddings":false,"topk_method":"greedy","n_group":1,"topk_group":1,"routed_scaling_factor":1.0,"scoring_func":"softmax","norm_topk_prob":false,"rope_scaling":{"beta_fast":32,"beta_slow":1,"factor":40,"mscale":0.707,"mscale_all_dim":0.707,"original_max_position_embeddings":4096,"type":"yarn"}})",
               15706484224, 256},
              {"deepseek-v3",
               R"({"model_type":"deepseek_v3","hidden_size":7168,"intermediate_size":18432,"moe_intermediate_size":2048,"num_hidden_layers":61,"num_attention_heads":128,"num_key_value_heads":128,"n_shared_experts":1,"n_routed_experts":256,"num_experts_per_tok":8,"first_k_dense_replace":3,"moe_layer_freq":1,"kv_lora_rank":512,"q_lora_rank":1536,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,"vocab_size":129280,"max_position_embeddings":163840,"tie_word_embeddings":false,"n_group":8,"topk_group":4,"topk_method":"noaux_tc","scoring_func":"sigmoid","norm_topk_prob":true,"routed_scaling_factor":2.5,"num_nextn_predict_layers":1,"rope_scaling":{"beta_fast":32,"beta_slow":1,"factor":40,"mscale":1.0,"mscale_all_dim":1.0,"original_max_position_embeddings":4096,"type":"yarn"}})",
               671026404352, 59648},
              {"gemma-2-2b",
               R"({"model_type":"gemma2","hidden_size":2304,"intermediate_size":9216,"num_hidden_layers":26,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"vocab_size":256000,"max_position_embeddings":8192,"hidden_activation":"gelu_pytorch_tanh","hidden_act":"gelu_pytorch_tanh","sliding_window":4096,"final_logit_softcapping":30.0,"attn_logit_softcapping":50.0,"query_pre_attn_scalar":256})",
               2614341888, 1028},
              {"gemma-2b",
               R"({"model_type":"gemma","hidden_size":2048,"intermediate_size":16384,"num_hidden_layers":18,"num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,"vocab_size":256000,"max_position_embeddings":8192,"hidden_act":"gelu"})",
               2506172416, 1028},
              {"gemma-3-1b", R"({"model_type":"gemma3_text","hidden_size":1152,"intermediate_size":6912,"num_hidden_layers":26,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,"vocab_size":262144,"max_position_embeddings":32768,"sliding_window":512,"sliding_window_pattern":6,"rope_local_base_freq":10000,"rope_theta":1000000,"rope_scaling":null,"query_pre_attn_scalar":256,"hidden_activation":"gelu_pytorch_tanh","final_logit_softcapping":null,"attn_logit_softcapping":null})",
               999885952, 2052},
              {"gemma-3-4b-text",
               R"({"model_type":"gemma3_text","hidden_size":2560,"intermediate_size":10240,"num_hidden_layers":34,"num_attention_heads":8,"num_key_value_heads":4,"sliding_window":1024,"rope_scaling":{"factor":8.0,"rope_type":"linear"},"vocab_size":262208})",
               3880263168, 2052},
              {"mistral-7b-v0.1",
               R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"vocab_size":32000,"max_position_embeddings":32768,"sliding_window":4096,"tie_word_embeddings":false,"hidden_act":"silu","rms_norm_eps":1e-05,"rope_theta":10000.0})",
               7241732096, 512},
              {"mixtral-8x7b",
               R"({"model_type":"mixtral","hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"num_local_experts":8,"num_experts_per_tok":2,"vocab_size":32000,"max_position_embeddings":32768,"sliding_window":null,"tie_word_embeddings":false,"rope_theta":1000000.0,"hidden_act":"silu"})",
               46702792704, 512},
              {"olmoe-1b-7b",
               R"({"model_type":"olmoe","hidden_size":2048,"intermediate_size":1024,"num_hidden_layers":16,"num_attention_heads":16,"num_key_value_heads":16,"num_experts":64,"num_experts_per_tok":8,"vocab_size":50304,"max_position_embeddings":4096,"tie_word_embeddings":false,"clip_qkv":null,"norm_topk_prob":false})",
               6919161856, 512},
              {"phi-2",
               R"({"model_type":"phi","hidden_size":2560,"intermediate_size":10240,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":32,"partial_rotary_factor":0.4,"vocab_size":51200,"max_position_embeddings":2048,"hidden_act":"gelu_new","qk_layernorm":false,"tie_word_embeddings":false,"layer_norm_eps":1e-05})",
               2779683840, 128},
              {"phi-3-mini-4k",
               R"({"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":32,"vocab_size":32064,"max_position_embeddings":4096,"original_max_position_embeddings":4096,"sliding_window":2047,"tie_word_embeddings":false,"hidden_act":"silu","rope_scaling":null})",
               3821079552, 384},
              {"phi-4-mini",
               R"({"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,"num_hidden_layers":32,"num_attention_heads":24,"num_key_value_heads":8,"vocab_size":200064,"max_position_embeddings":131072,"original_max_position_embeddings":4096,"partial_rotary_factor":0.75,"sliding_window":262144,"tie_word_embeddings":true,"hidden_act":"silu"})",
               3836021760, 384},
              {"pythia-160m",
               R"({"model_type":"gpt_neox","hidden_size":768,"intermediate_size":3072,"num_hidden_layers":12,"num_attention_heads":12,"vocab_size":50304,"max_position_embeddings":2048,"rotary_pct":0.25,"rotary_emb_base":10000,"use_parallel_residual":true,"tie_word_embeddings":false,"hidden_act":"gelu","layer_norm_eps":1e-05})",
               162322944, 64},
              {"qwen1.5-moe-a2.7b",
               R"({"model_type":"qwen2_moe","hidden_size":2048,"intermediate_size":5632,"moe_intermediate_size":1408,"shared_expert_intermediate_size":5632,"num_experts":60,"num_experts_per_tok":4,"decoder_sparse_step":1,"mlp_only_layers":[],"num_hidden_layers":24,"num_attention_heads":16,"num_key_value_heads":16,"vocab_size":151936,"max_position_embeddings":8192,"tie_word_embeddings":false,"use_sliding_window":false,"sliding_window":32768,"max_window_layers":21})", 14315784192,
               512},
              {"qwen3-0.6b",
               R"({"model_type":"qwen3","hidden_size":1024,"intermediate_size":3072,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"vocab_size":151936,"max_position_embeddings":40960,"tie_word_embeddings":true,"attention_bias":false,"use_sliding_window":false,"sliding_window":null,"max_window_layers":28,"rope_theta":1000000,"hidden_act":"silu"})",
               596049920, 512},
              {"qwen3-30b-a3b",
               R"({"model_type":"qwen3_moe","hidden_size":2048,"intermediate_size":6144,"moe_intermediate_size":768,"num_experts":128,"num_experts_per_tok":8,"decoder_sparse_step":1,"mlp_only_layers":[],"num_hidden_layers":48,"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"vocab_size":151936,"max_position_embeddings":40960,"tie_word_embeddings":false,"use_sliding_window":false,"sliding_window":null,"max_window_layers":48})",
               30532122624, 512},
              {"starcoder2-3b",
               R"({"model_type":"starcoder2","hidden_size":3072,"intermediate_size":12288,"num_hidden_layers":30,"num_attention_heads":24,"num_key_value_heads":2,"vocab_size":49152,"max_position_embeddings":16384,"sliding_window":4096,"use_bias":true,"norm_epsilon":1e-05,"hidden_act":"gelu_pytorch_tanh","rope_theta":999999.4420358813})",
               3030371328, 512},
              {"tiny-deepseek-v3",
               R"({"model_type":"deepseek_v3","hidden_size":256,"intermediate_size":512,"moe_intermediate_size":64,"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":4,"n_shared_experts":1,"n_routed_experts":8,"num_experts_per_tok":2,"first_k_dense_replace":1,"kv_lora_rank":32,"q_lora_rank":48,"qk_rope_head_dim":16,"qk_nope_head_dim":32,"v_head_dim":32,"vocab_size":1000,"n_group":2,"topk_group":1,"tie_word_embeddings":false})",
               2540096, 160},
              {"tiny-gpt2-defaults",
               R"({"model_type":"gpt2","n_embd":64,"n_layer":2,"n_head":4,"vocab_size":300})", 184832, 0},
              {"tiny-gpt2-inner",
               R"({"model_type":"gpt2","n_embd":128,"n_layer":2,"n_head":4,"n_inner":300,"n_positions":64,"vocab_size":500})",
               360024, 0},
              {"tiny-llama-biases",
               R"({"model_type":"llama","hidden_size":256,"intermediate_size":688,"num_hidden_layers":3,"num_attention_heads":8,"num_key_value_heads":2,"vocab_size":1000,"attention_bias":true,"mlp_bias":true,"tie_word_embeddings":false})",
               2597280, 128},
              {"tiny-llama-notie",
               R"({"model_type":"llama","hidden_size":256,"intermediate_size":688,"num_hidden_layers":3,"num_attention_heads":8,"vocab_size":1000})",
               2885376, 128},
              {"tiny-neox-seq",
               R"({"model_type":"gpt_neox","hidden_size":128,"intermediate_size":512,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":500,"use_parallel_residual":false,"attention_bias":false})",
               523776, 32},
              {"tiny-olmoe-gqa",
               R"({"model_type":"olmoe","hidden_size":128,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"num_experts":4,"num_experts_per_tok":2,"vocab_size":500})",
               424960, 128},
              {"tiny-phi-qkln",
               R"({"model_type":"phi","hidden_size":128,"intermediate_size":512,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":500,"qk_layernorm":true})",
               525044, 64},
              {"tiny-qwen2-sliding",
               R"({"model_type":"qwen2","hidden_size":128,"intermediate_size":384,"num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500,"use_sliding_window":true,"sliding_window":64,"max_window_layers":4})",
               1310848, 128},
              {"tiny-qwen2moe-sparse",
               R"({"model_type":"qwen2_moe","hidden_size":128,"intermediate_size":384,"moe_intermediate_size":64,"shared_expert_intermediate_size":96,"num_experts":6,"num_experts_per_tok":2,"decoder_sparse_step":2,"mlp_only_layers":[3],"num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500})",
               1386368, 128},
              {"tiny-qwen3moe-mlponly",
               R"({"model_type":"qwen3_moe","hidden_size":128,"intermediate_size":384,"moe_intermediate_size":64,"num_experts":6,"num_experts_per_tok":2,"mlp_only_layers":[0,1,4],"num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":48,"vocab_size":500})",
               1459648, 192},
              {"tiny-starcoder2-nobias",
               R"({"model_type":"starcoder2","hidden_size":128,"intermediate_size":512,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500,"use_bias":false})",
               425728, 128},
          };
  for (const Case& c : cases) {
    INFO(c.name);
    const ModelSpec s = from_config_text(c.json, c.name);
    CHECK(s.params == c.params);
    CHECK(s.buffer_bytes == c.buffers);
    CHECK(s.params == count_params(s));
  }
}

TEST_CASE("config: every data/models preset matches its published parameter count", "[spec]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "data" / "models";
  if (!std::filesystem::exists(dir)) {
    WARN("no data/models folder: skipped");
    return;
  }
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().filename().string());
    const nlohmann::json preset = nlohmann::json::parse(vramfit::test::read_text(entry.path()));
    REQUIRE(preset.contains("config"));
    const ModelSpec s = from_config(preset["config"], preset.value("id", std::string("preset")));
    CHECK(s.params == count_params(s));
    CHECK(s.params > 0);
    if (preset.contains("published_params") && !preset["published_params"].is_null()) {
      CHECK(s.params == preset["published_params"].get<std::uint64_t>());
      ++checked;
    } else {
      // Without a published count the preset says why and states the count from its config
      // ("computed from the config...: 70,553,706,496"); that figure must be the one vramfit
      // computes, so the text cannot drift from the counting rules.
      const std::string why = preset.value("published_params_source", std::string());
      const std::string key = "computed from the config";
      const auto at = why.find(key);
      REQUIRE(at != std::string::npos);
      const auto colon = why.find(": ", at);
      REQUIRE(colon != std::string::npos);
      std::string digits;
      for (std::size_t i = colon + 2; i < why.size(); ++i) {
        if (why[i] == ',') continue;
        if (!std::isdigit(static_cast<unsigned char>(why[i]))) break;
        digits += why[i];
      }
      REQUIRE_FALSE(digits.empty());
      CHECK(std::stoull(digits) == s.params);
    }
  }
  if (checked == 0) WARN("no preset has a published_params yet");
}

// --- layouts -----------------------------------------------------------------------------

TEST_CASE("config: llama layout, names, shapes and buffers", "[spec]") {
  const ModelSpec s = parse(kLlama);
  CHECK(s.family == "llama");
  CHECK(s.model_type == "llama");
  CHECK(s.name == "config.json");
  CHECK(s.hidden_size == 256);
  CHECK(s.num_layers == 2);
  CHECK(s.num_heads == 8);
  CHECK(s.num_kv_heads == 2);
  CHECK(s.head_dim == 32);
  CHECK(s.intermediate_size == 688);
  CHECK(s.vocab_size == 1000);
  CHECK_FALSE(s.tied_embeddings);  // LlamaConfig default
  CHECK(s.gated_mlp);
  CHECK(s.norm == Norm::rms);
  CHECK(s.activation == Activation::silu);
  CHECK_FALSE(s.learned_positions);
  CHECK_FALSE(s.qk_norm);
  CHECK(s.moe.num_experts == 0);
  REQUIRE(s.layers.size() == 1);
  const LayerGroup& g = s.layers[0];
  CHECK(g.count == 2);
  CHECK(names_of(g) == std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                "up_proj", "down_proj"});
  CHECK(find_linear(g, "q_proj")->out_features == 256);
  CHECK(find_linear(g, "k_proj")->out_features == 64);
  CHECK(find_linear(g, "down_proj")->in_features == 688);
  CHECK_FALSE(find_linear(g, "q_proj")->bias);
  CHECK(g.norm_params == 512);
  CHECK(s.embedding_params == 256000);
  CHECK(s.lm_head_params == 256000);
  CHECK(s.final_norm_params == 256);
  CHECK(s.buffer_bytes == 2 * 16 * 4);  // inv_freq + original_inv_freq, head_dim/2 fp32 each
  CHECK(s.params == 1897728);
}

TEST_CASE("config: attention_bias and mlp_bias add biases, qwen2 has q/k/v biases always", "[spec]") {
  const ModelSpec b = parse(llama_with("attention_bias", "true"));
  for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"}) CHECK(find_linear(b.layers[0], n)->bias);
  CHECK_FALSE(find_linear(b.layers[0], "gate_proj")->bias);
  const ModelSpec m = parse(llama_with("mlp_bias", "true"));
  CHECK(find_linear(m.layers[0], "down_proj")->bias);

  const ModelSpec q = parse(llama_with("model_type", "\"qwen2\""));
  CHECK(find_linear(q.layers[0], "q_proj")->bias);
  CHECK(find_linear(q.layers[0], "k_proj")->bias);
  CHECK(find_linear(q.layers[0], "v_proj")->bias);
  CHECK_FALSE(find_linear(q.layers[0], "o_proj")->bias);
}

TEST_CASE("config: tie_word_embeddings defaults per model type", "[spec]") {
  CHECK_FALSE(parse(kLlama).tied_embeddings);
  CHECK(parse(kLlama).lm_head_params == 256000);
  CHECK(parse(llama_with("tie_word_embeddings", "true")).lm_head_params == 0);
  for (const char* t : {"mistral", "qwen2", "qwen3", "phi3"}) {
    INFO(t);
    CHECK_FALSE(parse(llama_with("model_type", std::string("\"") + t + "\"")).tied_embeddings);
  }
  for (const char* t : {"gemma", "gemma2", "gemma3_text"}) {
    INFO(t);
    const ModelSpec s = parse(llama_with("model_type", std::string("\"") + t + "\""));
    CHECK(s.tied_embeddings);
    CHECK(s.lm_head_params == 0);
    CHECK(s.scaled_embeddings);
  }
  CHECK(
      parse(R"({"model_type":"gpt2","n_embd":64,"n_layer":1,"n_head":4,"vocab_size":100})").tied_embeddings);
}

TEST_CASE("config: head_dim null or absent is hidden/heads, num_key_value_heads absent is heads", "[spec]") {
  // Config classes with their own head_dim default (transformers 5.17): gemma* 256, qwen3 128.
  CHECK(parse(llama_with("model_type", "\"gemma\"")).head_dim == 256);
  CHECK(parse(llama_with("model_type", "\"gemma2\"")).head_dim == 256);
  CHECK(parse(llama_with("model_type", "\"qwen3\"")).head_dim == 128);
  CHECK(parse(llama_with("model_type", "\"qwen3_moe\"")
                  .insert(1, R"("num_experts":2,"num_experts_per_tok":1,"moe_intermediate_size":64,)"))
            .head_dim == 32);
  const ModelSpec a = parse(llama_with("head_dim", "null"));
  CHECK(a.head_dim == 32);
  const ModelSpec b = parse(llama_with("head_dim", "64"));
  CHECK(b.head_dim == 64);
  CHECK(find_linear(b.layers[0], "q_proj")->out_features == 512);
  CHECK(find_linear(b.layers[0], "o_proj")->in_features == 512);
  CHECK(b.buffer_bytes == 256);
  const ModelSpec c = parse(llama_without("num_key_value_heads"));
  CHECK(c.num_kv_heads == 8);
  // head_dim given: heads need not divide hidden (Mistral-Nemo: 5120 / 32 heads of 128).
  CHECK(diags_of(llama_with("head_dim", "48")).empty());
}

TEST_CASE("config: gpt2 layout with Conv1D names, biases and learned positions", "[spec]") {
  const ModelSpec s = parse(R"({"model_type":"gpt2","n_embd":128,"n_layer":2,"n_head":4,"n_inner":null,
    "n_positions":64,"vocab_size":500,"activation_function":"gelu_new"})");
  CHECK(s.family == "gpt2");
  CHECK(s.hidden_size == 128);
  CHECK(s.num_layers == 2);
  CHECK(s.num_heads == 4);
  CHECK(s.num_kv_heads == 4);
  CHECK(s.head_dim == 32);
  CHECK(s.intermediate_size == 512);  // n_inner null: 4 * n_embd
  CHECK(s.max_positions == 64);
  CHECK(s.learned_positions);
  CHECK_FALSE(s.gated_mlp);
  CHECK(s.norm == Norm::layer);
  CHECK(s.activation == Activation::gelu_tanh_python);
  CHECK(s.tied_embeddings);
  CHECK(s.buffer_bytes == 0);
  CHECK(s.attention_dropout == 0.1);  // GPT2Config attn_pdrop
  CHECK(s.hidden_dropout == 0.1);
  CHECK(s.embedding_dropout == 0.1);
  const LayerGroup& g = s.layers[0];
  CHECK(names_of(g) == std::vector<std::string>{"c_attn", "c_proj", "c_fc", "c_proj"});
  CHECK(g.linears[0].out_features == 384);
  for (const Linear& l : g.linears) CHECK(l.bias);
  CHECK(g.linears[2].out_features == 512);
  CHECK(g.norm_params == 4 * 128);
  CHECK(s.embedding_params == 500 * 128 + 64 * 128);
  CHECK(s.lm_head_params == 0);
  CHECK(s.final_norm_params == 256);
}

TEST_CASE("config: gpt_neox, phi3 and phi layouts", "[spec]") {
  const ModelSpec n = parse(R"({"model_type":"gpt_neox","hidden_size":128,"intermediate_size":512,
    "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":500,"rotary_pct":0.25})");
  CHECK(n.family == "gpt_neox");
  CHECK(names_of(n.layers[0]) ==
        std::vector<std::string>{"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"});
  for (const Linear& l : n.layers[0].linears) CHECK(l.bias);
  CHECK(n.parallel_residual);
  CHECK(n.activation == Activation::gelu);
  CHECK_FALSE(n.tied_embeddings);
  CHECK(n.buffer_bytes == 2 * 4 * 4);  // rotary dim 8 of head_dim 32
  CHECK_FALSE(
      parse(R"({"model_type":"gpt_neox","hidden_size":128,"intermediate_size":512,"num_hidden_layers":2,
    "num_attention_heads":4,"vocab_size":500,"use_parallel_residual":false})")
          .parallel_residual);

  const ModelSpec p3 = parse(R"({"model_type":"phi3","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500})");
  CHECK(p3.family == "phi3");
  CHECK(names_of(p3.layers[0]) ==
        std::vector<std::string>{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"});
  CHECK(p3.layers[0].linears[0].out_features == 128 + 2 * 64);
  CHECK(p3.layers[0].linears[2].out_features == 512);
  for (const Linear& l : p3.layers[0].linears) CHECK_FALSE(l.bias);

  const ModelSpec p = parse(R"({"model_type":"phi","hidden_size":128,"intermediate_size":512,
    "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":500,"partial_rotary_factor":0.5})");
  CHECK(p.family == "phi");
  CHECK(names_of(p.layers[0]) ==
        std::vector<std::string>{"q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"});
  CHECK(p.parallel_residual);
  CHECK(p.layers[0].norm_params == 256);       // one LayerNorm per layer
  CHECK(p.lm_head_params == 500 * 128 + 500);  // lm_head has a bias
  CHECK(p.activation == Activation::gelu_tanh_python);
}

TEST_CASE("config: a tied head keeps its own bias (phi, phimoe)", "[spec]") {
  // transformers ties lm_head.weight only: PhiForCausalLM's lm_head bias (bias=True) and
  // Phimoe's (lm_head_bias) stay parameters of their own. Counted with transformers 5.17 on the
  // meta device: 1310696 and 3931624 (vramfit counted 1000 fewer before the table refactor).
  CHECK(parse(R"({"model_type":"phi","hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
                 "num_attention_heads":4,"vocab_size":1000,"tie_word_embeddings":true})")
            .params == 1310696);
  CHECK(parse(R"({"model_type":"phimoe","hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
                 "num_attention_heads":4,"num_key_value_heads":4,"num_local_experts":4,"num_experts_per_tok":2,
                 "vocab_size":1000,"tie_word_embeddings":true,"lm_head_bias":true})")
            .params == 3931624);
}

TEST_CASE("config: remote-code exaone and internlm2, counted by hand from their modeling files", "[spec]") {
  // Not in transformers 5.17 (trust_remote_code), so not built on the device: the counts are
  // worked out from modeling_exaone.py / modeling_internlm2.py and agree with the Hub's sizes.
  // EXAONE-3.0-7.8B-Instruct's config.json (EXAONE 3.5 7.8B has the same shapes): 2 x 102400 x
  // 4096 (wte, lm_head) + 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096) + 4096
  // = 7,818,448,896 (the Hub: 7.82B; the model card: 6.98B without embeddings).
  const ModelSpec e = parse(R"({"activation_function":"silu","architectures":["ExaoneForCausalLM"],
      "hidden_size":4096,"intermediate_size":14336,"layer_norm_epsilon":1e-05,"max_position_embeddings":4096,
      "model_type":"exaone","num_attention_heads":32,"num_key_value_heads":8,"num_layers":32,"rope_scaling":null,
      "rope_theta":500000.0,"tie_word_embeddings":false,"vocab_size":102400})");
  CHECK(e.params == 7818448896);
  CHECK(e.num_layers == 32);
  CHECK(e.layers.at(0).linears.at(3).name == "out_proj");
  CHECK(e.layers.at(0).linears.at(4).name == "c_fc_0");
  CHECK(e.layers.at(0).linears.at(6).name == "c_proj");
  // ExaoneConfig: intermediate_size null is 4 x hidden; tie_word_embeddings defaults to True.
  const ModelSpec e2 = parse(R"({"model_type":"exaone","hidden_size":256,"num_layers":2,"num_attention_heads":4,
      "vocab_size":1000})");
  CHECK(e2.intermediate_size == 1024);
  CHECK(e2.tied_embeddings);
  CHECK(e2.params == 1000 * 256 + 2 * (4 * 256 * 256 + 3 * 256 * 1024 + 2 * 256) + 256);
  // internlm2_5-7b-chat's config.json: 2 x 92544 x 4096 (tok_embeddings, output) + 32 x (4096 x
  // (32 + 16) x 128 (wqkv) + 4096^2 (wo) + 3 x 4096 x 14336 + 2 x 4096) + 4096 = 7,737,708,544
  // (the Hub: 7.74B).
  const ModelSpec i = parse(R"({"architectures":["InternLM2ForCausalLM"],"bias":false,"hidden_act":"silu",
      "hidden_size":4096,"intermediate_size":14336,"max_position_embeddings":32768,"model_type":"internlm2",
      "num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,
      "rope_scaling":{"factor":2.0,"type":"dynamic"},"rope_theta":1000000,"tie_word_embeddings":false,
      "vocab_size":92544})");
  CHECK(i.params == 7737708544);
  REQUIRE(i.layers.at(0).linears.size() == 5);
  CHECK(i.layers.at(0).linears.at(0).name == "wqkv");
  CHECK(i.layers.at(0).linears.at(0).out_features == 6144);
  CHECK(i.layers.at(0).linears.at(1).name == "wo");
  CHECK(i.layers.at(0).linears.at(2).name == "w1");
  // InternLM2Config: bias=True by default, on wqkv and wo only.
  const ModelSpec ib = parse(R"({"model_type":"internlm2","hidden_size":256,"intermediate_size":512,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000})");
  CHECK(ib.params == 2 * 1000 * 256 + 2 * (256 * 512 + 512 + 256 * 256 + 256 + 3 * 256 * 512 + 2 * 256) + 256);
}

TEST_CASE("config: llama4_text sparse layers, dense width, shared expert and chunked attention", "[spec]") {
  // Llama4TextConfig: moe_layers absent -> every interleave_moe_layer_step-th layer from step - 1;
  // dense layers of intermediate_size_mlp; Llama4TextMoe: router, fused experts and a shared expert
  // of intermediate_size; chunked_attention on the rotary layers (all but every 4th).
  const std::string base = R"({"model_type":"llama4_text","hidden_size":256,"intermediate_size":128,
      "intermediate_size_mlp":512,"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,
      "head_dim":64,"vocab_size":1000,"num_local_experts":4,"num_experts_per_tok":1,
      "interleave_moe_layer_step":2,"attention_chunk_size":256)";
  const ModelSpec s = parse(base + "}");
  REQUIRE(s.layers.size() == 4);  // dense, MoE, dense, MoE
  CHECK_FALSE(s.layers[0].moe);
  CHECK(s.layers[1].moe);
  CHECK(s.intermediate_size == 512);
  CHECK(s.moe.expert_intermediate == 128);
  CHECK(s.moe.shared_intermediate == 128);
  CHECK_FALSE(s.moe.shared_expert_gate);
  CHECK(names_of(s.layers[1]) == std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "router",
                                                          "gate_up_proj", "down_proj", "shared_expert.gate_proj",
                                                          "shared_expert.up_proj", "shared_expert.down_proj"});
  CHECK(find_linear(s.layers[1], "gate_up_proj")->out_features == 256);
  CHECK(find_linear(s.layers[1], "gate_up_proj")->copies == 4);
  CHECK(s.qk_norm);                         // use_qk_norm (True): L2, no parameters
  CHECK(s.layers[0].norm_params == 2 * 256);
  CHECK(s.sliding_window == 256);
  CHECK(s.sliding_layers == 3);
  // An explicit moe_layers list and no_rope_layers decide instead; a null chunk size: no window.
  const ModelSpec l = parse(base + R"(,"moe_layers":[0],"no_rope_layers":[1,0,1,0]})");
  CHECK(l.layers.at(0).moe);
  CHECK(l.layers.at(0).count == 1);
  CHECK(l.sliding_layers == 2);
  CHECK(parse(base + R"(,"attention_chunk_size":null})").sliding_window == 0);
  // A dense layer needs intermediate_size_mlp, and the message names it.
  const auto d = diags_of(R"({"model_type":"llama4_text","hidden_size":256,"intermediate_size":128,
      "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":1000,"num_local_experts":4,
      "num_experts_per_tok":1,"interleave_moe_layer_step":2})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: intermediate_size_mlp");
}

TEST_CASE("config: activations", "[spec]") {
  CHECK(parse(llama_with("hidden_act", "\"swish\"")).activation == Activation::silu);
  CHECK(parse(llama_with("hidden_act", "\"gelu\"")).activation == Activation::gelu);
  CHECK(parse(llama_with("hidden_act", "\"gelu_pytorch_tanh\"")).activation == Activation::gelu_pytorch_tanh);
  CHECK(parse(llama_with("hidden_act", "\"relu\"")).activation == Activation::relu);
  CHECK(parse(llama_with("hidden_act", "\"relu2\"")).activation == Activation::relu2);
  CHECK(parse(llama_with("hidden_act", "\"xielu\"")).activation == Activation::xielu);
  const ModelSpec odd = parse(llama_with("hidden_act", "\"sqrtsoftplus\""));
  CHECK(odd.activation == Activation::silu);
  CHECK(has_note(odd, "activation 'sqrtsoftplus' is not modelled: counted as silu"));
  CHECK(parse(llama_with("model_type", "\"gemma\"")).activation == Activation::gelu_pytorch_tanh);
}

TEST_CASE("config: mixtral experts, router and MoE summary", "[spec]") {
  const ModelSpec s = parse(R"({"model_type":"mixtral","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500,
    "num_local_experts":8,"num_experts_per_tok":2})");
  CHECK(s.moe.num_experts == 8);
  CHECK(s.moe.experts_per_token == 2);
  CHECK(s.moe.expert_intermediate == 256);
  CHECK(s.moe.shared_intermediate == 0);
  CHECK(s.intermediate_size == 0);  // every layer is MoE
  REQUIRE(s.layers.size() == 1);
  const LayerGroup& g = s.layers[0];
  CHECK(g.moe);
  const Linear* gate = find_linear(g, "gate");
  REQUIRE(gate);
  CHECK(gate->out_features == 8);
  CHECK_FALSE(gate->bias);
  CHECK_FALSE(gate->expert);
  const Linear* up = find_linear(g, "up_proj");
  CHECK(up->copies == 8);
  CHECK(up->expert);
  CHECK(up->params() == 8ULL * 128 * 256);
}

TEST_CASE("config: qwen2_moe shared expert, its gate, sparse step and mlp_only_layers", "[spec]") {
  const ModelSpec s = parse(R"({"model_type":"qwen2_moe","hidden_size":128,"intermediate_size":384,
    "moe_intermediate_size":64,"shared_expert_intermediate_size":96,"num_experts":6,"num_experts_per_tok":2,
    "decoder_sparse_step":2,"mlp_only_layers":[3],"num_hidden_layers":6,"num_attention_heads":4,
    "num_key_value_heads":2,"vocab_size":500})");
  // Layers 1 and 5 are sparse ((i + 1) % 2 == 0, 3 is in mlp_only_layers).
  REQUIRE(s.layers.size() == 4);
  CHECK((s.layers[0].count == 1 && !s.layers[0].moe));
  CHECK((s.layers[1].count == 1 && s.layers[1].moe));
  CHECK((s.layers[2].count == 3 && !s.layers[2].moe));
  CHECK((s.layers[3].count == 1 && s.layers[3].moe));
  CHECK(s.intermediate_size == 384);
  CHECK(s.moe.shared_intermediate == 96);
  CHECK(s.moe.shared_expert_gate);
  const LayerGroup& m = s.layers[1];
  const Linear* sg = find_linear(m, "shared_expert.gate_proj");
  REQUIRE(sg);
  CHECK(sg->shared_expert);
  CHECK(sg->out_features == 96);
  const Linear* gate = find_linear(m, "shared_expert_gate");
  REQUIRE(gate);
  CHECK(gate->out_features == 1);
  CHECK(gate->shared_expert);
  CHECK(find_linear(m, "q_proj")->bias);  // qwen2 attention
  CHECK(s.params == 1386368);
}

TEST_CASE("config: deepseek MLA, dense-first layers and shared experts", "[spec]") {
  const ModelSpec s = parse(R"({"model_type":"deepseek_v3","hidden_size":256,"intermediate_size":512,
    "moe_intermediate_size":64,"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":4,
    "n_shared_experts":1,"n_routed_experts":8,"num_experts_per_tok":2,"first_k_dense_replace":1,
    "kv_lora_rank":32,"q_lora_rank":48,"qk_rope_head_dim":16,"qk_nope_head_dim":32,"v_head_dim":32,
    "vocab_size":1000})");
  CHECK(s.family == "deepseek");
  CHECK(s.kv_lora_rank == 32);
  CHECK(s.q_lora_rank == 48);
  CHECK(s.qk_rope_head_dim == 16);
  CHECK(s.qk_nope_head_dim == 32);
  CHECK(s.v_head_dim == 32);
  CHECK(s.head_dim == 48);
  CHECK(s.num_kv_heads == 4);
  REQUIRE(s.layers.size() == 2);
  CHECK((s.layers[0].count == 1 && !s.layers[0].moe));
  CHECK((s.layers[1].count == 3 && s.layers[1].moe));
  CHECK(names_of(s.layers[0]) == std::vector<std::string>{"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                                                          "kv_b_proj", "o_proj", "gate_proj", "up_proj",
                                                          "down_proj"});
  CHECK(s.layers[0].norm_params == 48 + 32 + 2 * 256);  // q_a/kv_a layernorms + two per layer
  CHECK(find_linear(s.layers[0], "kv_a_proj_with_mqa")->out_features == 48);
  CHECK(find_linear(s.layers[0], "kv_b_proj")->out_features == 4 * (32 + 32));
  CHECK(find_linear(s.layers[1], "shared_experts.up_proj")->out_features == 64);
  CHECK(s.moe.shared_intermediate == 64);
  CHECK(s.intermediate_size == 512);
  // e_score_correction_bias: 8 fp32 per MoE layer, + rotary 2 x 8 fp32.
  CHECK(s.buffer_bytes == 3 * 8 * 4 + 2 * 8 * 4);
  CHECK(s.params == 2540096);

  const ModelSpec v2 = parse(R"({"model_type":"deepseek_v2","hidden_size":256,"intermediate_size":512,
    "moe_intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"n_routed_experts":8,
    "num_experts_per_tok":2,"kv_lora_rank":32,"q_lora_rank":null,"qk_rope_head_dim":16,
    "qk_nope_head_dim":32,"v_head_dim":24,"vocab_size":1000})");
  CHECK(find_linear(v2.layers[0], "q_proj")->out_features == 4 * 48);
  CHECK(find_linear(v2.layers[0], "q_a_proj") == nullptr);
  CHECK(find_linear(v2.layers[0], "o_proj")->in_features == 4 * 24);
  CHECK(v2.layers.size() == 1);  // first_k_dense_replace absent: all MoE
  CHECK(v2.buffer_bytes == 2 * 8 * 4);
}

TEST_CASE("config: qk norms of qwen3, olmoe and gemma3", "[spec]") {
  const ModelSpec q3 = parse(llama_with("model_type", "\"qwen3\""));
  CHECK(q3.qk_norm);
  CHECK(q3.head_dim == 128);  // Qwen3Config's default head_dim, not hidden / heads
  CHECK(q3.layers[0].norm_params == 2 * 256 + 2 * 128);
  CHECK(parse(llama_with("model_type", "\"qwen3\"").insert(1, R"("head_dim":32,)")).layers[0].norm_params ==
        2 * 256 + 2 * 32);
  const ModelSpec o = parse(R"({"model_type":"olmoe","hidden_size":128,"intermediate_size":64,
    "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"num_experts":4,
    "num_experts_per_tok":2,"vocab_size":500})");
  CHECK(o.qk_norm);
  CHECK(o.layers[0].norm_params == 2 * 128 + 128 + 64);  // q_norm(hidden), k_norm(kv * head_dim)
  CHECK(o.params == 424960);
}

TEST_CASE("config: sliding windows", "[spec]") {
  const ModelSpec m = parse(llama_with("model_type", "\"mistral\"").insert(1, R"("sliding_window":4096,)"));
  CHECK(m.sliding_window == 4096);
  CHECK(m.sliding_layers == 2);
  const ModelSpec m0 = parse(llama_with("model_type", "\"mistral\"").insert(1, R"("sliding_window":null,)"));
  CHECK(m0.sliding_window == 0);
  CHECK(m0.sliding_layers == 0);
  const ModelSpec z = parse(llama_with("sliding_window", "0"));  // Qwen2MoeConfig's default
  CHECK(z.sliding_window == 0);

  const ModelSpec q = parse(R"({"model_type":"qwen2","hidden_size":128,"intermediate_size":384,
    "num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":500,
    "use_sliding_window":true,"sliding_window":64,"max_window_layers":4})");
  CHECK(q.sliding_window == 64);
  CHECK(q.sliding_layers == 2);
  const ModelSpec q0 = parse(R"({"model_type":"qwen2","hidden_size":128,"intermediate_size":384,
    "num_hidden_layers":6,"num_attention_heads":4,"vocab_size":500,"use_sliding_window":false,
    "sliding_window":4096})");
  CHECK(q0.sliding_layers == 0);
  CHECK(q0.sliding_window == 0);

  const ModelSpec g2 = parse(R"({"model_type":"gemma2","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":5,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":500,
    "sliding_window":4096})");
  CHECK(g2.sliding_layers == 3);  // layers 0, 2, 4
  CHECK(g2.final_logit_softcap == 30.0);
  CHECK(g2.attn_logit_softcap == 50.0);
  CHECK(g2.layers[0].norm_params == 4 * 128);
  CHECK(g2.scaled_embeddings);

  const ModelSpec g3 = parse(R"({"model_type":"gemma3_text","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":26,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":32,"vocab_size":500,
    "sliding_window":512})");
  CHECK(g3.sliding_layers == 22);  // every 6th layer is global
  CHECK(g3.sliding_window == 512);
  CHECK(g3.final_logit_softcap == 0);
  CHECK(g3.qk_norm);
  CHECK(g3.buffer_bytes == 4 * 16 * 4 + 4);  // two rotary pairs + embed_scale

  const ModelSpec lt = parse(R"({"model_type":"gemma3_text","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":3,"num_attention_heads":4,"head_dim":32,"vocab_size":500,"sliding_window":512,
    "layer_types":["sliding_attention","full_attention","full_attention"]})");
  CHECK(lt.sliding_layers == 1);
}

TEST_CASE("config: multimodal configs use text_config, with a note", "[spec]") {
  const ModelSpec s = parse(R"({"model_type":"gemma3","text_config":{"model_type":"gemma3_text",
    "hidden_size":2560,"intermediate_size":10240,"num_hidden_layers":34,"num_attention_heads":8,
    "num_key_value_heads":4,"sliding_window":1024},"vision_config":{"hidden_size":1152}})");
  CHECK(s.model_type == "gemma3_text");
  CHECK(s.family == "gemma");
  CHECK(s.head_dim == 256);       // Gemma3TextConfig default
  CHECK(s.vocab_size == 262208);  // Gemma3TextConfig default
  // Gemma3ForCausalLM of that text config (transformers 5.17), plus the vision part: a SigLIP
  // tower of SiglipVisionConfig's defaults at width 1152 (with its pooling head) and the
  // projector (1152 x 2560 + the 1152-wide norm), counted as spec/vision.cpp does.
  REQUIRE(s.vision);
  CHECK(s.vision->tower_params == 162309504);
  CHECK(s.vision->projector_params == 2950272);
  CHECK(s.params == 3880263168 + 162309504 + 2950272);
  CHECK(has_note(s, "multimodal config (model_type 'gemma3'): the language model is text_config ('gemma3_text')"));
  CHECK(has_note(s, "Gemma3TextConfig's defaults"));

  // Errors inside text_config name it.
  const auto d = diags_of(R"({"model_type":"llava","text_config":{"hidden_size":"x"}})");
  REQUIRE_FALSE(d.empty());
  CHECK(d[0].field == "config.json: text_config.hidden_size");
}

TEST_CASE("config: unknown model types are refused naming model_type, unless the caller has exact weights",
          "[spec]") {
  const auto d = diags_of(llama_with("model_type", "\"my_llm\""));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: model_type");
  CHECK(d[0].problem ==
        "model_type 'my_llm' is not one vramfit knows: its layout, and so its size, cannot be worked out from the "
        "config alone");
  CHECK(d[0].fix.find(".safetensors files") != std::string::npos);
  const auto none = diags_of(llama_without("model_type"));
  REQUIRE(none.size() == 1);
  CHECK(none[0].problem.rfind("the config has no model_type: ", 0) == 0);
  // Keys that announce another structure are named.
  const auto moe = diags_of(llama_with("model_type", "\"my_moe\"").insert(1, R"("num_experts":8,)"));
  REQUIRE(moe.size() == 1);
  CHECK(moe[0].problem.find(R"((and it has "num_experts", a structure a Llama-like decoder lacks))") !=
        std::string::npos);
  // With exact weights to come (safetensors headers, GGUF tensors): a Llama-like layout and a note.
  const ModelSpec g = from_config_text(llama_with("model_type", "\"my_llm\""), "config.json", UnknownType::generic);
  CHECK(g.family == "generic");
  CHECK(g.params == parse(kLlama).params);
  CHECK(has_note(g, "model_type 'my_llm' is not one vramfit knows: the weights are counted exactly from the "
                    "checkpoint's headers; activations and KV cache are approximated"));
}

TEST_CASE("config: hybrid models (state-space, linear-attention, conv layers) are refused naming the layer kind",
          "[spec]") {
  // A row that reads layer_types used to count its sliding entries and lay every other entry
  // out as full attention, exit 0 (olmo3 with a "mamba" layer; llama ignores layer_types).
  const std::string hybrid = R"(["sliding_attention","linear_attention","full_attention","linear_attention"])";
  // (qwen3_next lays its "linear_attention" layers out: tests/unit/spec/hybrid_test.cpp.)
  for (const std::string type : {"olmo3", "llama", "my_hybrid"}) {
    const std::string text = [&] {
      nlohmann::json j = nlohmann::json::parse(llama_with("layer_types", hybrid));
      j["model_type"] = type;
      j["num_hidden_layers"] = 4;
      return j.dump();
    }();
    const auto d = diags_of(text);
    REQUIRE(d.size() == 1);
    CHECK(d[0].field == "config.json: layer_types");
    CHECK(d[0].problem == "'linear_attention' layers (2 of 4, the first is layer 1) are not a kind vramfit lays out "
                          "(full, sliding or chunked attention): their caches and activations are not modelled, so "
                          "model_type '" +
                              type + "' cannot be estimated");
    CHECK(d[0].fix.find("hybrid models with state-space (Mamba), linear-attention, convolution or "
                        "compressed/sparse-attention layers") !=
          std::string::npos);
    // Not even with the checkpoint's exact weights.
    CHECK_THROWS_AS(from_config_text(text, "config.json", UnknownType::generic), InputError);
  }
  // Legacy and attention kinds lay out as before (configuration_utils remaps "attention").
  CHECK(diags_of(llama_with("layer_types", R"(["attention","full_attention"])")).empty());
  CHECK(diags_of(llama_with("layer_types", R"(["sliding_attention","chunked_attention"])")).empty());
  for (const std::string kind : {"mamba", "conv", "hybrid", "moe", "compressed_sparse_attention",
                                 "deepseek_sparse_attention"}) {
    const auto d = diags_of(llama_with("layer_types", "[\"full_attention\",\"" + kind + "\"]"));
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem.rfind("'" + kind + "' layers (1 of 2, the first is layer 1)", 0) == 0);
  }

  // An unknown type whose keys announce such layers: refused, with the checkpoint's headers too
  // (NemotronHConfig's keys; Lfm2Config conv_L_cache).
  nlohmann::json nh = nlohmann::json::parse(kLlama);
  nh["model_type"] = "nemotron_h";
  nh["hybrid_override_pattern"] = "M-M*";
  nh["ssm_state_size"] = 128;
  for (const UnknownType u : {UnknownType::refuse, UnknownType::generic}) {
    try {
      (void)from_config_text(nh.dump(), "config.json", u);
      FAIL("nemotron_h was estimated");
    } catch (const InputError& e) {
      REQUIRE(e.diagnostics().size() == 1);
      CHECK(e.diagnostics()[0].field == "config.json: model_type");
      CHECK(e.diagnostics()[0].problem ==
            R"(model_type 'nemotron_h' is not one vramfit knows, and its "ssm_state_size", "hybrid_override_pattern" )"
            "announce layers that are not attention (state-space, linear-attention, convolution or recurrent layers): their "
            "state caches and activations are not modelled, not even from the checkpoint's exact weights");
    }
  }
  nlohmann::json lfm = nlohmann::json::parse(kLlama);
  lfm["model_type"] = "lfm2";
  lfm["conv_L_cache"] = 3;
  CHECK_THROWS_AS(from_config_text(lfm.dump(), "config.json", UnknownType::generic), InputError);
  // A known type's config class reads none of these keys (transformers ignores them): laid out.
  CHECK(diags_of(llama_with("ssm_state_size", "128")).empty());
  // A multimodal config's text_config is read the same way.
  const auto mm = diags_of(R"({"model_type":"qwen3_5","text_config":{"model_type":"qwen3","hidden_size":256,
    "num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":688,"vocab_size":1000,
    "layer_types":["linear_attention","full_attention"]}})");
  REQUIRE(mm.size() == 1);
  CHECK(mm[0].field == "config.json: text_config.layer_types");
}

TEST_CASE("config: encoders and encoder-decoders are refused, never laid out as decoders", "[spec]") {
  // bert-base-uncased's config: it used to come out as a 160M-parameter gated decoder.
  const char* bert = R"({"model_type":"bert","hidden_size":768,"intermediate_size":3072,"num_hidden_layers":12,
    "num_attention_heads":12,"vocab_size":30522,"max_position_embeddings":512,"type_vocab_size":2})";
  for (const auto& text : {std::string(bert), llama_with("model_type", "\"t5\""),
                           llama_with("model_type", "\"whisper\"")}) {
    const auto d = diags_of(text);
    REQUIRE(d.size() == 1);
    CHECK(d[0].field == "config.json: model_type");
    CHECK(d[0].problem.find("not a decoder-only language model: vramfit does not estimate it") != std::string::npos);
    // Not even with a checkpoint.
    CHECK_THROWS_AS(from_config_text(text, "config.json", UnknownType::generic), InputError);
  }
  CHECK(diags_of(bert)[0].problem ==
        "'bert' is an encoder, not a decoder-only language model: vramfit does not estimate it");
  const auto ed = diags_of(llama_with("is_encoder_decoder", "true"));
  REQUIRE(ed.size() == 1);
  CHECK(ed[0].field == "config.json: is_encoder_decoder");
}

TEST_CASE("config: gpt_oss has its experts, sinks and biases (was 2.39B as a generic decoder)", "[spec]") {
  // openai/gpt-oss-20b's config.json; 20914757184 is GptOssForCausalLM built from it by
  // transformers 5.17 (tests/unit/spec/data/arch/transformers_counts.json).
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch/real";
  const ModelSpec s = parse(vramfit::test::read_text(dir / "gpt-oss-20b.json"));
  CHECK(s.params == 20914757184ULL);
  CHECK(s.moe.num_experts == 32);
  CHECK(s.moe.experts_per_token == 4);
  CHECK(s.sliding_window == 128);
  CHECK(s.sliding_layers == 12);
  CHECK(s.buffer_bytes == 256);
  CHECK(parse(vramfit::test::read_text(dir / "gpt-oss-120b.json")).params == 116829156672ULL);
}

TEST_CASE("config: gpt_oss's MXFP4 checkpoint packs only the experts, at 4.25 bits", "[spec]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch/real";
  std::string text = vramfit::test::read_text(dir / "gpt-oss-20b.json");
  // openai/gpt-oss-20b's quantization_config.
  text.insert(1, R"("quantization_config":{"modules_to_not_convert":["model.layers.*.self_attn",
    "model.layers.*.mlp.router","model.embed_tokens","lm_head"],"quant_method":"mxfp4"},)");
  const ModelSpec s = parse(text);
  REQUIRE(s.quantization);
  CHECK(s.quantization->method == QuantMethod::mxfp4);
  // transformers' replace_with_mxfp4_linear swaps only GptOssExperts: every other linear is kept.
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj", "router"})
    CHECK(std::find(s.quantization->skip_modules.begin(), s.quantization->skip_modules.end(), name) !=
          s.quantization->skip_modules.end());
  CHECK(std::find(s.quantization->skip_modules.begin(), s.quantization->skip_modules.end(), "gate_up_proj") ==
        s.quantization->skip_modules.end());
}

TEST_CASE("config: falcon counts exactly (multi-query, new decoder architecture)", "[spec]") {
  // Counts from FalconForCausalLM built by transformers 5.17 (data/arch/transformers_counts.json).
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch/real";
  const ModelSpec f7 = parse(vramfit::test::read_text(dir / "falcon-7b.json"));
  CHECK(f7.params == 6921720704ULL);
  CHECK(f7.family == "falcon");
  CHECK(f7.num_kv_heads == 1);  // multi_query: one k/v head (query_key_value 4544 -> 4672)
  CHECK(f7.intermediate_size == 4 * 4544);
  CHECK(f7.parallel_residual);
  CHECK_FALSE(f7.gated_mlp);
  CHECK(f7.norm == Norm::layer);
  CHECK(f7.tied_embeddings);
  CHECK(f7.buffer_bytes == 256);
  const ModelSpec f40 = parse(vramfit::test::read_text(dir / "falcon-40b.json"));
  CHECK(f40.params == 41303293952ULL);  // ln_attn + ln_mlp, 8 k/v heads
  CHECK(f40.num_kv_heads == 8);
  // Without parallel attention: input and post-attention norms; a separate lm_head.
  std::string seq = vramfit::test::read_text(dir / "falcon-7b.json");
  seq.replace(seq.find("\"parallel_attn\": true"), 21, "\"parallel_attn\": false");
  seq.insert(1, R"("tie_word_embeddings":false,)");
  CHECK(parse(seq).params == 6921720704ULL + 32 * 2 * 4544 + 65024ULL * 4544);
}

TEST_CASE("config: opt counts exactly (ffn_dim, positions offset by 2, project_in/out)", "[spec]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/unit/spec/data/arch/real";
  const ModelSpec o125 = parse(vramfit::test::read_text(dir / "opt-125m.json"));
  CHECK(o125.params == 125239296ULL);
  CHECK(o125.family == "opt");
  CHECK(o125.intermediate_size == 3072);
  CHECK(o125.activation == Activation::relu);
  CHECK(o125.learned_positions);
  CHECK(o125.hidden_dropout == 0.1);
  CHECK(o125.buffer_bytes == 0);
  const ModelSpec o350 = parse(vramfit::test::read_text(dir / "opt-350m.json"));
  CHECK(o350.params == 331196416ULL);  // word_embed_proj_dim 512, post-norm: no final norm
  const auto d = diags_of(R"({"model_type":"opt","hidden_size":768,"num_attention_heads":12,"num_hidden_layers":12,
    "vocab_size":50272})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: ffn_dim");
}

TEST_CASE("config: absurd but well-typed sizes overflow into one clear error", "[spec]") {
  const auto d =
      diags_of(R"({"model_type":"llama","hidden_size":1000000000000,"intermediate_size":1000000000000,
    "num_hidden_layers":1000000000000,"num_attention_heads":1,"vocab_size":1000000000000})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json");
  CHECK(d[0].problem == "the model's sizes are absurd: its parameter count overflows 64 bits");
  CHECK_FALSE(d[0].fix.empty());
}

// --- diagnostics -------------------------------------------------------------------------

TEST_CASE("config: missing required fields are all reported", "[spec]") {
  const auto d = diags_of(R"({"model_type":"llama","num_hidden_layers":2,"num_attention_heads":8})");
  REQUIRE(d.size() == 3);
  CHECK(d[0].str() ==
        "config.json: hidden_size: missing: the model's size cannot be worked out without it (add "
        "\"hidden_size\" "
        "as it appears in the model's config.json on the Hugging Face Hub)");
  CHECK(d[1].field == "config.json: vocab_size");
  CHECK(d[2].field == "config.json: intermediate_size");
  // gpt2 names its own keys; n_inner may be absent.
  const auto g = diags_of(R"({"model_type":"gpt2","n_layer":2,"n_head":4,"vocab_size":10})");
  REQUIRE(g.size() == 1);
  CHECK(g[0].field == "config.json: n_embd");
  // MoE keys.
  const auto m = diags_of(llama_with("model_type", "\"mixtral\""));
  REQUIRE(m.size() == 2);
  CHECK(m[0].field == "config.json: num_local_experts");
  CHECK(m[1].field == "config.json: num_experts_per_tok");
}

TEST_CASE("config: wrong JSON types for integers", "[spec]") {
  const auto s = diags_of(llama_with("hidden_size", "\"abc\""));
  REQUIRE(s.size() == 1);
  CHECK(
      s[0].str() ==
      "config.json: hidden_size: expected a positive integer, got \"abc\" (write the number without quotes)");
  for (const char* v : {"true", "null", "4096.5", "4096.0", "[1]", "{}"}) {
    INFO(v);
    const auto d = diags_of(llama_with("hidden_size", v));
    REQUIRE(d.size() == 1);
    CHECK(d[0].field == "config.json: hidden_size");
    CHECK(d[0].problem == std::string("expected a positive integer, got ") + v);
    CHECK_FALSE(d[0].fix.empty());
  }
  const auto b = diags_of(llama_with("tie_word_embeddings", "\"yes\""));
  REQUIRE(b.size() == 1);
  CHECK(b[0].str() ==
        "config.json: tie_word_embeddings: expected true or false, got \"yes\" (write true or "
        "false without quotes)");
}

TEST_CASE("config: zero, negative and absurd values", "[spec]") {
  auto d = diags_of(llama_with("num_hidden_layers", "0"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "config.json: num_hidden_layers: expected a positive integer, got 0 (check the value "
        "against the model's config.json on the Hugging Face Hub)");
  d = diags_of(llama_with("vocab_size", "-5"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "expected a positive integer, got -5");
  d = diags_of(llama_with("intermediate_size", "1099511627777"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: intermediate_size");
  CHECK(d[0].problem == "1099511627777 is absurdly large (over 2^40)");
  // 2^40 itself is a width the reader allows; on this model it makes 1.7e15 parameters, past 10^15.
  d = diags_of(llama_with("intermediate_size", "1099511627776"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "the model's sizes describe 1688849861104896 parameters, more than the 10^15 vramfit accepts");
  d = diags_of(llama_with("num_experts_per_tok", "1"));
  CHECK(d.empty());  // unused keys of dense models are ignored
}

TEST_CASE("config: heads that do not divide", "[spec]") {
  auto d =
      diags_of(R"({"model_type":"llama","hidden_size":4096,"intermediate_size":11008,"num_hidden_layers":2,
    "num_attention_heads":30,"vocab_size":1000})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: num_attention_heads");
  CHECK(d[0].problem == "30 does not divide hidden_size 4096");
  CHECK_FALSE(d[0].fix.empty());
  d = diags_of(llama_with("num_key_value_heads", "3"));
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: num_key_value_heads");
  CHECK(d[0].problem == "3 does not divide num_attention_heads 8");
  d = diags_of(R"({"model_type":"gpt2","n_embd":100,"n_layer":2,"n_head":3,"vocab_size":10})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].str().rfind("config.json: n_head: 3 does not divide n_embd 100", 0) == 0);
}

TEST_CASE("config: more experts per token than experts", "[spec]") {
  const auto d = diags_of(R"({"model_type":"mixtral","hidden_size":128,"intermediate_size":256,
    "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":500,"num_local_experts":4,"num_experts_per_tok":8})");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json: num_experts_per_tok");
  CHECK(d[0].problem == "8 is more than the 4 experts");
  CHECK_FALSE(d[0].fix.empty());
}

TEST_CASE("config: several problems are reported together", "[spec]") {
  const auto d = diags_of(R"({"model_type":"llama","hidden_size":"4096","intermediate_size":0,
    "num_hidden_layers":2.5,"num_attention_heads":8,"vocab_size":null})");
  REQUIRE(d.size() == 4);
  CHECK(d[0].field == "config.json: hidden_size");
  CHECK(d[1].field == "config.json: num_hidden_layers");
  CHECK(d[2].field == "config.json: vocab_size");
  CHECK(d[3].field == "config.json: intermediate_size");
  for (const auto& x : d) CHECK_FALSE(x.fix.empty());
}

TEST_CASE("config: not an object, malformed, truncated and empty files", "[spec]") {
  auto d = diags_of("[1, 2]");
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "config.json: expected a JSON object ({...}), got an array (pass the model's config.json, "
        "which holds one JSON object)");
  d = diags_of(R"({"model_type": "llama", "hidden_size": 4096,)");
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "config.json");
  CHECK(d[0].problem.rfind("not valid JSON: parse error at line 1, column ", 0) == 0);
  CHECK(d[0].problem.find("[json.exception") == std::string::npos);
  CHECK(d[0].fix == "check the file is a complete config.json");
  d = diags_of("{\"hidden_size\": 40");
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem.rfind("not valid JSON: ", 0) == 0);
  d = diags_of(R"({"hidden_size": 1e999})");  // nlohmann: out_of_range.406, not a parse_error
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem.rfind("not valid JSON: number overflow parsing '1e999'", 0) == 0);
  d = diags_of("not json");
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem.rfind("not valid JSON: ", 0) == 0);
  d = diags_of("");
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "config.json: the file is empty (pass the model's config.json (download it from the "
        "model's Hugging Face repo))");
  CHECK(diags_of(" \n\t ").size() == 1);
  CHECK_THROWS_AS(from_config(nlohmann::json(42), "x.json"), InputError);
}

TEST_CASE("config: layer_types must list every layer (transformers' layer_type_validation)", "[spec]") {
  // gpt-oss-20b's 24 layers alternate sliding and full; a list of 10 or 50 was counted as given
  // (5 or 25 sliding layers) with exit 0, where transformers raises a ValueError.
  nlohmann::json c = nlohmann::json::parse(vramfit::test::source_file("data/models/gpt-oss-20b.json"))["config"];
  REQUIRE(c["layer_types"].size() == 24);
  CHECK(from_config(c, "config.json").sliding_layers == 12);
  const nlohmann::json whole = c["layer_types"];
  for (const std::size_t n : {std::size_t{10}, std::size_t{50}}) {
    nlohmann::json lt = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) lt.push_back(whole[i % 24]);
    c["layer_types"] = lt;
    const auto d = diags_of(c.dump());
    REQUIRE(d.size() == 1);
    CHECK(d[0].field == "config.json: layer_types");
    CHECK(d[0].problem == std::to_string(n) + " entries for num_hidden_layers 24");
  }
}
