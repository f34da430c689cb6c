// Benchmarks, run by hand: ./build/tests/vramfit_bench (not part of ctest).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/run.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"
#include "../unit/spec/gguf_writer.hpp"

TEST_CASE("estimate speed", "[bench]") {
  const auto& preset = vramfit::catalog::Catalog::embedded().preset("llama-3.1-8b");
  const auto model = vramfit::spec::from_config(preset.config, "llama-3.1-8b");
  vramfit::spec::Workload w;
  w.mode = vramfit::spec::Mode::train;

  BENCHMARK("engine::estimate, llama-3.1-8b train") { return vramfit::engine::estimate(model, w); };

  BENCHMARK("cli::run estimate --model llama-3.1-8b --mode train --gpu h100-80gb --json") {
    const char* argv[] = {"vramfit", "estimate", "--model",   "llama-3.1-8b", "--mode",
                          "train",   "--gpu",    "h100-80gb", "--json"};
    std::ostringstream out, err;
    std::istringstream in;
    return vramfit::cli::run(9, argv, out, err, in);
  };
}

namespace {

/// Llama-3.3-70B's shapes in Q4_K (Q6_K output), with a 128256-token vocabulary in the header,
/// as a sparse file: the header, then the data section's size in zeros the disk does not hold.
std::string write_llama70b_gguf(const std::filesystem::path& path) {
  vramfit::test::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("general.file_type", 15);
  w.kv_u32("llama.context_length", 131072);
  w.kv_u32("llama.embedding_length", 8192);
  w.kv_u32("llama.block_count", 80);
  w.kv_u32("llama.feed_forward_length", 28672);
  w.kv_u32("llama.attention.head_count", 64);
  w.kv_u32("llama.attention.head_count_kv", 8);
  w.kv_u32("llama.rope.dimension_count", 128);
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_str("tokenizer.ggml.model", "gpt2");
  std::vector<std::string> tokens(128256);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = "token" + std::to_string(i);
  w.kv_strings("tokenizer.ggml.tokens", tokens);
  constexpr std::uint32_t F32 = 0, Q4_K = 12, Q6_K = 14;
  w.tensor("token_embd.weight", {8192, 128256}, Q4_K);
  for (int i = 0; i < 80; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.tensor(b + "attn_norm.weight", {8192}, F32);
    w.tensor(b + "attn_q.weight", {8192, 8192}, Q4_K);
    w.tensor(b + "attn_k.weight", {8192, 1024}, Q4_K);
    w.tensor(b + "attn_v.weight", {8192, 1024}, Q6_K);
    w.tensor(b + "attn_output.weight", {8192, 8192}, Q4_K);
    w.tensor(b + "ffn_norm.weight", {8192}, F32);
    w.tensor(b + "ffn_gate.weight", {8192, 28672}, Q4_K);
    w.tensor(b + "ffn_up.weight", {8192, 28672}, Q4_K);
    w.tensor(b + "ffn_down.weight", {28672, 8192}, Q6_K);
  }
  w.tensor("output_norm.weight", {8192}, F32);
  w.tensor("output.weight", {8192, 128256}, Q6_K);
  const std::string header = w.header();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
  }
  std::filesystem::resize_file(path, header.size() + w.data_size());
  return path.string();
}

int run_cli(std::vector<const char*> args) {
  std::ostringstream out, err;
  std::istringstream in;
  return vramfit::cli::run(static_cast<int>(args.size()), args.data(), out, err, in);
}

}  // namespace

TEST_CASE("llama.cpp estimate speed on a 70B GGUF", "[bench]") {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "vramfit-bench-llama70b-q4km.gguf";
  const std::string file = write_llama70b_gguf(path);
  BENCHMARK("cli::run estimate --engine llama.cpp --config 70B-Q4_K_M.gguf --gpu rtx-4090,rtx-4090") {
    return run_cli({"vramfit", "estimate", "--engine", "llama.cpp", "--config", file.c_str(), "--gpu",
                    "rtx-4090,rtx-4090", "--json"});
  };
  BENCHMARK("cli::run fit --solve gpu-layers --engine llama.cpp (the same file and cards)") {
    return run_cli({"vramfit", "fit", "--solve", "gpu-layers", "--engine", "llama.cpp", "--config", file.c_str(),
                    "--gpu", "rtx-4090,rtx-4090", "--json"});
  };
  std::filesystem::remove(path);
}
