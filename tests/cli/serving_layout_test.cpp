// The serving engines refuse the layer layouts their estimates do not follow (engine/serving_layout.cpp,
// the MLA rows of engine/vllm.cpp and engine/llamacpp.cpp), and keep estimating the ones they do.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::run_cli;

namespace {

std::string arch_config(const std::string& name) {
  return std::string(VRAMFIT_SOURCE_DIR) + "/tests/accuracy/arch/models/" + name + ".json";
}

CliResult serve(const std::string& engine, const std::string& config) {
  return run_cli({"estimate", "--engine", engine, "--config", arch_config(config), "--gpu", "h100-80gb"});
}

}  // namespace

TEST_CASE("both serving engines lay gemma4_text's layers out per layer", "[cli][serving]") {
  // llama.cpp (its GEMMA4: engine/llamacpp.cpp layer_attn): at 4096 cells, without flash attention,
  // the full layer 5 (K and V of 512) 8 MiB and the sliding layers 0..4 (1024 cells, K 256 and V
  // padded to 512) 7.5 MiB; the KV-shared layers 6..9 none.
  const CliResult r = run_cli({"estimate", "--engine", "llama.cpp", "--config", arch_config("gemma4-e2b-mini"), "--gpu",
                               "h100-80gb", "--ctx-size", "4096", "--json"});
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["engine"]["devices"][0]["kv_buffer_bytes"].get<std::uint64_t>() ==
        8388608 + 7864320);
  // vLLM: per kind of layer (engine/vllm.cpp layer_kinds): 6 groups of one layer, pages of 32768 bytes.
  const CliResult v = run_cli({"estimate", "--engine", "vllm", "--config", arch_config("gemma4-e2b-mini"), "--gpu",
                               "h100-80gb", "--json"});
  REQUIRE(v.code == 0);
  const nlohmann::json e = nlohmann::json::parse(v.out)["engine"];
  CHECK(e["kv_cache_groups"] == 6);
  CHECK(e["kv_cache_bytes"].get<std::uint64_t>() == e["num_gpu_blocks"].get<std::uint64_t>() * 32768);
  // The transformers estimate lays them out.
  CHECK(run_cli({"estimate", "--config", arch_config("gemma4-e2b-mini"), "--gpu", "h100-80gb"}).code == 0);
}

TEST_CASE("serving engines serve latent attention only as their MLA models do", "[cli][serving]") {
  // vLLM serves minicpm3 with every head's K and V cached (engine/vllm.cpp ModelRow::heads_cache):
  // 8 layers x 2 x 16 heads x (64 + 32) x 2 bytes = 49152 bytes a token, a block of 16 tokens 768 KiB.
  const CliResult v = run_cli({"estimate", "--engine", "vllm", "--config", arch_config("minicpm3-mini"), "--gpu",
                               "h100-80gb", "--json"});
  REQUIRE(v.code == 0);
  const nlohmann::json e = nlohmann::json::parse(v.out)["engine"];
  CHECK(e["kv_cache_bytes"].get<std::uint64_t>() == e["num_gpu_blocks"].get<std::uint64_t>() * 786432);
  CHECK(e["kv_cache_tokens"].get<std::uint64_t>() == e["num_gpu_blocks"].get<std::uint64_t>() * 16);
  // llama.cpp too (its MINICPM3 architecture): per layer and cell K 16 x (64 + 32) and V 16 x 64
  // (hidden / heads) f16, 5120 bytes; 8 layers of 4096 cells (--ctx-size's default).
  const CliResult l = run_cli({"estimate", "--engine", "llama.cpp", "--config", arch_config("minicpm3-mini"), "--gpu",
                               "h100-80gb", "--ctx-size", "4096", "--json"});
  REQUIRE(l.code == 0);
  CHECK(nlohmann::json::parse(l.out)["engine"]["devices"][0]["kv_buffer_bytes"].get<std::uint64_t>() ==
        8ULL * 4096 * 5120);
  // Latent attention of a type llama.cpp has no architecture for is refused.
  const CliResult y = serve("llama.cpp", "youtu-mini");
  CHECK(y.code == 2);
  CHECK(y.err.find("--engine: llama.cpp: model_type 'youtu' has latent attention") != std::string::npos);
  // DeepSeek's MLA is served by both.
  CHECK(serve("vllm", "deepseek-v2-mini").code == 0);
  CHECK(serve("llama.cpp", "deepseek-v2-mini").code == 0);
  CHECK(serve("vllm", "deepseek-v3-mini").code == 0);
}
