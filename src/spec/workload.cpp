// Workload spellings and the checks that a workload makes sense for a model.

#include "vramfit/spec/workload.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"

namespace vramfit::spec {

namespace {

// Flag spellings, first the canonical one (stable: JSON and golden files use it).
constexpr std::array<std::pair<std::string_view, Mode>, 6> kModes{{
    {"inference", Mode::inference},
    {"generate", Mode::generate},
    {"train", Mode::train},
    {"lora", Mode::lora},
    {"qlora", Mode::qlora},
    {"forward", Mode::inference},  // the truth harness's name for it (../shared/truth/README.md)
}};

constexpr std::array<std::pair<std::string_view, Optimizer>, 11> kOptimizers{{
    {"adamw", Optimizer::adamw},                  // torch.optim.AdamW, foreach (the default)
    {"adamw-fused", Optimizer::adamw_fused},      // AdamW(fused=True)
    {"adamw-forloop", Optimizer::adamw_forloop},  // AdamW(foreach=False)
    {"adam", Optimizer::adam},                    // torch.optim.Adam
    {"sgd", Optimizer::sgd},                      // SGD without momentum: no state
    {"sgd-momentum", Optimizer::sgd_momentum},    // SGD(momentum=0.9): one buffer
    {"adafactor", Optimizer::adafactor},          // torch.optim.Adafactor: factored moments
    {"adamw-8bit", Optimizer::adamw_8bit},        // bitsandbytes AdamW8bit
    {"lion", Optimizer::lion},                    // Lion: one moment
    {"paged-adamw", Optimizer::paged_adamw},      // bitsandbytes PagedAdamW (32-bit states)
    {"paged-adamw-8bit", Optimizer::paged_adamw_8bit},  // bitsandbytes PagedAdamW8bit
}};

static_assert(kOptimizers.size() == kOptimizerCount, "kOptimizers: one name per Optimizer");
static_assert([] {
  for (std::size_t i = 0; i < kOptimizers.size(); ++i)
    if (static_cast<std::size_t>(kOptimizers[i].second) != i) return false;
  return true;
}(), "kOptimizers: rows in the enum's order");

constexpr std::array<std::pair<std::string_view, Attention>, 2> kAttention{{
    {"sdpa", Attention::sdpa},
    {"eager", Attention::eager},
}};

constexpr std::array<std::pair<std::string_view, Sharding>, 10> kSharding{{
    {"none", Sharding::none},
    {"ddp", Sharding::ddp},
    {"zero1", Sharding::zero1},
    {"zero2", Sharding::zero2},
    {"zero3", Sharding::zero3},
    {"fsdp", Sharding::fsdp},
    {"fsdp-grad-op", Sharding::fsdp_grad_op},
    {"tp", Sharding::tp},
    {"pp", Sharding::pp},
    {"device-map", Sharding::device_map},
}};

constexpr std::array<std::pair<std::string_view, Offload>, 3> kOffload{{
    {"none", Offload::none},
    {"optimizer", Offload::optimizer},
    {"params", Offload::params},
}};

constexpr std::array<std::pair<std::string_view, Loss>, 6> kLoss{{
    {"hf", Loss::hf},                      // transformers ForCausalLMLoss (loss_utils.py)
    {"chunked", Loss::chunked},            // torchtune CEWithChunkedOutputLoss
    {"fused-linear", Loss::fused_linear},  // Liger LigerFusedLinearCrossEntropyLoss
    {"liger", Loss::fused_linear},
    {"cce", Loss::cce},                    // Apple ml-cross-entropy linear_cross_entropy (impl "cce")
    {"unsloth", Loss::unsloth},            // unsloth_zoo fused_losses UnslothFusedLoss
}};

constexpr std::array<std::pair<std::string_view, Recipe>, 5> kRecipes{{
    {"hf-trainer", Recipe::hf_trainer},
    {"trl-sft", Recipe::trl_sft},
    {"torchtune", Recipe::torchtune},
    {"axolotl-liger", Recipe::axolotl_liger},
    {"unsloth", Recipe::unsloth},
}};

/// Lower case, '_' as '-': `adamw_fused`, `ADAMW-FUSED` and `adamw-fused` are one name.
std::string normalize(std::string_view s) {
  std::string out = lower(s);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

template <typename E, std::size_t N>
std::string_view name_in(const std::array<std::pair<std::string_view, E>, N>& table, E e) noexcept {
  for (const auto& [name, v] : table)
    if (v == e) return name;
  return table[0].first;
}

// The first spelling of each value: aliases ("forward") come after their canonical name.
template <typename E, std::size_t N>
std::vector<std::string_view> names_in(const std::array<std::pair<std::string_view, E>, N>& table) {
  std::vector<std::string_view> out;
  std::vector<E> seen;
  for (const auto& [name, v] : table)
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) {
      seen.push_back(v);
      out.push_back(name);
    }
  return out;
}

template <typename E, std::size_t N>
std::optional<E> parse_in(const std::array<std::pair<std::string_view, E>, N>& table, std::string_view s) {
  const std::string n = normalize(s);
  for (const auto& [name, v] : table)
    if (name == n) return v;
  return std::nullopt;
}

std::string_view last_component(std::string_view s) {
  const auto p = s.rfind('.');
  return p == std::string_view::npos ? s : s.substr(p + 1);
}

/// The model's linear module names, each once, in order of appearance.
std::vector<std::string> linear_names(const ModelSpec& m) {
  std::vector<std::string> names;
  for (const LayerGroup& g : m.layers)
    for (const Linear& l : g.linears)
      if (std::find(names.begin(), names.end(), l.name) == names.end()) names.push_back(l.name);
  return names;
}

bool target_exists(std::string_view target, const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return lora_target_matches(target, n); });
}

}  // namespace

