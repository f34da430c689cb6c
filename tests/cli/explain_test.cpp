// `vramfit explain`, run in-process: files, standard input, exit codes, the estimate beside the message.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"
#include "vramfit/cli/explain.hpp"

using vramfit::test::CliResult;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::source_file;
using vramfit::test::TempDir;

namespace {

std::string fixture(const std::string& name) {
  return std::string(VRAMFIT_SOURCE_DIR) + "/tests/fixtures/oom/" + name;
}

// A current-format message from a 16 GB card, failing in backward (tests/fixtures/oom/SOURCES.md).
const std::string kBackward = "current_backward_pass.txt";

}  // namespace

TEST_CASE("explain: unreadable input exits 2 with exact messages", "[cli][explain]") {
  TempDir dir;
  require_usage_error(
      run_cli({"explain", dir.str() + "/missing.log"}),
      "vramfit: error: log: '" + dir.str() + "/missing.log' does not exist (check the path)\n");
  require_usage_error(run_cli({"explain", dir.str()}),
                      "vramfit: error: log: '" + dir.str() + "' is a folder, not a file (give a file)\n");
  // Workload flags need a model to estimate.
  require_usage_error(
      run_cli({"explain", fixture(kBackward), "--batch", "8"}),
      "vramfit: error: model: no model given (give exactly one of --params, --model, --config, "
      "e.g. --model llama-3.1-8b; 'vramfit models' lists the presets)\n");
  // The file's problem and the flags' come together.
  require_usage_error(
      run_cli({"explain", dir.str() + "/missing.log", "--model", "llama-3.1-8b", "--batch", "0"}),
      "vramfit: error: log: '" + dir.str() +
          "/missing.log' does not exist (check the path)\n"
          "vramfit: error: --batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n");
  // explain has no budget.
  const auto r = run_cli({"explain", fixture(kBackward), "--gpu", "t4"});
  CHECK(r.code == 2);
  CHECK(
      r.err ==
      "vramfit: error: The following arguments were not expected: t4 --gpu (run 'vramfit explain --help')\n");
}

TEST_CASE("explain: every collected OOM log is found and explained", "[cli][explain]") {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixture(""))) {
    if (entry.path().extension() != ".txt") continue;
    ++n;
    INFO(entry.path().filename().string());
    const auto text = run_cli({"explain", entry.path().string()});
    CHECK(text.code == 0);
    CHECK(text.err.empty());
    CHECK(text.out.rfind("OOM: ", 0) == 0);
    const auto json = run_cli({"explain", entry.path().string(), "--json"});
    CHECK(json.code == 0);
    const auto j = nlohmann::json::parse(json.out);
    CHECK(j["schema_version"] == 1);
    CHECK(j["found"] == true);
    CHECK(j["estimate"].is_null());
    CHECK_FALSE(j["primary"].is_null());
  }
  CHECK(n == 21);
}

TEST_CASE("explain: text without an OOM message exits 1", "[cli][explain]") {
  TempDir dir;
  const auto log = dir.write("train.log", "epoch 1: loss 2.31\nepoch 2: loss 1.98\n");
  const auto r = run_cli({"explain", log});
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  CHECK(r.out == "No out-of-memory message found.\n");
  const auto j = nlohmann::json::parse(run_cli({"explain", log, "--json"}).out);
  CHECK(j["found"] == false);
  CHECK(j["messages_found"] == 0);
  // An empty file is readable: nothing found.
  CHECK(run_cli({"explain", dir.write("empty.log", "")}).code == 1);
}

TEST_CASE("explain: reads standard input with '-' or no FILE", "[cli][explain]") {
  const std::string log = source_file("tests/fixtures/oom/" + kBackward);
  const auto from_file = run_cli({"explain", fixture(kBackward)});
  const auto dash = run_cli({"explain", "-"}, log);
  const auto bare = run_cli({"explain"}, log);
  CHECK(dash.code == 0);
  CHECK(bare.code == 0);
  CHECK(dash.out == from_file.out);
  CHECK(bare.out == from_file.out);
  CHECK(run_cli({"explain", "--json"}, log).out == run_cli({"explain", fixture(kBackward), "--json"}).out);
  CHECK(run_cli({"explain", "-"}, "nothing to see\n").code == 1);
}

