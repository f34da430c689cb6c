// Benchmarks, run by hand: ./build/tests/vramfit_bench (not part of ctest).
#include <catch2/catch.hpp>

#include <sstream>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/cli/run.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"

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