bool lora_target_matches(std::string_view target, std::string_view n) noexcept {
  if (n == target || last_component(n) == target || last_component(target) == last_component(n)) return true;
  return n.size() > target.size() && n.compare(n.size() - target.size(), target.size(), target) == 0 &&
         n[n.size() - target.size() - 1] == '.';
}

namespace {

constexpr std::uint64_t kMaxSeq = 1ULL << 31;
constexpr std::uint64_t kMaxGpus = 4096;
constexpr std::uint64_t kMaxImages = 4096;      // --images per sequence
constexpr std::uint64_t kMaxImageSide = 65536;  // --image-size, pixels a side

}  // namespace

std::string_view name_of(Mode m) noexcept { return name_in(kModes, m); }
std::string_view name_of(Optimizer o) noexcept { return name_in(kOptimizers, o); }
std::string_view name_of(Attention a) noexcept { return name_in(kAttention, a); }
std::string_view name_of(Sharding s) noexcept { return name_in(kSharding, s); }
std::string_view name_of(Offload o) noexcept { return name_in(kOffload, o); }
std::string_view name_of(Loss l) noexcept { return name_in(kLoss, l); }
std::string_view name_of(Recipe r) noexcept { return name_in(kRecipes, r); }
std::optional<Recipe> parse_recipe(std::string_view s) noexcept { return parse_in(kRecipes, s); }
std::vector<std::string_view> recipe_names() { return names_in(kRecipes); }

void apply_recipe(Workload& w, Recipe r, bool (*given)(const void* ctx, std::string_view flag), const void* ctx) {
  if (!w.trains()) return;
  const auto set_ckpt = [&] {
    if (!given(ctx, "--checkpointing")) w.checkpointing = true;
  };
  const auto set_loss = [&](Loss l) {
    if (!given(ctx, "--loss")) w.loss = l;
  };
  const auto set_opt = [&](Optimizer o) {
    if (!given(ctx, "--optimizer")) w.optimizer = o;
  };
  const bool full = w.mode == Mode::train;
  switch (r) {
    case Recipe::hf_trainer:
      // transformers TrainingArguments: gradient_checkpointing=False, the model's own loss
      // (ForCausalLMLoss): the plain loop, nothing to set.
      break;
    case Recipe::trl_sft:
      // TRL SFTConfig (trl/trainer/sft_config.py, 2026): gradient_checkpointing=True,
      // loss_type "chunked_nll" (lm_head and cross-entropy in chunks of tokens), bf16=True
      // (autocast over fp32 weights).
      set_ckpt();
      set_loss(Loss::chunked);
      if (w.weights == DType::fp32 && !given(ctx, "--autocast")) w.autocast = DType::bf16;
      break;
    case Recipe::torchtune:
      // torchtune recipes/configs/llama3_1: 8B_full_single_device.yaml (PagedAdamW8bit,
      // CEWithChunkedOutputLoss, optimizer_in_bwd: True, enable_activation_checkpointing: True);
      // 8B_lora_single_device.yaml (AdamW fused, LinearCrossEntropyLoss: lm_head and the loss
      // per chunk, enable_activation_checkpointing: True, offloading off).
      set_ckpt();
      if (full) {
        set_loss(Loss::chunked);
        set_opt(Optimizer::paged_adamw_8bit);
        if (!given(ctx, "--optimizer-in-backward") && w.grad_accum == 1) w.optimizer_in_backward = true;
      } else {
        set_loss(Loss::fused_linear);
        set_opt(Optimizer::adamw_fused);
      }
      break;
    case Recipe::axolotl_liger:
      // Axolotl with its LigerPlugin (liger_fused_linear_cross_entropy: true) and
      // gradient_checkpointing: true, as its example configs set them.
      set_ckpt();
      set_loss(Loss::fused_linear);
      break;
    case Recipe::unsloth:
      // Unsloth (unsloth 2024.12, unsloth/models/llama.py; unsloth_zoo gradient_checkpointing.py
      // today): use_gradient_checkpointing="unsloth" (reentrant checkpointing of each decoder
      // layer whose input is copied to host memory and back for its recompute), its own chunked
      // fused cross-entropy (unsloth 2026.8.19 models/llama.py calls unsloth_zoo 2026.8.13's
      // unsloth_fused_ce_loss; Apple's Cut Cross-Entropy, which unsloth 2024.12 called, is off on
      // torch >= 2.8: unsloth_zoo/__init__.py sets UNSLOTH_ENABLE_CCE=0), and in the LoRA modes
      // its fused LoRA autograd functions (patch_peft_model: LoRA_QKV, LoRA_W, LoRA_MLP) with
      // fp32 adapters (prepare_model_for_training's float32_mixed_precision).
      set_ckpt();
      if (!given(ctx, "--activation-offload")) w.activation_offload = true;
      set_loss(Loss::unsloth);
      if (spec::uses_lora(w.mode) && !given(ctx, "--lora-kernels")) w.lora.unsloth_kernels = true;
      break;
  }
}

