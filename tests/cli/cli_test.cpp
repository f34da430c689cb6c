// The command line, run in-process: exit codes and exact messages.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::estimate;
using vramfit::test::fixture_dir;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::TempDir;

namespace {

/// Checks a usage error: exit 2, nothing on stdout, exactly these lines on stderr.
/// Checks a usage error whose message belongs to another module: exit 2, stdout empty,
/// one or more lines each starting "vramfit: error: <prefix>".
void require_usage_error_prefix(const CliResult& r, const std::string& prefix) {
  INFO("stderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("vramfit: error: " + prefix, 0) == 0);
  CHECK(r.err.back() == '\n');
}

std::string smollm_config() { return vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json"); }

}  // namespace

TEST_CASE("no command, help and version", "[cli]") {
  require_usage_error(
      run_cli({}),
      "vramfit: error: a command is required: estimate, advise, fit, explain, validate, models or gpus (run "
      "'vramfit --help')\n");

  auto help = run_cli({"--help"});
  CHECK(help.code == 0);
  CHECK(help.err.empty());
  CHECK(help.out.find("estimate") != std::string::npos);
  CHECK(help.out.find("models") != std::string::npos);

  auto sub = run_cli({"estimate", "--help"});
  CHECK(sub.code == 0);
  CHECK(sub.out.find("--lora-targets") != std::string::npos);
  CHECK(sub.out.find("Exit codes") != std::string::npos);

  auto version = run_cli({"--version"});
  CHECK(version.code == 0);
  CHECK(version.out == std::string("vramfit ") + VRAMFIT_VERSION + "\n");
}

TEST_CASE("CLI11's own parse errors exit 2 with one line", "[cli]") {
  require_usage_error(estimate({"--params", "7B", "--frobnicate"}),
                      "vramfit: error: The following argument was not expected: --frobnicate (run 'vramfit "
                      "estimate --help')\n");
  auto r = run_cli({"estimate", "--batch"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("vramfit: error: --batch", 0) == 0);
  require_usage_error(
      run_cli({"frobnicate"}),
      "vramfit: error: unknown command 'frobnicate' (the commands are estimate, advise, fit, explain, "
      "validate, models and gpus)\n");
  require_usage_error(
      run_cli({"estimat", "--params", "7B"}),
      "vramfit: error: unknown command 'estimat' "
      "(did you mean 'estimate'? the commands are estimate, advise, fit, explain, validate, models and "
      "gpus)\n");
  require_usage_error(
      run_cli({"--json"}),
      "vramfit: error: a command is required: estimate, advise, fit, explain, validate, models or gpus (run "
      "'vramfit --help')\n");
}

TEST_CASE("the model source: exactly one", "[cli]") {
  require_usage_error(
      estimate({}),
      "vramfit: error: model: no model given (give exactly one of --params, --model, --config, "
      "e.g. --model llama-3.1-8b; 'vramfit models' lists the presets)\n");
  require_usage_error(
      estimate({"--mode", "train"}),
      "vramfit: error: model: no model given (give exactly one of --params, --model, --config, "
      "e.g. --model llama-3.1-8b; 'vramfit models' lists the presets)\n");
  require_usage_error(estimate({"--params", "7e9", "--model", "smollm2-135m"}),
                      "vramfit: error: model: --params and --model were both given "
                      "(give exactly one of --params, --model, --config)\n");
  require_usage_error(estimate({"--model", "smollm2-135m", "--config", "x.json"}),
                      "vramfit: error: model: --model and --config were both given "
                      "(give exactly one of --params, --model, --config)\n");
}

TEST_CASE("unknown names get did-you-mean", "[cli]") {
  require_usage_error(estimate({"--params", "7B", "--gpu", "h10"}),
                      "vramfit: error: --gpu: unknown GPU 'h10' (did you mean 'h100-80gb'?)\n");
  require_usage_error(estimate({"--params", "7B", "--gpu", "zzzz"}),
                      "vramfit: error: --gpu: unknown GPU 'zzzz' (run 'vramfit gpus' to list them)\n");
  require_usage_error(
      estimate({"--model", "smollm2-135"}),
      "vramfit: error: --model: unknown model preset 'smollm2-135' (did you mean 'smollm2-135m'?)\n");
  require_usage_error(
      estimate({"--model", "SmolLM-135m"}),
      "vramfit: error: --model: unknown model preset 'SmolLM-135m' (did you mean 'smollm2-135m'?)\n");
  require_usage_error(estimate({"--params", "7B", "--mode", "trian"}),
                      "vramfit: error: --mode: unknown mode 'trian' "
                      "(did you mean 'train'? one of inference, generate, train, lora, qlora)\n");
  require_usage_error(
      estimate({"--params", "7B", "--mode", "train", "--optimizer", "adamw8bit"}),
      "vramfit: error: --optimizer: unknown optimizer 'adamw8bit' (did you mean 'adamw-8bit', 'adamw' or 'adam'? one of "
      "adamw, adamw-fused, adamw-forloop, adam, sgd, sgd-momentum, adafactor, adamw-8bit, lion, paged-adamw, "
      "paged-adamw-8bit)\n");
  require_usage_error(estimate({"--params", "7B", "--dtype", "int3"}),
                      "vramfit: error: --dtype: unknown dtype 'int3' "
                      "(did you mean 'int4' or 'int8'? one of fp32, fp16, bf16, fp8, int8, int4, nf4)\n");
  require_usage_error(
      estimate({"--params", "7B", "--autocast", "fp32"}),
      "vramfit: error: --autocast: unknown autocast dtype 'fp32' (did you mean 'fp16'? one of bf16, fp16)\n");
  require_usage_error(estimate({"--params", "7B", "--attention", "flash"}),
                      "vramfit: error: --attention: unknown attention 'flash' (one of sdpa, eager)\n");
  require_usage_error(
      estimate({"--params", "7B", "--gpus", "2", "--sharding", "zero4"}),
      "vramfit: error: --sharding: unknown sharding 'zero4' (did you mean 'zero1', 'zero2' or 'zero3'? one of none, ddp, "
      "zero1, zero2, zero3, fsdp, fsdp-grad-op, tp, pp, device-map)\n");
}

TEST_CASE("zero, negative and malformed sizes", "[cli]") {
  require_usage_error(
      estimate({"--params", "7B", "--batch", "0"}),
      "vramfit: error: --batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n");
  require_usage_error(
      estimate({"--params", "7B", "--batch", "-1"}),
      "vramfit: error: --batch: -1 is negative (give a positive whole number, e.g. --batch 8)\n");
  require_usage_error(
      estimate({"--params", "7B", "--batch=-1"}),
      "vramfit: error: --batch: -1 is negative (give a positive whole number, e.g. --batch 8)\n");
  require_usage_error(
      estimate({"--params", "7B", "--seq", "2k"}),
      "vramfit: error: --seq: '2k' is not a whole number (give a positive whole number, e.g. --seq 4096)\n");
  {
    // An exact exponent form is the same whole number (as --params 7e9 is).
    const auto digits = estimate({"--params", "7B", "--seq", "4000", "--batch", "20", "--json"});
    const auto exponent = estimate({"--params", "7B", "--seq", "4e3", "--batch", "2.0e1", "--json"});
    CHECK(exponent.code == 0);
    CHECK(exponent.err.empty());
    CHECK(exponent.out == digits.out);
  }
  require_usage_error(estimate({"--params", "7B", "--batch", "99999999999999999999999"}),
                      "vramfit: error: --batch: 99999999999999999999999 is too large (give a positive whole "
                      "number, e.g. --batch 8)\n");
  // Every problem at once, in flag order.
  require_usage_error(
      estimate({"--params", "7B", "--batch", "0", "--seq", "-5", "--gpus", "x"}),
      "vramfit: error: --batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n"
      "vramfit: error: --seq: -5 is negative (give a positive whole number, e.g. --seq 4096)\n"
      "vramfit: error: --gpus: 'x' is not a whole number (give a positive whole number, e.g. --gpus 8)\n");
  require_usage_error(
      estimate({"--params", "7B", "--mode", "lora", "--lora-dropout", "1.5"}),
      "vramfit: error: --lora-dropout: '1.5' is not a probability in [0, 1) (e.g. --lora-dropout 0.05)\n");
  require_usage_error(
      estimate({"--params", "7B", "--mode", "lora", "--lora-targets", ","}),
      "vramfit: error: --lora-targets: no module names (give all-linear or names such as q_proj,v_proj)\n");
}

TEST_CASE("absurd or malformed counts and sizes from the spec parsers", "[cli]") {
  require_usage_error_prefix(estimate({"--params", "1e20"}), "--params: ");
  require_usage_error_prefix(estimate({"--params", "0"}), "--params: ");
  require_usage_error_prefix(estimate({"--params", "-7B"}), "--params: ");
  require_usage_error_prefix(estimate({"--params", "seven"}), "--params: ");
  require_usage_error_prefix(estimate({"--params", "7B", "--budget", "0"}), "--budget: ");
  require_usage_error_prefix(estimate({"--params", "7B", "--budget", "24 parsecs"}), "--budget: ");
}

TEST_CASE("flags that do not apply to the mode", "[cli]") {
  const std::string trains = "(it is used by --mode train, lora and qlora; drop it or change --mode)\n";
  require_usage_error(estimate({"--params", "7B", "--optimizer", "sgd"}),
                      "vramfit: error: --optimizer: does not apply to --mode inference " + trains);
  require_usage_error(
      estimate({"--params", "7B", "--mode", "generate", "--grad-accum", "4", "--checkpointing"}),
      "vramfit: error: --grad-accum: does not apply to --mode generate " + trains +
          "vramfit: error: --checkpointing: does not apply to --mode generate " + trains);
  // Given explicitly with the default value still counts.
  require_usage_error(estimate({"--params", "7B", "--optimizer", "adamw"}),
                      "vramfit: error: --optimizer: does not apply to --mode inference " + trains);
  require_usage_error(estimate({"--params", "7B", "--mode", "train", "--new-tokens", "10"}),
                      "vramfit: error: --new-tokens: does not apply to --mode train "
                      "(it is used by --mode generate; drop it or change --mode)\n");
  require_usage_error(estimate({"--params", "7B", "--mode", "train", "--lora-rank", "8", "--lora-targets",
                                "q_proj", "--lora-dropout", "0.1"}),
                      "vramfit: error: --lora-rank: does not apply to --mode train "
                      "(it is used by --mode lora and qlora; drop it or change --mode)\n"
                      "vramfit: error: --lora-targets: does not apply to --mode train "
                      "(it is used by --mode lora and qlora; drop it or change --mode)\n"
                      "vramfit: error: --lora-dropout: does not apply to --mode train "
                      "(it is used by --mode lora and qlora; drop it or change --mode)\n");
  require_usage_error(estimate({"--params", "7B", "--gpu", "h100-80gb", "--budget", "24GiB"}),
                      "vramfit: error: --budget: --gpu and --budget were both given "
                      "(give one: --gpu ID or --budget SIZE)\n");
}

TEST_CASE("config files: missing, folders, unreadable, malformed", "[cli]") {
  TempDir dir;
  require_usage_error(estimate({"--config", dir.str() + "/nope.json"}),
                      "vramfit: error: --config: '" + dir.str() +
                          "/nope.json' does not exist (give a config.json file or the folder holding it)\n");
  require_usage_error(
      estimate({"--config", dir.str()}),
      "vramfit: error: --config: folder '" + dir.str() +
          "' has no config.json (give the folder of a Hugging Face checkpoint, or the config file "
          "itself)\n");
  // A config.json that cannot be read as a file.
  std::filesystem::create_directories(dir.path() / "odd" / "config.json");
  require_usage_error(estimate({"--config", dir.str() + "/odd"}),
                      "vramfit: error: --config: '" + dir.str() +
                          "/odd/config.json' is a folder, not a file (give a file)\n");
  const auto st = dir.write("model.safetensors", "x");
  require_usage_error(estimate({"--config", st}),
                      "vramfit: error: --config: '" + st +
                          "' is a safetensors file (give the folder holding it and config.json)\n");

  // Truncated and malformed JSON: the spec module's message, naming the file.
  const std::string config = smollm_config();
  const auto truncated = dir.write("truncated.json", config.substr(0, config.size() / 2));
  auto r = estimate({"--config", truncated});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("truncated.json") != std::string::npos);
  const auto garbage = dir.write("garbage.json", "this is not json");
  r = estimate({"--config", garbage});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("garbage.json") != std::string::npos);

  // Missing and contradictory fields: the spec module collects them.
  const auto missing = dir.write("missing.json", R"({"model_type": "llama", "hidden_size": 4096})");
  r = estimate({"--config", missing});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("missing.json") != std::string::npos);
  const auto contradictory = dir.write("heads.json", R"({"model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 30, "vocab_size": 32000})");
  r = estimate({"--config", contradictory});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("num_attention_heads") != std::string::npos);
}

