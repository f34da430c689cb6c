// Text architectures added by #16, measured on an H200 (tests/accuracy/arch: cases.json, models/,
// results.jsonl; `python3 measure.py cases.json results.jsonl` with ../shared/truth/measure.py,
// torch 2.11, transformers 5.17). `vramfit validate tests/accuracy/arch/results.jsonl` prints
// the table. This test pins every parameter count and each family's errors (kBounds).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/render/validate.hpp"
#include "vramfit/spec/architectures.hpp"
#include "vramfit/spec/parse.hpp"
#include "../cli/cli_helper.hpp"
#include "measured.hpp"

using namespace vramfit;

// Every measured model has a bound here (a model without one fails the test): its median and
// worst |error| on the peak, and whether any case may be under by more than 5 % (only the
// ones named with the reason). Tighten a bound when a fix lands; never loosen one to pass.
struct Bound {
  const char* model;
  double median;  // largest median |error| allowed
  double worst;   // largest |error| allowed
  bool unsafe;    // a case under by more than 5 % is known (see the comment)
  std::size_t cases = 4;  // measured cases (forward, generate, train, checkpointed train)
};
constexpr Bound kBounds[] = {
    // opt-125m's plain training case was over by 145 MiB at backward_start (+6.75 % with the block
    // rounding): OPT's relu saves its result, the tensor fc2 saves too, and was counted twice (one
    // 4h-wide tensor per layer). Now +0.86 %; the worst case is generate (+2.83 %). Median 0.48 ->
    // 0.58 % with Adam's states as two blocks each in the training replay (their blocks kept whole
    // at the peak, block_rounding, move with them); 0.64 % with each bias a parameter of its own
    // (its gradient and states blocks of their own, engine/reserve.cpp param_tensors).
    {"opt-125m", 0.007, 0.03, false},
    {"olmo2-mini", 0.01, 0.02, false},
    {"glm4-mini", 0.01, 0.01, false},
    // cohere/cohere2: logits * logit_scale is one more logits-sized tensor (was 30.53% under).
    {"cohere-mini", 0.01, 0.05, false},
    // cohere2-mini's median rose from 0.75% to 1.20% with session 8's prefill rule for sliding layers
    // (DynamicSlidingWindowLayer keeps a view of the whole prompt's keys and values): its generate
    // went from -0.4% to +2.1% while vaultgemma's, ministral's, gemma3's and gpt-oss's came closer.
    {"cohere2-mini", 0.013, 0.03, false},
    // Multi-query falcon: SDPA's math backend materialises the scores (was 74.52% under).
    {"falcon-mq-mini", 0.05, 0.08, false},
    // new_decoder_architecture: the cache keeps every head (cache_all_heads; was 15.84% under).
    {"falcon-new-mini", 0.01, 0.03, false},
    {"deepseek-v3-mini", 0.01, 0.03, false},
    {"ernie45-mini", 0.01, 0.01, false},
    {"exaone4-mini", 0.01, 0.01, false},
    {"gemma2-mini", 0.01, 0.02, false},
    {"gemma3-mini", 0.01, 0.04, false},
    {"glm-mini", 0.01, 0.01, false},
    {"gpt-neox-mini", 0.01, 0.04, false},
    // eager attention (transformers 5.17 refuses SDPA for gpt_oss) with sinks (was 30.51% over).
    {"gpt-oss-mini", 0.01, 0.02, false},
    // granite/granitemoe: logits / logits_scaling (was 29.59% and 24.21% under).
    {"granite-mini", 0.01, 0.01, false},
    // MoE through integrations/moe.py (grouped_experts): olmoe, qwen3_moe, granitemoe generates
    // were 6.2-8.2% under.
    {"granitemoe-mini", 0.01, 0.01, false},
    {"mixtral-mini", 0.01, 0.01, false},
    {"olmoe-mini", 0.01, 0.05, false},
    {"qwen2moe-mini", 0.01, 0.01, false},
    {"qwen3moe-mini", 0.01, 0.01, false},
    {"phi-mini", 0.01, 0.04, false},
    {"phi3-mini", 0.01, 0.01, false},
    {"seed-oss-mini", 0.01, 0.01, false},
    {"smollm3-mini", 0.01, 0.01, false},
    {"starcoder2-mini", 0.01, 0.06, false},
    {"hunyuan-mini", 0.01, 0.01, false},
    // stablelm: every case under (generate 3.21%); partial rotary's torch.cat is not modelled.
    {"stablelm-mini", 0.03, 0.04, false},
    // Held out: measured after the rules above were written, from other shapes (second run).
    {"qwen3moe-k8", 0.01, 0.02, false},
    {"mixtral-h2048", 0.01, 0.02, false},
    {"phimoe-mini", 0.01, 0.01, false},
    {"gpt-oss-h32", 0.01, 0.07, false},
    {"falcon-new-kv2", 0.01, 0.03, false},
    {"granite-ls16", 0.01, 0.01, false},
    {"stablelm2-mini", 0.01, 0.03, false},
    {"olmo-mini", 0.01, 0.03, false},
    {"olmo3-mini", 0.01, 0.02, false},
    {"deepseek-v2-mini", 0.01, 0.03, false},
    {"helium-mini", 0.01, 0.03, false},
    {"gpt-bigcode-mini", 0.01, 0.03, false},
    {"gemma-mini", 0.01, 0.01, false},
    // Eager only (no SDPA in transformers). bloom/mpt: ALiBi (eager_scores); gptj: fp32 q and k
    // for the scores (fp32_qk; forward was 3.2% under).
    // Real configs at full size (third run, held out): forward and generate of 4096 tokens.
    {"gpt-oss-20b", 0.01, 0.01, false, 2},
    {"qwen3-30b-a3b", 0.01, 0.01, false, 2},
    {"gptj-mini", 0.01, 0.01, false},
    {"gptj-h1536", 0.01, 0.01, false},
    {"bloom-mini", 0.02, 0.02, false},
    {"bloom-h1536", 0.02, 0.02, false},
    {"mpt-mini", 0.02, 0.03, false},
    {"mpt-h1536", 0.02, 0.03, false},
    // MoE types users bring (fourth run): forward, generate, training, checkpointed training and
    // LoRA (r16, all-linear, checkpointed) of each; ERNIE-4.5-21B-A3B at full size.
    // glm4_moe's router hands the experts fp32 weights, so the weighted slot outputs are fp32
    // (fp32_routing_weights): the generates were 3.58% and 7.29% under without it.
    {"glm45air-mini", 0.01, 0.01, false, 5},
    {"glm45-mini", 0.01, 0.02, false, 5},
    {"ernie45moe-mini", 0.01, 0.02, false, 5},
    {"ernie45moe-i2", 0.01, 0.01, false, 5},
    {"dots1-mini", 0.01, 0.02, false, 5},
    {"hunyuanmoe-mini", 0.01, 0.01, false, 5},
    {"ernie-4.5-21b-a3b", 0.01, 0.01, false, 2},
    // llama4_text (fourth run): every expert runs on every token (dense_experts; the generates
    // were 6.4% and 12.1% under with the top-k rule), chunked attention's cache capped at
    // attention_chunk_size (llama4-il2: 1024 under a 4096-token prompt); forward, generate,
    // training, checkpointed training and LoRA on q/k/v/o.
    {"llama4-mini", 0.01, 0.01, false, 5},
    {"llama4-il2", 0.01, 0.02, false, 5},
    // Session 7 (fifth run; tests/accuracy/arch/gen_s7.py, probe_s7.py): five cases each.
    // glm4moe-k8: held out for fp32_routing_weights (8 of 32 experts, hidden 1536).
    {"glm4moe-k8", 0.01, 0.01, false, 5},
    // minimax_m2: fused experts with fp32 routing weights, q/k norms over the projections.
    {"minimax-m2-mini", 0.01, 0.01, false, 5},
    {"arcee-mini", 0.01, 0.01, false, 5},
    // apertus: xIELU's Python path; training saves x, alpha_p * x, expm1, (expm1 - x) and the
    // where mask (was 7.04% under as a native activation, now +0.01%); the generate is over
    // (+3.42%: the source's 5I + mask at the negative branch, measured about one I less).
    {"apertus-mini", 0.01, 0.04, false, 5},
    // Llama 4 Scout and Maverick at full width, 4 layers (scout: every layer MoE, 16 experts;
    // maverick: 128 experts every second layer): forward and generate, scout's LoRA on q/k/v/o.
    {"llama4-scout-4l", 0.01, 0.01, false, 3},
    {"llama4-maverick-4l", 0.01, 0.01, false, 2},
    // Session 8 (sixth run; gen_s8.py): types released lately, five cases each, measured once after
    // their rows were written from the source (none fitted). glm4_moe_lite: MLA with glm4_moe's MoE
    // on the generic expert rule (its generate is the worst, 3.49% under); exaone_moe: the grouped
    // rule with fp32 routing weights (generate 2.99% under).
    {"ministral3-mini", 0.01, 0.01, false, 5},
    // Session 10: every MLA row caches the latent and runs grouped experts, as transformers 5.17 does
    // (glm47flash-mini's generate -3.49% -> +0.11%, glm47flash-4l's +2.78% -> -0.07%).
    {"glm47flash-mini", 0.01, 0.03, false, 5},
    {"kexaone-mini", 0.01, 0.03, false, 5},
    {"flexolmo-mini", 0.01, 0.05, false, 5},
    {"granitemoeshared-mini", 0.01, 0.04, false, 5},
    {"nemotron-mini", 0.01, 0.01, false, 5},
    // Session 8, seventh run (gen_s8.py --second). Held out: ministral3 and glm4_moe_lite at full
    // width (4 layers). Measured after their rows were written, then two rules from the source:
    // DynamicSlidingWindowLayer keeps a view of the whole prompt's keys and values until the first
    // decode step (engine/estimate.cpp; vaultgemma's generate was 6.63% under, ministral's 4.20%),
    // and granite_swa's logsumexp saves the masked scores (its training was 5.34% under).
    {"ministral-mini", 0.01, 0.02, false, 5},
    {"solar-open-mini", 0.01, 0.01, false, 5},
    {"vaultgemma-mini", 0.01, 0.02, false, 5},
    {"granite-swa-mini", 0.01, 0.01, false, 5},
    {"cohere2moe-mini", 0.01, 0.03, false, 5},
    {"ministral3-8b-4l", 0.01, 0.01, false, 5},
    {"glm47flash-4l", 0.01, 0.01, false, 5},
    // Session 10 (arch3; one run, gen_s10.py): jais2 and granitemoe_swa (rows of session 9, never measured)
    // and the rows written this session, measured once after they were written from the source. Two
    // changes after the run, both from the source: the MLA expansion over the prompt is not added to the
    // prefill (it is not alive with the MLP's activations: minicpm3 and youtu generates were 11.0% and 9.2%
    // over), and axk1's experts take the grouped rule (@use_experts_implementation; its generate was 8.2%
    // under with deepseek_v3's generic rule beside the latent cache). minicpm3/youtu's generates stay 4.8%
    // and 4.5% over: their first-model-in-the-process cuBLAS workspace was 36.6 MiB at rest, the engine
    // counts 66.
    {"jais2-mini", 0.01, 0.01, false, 5},
    {"granitemoe-swa-mini", 0.01, 0.02, false, 5},
    {"gemma4-e2b-mini", 0.01, 0.03, false, 5},
    {"gemma4-moe-mini", 0.01, 0.04, false, 5},
    {"minicpm3-mini", 0.03, 0.05, false, 5},
    {"youtu-mini", 0.02, 0.05, false, 5},
    {"hyv3-mini", 0.01, 0.02, false, 5},
    {"hyperclovax-mini", 0.01, 0.01, false, 5},
    {"axk1-mini", 0.01, 0.03, false, 5},
    {"afmoe-mini", 0.01, 0.02, false, 5},
    {"laguna-mini", 0.02, 0.02, false, 5},
};