std::optional<Mode> parse_mode(std::string_view s) noexcept { return parse_in(kModes, s); }
std::optional<Optimizer> parse_optimizer(std::string_view s) noexcept { return parse_in(kOptimizers, s); }
std::optional<Attention> parse_attention(std::string_view s) noexcept { return parse_in(kAttention, s); }
std::optional<Sharding> parse_sharding(std::string_view s) noexcept { return parse_in(kSharding, s); }
std::optional<Offload> parse_offload(std::string_view s) noexcept { return parse_in(kOffload, s); }
std::optional<Loss> parse_loss(std::string_view s) noexcept { return parse_in(kLoss, s); }

Quantization scheme_of(const Workload& w) {
  return w.quant.method != QuantMethod::none ? w.quant : default_quantization(w.weights);
}

void set_packing(Workload& w, const Quantization& q) {
  w.quant = q;
  if (q.method != QuantMethod::none) w.weights = packed_dtype(q);
}

std::optional<std::string> resolve_packing(Workload& w, const ModelSpec& m, const PackingRequest& request) {
  std::optional<Quantization> q = request.quant;
  std::optional<std::string> note;
  if (!q && !request.dtype_given && m.quantization) {
    q = *m.quantization;
    note = fmt::format("the weights are packed as the checkpoint says ({}); --dtype bf16 estimates them unpacked",
                       name_of(*q));
  }
  if (!q && !request.dtype_given && w.mode == Mode::qlora) q = default_quantization(DType::nf4);
  // transformers 5 loads a checkpoint in the dtype its config declares (from_pretrained's
  // dtype="auto" default, huggingface/transformers#42805): gemma-2's float32, pythia's float16.
  if (!q && !request.dtype_given && m.stored_dtype && *m.stored_dtype != w.weights) {
    w.weights = *m.stored_dtype;
    note = fmt::format("weights in {0}, the dtype config.json declares: transformers 5 loads a checkpoint in its own "
                       "dtype unless from_pretrained() is given one; --dtype bf16 estimates them in bf16",
                       name_of(w.weights));
  }
  if (!q && !is_float_compute(w.weights)) q = default_quantization(w.weights);
  if (q) {
    if (request.double_quant && q->method == QuantMethod::bnb_4bit) q->double_quant = true;
    q->skip_modules.insert(q->skip_modules.end(), request.skip_modules.begin(), request.skip_modules.end());
    set_packing(w, *q);
  }
  return note;
}

bool keeps_checkpoint_packing(const ModelSpec& m, const Workload& w) {
  return m.packed_weight_bytes && m.quantization && same_storage(*m.quantization, scheme_of(w));
}

std::vector<std::string_view> mode_names() { return names_in(kModes); }
std::vector<std::string_view> optimizer_names() { return names_in(kOptimizers); }
std::vector<std::string_view> attention_names() { return names_in(kAttention); }
std::vector<std::string_view> sharding_names() { return names_in(kSharding); }
std::vector<std::string_view> offload_names() { return names_in(kOffload); }
std::vector<std::string_view> loss_names() { return names_in(kLoss); }

namespace {
bool zero_like(Sharding s) {
  return s == Sharding::zero1 || s == Sharding::zero2 || s == Sharding::zero3 || s == Sharding::fsdp ||
         s == Sharding::fsdp_grad_op;
}
}  // namespace

