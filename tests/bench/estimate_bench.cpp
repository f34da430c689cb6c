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
  vramfit::test::LlamaGguf g;
  g.hidden = 8192, g.layers = 80, g.ff = 28672, g.heads = 64, g.kv_heads = 8, g.vocab = 128256, g.rope_dims = 128;
  g.ctx = 131072, g.file_type = 15, g.name = "", g.tokenizer = "gpt2";
  g.type = 12, g.attn_v = g.ffn_down = g.output = 14;  // Q4_K, Q6_K
  const vramfit::test::GgufWriter w = vramfit::test::llama_gguf(g);
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
