// The walk of fixes and the tiers. Expected bytes come from the engine itself (estimates of
// the workload each step should produce), so these tests hold whatever the engine's numbers.
#include "vramfit/advisor/advise.hpp"
#include "vramfit/core/fixes.hpp"

#include <algorithm>

#include "fixtures.hpp"

using namespace vramfit;
using namespace vramfit::advisor;
using namespace advisor_test;

namespace {

AdviseOptions no_tiers() {
  AdviseOptions o;
  o.tiers = false;
  return o;
}

const StepResult& step(const Advice& a, std::string_view id) {
  const auto it =
      std::find_if(a.steps.begin(), a.steps.end(), [&](const StepResult& s) { return s.id == id; });
  REQUIRE(it != a.steps.end());
  return *it;
}

/// A budget no workload of the 8B model fits: the walk runs every step.
Budget impossible() { return budget_of(MiB(1)); }

}  // namespace

TEST_CASE("fixes() lists the seed's seven fixes in its order, then the training levers", "[advisor]") {
  std::vector<std::string> ids;
  for (const auto& f : fixes()) ids.emplace_back(f.id);
  CHECK(ids == std::vector<std::string>{"reduce_batch", "mixed_precision", "gradient_checkpointing",
                                        "quantize_8bit", "quantize_4bit", "inference_mode",
                                        "expandable_segments", "chunked_logits", "selective_checkpointing",
                                        "activation_offload", "optimizer_in_backward", "compile", "shorter_sequence"});
}

TEST_CASE("a budget at or above the estimate gives no steps", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const Bytes total = total_of(m, w);
  for (const Bytes budget : {total, total + GiB(1)}) {
    const Budget b = budget_of(budget);
    const Advice a = advise(m, w, b, test_catalog(), no_tiers());
    CHECK(a.fits_initially);
    CHECK(a.fits);
    CHECK(a.steps.empty());
    CHECK(a.final_estimate.device_total == total);
    CHECK(a.final_workload.weights == DType::bf16);
    CHECK_FALSE(a.final_workload.expandable_segments);
    CHECK(a.budget.bytes == budget);
    CHECK(a.budget.headroom_bytes() == Bytes{0});
    check_walk_properties(m, a, b);
  }
  // One byte short: the walk starts.
  const Advice a = advise(m, w, budget_of(total - Bytes{1}), test_catalog(), no_tiers());
  CHECK_FALSE(a.fits_initially);
  CHECK_FALSE(a.steps.empty());
}

TEST_CASE("the headroom counts against the budget", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  const Bytes total = total_of(m, w);
  const Budget b = budget_of(total + GiB(1), parse_headroom("1GiB"));
  CHECK(advise(m, w, b, test_catalog(), no_tiers()).fits_initially);
  const Budget tight = budget_of(total + GiB(1), parse_headroom("1073741825"));
  const Advice a = advise(m, w, tight, test_catalog(), no_tiers());
  CHECK_FALSE(a.fits_initially);
  CHECK(a.budget.headroom_bytes() == Bytes{1073741825});
  check_walk_properties(m, a, tight);
  CHECK(error_of([&] {
          advise(m, w, budget_of(GiB(1), parse_headroom("1GiB")), test_catalog(), no_tiers());
        }).rfind("--headroom: a margin of 1073741824 bytes leaves nothing", 0) == 0);
}

TEST_CASE("mixed precision casts fp32 inference weights to bf16, or fp16 without bf16", "[advisor]") {
  const auto m = llama8b();
  const auto w = inference_fp32();
  auto bf16 = w;
  bf16.weights = DType::bf16;
  auto fp16 = w;
  fp16.weights = DType::fp16;

  const Budget b = budget_of(total_of(m, bf16));
  const Advice a = advise(m, w, b, test_catalog(), no_tiers());
  REQUIRE(a.steps.size() == 2);
  CHECK(a.steps[0].id == "reduce_batch");
  CHECK_FALSE(a.steps[0].applied);
  CHECK(a.steps[0].reason == "the micro-batch is already 1");
  const StepResult& s = a.steps[1];
  CHECK(s.id == "mixed_precision");
  CHECK(s.applied);
  CHECK(s.reason == "cast the fp32 weights to bf16 for inference (the GPU supports bf16)");
  CHECK(s.how == "from_pretrained(..., torch_dtype=torch.bfloat16) or model.to(torch.bfloat16)");
  CHECK(s.warning.empty());
  CHECK(s.before == total_of(m, w));
  CHECK(s.after == total_of(m, bf16));
  CHECK(s.fits);
  CHECK(s.workload.weights == DType::bf16);
  CHECK_FALSE(s.workload.autocast);
  CHECK(a.fits);
  CHECK(a.final_workload.weights == DType::bf16);
  check_walk_properties(m, a, b);

  Budget no_bf16 = budget_of(total_of(m, fp16));
  no_bf16.gpu_bf16 = false;
  const Advice f = advise(m, w, no_bf16, test_catalog(), no_tiers());
  const StepResult& sf = step(f, "mixed_precision");
  CHECK(sf.applied);
  CHECK(sf.reason == "cast the fp32 weights to fp16 for inference (the GPU has no bf16, so fp16)");
  CHECK(sf.warning == "fp16 can overflow on models trained in bf16: check the outputs");
  CHECK(sf.after == total_of(m, fp16));
  CHECK(f.final_workload.weights == DType::fp16);
}