/// `--images` and `--image-size` against the model: a vision tower to take them, a size only
/// where the processor keeps it, and sequences that stay within kMaxSeq with the image tokens.
static void validate_images(const Workload& w, const ModelSpec& m, Diagnostics& out) {
  const bool sized = w.image_width != 0 || w.image_height != 0;
  if (w.images == 0) {
    if (sized) out.add("--image-size", "no images to size", "add --images N (images per sequence), or drop --image-size");
    return;
  }
  if (w.images > kMaxImages) {
    out.add("--images", fmt::format("{} images per sequence is more than vramfit models (at most {})", w.images, kMaxImages),
            "give the images of one sequence (one prompt), e.g. --images 4");
    return;
  }
  if (!m.vision) {
    out.add("--images",
            fmt::format("{} has no vision tower (its config has no vision_config), so it takes no images",
                        m.name.empty() ? std::string("the model") : m.name),
            "drop --images, or give a vision-language model (llava, llava_next, qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_5, "
            "qwen3_5_moe, gemma3, paligemma, idefics3, internvl, mistral3, llama4)");
    return;
  }
  const VisionSpec& v = *m.vision;
  if (v.tokens == ImageTokens::cross) {
    out.add("--images",
            fmt::format("{} reads images through cross-attention layers, whose image states vramfit does not model",
                        v.model_type),
            "drop --images: the estimate without images counts the tower's weights but not its image states");
    return;
  }
  if (sized && !takes_any_size(v)) {
    const auto [nw, nh] = native_image_size(v);
    out.add("--image-size",
            fmt::format("{} resizes every image to {}x{}, so the size does not change its tokens", v.model_type, nw, nh),
            "drop --image-size");
    return;
  }
  if (sized && (w.image_width > kMaxImageSide || w.image_height > kMaxImageSide || w.image_width == 0 ||
                w.image_height == 0)) {
    out.add("--image-size", fmt::format("{}x{} is not a size vramfit models (1 to {} pixels a side)", w.image_width,
                                        w.image_height, kMaxImageSide),
            "give WIDTHxHEIGHT in pixels, e.g. --image-size 1024x768");
    return;
  }
  if (sized && v.min_pixels > 0 &&
      std::max(w.image_width, w.image_height) > 200 * std::min(w.image_width, w.image_height)) {
    // smart_resize (image_processing_qwen2_vl.py) raises for an aspect ratio of 200 or more.
    out.add("--image-size", fmt::format("{}x{}: the Qwen-VL processor refuses an aspect ratio above 200", w.image_width,
                                        w.image_height),
            "give a less elongated size");
    return;
  }
  const ImageWork iw = image_work(v, w.images, w.image_width, w.image_height);
  if (w.seq <= kMaxSeq && (iw.prompt_tokens > kMaxSeq - w.seq ||
                           (w.mode == Mode::generate && w.new_tokens > kMaxSeq - w.seq - iw.prompt_tokens)))
    out.add("--images",
            fmt::format("{} text + {} image tokens{} is beyond what vramfit models (at most 2^31 = {})", w.seq,
                        iw.prompt_tokens, w.mode == Mode::generate ? " + the new tokens" : "", kMaxSeq),
            "give fewer or smaller images");
}

/// --batch, --seq and --new-tokens: at least 1, and the sequence within kMaxSeq.
static void validate_sizes(const Workload& w, Diagnostics& out) {
  if (w.batch < 1) out.add("--batch", "must be at least 1, got 0", "use --batch 1 or more");
  if (w.seq < 1) out.add("--seq", "must be at least 1 token, got 0", "use --seq 1 or more (e.g. 2048)");
  if (w.seq > kMaxSeq) {
    out.add("--seq",
            fmt::format("{} tokens is beyond what vramfit models (at most 2^31 = {})", w.seq, kMaxSeq),
            "use a realistic sequence length (the longest contexts are about 10^7 tokens)");
  }
  if (w.mode == Mode::generate) {
    if (w.new_tokens < 1) {
      out.add("--new-tokens", "generate needs at least 1 new token, got 0",
              "set --new-tokens (e.g. --new-tokens 256)");
    } else if (w.seq <= kMaxSeq && w.new_tokens > kMaxSeq - w.seq) {
      out.add("--new-tokens",
              fmt::format("{} prompt + {} new tokens is beyond what vramfit models (at most 2^31 = {})",
                          w.seq, w.new_tokens, kMaxSeq),
              "use a realistic number of new tokens");
    }
  }
}

/// A learned position table (GPT-2, OPT, GPT-BigCode) has max_positions rows: a longer
/// sequence indexes past it (nn.Embedding raises IndexError, a device-side assert on the GPU), so
/// the job cannot run and is refused rather than estimated. Packed rows restart their positions
/// per sequence, so a row may be longer than the table. Rotary and ALiBi models run past their
/// trained length (with degraded output), so they are estimated as asked.
static void validate_positions(const Workload& w, const ModelSpec& m, Diagnostics& out) {
  if (!m.learned_positions || m.max_positions == 0 || w.sequence_packing || w.seq > kMaxSeq) return;
  const bool gen = w.mode == Mode::generate;
  // generate() feeds the prompt and every new token but the last: seq + new_tokens - 1 positions.
  const std::uint64_t fed = w.seq + (gen && w.new_tokens > 0 ? w.new_tokens - 1 : 0);
  if (fed <= m.max_positions) return;
  out.add(gen && w.seq <= m.max_positions ? "--new-tokens" : "--seq",
          fmt::format("{} positions{} is more than the {} of this model's learned position table "
                      "(transformers fails with IndexError: index out of range)",
                      fed, gen ? fmt::format(" ({} prompt + {} new tokens, the last not fed back)", w.seq, w.new_tokens) : "",
                      m.max_positions),
          gen ? fmt::format("keep --seq + --new-tokens at most {}", m.max_positions + 1)
              : fmt::format("use --seq {} or less", m.max_positions));
}

