// Golden tests: whole outputs of real commands against tests/golden/data/. After an intended
// change, regenerate with VRAMFIT_UPDATE_GOLDEN=1 ./build/tests/vramfit_tests "[golden]" and
// review the diff.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../cli/cli_helper.hpp"

using vramfit::test::run_cli;

namespace {

struct Golden {
  std::string file;               ///< under tests/golden/data/
  std::vector<std::string> args;  ///< the command, on the embedded catalog
  int exit_code;
};

std::string fixture(const std::string& name) {
  return std::string(VRAMFIT_SOURCE_DIR) + "/tests/fixtures/oom/" + name;
}

// One row per command; the file holds exactly what stdout shows.
const std::vector<Golden> kGolden{
    {"estimate_inference.txt", {"estimate", "--model", "llama-3.1-8b"}, 0},
    {"estimate_inference.json", {"estimate", "--model", "llama-3.1-8b", "--json"}, 0},
    // Full fine-tuning of an 8B model does not fit a 16 GB card: exit 1, and the JSON is still printed.
    {"estimate_train_t4.txt", {"estimate", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "t4"}, 1},
    {"estimate_train_t4.json",
     {"estimate", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "t4", "--json"},
     1},
    {"estimate_lora.txt",
     {"estimate", "--model", "qwen2.5-7b", "--mode", "lora", "--lora-rank", "16", "--batch", "4", "--seq",
      "1024", "--checkpointing", "--gpu", "a100-80gb"},
     0},
    {"estimate_generate.json",
     {"estimate", "--model", "qwen2.5-0.5b", "--mode", "generate", "--batch", "8", "--seq", "512",
      "--new-tokens", "512", "--json"},
     0},
    {"estimate_params.txt", {"estimate", "--params", "7B", "--mode", "qlora", "--budget", "80GB"}, 0},
    {"models.json", {"models", "--json"}, 0},
    // The advisor: a 7B-class full fine-tune on a 24 GB card (exit 1, the steps in order).
    {"advise_train_rtx4090.txt",
     {"advise", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "rtx-4090"},
     1},
    {"advise_train_rtx4090.json",
     {"advise", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "rtx-4090", "--json"},
     1},
    // 70B inference on one 80 GB card (exit 1: the weights alone exceed it).
    {"advise_70b_h100.txt",
     {"advise", "--model", "llama-3.3-70b", "--mode", "inference", "--gpu", "h100-80gb"},
     1},
    {"advise_70b_h100.json",
     {"advise", "--model", "llama-3.3-70b", "--mode", "inference", "--gpu", "h100-80gb", "--json"},
     1},
    // A job that fits: exit 0, no steps.
    {"advise_fits.txt",
     {"advise", "--model", "qwen2.5-7b", "--mode", "lora", "--batch", "4", "--seq", "1024", "--checkpointing",
      "--gpu", "a100-80gb"},
     0},
    {"advise_fits.json",
     {"advise", "--model", "qwen2.5-7b", "--mode", "lora", "--batch", "4", "--seq", "1024", "--checkpointing",
      "--gpu", "a100-80gb", "--json"},
     0},
    // An exceeded budget with a margin: the estimate ends with the short advice.
    {"estimate_headroom.txt",
     {"estimate", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "h100-80gb", "--headroom", "10%"},
     1},
    {"fit_batch.txt",
     {"fit", "--model", "llama-3.1-8b", "--mode", "lora", "--seq", "2048", "--gpu", "a100-80gb", "--solve",
      "batch"},
     0},
    {"fit_batch.json",
     {"fit", "--model", "llama-3.1-8b", "--mode", "lora", "--seq", "2048", "--gpu", "a100-80gb", "--solve",
      "batch", "--json"},
     0},
    // The OOM doctor on a collected log (tests/fixtures/oom/SOURCES.md), alone and beside an estimate.
    {"explain_backward.txt", {"explain", fixture("current_backward_pass.txt")}, 0},
    {"explain_backward.json", {"explain", fixture("current_backward_pass.txt"), "--json"}, 0},
    {"explain_backward_estimate.txt",
     {"explain", fixture("current_backward_pass.txt"), "--model", "qwen2.5-0.5b", "--mode", "train",
      "--batch", "8", "--seq", "1024"},
     0},
    {"gpus.txt", {"gpus"}, 0},
};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("golden outputs", "[golden]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests" / "golden" / "data";
  const char* update_env = std::getenv("VRAMFIT_UPDATE_GOLDEN");
  const bool update = update_env != nullptr && std::string(update_env) == "1";
  for (const auto& g : kGolden) {
    const auto r = run_cli(g.args);
    std::string cmd = "vramfit";
    for (const auto& a : g.args) cmd += " " + a;
    INFO(cmd << "\nstderr: " << r.err);
    CHECK(r.code == g.exit_code);
    CHECK(r.err.empty());
    const auto path = dir / g.file;
    if (update) {
      std::filesystem::create_directories(dir);
      std::ofstream(path, std::ios::binary) << r.out;
      continue;
    }
    INFO("golden file " << path.string() << " (regenerate with VRAMFIT_UPDATE_GOLDEN=1)");
    REQUIRE(std::filesystem::exists(path));
    CHECK(r.out == read(path));
  }
}