TEST_CASE("inference of bf16 weights: 8-bit, then 4-bit, each re-estimated", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  auto int8 = w;
  int8.weights = DType::int8;
  auto nf4 = w;
  nf4.weights = DType::nf4;
  const Budget b = budget_of(total_of(m, nf4));
  const Advice a = advise(m, w, b, test_catalog(), no_tiers());
  REQUIRE(a.steps.size() == 5);
  CHECK(a.steps[1].reason == "the weights are already 16-bit (bf16)");
  CHECK(a.steps[2].id == "gradient_checkpointing");
  CHECK(a.steps[2].reason ==
        "inference keeps no activations for a backward pass; checkpointing only helps training");
  const StepResult& q8 = a.steps[3];
  CHECK(q8.applied);
  CHECK(q8.title == "8-bit weights");
  CHECK(q8.reason == "load the weights in int8 instead of bf16");
  CHECK(q8.how == "from_pretrained(..., quantization_config=BitsAndBytesConfig(load_in_8bit=True))");
  CHECK(q8.warning == "quantized weights can cost quality: check your evaluations");
  CHECK(q8.after == total_of(m, int8));
  CHECK_FALSE(q8.fits);
  const StepResult& q4 = a.steps[4];
  CHECK(q4.applied);
  CHECK(q4.reason == "load the weights in nf4 instead of int8");
  CHECK(q4.before == total_of(m, int8));
  CHECK(q4.after == total_of(m, nf4));
  CHECK(q4.fits);
  CHECK(a.final_workload.weights == DType::nf4);
  CHECK(a.final_workload.mode == spec::Mode::inference);
  check_walk_properties(m, a, b);
}

TEST_CASE("deny rules a step out, the next one does the work", "[advisor]") {
  const auto m = llama8b();
  const auto w = inference_fp32();
  auto int8 = w;
  int8.weights = DType::int8;
  AdviseOptions o = no_tiers();
  o.deny = {"mixed_precision"};
  const Budget b = budget_of(total_of(m, int8));
  const Advice a = advise(m, w, b, test_catalog(), o);
  REQUIRE(a.steps.size() == 4);
  CHECK_FALSE(a.steps[1].applied);
  CHECK(a.steps[1].ruled_out);
  CHECK(a.steps[1].reason == "ruled out by --deny");
  CHECK(a.steps[1].after == a.steps[1].before);
  CHECK(a.steps[3].id == "quantize_8bit");
  CHECK(a.steps[3].reason == "load the weights in int8 instead of fp32");
  CHECK(a.steps[3].after == total_of(m, int8));
  CHECK(a.fits);
  check_walk_properties(m, a, b);
}

TEST_CASE("allow keeps only the named steps", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  w.batch = 4;
  auto nf4 = w;
  nf4.weights = DType::nf4;
  AdviseOptions o = no_tiers();
  o.allow = {" Quantize-4bit "};  // spelling is forgiving: case, dashes, spaces
  const Budget b = budget_of(total_of(m, nf4));
  const Advice a = advise(m, w, b, test_catalog(), o);
  REQUIRE(a.steps.size() == 5);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(a.steps[i].ruled_out);
    CHECK(a.steps[i].reason == "not in --allow");
  }
  CHECK(a.steps[4].applied);
  CHECK(a.steps[4].after == total_of(m, nf4));
  CHECK(a.final_workload.batch == 4);  // reduce_batch was not allowed
  check_walk_properties(m, a, b);
}

TEST_CASE("deny quantize refuses both quantization steps", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  AdviseOptions o = no_tiers();
  o.deny = {"quantize"};
  const Advice a = advise(m, w, impossible(), test_catalog(), o);
  REQUIRE(a.steps.size() == 13);
  CHECK(a.steps[3].reason == "ruled out by --deny");
  CHECK(a.steps[4].reason == "ruled out by --deny");
  CHECK(a.final_workload.weights == DType::bf16);
  CHECK_FALSE(a.fits);
  check_walk_properties(m, a, impossible());
}

TEST_CASE("comma-separated ids and lists mix", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  AdviseOptions o = no_tiers();
  o.allow = {"reduce_batch,quantize_8bit", "quantize_4bit"};
  const Advice a = advise(m, w, impossible(), test_catalog(), o);
  CHECK(step(a, "reduce_batch").reason == "the micro-batch is already 1");
  CHECK(step(a, "mixed_precision").reason == "not in --allow");
  CHECK(step(a, "quantize_8bit").applied);
  CHECK(step(a, "quantize_4bit").applied);
  CHECK(step(a, "expandable_segments").reason == "not in --allow");
}

TEST_CASE("unknown or conflicting ids in --allow/--deny are input errors", "[advisor]") {
  const auto m = llama8b();
  const auto w = inference_fp32();
  const auto run = [&](std::vector<std::string> allow, std::vector<std::string> deny) {
    AdviseOptions o = no_tiers();
    o.allow = std::move(allow);
    o.deny = std::move(deny);
    advise(m, w, impossible(), test_catalog(), o);
  };
  CHECK(error_of([&] { run({"quantise_4bit"}, {}); }) ==
        "--allow: unknown fix 'quantise_4bit' (did you mean 'quantize_4bit'?)");
  CHECK(error_of([&] { run({}, {"zzz"}); }) ==
        "--deny: unknown fix 'zzz' (known fixes: reduce_batch, mixed_precision, gradient_checkpointing, "
        "quantize_8bit, quantize_4bit, inference_mode, expandable_segments, chunked_logits, "
                "selective_checkpointing, activation_offload, optimizer_in_backward, compile, shorter_sequence, quantize)");
  CHECK(error_of([&] { run({"reduce_batch"}, {"reduce_batch"}); }) ==
        "--deny: fix 'reduce_batch' is both allowed and denied (name it in --allow or --deny, not both)");
  try {
    run({"nope1"}, {"nope2"});
    FAIL("no InputError");
  } catch (const InputError& e) {
    CHECK(e.diagnostics().size() == 2);  // every problem at once
  }
}