/// LoRA's rank, dropout and target modules against the model.
static void validate_lora(const Workload& w, const ModelSpec& m, Diagnostics& out) {
  if (w.mode != Mode::lora && w.mode != Mode::qlora) return;
  const Lora& l = w.lora;
  if (l.rank < 1) {
    out.add("--lora-rank", "must be at least 1, got 0", "use a rank like 8, 16 or 64");
  } else if (m.hidden_size != 0 && l.rank > m.hidden_size) {
    out.add("--lora-rank", fmt::format("{} is more than the model's hidden size {}", l.rank, m.hidden_size),
            "a low-rank adapter needs a rank below the hidden size: use 8, 16 or 64");
  }
  if (!(l.dropout >= 0.0 && l.dropout < 1.0)) {
    out.add("--lora-dropout", fmt::format("must be in [0, 1), got {}", l.dropout), "use 0, 0.05 or 0.1");
  }
  const bool moe = std::any_of(m.layers.begin(), m.layers.end(), [](const LayerGroup& g) { return g.moe; });
  if (l.unsloth_kernels) {
    // Unsloth patches llama-style decoders only (unsloth/models: llama, mistral, qwen2/3, gemma):
    // RMSNorm, rotary positions, a gated dense MLP (LoRA_MLP takes gate, up and down), and its
    // attention kernels (flash-attn or SDPA); the base weights 16-bit or 4-bit.
    std::string why;
    if (m.norm != Norm::rms || m.learned_positions || !m.gated_mlp || moe)
      why = fmt::format("Unsloth's kernels patch llama-style decoders (RMSNorm, rotary, a gated dense MLP); {} is not one",
                        m.model_type.empty() ? std::string("this model") : m.model_type);
    else if (w.attention == Attention::eager)
      why = "Unsloth's attention runs flash-attn or SDPA, not eager attention";
    else if (w.weights == DType::fp32)
      why = "Unsloth runs its kernels on 16-bit or 4-bit base weights, not fp32 ones";
    if (!why.empty())
      out.add("--lora-kernels", why, "give --lora-kernels peft (peft's LoRA layers; --recipe unsloth sets unsloth)");
  }
  if (l.all_linear && l.dropout > 0.0 && !l.unsloth_kernels && moe) {
    // transformers 5 keeps MoE experts as fused 3-D parameters; peft's all-linear adapts them
    // through lora.ParamWrapper, whose constructor raises "lora.ParamWrapper does not work with
    // lora_dropout != 0." (peft/tuners/lora/layer.py, 0.17 to 0.21): the job never starts.
    out.add("--lora-dropout",
            fmt::format("{} with all-linear on this MoE model: peft adapts its fused experts through "
                        "lora.ParamWrapper, which refuses a dropout other than 0",
                        l.dropout),
            "give --lora-dropout 0, or name the attention modules in --lora-targets (e.g. q_proj,v_proj)");
  }
  if (!l.all_linear) {
    const std::vector<std::string> names = linear_names(m);
    const std::string list = joined(names);
    if (l.targets.empty()) {
      out.add("--lora-targets", "no modules given", "name linear modules (" + list + ") or use all-linear");
    }
    for (const std::string& t : l.targets) {
      if (t == "all-linear" || target_exists(t, names)) continue;
      out.add("--lora-targets", fmt::format("'{}' is not a linear module of this model", t),
              did_you_mean_fix(t, names, "modules: " + list, "modules: " + list));
    }
  }
}