TEST_CASE("a config file of any name, and a checkpoint folder", "[cli]") {
  TempDir dir;
  const auto any_name = dir.write("my-model.json", smollm_config());
  auto r = estimate({"--config", any_name, "--json"});
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["model"]["name"] == any_name);
  CHECK(j["model"]["source"] == "config");
  CHECK(j["model"]["exact_from_checkpoint"] == false);

  // A folder with config.json and a safetensors file: the header gives the exact count. The
  // file is sparse: only its header is ever read.
  dir.write("ckpt/config.json", smollm_config());
  const std::uint64_t elements = 49152ULL * 576ULL;
  const std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"BF16","shape":[49152,576],"data_offsets":[0,)" +
      std::to_string(elements * 2) + "]}}";
  std::string prefix(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const auto st = dir.write("ckpt/model.safetensors", prefix + header);
  std::filesystem::resize_file(st, 8 + header.size() + elements * 2);
  r = estimate({"--config", dir.str() + "/ckpt", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j["model"]["params"] == elements);
  CHECK(j["model"]["checkpoint_dtype"] == "bf16");

  // An unknown model_type: refused from the config alone (exit 2 naming model_type), estimated
  // from the headers' exact weights when the folder has them, with a note saying what is approximated.
  std::string unknown = smollm_config();
  unknown.replace(unknown.find("\"llama\""), 7, "\"my_llm\"");
  const auto alone = dir.write("unknown.json", unknown);
  r = estimate({"--config", alone});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("model_type: model_type 'my_llm' is not one vramfit knows") != std::string::npos);
  dir.write("unknown/config.json", unknown);
  const auto st2 = dir.write("unknown/model.safetensors", prefix + header);
  std::filesystem::resize_file(st2, 8 + header.size() + elements * 2);
  r = estimate({"--config", dir.str() + "/unknown", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["model"]["exact_from_checkpoint"] == true);
  CHECK(j["model"]["params"] == elements);
  CHECK(j.dump().find("activations and KV cache are approximated as a Llama-like decoder") != std::string::npos);
  // An unknown type whose attention caches something else (Kimi-K2's kimi_k2: DeepSeek-V3's latent,
  // kv_lora_rank) is refused beside its exact weights too: as a Llama-like decoder its cache was 3
  // times vLLM's (218624 bytes a token at TP 8, vLLM's latent 70272), with exit 0.
  std::string latent = unknown;
  latent.insert(latent.rfind('}'), ", \"kv_lora_rank\": 512");
  dir.write("latent/config.json", latent);
  const auto st4 = dir.write("latent/model.safetensors", prefix + header);
  std::filesystem::resize_file(st4, 8 + header.size() + elements * 2);
  for (const char* engine : {"transformers", "vllm"}) {
    r = estimate({"--config", dir.str() + "/latent", "--engine", engine});
    require_usage_error_prefix(r, "");
    CHECK(r.err.find("model_type 'my_llm' is not one vramfit knows, and its \"kv_lora_rank\" announce an attention "
                     "cache") != std::string::npos);
  }

  // An encoder is refused (exit 2), even beside exact weights: it is not a decoder.
  std::string bert = smollm_config();
  bert.replace(bert.find("\"llama\""), 7, "\"bert\"");
  dir.write("bert/config.json", bert);
  const auto st3 = dir.write("bert/model.safetensors", prefix + header);
  std::filesystem::resize_file(st3, 8 + header.size() + elements * 2);
  r = estimate({"--config", dir.str() + "/bert"});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("model_type: 'bert' is an encoder, not a decoder-only language model") != std::string::npos);

  // Shards listed in the index must all be there.
  dir.write("sharded/config.json", smollm_config());
  dir.write("sharded/model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                               "b": "model-00002-of-00002.safetensors"}})");
  dir.write("sharded/model-00001-of-00002.safetensors", prefix + header);
  require_usage_error(
      estimate({"--config", dir.str() + "/sharded"}),
      "vramfit: error: --config: shard '" + dir.str() +
          "/sharded/model-00002-of-00002.safetensors' listed in model.safetensors.index.json is "
          "missing (download every shard, or give the config file alone)\n");
  // A header that lies about its length.
  dir.write("lying/config.json", smollm_config());
  dir.write("lying/model.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
  r = estimate({"--config", dir.str() + "/lying"});
  require_usage_error_prefix(r, "");
  CHECK(r.err.find("model.safetensors") != std::string::npos);
}

TEST_CASE("unknown model_type whose architectures names a known class: read as that model", "[cli][config]") {
  // Kimi-K2's config says model_type kimi_k2, architectures DeepseekV3ForCausalLM and ships its code
  // (auto_map): vLLM picks its implementation by the class, so it is read as deepseek_v3, to the byte.
  const TempDir dir;
  const nlohmann::json base =
      nlohmann::json::parse(vramfit::test::source_file("data/models/deepseek-v3.json"))["config"];
  nlohmann::json kimi = base;
  kimi["model_type"] = "kimi_k2";
  kimi["architectures"] = {"DeepseekV3ForCausalLM"};
  kimi["auto_map"] = {{"AutoConfig", "configuration_deepseek.DeepseekV3Config"},
                      {"AutoModelForCausalLM", "modeling_deepseek.DeepseekV3ForCausalLM"}};
  const std::string as_v3 = dir.write("v3.json", base.dump()), as_kimi = dir.write("kimi.json", kimi.dump());
  const std::vector<std::vector<std::string>> jobs = {
      {"--mode", "inference", "--gpu", "h200", "--gpus", "8", "--sharding", "tp"},
      {"--engine", "vllm", "--gpu", "h200,h200,h200,h200,h200,h200,h200,h200", "--tensor-parallel-size", "8",
       "--max-model-len", "8192"}};
  for (const auto& job : jobs) {
    // The built-in catalog (its GPUs), not the fixture's.
    std::vector<std::string> a = {"estimate", "--config", as_v3, "--json"},
                             b = {"estimate", "--config", as_kimi, "--json"};
    a.insert(a.end(), job.begin(), job.end());
    b.insert(b.end(), job.begin(), job.end());
    const CliResult r3 = run_cli(a), rk = run_cli(b);
    INFO(job[1] << ": " << r3.err << rk.err);
    REQUIRE(rk.code == r3.code);
    REQUIRE(r3.out.size() > 0);
    const auto j3 = nlohmann::json::parse(r3.out), jk = nlohmann::json::parse(rk.out);
    CHECK(jk["model"]["model_type"] == "deepseek_v3");
    CHECK(jk.dump().find("model_type 'kimi_k2' is not one vramfit knows; read as deepseek_v3, the model of the "
                         "class its config's architectures names (DeepseekV3ForCausalLM)") != std::string::npos);
    CHECK(jk["model"]["params"] == j3["model"]["params"]);
    CHECK(jk["device_total_bytes"] == j3["device_total_bytes"]);
    if (job[1] == "vllm") CHECK(jk["engine"]["num_gpu_blocks"] == j3["engine"]["num_gpu_blocks"]);
  }
  // A class no row has (DeepSeek-V3.2's), or no code of its own (neither engine loads an unknown type
  // without auto_map: a misspelt type is a mistake): refused for the latent cache.
  kimi["architectures"] = {"DeepseekV32ForCausalLM"};
  CliResult r = estimate({"--config", dir.write("v32.json", kimi.dump())});
  CHECK(r.code == 2);
  CHECK(r.err.find("model_type: model_type 'kimi_k2' is not one vramfit knows") != std::string::npos);
  kimi["architectures"] = {"DeepseekV3ForCausalLM"};
  kimi.erase("auto_map");
  r = estimate({"--config", dir.write("no-code.json", kimi.dump())});
  CHECK(r.code == 2);
  CHECK(r.err.find("model_type: model_type 'kimi_k2' is not one vramfit knows") != std::string::npos);
}

TEST_CASE("budgets: fits is exit 0, does not fit is exit 1, JSON either way", "[cli]") {
  auto fits = estimate({"--model", "smollm2-135m", "--budget", "80GB"});
  CHECK(fits.code == 0);
  CHECK(fits.err.empty());
  CHECK(fits.out.find("FITS") != std::string::npos);

  auto tiny = estimate({"--model", "smollm2-135m", "--gpu", "tiny-1gb", "--json"});
  CHECK(tiny.code == 1);
  CHECK(tiny.err.empty());
  const auto j = nlohmann::json::parse(tiny.out);
  CHECK(j["budget"]["fits"] == false);
  CHECK(j["budget"]["bytes"] == 1000000000);
  CHECK(j["budget"]["gpu"] == "tiny-1gb");
  CHECK(j["budget"]["spare_bytes"].get<std::int64_t>() < 0);
  CHECK(j["budget"]["spare_bytes"].get<std::int64_t>() ==
        1000000000 - j["device_total_bytes"].get<std::int64_t>());

  auto text = estimate({"--model", "smollm2-135m", "--gpu", "tiny-1gb"});
  CHECK(text.code == 1);
  CHECK(text.out.find("DOES NOT FIT, short by ") != std::string::npos);

  auto no_budget = estimate({"--model", "smollm2-135m", "--json"});
  CHECK(no_budget.code == 0);
  CHECK(nlohmann::json::parse(no_budget.out)["budget"].is_null());
}

TEST_CASE("a bare parameter count says which shape was assumed", "[cli]") {
  auto r = estimate({"--params", "7B"});
  REQUIRE(r.code == 0);
  // The notes say which shape was assumed (the spec's words) and that --config or --model is better.
  const auto notes = r.out.substr(r.out.find("\nNotes\n"));
  CHECK(notes.find("--config") != std::string::npos);
  CHECK(notes.find("--model") != std::string::npos);
  CHECK(notes.find("hidden") != std::string::npos);
  auto j = nlohmann::json::parse(estimate({"--params", "7B", "--json"}).out);
  CHECK(j["model"]["source"] == "params");
  CHECK(j["model"]["name"] == "--params 7B");
}

TEST_CASE("defaults that depend on the mode", "[cli]") {
  auto j = nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--json"}).out);
  CHECK(j["workload"]["mode"] == "inference");
  CHECK(j["workload"]["batch"] == 1);
  CHECK(j["workload"]["seq"] == 2048);
  CHECK(j["workload"]["new_tokens"].is_null());
  CHECK(j["workload"]["optimizer"].is_null());
  CHECK(j["model"]["dtype"] == "bf16");

  j = nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--mode", "generate", "--json"}).out);
  CHECK(j["workload"]["new_tokens"] == 256);

  j = nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--mode", "qlora", "--json"}).out);
  CHECK(j["model"]["dtype"] == "nf4");
  CHECK(j["workload"]["optimizer"] == "adamw");
  CHECK(j["workload"]["lora"]["rank"] == 16);
  CHECK(j["workload"]["lora"]["targets"] == nlohmann::json::array({"all-linear"}));

  j = nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--mode", "lora", "--lora-rank", "8",
                                      "--lora-targets", "q_proj,v_proj", "--lora-dropout", "0.05", "--json"})
                                .out);
  CHECK(j["workload"]["lora"]["rank"] == 8);
  CHECK(j["workload"]["lora"]["targets"] == nlohmann::json::array({"q_proj", "v_proj"}));
  CHECK(j["workload"]["lora"]["dropout"] == 0.05);
}

