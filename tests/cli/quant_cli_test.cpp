// The quantization, KV-cache and many-GPU flags through the CLI.
#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using namespace vramfit::test;

namespace {
const std::vector<std::string> kModel{"--model", "smollm2-135m"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> a = kModel;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

nlohmann::json json_of(const CliResult& r) {
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}
}  // namespace

TEST_CASE("quant flag: schemes, their details, and every wrong combination", "[cli][quant]") {
  const auto j = json_of(estimate(with({"--quant", "gptq-int4", "--group-size", "32", "--json"})));
  CHECK(j["model"]["dtype"] == "int4");
  CHECK(j["model"]["quantization"]["scheme"] == "gptq-int4");
  CHECK(j["model"]["quantization"]["group_size"] == 32);
  const auto dq = json_of(estimate(with({"--quant", "nf4", "--double-quant", "--skip-modules", "down_proj", "--json"})));
  CHECK(dq["model"]["quantization"]["double_quant"] == true);
  CHECK(dq["model"]["quantization"]["skip_modules"] == nlohmann::json::array({"down_proj"}));
  // --dtype int4 is GPTQ: its group size can be given too.
  CHECK(json_of(estimate(with({"--dtype", "int4", "--group-size", "0", "--json"})))["model"]["quantization"]
            ["group_size"] == 0);
  // The packed --dtype values are their default schemes.
  CHECK(json_of(estimate(with({"--dtype", "int8", "--json"})))["model"]["quantization"]["scheme"] == "bnb-int8");
  CHECK(json_of(estimate(with({"--dtype", "bf16", "--json"})))["model"]["quantization"].is_null());

  require_usage_error(estimate(with({"--quant", "q4_k_x"})),
                      "vramfit: error: --quant: unknown scheme 'q4_k_x' (did you mean 'q4_k_m' or 'q4_k_s'? one of nf4, fp4, "
                      "bnb-int8, gptq-int2, gptq-int3, gptq-int4, gptq-int8, awq-int4, fp8, fp8-channel, fp8-block, "
                      "mxfp4, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, "
                      "q5_k_m, q6_k)\n");
  require_usage_error(estimate(with({"--dtype", "int8", "--quant", "nf4"})),
                      "vramfit: error: --quant: --dtype int8 and --quant nf4 both say how the weights are packed "
                      "(give one of them (--quant has the details: group size, double quantization, GGUF types))\n");
  require_usage_error(estimate(with({"--group-size", "64"})),
                      "vramfit: error: --group-size: applies to GPTQ and AWQ weights only (add --quant gptq-int4 "
                      "(or awq-int4), or drop --group-size)\n");
  require_usage_error(estimate(with({"--quant", "awq-int4", "--group-size", "-1"})),
                      "vramfit: error: --group-size: -1 is negative (give a positive whole number, e.g. "
                      "--group-size 128)\n");
  require_usage_error(estimate(with({"--quant", "gptq-int4", "--double-quant"})),
                      "vramfit: error: --double-quant: applies to bitsandbytes 4-bit weights only (add --quant "
                      "nf4, or drop --double-quant)\n");
  require_usage_error(estimate(with({"--quant", "nf4", "--skip-modules", "foo_proj"})),
                      "vramfit: error: --skip-modules: 'foo_proj' is not a linear module of this model (name "
                      "linear modules of the model, e.g. o_proj or down_proj)\n");
  require_usage_error(estimate(with({"--skip-modules", "o_proj"})),
                      "vramfit: error: --skip-modules: the weights are not quantized (add --quant nf4 (or another "
                      "scheme))\n");
  // QLoRA's base defaults to nf4, so double quantization applies without --quant.
  CHECK(json_of(estimate(with({"--mode", "qlora", "--double-quant", "--json"})))["model"]["quantization"]
            ["double_quant"] == true);
}

TEST_CASE("a config.json's quantization_config is used unless --dtype overrides it", "[cli][quant]") {
  TempDir dir;
  const std::string path = dir.write("config.json", R"({"model_type": "llama", "hidden_size": 1024,
      "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 32000,
      "tie_word_embeddings": false,
      "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}})");
  const auto r = estimate({"--config", path, "--json"});
  const auto j = json_of(r);
  CHECK(j["model"]["quantization"]["scheme"] == "awq-int4");
  bool noted = false;
  for (const auto& n : j["notes"])
    noted = noted || n.get<std::string>().find("packed as the checkpoint says (awq-int4)") != std::string::npos;
  CHECK(noted);
  const auto plain = json_of(estimate({"--config", path, "--dtype", "bf16", "--json"}));
  CHECK(plain["model"]["quantization"].is_null());
  // 4 layers of 16.8M linear parameters: 134 MB in bf16, a quarter of that packed.
  const auto weights = [](const nlohmann::json& doc) {
    for (const auto& c : doc["components"])
      if (c["id"] == "weights") return c["bytes"].get<std::uint64_t>();
    return std::uint64_t{0};
  };
  CHECK(weights(plain) - weights(j) > 90000000);

  const std::string bad = dir.write("bad/config.json", R"({"model_type": "llama", "hidden_size": 1024,
      "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 32000,
      "quantization_config": {"quant_method": "gptq", "bits": 6}})");
  require_usage_error(estimate({"--config", bad}),
                      "vramfit: error: " + bad + ": quantization_config.bits: 6 bits is not a size this method "
                      "stores (remove quantization_config from a copy of config.json and describe the weights with "
                      "--quant (see 'vramfit estimate --help'))\n");
}