TEST_CASE("text architectures measured on the H200: exact parameters, each family within its bound",
          "[accuracy][arch]") {
  const std::filesystem::path dir = std::filesystem::path(VRAMFIT_SOURCE_DIR) / "tests/accuracy/arch";
  const test::Measured measured = test::evaluate_measured(dir, "results.jsonl");
  const auto& cases = measured.cases;
  REQUIRE(cases.size() == 381);
  const auto r = accuracy::make_report(measured.results, *accuracy::truth_device_bytes(measured.text));
  INFO(render::accuracy_text(r));
  CHECK(r.params_checked == 344);  // the LoRA cases count trainable parameters, not checked here
  CHECK(r.params_exact == 344);
  CHECK(r.by_model.size() == std::size(kBounds));
  for (const auto& [model, st] : r.by_model) {
    INFO(model);
    const auto b = std::find_if(std::begin(kBounds), std::end(kBounds), [&](const Bound& x) { return model == x.model; });
    REQUIRE(b != std::end(kBounds));
    CHECK(st.cases >= b->cases);
    CHECK(st.median_abs <= b->median);
    CHECK(st.max_abs <= b->worst);
    if (!b->unsafe) CHECK(st.unsafe_share == 0);
  }
}

// The README's table of model types is generated from the table (src/spec/architectures.cpp),
// the transformers counts and the measurements, so that it cannot drift: when it differs, this
// test fails with the text to paste between the README's model-types markers
// (VRAMFIT_UPDATE_README=1 ./build/tests/vramfit_tests "[readme]" writes it; review the diff).
TEST_CASE("the README's model-type table is generated from src/spec/architectures", "[readme][arch]") {
  const std::filesystem::path root = VRAMFIT_SOURCE_DIR;
  const std::filesystem::path dir = root / "tests/accuracy/arch";
  const test::Measured arch = test::evaluate_measured(dir, "results.jsonl");
  const auto& cases = arch.cases;
  const auto& results = arch.results;
  const auto r = accuracy::make_report(results, *accuracy::truth_device_bytes(arch.text));
  // model name (cases.json's "model") -> its model_type, from the measured config itself.
  std::map<std::string, std::string> type_of;
  for (const auto& c : cases) type_of[c.model] = arch.models.of(c).model_type;
  const auto counts = nlohmann::json::parse(vramfit::test::read_text(root / "tests/unit/spec/data/arch/transformers_counts.json"));
  // Types added without a device session (qwen3_5_text, qwen3_5_moe_text): counted by hand in hybrid_test.cpp.
  const std::string hybrid_counts = vramfit::test::read_text(root / "tests/unit/spec/hybrid_test.cpp");

  std::string table =
      "| model_type | layout follows (transformers 5.17) | parameters equal transformers' | measured in "
      "tests/accuracy/arch (median / worst \\|error\\|) |\n| --- | --- | --- | --- |\n";
  for (const spec::Architecture& a : spec::architectures()) {
    bool counted = false;
    for (const auto& c : counts["results"])
      counted = counted || (c["id"] == std::string(a.model_type) + ":default" && c.contains("params"));
    std::string measured;
    bool measured_config = false;
    for (const auto& [model, st] : r.by_model) {
      const auto t = type_of.find(model);
      if (t == type_of.end() || t->second != a.model_type) continue;
      measured_config = true;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s%s: %.2f%% / %.2f%%", measured.empty() ? "" : "; ", model.c_str(),
                    st.median_abs * 100, st.max_abs * 100);
      measured += buf;
    }
    table += "| " + std::string(a.model_type) + " | `" + std::string(a.source) + "` | " +
             (counted                                ? "yes (default config)"
              : measured_config                     ? "yes (the measured config)"
              : a.source.starts_with("remote code:") ? "by hand (not in transformers; config_test.cpp)"
              : hybrid_counts.find("{\"model_type\": \"" + std::string(a.model_type) + "\"") != std::string::npos
                  ? "yes (default config; tests/accuracy/hybrid/counts35.json)"
                  : "yes (vision.json, the whole model)") +
             " | " +
             (measured.empty() ? "-" : measured) + " |\n";
  }

  // The per-family accuracy table: one row per measured config, in model_type order, with the
  // signed worst case (its mode) so that an under-estimate shows.
  std::string acc =
      "| model_type | config (tests/accuracy/arch/models) | parameters exact | median \\|error\\| | worst error |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const spec::Architecture& a : spec::architectures()) {
    for (const auto& [model, st] : r.by_model) {
      const auto t = type_of.find(model);
      if (t == type_of.end() || t->second != a.model_type) continue;
      const accuracy::CaseResult* worst = nullptr;
      bool exact = true;
      for (const auto& x : results) {
        if (x.truth->model != model) continue;
        // A LoRA case's measured count includes the adapters (not a check of the layout).
        if (x.truth->workload.mode != spec::Mode::lora) exact = exact && x.estimate_params == x.truth->params;
        if (x.truth->status == "ok" && (worst == nullptr || std::fabs(x.error) > std::fabs(worst->error))) worst = &x;
      }
      if (worst == nullptr) continue;
      const std::string id = worst->truth->id;
      const std::string what = id.substr(id.find('/') + 1, id.find('/', id.find('/') + 1) - id.find('/') - 1);
      char buf[256];
      std::snprintf(buf, sizeof buf, "| %s | %s | %s | %.2f%% | %+.2f%% (%s%s) |\n", std::string(a.model_type).c_str(),
                    model.c_str(), exact ? "yes" : "**no**", st.median_abs * 100, worst->error * 100, what.c_str(),
                    worst->error < -0.05 ? ", **under**" : "");
      acc += buf;
    }
  }

  std::string readme = vramfit::test::read_text(root / "README.md");
  bool rewrite = false;
  for (const auto& [name, body] : {std::pair<std::string, std::string>{"model-types", table}, {"arch-accuracy", acc}}) {
    const std::string begin = "<!-- " + name + ":begin -->\n", end = "<!-- " + name + ":end -->";
    const auto b = readme.find(begin);
    const auto e = readme.find(end);
    INFO("paste between " << begin << "and " << end << " in README.md:\n" << body);
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    if (std::getenv("VRAMFIT_UPDATE_README") != nullptr) {  // VRAMFIT_UPDATE_README=1: rewrite the sections
      readme = readme.substr(0, b + begin.size()) + body + readme.substr(e);
      rewrite = true;
      continue;
    }
    CHECK(readme.substr(b + begin.size(), e - b - begin.size()) == body);
  }
  if (rewrite) std::ofstream(root / "README.md", std::ios::binary) << readme;
}
