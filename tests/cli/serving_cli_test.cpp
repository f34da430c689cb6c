// `--engine llama.cpp|ollama|vllm` through estimate, advise and fit, run in-process.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../unit/spec/gguf_writer.hpp"
#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using json = nlohmann::json;

namespace {

json parse(const CliResult& r) {
  INFO("stderr: " << r.err);
  return json::parse(r.out);
}

/// `base` then `extra`, run in-process.
CliResult run_with(std::vector<std::string> base, const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return run_cli(base);
}

/// The same run, which must exit 0: its JSON report.
json report_with(std::vector<std::string> base, const std::vector<std::string>& extra) {
  const CliResult r = run_with(std::move(base), extra);
  REQUIRE(r.code == 0);
  return parse(r);
}

/// A report's notes, one a line (the JSON kept by the caller: no reference into a temporary).
std::string notes_text(const json& report) {
  std::string all;
  for (const auto& n : report.at("notes")) all += n.get<std::string>() + "\n";
  return all;
}

}  // namespace

TEST_CASE("serving: --engine llama.cpp: Llama 3.1 8B Q4_K_M buffers as llama.cpp logs them", "[cli][serving]") {
  const CliResult r =
      run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "8192", "--flash-attn", "off", "--json"});
  REQUIRE(r.code == 0);
  const json e = parse(r)["engine"];
  CHECK(e["name"] == "llama.cpp");
  CHECK(e["file_type"] == "Q4_K_M");
  CHECK(e["gpu_layers"] == 33);
  CHECK(e["n_ctx"] == 8192);
  const json& d = e["devices"][0];
  // "CUDA0 model buffer size = 4403.49 MiB", "KV buffer size = 1024.00 MiB",
  // "compute buffer size = 560.00 MiB", "CPU_Mapped model buffer size = 281.81 MiB"
  // (tests/accuracy/serving/llamacpp_logs.jsonl).
  CHECK(d["model_buffer_bytes"] == 4617396224);
  CHECK(d["kv_buffer_bytes"] == 1073741824);
  // 560 MiB of graph and the split inputs below it: positions and output ids, and, in current
  // builds, the cells' indices for ggml_set_rows, K's [512] i64 and, without flash attention, V's
  // one per element of the transposed V rows, [512 x 1024] i64 = 4 MiB: 564.0039 MiB (the log's
  // late-2024 build, before set_rows, 560.0039).
  CHECK(d["compute_buffer_bytes"] == 591405056);
  CHECK(e["host"]["model_buffer_bytes"] == 295501824);
  // The host's inputs hold the same indices, and in 2026 builds the embeddings input [4096, 512]
  // f32 beside the token ids (llama.cpp#18550): 8 MiB more (an H100 run of this shape in Q8_0,
  // June 2026 build: "CUDA_Host compute buffer size = 36.01 MiB", this model to the digit).
  CHECK(e["host_bytes"] == 325385216 + 4096 * 512 * 4);
  CHECK(parse(r)["device_total_bytes"] == d["total_bytes"]);
}

TEST_CASE("serving: --engine llama.cpp: a 70B Q4_K_M on two 24 GB cards, and on one 12 GB card", "[cli][serving]") {
  const CliResult two = run_cli({"fit", "--engine", "llama.cpp", "--model", "llama-3.3-70b", "--gpu",
                                 "rtx-3090,rtx-3090", "--ctx-size", "8192", "--json"});
  REQUIRE(two.code == 0);
  const json f = parse(two);
  CHECK(f["solve"] == "gpu-layers");
  CHECK(f["value"] == 81);  // every layer and the output layer
  CHECK(f["engine"]["devices"].size() == 2);

  const CliResult one =
      run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.3-70b", "--gpu", "rtx-3060", "--json"});
  CHECK(one.code == 1);
  // No --gpu-layers: llama-server's --fit would place what leaves 1024 MiB free, not fail.
  bool autofit = false;
  const json one_json = parse(one);
  for (const auto& n : one_json["notes"])
    autofit = autofit || n.get<std::string>().find("places 19 of 81 layers on the GPU") != std::string::npos;
  CHECK(autofit);
  const json a = parse(one)["advice"];
  CHECK(a["fits_as_given"] == false);
  REQUIRE(a["fixes"].size() >= 1);
  CHECK(a["fixes"][0]["id"] == "fewer-gpu-layers");
  CHECK(a["fixes"][0]["fits"] == true);
  // The fix is a re-estimate: its -ngl is the largest fit --solve gpu-layers finds.
  const CliResult solved =
      run_cli({"fit", "--engine", "llama.cpp", "--model", "llama-3.3-70b", "--gpu", "rtx-3060", "--json"});
  REQUIRE(solved.code == 0);
  CHECK(a["fixes"][0]["change"].get<std::string>().find(
            "--gpu-layers " + std::to_string(parse(solved)["value"].get<int>()) + " ") == 0);
  // llama-server's --fit keeps 1024 MiB free a device: 19 layers where 21 fit (flash attention
  // on, llama.cpp's auto), as --headroom 1GiB finds.
  const json sj = parse(solved);
  CHECK(sj["value"] == 21);
  bool noted = false;
  for (const auto& n : sj["notes"])
    noted = noted || n.get<std::string>().find("it would place 19 layers, not 21") != std::string::npos;
  CHECK(noted);
  const CliResult margin = run_cli(
      {"fit", "--engine", "llama.cpp", "--model", "llama-3.3-70b", "--gpu", "rtx-3060", "--headroom", "1GiB", "--json"});
  REQUIRE(margin.code == 0);
  CHECK(parse(margin)["value"] == 19);
}

TEST_CASE("serving: --engine llama.cpp: ggml-cuda's pool in each GPU's total", "[cli][serving]") {
  const auto device = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "16384",
                                  "--gpu", "h100-80gb", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    REQUIRE(r.code == 0);
    return parse(r)["engine"]["devices"][0];
  };
  // Without flash attention: KQV's scores in f16, 16384 cells x 512 tokens x 32 heads (512 MiB),
  // its f16 product 128 x 512 x 32 (4 MiB), the pointer arrays (512 + 256 bytes): 518 MiB in
  // 2 MiB pieces, in the total beside the buffers and the reserve.
  const json off = device({"--flash-attn", "off"});
  CHECK(off["pool_bytes"] == 518ULL << 20);
  CHECK(off["total_bytes"].get<std::uint64_t>() ==
        off["model_buffer_bytes"].get<std::uint64_t>() + off["kv_buffer_bytes"].get<std::uint64_t>() +
            off["compute_buffer_bytes"].get<std::uint64_t>() + off["pool_bytes"].get<std::uint64_t>() +
            off["runtime_bytes"].get<std::uint64_t>() + off["reserve_bytes"].get<std::uint64_t>());
  // An H100's bare context (132 SMs x 2048 threads x 2 KiB: 528 MiB, 527 measured) and what
  // llama.cpp loads beyond it: its kernels (82 MiB), and cuBLAS (55) where the pool shows it runs.
  CHECK(off["reserve_bytes"] == 528ULL << 20);
  CHECK(off["runtime_bytes"] == (82ULL + 55) << 20);
  CHECK(device({"--flash-attn", "on"})["runtime_bytes"] == 82ULL << 20);
  // --cuda-context: what the user measured outside the buffers, the whole of it.
  const json measured = device({"--flash-attn", "off", "--cuda-context", "700MiB"});
  CHECK(measured["reserve_bytes"] == 700ULL << 20);
  CHECK(measured["runtime_bytes"] == 0);
  CHECK(measured["pool_bytes"] == 518ULL << 20);  // the pool stays: it grows with the cache
  CHECK(run_cli({"estimate", "--engine", "ollama", "--model", "llama-3.1-8b", "--cuda-context", "700MiB"}).code == 2);
  CHECK(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--cuda-context", "lots"}).code == 2);
  CHECK(device({"--flash-attn", "on"})["pool_bytes"] == 0);  // a quantized file's matmuls: MMQ, no cuBLAS
  // An f16 file with flash attention: ffn_gate's matmul through cuBLAS, the activations in f16
  // (4096 x 512) and the product in f16 (14336 x 512), 18 MiB + 128 bytes: 20 MiB.
  CHECK(device({"--flash-attn", "on", "--dtype", "fp16"})["pool_bytes"] == 20ULL << 20);
  // -ngl 0 with a GPU: llama.cpp still starts the GPU's backend and op offload runs every layer
  // there (the Q4_K_M file's output layer, Q6_K, copied in with its logits); --device none: none.
  const auto ngl0 = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu-layers", "0",
                                  "--ctx-size", "8192", "--flash-attn", "on", "--gpu", "h100-80gb", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    REQUIRE(r.code == 0);
    return parse(r)["engine"];
  };
  const json gpu = ngl0({});
  // The weight's copy 128256 rows x 3360 bytes, the logits 128256 x 512 f32, one [4096, 512] f32.
  CHECK(gpu["devices"][0]["compute_buffer_bytes"] == 128256ULL * 3360 + 128256ULL * 512 * 4 + 4096ULL * 512 * 4);
  CHECK(gpu["host"]["compute_buffer_bytes"].get<std::uint64_t>() < 32ULL << 20);  // the graph's inputs
  const json none = ngl0({"--device", "none"});
  CHECK(none["devices"][0]["compute_buffer_bytes"] == 0);
  CHECK(none["devices"][0]["total_bytes"] == 0);  // no CUDA context either
  CHECK(none["host"]["compute_buffer_bytes"].get<std::uint64_t>() > 256ULL << 20);  // the CPU's own graph
  CHECK(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--device", "CUDA0"}).code == 2);
}