/// --gpus, --nodes and --sharding together (the first problem only: each assumes the ones
/// before it are fine).
static void validate_parallelism(const Workload& w, const ModelSpec& m, Diagnostics& out) {
  if (w.gpus < 1) {
    out.add("--gpus", "must be at least 1, got 0", "use --gpus 1 or more");
  } else if (w.gpus > kMaxGpus) {
    out.add("--gpus", fmt::format("{} GPUs is more than vramfit models (at most {})", w.gpus, kMaxGpus),
            "estimate per GPU: the memory of one GPU does not depend on thousands more");
  } else if (w.nodes < 1 || w.nodes > kMaxGpus || w.world() > kMaxGpus) {
    out.add("--nodes", fmt::format("{} nodes of {} GPUs is more than vramfit models (at most {} GPUs)", w.nodes,
                                   w.gpus, kMaxGpus),
            "estimate per GPU: the memory of one GPU does not depend on thousands more");
  } else if (w.sharding != Sharding::none && w.world() < 2 && !(zero_like(w.sharding) && w.offload != Offload::none)) {
    out.add("--gpus", fmt::format("--sharding {} needs at least 2 GPUs, got {}", name_of(w.sharding), w.gpus),
            "set --gpus 2 or more, or drop --sharding");
  } else if (w.sharding == Sharding::none && w.world() >= 2) {
    out.add("--sharding", fmt::format("{} GPUs but no sharding strategy", w.world()),
            "say how the model is split: --sharding ddp|zero1|zero2|zero3|fsdp|fsdp-grad-op|tp|pp|device-map");
  } else if (w.sharding == Sharding::device_map && w.nodes > 1) {
    out.add("--nodes", "device-map splits a model over the GPUs of one machine",
            "use --nodes 1, or a training strategy (fsdp, zero3, pp) across nodes");
  } else if (w.sharding == Sharding::pp && w.world() > m.num_layers && m.num_layers > 0) {
    out.add("--gpus", fmt::format("{} pipeline stages for {} layers", w.world(), m.num_layers),
            "use at most one stage per layer");
  }
}

/// --offload and --master-weights: training state that moves or is kept in fp32.
static void validate_offload(const Workload& w, Diagnostics& out) {
  if (w.offload != Offload::none) {
    if (!w.trains())
      out.add("--offload", fmt::format("does not apply to --mode {}", name_of(w.mode)),
              "offloading moves training state to the CPU: use it with --mode train, lora or qlora");
    else if (!zero_like(w.sharding))
      out.add("--offload", fmt::format("needs a ZeRO or FSDP strategy, got --sharding {}", name_of(w.sharding)),
              "use --sharding zero2 or zero3 (DeepSpeed ZeRO-Offload) or fsdp (CPUOffload)");
    else if (w.offload == Offload::params && w.sharding != Sharding::zero3 && w.sharding != Sharding::fsdp)
      out.add("--offload", fmt::format("parameters are offloaded by ZeRO-3 and FSDP, not {}", name_of(w.sharding)),
              "use --sharding zero3 or fsdp, or --offload optimizer");
    else if (w.offload == Offload::optimizer && (w.sharding == Sharding::fsdp || w.sharding == Sharding::fsdp_grad_op))
      out.add("--offload", "FSDP's CPUOffload moves parameters, gradients and the optimizer together",
              "use --offload params with fsdp, or --sharding zero2/zero3 for the optimizer alone");
  }
  if (w.master_weights) {
    if (w.mode != Mode::train)
      out.add("--master-weights", fmt::format("does not apply to --mode {}", name_of(w.mode)),
              "fp32 master weights belong to full training (--mode train)");
    else if (w.weights != DType::bf16 && w.weights != DType::fp16)
      out.add("--master-weights", fmt::format("needs 16-bit weights, got --dtype {}", name_of(w.weights)),
              "use --dtype bf16 or fp16 (the fp32 copy lives in the optimizer)");
  }
}

/// The training levers (activation offload, optimizer in backward, compile, packing, the
/// checkpointing kind, the loss) apply to training only.
static void validate_levers(const Workload& w, Diagnostics& out) {
  if (w.activation_offload && !w.trains())
    out.add("--activation-offload", fmt::format("does not apply to --mode {}", name_of(w.mode)),
            "activations are kept for backward only when training: use --mode train, lora or qlora");
  if (w.optimizer_in_backward) {
    if (!w.trains())
      out.add("--optimizer-in-backward", fmt::format("does not apply to --mode {}", name_of(w.mode)),
              "use it with --mode train, lora or qlora");
    else if (w.grad_accum > 1)
      out.add("--optimizer-in-backward", fmt::format("steps at every backward, so --grad-accum {} cannot accumulate",
                                                     w.grad_accum),
              "drop --grad-accum or --optimizer-in-backward (torchtune refuses the pair too)");
  }
  if (w.compile != Compile::none && !w.trains())
    out.add("--compile", fmt::format("does not apply to --mode {}", name_of(w.mode)),
            "vramfit models torch.compile of the training step: use it with --mode train, lora or qlora");
  if (w.sequence_packing && !w.trains())
    out.add("--packing", fmt::format("does not apply to --mode {}", name_of(w.mode)),
            "packed batches are a training data layout (DataCollatorWithFlattening): use --mode train, lora or "
            "qlora, or drop --packing");
  if ((w.checkpoint_every > 1 || w.checkpoint_selective) && !w.checkpointing)
    out.add("--checkpointing", "a checkpointing kind without checkpointing", "give --checkpointing KIND");
  if (w.loss != Loss::hf && !w.trains())
    out.add("--loss", fmt::format("does not apply to --mode {}", name_of(w.mode)),
            "a loss is computed when training: use it with --mode train, lora or qlora");
}