TEST_CASE("training: nothing fits, every step is tried, batch x grad_accum is kept", "[advisor]") {
  const auto m = llama8b();
  const auto w = training(8);
  const Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
  CHECK_FALSE(a.fits_initially);
  CHECK_FALSE(a.fits);
  REQUIRE(a.steps.size() == 13);
  check_walk_properties(m, a, impossible());
  for (const auto& s : a.steps) CHECK(s.workload.batch * s.workload.grad_accum == 8);

  const StepResult& rb = step(a, "reduce_batch");
  CHECK(rb.title == "Smaller micro-batch with gradient accumulation");
  // Halved to 1 because nothing fits.
  REQUIRE(rb.applied);
  CHECK(rb.reason == "micro-batch 8 -> 1, grad_accum 1 -> 8 (effective batch 8 unchanged)");
  CHECK(rb.workload.batch == 1);
  CHECK(rb.workload.grad_accum == 8);
  CHECK(rb.how ==
        "Trainer: per_device_train_batch_size=1, gradient_accumulation_steps=8; by hand: divide the "
        "loss by 8 and step the optimizer every 8 batches");
  // At batch 1 autocast's 16-bit copy of the 8B fp32 weights (16 GB) outweighs what it saves on
  // the activations of 1024 tokens: the engine says it does not lower memory, so it is skipped.
  const StepResult& mp = step(a, "mixed_precision");
  CHECK_FALSE(mp.applied);
  CHECK(mp.reason ==
        "torch.autocast in bf16 (the GPU supports bf16); the fp32 weights stay as master copies: does not "
        "lower the estimate");
  CHECK_FALSE(mp.workload.autocast.has_value());
  CHECK(step(a, "gradient_checkpointing")
            .reason.rfind("keep only each layer's input and recompute the rest during backward", 0) == 0);
  CHECK(step(a, "quantize_8bit").reason ==
        "full fine-tuning updates every weight and cannot train 8-bit weights (QLoRA is the 4-bit step)");
  const StepResult& q4 = step(a, "quantize_4bit");
  CHECK(q4.title == "QLoRA instead of full fine-tuning");
  REQUIRE(q4.applied);  // nf4 weights and adapters only: less than any full fine-tuning
  CHECK(q4.workload.mode == spec::Mode::qlora);
  CHECK(q4.workload.weights == DType::nf4);
  CHECK(q4.workload.lora.rank == 16);
  CHECK(q4.workload.lora.all_linear);
  CHECK(
      q4.warning ==
      "changes the job: only the adapters train, on a 4-bit base; can cost quality: check your evaluations");
  CHECK(step(a, "inference_mode").reason ==
        "training needs autograd; inference mode is for inference and generation");
  CHECK(a.final_workload.mode == spec::Mode::qlora);
}

TEST_CASE("the walk stops at the first configuration that fits", "[advisor]") {
  const auto m = llama8b();
  for (const auto& w : {training(8), inference_fp32()}) {
    const Advice all = advise(m, w, impossible(), test_catalog(), no_tiers());
    std::size_t applied = 0;
    for (const auto& s : all.steps) applied += s.applied ? 1 : 0;
    REQUIRE(applied >= 2);  // the loop below must check something
    for (std::size_t k = 0; k < all.steps.size(); ++k) {
      if (!all.steps[k].applied) continue;
      // A budget that the state after step k just fits: the walk ends there, not later.
      const Budget b = budget_of(all.steps[k].after);
      const Advice a = advise(m, w, b, test_catalog(), no_tiers());
      INFO("budget = after of " << all.steps[k].id);
      CHECK(a.fits);
      CHECK(a.steps.size() <= k + 1);
      check_walk_properties(m, a, b);
    }
  }
}

TEST_CASE("reduce_batch halves to the first batch that fits", "[advisor]") {
  const auto m = llama8b();
  auto w = inference_fp32();
  w.weights = DType::bf16;
  w.batch = 8;
  const auto at = [&](std::uint64_t batch) {
    auto x = w;
    x.batch = batch;
    return total_of(m, x);
  };
  // A budget between batch 2 and batch 4 (when the engine tells them apart).
  const Budget b = budget_of(at(2));
  const Advice a = advise(m, w, b, test_catalog(), no_tiers());
  if (at(8) <= at(2)) {
    CHECK(a.fits_initially);
  } else {
    const StepResult& s = a.steps.at(0);
    const std::uint64_t expected = at(4) <= at(2) ? 4 : 2;  // the first of 4, 2 that fits
    CHECK(s.applied);
    CHECK(s.workload.batch == expected);
    CHECK(s.after == at(expected));
    CHECK(s.fits);
    CHECK(a.steps.size() == 1);
    CHECK(s.reason ==
          fmt::format("batch 8 -> {} ({} passes for the same 8 sequences)", expected, 8 / expected));
    CHECK(s.warning == "lower throughput: more passes over the same inputs");
  }
  check_walk_properties(m, a, b);
}