TEST_CASE("serving: --engine ollama: num_ctx from the total VRAM, as Ollama 0.15.5 picks it", "[cli][serving]") {
  const auto engine_of = [](std::vector<std::string> gpu) {
    return report_with({"estimate", "--engine", "ollama", "--model", "llama-3.2-3b", "--json"}, gpu);
  };
  // An RTX 3060 (11.76 GiB): under 23 GiB, 4096 cells: 28 layers x 4096 x (K + V) x 8 heads x
  // 128 x 2 bytes.
  const json small = engine_of({"--gpu", "rtx-3060"});
  CHECK(small["engine"]["name"] == "ollama");
  CHECK(small["engine"]["n_ctx"] == 4096);
  CHECK(small["engine"]["devices"][0]["kv_buffer_bytes"] == 28ULL * 4096 * 2 * 1024 * 2);
  CHECK(small["engine"]["devices"][0]["reserve_bytes"] == 457ULL << 20);
  // An RTX 3090 (from 23 GiB): 32768; an H100 (from 47): 262144, capped at the model's 131072.
  CHECK(engine_of({"--gpu", "rtx-3090"})["engine"]["n_ctx"] == 32768);
  const json big = engine_of({"--gpu", "h100-80gb"});
  CHECK(big["engine"]["n_ctx"] == 131072);
  bool noted = false;
  for (const auto& n : big["notes"])
    noted = noted || n.get<std::string>().find("gives 262144, the model's 131072") != std::string::npos;
  CHECK(noted);
  // Two 3060s add up (23.52 GiB): 32768. No card: 4096. --ctx-size wins.
  CHECK(engine_of({"--gpu", "rtx-3060,rtx-3060"})["engine"]["n_ctx"] == 32768);
  CHECK(engine_of({})["engine"]["n_ctx"] == 4096);
  CHECK(engine_of({"--gpu", "h100-80gb", "--ctx-size", "8192"})["engine"]["n_ctx"] == 8192);
}

TEST_CASE("serving: --engine llama.cpp --config model.gguf reads the file's own tensors", "[cli][serving]") {
  vramfit::test::TempDir dir;
  const auto w = vramfit::test::tiny_llama_gguf();
  const std::string path = dir.write("tiny.gguf", w.header() + std::string(w.data_size(), '\0'));
  const CliResult r =
      run_cli({"estimate", "--engine", "llama.cpp", "--config", path, "--ctx-size", "512", "--json"});
  REQUIRE(r.code == 0);
  const json e = parse(r)["engine"];
  CHECK(e["devices"][0]["model_buffer_bytes"] == 104704);  // tests/unit/engine/llamacpp_test.cpp
  CHECK(e["devices"][0]["kv_buffer_bytes"] == 2 * 2 * 64 * 512);
  CHECK(e["file_type"] == "Q8_0");
}

TEST_CASE("serving: --engine vllm: vLLM's own error when max_model_len does not fit, and the fix", "[cli][serving]") {
  const CliResult r = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3090",
                               "--max-model-len", "131072", "--json"});
  CHECK(r.code == 1);
  const json d = parse(r);
  const json& e = d["engine"];
  CHECK(e["max_model_len_fits"] == false);
  CHECK(e["error"].get<std::string>().find("is larger than the maximum number of tokens that can be stored in KV cache") !=
        std::string::npos);
  // 2 MiB per block of 16 tokens: 32 layers x 2 x 8 heads x 128 x 2 bytes x 16.
  CHECK(e["kv_cache_bytes"] == e["num_gpu_blocks"].get<std::uint64_t>() * 2097152);
  CHECK(e["kv_cache_tokens"] == e["num_gpu_blocks"].get<std::uint64_t>() * 16);
  bool lower = false;
  for (const auto& f : d["advice"]["fixes"])
    if (f["id"] == "lower-max-model-len") lower = f["fits"] == true;
  CHECK(lower);

  const CliResult fit = run_cli({"fit", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3090",
                                 "--solve", "max-model-len", "--json"});
  REQUIRE(fit.code == 0);
  CHECK(parse(fit)["value"] == e["kv_cache_tokens"]);
  // Where the cache holds more than the model's context (Gemma 2 9B: 8192 positions; its
  // sliding-window layers keep only the window), the answer stops at the model's limit.
  // (vLLM 0.20: its CUDA graphs outside the budget; from 0.21 their 42 layers' estimate leaves
  // the 4090 about 1 GiB of KV cache, 2016 tokens.)
  const CliResult gem = run_cli({"fit", "--engine", "vllm", "--model", "gemma-2-9b", "--gpu", "rtx-4090",
                                 "--solve", "max-model-len", "--vllm-version", "0.20", "--json"});
  REQUIRE(gem.code == 0);
  CHECK(parse(gem)["value"] == 8192);

  const CliResult fp8 = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3090",
                                 "--max-model-len", "8192", "--kv-cache-dtype", "fp8", "--json"});
  REQUIRE(fp8.code == 0);
  CHECK(parse(fp8)["engine"]["kv_cache_bytes"] == parse(fp8)["engine"]["num_gpu_blocks"].get<std::uint64_t>() * 1048576);
}

TEST_CASE("serving: --engine vllm: no room for any block exits 1 with vLLM's message", "[cli][serving]") {
  const CliResult r = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3060", "--json"});
  CHECK(r.code == 1);
  const json e = parse(r)["engine"];
  CHECK(e["num_gpu_blocks"] == 0);
  CHECK(e["error"] ==
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "
        "engine.");
}

