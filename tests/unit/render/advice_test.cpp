// The advice and fit renderers: JSON with stable ids and integer bytes, text for a human.
#include "vramfit/render/advice.hpp"

#include "../advisor/fixtures.hpp"
#include "vramfit/render/format.hpp"

using namespace vramfit;
using namespace vramfit::advisor;
using namespace vramfit::render;
using namespace advisor_test;
using nlohmann::json;

namespace {

struct Case {
  spec::ModelSpec model = llama8b();
  spec::Workload fp32 = inference_fp32();
  spec::Workload bf16;
  Budget budget;
  Advice advice;
};

/// Inference of fp32 weights that fits once they are cast to bf16.
Case mixed_precision_case() {
  Case c;
  c.bf16 = c.fp32;
  c.bf16.weights = DType::bf16;
  c.budget = budget_of(total_of(c.model, c.bf16));
  AdviseOptions o;
  o.tiers = false;
  c.advice = advise(c.model, c.fp32, c.budget, test_catalog(), o);
  return c;
}

}  // namespace

TEST_CASE("exit codes: 0 when the workload fits as given, 1 otherwise", "[render]") {
  Advice a;
  a.fits_initially = true;
  CHECK(exit_code(a) == ExitCode::ok);
  a.fits_initially = false;
  a.fits = true;  // fixes make it fit, but CI asks about the job as written
  CHECK(exit_code(a) == ExitCode::does_not_fit);
  FitResult f;
  CHECK(exit_code(f) == ExitCode::does_not_fit);
  f.fits_at_one = true;
  CHECK(exit_code(f) == ExitCode::ok);
}

TEST_CASE("workload_json: one shape for every workload, the knobs the advisor changes included", "[render]") {
  spec::Workload w = training(2);
  w.mode = spec::Mode::qlora;
  w.weights = DType::nf4;
  w.autocast = DType::bf16;
  w.grad_accum = 4;
  w.checkpointing = true;
  w.gpus = 2;
  w.sharding = spec::Sharding::fsdp;
  w.expandable_segments = true;
  const json j = json(workload_json(w));
  CHECK(j == json::parse(R"({"mode": "qlora", "weights": "nf4", "batch": 2, "seq": 1024, "new_tokens": null,
    "optimizer": "adamw", "autocast": "bf16", "checkpointing": true, "attention": "sdpa",
    "lora": {"rank": 16, "targets": ["all-linear"], "dropout": 0.0, "dtype": "fp32", "kernels": "peft"}, "grad_accum": 4, "gpus": 2, "nodes": 1,
    "sharding": "fsdp", "offload": "none", "master_weights": false, "kv_cache": null,
    "expandable_segments": true, "alloc_conf": "expandable_segments:True", "cuda_context": null, "checkpointing_kind": "full", "activation_offload": false,
    "optimizer_in_backward": false, "sequence_packing": false, "loss": "hf", "fsdp_mixed_precision": null,
    "images": 0, "image_size": null, "compile": null})"));
  const json i = json(workload_json(inference_fp32()));
  CHECK(i["autocast"].is_null());
  CHECK(i["lora"].is_null());
  CHECK(i["mode"] == "inference");
}

TEST_CASE("advice_json: stable ids, statuses and integer bytes", "[render]") {
  const Case c = mixed_precision_case();
  const json j = advice_json(c.advice);
  const std::uint64_t before = total_of(c.model, c.fp32).value();
  const std::uint64_t after = total_of(c.model, c.bf16).value();
  const std::uint64_t upper_before = c.advice.initial_estimate.upper().value();
  CHECK(upper_before > before);  // the measured error of the workload's group
  CHECK(j["budget"] == json::parse(fmt::format(
                          R"({{"bytes": {}, "gpu": null, "headroom_bytes": 0, "fits": false, "spare_bytes": {},
                               "verdict": "does_not_fit", "upper_spare_bytes": {}}})",
                          after, static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before),
                          static_cast<std::int64_t>(after) - static_cast<std::int64_t>(upper_before))));
  CHECK(j["initial_device_total_upper"] == upper_before);
  CHECK_FALSE(j.contains("headroom"));
  CHECK(j["fits_initially"] == false);
  CHECK(j["fits"] == true);
  CHECK(j["initial_device_total"] == before);
  CHECK(j["final_device_total"] == after);
  CHECK_FALSE(j.contains("schema_version"));  // the CLI wraps it
  REQUIRE(j["steps"].size() == 2);
  const json& s0 = j["steps"][0];
  CHECK(s0["id"] == "reduce_batch");
  CHECK(s0["status"] == "skipped");
  CHECK(s0["reason"] == "the micro-batch is already 1");
  CHECK(s0["before"] == before);
  CHECK(s0["after"] == before);
  CHECK(s0["saves"] == 0);
  CHECK(s0["how"].is_null());
  CHECK(s0["warning"].is_null());
  const json& s1 = j["steps"][1];
  CHECK(s1["id"] == "mixed_precision");
  CHECK(s1["status"] == "applied");
  CHECK(s1["before"] == before);
  CHECK(s1["after"] == after);
  CHECK(s1["saves"] == before - after);
  CHECK(s1["fits"] == true);
  CHECK(s1["workload"]["weights"] == "bf16");
  CHECK(j["final_workload"] == json(workload_json(c.bf16)));
  // One shape: a step's workload is the estimate's workload object.
  CHECK(s1["workload"]["lora"].is_null());
  CHECK(s1["workload"]["attention"] == "sdpa");
  CHECK(j["tiers"] ==
        json::parse(R"({"provider": null, "considered": 0, "unchanged": null, "with_fixes": null})"));
}