TEST_CASE("larger_batch: the largest micro-batch that fits once the later fixes are on", "[advisor]") {
  const auto m = llama8b();
  auto inf = inference_fp32();
  inf.batch = 16;
  auto lora = training(12);
  lora.mode = spec::Mode::lora;
  lora.grad_accum = 2;
  for (const auto& w : {training(8), lora, inf}) {
    for (const char* gpu : {"rtx-4090", "v100-32gb", "l40s", "h100-80gb"}) {
      const Budget b = budget_for_gpu(test_catalog().gpu(gpu), parse_headroom("10%"));
      const Advice a = advise(m, w, b, test_catalog(), no_tiers());
      check_walk_properties(m, a, b);
      INFO("gpu " << gpu << ", mode " << spec::name_of(w.mode));
      const std::uint64_t low = a.final_workload.batch;
      const std::uint64_t effective = w.batch * w.grad_accum;
      std::optional<LargerBatch> expected;
      const bool eligible = a.fits && a.steps.size() >= 2 && a.steps[0].applied;
      // The largest candidate above the walk's batch that fits, by a plain scan.
      for (std::uint64_t c = w.batch; eligible && c > low; --c) {
        if (w.trains() && effective % c != 0) continue;
        spec::Workload x = a.final_workload;
        x.batch = c;
        if (w.trains()) x.grad_accum = effective / c;
        const Bytes t = engine::estimate(m, x).device_total;
        if (b.fits(t)) {
          expected = LargerBatch{c, x.grad_accum, t};
          break;
        }
      }
      REQUIRE(a.larger_batch.has_value() == expected.has_value());
      if (expected) {
        CHECK(a.larger_batch->batch == expected->batch);
        CHECK(a.larger_batch->grad_accum == expected->grad_accum);
        CHECK(a.larger_batch->device_total == expected->device_total);
        if (w.trains()) CHECK(a.larger_batch->batch * a.larger_batch->grad_accum == effective);
      }
    }
  }
}

TEST_CASE("reduce_batch in training keeps the effective batch with odd sizes", "[advisor]") {
  const auto m = llama8b();
  for (const auto& [batch, accum] :
       std::vector<std::pair<std::uint64_t, std::uint64_t>>{{6, 1}, {12, 2}, {7, 3}}) {
    auto w = training(batch);
    w.grad_accum = accum;
    const Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
    const StepResult& s = a.steps.at(0);
    CHECK(
        s.reason.rfind(fmt::format("micro-batch {} -> 1, grad_accum {} -> {} (effective batch {} unchanged)",
                                   batch, accum, batch * accum, batch * accum),
                       0) == 0);
    for (const auto& x : a.steps) CHECK(x.workload.batch * x.workload.grad_accum == batch * accum);
  }
}

TEST_CASE("skip reasons for fixes already in place", "[advisor]") {
  const auto m = llama8b();
  auto w = training(1);
  w.autocast = DType::bf16;
  w.checkpointing = true;
  Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
  CHECK(step(a, "reduce_batch").reason == "the micro-batch is already 1");
  CHECK(step(a, "mixed_precision").reason == "autocast is already on (bf16)");
  CHECK(step(a, "gradient_checkpointing").reason == "gradient checkpointing is already on");

  w = training(1);
  w.mode = spec::Mode::qlora;
  w.weights = DType::nf4;
  a = advise(m, w, impossible(), test_catalog(), no_tiers());
  CHECK(step(a, "mixed_precision").reason == "the weights are already quantized (nf4)");
  CHECK(step(a, "quantize_8bit").reason == "the QLoRA base is already 4-bit");
  CHECK(step(a, "quantize_4bit").reason == "the QLoRA base is already 4-bit");
  check_walk_properties(m, a, impossible());
}

TEST_CASE("mixed precision in training: fp16 with a GradScaler when the GPU has no bf16", "[advisor]") {
  const auto m = llama8b();
  Budget b = budget_for_gpu(test_catalog().gpu("v100-32gb"));
  b.bytes = MiB(1);
  // Batch 8 kept (reduce_batch denied): 16-bit activations of 8 x 1024 tokens save more than
  // autocast's 16-bit weight copies cost, so the step applies.
  AdviseOptions o = no_tiers();
  o.deny = {"reduce_batch"};
  const Advice a = advise(m, training(8), b, test_catalog(), o);
  const StepResult& s = step(a, "mixed_precision");
  REQUIRE(s.applied);
  CHECK(s.reason ==
        "torch.autocast in fp16 (the GPU has no bf16, so fp16); the fp32 weights stay as master copies");
  CHECK(s.workload.autocast == DType::fp16);
  CHECK(s.warning == "fp16 needs the GradScaler: without it small gradients underflow to zero");
  CHECK(s.how.find("torch.amp.GradScaler(\"cuda\")") != std::string::npos);
}

TEST_CASE("LoRA: the base goes 8-bit, then QLoRA keeps the adapters", "[advisor]") {
  const auto m = llama8b();
  auto w = training(1);
  w.mode = spec::Mode::lora;
  w.weights = DType::bf16;
  w.lora.rank = 64;
  const Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
  const StepResult& q8 = step(a, "quantize_8bit");
  CHECK(q8.title == "LoRA on an 8-bit base");
  CHECK(q8.reason.rfind("load the frozen base in int8 instead of bf16", 0) == 0);
  const StepResult& q4 = step(a, "quantize_4bit");
  CHECK(q4.title == "QLoRA: LoRA on a 4-bit base");
  REQUIRE(q4.applied);
  CHECK(q4.workload.mode == spec::Mode::qlora);
  CHECK(q4.workload.weights == DType::nf4);
  CHECK(q4.workload.lora.rank == 64);
  check_walk_properties(m, a, impossible());
}

