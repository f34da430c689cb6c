// `vramfit advise`, `vramfit fit`, and the advice and --headroom of `vramfit estimate`, run in-process.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::estimate;
using vramfit::test::fixture_dir;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;

namespace {

/// `vramfit COMMAND --data-dir <fixture> args...`: the small, stable catalog of the CLI tests.
CliResult on_fixture(const std::string& command, std::vector<std::string> args) {
  args.insert(args.begin(), {command, "--data-dir", fixture_dir()});
  return run_cli(args);
}

std::vector<std::string> ids_of(const nlohmann::json& steps, const std::string& status = "") {
  std::vector<std::string> ids;
  for (const auto& s : steps)
    if (status.empty() || s["status"] == status) ids.push_back(s["id"].get<std::string>());
  return ids;
}

}  // namespace

TEST_CASE("advise: bad input exits 2 with exact messages", "[cli][advise]") {
  require_usage_error(run_cli({"advise", "--model", "llama-3.1-8b", "--mode", "train", "--gpu", "rtx-4090",
                               "--deny", "quantise"}),
                      "vramfit: error: --deny: unknown fix 'quantise' (did you mean 'quantize'?)\n");
  require_usage_error(
      run_cli(
          {"advise", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--deny", "reduce-batch,checkpointing"}),
      "vramfit: error: --deny: unknown fix 'checkpointing' (did you mean 'gradient_checkpointing' or "
      "'selective_checkpointing'?)\n");
  require_usage_error(run_cli({"advise", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--allow",
                               "quantize_4bit", "--deny", "quantize"}),
                      "vramfit: error: --deny: fix 'quantize_4bit' is both allowed and denied "
                      "(name it in --allow or --deny, not both)\n");
  require_usage_error(
      on_fixture("advise", {"--model", "smollm2-135m", "--gpu", "t4-16gb", "--provider", "cloudyy"}),
      "vramfit: error: --provider: unknown provider 'cloudyy' (did you mean 'cloudy'?)\n");
  // A budget is what advise works against.
  require_usage_error(run_cli({"advise", "--model", "llama-3.1-8b", "--mode", "train"}),
                      "vramfit: error: budget: no budget given (give --gpu ID or --budget SIZE, e.g. --gpu "
                      "rtx-4090 or --budget 24GiB; 'vramfit gpus' lists the GPUs)\n");
  // Every problem at once: the flags' own, then the budget.
  require_usage_error(
      run_cli({"advise", "--model", "llama-3.1-8b", "--batch", "0"}),
      "vramfit: error: --batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n"
      "vramfit: error: budget: no budget given (give --gpu ID or --budget SIZE, e.g. --gpu "
      "rtx-4090 or --budget 24GiB; 'vramfit gpus' lists the GPUs)\n");
  require_usage_error(
      run_cli({"advise", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--headroom", "110%"}),
      "vramfit: error: --headroom: 110% is not below 100% of the budget (give a percentage of "
      "the budget like 10% or a size like 2GiB)\n");
  require_usage_error(
      run_cli({"advise", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--headroom", "-5%"}),
      "vramfit: error: --headroom: '-5%' is negative (give a percentage of the budget like 10% "
      "or a size like 2GiB)\n");
  require_usage_error(
      run_cli({"advise", "--model", "llama-3.1-8b", "--budget", "2GiB", "--headroom", "3GiB"}),
      "vramfit: error: --headroom: a margin of 3221225472 bytes leaves nothing of the budget "
      "(2147483648 bytes) (use a smaller margin or a larger budget)\n");
}

TEST_CASE("advise: a 7B full fine-tune on a 24 GB card does not fit, the steps are in order",
          "[cli][advise]") {
  const auto r =
      run_cli({"advise", "--model", "mistral-7b-v0.3", "--mode", "train", "--gpu", "rtx-4090", "--json"});
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  const auto j = nlohmann::ordered_json::parse(r.out);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  REQUIRE(keys.size() > 3);
  CHECK(std::vector<std::string>(keys.begin(), keys.begin() + 3) ==
        std::vector<std::string>{"schema_version", "model", "workload"});
  CHECK(j["schema_version"] == 3);
  CHECK(j["model"]["name"] == "mistral-7b-v0.3");
  CHECK(j["workload"]["mode"] == "train");
  CHECK(j["fits_initially"] == false);
  CHECK(j["budget"]["bytes"] == 25393692672ULL);
  CHECK(j["budget"]["fits"] == false);
  CHECK(j["initial_device_total"].get<std::uint64_t>() > j["budget"]["bytes"].get<std::uint64_t>());
  // The walk tries the fixes in their fixed order and stops at the first fit: QLoRA (with
  // gradient checkpointing, as prepare_model_for_kbit_training does) fits a 24 GB card.
  const auto ids = ids_of(j["steps"]);
  CHECK(ids == std::vector<std::string>{"reduce_batch", "mixed_precision", "gradient_checkpointing",
                                        "quantize_8bit", "quantize_4bit"});
  CHECK(j["fits"] == true);
  const auto applied = ids_of(j["steps"], "applied");
  CHECK(std::find(applied.begin(), applied.end(), "quantize_4bit") != applied.end());
  // Every applied step lowers the estimate; saves = before - after.
  for (const auto& s : j["steps"]) {
    if (s["status"] != "applied") continue;
    CHECK(s["after"].get<std::uint64_t>() < s["before"].get<std::uint64_t>());
    CHECK(s["saves"].get<std::uint64_t>() ==
          s["before"].get<std::uint64_t>() - s["after"].get<std::uint64_t>());
  }
  CHECK(j["tiers"]["considered"].get<std::uint64_t>() > 0);

  const auto text = run_cli({"advise", "--model", "mistral-7b-v0.3", "--mode", "train", "--gpu", "rtx-4090"});
  CHECK(text.code == 1);
  CHECK(text.out.rfind("Model     mistral-7b-v0.3 (preset, mistral)\n", 0) == 0);
  CHECK(text.out.find("\nBudget    rtx-4090 (NVIDIA GeForce RTX 4090 24GB), 23.65 GiB\n") !=
        std::string::npos);
  CHECK(text.out.find("quantize_4bit") != std::string::npos);

  // --deny rules a fix out; the JSON says so.
  const auto denied = run_cli({"advise", "--model", "mistral-7b-v0.3", "--mode", "train", "--gpu", "rtx-4090",
                               "--deny", "quantize", "--json"});
  CHECK(denied.code == 1);
  const auto d = nlohmann::json::parse(denied.out);
  const auto ruled_out = ids_of(d["steps"], "ruled_out");
  CHECK(ruled_out == std::vector<std::string>{"quantize_8bit", "quantize_4bit"});
  // Repeated and comma-separated.
  const auto repeated =
      run_cli({"advise", "--model", "mistral-7b-v0.3", "--mode", "train", "--gpu", "rtx-4090", "--deny",
               "quantize_8bit", "--deny", "quantize_4bit,expandable_segments", "--json"});
  CHECK(repeated.code == 1);
  CHECK(ids_of(nlohmann::json::parse(repeated.out)["steps"], "ruled_out") ==
        std::vector<std::string>{"quantize_8bit", "quantize_4bit", "expandable_segments"});
  // --allow: everything else is ruled out.
  const auto allowed = run_cli({"advise", "--model", "mistral-7b-v0.3", "--mode", "train", "--gpu",
                                "rtx-4090", "--allow", "quantize_4bit", "--json"});
  CHECK(allowed.code == 1);
  CHECK(ids_of(nlohmann::json::parse(allowed.out)["steps"], "applied") ==
        std::vector<std::string>{"quantize_4bit"});
}

TEST_CASE("advise: a job that fits exits 0 with no steps", "[cli][advise]") {
  const auto r = on_fixture("advise", {"--model", "smollm2-135m", "--gpu", "h100-80gb", "--json"});
  INFO(r.err);
  CHECK(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["fits_initially"] == true);
  CHECK(j["fits"] == true);
  CHECK(j["steps"].empty());
  CHECK(j["initial_device_total"] == j["final_device_total"]);
  // The provider's tiers only: c1.t4 holds it as given.
  const auto p = on_fixture(
      "advise", {"--model", "smollm2-135m", "--gpu", "h100-80gb", "--provider", "cloudy", "--json"});
  CHECK(p.code == 0);
  const auto pj = nlohmann::json::parse(p.out);
  CHECK(pj["tiers"]["provider"] == "cloudy");
  CHECK(pj["tiers"]["considered"] == 2);
  CHECK(pj["tiers"]["unchanged"]["id"] == "c1.t4");

  const auto text = on_fixture("advise", {"--model", "smollm2-135m", "--gpu", "h100-80gb"});
  CHECK(text.code == 0);
  CHECK(text.out.find("nothing to fix") != std::string::npos);
}

TEST_CASE("advise --help names the fixes and has an example", "[cli][advise]") {
  const auto r = run_cli({"advise", "--help"});
  CHECK(r.code == 0);
  CHECK(r.out.find("vramfit advise --model llama-3.1-8b --mode train --gpu rtx-4090") != std::string::npos);
  for (const char* id : {"reduce_batch", "mixed_precision", "gradient_checkpointing", "quantize_8bit",
                         "quantize_4bit", "inference_mode", "expandable_segments", "--allow", "--deny",
                         "--provider", "--headroom", "Exit codes"})
    CHECK(r.out.find(id) != std::string::npos);
  const auto fit = run_cli({"fit", "--help"});
  CHECK(fit.code == 0);
  CHECK(fit.out.find("--solve") != std::string::npos);
  CHECK(fit.out.find("Examples:\n  vramfit fit ") != std::string::npos);
}

TEST_CASE("estimate: an exceeded budget appends the advice, JSON has an advice key", "[cli][advise]") {
  const auto text = estimate({"--model", "smollm2-135m", "--mode", "train", "--gpu", "tiny-1gb"});
  CHECK(text.code == 1);
  CHECK(text.err.empty());
  CHECK(text.out.find("DOES NOT FIT") != std::string::npos);
  CHECK(text.out.find("\nAdvice (run 'vramfit advise' with the same flags for details):\n") !=
        std::string::npos);

  const auto json = estimate({"--model", "smollm2-135m", "--mode", "train", "--gpu", "tiny-1gb", "--json"});
  CHECK(json.code == 1);
  const auto j = nlohmann::ordered_json::parse(json.out);
  std::string last;
  for (const auto& [k, v] : j.items()) last = k;
  CHECK(last == "advice");
  CHECK(j["advice"]["fits_initially"] == false);
  CHECK(j["advice"]["initial_device_total"] == j["device_total_bytes"]);
  CHECK(j["advice"]["budget"] == j["budget"]);  // one budget, one shape

  // Fits, or no budget: no advice; the key is null, never absent.
  const auto fits = estimate({"--model", "smollm2-135m", "--gpu", "h100-80gb", "--json"});
  CHECK(fits.code == 0);
  CHECK(nlohmann::json::parse(fits.out)["advice"].is_null());
  CHECK(estimate({"--model", "smollm2-135m", "--gpu", "h100-80gb"}).out.find("Advice") == std::string::npos);
  CHECK(nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--json"}).out)["advice"].is_null());
}

TEST_CASE("estimate --headroom: fits when device total + margin <= budget", "[cli][advise]") {
  // Without a margin it fits an 80 GB card easily; keeping 99% free it does not.
  const auto plain = estimate({"--model", "smollm2-135m", "--budget", "80GB", "--json"});
  REQUIRE(plain.code == 0);
  const auto total = nlohmann::json::parse(plain.out)["device_total_bytes"].get<std::uint64_t>();

  const auto tight = estimate({"--model", "smollm2-135m", "--budget", "80GB", "--headroom", "99%", "--json"});
  CHECK(tight.code == 1);
  const auto j = nlohmann::json::parse(tight.out);
  CHECK(j["budget"]["fits"] == false);
  CHECK(j["budget"]["headroom_bytes"] == 79200000000ULL);
  CHECK(j["budget"]["spare_bytes"] == 80000000000LL - static_cast<std::int64_t>(total));
  CHECK(j["advice"]["budget"]["headroom_bytes"] == 79200000000ULL);

  // A margin that still leaves room: exit 0, and the text says what is kept free.
  const auto ok = estimate({"--model", "smollm2-135m", "--budget", "80GB", "--headroom", "10%"});
  CHECK(ok.code == 0);
  CHECK(ok.out.find("Budget   74.51 GiB (80GB), 7.45 GiB kept free (10%)\nVerdict  FITS, headroom ") !=
        std::string::npos);
  const auto sized = estimate({"--model", "smollm2-135m", "--budget", "80GB", "--headroom", "79.9GB"});
  CHECK(sized.code == 1);
  CHECK(sized.out.find(
            "Budget   74.51 GiB (80GB), 74.41 GiB kept free (79.9GB)\nVerdict  DOES NOT FIT, short by ") !=
        std::string::npos);
  CHECK(sized.out.find(" with 74.41 GiB kept free\n") != std::string::npos);
  CHECK(nlohmann::json::parse(estimate({"--model", "smollm2-135m", "--gpu", "h100-80gb", "--json"})
                                  .out)["budget"]["headroom_bytes"] == 0);

  require_usage_error(
      estimate({"--model", "smollm2-135m", "--headroom", "10%"}),
      "vramfit: error: --headroom: a margin needs a budget (give --gpu ID or --budget SIZE too)\n");
  // A size the spec module cannot read: its message, under --headroom.
  const auto bad_size = estimate({"--model", "smollm2-135m", "--gpu", "h100-80gb", "--headroom", "ten"});
  CHECK(bad_size.code == 2);
  CHECK(bad_size.out.empty());
  CHECK(bad_size.err.rfind("vramfit: error: --headroom: ", 0) == 0);
}

TEST_CASE("fit: the largest batch that fits, and nothing when even 1 does not", "[cli][fit]") {
  const auto r =
      on_fixture("fit", {"--model", "smollm2-135m", "--mode", "train", "--gpu", "t4-16gb", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema_version"] == 3);
  CHECK(j["dimension"] == "batch");
  CHECK(j["fits_at_one"] == true);
  const auto value = j["value"].get<std::uint64_t>();
  CHECK(value >= 1);
  CHECK(j["workload"]["batch"] == 1);  // the workload as given
  CHECK(j["solved_workload"]["batch"] == value);
  // The answer agrees with estimate: `value` fits and `value + 1` does not.
  CHECK(estimate({"--model", "smollm2-135m", "--mode", "train", "--gpu", "t4-16gb", "--batch",
                  std::to_string(value)})
            .code == 0);
  CHECK(estimate({"--model", "smollm2-135m", "--mode", "train", "--gpu", "t4-16gb", "--batch",
                  std::to_string(value + 1)})
            .code == 1);

  const auto text = on_fixture("fit", {"--model", "smollm2-135m", "--mode", "train", "--gpu", "t4-16gb"});
  CHECK(text.code == 0);
  CHECK(text.out.find("\nLargest batch that fits: " + std::to_string(value) + " (needs ") !=
        std::string::npos);

  const auto seq =
      on_fixture("fit", {"--model", "smollm2-135m", "--gpu", "t4-16gb", "--solve", "seq", "--json"});
  CHECK(seq.code == 0);
  CHECK(nlohmann::json::parse(seq.out)["dimension"] == "seq");

  const auto none = on_fixture("fit", {"--model", "smollm2-135m", "--mode", "train", "--gpu", "tiny-1gb"});
  CHECK(none.code == 1);
  CHECK(none.out.find("\nNothing fits: even batch 1 needs ") != std::string::npos);
}

TEST_CASE("fit: bad input exits 2 with exact messages", "[cli][fit]") {
  require_usage_error(on_fixture("fit", {"--model", "smollm2-135m", "--gpu", "t4-16gb", "--solve", "bogus"}),
                      "vramfit: error: --solve: unknown dimension 'bogus' (use 'batch' or 'seq')\n");
  // All at once: the estimate's flags, then --solve.
  require_usage_error(on_fixture("fit", {"--model", "smollm2-135m", "--solve", "bogus"}),
                      "vramfit: error: budget: no budget given (give --gpu ID or --budget SIZE, e.g. --gpu "
                      "rtx-4090 or --budget "
                      "24GiB; 'vramfit gpus' lists the GPUs)\n"
                      "vramfit: error: --solve: unknown dimension 'bogus' (use 'batch' or 'seq')\n");
  require_usage_error(
      on_fixture("fit", {"--model", "smollm2-135m", "--gpu", "t4-16gb", "--headroom", "100%"}),
      "vramfit: error: --headroom: 100% is not below 100% of the budget (give a percentage of the "
      "budget like 10% or a size like 2GiB)\n");
}