/// --fsdp-mixed-precision: a 16-bit dtype, training, FSDP and fp32 weights.
static void validate_fsdp_precision(const Workload& w, Diagnostics& out) {
  if (w.fsdp_param_dtype) {
    if (*w.fsdp_param_dtype != DType::bf16 && *w.fsdp_param_dtype != DType::fp16)
      out.add("--fsdp-mixed-precision", fmt::format("{} is not a 16-bit compute dtype", name_of(*w.fsdp_param_dtype)),
              "use --fsdp-mixed-precision bf16 or fp16");
    else if (!w.trains())
      out.add("--fsdp-mixed-precision", fmt::format("does not apply to --mode {}", name_of(w.mode)),
              "FSDP's mixed precision is a training setting: use --mode train or lora");
    else if (w.sharding != Sharding::fsdp && w.sharding != Sharding::fsdp_grad_op)
      out.add("--fsdp-mixed-precision", fmt::format("needs FSDP, got --sharding {}", name_of(w.sharding)),
              "add --sharding fsdp (or fsdp-grad-op), or use --autocast bf16 without FSDP");
    else if (w.weights != DType::fp32)
      out.add("--fsdp-mixed-precision", fmt::format("gathers 16-bit copies of fp32 weights, got --dtype {}",
                                                    name_of(w.weights)),
              "use --dtype fp32 (the sharded fp32 masters), or drop --fsdp-mixed-precision for 16-bit weights");
  }
}

/// The dtypes (KV cache, autocast, the weights a mode needs) and --grad-accum.
static void validate_dtypes(const Workload& w, Diagnostics& out) {
  if (w.kv_cache && *w.kv_cache == DType::nf4)
    out.add("--kv-cache", "nf4 is a weights format", "use fp8, int8 or int4 for a quantized cache");
  if (w.grad_accum < 1) out.add("--grad-accum", "must be at least 1, got 0", "use --grad-accum 1 or more");

  if (w.autocast && *w.autocast != DType::bf16 && *w.autocast != DType::fp16) {
    out.add("--autocast", fmt::format("{} is not an autocast dtype", name_of(*w.autocast)),
            "use --autocast bf16 or --autocast fp16");
  }
  const bool four_bit = w.weights == DType::nf4 || w.weights == DType::int4;
  if (w.mode == Mode::qlora && !four_bit) {
    out.add("--dtype", fmt::format("qlora needs 4-bit weights, got {}", name_of(w.weights)),
            "use --dtype nf4 (the default for --mode qlora) or int4, or --mode lora");
  }
  if (w.mode == Mode::train && !is_float_compute(w.weights)) {
    out.add("--dtype", "full fine-tuning of quantized weights is not supported",
            "use --mode qlora or lora");
  }
}

void validate(const Workload& w, const ModelSpec& m, Diagnostics& out) {
  validate_sizes(w, out);
  validate_images(w, m, out);
  validate_positions(w, m, out);
  // Tensor parallelism splits the attention heads over the GPUs (Megatron's and transformers'
  // tp_plan views [batch, seq, heads / tp, head_dim]): an uneven split does not run, so it is
  // refused rather than estimated (issue #14's adversarial pass: 32 heads over 3 GPUs).
  if (w.sharding == Sharding::tp && w.gpus > 1 && m.num_heads != 0 && m.num_heads % w.gpus != 0)
    out.add("--gpus", fmt::format("{} attention heads cannot be split evenly over {} GPUs with --sharding tp", m.num_heads, w.gpus),
            "use a number of GPUs that divides the head count (e.g. 2, 4 or 8), or --sharding fsdp");
  validate_lora(w, m, out);
  validate_parallelism(w, m, out);
  validate_offload(w, out);
  validate_levers(w, out);
  validate_fsdp_precision(w, out);
  validate_dtypes(w, out);
}

namespace {

/// The typed values of --alloc-conf's settings, each problem reported under `f` with `fix`.
struct AllocConfValues {
  Diagnostics& diags;
  const std::string& f;
  const std::string& fix;

  void boolean(const std::string& key, const std::string& v, bool& out) const {
    // c10's parser takes exactly True or False.
    if (v == "True") out = true;
    else if (v == "False") out = false;
    else diags.add(f, fmt::format("{}:{}: the value must be True or False", key, text_excerpt(v)), fix);
  }
  bool whole(const std::string& key, const std::string& v, std::uint64_t& out) const {
    if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos) {
      diags.add(f, fmt::format("{}:{}: the value must be a whole number", key, text_excerpt(v)), fix);
      return false;
    }
    out = std::stoull(v);
    return true;
  }
};