TEST_CASE("multi-GPU flags are accepted", "[cli]") {
  auto r =
      estimate({"--model", "smollm2-135m", "--mode", "train", "--gpus", "8", "--sharding", "fsdp", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["workload"]["gpus"] == 8);
  CHECK(j["workload"]["sharding"] == "fsdp");
}

TEST_CASE("the catalog folder: --data-dir and VRAMFIT_DATA_DIR", "[cli]") {
  require_usage_error(run_cli({"gpus", "--data-dir", "/nonexistent/vramfit"}),
                      "vramfit: error: --data-dir: '/nonexistent/vramfit' is not a folder "
                      "(give a folder holding gpus.json and models/*.json)\n");
  TempDir dir;
  require_usage_error(run_cli({"--data-dir", dir.str(), "models"}),
                      "vramfit: error: --data-dir: folder '" + dir.str() +
                          "' has no gpus.json (give a folder holding gpus.json and models/*.json)\n");
  dir.write("gpus.json", R"({"gpus": [], "providers": [{"id": "x", "name": "X", "source": "s",
                             "tiers": [{"id": "t", "gpu": "h100", "count": 1}]}]})");
  require_usage_error(run_cli({"--data-dir", dir.str(), "gpus"}),
                      "vramfit: error: gpus.json: providers[0].tiers[0].gpu: unknown GPU 'h100' "
                      "(fix the catalog file)\n");

  // The environment variable, read only when --data-dir is absent.
  ::setenv("VRAMFIT_DATA_DIR", fixture_dir().c_str(), 1);
  std::ostringstream out, err;
  std::istringstream in;
  const char* argv[] = {"vramfit", "gpus", "--json"};
  const int code = vramfit::cli::run(3, argv, out, err, in);
  ::unsetenv("VRAMFIT_DATA_DIR");
  CHECK(code == 0);
  CHECK(nlohmann::json::parse(out.str())["gpus"].size() == 4);

  ::setenv("VRAMFIT_DATA_DIR", "/nonexistent/vramfit", 1);
  std::ostringstream out2, err2;
  const char* argv2[] = {"vramfit", "gpus"};
  const int code2 = vramfit::cli::run(2, argv2, out2, err2, in);
  ::unsetenv("VRAMFIT_DATA_DIR");
  CHECK(code2 == 2);
  CHECK(err2.str() ==
        "vramfit: error: VRAMFIT_DATA_DIR: '/nonexistent/vramfit' is not a folder "
        "(give a folder holding gpus.json and models/*.json)\n");
}

TEST_CASE("models and gpus lists", "[cli]") {
  auto models = run_cli({"models", "--data-dir", fixture_dir()});
  CHECK(models.code == 0);
  CHECK(models.out.find("smollm2-135m") != std::string::npos);
  auto models_json = nlohmann::json::parse(run_cli({"models", "--data-dir", fixture_dir(), "--json"}).out);
  CHECK(models_json["schema_version"] == 3);
  CHECK(models_json["models"][0]["id"] == "smollm2-135m");

  auto gpus = run_cli({"gpus", "--data-dir", fixture_dir()});
  CHECK(gpus.code == 0);
  CHECK(gpus.out.find("h100-80gb") != std::string::npos);
  CHECK(gpus.out.find("c1.h100x8") != std::string::npos);
  // The option may come before or after the command.
  CHECK(run_cli({"--data-dir", fixture_dir(), "gpus", "--json"}).code == 0);
}