TEST_CASE("explain: with a model, the estimate sits beside the card's total", "[cli][explain]") {
  const std::vector<std::string> args{"explain", fixture(kBackward), "--model", "qwen2.5-0.5b", "--mode",
                                      "train",   "--batch",          "8",       "--seq",        "1024",
                                      "--attention", "eager"};
  const auto r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\nReconcile with the estimate (qwen2.5-0.5b, train: batch 8 x 1024 tokens)\n") !=
        std::string::npos);
  CHECK(r.out.find("  message: card total          15.70 GiB\n") != std::string::npos);
  CHECK(r.out.find("above the card's total") != std::string::npos);

  auto json_args = args;
  json_args.push_back("--json");
  const auto j = nlohmann::json::parse(run_cli(json_args).out);
  const auto& e = j["estimate"];
  CHECK(e["model"] == "qwen2.5-0.5b");
  CHECK(e["workload"]["batch"] == 8);
  CHECK(e["card_total_bytes"] == j["accounting"]["total_bytes"]);
  CHECK(e["fits_card"] == false);
  // The advisor ran against the card's total: its first fix is the smaller micro-batch.
  REQUIRE(e["advice"].is_object());
  CHECK(e["advice"]["budget"]["bytes"] == e["card_total_bytes"]);
  CHECK(e["advice"]["steps"][0]["id"] == "reduce_batch");
  CHECK(e["over_card_bytes"].get<std::int64_t>() ==
        e["device_total_bytes"].get<std::int64_t>() - e["card_total_bytes"].get<std::int64_t>());
  // Candidate sizes: batch 8 x seq 1024 x vocab 151936, and (eager) batch x 14 heads x seq^2, bf16.
  CHECK(e["candidates"] == nlohmann::json::parse(R"([
    {"name": "logits_fp32", "bytes": 4978638848},
    {"name": "logits", "bytes": 2489319424},
    {"name": "attention_scores", "bytes": 234881024}])"));
  // The 226 MiB request is within 2% of the 224 MiB score matrix (after the allocator's rounding).
  CHECK(j["candidate_match"]["name"] == "attention_scores");

  // A small job: by the estimate it fits, so the message points elsewhere.
  const auto small = run_cli({"explain", fixture(kBackward), "--model", "qwen2.5-0.5b"});
  CHECK(small.code == 0);
  CHECK(small.out.find("below the card's total: by the estimate the job fits") != std::string::npos);
}

TEST_CASE("explain --help has an example and the exit codes", "[cli][explain]") {
  const auto r = run_cli({"explain", "--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("Examples:\n  vramfit explain train.log\n") != std::string::npos);
  CHECK(r.out.find("Exit codes: 0 an OOM message was found") != std::string::npos);
  CHECK(r.out.find("--model") != std::string::npos);
}

TEST_CASE("candidate sizes follow the compute dtype and skip overflowing products", "[cli][explain]") {
  vramfit::spec::ModelSpec m;
  m.vocab_size = 1000;
  m.num_heads = 4;
  vramfit::spec::Workload w;
  w.batch = 2;
  w.seq = 10;
  auto c = vramfit::cli::candidate_sizes(m, w);
  REQUIRE(c.size() == 2);  // SDPA never materialises the score matrix
  w.attention = vramfit::spec::Attention::eager;
  c = vramfit::cli::candidate_sizes(m, w);
  REQUIRE(c.size() == 3);
  CHECK(c[0].name == "logits_fp32");
  CHECK(c[0].size.value() == 2 * 10 * 1000 * 4);
  CHECK(c[1].size.value() == 2 * 10 * 1000 * 2);
  CHECK(c[2].size.value() == 2 * 4 * 10 * 10 * 2);
  w.weights = vramfit::DType::fp32;  // fp32 without autocast computes in fp32
  c = vramfit::cli::candidate_sizes(m, w);
  CHECK(c[1].size.value() == 2 * 10 * 1000 * 4);
  w.autocast = vramfit::DType::bf16;
  c = vramfit::cli::candidate_sizes(m, w);
  CHECK(c[1].size.value() == 2 * 10 * 1000 * 2);
  w.seq = 1ULL << 40;  // seq^2 overflows: attention scores left out
  c = vramfit::cli::candidate_sizes(m, w);
  REQUIRE(c.size() == 2);
  CHECK(c[1].name == "logits");
}