TEST_CASE("serving: --engine flags: every misuse is named", "[cli][serving]") {
  require_usage_error(run_cli({"estimate", "--model", "llama-3.1-8b", "--gpu-layers", "10"}),
                      "vramfit: error: --gpu-layers: applies to a serving engine only (add --engine llama.cpp (or "
                      "ollama))\n");
  require_usage_error(
      run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--max-model-len", "4096"}),
      "vramfit: error: --max-model-len: does not apply to --engine llama.cpp (it is a vLLM flag: use --engine vllm, "
      "or drop it)\n");
  require_usage_error(run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--mode", "train"}),
                      "vramfit: error: --mode: does not apply to --engine vllm (vLLM's own flags: --max-model-len, "
                      "--max-num-seqs, --tensor-parallel-size)\n");
  require_usage_error(run_cli({"estimate", "--engine", "llamacpp2", "--model", "llama-3.1-8b"}),
                      "vramfit: error: --engine: unknown engine 'llamacpp2' (did you mean 'llama.cpp'? one of "
                      "transformers, llama.cpp, ollama, vllm)\n");
  require_usage_error(run_cli({"estimate", "--engine", "xyz", "--model", "llama-3.1-8b"}),
                      "vramfit: error: --engine: unknown engine 'xyz' (one of transformers, llama.cpp, ollama, "
                      "vllm)\n");
  // -ngl's words: all (every layer, as the default), auto (--fit's choice: refused, pointing at fit).
  const auto ngl = [](const char* v) {
    return run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu-layers", v, "--json"});
  };
  CHECK(ngl("all").out == run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--json"}).out);
  CHECK(ngl("-2").code == 0);
  for (const char* v : {"auto", "-1"}) {
    const CliResult a = ngl(v);
    CHECK(a.code == 2);
    CHECK(a.err.find("leaves the layers to llama.cpp's --fit") != std::string::npos);
    CHECK(a.err.find("vramfit fit --solve gpu-layers") != std::string::npos);
  }
  const CliResult v = run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--cache-type-v", "q4_0"});
  CHECK(v.code == 2);
  CHECK(v.err.find("--cache-type-v: a quantized V cache (q4_0) needs flash attention") != std::string::npos);
  const CliResult split = run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu",
                                   "rtx-3090,rtx-3060", "--tensor-split", "1,2,3"});
  CHECK(split.code == 2);
  CHECK(split.err.find("--tensor-split: 3 shares for 2 GPUs") != std::string::npos);
  // Shares past a float's range (llama.cpp sums them in a float) are refused, not placed: all
  // layers went to the second GPU before.
  const CliResult huge = run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu",
                                  "rtx-3090,rtx-3060", "--tensor-split", "1e308,1e308"});
  CHECK(huge.code == 2);
  CHECK(huge.err == "vramfit: error: --tensor-split: the shares add up to inf, past a float's range (give shares in "
                    "proportion, e.g. 3,1)\n");
  CHECK(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu", "rtx-3090,rtx-3060",
                 "--tensor-split", "3e38,3e38"}).code == 2);
  CHECK(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu", "rtx-3090,rtx-3060",
                 "--tensor-split", "1e38,1e38"}).code == 0);
  const CliResult tp = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                                "--tensor-parallel-size", "3"});
  CHECK(tp.code == 2);
  CHECK(tp.err.find("--tensor-parallel-size: 3 does not divide the 32 attention heads") != std::string::npos);
  const CliResult solve =
      run_cli({"fit", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--solve", "gpu-layers"});
  CHECK(solve.code == 2);
  CHECK(solve.err.find("--solve: 'gpu-layers' does not apply to --engine vllm") != std::string::npos);
  // A count with an exact exponent is that whole number ("8e3" is --ctx-size 8000); others are named.
  CHECK(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "8e3", "--json"}).out ==
        run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "8000", "--json"}).out);
  require_usage_error(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "1e30"}),
                      "vramfit: error: --ctx-size: 1e30 is more than the engines take (at most 2147483647, a 32-bit "
                      "count) (e.g. --ctx-size 4096)\n");
  require_usage_error(run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "1.5e0"}),
                      "vramfit: error: --ctx-size: '1.5e0' is not a positive whole number (e.g. --ctx-size 4096)\n");
  // --engine transformers is the default estimate, unchanged.
  CHECK(run_cli({"estimate", "--engine", "transformers", "--model", "llama-3.1-8b", "--json"}).out ==
        run_cli({"estimate", "--model", "llama-3.1-8b", "--json"}).out);
}