TEST_CASE("inference_mode is reported as already assumed", "[advisor]") {
  const auto m = llama8b();
  const Advice a = advise(m, inference_fp32(), impossible(), test_catalog(), no_tiers());
  const StepResult& s = step(a, "inference_mode");
  CHECK_FALSE(s.applied);
  CHECK_FALSE(s.ruled_out);
  CHECK(s.reason ==
        "already assumed: the estimate runs the forward under torch.inference_mode(); if your script does "
        "not, it "
        "needs more than this estimate");
  CHECK(s.how == "model.eval(); with torch.inference_mode(): outputs = model(inputs)");
}

TEST_CASE("expandable segments lower the allocator reserve, keeping the invariants", "[advisor]") {
  const auto m = llama8b();
  // Not fp32 training: with grouped heads it runs SDPA's math backend, whose b x heads x s x s
  // blocks freed in the middle of the one expandable segment stay mapped (training(4): 2.83 GiB
  // reserved beyond the peak with expandable segments, 1.46 GiB without).
  auto bf16_training = training(4);
  bf16_training.weights = DType::bf16;
  for (const auto& w : {bf16_training, inference_fp32()}) {
    const engine::Breakdown plain = engine::estimate(m, w);
    auto expandable = w;
    expandable.expandable_segments = true;
    const engine::Breakdown e = engine::estimate(m, expandable);
    CHECK(e.allocator_reserve < plain.allocator_reserve);
    CHECK(e.peak_allocated == plain.peak_allocated);
    CHECK(e.peak_allocated + e.allocator_reserve + e.cuda_context == e.device_total);
    Bytes sum{0};
    for (const auto& c : e.components)
      if (c.in_peak_allocated) sum += c.bytes;
    CHECK(sum == e.peak_allocated);
  }
}

TEST_CASE("expandable_segments applies only when the reserve is over 10% of the total", "[advisor]") {
  const auto m = llama8b();
  // Small reserves: training at batch 1 after QLoRA and checkpointing, fp32 inference.
  for (const auto& w : {training(4), inference_fp32()}) {
    const Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
    REQUIRE(a.steps.size() == 13);
    const engine::Breakdown before = engine::estimate(m, a.steps[5].workload);
    CHECK(before.allocator_reserve.value() * 10 <= before.device_total.value());
    const StepResult& s = a.steps[6];
    CHECK_FALSE(s.applied);
    CHECK_FALSE(s.workload.expandable_segments);
    CHECK(s.reason.rfind("the allocator reserve is ", 0) == 0);
    CHECK(s.reason.find("% of the total, not over 10%: little fragmentation to recover") != std::string::npos);
  }
  // A large reserve: batch 8 kept (reduce_batch denied) after autocast, checkpointing, QLoRA.
  AdviseOptions o = no_tiers();
  o.deny = {"reduce_batch"};
  const Advice a = advise(m, training(8), impossible(), test_catalog(), o);
  REQUIRE(a.steps.size() == 13);
  const engine::Breakdown before = engine::estimate(m, a.steps[5].workload);
  CHECK(before.allocator_reserve.value() * 10 > before.device_total.value());
  const StepResult& s = a.steps[6];
  REQUIRE(s.applied);
  CHECK(s.workload.expandable_segments);
  CHECK(s.after == engine::estimate(m, s.workload).device_total);
  CHECK(s.after < before.device_total);
  CHECK(s.how == "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py");
}

// ---------------------------------------------------------------------------------------
// Tiers
// ---------------------------------------------------------------------------------------

TEST_CASE("candidate_tiers: every GPU at 1, 2, 4, 8 plus provider tiers, smallest first", "[advisor]") {
  const auto& c = test_catalog();
  const auto tiers = candidate_tiers(c, std::nullopt);
  // 5 GPUs x 4 counts, 5 of them offered by a provider (which replaces the synthetic one).
  REQUIRE(tiers.size() == 20);
  CHECK(tiers.front().id == "rtx-4090-x1");
  CHECK(tiers.back().id == "pro6000-8");
  std::vector<std::string> ids;
  for (const auto& t : tiers) ids.push_back(t.id);
  CHECK(std::count(ids.begin(), ids.end(), "l40s-1") == 1);
  CHECK(std::count(ids.begin(), ids.end(), "l40s-x1") == 0);
  CHECK(std::count(ids.begin(), ids.end(), "h100x8") == 1);
  CHECK(std::count(ids.begin(), ids.end(), "h100-80gb-x8") == 0);
  for (std::size_t i = 1; i < tiers.size(); ++i) {
    const auto key = [&](const catalog::Tier& t) {
      return std::make_tuple(c.gpu(t.gpu).memory * t.count, t.count, t.id);
    };
    CHECK(key(tiers[i - 1]) <= key(tiers[i]));
  }
  // Ties by total memory go to fewer GPUs: 2 x 24 GB before... not a tie here; 2 x 4090 (51.5 GB)
  // sorts after 1 x L40S (48.3 GB).
  const auto pos = [&](const std::string& id) { return std::find(ids.begin(), ids.end(), id) - ids.begin(); };
  CHECK(pos("l40s-1") < pos("rtx-4090-x2"));
}

