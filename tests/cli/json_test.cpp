// Every --json output is valid JSON and its parts add up (bloaty's rule), whatever the exit code.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::estimate;
using vramfit::test::fixture_dir;
using vramfit::test::run_cli;

namespace {

void check_estimate_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);  // throws, failing the test, on invalid JSON
  REQUIRE(j["schema_version"] == 3);
  std::uint64_t in_peak = 0;
  std::uint64_t all = 0;
  bool reserve = false;
  bool context = false;
  for (const auto& c : j["components"]) {
    REQUIRE(c["bytes"].is_number_unsigned());
    all += c["bytes"].get<std::uint64_t>();
    if (c["in_peak_allocated"].get<bool>()) in_peak += c["bytes"].get<std::uint64_t>();
    if (c["id"] == "allocator_reserve") reserve = !c["in_peak_allocated"].get<bool>();
    if (c["id"] == "cuda_context") context = !c["in_peak_allocated"].get<bool>();
  }
  CHECK(reserve);
  CHECK(context);
  CHECK(in_peak == j["peak_allocated_bytes"].get<std::uint64_t>());
  CHECK(all == j["device_total_bytes"].get<std::uint64_t>());
  std::uint64_t max_phase = 0;
  bool peak_phase_listed = false;
  for (const auto& p : j["phases"]) {
    max_phase = std::max(max_phase, p["bytes"].get<std::uint64_t>());
    if (p["id"] == j["peak_phase"]) peak_phase_listed = true;
  }
  CHECK(max_phase == j["peak_allocated_bytes"].get<std::uint64_t>());
  CHECK(peak_phase_listed);
  if (!j["budget"].is_null()) {
    const auto budget = j["budget"]["bytes"].get<std::int64_t>();
    const auto total = j["device_total_bytes"].get<std::int64_t>();
    CHECK(j["budget"]["spare_bytes"].get<std::int64_t>() == budget - total);
    CHECK(j["budget"]["headroom_bytes"] == 0);
    CHECK(j["budget"]["fits"].get<bool>() == (total <= budget));
  }
  CHECK(j["notes"].is_array());
}

}  // namespace

TEST_CASE("every estimate --json parses and adds up", "[cli][json]") {
  const std::vector<std::vector<std::string>> cases{
      {"--model", "smollm2-135m"},
      {"--model", "smollm2-135m", "--mode", "generate", "--batch", "4", "--seq", "512", "--new-tokens",
       "128"},
      {"--model", "smollm2-135m", "--mode", "train", "--optimizer", "sgd", "--checkpointing", "--gpu",
       "t4-16gb"},
      {"--model", "smollm2-135m", "--mode", "train", "--dtype", "fp32", "--autocast", "bf16", "--grad-accum",
       "4"},
      {"--model", "smollm2-135m", "--mode", "lora", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj"},
      {"--model", "smollm2-135m", "--mode", "qlora", "--budget", "1GB"},
      {"--model", "smollm2-135m", "--gpu", "tiny-1gb"},
      {"--model", "smollm2-135m", "--attention", "eager", "--batch", "64"},
      {"--params", "7B", "--mode", "train", "--gpus", "4", "--sharding", "zero3"},
      {"--params", "350M", "--dtype", "int8"},
  };
  for (auto args : cases) {
    args.push_back("--json");
    const auto r = estimate(args);
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    INFO(cmd << "\nstderr: " << r.err);
    REQUIRE((r.code == 0 || r.code == 1));
    check_estimate_json(r.out);
  }
}

TEST_CASE("models --json and gpus --json parse", "[cli][json]") {
  for (const char* cmd : {"models", "gpus"}) {
    const auto r = run_cli({cmd, "--json", "--data-dir", fixture_dir()});
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["schema_version"] == 3);
  }
  // The embedded catalog: the seed's provider is the advisor's default; compute capabilities as "M.m".
  const auto r = run_cli({"gpus", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["default_provider"] == "gpu-cloud");
  for (const auto& g : j["gpus"]) {
    if (g["id"] == "h100-80gb") CHECK(g["compute_capability"] == "9.0");
    if (g["id"] == "rtx-2080-ti") CHECK(g["compute_capability"] == "7.5");
  }
  const auto f = nlohmann::json::parse(run_cli({"gpus", "--json", "--data-dir", fixture_dir()}).out);
  CHECK(f["default_provider"].is_null());
}