TEST_CASE("serving: --engine vllm: tensor parallel sizes vLLM's parallel layers refuse exit 2", "[cli][serving]") {
  const auto tp = [](std::vector<std::string> extra) {
    std::vector<std::string> a{"estimate", "--engine", "vllm", "--gpu", "h100-80gb", "--max-model-len", "8192"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  // Qwen2.5-7B: 28 heads divide by 7, but not its 4 KV heads nor its MLP of 18944.
  const CliResult seven = tp({"--model", "qwen2.5-7b", "--tensor-parallel-size", "7"});
  CHECK(seven.code == 2);
  CHECK(seven.err.find("--tensor-parallel-size: 7 GPUs and 4 KV heads") != std::string::npos);
  CHECK(seven.err.find("--tensor-parallel-size: 7 does not divide the MLP width 18944") != std::string::npos);
  CHECK(tp({"--model", "qwen2.5-7b", "--tensor-parallel-size", "4"}).code == 0);
  // Qwen3-30B-A3B in block fp8 (Qwen's FP8 checkpoint): experts of 768 are 384 a GPU over 2, whole
  // blocks of 128; 192 over 4, which vLLM refuses ("not divisible by weight quantization block_n").
  CHECK(tp({"--model", "qwen3-30b-a3b", "--quant", "fp8-block", "--tensor-parallel-size", "2"}).code == 0);
  const CliResult four = tp({"--model", "qwen3-30b-a3b", "--quant", "fp8-block", "--tensor-parallel-size", "4"});
  CHECK(four.code == 2);
  CHECK(four.err.find("the expert width 768 over 4 GPUs is 192 a GPU, not a multiple of the checkpoint's fp8 block of "
                      "128") != std::string::npos);
  CHECK(tp({"--model", "qwen3-30b-a3b", "--tensor-parallel-size", "4"}).code == 0);  // unquantized: 192 columns a GPU
}

TEST_CASE("serving: --engine vllm: Llama 4's chunked layers keep a full cache where the release turns the hybrid manager "
          "off", "[cli][serving]") {
  const auto blocks = [](const std::string& version) {
    const CliResult r = run_cli({"estimate", "--engine", "vllm", "--model", "llama-4-scout-17b-16e", "--gpu", "h100-80gb",
                                 "--tensor-parallel-size", "8", "--max-model-len", "131072", "--vllm-version", version,
                                 "--json"});
    REQUIRE(r.code == 0);
    return parse(r)["engine"];
  };
  // 0.10.0: the hybrid manager keeps the 36 chunked layers' chunks apart from the 12 full layers'
  // whole length (4 groups of 12); 0.10.1 to 0.22 (vllm#21761): every layer full-length, a quarter
  // of the blocks for the same cache; 0.23 on: hybrid again (vllm#29627).
  const json before = blocks("0.10.0"), off = blocks("0.11"), on = blocks("0.27.1");
  CHECK(off["num_gpu_blocks"].get<std::uint64_t>() * 4 < before["num_gpu_blocks"].get<std::uint64_t>() + 4);
  CHECK(off["num_gpu_blocks"].get<std::uint64_t>() * 4 + 4 > before["num_gpu_blocks"].get<std::uint64_t>());
  CHECK(on["num_gpu_blocks"].get<std::uint64_t>() > 3 * blocks("0.22")["num_gpu_blocks"].get<std::uint64_t>());
  CHECK(off["max_concurrency"].get<double>() * 2.5 < before["max_concurrency"].get<double>());
  // VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 keeps the hybrid layout on 0.11; a value
  // vLLM's int() cannot read exits 2.
  ::setenv("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "1", 1);
  const json allowed = blocks("0.11");
  ::setenv("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "yes", 1);
  const CliResult bad = run_cli({"estimate", "--engine", "vllm", "--model", "llama-4-scout-17b-16e", "--gpu", "h100-80gb",
                                 "--tensor-parallel-size", "8"});
  // vLLM reads it only for a model with chunked layers: another model is estimated whatever it says.
  const CliResult other = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb"});
  ::unsetenv("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE");
  CHECK(other.code == 0);
  CHECK(allowed["num_gpu_blocks"] == before["num_gpu_blocks"]);
  CHECK(bad.code == 2);
  CHECK(bad.err.find("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE: 'yes' is not an integer") != std::string::npos);
}

TEST_CASE("serving: --engine vllm: MLA on Hopper takes FlashMLA's 64-token blocks", "[cli][serving]") {
  const auto engine = [](std::vector<std::string> extra) {
    std::vector<std::string> a{"estimate", "--engine", "vllm", "--model", "deepseek-v2-lite", "--max-model-len", "32768",
                               "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(a);
    REQUIRE(r.code == 0);
    return parse(r);
  };
  // A block is 64 tokens x 27 layers x (512 + 64) x 2 bytes on an H100; 16 tokens elsewhere or as given.
  const json h100 = engine({"--gpu", "h100-80gb"});
  CHECK(h100["engine"]["kv_cache_bytes"] == h100["engine"]["num_gpu_blocks"].get<std::uint64_t>() * 64 * 27 * 576 * 2);
  CHECK(h100.dump().find("Forcing kv cache block size to 64 for FlashMLA backend.") != std::string::npos);
  const json given = engine({"--gpu", "h100-80gb", "--block-size", "16"});
  CHECK(given["engine"]["kv_cache_bytes"] == given["engine"]["num_gpu_blocks"].get<std::uint64_t>() * 16 * 27 * 576 * 2);
  const json a100 = engine({"--gpu", "a100-80gb"});
  CHECK(a100["engine"]["kv_cache_bytes"] == a100["engine"]["num_gpu_blocks"].get<std::uint64_t>() * 16 * 27 * 576 * 2);
  CHECK(a100.dump().find("FlashMLA") == std::string::npos);
  // vLLM's argument takes its BlockSize choices only (1, 8, ..., 256): 24 or 512 is refused naming the flag.
  for (const char* odd : {"24", "512", "2"}) {
    const CliResult r = run_cli({"estimate", "--engine", "vllm", "--model", "deepseek-v2-lite", "--gpu", "a100-80gb",
                                 "--block-size", odd});
    CHECK(r.code == 2);
    CHECK(r.err == fmt::format("vramfit: error: --block-size: {} is not one of vLLM's block sizes (1, 8, 16, 32, 64, "
                               "128, 256) (give one of them, e.g. --block-size 16 (vLLM's default), or leave it out)\n",
                               odd));
  }
  const json b256 = engine({"--gpu", "a100-80gb", "--block-size", "256"});
  CHECK(b256["engine"]["kv_cache_bytes"] == b256["engine"]["num_gpu_blocks"].get<std::uint64_t>() * 256 * 27 * 576 * 2);
}

TEST_CASE("serving: advise --engine vllm: the fixes together where none alone fits", "[cli][serving]") {
  // Flags of a "together" change, split at spaces; "(4 GPUs)" is a note, not a flag.
  const auto flags_of = [](const std::string& change) {
    std::vector<std::string> out;
    std::string word;
    for (char c : change + ' ') {
      if (c != ' ') { word += c; continue; }
      if (!word.empty() && word.front() != '(' && word.back() != ')') out.push_back(word);
      word.clear();
    }
    return out;
  };
  const auto together_of = [](const json& advice) {
    for (const auto& f : advice["fixes"])
      if (f["id"] == "together") return f["change"].get<std::string>();
    return std::string();
  };
  // Llama 3.1 70B on RTX 4090s: no fix alone fits (bf16 weights are 131 GiB, 33 a GPU over 4);
  // together: the fewest GPUs whose fp8 weights leave a cache, an fp8 cache, and the longest
  // max_model_len it then holds.
  const std::vector<std::string> base{"advise", "--engine", "vllm", "--model", "llama-3.1-70b", "--gpu", "rtx-4090"};
  std::vector<std::string> js = base;
  js.emplace_back("--json");
  const CliResult r = run_cli(js);
  REQUIRE(r.code == 1);
  const json a = parse(r)["advice"];
  REQUIRE(a["fixes"].size() == 1);
  CHECK(a["fixes"][0]["fits"] == true);
  const std::string change = together_of(a);
  CHECK(change == "--tensor-parallel-size 4 --quant fp8 --kv-cache-dtype fp8 --max-model-len 56496 (4 GPUs)");
  // Applied, it fits; one token more of max_model_len does not.
  std::vector<std::string> est{"estimate", "--engine", "vllm", "--model", "llama-3.1-70b", "--gpu", "rtx-4090"};
  for (const std::string& w : flags_of(change)) est.push_back(w);
  CHECK(run_cli(est).code == 0);
  est.back() = "56497";
  CHECK(run_cli(est).code == 1);
  const CliResult text = run_cli(base);
  CHECK(text.out.find("together: each on what the earlier left") != std::string::npos);

  // On one RTX 3060 only more GPUs fit alone, so the fixes together on the one GPU are shown
  // beside it: fp8 weights (16-bit ones leave no cache) and 512 sequences (the sampler's peak
  // over 1024 requests leaves none either).
  const CliResult one = run_cli({"advise", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3060",
                                 "--max-model-len", "2048", "--max-num-seqs", "1024", "--json"});
  REQUIRE(one.code == 1);
  const json b = parse(one)["advice"];
  CHECK(together_of(b) == "--quant fp8 --max-num-seqs 512");
  bool tp = false;
  for (const auto& f : b["fixes"]) tp = tp || (f["id"] == "more-tensor-parallel" && f["fits"] == true);
  CHECK(tp);
  CHECK(run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3060", "--max-model-len",
                 "2048", "--max-num-seqs", "512", "--quant", "fp8"}).code == 0);
  CHECK(run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-3060", "--max-model-len",
                 "2048", "--max-num-seqs", "1024", "--quant", "fp8"}).code == 1);
  // Nothing fits a 405B on one 12 GB card, alone or together: each fix is shown as not fitting.
  const CliResult none = run_cli({"advise", "--engine", "vllm", "--model", "llama-3.1-405b", "--gpu", "rtx-3060", "--json"});
  REQUIRE(none.code == 1);
  CHECK(together_of(parse(none)["advice"]).empty());
  const json none_advice = parse(none)["advice"];
  REQUIRE(!none_advice["fixes"].empty());
  for (const auto& f : none_advice["fixes"]) CHECK(f["fits"] == false);
}

TEST_CASE("serving: advise --engine llama.cpp: a q8_0 cache keeps more layers on the GPU", "[cli][serving]") {
  // Llama 3.1 70B Q4_K_M at 32768 cells on one RTX 4090 (flash attention on, llama.cpp's
  // auto): only fewer GPU layers fit alone (37); with a q8_0 cache 41 fit, which the estimate
  // with those flags confirms.
  const CliResult r = run_cli({"advise", "--engine", "llama.cpp", "--model", "llama-3.1-70b", "--quant", "q4_k_m",
                               "--gpu", "rtx-4090", "--ctx-size", "32768", "--json"});
  REQUIRE(r.code == 1);
  std::string fewer, together;
  const json advice = parse(r)["advice"];
  for (const auto& f : advice["fixes"]) {
    if (f["id"] == "fewer-gpu-layers") fewer = f["change"].get<std::string>();
    if (f["id"] == "together") together = f["change"].get<std::string>();
  }
  CHECK(fewer == "--gpu-layers 37 (the rest runs on the CPU)");
  CHECK(together == "--cache-type-k q8_0 --cache-type-v q8_0 --flash-attn on --gpu-layers 41 (41 layers on the GPU, not 37)");
  const std::vector<std::string> base{"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-70b", "--quant", "q4_k_m",
                                      "--gpu", "rtx-4090", "--ctx-size", "32768", "--cache-type-k", "q8_0",
                                      "--cache-type-v", "q8_0", "--flash-attn", "on", "--gpu-layers"};
  std::vector<std::string> at41 = base, at42 = base;
  at41.emplace_back("41");
  at42.emplace_back("42");
  CHECK(run_cli(at41).code == 0);
  CHECK(run_cli(at42).code == 1);
  // A job a q8_0 cache alone fits gets no "together" row.
  const CliResult q8 = run_cli({"advise", "--engine", "ollama", "--model", "qwen2.5-32b", "--gpu", "rtx-4090",
                                "--ctx-size", "32768", "--json"});
  REQUIRE(q8.code == 1);
  const json q8_advice = parse(q8)["advice"];
  REQUIRE(!q8_advice["fixes"].empty());
  for (const auto& f : q8_advice["fixes"]) CHECK(f["id"] != "together");
}

TEST_CASE("serving: --engine llama.cpp: --flash-attn auto, llama.cpp's default, as CUDA resolves it", "[cli][serving]") {
  const auto run = [](std::vector<std::string> extra) {
    return report_with({"estimate", "--engine", "llama.cpp", "--gpu", "rtx-4090", "--json"}, extra);
  };
  // Llama 3.1 8B (heads of 128) at 32768 cells: on by default, so no [32768, 512, 32] f32 score
  // matrix: the compute buffer is the same as with --flash-attn on, and far under the one with off.
  const json dflt = run({"--model", "llama-3.1-8b", "--ctx-size", "32768"});
  const json on = run({"--model", "llama-3.1-8b", "--ctx-size", "32768", "--flash-attn", "on"});
  const json off = run({"--model", "llama-3.1-8b", "--ctx-size", "32768", "--flash-attn", "off"});
  CHECK(dflt["engine"]["flash_attn"] == true);
  CHECK(dflt["engine"]["devices"][0]["compute_buffer_bytes"] == on["engine"]["devices"][0]["compute_buffer_bytes"]);
  CHECK(off["engine"]["devices"][0]["compute_buffer_bytes"].get<std::uint64_t>() >
        2 * on["engine"]["devices"][0]["compute_buffer_bytes"].get<std::uint64_t>());
  CHECK(run({"--model", "llama-3.1-8b", "--flash-attn", "auto"})["engine"]["flash_attn"] == true);
  // A K cache type unlike V's runs no CUDA flash-attention kernel: auto resolves off.
  CHECK(run({"--model", "llama-3.1-8b", "--cache-type-k", "q8_0"})["engine"]["flash_attn"] == false);
  // minicpm3: K heads of qk_nope + qk_rope = 96 over V heads of 64: off.
  CHECK(run({"--config", std::string(VRAMFIT_SOURCE_DIR) + "/tests/accuracy/arch/models/minicpm3-mini.json"})["engine"]["flash_attn"] == false);
  // Ollama: on for the architectures its list names (qwen3, gpt-oss, gemma3, ...), off for the
  // rest (llama) unless told.
  const auto ollama_fa = [](const std::string& model, std::vector<std::string> extra) {
    return report_with({"estimate", "--engine", "ollama", "--model", model, "--json"}, extra)["engine"]["flash_attn"].get<bool>();
  };
  CHECK_FALSE(ollama_fa("llama-3.1-8b", {}));
  CHECK(ollama_fa("qwen3-8b", {}));
  CHECK(ollama_fa("gpt-oss-20b", {}));
  CHECK_FALSE(ollama_fa("qwen3-8b", {"--flash-attn", "off"}));
  CHECK(ollama_fa("llama-3.1-8b", {"--flash-attn", "on"}));
  const CliResult bad = run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--flash-attn", "maybe"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--flash-attn: 'maybe' is not on, off or auto") != std::string::npos);
}

