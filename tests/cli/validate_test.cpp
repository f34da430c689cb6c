// `vramfit validate`, run in-process on a small truth file (tests/cli/data/truth: two measured
// SmolLM2-135M cases copied from shared/truth, with results/ beside models/ as there).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::source_file;
using vramfit::test::TempDir;

namespace {

const std::string kTruth = std::string(VRAMFIT_SOURCE_DIR) + "/tests/cli/data/truth/results/small.jsonl";

std::string line_of(const std::string& text, std::size_t n) {  // 0-based, without '\n'
  std::size_t pos = 0;
  for (std::size_t i = 0; i < n; ++i) pos = text.find('\n', pos) + 1;
  return text.substr(pos, text.find('\n', pos) - pos);
}

}  // namespace

TEST_CASE("validate: the report of a small truth file", "[cli][validate]") {
  const auto r = run_cli({"validate", kTruth});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.rfind("peak allocated: |estimate / measured - 1|\n", 0) == 0);
  CHECK(r.out.find("\n  forward              1 ") != std::string::npos);
  CHECK(r.out.find("\n  train                1 ") != std::string::npos);
  CHECK(r.out.find("\n  all                  2 ") != std::string::npos);
  CHECK(r.out.find("\nOOM cases predicted over the card: 0 of 0\n") != std::string::npos);
  CHECK(r.out.find("\nparameter counts exact: 2 of 2\n") != std::string::npos);
  CHECK(r.out.find("smollm2-135m/train/bf16/adamw/b8s2048/ckpt") != std::string::npos);

  const auto j = nlohmann::ordered_json::parse(run_cli({"validate", kTruth, "--json"}).out);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"schema_version", "file", "cases", "device_bytes", "by_mode", "all",
                                         "by_model", "device", "oom", "params", "worst"});
  CHECK(j["cases"] == 2);
  CHECK(j["device_bytes"] == 150109880320ULL);
  CHECK(j["by_mode"].size() == 2);
  CHECK(j["by_mode"][0]["mode"] == "forward");
  CHECK(j["all"]["cases"] == 2);
  // The engine is within 1% of these two measured peaks.
  CHECK(j["all"]["max_abs"].get<double>() < 0.01);
  CHECK(j["device"]["cases"] == 2);
  CHECK(j["oom"] == nlohmann::ordered_json::parse(R"({"cases": 0, "predicted": 0})"));
  CHECK(j["params"] == nlohmann::ordered_json::parse(R"({"checked": 2, "exact": 2})"));
  REQUIRE(j["worst"].size() == 2);
  for (const auto& w : j["worst"]) {
    const auto est = w["estimate_peak_bytes"].get<double>();
    const auto measured = w["measured_peak_bytes"].get<double>();
    CHECK(w["error"].get<double>() == Approx(est / measured - 1));
  }
}

TEST_CASE("validate: a config beside the truth file, and a file without an environment line",
          "[cli][validate]") {
  TempDir dir;
  const std::string text = source_file("tests/cli/data/truth/results/small.jsonl");
  dir.write("models/smollm2-135m.json", source_file("tests/cli/data/truth/models/smollm2-135m.json"));
  const auto beside = dir.write("beside.jsonl", text);
  CHECK(run_cli({"validate", beside}).code == 0);
  // No environment line: the card is unknown, OOM cases are not counted as predicted.
  const auto no_env = dir.write("no-env.jsonl", line_of(text, 1) + "\n" + line_of(text, 2) + "\n");
  const auto r = run_cli({"validate", no_env});
  CHECK(r.code == 0);
  CHECK(r.out.find(
            "(the file has no environment line with the card's total_bytes: OOM cases were not checked)\n") !=
        std::string::npos);
  const auto j = nlohmann::json::parse(run_cli({"validate", no_env, "--json"}).out);
  CHECK(j["device_bytes"].is_null());
  CHECK(j["oom"]["predicted"].is_null());
}