TEST_CASE("candidate_tiers with a provider lists its tiers only", "[advisor]") {
  const auto tiers = candidate_tiers(test_catalog(), std::string("gpu-cloud"));
  std::vector<std::string> ids;
  for (const auto& t : tiers) ids.push_back(t.id);
  CHECK(ids == std::vector<std::string>{"l40s-1", "pro6000-1", "pro6000-2", "pro6000-8"});
  CHECK(tiers.back().count == 8);
  CHECK(tiers.back().provider == "gpu-cloud");
  CHECK(error_of([] { candidate_tiers(test_catalog(), std::string("gpu-clod")); }) ==
        "--provider: unknown provider 'gpu-clod' (did you mean 'gpu-cloud'?)");
  CHECK(error_of([] { candidate_tiers(test_catalog(), std::string("zzzzzzzz")); }) ==
        "--provider: unknown provider 'zzzzzzzz' (known providers: gpu-cloud, other; 'all' searches every tier "
        "and GPU)");
  // 'all' is the whole catalog, as no provider is: the provider tiers and every GPU at 1, 2, 4, 8.
  const auto all = candidate_tiers(test_catalog(), std::string("all"));
  CHECK(all.size() == candidate_tiers(test_catalog(), std::nullopt).size());
  CHECK(all.size() == 5 * 4);  // 5 GPUs at 1, 2, 4, 8 cards; the 5 provider tiers replace theirs
}

TEST_CASE("advise searches the catalog's default provider unless told otherwise", "[advisor]") {
  std::string gpus = kGpus;
  const std::string from = R"("providers": [)";
  gpus.replace(gpus.find(from), from.size(), R"("default_provider": "gpu-cloud", "providers": [)");
  const catalog::Catalog c = catalog::Catalog::parse({{"gpus.json", gpus}});
  REQUIRE(c.default_provider() == "gpu-cloud");
  auto m = llama8b();
  const auto w = training(1);
  const Advice by_default = advise(m, w, budget_of(GiB(24)), c);
  CHECK(by_default.provider == std::optional<std::string>("gpu-cloud"));
  CHECK(by_default.tiers_considered == 4);
  REQUIRE(by_default.tier_unchanged);
  CHECK(by_default.tier_unchanged->tier.provider == "gpu-cloud");
  AdviseOptions o;
  o.provider = "all";
  const Advice everything = advise(m, w, budget_of(GiB(24)), c, o);
  CHECK_FALSE(everything.provider);
  CHECK(everything.tiers_considered == 20);
  o.provider = "other";
  const Advice other = advise(m, w, budget_of(GiB(24)), c, o);
  CHECK(other.provider == std::optional<std::string>("other"));
  CHECK(other.tiers_considered == 1);
  // Without a default in the catalog, every tier is searched.
  CHECK_FALSE(advise(m, w, budget_of(GiB(24)), test_catalog()).provider);
}

TEST_CASE("on_gpus shards training with FSDP and splits inference layers", "[advisor]") {
  auto t = training(4);
  CHECK(on_gpus(t, 1).gpus == 1);
  CHECK(on_gpus(t, 1).sharding == spec::Sharding::none);
  CHECK(on_gpus(t, 4).gpus == 4);
  CHECK(on_gpus(t, 4).sharding == spec::Sharding::fsdp);
  CHECK(on_gpus(t, 4).batch == 4);   // the per-GPU micro-batch is unchanged
  t.sharding = spec::Sharding::ddp;  // replicates the weights: replaced
  CHECK(on_gpus(t, 2).sharding == spec::Sharding::fsdp);
  t.sharding = spec::Sharding::zero3;  // already splits the model: kept
  CHECK(on_gpus(t, 2).sharding == spec::Sharding::zero3);
  t.gpus = 4;
  CHECK(on_gpus(t, 1).sharding == spec::Sharding::none);
  const auto i = inference_fp32();
  CHECK(on_gpus(i, 8).sharding == spec::Sharding::device_map);
  CHECK(on_gpus(i, 8).gpus == 8);
}