TEST_CASE("kv-cache, offload, master-weights and nodes flags: values and where they apply", "[cli][quant]") {
  const auto g = json_of(estimate(with({"--mode", "generate", "--kv-cache", "int4", "--json"})));
  CHECK(g["workload"]["kv_cache"] == "int4");
  const auto t = json_of(estimate(with({"--mode", "train", "--gpus", "8", "--nodes", "2", "--sharding", "zero3",
                                        "--offload", "optimizer", "--master-weights", "--json"})));
  CHECK(t["workload"]["nodes"] == 2);
  CHECK(t["workload"]["offload"] == "optimizer");
  CHECK(t["workload"]["master_weights"] == true);

  require_usage_error(estimate(with({"--kv-cache", "fp8"})),
                      "vramfit: error: --kv-cache: does not apply to --mode inference (it is used by --mode "
                      "generate; drop it or change --mode)\n");
  require_usage_error(estimate(with({"--mode", "generate", "--kv-cache", "nf4"})),
                      "vramfit: error: --kv-cache: unknown KV cache dtype 'nf4' (did you mean 'int4'? one of bf16, "
                      "fp16, fp32, fp8, int8, int4)\n");
  require_usage_error(estimate(with({"--mode", "train", "--offload", "optimizer"})),
                      "vramfit: error: --offload: needs a ZeRO or FSDP strategy, got --sharding none (use "
                      "--sharding zero2 or zero3 (DeepSpeed ZeRO-Offload) or fsdp (CPUOffload))\n");
  require_usage_error(estimate(with({"--mode", "train", "--gpus", "2", "--sharding", "zero2", "--offload", "params"})),
                      "vramfit: error: --offload: parameters are offloaded by ZeRO-3 and FSDP, not zero2 (use "
                      "--sharding zero3 or fsdp, or --offload optimizer)\n");
  require_usage_error(estimate(with({"--mode", "train", "--gpus", "2", "--sharding", "fsdp", "--offload",
                                     "optimizer"})),
                      "vramfit: error: --offload: FSDP's CPUOffload moves parameters, gradients and the optimizer "
                      "together (use --offload params with fsdp, or --sharding zero2/zero3 for the optimizer "
                      "alone)\n");
  require_usage_error(estimate(with({"--offload", "optimizer", "--sharding", "zero2"})),
                      "vramfit: error: --offload: does not apply to --mode inference (offloading moves training "
                      "state to the CPU: use it with --mode train, lora or qlora)\n");
  require_usage_error(estimate(with({"--mode", "train", "--master-weights", "--dtype", "fp32"})),
                      "vramfit: error: --master-weights: needs 16-bit weights, got --dtype fp32 (use --dtype bf16 "
                      "or fp16 (the fp32 copy lives in the optimizer))\n");
  require_usage_error(estimate(with({"--mode", "lora", "--master-weights"})),
                      "vramfit: error: --master-weights: does not apply to --mode lora (fp32 master weights belong "
                      "to full training (--mode train))\n");
  require_usage_error(estimate(with({"--gpus", "2", "--nodes", "2", "--sharding", "device-map"})),
                      "vramfit: error: --nodes: device-map splits a model over the GPUs of one machine (use "
                      "--nodes 1, or a training strategy (fsdp, zero3, pp) across nodes)\n");
  require_usage_error(estimate(with({"--nodes", "0"})),
                      "vramfit: error: --nodes: 0 is not allowed (give a positive whole number, e.g. --nodes 2)\n");
  require_usage_error(estimate(with({"--gpus", "64", "--sharding", "pp"})),
                      "vramfit: error: --gpus: 64 pipeline stages for 30 layers (use at most one stage per layer)\n");
}