/// One key:value of --alloc-conf into `w`, as CUDAAllocatorConfig reads it.
void apply_alloc_setting(const std::string& key, const std::string& v, const AllocConfValues& r, Workload& w) {
  if (key == "expandable_segments") {
    r.boolean(key, v, w.expandable_segments);
  } else if (key == "max_split_size_mb") {
    std::uint64_t mb = 0;
    // CUDAAllocatorConfig: "must be > 20" (kLargeBuffer, 20 MiB).
    if (r.whole(key, v, mb)) {
      if (mb <= 20 || mb > (1ULL << 30))
        r.diags.add(r.f, fmt::format("max_split_size_mb:{}: must be more than 20 (and at most 2^30)", mb), r.fix);
      else w.alloc.max_split_size_mb = mb;
    }
  } else if (key == "roundup_power2_divisions") {
    std::uint64_t n = 0;
    if (v.rfind('[', 0) == 0)
      r.diags.add(r.f, "roundup_power2_divisions: the per-size list form is not modelled", "give one value, e.g. roundup_power2_divisions:4");
    else if (r.whole(key, v, n)) {
      if (n == 0 || (n & (n - 1)) != 0 || n > 1024)
        r.diags.add(r.f, fmt::format("roundup_power2_divisions:{}: must be a power of 2 (1 to 1024)", n), r.fix);
      else w.alloc.roundup_power2_divisions = n == 1 ? 0 : n;
    }
  } else if (key == "garbage_collection_threshold") {
    char* stop = nullptr;
    const double t = std::strtod(v.c_str(), &stop);
    if (v.empty() || stop != v.c_str() + v.size() || !(t > 0.0 && t < 1.0))
      r.diags.add(r.f, fmt::format("garbage_collection_threshold:{}: must be a number between 0 and 1 (both excluded)", text_excerpt(v)), r.fix);
    else w.alloc.garbage_collection_threshold = t;
  } else if (key == "backend") {
    if (v == "native") w.alloc.async_backend = false;
    else if (v == "cudaMallocAsync") w.alloc.async_backend = true;
    else r.diags.add(r.f, fmt::format("backend:{}: must be native or cudaMallocAsync", text_excerpt(v)), r.fix);
  } else if (key == "pinned_use_cuda_host_register" || key == "pinned_use_background_threads" ||
             key == "release_lock_on_cudamalloc") {
    bool ignored = false;  // host memory and locking: nothing on the GPU
    r.boolean(key, v, ignored);
  } else if (key == "pinned_num_register_threads") {
    std::uint64_t ignored = 0;
    r.whole(key, v, ignored);
  } else {
    const std::string settings =
        "the settings are expandable_segments, max_split_size_mb, roundup_power2_divisions, "
        "garbage_collection_threshold, backend and the pinned_* ones (PyTorch refuses others too)";
    r.diags.add(r.f, fmt::format("unknown setting '{}'", text_excerpt(key)),
                did_you_mean_fix(key,
                                 {"expandable_segments", "max_split_size_mb", "roundup_power2_divisions",
                                  "garbage_collection_threshold", "backend", "pinned_use_cuda_host_register",
                                  "pinned_use_background_threads", "pinned_num_register_threads",
                                  "release_lock_on_cudamalloc"},
                                 settings, settings));
  }
}

}  // namespace

void parse_alloc_conf(std::string_view text, Workload& w, Diagnostics& diags, std::string_view field) {
  const std::string f(field);
  const std::string fix = "e.g. " + f + " expandable_segments:True,max_split_size_mb:512 (PYTORCH_CUDA_ALLOC_CONF's syntax)";
  if (trim(text).empty()) {
    diags.add(f, "no setting given", fix);
    return;
  }
  const AllocConfValues values{diags, f, fix};
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string item{trim(text.substr(start, end - start))};
    start = end + 1;
    if (item.empty()) {
      diags.add(f, "an empty setting between commas", fix);
      continue;
    }
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) {
      diags.add(f, fmt::format("'{}' has no value (key:value)", text_excerpt(item)), fix);
      continue;
    }
    const std::string key{trim(std::string_view(item).substr(0, colon))};
    const std::string v{trim(std::string_view(item).substr(colon + 1))};
    apply_alloc_setting(key, v, values, w);
  }
}

std::string alloc_conf_string(const Workload& w) {
  std::string out;
  const auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  if (w.alloc.async_backend) add("backend:cudaMallocAsync");
  if (w.expandable_segments) add("expandable_segments:True");
  if (w.alloc.max_split_size_mb != 0) add(fmt::format("max_split_size_mb:{}", w.alloc.max_split_size_mb));
  if (w.alloc.roundup_power2_divisions != 0) add(fmt::format("roundup_power2_divisions:{}", w.alloc.roundup_power2_divisions));
  if (w.alloc.garbage_collection_threshold != 0) add(fmt::format("garbage_collection_threshold:{}", w.alloc.garbage_collection_threshold));
  return out;
}

}  // namespace vramfit::spec