TEST_CASE("the chosen tiers are the smallest that fit", "[advisor]") {
  const auto m = llama8b();
  const auto& c = test_catalog();
  for (const auto& w : {training(1), training(8), inference_fp32()}) {
    const Budget b = budget_of(GiB(8), parse_headroom("5%"));
    const Advice a = advise(m, w, b, c, AdviseOptions{});
    const auto tiers = candidate_tiers(c, std::nullopt);
    CHECK(a.tiers_considered == tiers.size());
    // The expected choices, tier by tier in the sorted order, with the engine and the walk.
    std::optional<std::size_t> unchanged, fixed;
    std::vector<std::string> fixed_ids;
    Bytes unchanged_total, fixed_total;
    for (std::size_t i = 0; i < tiers.size() && !(unchanged && fixed); ++i) {
      const auto& gpu = c.gpu(tiers[i].gpu);
      const Budget tb = budget_for_gpu(gpu, b.headroom);
      const spec::Workload tw = on_gpus(w, tiers[i].count);
      if (!unchanged && tb.fits(total_of(m, tw))) {
        unchanged = i;
        unchanged_total = total_of(m, tw);
      }
      if (!fixed) {
        AdviseOptions o;
        o.tiers = false;
        const Advice on_tier = advise(m, tw, tb, c, o);
        if (on_tier.fits) {
          fixed = i;
          fixed_total = on_tier.final_estimate.device_total;
          for (const auto& s : on_tier.steps)
            if (s.applied) fixed_ids.push_back(s.id);
        }
      }
    }
    REQUIRE(a.tier_unchanged.has_value() == unchanged.has_value());
    REQUIRE(a.tier_with_fixes.has_value() == fixed.has_value());
    if (unchanged) {
      const auto& t = tiers[*unchanged];
      CHECK(a.tier_unchanged->tier.id == t.id);
      CHECK(a.tier_unchanged->tier.provider == t.provider);
      CHECK(a.tier_unchanged->per_gpu_total == unchanged_total);
      CHECK(a.tier_unchanged->gpu_memory == c.gpu(t.gpu).memory);
      CHECK(a.tier_unchanged->total_memory == c.gpu(t.gpu).memory * t.count);
      CHECK(a.tier_unchanged->workload.gpus == t.count);
      CHECK(a.tier_unchanged->fixes.empty());
      REQUIRE(fixed);
      CHECK(*fixed <= *unchanged);  // the fixes never need a larger tier
    }
    if (fixed) {
      const auto& t = tiers[*fixed];
      CHECK(a.tier_with_fixes->tier.id == t.id);
      CHECK(a.tier_with_fixes->per_gpu_total == fixed_total);
      CHECK(a.tier_with_fixes->fixes == fixed_ids);
      CHECK(a.tier_with_fixes->workload.gpus == t.count);
    }
  }
}

TEST_CASE("no tier fits a model too large for 8 cards", "[advisor]") {
  auto m = llama8b();
  m.layers[0].count = 32000;  // about 7 trillion parameters
  m.num_layers = 32000;
  m.params = spec::count_params(m);
  AdviseOptions o;
  o.provider = "gpu-cloud";
  const Advice a = advise(m, training(1), budget_of(GiB(80)), test_catalog(), o);
  CHECK_FALSE(a.fits);
  CHECK(a.tiers_considered == 4);
  CHECK(a.provider == std::optional<std::string>("gpu-cloud"));
  CHECK_FALSE(a.tier_unchanged);
  CHECK_FALSE(a.tier_with_fixes);
}

TEST_CASE("the walk's fixes and the doctor's hints are rows of one table", "[advisor]") {
  // Every walk step is a row of core/fixes.hpp with its walk title; the doctor's quantize hint
  // is the alias of the two quantization steps.
  const auto walk = fixes();
  REQUIRE(walk.size() == 13);
  for (const FixInfo& f : walk) {
    const auto row = fix_of(f.id);
    REQUIRE(row);
    CHECK(fix_row(*row).walk_title == f.title);
  }
  const FixRow& q = fix_row(Fix::quantize);
  CHECK(q.walk_title.empty());
  CHECK(q.stands_for[0] == Fix::quantize_8bit);
  CHECK(q.stands_for[1] == Fix::quantize_4bit);
  CHECK(fix_row(Fix::quantize_8bit).hint.empty());
  CHECK(fix_row(Fix::larger_gpu).walk_title.empty());
}

TEST_CASE("beyond the seed: a fused loss, selective checkpointing, activation offload, optimizer in backward",
          "[advisor][levers]") {
  // LoRA at 8k tokens with the seed's memory fixes ruled out: the walk goes on to the levers,
  // each kept only because the engine says it lowers memory.
  const auto m = llama8b();
  spec::Workload w;
  w.mode = spec::Mode::lora;
  w.batch = 1;
  w.seq = 8192;
  AdviseOptions o = no_tiers();
  o.deny = {"reduce_batch,gradient_checkpointing,quantize,expandable_segments"};
  const Advice a = advise(m, w, impossible(), test_catalog(), o);
  REQUIRE(a.steps.size() == 13);
  check_walk_properties(m, a, impossible());
  const StepResult& loss = step(a, "chunked_logits");
  REQUIRE(loss.applied);
  CHECK(loss.title == "Fused or chunked loss");
  // Each fused or chunked loss re-estimated; Cut Cross-Entropy and Liger's tie (neither builds the
  // logits: both peak inside the forward, at the final norm here) and the earlier row is kept.
  CHECK(loss.workload.loss == spec::Loss::cce);
  CHECK(loss.reason.find("% of the peak: cce saves the most of the fused and chunked losses") != std::string::npos);
  CHECK(loss.warning == "needs the cut-cross-entropy package (Triton, Ampere or newer); same loss, about the same "
                        "speed");
  spec::Workload liger = loss.workload;
  liger.loss = spec::Loss::fused_linear;
  CHECK(engine::estimate(m, liger).device_total == loss.after);
  const StepResult& sel = step(a, "selective_checkpointing");
  REQUIRE(sel.applied);
  CHECK(sel.workload.checkpointing);
  CHECK(sel.workload.checkpoint_selective);
  CHECK(sel.warning == "slightly slower steps: the cheap ops (norms, activations, rotary) run twice");
  const StepResult& off = step(a, "activation_offload");
  REQUIRE(off.applied);
  CHECK(off.workload.activation_offload);
  CHECK(off.after < off.before);
  const StepResult& ib = step(a, "optimizer_in_backward");
  CHECK(ib.workload.loss == spec::Loss::cce);
  CHECK(a.final_workload.activation_offload);
}