TEST_CASE("validate: unreadable, malformed or incomplete input exits 2 with exact messages",
          "[cli][validate]") {
  TempDir dir;
  require_usage_error(
      run_cli({"validate", dir.str() + "/missing.jsonl"}),
      "vramfit: error: truth file: '" + dir.str() + "/missing.jsonl' does not exist (check the path)\n");
  require_usage_error(run_cli({"validate", dir.str()}), "vramfit: error: truth file: '" + dir.str() +
                                                            "' is a folder, not a file (give a file)\n");
  const std::string text = source_file("tests/cli/data/truth/results/small.jsonl");
  const auto malformed = dir.write("malformed.jsonl", line_of(text, 0) + "\n{\"id\": \"x\", \"model\n");
  require_usage_error(run_cli({"validate", malformed}),
                      "vramfit: error: " + malformed +
                          ":2: not valid JSON: parse error at line 1, column 19: syntax error while parsing object "
                          "key - invalid string: missing closing quote; last read: '\"model'; expected string literal "
                          "(each line must be one JSON object, as measure.py writes)\n");
  const auto empty = dir.write("empty.jsonl", line_of(text, 0) + "\n");
  require_usage_error(run_cli({"validate", empty}),
                      "vramfit: error: truth file: '" + empty +
                          "' holds no cases (give a JSONL file written by measure.py: one case per line)\n");
  // The configs are in neither the file's folder nor its parent.
  const auto lonely = dir.write("deep/er/lonely.jsonl", text);
  require_usage_error(run_cli({"validate", lonely}),
                      "vramfit: error: " + lonely +
                          ": case 'smollm2-135m/forward/bf16/b8s2048': config: 'models/smollm2-135m.json' is "
                          "neither in '" +
                          dir.str() +
                          "/deep/er' nor in its parent folder (keep the model configs where the truth file "
                          "names them; shared/truth keeps results/ beside models/)\n");
  require_usage_error(run_cli({"validate"}),
                      "vramfit: error: PATH is required (run 'vramfit validate --help')\n");
  const auto help = run_cli({"validate", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("Examples:\n  vramfit validate ") != std::string::npos);
}

TEST_CASE("validate --one-process: the device total as measure.py's one process ran the file", "[cli][validate]") {
  // small.jsonl's two cases: the forward's context (1256.8 MiB) is above the training's (837 MiB),
  // so the training starts a new process; neither follows a backward, so the reserves agree. The
  // forward was cut from late in public's first process: this file lacks the cases that grew its
  // context, so the one-process column models a fresh one (696.8 MiB: init, a forward's and cuDNN's
  // kernels, one attention graph) and is further under than the own-process allowance (938.8).
  const auto r = run_cli({"validate", kTruth, "--one-process"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ndevice total, each case after the file's earlier cases in measure.py's process (2 processes; "
                   "the\n") != std::string::npos);
  CHECK(r.out.find("\n  all                  2     11.12%     21.75%     21.75%      50.0%\n  without context      2 "
                   "     4.95%      9.87%      9.87%      50.0%\n") != std::string::npos);
  CHECK(r.out.find("\ndevice total under by more than 5 %: own process, one process, the measured context, the "
                   "one-process model's\n"
                   "    -15.16%   -21.75%   1256.8 MiB    696.8 MiB  smollm2-135m/forward/bf16/b8s2048\n") != std::string::npos);
  CHECK(run_cli({"validate", kTruth}).out.find("one process") == std::string::npos);  // only with the flag

  const auto j = nlohmann::ordered_json::parse(run_cli({"validate", kTruth, "--one-process", "--json"}).out);
  REQUIRE(j.contains("one_process"));
  CHECK(j["one_process"]["processes"] == 2);
  CHECK(j["one_process"]["unknown_cases"] == 0);
  CHECK(j["one_process"]["device"]["cases"] == 2);
  REQUIRE(j["one_process"]["under"].size() == 1);
  CHECK(j["one_process"]["under"][0]["id"] == "smollm2-135m/forward/bf16/b8s2048");
  CHECK(j["one_process"]["under"][0]["one_process"].get<double>() == Approx(-0.21754530507359326));
}