TEST_CASE("advice_json marks steps ruled out by --deny", "[render]") {
  const auto m = llama8b();
  AdviseOptions o;
  o.tiers = false;
  o.deny = {"reduce_batch"};
  const json j = advice_json(advise(m, inference_fp32(), budget_of(MiB(1)), test_catalog(), o));
  CHECK(j["steps"][0]["status"] == "ruled_out");
  CHECK(j["steps"][0]["reason"] == "ruled out by --deny");
  CHECK(j["steps"].size() == 13);
}

TEST_CASE("advice_text: verdict, each fix with before and after, the result", "[render]") {
  const Case c = mixed_precision_case();
  const Bytes before = total_of(c.model, c.fp32);
  const Bytes after = total_of(c.model, c.bf16);
  const std::string budget = format_bytes(after);
  const std::string expected = fmt::format(
      "Does not fit: needs {0} on a budget of {1}.\n"
      "\n"
      "Fixes, in order, each re-estimated by the engine:\n"
      "  1. reduce_batch  Smaller micro-batch\n"
      "     skipped: the micro-batch is already 1\n"
      "  2. mixed_precision  Mixed precision\n"
      "     applied: {0} -> {2} (saves {3})\n"
      "     cast the fp32 weights to bf16 for inference (the GPU supports bf16)\n"
      "     how: from_pretrained(..., torch_dtype=torch.bfloat16) or model.to(torch.bfloat16)\n"
      "\n"
      "Fits after 1 fix: {2} on a budget of {1}.\n",
      format_bytes(before), budget, format_bytes(after), format_bytes(before - after));
  CHECK(advice_text(c.advice) == expected);
}

TEST_CASE("advice_text of a workload that fits, with tiers", "[render]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const Bytes total = total_of(m, w);
  AdviseOptions o;
  o.provider = "gpu-cloud";
  const Advice a = advise(m, w, budget_of(GiB(200), parse_headroom("10%")), test_catalog(), o);
  const std::string text = advice_text(a);
  CHECK(text.rfind(
            fmt::format("Fits: needs {} of a budget of 200.00 GiB (20.00 GiB kept free); nothing to fix.\n",
                        format_bytes(total)),
            0) == 0);
  CHECK(text.find("\nGPU tiers (4 considered, provider gpu-cloud, smallest total memory first):\n") !=
        std::string::npos);
  if (a.tier_unchanged && a.tier_unchanged->tier.count == 1)
    CHECK(text.find(fmt::format("  as given:    gpu-cloud tier '{}': 1 x {} ({} in all), {} per GPU\n",
                                a.tier_unchanged->tier.id, a.tier_unchanged->tier.gpu,
                                format_bytes(a.tier_unchanged->total_memory),
                                format_bytes(a.tier_unchanged->per_gpu_total))) != std::string::npos);
  CHECK(advice_summary(a).empty());
}

TEST_CASE("advice_text when nothing fits anywhere", "[render]") {
  auto m = llama8b();
  m.layers[0].count = 32000;
  m.params = spec::count_params(m);
  AdviseOptions o;
  o.provider = "gpu-cloud";
  const Advice a = advise(m, training(1), budget_of(GiB(80)), test_catalog(), o);
  const std::string text = advice_text(a);
  CHECK(text.find("\nStill does not fit after every fix: ") != std::string::npos);
  CHECK(text.find("  as given:    no tier of gpu-cloud fits ('--provider all' searches every tier and GPU)\n"
                  "  with fixes:  no tier of gpu-cloud fits ('--provider all' searches every tier and GPU)\n") !=
        std::string::npos);
  const std::string summary = advice_summary(a);
  CHECK(summary.rfind("Advice (run 'vramfit advise' with the same flags for details):\n", 0) == 0);
  CHECK(summary.find("  => still does not fit after every fix (") != std::string::npos);
}