TEST_CASE("torch.compile is a step of its own, re-estimated", "[advisor][levers]") {
  // LoRA at 8k tokens with every earlier lever ruled out but the seed's: compile is tried on
  // the workload the walk reached, and kept because the engine says it lowers memory.
  const auto m = llama8b();
  spec::Workload w;
  w.mode = spec::Mode::lora;
  w.batch = 1;
  w.seq = 8192;
  AdviseOptions o = no_tiers();
  o.allow = {"compile"};
  const Advice a = advise(m, w, impossible(), test_catalog(), o);
  const StepResult& c = step(a, "compile");
  REQUIRE(c.applied);
  CHECK(c.title == "torch.compile");
  CHECK(c.workload.compile == spec::Compile::all);
  CHECK(c.reason ==
        "compile each decoder layer and the loss: fused kernels save fewer intermediates (the 16-bit logits and a "
        "logsumexp, not the fp32 log-softmax; a gated MLP's activation recomputed)");
  CHECK(c.how == "for layer in model.model.layers: layer.compile(); loss_fn = torch.compile(loss_fn) (torchtune: "
                 "compile=True)");
  CHECK(c.warning == "the first steps compile (minutes for large models); graph breaks leave parts eager and save less");
  // The estimates before and after, exactly the engine's for the two workloads.
  spec::Workload compiled = w;
  compiled.compile = spec::Compile::all;
  CHECK(c.before == total_of(m, w));
  CHECK(c.after == total_of(m, compiled));
  CHECK(c.before.value() - c.after.value() == 22120759296u);
  // Only the loss left to compile: the reason says so.
  w.compile = spec::Compile::layers;
  const Advice la = advise(m, w, impossible(), test_catalog(), o);
  const StepResult& l = step(la, "compile");
  REQUIRE(l.applied);
  CHECK(l.reason == "compile the loss too: the compiled cross-entropy keeps the 16-bit logits and a logsumexp, not "
                    "the fp32 log-softmax");
  // 8 bytes per token and vocabulary entry at backward's start (3 fp32 logits-sized tensors
  // eager, 2 16-bit ones compiled), with the allocator reserve that follows the peak.
  CHECK(l.before.value() - l.after.value() == 9246343168u);
  // Already compiled; inference.
  w.compile = spec::Compile::all;
  const Advice done = advise(m, w, impossible(), test_catalog(), o);
  CHECK(step(done, "compile").reason == "the layers and the loss are already compiled");
  const Advice inf = advise(m, inference_fp32(), impossible(), test_catalog(), o);
  CHECK(step(inf, "compile").reason == "vramfit models torch.compile of the training step only");
}

TEST_CASE("the levers say why they do not apply", "[advisor][levers]") {
  const auto m = llama8b();
  // Full training at batch 8: reduce_batch leaves grad_accum 8, full checkpointing comes first.
  const Advice a = advise(m, training(8), impossible(), test_catalog(), no_tiers());
  CHECK(step(a, "optimizer_in_backward").reason ==
        "gradient accumulation (8 steps) needs the whole gradients kept between backwards");
  CHECK(step(a, "selective_checkpointing").reason ==
        "checkpointing is already on (full checkpointing keeps less than selective)");
  // Inference has no loss.
  const Advice i = advise(m, inference_fp32(), impossible(), test_catalog(), no_tiers());
  CHECK(step(i, "chunked_logits").reason == "no loss is computed outside training");
  CHECK(step(i, "activation_offload").reason == "inference keeps no activations for a backward pass");
}

TEST_CASE("partial checkpointing is taken to full checkpointing", "[advisor][levers]") {
  const auto m = llama8b();
  auto w = training(1);
  w.weights = DType::bf16;
  w.checkpointing = true;
  w.checkpoint_every = 2;
  const Advice a = advise(m, w, impossible(), test_catalog(), no_tiers());
  const StepResult& s = step(a, "gradient_checkpointing");
  REQUIRE(s.applied);
  CHECK(s.reason == "checkpoint every layer fully: keep only each layer's input and recompute the rest");
  CHECK(s.workload.checkpoint_every == 1);
  CHECK_FALSE(s.workload.checkpoint_selective);
  CHECK(s.after < s.before);
}

TEST_CASE("shorter sequences come last, halved until the job fits", "[advisor][levers]") {
  const auto m = llama8b();
  spec::Workload w;
  w.mode = spec::Mode::inference;
  w.batch = 1;
  w.seq = 65536;
  AdviseOptions o = no_tiers();
  o.allow = {"shorter_sequence"};
  // A budget between the estimates at 8192 and 16384 tokens: three halvings.
  auto at = [&](std::uint64_t seq) {
    spec::Workload x = w;
    x.seq = seq;
    return total_of(m, x);
  };
  const Budget b = budget_of(Bytes{at(8192).value() + (at(16384).value() - at(8192).value()) / 2});
  const Advice a = advise(m, w, b, test_catalog(), o);
  const StepResult& s = step(a, "shorter_sequence");
  REQUIRE(s.applied);
  CHECK(s.reason == "sequence 65536 -> 8192 tokens");
  CHECK(s.warning == "changes the job: the model sees fewer tokens at once");
  CHECK(a.fits);
  w.seq = 256;
  CHECK(step(advise(m, w, impossible(), test_catalog(), o), "shorter_sequence").reason ==
        "the sequences are already 256 tokens or fewer");
}