TEST_CASE("serving: --engine vllm --max-model-len auto: vLLM's auto-fit", "[cli][serving]") {
  const auto est = [](std::vector<std::string> extra) {
    return run_with({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--json"}, extra);
  };
  // An RTX 4090: one request of 131072 tokens does not fit; auto boots at the longest that does,
  // the largest_max_model_len the plain estimate reports, and the job fits.
  const CliResult plain = est({"--gpu", "rtx-4090"});
  REQUIRE(plain.code == 1);
  const std::uint64_t longest = parse(plain)["engine"]["largest_max_model_len"];
  const CliResult fitted = est({"--gpu", "rtx-4090", "--max-model-len", "auto"});
  REQUIRE(fitted.code == 0);
  CHECK(parse(fitted)["engine"]["max_model_len"] == longest);
  CHECK(parse(fitted)["engine"]["max_model_len_fits"] == true);
  CHECK(est({"--gpu", "rtx-4090", "--max-model-len", "-1"}).out == fitted.out);
  // An H100: the model's full length fits and is kept.
  const CliResult big = est({"--gpu", "h100-80gb", "--max-model-len", "auto"});
  REQUIRE(big.code == 0);
  CHECK(parse(big)["engine"]["max_model_len"] == 131072);
  // No cache at all: still does not fit. Before 0.12: refused.
  const CliResult none = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-70b", "--gpu", "rtx-4090",
                                  "--max-model-len", "auto"});
  CHECK(none.code == 1);
  CHECK(none.out.find("no length fits") != std::string::npos);
  const CliResult old = est({"--gpu", "h100-80gb", "--max-model-len", "auto", "--vllm-version", "0.11"});
  CHECK(old.code == 2);
  CHECK(old.err.find("--max-model-len: 'auto' (auto-fit) is not in vLLM 0.11.0: it arrived in 0.12") != std::string::npos);
}

TEST_CASE("serving: --engine vllm --kv-cache-memory-bytes: the cache as given, the utilization not read", "[cli][serving]") {
  const auto est = [](std::vector<std::string> extra) {
    return run_with({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--max-model-len",
                     "16384", "--json"},
                    extra);
  };
  // 4 GiB of cache: 2048 blocks of 2 MiB (32 layers x 2 x 8 heads x 128 x 2 bytes x 16 tokens),
  // 32768 tokens, two requests of 16384; it fits the 4090 beside the weights and the profile peak.
  const CliResult four = est({"--kv-cache-memory-bytes", "4GiB"});
  REQUIRE(four.code == 0);
  const json e = parse(four)["engine"];
  CHECK(e["kv_cache_bytes"] == 4ULL << 30);
  CHECK(e["num_gpu_blocks"] == 2048);
  CHECK(e["kv_cache_tokens"] == 32768);
  CHECK(e["max_concurrency"] == 2.0);
  // 9 GiB does not fit beside 15 GiB of weights: exit 1, and the note says by how much.
  const CliResult nine = est({"--kv-cache-memory-bytes", "9GiB"});
  CHECK(nine.code == 1);
  // Less than one request of --max-model-len: vLLM refuses it at start-up; refused here (exit 2).
  const CliResult tiny = est({"--kv-cache-memory-bytes", "1MiB"});
  CHECK(tiny.code == 2);
  CHECK(tiny.err.find("--kv-cache-memory-bytes: 1048576 bytes hold 0 tokens, less than one request of --max-model-len "
                      "16384 (2147483648 bytes)") != std::string::npos);
  CHECK(est({"--kv-cache-memory-bytes", "lots"}).code == 2);
  CHECK(est({"--kv-cache-memory-bytes", "0"}).code == 2);
  CHECK(est({"--kv-cache-memory-bytes", "4GiB", "--vllm-version", "0.10"}).code == 2);
}