TEST_CASE("advice_summary lists the applied fixes and the verdict", "[render]") {
  const Case c = mixed_precision_case();
  const Bytes before = total_of(c.model, c.fp32);
  const Bytes after = total_of(c.model, c.bf16);
  CHECK(advice_summary(c.advice) ==
        fmt::format(
            "Advice (run 'vramfit advise' with the same flags for details):\n"
            "  - mixed_precision: cast the fp32 weights to bf16 for inference (the GPU supports bf16) (saves "
            "{})\n"
            "  => fits: {} on a budget of {}\n",
            format_bytes(before - after), format_bytes(after), format_bytes(after)));
}

TEST_CASE("one shape per type: advise and fit print budgets and workloads as estimate does", "[render]") {
  // Same keys in the same order (schema_version 3): the serializers of estimate, not copies.
  const Case c = mixed_precision_case();
  const nlohmann::ordered_json a = advice_json(c.advice);
  CHECK(a["budget"].dump() == budget_json(c.advice.budget, c.advice.initial_estimate).dump());
  CHECK(a["budget"].dump().find(R"({"bytes":)") == 0);
  CHECK(a["final_workload"].dump() == workload_json(c.advice.final_workload).dump());
  REQUIRE(!c.advice.steps.empty());
  for (std::size_t i = 0; i < c.advice.steps.size(); ++i)
    CHECK(a["steps"][i]["workload"].dump() == workload_json(c.advice.steps[i].workload).dump());
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"budget", "fits_initially", "fits", "initial_device_total",
                                         "initial_device_total_upper", "final_device_total",
                                         "final_device_total_upper", "steps", "final_workload", "larger_batch", "tiers"});

  auto w = inference_fp32();
  w.weights = DType::bf16;
  const FitResult r = solve(c.model, w, budget_of(GiB(80), parse_headroom("1GiB")), Dimension::batch);
  REQUIRE(r.fits_at_one);
  const nlohmann::ordered_json f = fit_json(r);
  CHECK(f["budget"].dump() == budget_json(r.budget, r.estimate).dump());
  CHECK(f["workload"].dump() == workload_json(r.workload).dump());
}

TEST_CASE("fit_json and fit_text", "[render]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  const FitResult none = solve(m, w, budget_of(GiB(1)), Dimension::batch);
  const json j = fit_json(none);
  CHECK(j["dimension"] == "batch");
  CHECK(j["fits_at_one"] == false);
  CHECK(j["value"] == 0);
  CHECK(j["cap"] == 1048576);
  CHECK(j["budget"]["bytes"] == GiB(1).value());
  CHECK(j["budget"]["fits"] == false);
  CHECK(j["budget"]["spare_bytes"] == static_cast<std::int64_t>(GiB(1).value()) -
                                          static_cast<std::int64_t>(total_of(m, w).value()));
  CHECK(j["device_total"] == total_of(m, w).value());
  CHECK(j["workload"]["batch"] == 1);
  CHECK(fit_text(none) == fmt::format("Nothing fits: even batch 1 needs {} on a budget of 1.00 GiB.\n"
                                      "Run 'vramfit advise' with the same flags for fixes and GPU tiers.\n",
                                      format_bytes(total_of(m, w))));

  w.weights = DType::bf16;
  const FitResult r = solve(m, w, budget_of(GiB(80), parse_headroom("1GiB")), Dimension::batch);
  REQUIRE(r.fits_at_one);
  const std::string first =
      fmt::format("Largest batch that fits: {}{} (needs {} of 80.00 GiB (1.00 GiB kept free); upper bound {}{}).\n",
                  r.value, r.capped ? " or more" : "", format_bytes(r.estimate.device_total),
                  format_bytes(r.estimate.upper()), r.budget.fits(r.estimate.upper()) ? "" : ", TIGHT");
  CHECK(fit_text(r).rfind(first, 0) == 0);
  CHECK(fit_json(r)["budget"]["headroom_bytes"] == GiB(1).value());
  CHECK(fit_json(r)["budget"]["fits"] == true);
  CHECK_FALSE(fit_json(r).contains("headroom"));
}
