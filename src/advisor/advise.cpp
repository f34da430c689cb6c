#include "vramfit/advisor/advise.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/core/fixes.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/engine/estimate.hpp"

namespace vramfit::advisor {

namespace {

// ---------------------------------------------------------------------------------------
// The fixes. Each proposes the next workload from the current one (or says why it does not
// apply); the walk re-estimates it with the engine and keeps it only when memory goes down.
// ---------------------------------------------------------------------------------------

/// What the walk knows while a fix looks at the current workload.
struct Context {
  const spec::ModelSpec& model;
  const Budget& budget;
  bool checkpointing_allowed = true;  ///< gradient_checkpointing is not ruled out by --allow/--deny
};

/// A fix's proposal for the current workload.
struct Proposal {
  bool applies = false;
  std::string reason;   ///< applies: what changes; else why the fix does not apply
  std::string title;    ///< overrides the table's title when not empty
  std::string how;      ///< the code or setting that does it
  std::string warning;  ///< its cost
  spec::Workload next;
  std::optional<engine::Breakdown> estimate;  ///< when the fix already estimated `next`
};

Proposal skip(std::string reason, std::string how = {}) {
  Proposal p;
  p.reason = std::move(reason);
  p.how = std::move(how);
  return p;
}

/// Smallest prime factor of n >= 2 (trial division: batches are small).
std::uint64_t smallest_factor(std::uint64_t n) {
  for (std::uint64_t f = 2; f <= n / f; ++f)
    if (n % f == 0) return f;
  return n;
}

// Seed step 1: "Divise batch_size par deux jusqu'à ce que l'erreur disparaisse. Pour garder le
// même batch effectif, accumule les gradients." Halving stops at the first batch that fits, or
// at 1. In training the micro-batch only takes divisors of itself (b / its smallest prime
// factor: exactly half when even), and grad_accum grows by the same factor, so
// batch x grad_accum is unchanged. Inference has no accumulation: more, smaller passes.
Proposal propose_reduce_batch(const Context& ctx, const spec::Workload& cur, const engine::Breakdown&) {
  const spec::Workload& w = cur;
  if (w.batch <= 1) return skip("the micro-batch is already 1");
  Proposal p;
  p.applies = true;
  p.next = cur;
  spec::Workload& n = p.next;
  while (true) {
    if (w.trains()) {
      const std::uint64_t f = smallest_factor(n.batch);
      n.batch /= f;
      n.grad_accum = checked_mul(n.grad_accum, f, "--grad-accum");
    } else {
      n.batch /= 2;
    }
    p.estimate = engine::estimate(ctx.model, p.next);
    if (n.batch == 1 || ctx.budget.fits(p.estimate->device_total)) break;
  }
  if (w.trains()) {
    p.title = "Smaller micro-batch with gradient accumulation";
    p.reason = fmt::format("micro-batch {} -> {}, grad_accum {} -> {} (effective batch {} unchanged)",
                           w.batch, n.batch, w.grad_accum, n.grad_accum, checked_mul(w.batch, w.grad_accum));
    p.how = fmt::format(
        "Trainer: per_device_train_batch_size={}, gradient_accumulation_steps={}; by hand: divide the loss "
        "by {} "
        "and step the optimizer every {} batches",
        n.batch, n.grad_accum, n.grad_accum, n.grad_accum);
  } else {
    const std::uint64_t passes = (w.batch + n.batch - 1) / n.batch;
    p.reason = fmt::format("batch {} -> {} ({} passes for the same {} sequences)", w.batch, n.batch, passes,
                           w.batch);
    p.how = fmt::format("feed the model {} sequence{} at a time", n.batch, n.batch == 1 ? "" : "s");
    p.warning = "lower throughput: more passes over the same inputs";
  }
  return p;
}

// Seed step 2: "bf16 si la carte le permet, sinon fp16 avec un GradScaler". Training of fp32
// weights gets torch.autocast (the weights stay fp32 master copies); inference of fp32 weights
// gets the weights cast to 16 bits, which is what mixed precision buys there.
Proposal propose_mixed_precision(const Context& ctx, const spec::Workload& cur, const engine::Breakdown&) {
  const spec::Workload& w = cur;
  if (w.weights != DType::fp32) {
    if (bits_of(w.weights) < 16)
      return skip(fmt::format("the weights are already quantized ({})", vramfit::name_of(w.weights)));
    return skip(fmt::format("the weights are already 16-bit ({})", vramfit::name_of(w.weights)));
  }
  const DType dt = ctx.budget.gpu_bf16 ? DType::bf16 : DType::fp16;
  const std::string torch_dt = ctx.budget.gpu_bf16 ? "torch.bfloat16" : "torch.float16";
  const std::string why_dt = ctx.budget.gpu_bf16 ? "the GPU supports bf16" : "the GPU has no bf16, so fp16";
  Proposal p;
  p.applies = true;
  p.next = cur;
  if (w.trains()) {
    if (w.autocast) return skip(fmt::format("autocast is already on ({})", vramfit::name_of(*w.autocast)));
    p.next.autocast = dt;
    p.reason = fmt::format("torch.autocast in {} ({}); the fp32 weights stay as master copies",
                           vramfit::name_of(dt), why_dt);
    p.how = fmt::format("with torch.autocast(device_type=\"cuda\", dtype={}): loss = ...", torch_dt);
    if (dt == DType::fp16) {
      p.how +=
          "; scaler = torch.amp.GradScaler(\"cuda\"); scaler.scale(loss).backward(); scaler.step(optimizer)";
      p.warning = "fp16 needs the GradScaler: without it small gradients underflow to zero";
    }
  } else {
    // Autocast does not shrink stored weights; casting them does, whether autocast is on or not.
    p.next.weights = dt;
    p.reason = fmt::format("cast the fp32 weights to {} for inference ({})", vramfit::name_of(dt), why_dt);
    p.how = fmt::format("from_pretrained(..., torch_dtype={}) or model.to({})", torch_dt, torch_dt);
    if (dt == DType::fp16) p.warning = "fp16 can overflow on models trained in bf16: check the outputs";
  }
  return p;
}

// Seed step 3: activations are recomputed during backward instead of kept.
Proposal propose_checkpointing(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  const spec::Workload& w = cur;
  if (!w.trains())
    return skip("inference keeps no activations for a backward pass; checkpointing only helps training");
  const bool partial = w.checkpoint_selective || w.checkpoint_every > 1;
  if (w.checkpointing && !partial) return skip("gradient checkpointing is already on");
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.checkpointing = true;
  p.next.checkpoint_selective = false;
  p.next.checkpoint_every = 1;
  p.reason = partial ? "checkpoint every layer fully: keep only each layer's input and recompute the rest"
                     : "keep only each layer's input and recompute the rest during backward";
  p.how = "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})";
  p.warning = "slower steps: each layer's forward runs twice";
  return p;
}

constexpr std::string_view kQualityWarning = "quantized weights can cost quality: check your evaluations";

// Seed step 4, first half: 8-bit weights (bitsandbytes LLM.int8()) for inference, or a LoRA
// base in 8 bits. Full fine-tuning cannot train 8-bit weights: quantize_4bit offers QLoRA.
Proposal propose_quantize_8bit(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  const spec::Workload& w = cur;
  if (w.mode == spec::Mode::train)
    return skip(
        "full fine-tuning updates every weight and cannot train 8-bit weights (QLoRA is the 4-bit step)");
  if (w.mode == spec::Mode::qlora) return skip("the QLoRA base is already 4-bit");
  if (bits_of(w.weights) <= 8)
    return skip(
        fmt::format("the weights are already {}-bit ({})", bits_of(w.weights), vramfit::name_of(w.weights)));
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.weights = DType::int8;
  p.next.quant = spec::default_quantization(DType::int8);
  p.how = "from_pretrained(..., quantization_config=BitsAndBytesConfig(load_in_8bit=True))";
  p.warning = std::string(kQualityWarning);
  if (w.mode == spec::Mode::lora) {
    p.title = "LoRA on an 8-bit base";
    p.reason = fmt::format("load the frozen base in int8 instead of {}", vramfit::name_of(w.weights));
    p.how += "; peft.prepare_model_for_kbit_training(model)";
  } else {
    p.reason = fmt::format("load the weights in int8 instead of {}", vramfit::name_of(w.weights));
  }
  return p;
}

// Seed step 4, second half: "charger les poids en 4 bits" (nf4, bitsandbytes). For inference
// the weights go nf4; for LoRA the base does (QLoRA); full fine-tuning that still does not fit
// becomes QLoRA with peft's defaults (rank 16, all linear layers) — a different job, said so.
Proposal propose_quantize_4bit(const Context& ctx, const spec::Workload& cur, const engine::Breakdown&) {
  const spec::Workload& w = cur;
  if (w.mode == spec::Mode::qlora) return skip("the QLoRA base is already 4-bit");
  if (bits_of(w.weights) <= 4)
    return skip(
        fmt::format("the weights are already {}-bit ({})", bits_of(w.weights), vramfit::name_of(w.weights)));
  Proposal p;
  p.applies = true;
  p.next = cur;
  spec::Workload& n = p.next;
  n.weights = DType::nf4;
  n.quant = spec::default_quantization(DType::nf4);
  // The 4-bit kernels compute in bf16 where the GPU has it, else fp16 (T4, V100).
  p.how = fmt::format(
      "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_compute_dtype={})",
      ctx.budget.gpu_bf16 ? "torch.bfloat16" : "torch.float16");
  p.warning = std::string(kQualityWarning);
  // QLoRA recipes call peft.prepare_model_for_kbit_training, which turns gradient
  // checkpointing on by default (use_gradient_checkpointing=True) unless it is ruled out.
  const bool ckpt = ctx.checkpointing_allowed && w.trains() && !w.checkpointing;
  if (ckpt) n.checkpointing = true;
  const std::string_view ckpt_how =
      ctx.checkpointing_allowed ? "peft.prepare_model_for_kbit_training(model)"
                                : "peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)";
  if (w.mode == spec::Mode::train) {
    n.mode = spec::Mode::qlora;
    n.lora = spec::Lora{};
    p.title = "QLoRA instead of full fine-tuning";
    p.reason = fmt::format(
        "train rank-{} LoRA adapters on all linear layers of a frozen nf4 base instead of every weight{}",
        n.lora.rank, ckpt ? ", with gradient checkpointing as QLoRA recipes do" : "");
    p.how += fmt::format("; {}; LoraConfig(r=16, target_modules=\"all-linear\")", ckpt_how);
    p.warning =
        "changes the job: only the adapters train, on a 4-bit base; can cost quality: check your evaluations";
  } else if (w.mode == spec::Mode::lora) {
    n.mode = spec::Mode::qlora;
    p.title = "QLoRA: LoRA on a 4-bit base";
    p.reason = fmt::format("load the frozen base in nf4 instead of {} (same adapters){}",
                           vramfit::name_of(w.weights), ckpt ? ", with gradient checkpointing" : "");
    p.how += fmt::format("; {}", ckpt_how);
  } else {
    p.reason = fmt::format("load the weights in nf4 instead of {}", vramfit::name_of(w.weights));
  }
  return p;
}

// Seed step 5: "Sans torch.inference_mode(), PyTorch garde ce qu'il faut pour une
// rétropropagation". The engine's inference and generate modes already assume inference_mode,
// so there is nothing left to save in the estimate; the step says so rather than invent a gain.
Proposal propose_inference_mode(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  if (cur.trains())
    return skip("training needs autograd; inference mode is for inference and generation");
  return skip(
      "already assumed: the estimate runs the forward under torch.inference_mode(); if your script does not, "
      "it needs more than this estimate",
      "model.eval(); with torch.inference_mode(): outputs = model(inputs)");
}

/// The allocator reserve counts as fragmentation worth recovering above this share of the total.
constexpr std::uint64_t kReservePercentThreshold = 10;

// Seed step 6: "Si le message indique beaucoup de mémoire « reserved but unallocated », laisse
// l'allocateur agrandir ses segments." Applies when the reserve is over 10% of device_total.
Proposal propose_expandable_segments(const Context&, const spec::Workload& cur,
                                     const engine::Breakdown& est) {
  if (cur.expandable_segments) return skip("expandable segments are already on");
  const std::uint64_t reserve = est.allocator_reserve.value();
  const std::uint64_t total = est.device_total.value();
  // reserve / total > 10% in integers: reserve > floor(total / 10) <=> 10 * reserve > total.
  if (reserve <= total / (100 / kReservePercentThreshold)) {
    // The share is only shown, so a rounded double is fine here.
    const auto pct = total == 0 ? 0.0 : static_cast<double>(reserve) * 100.0 / static_cast<double>(total);
    return skip(
        fmt::format("the allocator reserve is {:.1f}% of the total, not over {}%: little fragmentation to "
                    "recover",
                    pct, kReservePercentThreshold));
  }
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.expandable_segments = true;
  p.reason = "let the caching allocator grow its segments instead of reserving new blocks";
  p.how = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py";
  return p;
}

// --- beyond the seed: the training levers (engine/levers), each re-estimated ---------------

/// Logits at the peak below this share of it leave a fused loss little to save.
constexpr std::uint64_t kLogitsPercentThreshold = 10;

// Hugging Face's loss upcasts the whole logits to fp32 (3 fp32 logits-sized tensors at the
// start of backward); a chunked loss holds them a chunk at a time, Liger's fused linear
// cross-entropy and Cut Cross-Entropy never build them. Each is re-estimated; the lowest peak
// is proposed (on a tie the earlier row).
struct LossChoice {
  spec::Loss loss;
  const char* how;
  const char* cost;
};

constexpr std::array<LossChoice, 3> kLossChoices{{
    {spec::Loss::cce,
     "Cut Cross-Entropy: from cut_cross_entropy import linear_cross_entropy; loss = linear_cross_entropy("
     "hidden_states, lm_head.weight, labels, shift=1) (Unsloth's loss up to torch 2.7)",
     "needs the cut-cross-entropy package (Triton, Ampere or newer); same loss, about the same speed"},
    {spec::Loss::fused_linear,
     "Liger: apply_liger_kernel_to_<model>(fused_linear_cross_entropy=True), or TRL SFTConfig(use_liger_kernel="
     "True)",
     "needs the liger-kernel package; same loss, about the same speed"},
    {spec::Loss::chunked, "torchtune: loss CEWithChunkedOutputLoss (lm_head output in 8 chunks)",
     "no extra package; same loss, about the same speed"},
}};

Proposal propose_fused_loss(const Context& ctx, const spec::Workload& cur, const engine::Breakdown& est) {
  if (!cur.trains()) return skip("no loss is computed outside training");
  if (cur.loss != spec::Loss::hf)
    return skip(fmt::format("the loss is already {}", spec::name_of(cur.loss)));
  const auto* logits = est.find(engine::ComponentId::logits);
  const std::uint64_t share = logits && est.peak_allocated.value() > 0
                                  ? logits->bytes.value() / std::max<std::uint64_t>(est.peak_allocated.value() / 100, 1)
                                  : 0;
  if (share < kLogitsPercentThreshold)
    return skip(fmt::format("the logits are {}% of the peak, under {}%: little for a fused loss to save", share,
                            kLogitsPercentThreshold));
  Proposal p;
  for (const auto& c : kLossChoices) {
    spec::Workload next = cur;
    next.loss = c.loss;
    engine::Breakdown b = engine::estimate(ctx.model, next);
    if (p.estimate && b.peak_allocated >= p.estimate->peak_allocated) continue;
    p.next = next;
    p.estimate = std::move(b);
    p.how = c.how;
    p.warning = c.cost;
  }
  p.applies = true;
  p.reason = fmt::format("the logits are {}% of the peak: {} saves the most of the fused and chunked losses, never "
                         "the full fp32 logits",
                         share, spec::name_of(p.next.loss));
  return p;
}

// torchtitan's op-level policy: each layer keeps every other matmul output and attention's;
// less than no checkpointing, more than full checkpointing, so it is tried when that is off.
Proposal propose_selective_checkpointing(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  if (!cur.trains()) return skip("inference keeps no activations for a backward pass");
  if (cur.checkpointing) return skip("checkpointing is already on (full checkpointing keeps less than selective)");
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.checkpointing = true;
  p.next.checkpoint_selective = true;
  p.reason = "keep each layer's input, every other matmul output and attention's output; recompute the rest";
  p.how = "torch.utils.checkpoint with context_fn=create_selective_checkpoint_contexts(policy) (torchtitan "
          "activation_checkpoint mode=\"selective\", selective_ac_option=\"op\")";
  p.warning = "slightly slower steps: the cheap ops (norms, activations, rotary) run twice";
  return p;
}

// torch.autograd.graph.save_on_cpu: saved activations live in pinned host memory.
Proposal propose_activation_offload(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  if (!cur.trains()) return skip("inference keeps no activations for a backward pass");
  if (cur.activation_offload) return skip("activations are already offloaded");
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.activation_offload = true;
  p.reason = "copy every saved activation to host memory as it is saved, and back in backward";
  p.how = "with torch.autograd.graph.save_on_cpu(pin_memory=True): loss = model(...).loss (torchtune: "
          "enable_activation_offloading=True)";
  p.warning = "slower steps when the copies do not overlap compute; needs host memory for the activations";
  return p;
}

// One optimizer per parameter stepped in a post-accumulate-grad hook: no full gradient set.
Proposal propose_optimizer_in_backward(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  if (!cur.trains()) return skip("no optimizer outside training");
  if (cur.optimizer_in_backward) return skip("the optimizer already steps in backward");
  if (cur.grad_accum > 1)
    return skip(fmt::format("gradient accumulation ({} steps) needs the whole gradients kept between backwards",
                            cur.grad_accum));
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.optimizer_in_backward = true;
  p.reason = "step each parameter as soon as its gradient is ready and free that gradient";
  p.how = "p.register_post_accumulate_grad_hook(lambda p: (opt[p].step(), opt[p].zero_grad())) with one optimizer "
          "per parameter (torchtune: optimizer_in_bwd=True)";
  p.warning = "no gradient accumulation or gradient clipping over the whole model";
  return p;
}

// torch.compile of each decoder layer and of the loss (engine/levers, measured on the H200 in
// tests/accuracy/levers/results/compile.jsonl): Inductor's cross-entropy saves the 16-bit
// logits and a logsumexp instead of the fp32 log-softmax, its gated MLP recomputes the
// activation and the product in backward. Tried after the other levers: it changes no result
// but costs compile time, and a graph break saves less than the estimate.
Proposal propose_compile(const Context&, const spec::Workload& cur, const engine::Breakdown&) {
  if (!cur.trains()) return skip("vramfit models torch.compile of the training step only");
  if (cur.compile == spec::Compile::all) return skip("the layers and the loss are already compiled");
  Proposal p;
  p.applies = true;
  p.next = cur;
  p.next.compile = spec::Compile::all;
  p.reason = cur.compile == spec::Compile::layers
                 ? "compile the loss too: the compiled cross-entropy keeps the 16-bit logits and a logsumexp, not "
                   "the fp32 log-softmax"
                 : "compile each decoder layer and the loss: fused kernels save fewer intermediates (the 16-bit "
                   "logits and a logsumexp, not the fp32 log-softmax; a gated MLP's activation recomputed)";
  p.how = "for layer in model.model.layers: layer.compile(); loss_fn = torch.compile(loss_fn) (torchtune: "
          "compile=True)";
  p.warning = "the first steps compile (minutes for large models); graph breaks leave parts eager and save less";
  return p;
}

/// Sequences are not cut below this many tokens.
constexpr std::uint64_t kShortestSequence = 256;

// The last resort before another GPU, when the sequence decides the memory: halve the tokens
// per sequence (the prompt, for generation) until the job fits or reaches 256 tokens.
Proposal propose_shorter_sequence(const Context& ctx, const spec::Workload& cur, const engine::Breakdown&) {
  if (cur.seq <= kShortestSequence)
    return skip(fmt::format("the sequences are already {} tokens or fewer", kShortestSequence));
  Proposal p;
  p.applies = true;
  p.next = cur;
  while (p.next.seq / 2 >= kShortestSequence) {
    p.next.seq /= 2;
    p.estimate = engine::estimate(ctx.model, p.next);
    if (ctx.budget.fits(p.estimate->device_total)) break;
  }
  p.reason = fmt::format("{} {} -> {} tokens", cur.mode == spec::Mode::generate ? "prompt" : "sequence", cur.seq,
                         p.next.seq);
  p.how = cur.trains() ? fmt::format("max_length={} (truncate, or split long documents)", p.next.seq)
                       : fmt::format("at most {} tokens per input (truncate or split)", p.next.seq);
  p.warning = "changes the job: the model sees fewer tokens at once";
  return p;
}

using ProposeFn = Proposal (*)(const Context&, const spec::Workload&, const engine::Breakdown&);

/// A step of the walk: a fix of the one table (core/fixes.hpp) and how it proposes itself.
struct Step {
  Fix fix;
  ProposeFn propose;
};

// The walk's steps: the table's rows with a walk title, in the table's (the seed document's)
// order; the static_assert below keeps the two lists the same.
constexpr std::array<Step, 13> kSteps{{
    {Fix::reduce_batch, propose_reduce_batch},
    {Fix::mixed_precision, propose_mixed_precision},
    {Fix::gradient_checkpointing, propose_checkpointing},
    {Fix::quantize_8bit, propose_quantize_8bit},
    {Fix::quantize_4bit, propose_quantize_4bit},
    {Fix::inference_mode, propose_inference_mode},
    {Fix::expandable_segments, propose_expandable_segments},
    {Fix::chunked_logits, propose_fused_loss},
    {Fix::selective_checkpointing, propose_selective_checkpointing},
    {Fix::activation_offload, propose_activation_offload},
    {Fix::optimizer_in_backward, propose_optimizer_in_backward},
    {Fix::compile, propose_compile},
    {Fix::shorter_sequence, propose_shorter_sequence},
}};

constexpr bool steps_match_table() {
  std::size_t i = 0;
  for (const FixRow& r : kFixTable) {
    if (r.walk_title.empty()) continue;
    if (i >= kSteps.size() || kSteps[i].fix != r.fix) return false;
    ++i;
  }
  return i == kSteps.size();
}
static_assert(steps_match_table(), "kSteps: one step per fix table row with a walk title, in the table's order");

constexpr std::array<FixInfo, kSteps.size()> kFixInfos = [] {
  std::array<FixInfo, kSteps.size()> a{};
  for (std::size_t i = 0; i < kSteps.size(); ++i)
    a[i] = FixInfo{fix_row(kSteps[i].fix).id, fix_row(kSteps[i].fix).walk_title};
  return a;
}();

// ---------------------------------------------------------------------------------------
// --allow / --deny
// ---------------------------------------------------------------------------------------

/// Why a fix may not run, or empty when it may.
using Rules = std::array<std::string, kSteps.size()>;

/// The fix indexes named by the entries (comma-separated ids or aliases); unknown names go to `diags`.
std::vector<bool> named(const std::vector<std::string>& entries, std::string_view field, Diagnostics& diags) {
  std::vector<bool> on(kSteps.size(), false);
  std::vector<std::string> known;
  for (const auto& f : kFixInfos) known.emplace_back(f.id);
  for (const FixRow& r : kFixTable)
    if (r.stands_for[0]) known.emplace_back(r.id);
  for (const auto& entry : entries) {
    std::string_view rest = entry;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view name = trim(rest.substr(0, comma));
      if (!name.empty()) {
        std::string lowered = lower(name);
        std::replace(lowered.begin(), lowered.end(), '-', '_');
        bool found = false;
        for (std::size_t i = 0; i < kSteps.size(); ++i)
          if (kFixInfos[i].id == lowered) on[i] = found = true;
        // Names that stand for several steps ("quantize": a team that refuses quantization
        // denies both steps at once).
        for (const FixRow& r : kFixTable) {
          if (!r.stands_for[0] || r.id != lowered) continue;
          found = true;
          for (std::size_t i = 0; i < kSteps.size(); ++i)
            if (std::find(r.stands_for.begin(), r.stands_for.end(), kSteps[i].fix) != r.stands_for.end()) on[i] = true;
        }
        if (!found) {
          diags.add(std::string(field), fmt::format("unknown fix '{}'", name),
                    did_you_mean_fix(lowered, known, "", "known fixes: " + joined(known)));
        }
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return on;
}

Rules resolve_rules(const AdviseOptions& options) {
  Diagnostics diags;
  const std::vector<bool> allowed = named(options.allow, "--allow", diags);
  const std::vector<bool> denied = named(options.deny, "--deny", diags);
  for (std::size_t i = 0; i < kSteps.size(); ++i)
    if (allowed[i] && denied[i])
      diags.add("--deny", fmt::format("fix '{}' is both allowed and denied", kFixInfos[i].id),
                "name it in --allow or --deny, not both");
  diags.throw_if_any();
  const bool allow_list = std::find(allowed.begin(), allowed.end(), true) != allowed.end();
  Rules rules;
  for (std::size_t i = 0; i < kSteps.size(); ++i) {
    if (denied[i])
      rules[i] = "ruled out by --deny";
    else if (allow_list && !allowed[i])
      rules[i] = "not in --allow";
  }
  return rules;
}

// ---------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------

/// The problems spec::validate finds in a workload, as strings.
std::vector<std::string> problems(const spec::Workload& w, const spec::ModelSpec& m) {
  Diagnostics d;
  spec::validate(w, m, d);
  std::vector<std::string> out;
  for (const auto& x : d.items()) out.push_back(x.str());
  return out;
}

/// The first problem of `w` that `baseline` (the workload the user gave) did not have.
std::optional<std::string> new_problem(const std::vector<std::string>& baseline, const spec::Workload& w,
                                       const spec::ModelSpec& m) {
  for (auto& p : problems(w, m))
    if (std::find(baseline.begin(), baseline.end(), p) == baseline.end()) return p;
  return std::nullopt;
}

struct WalkResult {
  std::optional<LargerBatch> larger_batch;
  engine::Breakdown initial;
  bool fits_initially = false;
  bool fits = false;
  std::vector<StepResult> steps;
  spec::Workload final_workload;
  engine::Breakdown final_estimate;
};

/// The divisors of n in (lo, hi], ascending (trial division up to sqrt(n): batches are small).
std::vector<std::uint64_t> divisors_between(std::uint64_t n, std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    for (const std::uint64_t x : {d, n / d})
      if (x > lo && x <= hi) out.push_back(x);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<LargerBatch> find_larger_batch(const spec::ModelSpec& model, const Budget& budget,
                                             const spec::Workload& given, const WalkResult& r);

WalkResult walk(const spec::ModelSpec& model, const spec::Workload& workload, const Budget& budget,
                const Rules& rules) {
  WalkResult r;
  spec::Workload cur = workload;
  engine::Breakdown est = engine::estimate(model, cur);
  r.initial = est;
  r.fits_initially = r.fits = budget.fits(est.device_total);
  if (!r.fits) {
    const auto ckpt_rule = std::find_if(kSteps.begin(), kSteps.end(),
                                        [](const Step& f) { return f.fix == Fix::gradient_checkpointing; });
    const Context ctx{model, budget, rules[static_cast<std::size_t>(ckpt_rule - kSteps.begin())].empty()};
    const std::vector<std::string> baseline = problems(workload, model);
    for (std::size_t i = 0; i < kSteps.size(); ++i) {
      const Step& fix = kSteps[i];
      StepResult s;
      s.id = kFixInfos[i].id;
      s.title = kFixInfos[i].title;
      s.before = s.after = est.device_total;
      if (!rules[i].empty()) {
        s.ruled_out = true;
        s.reason = rules[i];
      } else {
        Proposal p = fix.propose(ctx, cur, est);
        if (!p.title.empty()) s.title = p.title;
        if (!p.applies) {
          s.reason = std::move(p.reason);
          s.how = std::move(p.how);
        } else if (const auto problem = new_problem(baseline, p.next, model)) {
          s.reason = fmt::format("{}: not a valid workload ({})", p.reason, *problem);
        } else {
          engine::Breakdown next = p.estimate ? std::move(*p.estimate) : engine::estimate(model, p.next);
          if (next.device_total >= est.device_total) {
            // A fix is kept only when the engine says it lowers memory: no step increases it.
            s.reason = fmt::format("{}: does not lower the estimate", p.reason);
          } else {
            cur = std::move(p.next);
            est = std::move(next);
            s.applied = true;
            s.reason = std::move(p.reason);
            s.how = std::move(p.how);
            s.warning = std::move(p.warning);
            s.after = est.device_total;
            s.fits = budget.fits(s.after);
          }
        }
      }
      s.workload = cur;
      r.steps.push_back(std::move(s));
      if (r.steps.back().fits) {
        r.fits = true;
        break;
      }
    }
  }
  r.final_workload = std::move(cur);
  r.final_estimate = std::move(est);
  if (r.fits) r.larger_batch = find_larger_batch(model, budget, workload, r);
  return r;
}

// After the walk fits: if reduce_batch cut the batch and a later fix freed memory, the largest
// micro-batch above the walk's, up to the user's own, that still fits, searched like
// `fit --solve`. The user's own batch coming back means reduce_batch was not needed after all.
std::optional<LargerBatch> find_larger_batch(const spec::ModelSpec& model, const Budget& budget,
                                             const spec::Workload& given, const WalkResult& r) {
  if (r.steps.size() < 2 || r.steps.front().id != "reduce_batch" || !r.steps.front().applied)
    return std::nullopt;
  const std::uint64_t low = r.final_workload.batch;
  const std::uint64_t high = given.batch;
  const std::uint64_t effective = checked_mul(given.batch, given.grad_accum);
  // Training keeps batch x grad_accum: only divisors of the effective batch. Inference: any.
  std::vector<std::uint64_t> candidates;
  if (given.trains()) candidates = divisors_between(effective, low, high);
  const std::uint64_t count = given.trains() ? candidates.size() : (high > low ? high - low : 0);
  const auto value_at = [&](std::uint64_t i) { return given.trains() ? candidates[i] : low + 1 + i; };
  const auto try_at = [&](std::uint64_t i, engine::Breakdown& out) {
    spec::Workload w = r.final_workload;
    w.batch = value_at(i);
    if (given.trains()) w.grad_accum = effective / w.batch;
    out = engine::estimate(model, w);
    return budget.fits(out.device_total);
  };
  // Binary search for the last index that fits, assuming memory grows with the batch.
  std::optional<LargerBatch> best;
  std::uint64_t lo = 0, hi = count;  // answer in [lo, hi): indexes below lo fit
  engine::Breakdown e;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (try_at(mid, e)) {
      const std::uint64_t b = value_at(mid);
      best = LargerBatch{b, given.trains() ? effective / b : r.final_workload.grad_accum,
                         e.device_total};
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------
// Tiers
// ---------------------------------------------------------------------------------------

/// GPU counts tried for every catalog GPU ("up to 8 GPUs" in one server).
constexpr std::array<std::uint64_t, 4> kTierCounts{1, 2, 4, 8};

Budget tier_budget(const catalog::Gpu& gpu, const Budget& user) {
  // A percentage margin applies to each card's memory; a fixed size as is.
  return budget_for_gpu(gpu, user.headroom);
}

TierChoice choice(const catalog::Tier& tier, const catalog::Gpu& gpu, const spec::Workload& w,
                  const engine::Breakdown& est, std::vector<std::string> fixes_applied) {
  TierChoice c;
  c.tier = tier;
  c.gpu_memory = gpu.memory;
  c.total_memory = gpu.memory * tier.count;
  c.per_gpu_total = est.device_total;
  c.workload = w;
  c.fixes = std::move(fixes_applied);
  return c;
}

}  // namespace

std::span<const FixInfo> fixes() noexcept { return kFixInfos; }

ExitCode exit_code(const Advice& advice) noexcept {
  return advice.fits_initially ? ExitCode::ok : ExitCode::does_not_fit;
}

spec::Workload on_gpus(const spec::Workload& workload, std::uint64_t count) {
  spec::Workload w = workload;
  w.gpus = count;
  if (count <= 1) {
    w.gpus = 1;
    w.sharding = spec::Sharding::none;
    return w;
  }
  switch (workload.sharding) {
    // These split the model itself across the cards: keep the user's choice.
    case spec::Sharding::zero3:
    case spec::Sharding::fsdp:
    case spec::Sharding::tp:
    case spec::Sharding::device_map: return w;
    // none/ddp/zero1/zero2 keep a full copy of the weights on every card.
    default: w.sharding = workload.trains() ? spec::Sharding::fsdp : spec::Sharding::device_map; return w;
  }
}

std::vector<catalog::Tier> candidate_tiers(const catalog::Catalog& catalog,
                                           const std::optional<std::string>& provider) {
  std::vector<catalog::Tier> out;
  if (provider && *provider != catalog::kAllProviders) {
    std::vector<std::string> known;
    for (const auto& t : catalog.tiers()) {
      if (t.provider == *provider) out.push_back(t);
      if (std::find(known.begin(), known.end(), t.provider) == known.end()) known.push_back(t.provider);
    }
    if (out.empty()) {
      throw InputError("--provider", fmt::format("unknown provider '{}'", *provider),
                       did_you_mean_fix(*provider, known, "",
                                        known.empty() ? "the catalog lists no provider"
                                                      : fmt::format("known providers: {}; '{}' searches every tier and GPU",
                                                                    joined(known), catalog::kAllProviders)));
    }
  } else {
    out = catalog.tiers();
    for (const auto& gpu : catalog.gpus()) {
      for (const std::uint64_t count : kTierCounts) {
        const bool offered =
            std::any_of(catalog.tiers().begin(), catalog.tiers().end(),
                        [&](const catalog::Tier& t) { return t.gpu == gpu.id && t.count == count; });
        if (offered) continue;
        catalog::Tier t;
        t.id = fmt::format("{}-x{}", gpu.id, count);
        t.gpu = gpu.id;
        t.count = count;
        t.source = gpu.source;
        out.push_back(std::move(t));
      }
    }
  }
  const auto key = [&](const catalog::Tier& t) {
    return std::make_tuple(catalog.gpu(t.gpu).memory * t.count, t.count, t.id, t.provider);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const catalog::Tier& a, const catalog::Tier& b) { return key(a) < key(b); });
  return out;
}

Advice advise(const spec::ModelSpec& model, const spec::Workload& workload, const Budget& budget,
              const catalog::Catalog& catalog, const AdviseOptions& options) {
  check_budget(budget);
  const Rules rules = resolve_rules(options);
  // Validate --provider before the walk so bad input fails fast.
  // Without --provider, the catalog's default provider (the seed guide's GPU Cloud: its cards
  // are what the guide offers when the fixes are not enough); `--provider all` searches everything.
  std::optional<std::string> provider = options.provider;
  if (!provider && !catalog.default_provider().empty()) provider = catalog.default_provider();
  std::vector<catalog::Tier> tiers;
  if (options.tiers) tiers = candidate_tiers(catalog, provider);

  WalkResult r = walk(model, workload, budget, rules);
  Advice a;
  a.budget = budget;
  a.fits_initially = r.fits_initially;
  a.fits = r.fits;
  a.initial_estimate = std::move(r.initial);
  a.steps = std::move(r.steps);
  a.final_workload = std::move(r.final_workload);
  a.final_estimate = std::move(r.final_estimate);
  a.larger_batch = r.larger_batch;
  if (provider != catalog::kAllProviders) a.provider = provider;
  if (!options.tiers) return a;

  a.tiers_considered = tiers.size();
  const std::vector<std::string> baseline = problems(workload, model);
  // The smallest tier that runs the workload as given.
  std::size_t unchanged_at = tiers.size();
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    const catalog::Gpu& gpu = catalog.gpu(tiers[i].gpu);
    const spec::Workload w = on_gpus(workload, tiers[i].count);
    if (new_problem(baseline, w, model)) continue;
    const engine::Breakdown est = engine::estimate(model, w);
    if (!tier_budget(gpu, budget).fits(est.device_total)) continue;
    a.tier_unchanged = choice(tiers[i], gpu, w, est, {});
    unchanged_at = i;
    break;
  }
  // The smallest tier where the walk (same rules, that card's bf16 and memory) fits. It is never
  // larger than tier_unchanged: there the walk fits with no fix.
  for (std::size_t i = 0; i < tiers.size() && i <= unchanged_at; ++i) {
    const catalog::Gpu& gpu = catalog.gpu(tiers[i].gpu);
    const spec::Workload w = on_gpus(workload, tiers[i].count);
    if (new_problem(baseline, w, model)) continue;
    WalkResult t = walk(model, w, tier_budget(gpu, budget), rules);
    if (!t.fits) continue;
    std::vector<std::string> applied;
    for (const auto& s : t.steps)
      if (s.applied) applied.push_back(s.id);
    a.tier_with_fixes = choice(tiers[i], gpu, t.final_workload, t.final_estimate, std::move(applied));
    break;
  }
  return a;
}

}  // namespace vramfit::advisor