TEST_CASE("serving: --engine llama.cpp without --ctx-size: 4096 cells, and a note on llama.cpp's own default", "[cli][serving]") {
  const auto notes_of = [](std::vector<std::string> extra) {
    const json d =
        report_with({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"}, extra);
    CHECK(d["engine"]["n_ctx"] == (extra.empty() ? 4096 : 8192));
    std::string all;
    for (const auto& n : d["notes"]) all += n.get<std::string>() + "\n";
    return all;
  };
  CHECK(notes_of({}).find("current llama.cpp's own default (-c 0) is the model's 131072") != std::string::npos);
  CHECK(notes_of({"--ctx-size", "8192"}).find("--ctx-size not given") == std::string::npos);
}

TEST_CASE("serving: --engine llama.cpp --ctx-size fit: the trained context cut as llama-server's --fit cuts it",
          "[cli][serving]") {
  const auto est = [](std::vector<std::string> extra, const std::string& model = "llama-3.1-8b") {
    return run_with({"estimate", "--engine", "llama.cpp", "--model", model, "--json"}, extra);
  };
  const auto used = [](const json& dev) {
    return dev["model_buffer_bytes"].get<std::int64_t>() + dev["kv_buffer_bytes"].get<std::int64_t>() +
           dev["compute_buffer_bytes"].get<std::int64_t>();
  };
  const auto devices_at = [&](std::vector<std::string> extra, const std::string& model = "llama-3.1-8b") {
    const CliResult r = est(extra, model);
    const json d = parse(r);
    return d["engine"]["devices"];
  };
  constexpr std::int64_t MiB = 1 << 20;
  // common_params_fit_impl on an RTX 3060 (12044 MiB; its bare CUDA context, 28 SMs x 1536 threads x
  // 2 KiB = 84 MiB, gone when --fit asks the free memory): the device projected at the trained
  // 131072 cells and at --fit-ctx's 4096, the context interpolated so that 1024 MiB stay free,
  // rounded down to 256.
  {
    const std::int64_t full = used(devices_at({"--gpu", "rtx-3060", "--ctx-size", "131072"})[0]);
    const std::int64_t low = used(devices_at({"--gpu", "rtx-3060", "--ctx-size", "4096"})[0]);
    const std::int64_t target = (12044 - 84 - 1024) * MiB;
    std::int64_t n = 4096 + (131072 - 4096) * (target - low) / (full - low);
    n -= n % 256;
    CHECK(n == 50176);
    const CliResult fit = est({"--gpu", "rtx-3060", "--ctx-size", "fit"});
    REQUIRE(fit.code == 0);
    const json d = parse(fit);
    CHECK(d["engine"]["n_ctx"] == n);
    const std::string notes = notes_text(d);
    CHECK(notes.find("cuts the model's 131072 cells to 50176") != std::string::npos);
    CHECK(d["engine"]["devices"][0]["reserve_bytes"] == 84 * MiB);
    // The cut leaves the margin free of the buffers; the kernels loaded after (82 MiB) take from it.
    CHECK(d["engine"]["devices"][0]["runtime_bytes"] == 82 * MiB);
    CHECK(d["engine"]["devices"][0]["memory_bytes"].get<std::int64_t>() -
              d["engine"]["devices"][0]["total_bytes"].get<std::int64_t>() >=
          (1024 - 82) * MiB);
  }
  // An RTX 4090 keeps more than 1024 MiB free at 131072 cells: nothing is cut.
  CHECK(parse(est({"--gpu", "rtx-4090", "--ctx-size", "fit"}))["engine"]["n_ctx"] == 131072);
  // --ctx-size 0 is llama.cpp's explicit -c 0, which --fit keeps whole (llama.cpp#19070): the 3060
  // is short of 16 GiB of cache.
  const CliResult zero = est({"--gpu", "rtx-3060", "--ctx-size", "0"});
  CHECK(zero.code == 1);
  CHECK(parse(zero)["engine"]["n_ctx"] == 131072);
  // 6 GiB: even 4096 cells leave less than 1024 MiB; --fit stops at its floor and moves layers.
  {
    const CliResult small = est({"--budget", "6GiB", "--ctx-size", "fit"});
    REQUIRE(small.code == 0);
    const json d = parse(small);
    CHECK(d["engine"]["n_ctx"] == 4096);
    const std::int64_t low = used(devices_at({"--budget", "6GiB", "--ctx-size", "4096"})[0]);
    const std::int64_t short_mib = (low - (6144 - 457 - 1024) * MiB) / MiB;
    CHECK(short_mib == 510);
    const std::string notes = notes_text(d);
    CHECK(notes.find("still 510 MiB short, it then moves layers to the CPU") != std::string::npos);
  }
  // No card: the trained context.
  CHECK(parse(est({"--ctx-size", "fit"}))["engine"]["n_ctx"] == 131072);
  // Four sequences in their own streams get the trained context each (llama.cpp#27496): 64 GiB of
  // f16 cache fits an H100 whole.
  {
    const json e = parse(est({"--gpu", "h100-80gb", "--ctx-size", "fit", "--parallel", "4"}))["engine"];
    CHECK(e["n_ctx"] == 4 * 131072);
    CHECK(e["n_ctx_seq"] == 131072);
    CHECK(e["devices"][0]["kv_buffer_bytes"] == 64ULL << 30);
  }
  // Two RTX 3090s and Llama 3.1 70B: with several devices the target first leaves (2 + 1) half
  // layers of slack (a layer is the model buffers over its 80 layers).
  {
    const json full = devices_at({"--gpu", "rtx-3090,rtx-3090", "--ctx-size", "131072"}, "llama-3.1-70b");
    const json low = devices_at({"--gpu", "rtx-3090,rtx-3090", "--ctx-size", "4096"}, "llama-3.1-70b");
    std::int64_t used_full = 0, used_low = 0, model = 0, target = 0;
    for (std::size_t i = 0; i < 2; ++i) {
      used_full += used(full[i]);
      used_low += used(low[i]);
      model += full[i]["model_buffer_bytes"].get<std::int64_t>();
      target += full[i]["memory_bytes"].get<std::int64_t>() - full[i]["reserve_bytes"].get<std::int64_t>() - 1024 * MiB;
    }
    target -= 3 * (model / 80) / 2;
    std::int64_t n = 4096 + (131072 - 4096) * (target - used_low) / (used_full - used_low);
    n -= n % 256;
    CHECK(full[0]["reserve_bytes"] == 246 * MiB);  // 82 SMs x 1536 threads x 2 KiB
    CHECK(n == 14336);
    CHECK(parse(est({"--gpu", "rtx-3090,rtx-3090", "--ctx-size", "fit"}, "llama-3.1-70b"))["engine"]["n_ctx"] == n);
  }
  // fit --solve ctx: the most that fits (no margin), and a note on what llama-server picks itself.
  {
    const CliResult solve =
        run_cli({"fit", "--solve", "ctx", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu", "rtx-3060", "--json"});
    REQUIRE(solve.code == 0);
    const json d = parse(solve);
    CHECK(d["engine"]["n_ctx"] == 57600);
    const std::string notes = notes_text(d);
    CHECK(notes.find("llama-server run without -c picks 50176 cells itself") != std::string::npos);
    CHECK(notes.find("--ctx-size not given") == std::string::npos);
  }
  // Ollama has no such value; a model without a trained context cannot give one.
  const CliResult ollama = run_cli({"estimate", "--engine", "ollama", "--model", "llama-3.1-8b", "--ctx-size", "fit"});
  CHECK(ollama.code == 2);
  CHECK(ollama.err.find("--ctx-size") != std::string::npos);
  vramfit::test::TempDir dir;
  const std::string cfg = dir.write(
      "config.json", R"({"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
                         "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 32000})");
  const CliResult none = run_cli({"estimate", "--engine", "llama.cpp", "--config", cfg, "--ctx-size", "fit"});
  CHECK(none.code == 2);
  CHECK(none.err.find("--ctx-size: fit asks for the model's trained context, which the model does not give") !=
        std::string::npos);
}

TEST_CASE("serving: --ctx-size fit picks what llama.cpp's --fit picked on an H100", "[cli][serving][accuracy]") {
  // tests/accuracy/serving/device (run.sh, cases.txt): llama.cpp of June 2026 built for the H100,
  // its llama-fit-params on GGUFs of these shapes in Q8_0, the card's free memory 80552 MiB and
  // --fit-target set to leave a smaller card: each "card" here is that free memory less the
  // target, plus the 1024 MiB margin and the 457 MiB vramfit keeps for the CUDA context.
  vramfit::test::TempDir dir;
  const std::string l8 = dir.write(
      "l8.json", R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
                     "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": false})");
  const std::string q3 = dir.write(
      "q3.json", R"({"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
                     "max_position_embeddings": 40960, "rope_theta": 1000000.0, "tie_word_embeddings": false})");
  const auto fit = [](const std::string& cfg, std::int64_t target_mib) {
    const std::string budget = std::to_string(80552 - target_mib + 1024 + 457) + "MiB";
    return run_cli({"estimate", "--engine", "llama.cpp", "--config", cfg, "--quant", "q8_0", "--ctx-size", "fit",
                    "--budget", budget, "--json"});
  };
  // -fitt 68791: "context size reduced from 131072 to 30976", "-c 30976 -ngl -1".
  const CliResult a = fit(l8, 68791);
  REQUIRE(a.code == 0);
  CHECK(parse(a)["engine"]["n_ctx"] == 30976);
  // -fitt 74935: cut to 4096, still short: "-c 4096 -ngl 21".
  const CliResult b = fit(l8, 74935);
  CHECK(b.code == 1);
  const json bj = parse(b);
  CHECK(bj["engine"]["n_ctx"] == 4096);
  const std::string notes = notes_text(bj);
  CHECK(notes.find("places 21 of 33 layers on the GPU") != std::string::npos);
  // Qwen3-30B-A3B's shapes, -fitt 56503: "context size reduced from 40960 to 4096", then the
  // experts of blocks 36 to 47 (and part of 36's FFN) to the CPU.
  const std::string moe = dir.write(
      "moe.json", R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
                      "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
                      "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
                      "rope_theta": 1000000.0, "tie_word_embeddings": false})");
  const json mj = parse(fit(moe, 56503));
  CHECK(mj["engine"]["n_ctx"] == 4096);
  const std::string moe_notes = notes_text(mj);
  CHECK(moe_notes.find("it then moves expert tensors (then layers) to the CPU") != std::string::npos);
  // Qwen3 8B's shapes, -fitt 64695: "will leave 66817 >= 64695 MiB of free device memory, no
  // changes needed" (-c 0: the trained 40960).
  const CliResult c = fit(q3, 64695);
  REQUIRE(c.code == 0);
  CHECK(parse(c)["engine"]["n_ctx"] == 40960);
}

TEST_CASE("serving: --engine llama.cpp --kv-unified: the sequences share one stream of the whole context", "[cli][serving]") {
  const auto engine_of = [](std::vector<std::string> extra) {
    const json d = report_with({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--ctx-size", "8192",
                                "--parallel", "4", "--json"},
                               extra);
    return d["engine"];
  };
  // Four streams of 2048 cells each without it (llama-context.cpp n_ctx_seq = n_ctx / n_seq);
  // one stream every sequence reads whole with it. The cache is 8192 cells either way.
  const json split = engine_of({});
  CHECK(split["n_ctx_seq"] == 2048);
  const json unified = engine_of({"--kv-unified"});
  CHECK(unified["n_ctx_seq"] == 8192);
  CHECK(unified["n_ctx"] == 8192);
  CHECK(unified["host"]["kv_buffer_bytes"] == split["host"]["kv_buffer_bytes"]);
  const CliResult v = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--kv-unified"});
  CHECK(v.code == 2);
  CHECK(v.err.find("--kv-unified: does not apply to --engine vllm") != std::string::npos);
}

TEST_CASE("serving: advise on a job that fits needs no fix", "[cli][serving]") {
  const CliResult r =
      run_cli({"advise", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"});
  REQUIRE(r.code == 0);
  const json a = parse(r)["advice"];
  CHECK(a["fits_as_given"] == true);
  CHECK(a["fixes"].empty());
  const CliResult e = run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                               "--max-model-len", "8192", "--json"});
  REQUIRE(e.code == 0);
  CHECK(parse(e)["advice"].is_null());
  const CliResult t = run_cli({"advise", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu", "h100-80gb",
                               "--max-model-len", "8192"});
  CHECK(t.code == 0);
  CHECK(t.out.find("It fits as given: no change is needed.") != std::string::npos);
}

TEST_CASE("serving: --vllm-version: the graphs inside the budget from 0.21, a bad release exits 2", "[cli][serving]") {
  const std::vector<std::string> base = {"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--gpu",
                                         "h100-80gb", "--max-model-len", "8192", "--json"};
  auto with = [&](std::vector<std::string> extra) { return run_with(base, extra); };
  const CliResult now = with({});
  const CliResult old = with({"--vllm-version", "0.20.2"});
  REQUIRE(now.code == 0);
  REQUIRE(old.code == 0);
  const json n = parse(now)["engine"], o = parse(old)["engine"];
  CHECK(n["vllm_version"] == "0.27.1");
  CHECK(n["cuda_graphs_in_budget"] == true);
  CHECK(o["cuda_graphs_in_budget"] == false);
  CHECK(n["cuda_graphs_piecewise"] == 51);
  // An H100's default max_num_seqs is 1024 (get_batch_defaults), so FULL decode graphs go to 512
  // as the piecewise ones do (35 to 256 where max_num_seqs is 256).
  CHECK(n["max_num_seqs"] == 1024);
  CHECK(n["cuda_graphs_full"] == 51);
  CHECK(o["available_kv_cache_bytes"].get<std::int64_t>() - n["available_kv_cache_bytes"].get<std::int64_t>() ==
        n["cuda_graph_bytes"].get<std::int64_t>());
  const CliResult bad = with({"--vllm-version", "latest"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--vllm-version: 'latest' is not a vLLM release") != std::string::npos);
  // Releases before 0.6 (whose memory profiling was not read) are refused, not estimated as 0.6.
  const CliResult old_release = with({"--vllm-version", "0.5.5"});
  CHECK(old_release.code == 2);
  CHECK(old_release.err.find("--vllm-version: vLLM 0.5.5 is older than the oldest release vramfit follows (0.6)") !=
        std::string::npos);
  CHECK(with({"--vllm-version", "0.6.0"}).code == 0);
  const CliResult llama = run_cli({"estimate", "--engine", "llama.cpp", "--model", "llama-3.1-8b", "--vllm-version", "0.11"});
  CHECK(llama.code == 2);
}

TEST_CASE("serving: --override-tensor 'exps=CPU' is --n-cpu-moe over every block, bad values exit 2", "[cli][serving]") {
  const std::vector<std::string> base = {"estimate", "--engine", "llama.cpp", "--model", "olmoe-1b-7b", "--gpu",
                                         "rtx-4090", "--json"};
  auto with = [&](std::vector<std::string> extra) { return run_with(base, extra); };
  const CliResult ot = with({"--override-tensor", "exps=CPU"});
  const CliResult moe = with({"--n-cpu-moe", "16"});
  REQUIRE(ot.code == 0);
  REQUIRE(moe.code == 0);
  const json a = parse(ot)["engine"], b = parse(moe)["engine"];
  CHECK(a["devices"][0]["model_buffer_bytes"] == b["devices"][0]["model_buffer_bytes"]);
  CHECK(a["host"]["model_buffer_bytes"] == b["host"]["model_buffer_bytes"]);
  CHECK(a["devices"][0]["compute_buffer_bytes"] == b["devices"][0]["compute_buffer_bytes"]);
  const CliResult regex = with({"--override-tensor", "blk.(=CPU"});
  CHECK(regex.code == 2);
  CHECK(regex.err.find("--override-tensor: 'blk.(' is not a regular expression") != std::string::npos);
  const CliResult buf = with({"--override-tensor", "exps=GPU0"});
  CHECK(buf.code == 2);
  CHECK(buf.err.find("--override-tensor: unknown buffer type 'GPU0'") != std::string::npos);
  // Patterns std::regex would backtrack through for minutes: refused, not run.
  const CliResult nested = with({"--override-tensor", "(.*)*x=CPU"});
  CHECK(nested.code == 2);
  CHECK(nested.err.find("--override-tensor: '(.*)*x': a group that repeats holds a repeat") != std::string::npos);
  CHECK(with({"--override-tensor", ".*.*.*.*.*x=CPU"}).code == 2);
  // Ambiguous alternation or optional atoms under a repeat: (.|.)*X ran past 20 s (found by
  // probing); refused the same way. Alternation outside a repeat stays allowed.
  for (const char* slow : {"(.|.)*X=CPU", "(.|.|.|.)*X=CPU", "(a|ab)+c=CPU", "(.?.?)*X=CPU", "((.|.))*X=CPU"}) {
    const CliResult r = with({"--override-tensor", slow});
    INFO(slow);
    CHECK(r.code == 2);
    CHECK(r.err.find("a group that repeats holds a repeat or an alternation") != std::string::npos);
  }
  CHECK(with({"--override-tensor", "blk\\.(1[0-9]|2[0-9])\\.ffn_(up|down|gate)_exps=CPU"}).code == 0);
  CHECK(with({"--override-tensor", "blk\\.[0-9]+\\.ffn_(up|down)?_exps=CPU"}).code == 0);
  CHECK(with({"--override-tensor", std::string(120000, 'a') + "=CPU"}).code == 2);  // overflowed std::regex's stack
  CHECK(with({"--override-tensor", std::string(1024, 'a') + "=CPU"}).code == 0);
  CHECK(with({"--override-tensor", "blk\\.(1[0-5])\\.ffn_.*_exps=CPU,output=CPU"}).code == 0);
  const CliResult noeq = with({"--override-tensor", "exps"});
  CHECK(noeq.code == 2);
  const CliResult gpu = with({"--override-tensor", "output=CUDA1"});
  CHECK(gpu.code == 2);
  CHECK(gpu.err.find("there are 1 GPUs") != std::string::npos);
  CHECK(run_cli({"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--override-tensor", "exps=CPU"}).code == 2);
}

TEST_CASE("serving: --engine vllm --no-flashinfer: the release's FlashInfer sampler falls back to the sort", "[cli][serving]") {
  // Qwen3-8B (vocab 151936) on vLLM 0.11.0, whose default sampler is FlashInfer's (14 bytes a
  // logit over max_num_seqs 256 requests); without FlashInfer the sort's 38 bytes a logit.
  const std::vector<std::string> base{"estimate", "--engine",      "vllm", "--model", "qwen3-8b", "--gpu", "rtx-4090",
                                      "--max-model-len", "1024", "--max-num-batched-tokens", "2048",
                                      "--vllm-version", "0.11.0", "--json"};
  std::vector<std::string> off = base;
  off.emplace_back("--no-flashinfer");
  const CliResult with = run_cli(base);
  const CliResult without = run_cli(off);
  REQUIRE(with.code == 0);
  REQUIRE(without.code == 0);
  const auto peak = [](const CliResult& r) { return parse(r)["engine"]["activation_peak_bytes"].get<std::uint64_t>(); };
  CHECK(peak(without) - peak(with) == 256ULL * 151936 * (38 - 14));
  const CliResult llama = run_cli({"estimate", "--engine", "llama.cpp", "--model", "qwen3-8b", "--no-flashinfer"});
  CHECK(llama.code == 2);
}

TEST_CASE("serving: vLLM's max_num_batched_tokens defaults as vllm serve picks it, by card and release", "[cli][serving]") {
  auto batched = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--engine", "vllm", "--model", "llama-3.1-8b", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    REQUIRE(r.err.empty());
    return parse(r)["engine"]["max_num_batched_tokens"].get<std::uint64_t>();
  };
  // V1 (arg_utils.py get_batch_defaults): 70 GiB or more and not an A100: 8192, else 2048.
  CHECK(batched({"--gpu", "h100-80gb"}) == 8192);
  CHECK(batched({"--gpu", "a100-80gb"}) == 2048);
  CHECK(batched({"--gpu", "rtx-4090"}) == 2048);
  CHECK(batched({"--budget", "96GiB"}) == 8192);
  // Given, it stands.
  CHECK(batched({"--gpu", "rtx-4090", "--max-num-batched-tokens", "4096"}) == 4096);
  // V0: max(max_model_len, 2048); chunked prefill past 32K: 512 in 0.6, 2048 in 0.7.
  CHECK(batched({"--gpu", "rtx-4090", "--vllm-version", "0.6.4", "--max-model-len", "20000"}) == 20000);
  CHECK(batched({"--gpu", "rtx-4090", "--vllm-version", "0.6.4", "--max-model-len", "1024"}) == 2048);
  CHECK(batched({"--gpu", "rtx-4090", "--vllm-version", "0.6.4", "--max-model-len", "35000"}) == 512);
  CHECK(batched({"--gpu", "h100-80gb", "--vllm-version", "0.7.3"}) == 2048);
}

TEST_CASE("serving: --engine vllm: a --max-model-len past the model's derived maximum exits 2 with vLLM's reason", "[cli][serving]") {
  // Qwen3-8B: max_position_embeddings 40960, no rope scaling. vLLM's ModelConfig refuses 65536
  // before it loads anything (vllm/config/model.py _get_and_verify_max_len).
  const CliResult r = run_cli({"estimate", "--engine", "vllm", "--model", "qwen3-8b", "--gpu", "h100-80gb",
                               "--max-model-len", "65536"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("vramfit: error: --max-model-len: 65536 is more than the model's derived maximum, 40960: vLLM "
                    "refuses it before it measures any memory (\"User-specified max_model_len (65536) is greater than "
                    "the derived max_model_len (max_position_embeddings=40960 or model_max_length=None in model's "
                    "config.json).",
                    0) == 0);
  CHECK(r.err.find("--max-model-len 40960 (or less)") != std::string::npos);
  // advise and fit refuse it too; fit --solve max-model-len stops at the maximum where the card
  // holds more (an H100 holds about 390K tokens of Qwen3-8B's cache).
  CHECK(run_cli({"advise", "--engine", "vllm", "--model", "qwen3-8b", "--max-model-len", "65536"}).code == 2);
  const CliResult fit = run_cli({"fit", "--engine", "vllm", "--model", "qwen3-8b", "--gpu", "h100-80gb", "--solve",
                                 "max-model-len", "--json"});
  REQUIRE(fit.code == 0);
  CHECK(parse(fit)["value"] == 40960);
  // VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, read as vLLM reads it: estimated, with vLLM's warning.
  ::setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", " True ", 1);
  const CliResult allowed = run_cli({"estimate", "--engine", "vllm", "--model", "qwen3-8b", "--gpu", "h100-80gb",
                                     "--max-model-len", "65536", "--json"});
  ::unsetenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN");
  REQUIRE(allowed.code == 0);
  CHECK(parse(allowed)["engine"]["max_model_len"] == 65536);
  CHECK(allowed.out.find("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: --max-model-len 65536 is past the model's derived maximum, 40960") !=
        std::string::npos);
}

TEST_CASE("serving: --engine llama.cpp: the host's layers run on the GPU by op offload, or on the CPU with --no-op-offload",
          "[cli][serving]") {
  const std::vector<std::string> base = {"estimate", "--engine",   "llama.cpp", "--model", "llama-3.1-8b", "--gpu-layers",
                                         "20",       "--ctx-size", "8192",      "--flash-attn", "off",    "--json"};
  // llama.cpp's default: the main GPU runs the 13 host blocks' ops too, each weight copied in at its
  // op's split and each layer's K and V views of the host cache (16 MiB each) at its attention's: in
  // Q8_0 on the device, 593.00 MiB logged (tests/accuracy/serving/llamacpp_logs.jsonl); this file's
  // Q4_K_M weights copy in smaller pieces, which leave other holes: 585.00 MiB.
  const json on = report_with(base, {});
  CHECK(on["engine"]["devices"][0]["compute_buffer_bytes"] == 613419008);
  CHECK(on["engine"]["host"]["compute_buffer_bytes"] == 37758976);  // the graph inputs: 36.01 MiB
  // --no-op-offload: the GPU's own layers alone (564.01 MiB logged, to the byte: no weight is
  // copied), and the host computes its blocks in its own buffer, simulated as the CPU's graph
  // (572.01 logged; 596.01 before, the largest set of tensors alive).
  const json off = report_with(base, {"--no-op-offload"});
  CHECK(off["engine"]["devices"][0]["compute_buffer_bytes"] == 591405056);
  CHECK(off["engine"]["host"]["compute_buffer_bytes"] == 599793664);
  // Experts in host memory with no op offload: the CPU's expert matmuls are not laid out, so
  // vramfit refuses rather than guesses.
  const CliResult moe = run_cli({"estimate", "--engine", "llama.cpp", "--model", "qwen3-30b-a3b", "--n-cpu-moe", "10",
                                 "--no-op-offload"});
  CHECK(moe.code == 2);
  CHECK(moe.err.find("--no-op-offload") != std::string::npos);
  // The same with a row split, whose GPU buffers are estimated rather than simulated: refused as
  // well (it gave an estimate without the CPU's expert matmuls, exit 0).
  const CliResult row = run_cli({"estimate", "--engine", "llama.cpp", "--model", "qwen3-30b-a3b", "--n-cpu-moe", "10",
                                 "--no-op-offload", "--split-mode", "row", "--gpu", "rtx-3090,rtx-3090"});
  CHECK(row.code == 2);
  CHECK(row.err.find("--no-op-offload") != std::string::npos);
  require_usage_error(run_cli({"estimate", "--engine", "vllm", "--model", "qwen3-8b", "--no-op-offload"}),
                      "vramfit: error: --no-op-offload: does not apply to --engine vllm (it is a llama.cpp flag: use "
                      "--engine llama.cpp, or drop it)\n");
}

TEST_CASE("serving: --engine llama.cpp: --swa-full keeps the sliding-window layers' cache at the whole context",
          "[cli][serving]") {
  const std::vector<std::string> base = {"estimate", "--engine", "llama.cpp", "--model",      "gemma-3-12b",
                                         "--ctx-size", "32768",  "--flash-attn", "on", "--json"};
  // Gemma 3 12B: 8 global layers of 32768 cells and 40 sliding ones of the window (1024) and a
  // ubatch, padded to 256: 1536 cells; 8 KV heads of 256, K and V in f16: 2048 + 480 MiB, as the
  // device run logs them ("llama_kv_cache: size = 2048.00 MiB", "480.00 MiB").
  CHECK(report_with(base, {})["engine"]["devices"][0]["kv_buffer_bytes"] == 2650800128);
  // --swa-full: the 40 sliding layers at 32768 cells too, 10240 MiB ("size = 10240.00 MiB").
  CHECK(report_with(base, {"--swa-full"})["engine"]["devices"][0]["kv_buffer_bytes"] == 12884901888);
  require_usage_error(run_cli({"estimate", "--engine", "vllm", "--model", "gemma-3-12b", "--swa-full"}),
                      "vramfit: error: --swa-full: does not apply to --engine vllm (it is a llama.cpp flag: use "
                      "--engine llama.cpp, or drop it)\n");
}
