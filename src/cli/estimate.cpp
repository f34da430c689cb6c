// `vramfit estimate`: flags -> ModelSpec + Workload -> engine -> report.
#include "vramfit/cli/estimate.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <ostream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/budget.hpp"
#include "vramfit/cli/files.hpp"
#include "vramfit/cli/hub_cache.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/render/format.hpp"
#include "common.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::cli {

namespace {

/// A positive whole number typed for `flag`; every way it can be wrong gets its own message
/// (CLI11 would wrap "-1" into a huge unsigned number or print a generic conversion error).
std::optional<std::uint64_t> parse_count(const std::string& text, const std::string& flag,
                                         std::string_view example, Diagnostics& diags) {
  const std::string fix = fmt::format("give a positive whole number, e.g. {} {}", flag, example);
  if (text.empty()) {
    diags.add(flag, "empty value", fix);
    return std::nullopt;
  }
  if (text.front() == '-') {
    diags.add(flag, fmt::format("{} is negative", text), fix);
    return std::nullopt;
  }
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) {
    diags.add(flag, fmt::format("{} is too large", text), fix);
    return std::nullopt;
  }
  if (ec != std::errc() || ptr != end) {
    // "32e3" or "1e12" are whole numbers too (as `--params 7e9` is): take them when the exponent
    // form is exact; "1e-3", "2k" or "1.5" stay refused.
    const auto exponent = util::whole_from_exponent(text);
    if (exponent.status == util::ExponentForm::too_large) {
      diags.add(flag, fmt::format("{} is too large", text), fix);
      return std::nullopt;
    }
    if (exponent.status != util::ExponentForm::whole) {
      diags.add(flag, fmt::format("'{}' is not a whole number", text), fix);
      return std::nullopt;
    }
    v = exponent.value;
  }
  if (v == 0) {
    diags.add(flag, "0 is not allowed", fix);
    return std::nullopt;
  }
  return v;
}

/// A name from a closed list ("--mode train"): unknown names get the list and a suggestion.
template <typename Parse, typename Names>
auto parse_choice(const std::string& text, const std::string& flag, std::string_view what, Parse parse,
                  const Names& names, Diagnostics& diags) -> decltype(parse(text)) {
  if (auto v = parse(text)) return v;
  const std::vector<std::string> known(names.begin(), names.end());
  const std::string list = "one of " + joined(known);
  diags.add(flag, fmt::format("unknown {} '{}'", what, text), did_you_mean_fix(text, known, list, list));
  return std::nullopt;
}

constexpr std::array<std::string_view, 7> kDTypes{"fp32", "fp16", "bf16", "fp8", "int8", "int4", "nf4"};
constexpr std::array<std::string_view, 2> kAutocast{"bf16", "fp16"};
constexpr std::array<std::string_view, 6> kKvCache{"bf16", "fp16", "fp32", "fp8", "int8", "int4"};

std::optional<DType> parse_kv_dtype(std::string_view s) noexcept {
  const auto d = parse_dtype(s);
  if (d && *d != DType::nf4) return d;
  return std::nullopt;
}

std::optional<DType> parse_autocast(std::string_view s) noexcept {
  const auto d = parse_dtype(s);
  if (d == DType::bf16 || d == DType::fp16) return d;
  return std::nullopt;
}

/// Flags that only some modes use (checked only when given explicitly).
struct ModeFlag {
  std::string_view flag;
  bool (*applies)(spec::Mode);
  std::string_view used_by;
};

bool generates(spec::Mode m) { return m == spec::Mode::generate; }

constexpr std::array<ModeFlag, 17> kModeFlags{{
    // The optimizer, its step and recomputation exist only when training.
    {"--optimizer", spec::trains, "--mode train, lora and qlora"},
    {"--grad-accum", spec::trains, "--mode train, lora and qlora"},
    {"--checkpointing", spec::trains, "--mode train, lora and qlora"},
    {"--loss", spec::trains, "--mode train, lora and qlora"},
    {"--activation-offload", spec::trains, "--mode train, lora and qlora"},
    {"--recipe", spec::trains, "--mode train, lora and qlora"},
    {"--optimizer-in-backward", spec::trains, "--mode train, lora and qlora"},
    {"--packing", spec::trains, "--mode train, lora and qlora"},
    {"--compile", spec::trains, "--mode train, lora and qlora"},
    {"--fsdp-mixed-precision", spec::trains, "--mode train and lora"},
    // Only generate produces new tokens (and grows the KV cache).
    {"--new-tokens", generates, "--mode generate"},
    {"--kv-cache", generates, "--mode generate"},
    // Adapters exist only in the peft modes.
    {"--lora-rank", spec::uses_lora, "--mode lora and qlora"},
    {"--lora-targets", spec::uses_lora, "--mode lora and qlora"},
    {"--lora-dropout", spec::uses_lora, "--mode lora and qlora"},
    {"--lora-dtype", spec::uses_lora, "--mode lora and qlora"},
    {"--lora-kernels", spec::uses_lora, "--mode lora and qlora"},
}};

std::vector<std::string> split_targets(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : text + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

/// The engine's checked arithmetic names no flag ("size: the size overflows 64 bits"): name
/// the numbers the user gave, whose product overflowed, and how to get an answer.
InputError overflow_error(const EstimateFlags& f, const spec::Workload& w, const InputError& e) {
  const bool overflow = std::all_of(e.diagnostics().begin(), e.diagnostics().end(), [](const Diagnostic& d) {
    return d.field == "size" || d.field == "parameters";
  });
  if (!overflow) return e;
  std::vector<std::string> given;
  for (const char* flag : {"--params", "--config", "--batch", "--seq", "--new-tokens"})
    if (f.has(flag)) given.emplace_back(flag);
  const std::string flags = given.empty() ? std::string("model") : joined(given);
  std::string job = fmt::format("batch {} x {} tokens", w.batch, w.seq);
  if (w.mode == spec::Mode::generate) job += fmt::format(" + {} new", w.new_tokens);
  std::string fix = "give smaller values: no GPU job comes near 16 EiB";
  if (w.attention == spec::Attention::eager) fix += "; eager attention's scores grow with seq x seq";
  return InputError(flags, fmt::format("the memory of {} overflows 64 bits (over 16 EiB)", job), fix);
}

/// The model source: exactly one of --params, --model, --config (returned, in that order).
std::vector<std::string> model_sources(const EstimateFlags& f, Diagnostics& diags) {
  std::vector<std::string> sources;
  for (const char* s : {"--params", "--model", "--config"})
    if (f.has(s)) sources.emplace_back(s);
  if (sources.empty())
    diags.add("model", "no model given",
              "give exactly one of --params, --model, --config, e.g. --model llama-3.1-8b; 'vramfit models' "
              "lists the presets");
  else if (sources.size() > 1)
    diags.add("model", fmt::format("{} and {} were both given", sources[0], sources[1]),
              "give exactly one of --params, --model, --config");
  return sources;
}

/// --checkpointing [full|selective|every-N].
void parse_checkpointing(const EstimateFlags& f, spec::Workload& w, Diagnostics& diags) {
  if (!f.has("--checkpointing")) return;
  w.checkpointing = true;
  const std::string& k = f.checkpointing_kind;
  const std::string fix = "give full, selective or every-N (N a whole number >= 1), e.g. --checkpointing every-2";
  if (k == "selective") {
    w.checkpoint_selective = true;
  } else if (k.rfind("every-", 0) == 0) {
    const std::string n = k.substr(6);
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (n.empty() || ec != std::errc() || ptr != n.data() + n.size() || v == 0)
      diags.add("--checkpointing", fmt::format("'{}' is not every-N with N a positive whole number", k), fix);
    else
      w.checkpoint_every = v;
  } else if (!k.empty() && k != "full") {
    diags.add("--checkpointing", fmt::format("unknown checkpointing '{}'", k),
              did_you_mean_fix(k, {"full", "selective", "every-2"}, fix, fix));
  }
}

/// --compile [all|layers].
void parse_compile(const EstimateFlags& f, spec::Workload& w, Diagnostics& diags) {
  if (!f.has("--compile")) return;
  const std::string& k = f.compile_kind;
  if (k.empty() || k == "all")
    w.compile = spec::Compile::all;
  else if (k == "layers")
    w.compile = spec::Compile::layers;
  else
    diags.add("--compile", fmt::format("unknown compile '{}'", k),
              did_you_mean_fix(k, {"all", "layers"},
                               "give all (the layers and the loss) or layers (the decoder layers only)",
                               "give all (the layers and the loss) or layers (the decoder layers only), e.g. --compile layers"));
}

/// The workload's names: mode, dtypes, optimizer, attention, allocator, sharding and the levers.
void parse_workload_names(const EstimateFlags& f, spec::Workload& w, Diagnostics& diags) {
  if (f.has("--mode"))
    if (auto m = parse_choice(f.mode, "--mode", "mode", spec::parse_mode, spec::mode_names(), diags)) w.mode = *m;
  if (f.has("--dtype"))
    if (auto d = parse_choice(f.dtype, "--dtype", "dtype", parse_dtype, kDTypes, diags)) w.weights = *d;
  if (f.has("--optimizer"))
    if (auto o =
            parse_choice(f.optimizer, "--optimizer", "optimizer", spec::parse_optimizer, spec::optimizer_names(), diags))
      w.optimizer = *o;
  if (f.has("--autocast"))
    if (auto a = parse_choice(f.autocast, "--autocast", "autocast dtype", parse_autocast, kAutocast, diags))
      w.autocast = *a;
  if (f.has("--attention"))
    if (auto a =
            parse_choice(f.attention, "--attention", "attention", spec::parse_attention, spec::attention_names(), diags))
      w.attention = *a;
  if (f.has("--alloc-conf")) spec::parse_alloc_conf(f.alloc_conf, w, diags);
  if (f.has("--cuda-context"))
    diags.collect([&] { w.cuda_context = spec::parse_size(f.cuda_context, "--cuda-context"); });
  if (f.has("--sharding"))
    if (auto s = parse_choice(f.sharding, "--sharding", "sharding", spec::parse_sharding, spec::sharding_names(), diags))
      w.sharding = *s;
  parse_checkpointing(f, w, diags);
  parse_compile(f, w, diags);
  w.activation_offload = f.activation_offload;
  w.optimizer_in_backward = f.optimizer_in_backward;
  w.sequence_packing = f.sequence_packing;
  w.master_weights = f.master_weights;
  if (f.has("--offload"))
    if (auto o = parse_choice(f.offload, "--offload", "offload", spec::parse_offload, spec::offload_names(), diags)) w.offload = *o;
  if (f.has("--loss"))
    if (auto l = parse_choice(f.loss, "--loss", "loss", spec::parse_loss, spec::loss_names(), diags)) w.loss = *l;
  if (f.has("--fsdp-mixed-precision"))
    if (auto a = parse_choice(f.fsdp_mixed_precision, "--fsdp-mixed-precision", "param dtype", parse_autocast,
                              kAutocast, diags))
      w.fsdp_param_dtype = *a;
  if (f.has("--kv-cache"))
    if (auto d = parse_choice(f.kv_cache, "--kv-cache", "KV cache dtype", parse_kv_dtype, kKvCache, diags))
      w.kv_cache = *d;
}

/// How the weights are packed, as the flags ask (resolved against the model later).
struct PackingFlags {
  std::optional<spec::Quantization> quant;
  std::vector<std::string> skip;
};

PackingFlags parse_packing_flags(const EstimateFlags& f, const spec::Workload& w, Diagnostics& diags) {
  PackingFlags pf;
  std::optional<spec::Quantization>& quant = pf.quant;
  if (f.has("--quant")) {
    quant = parse_choice(f.quant, "--quant", "scheme", spec::parse_quant, spec::quant_names(), diags);
    if (quant && f.has("--dtype") && !is_float_compute(w.weights))
      diags.add("--quant", fmt::format("--dtype {} and --quant {} both say how the weights are packed", f.dtype, f.quant),
                "give one of them (--quant has the details: group size, double quantization, GGUF types)");
  }
  const auto scheme_is = [&](std::initializer_list<spec::QuantMethod> ms) {
    const spec::Quantization q = quant ? *quant : spec::default_quantization(w.weights);
    return std::find(ms.begin(), ms.end(), q.method) != ms.end();
  };
  if (f.has("--group-size")) {
    if (!scheme_is({spec::QuantMethod::gptq, spec::QuantMethod::awq})) {
      diags.add("--group-size", "applies to GPTQ and AWQ weights only",
                "add --quant gptq-int4 (or awq-int4), or drop --group-size");
    } else if (f.group_size == "0") {  // GPTQ's group_size -1: one group per row
      if (!quant) quant = spec::default_quantization(w.weights);
      quant->group_size = 0;
    } else if (auto v = parse_count(f.group_size, "--group-size", "128", diags)) {
      if (!quant) quant = spec::default_quantization(w.weights);
      quant->group_size = *v;
    }
  }
  if (f.double_quant) {
    if (!scheme_is({spec::QuantMethod::bnb_4bit}) && !(!quant && w.mode == spec::Mode::qlora && !f.has("--dtype")))
      diags.add("--double-quant", "applies to bitsandbytes 4-bit weights only", "add --quant nf4, or drop --double-quant");
    else {
      if (!quant) quant = spec::default_quantization(DType::nf4);
      quant->double_quant = true;
    }
  }
  std::vector<std::string>& skip = pf.skip;
  if (f.has("--skip-modules")) {
    skip = split_targets(f.skip_modules);
    if (skip.empty())
      diags.add("--skip-modules", "no module names", "give names such as down_proj,o_proj");
    else if (!quant && is_float_compute(w.weights) && w.mode != spec::Mode::qlora)
      diags.add("--skip-modules", "the weights are not quantized", "add --quant nf4 (or another scheme)");
  }
  return pf;
}

/// The workload's numbers: batch, sequence, tokens, GPUs, LoRA.
void parse_workload_numbers(const EstimateFlags& f, spec::Workload& w, Diagnostics& diags) {
  if (f.has("--batch"))
    if (auto v = parse_count(f.batch, "--batch", "8", diags)) w.batch = *v;
  if (f.has("--seq"))
    if (auto v = parse_count(f.seq, "--seq", "4096", diags)) w.seq = *v;
  if (w.mode == spec::Mode::generate) w.new_tokens = 256;
  if (f.has("--new-tokens"))
    if (auto v = parse_count(f.new_tokens, "--new-tokens", "512", diags)) w.new_tokens = *v;
  if (f.has("--images")) {
    // 0 is allowed (text only, as without the flag); the upper bound is spec::validate's.
    if (f.images == "0")
      w.images = 0;
    else if (auto v = parse_count(f.images, "--images", "4", diags))
      w.images = *v;
  }
  if (f.has("--image-size")) {
    // WIDTHxHEIGHT, or N for a square.
    const std::string& t = f.image_size;
    const std::size_t x = t.find_first_of("xX");
    const std::string wt = x == std::string::npos ? t : t.substr(0, x);
    const std::string ht = x == std::string::npos ? t : t.substr(x + 1);
    Diagnostics size_diags;
    const auto wv = parse_count(wt, "--image-size", "1024x768", size_diags);
    const auto hv = parse_count(ht, "--image-size", "1024x768", size_diags);
    if (wv && hv) {
      w.image_width = *wv;
      w.image_height = *hv;
    } else {
      diags.add("--image-size", fmt::format("'{}' is not WIDTHxHEIGHT in pixels", text_excerpt(t)),
                "give e.g. --image-size 1024x768, or --image-size 448 for 448x448");
    }
  }
  if (f.has("--grad-accum"))
    if (auto v = parse_count(f.grad_accum, "--grad-accum", "4", diags)) w.grad_accum = *v;
  if (f.has("--gpus"))
    if (auto v = parse_count(f.gpus, "--gpus", "8", diags)) w.gpus = *v;
  if (f.has("--nodes"))
    if (auto v = parse_count(f.nodes, "--nodes", "2", diags)) w.nodes = *v;
  if (f.has("--lora-rank"))
    if (auto v = parse_count(f.lora_rank, "--lora-rank", "16", diags)) w.lora.rank = *v;
  if (f.has("--lora-targets")) {
    auto targets = split_targets(f.lora_targets);
    if (targets.empty())
      diags.add("--lora-targets", "no module names", "give all-linear or names such as q_proj,v_proj");
    else if (targets.size() == 1 && targets[0] == "all-linear")
      w.lora.all_linear = true;
    else {
      w.lora.all_linear = false;
      w.lora.targets = std::move(targets);
    }
  }
  if (f.has("--lora-dtype")) {
    if (f.lora_dtype == "bf16" || f.lora_dtype == "fp16") {
      w.lora.half_adapters = true;
      w.lora.half_is_fp16 = f.lora_dtype == "fp16";
    }
    else if (f.lora_dtype != "fp32")
      diags.add("--lora-dtype", fmt::format("unknown adapter dtype '{}'", f.lora_dtype),
                did_you_mean_fix(f.lora_dtype, {"fp32", "bf16", "fp16"}, "give fp32 (peft's default), bf16 or fp16",
                                 "give fp32 (peft's default), bf16 or fp16"));
  }
  if (f.has("--lora-kernels")) {
    if (f.lora_kernels == "unsloth")
      w.lora.unsloth_kernels = true;
    else if (f.lora_kernels != "peft")
      diags.add("--lora-kernels", fmt::format("unknown LoRA kernels '{}'", f.lora_kernels),
                did_you_mean_fix(f.lora_kernels, {"peft", "unsloth"}, "",
                                 "give peft (peft's LoRA layers, the default) or unsloth (Unsloth's fused LoRA autograd functions)"));
  }
  if (f.has("--lora-dropout")) {
    double p = 0;
    const char* end = f.lora_dropout.data() + f.lora_dropout.size();
    const auto [ptr, ec] = std::from_chars(f.lora_dropout.data(), end, p);
    if (ec != std::errc() || ptr != end || !(p >= 0.0 && p < 1.0))
      diags.add("--lora-dropout", fmt::format("'{}' is not a probability in [0, 1)", f.lora_dropout),
                "e.g. --lora-dropout 0.05");
    else
      w.lora.dropout = p == 0 ? 0.0 : p;  // `-0` would be reported as "dropout -0"
  }
}

/// A stack's default levers (--recipe), under the flags typed.
void apply_recipe_flag(const EstimateFlags& f, spec::Workload& w, Diagnostics& diags) {
  if (f.has("--recipe"))
    if (auto r = parse_choice(f.recipe, "--recipe", "recipe", spec::parse_recipe, spec::recipe_names(), diags))
      spec::apply_recipe(
          w, *r, [](const void* ctx, std::string_view flag) { return static_cast<const EstimateFlags*>(ctx)->has(std::string(flag)); },
          &f);
}

/// Flags the mode does not use are refused, naming the mode that uses them.
void check_mode_flags(const EstimateFlags& f, const spec::Workload& w, Diagnostics& diags) {
  for (const auto& mf : kModeFlags)
    if (f.has(std::string(mf.flag)) && !mf.applies(w.mode))
      diags.add(std::string(mf.flag), fmt::format("does not apply to --mode {}", spec::name_of(w.mode)),
                fmt::format("it is used by {}; drop it or change --mode", mf.used_by));
}

/// The budget and its margin: --gpu or --budget, --headroom.
void parse_budget(const EstimateFlags& f, CatalogSource& catalog, BudgetRule rule, render::EstimateReport& report,
                  Diagnostics& diags) {
  advisor::Headroom headroom;
  if (f.has("--headroom"))
    diags.collect([&] { headroom = advisor::parse_headroom(f.headroom, "--headroom"); });
  if (f.has("--gpu") && f.has("--budget")) {
    diags.add("--budget", "--gpu and --budget were both given", "give one: --gpu ID or --budget SIZE");
  } else if (f.has("--budget")) {
    diags.collect([&] {
      report.budget = advisor::budget_of(spec::parse_size(f.budget, "--budget"), headroom);
      report.budget->label = f.budget;
      report.workload.device_memory = report.budget->bytes.value();
    });
  } else if (f.has("--gpu")) {
    diags.collect([&] {
      const catalog::Gpu& g = catalog.get().gpu(f.gpu, "--gpu");
      report.budget = advisor::budget_for_gpu(g, headroom);
      report.workload.compute_capability = g.compute_capability;
      report.workload.device_memory = g.memory.value();
    });
  } else if (rule == BudgetRule::required) {
    diags.add("budget", "no budget given",
              "give --gpu ID or --budget SIZE, e.g. --gpu rtx-4090 or --budget 24GiB; 'vramfit gpus' lists "
              "the GPUs");
  } else if (f.has("--headroom")) {
    diags.add("--headroom", "a margin needs a budget", "give --gpu ID or --budget SIZE too");
  }
  if (report.budget) {
    if (f.has("--headroom")) report.budget->headroom_label = f.headroom;
    diags.collect([&] { advisor::check_budget(*report.budget); });
  }
}

/// The model itself, once the flags are sound (its errors come after theirs), and the checks
/// of the workload against it.
void load_model(const EstimateFlags& f, CatalogSource& catalog, const std::vector<std::string>& sources,
                const PackingFlags& pf, render::EstimateReport& report, Diagnostics& diags) {
  spec::Workload& w = report.workload;
  bool have_model = false;
  if (sources.size() == 1) {
    have_model = diags.collect([&] {
      if (f.has("--params")) {
        report.model = spec::from_param_count(spec::parse_param_count(f.params, "--params"));
        report.model.name = "--params " + f.params;
        report.model.source = "params";
        // The spec's notes say which shape was assumed; make sure the way out is said too.
        const bool said =
            std::any_of(report.model.notes.begin(), report.model.notes.end(),
                        [](const std::string& n) { return n.find("--config") != std::string::npos; });
        if (!said)
          report.notes.emplace_back(
              "--params gives only a parameter count, so the shape above is assumed; "
              "--config or --model gives a more accurate estimate");
      } else if (f.has("--model")) {
        report.model = load_model_arg(f.model, catalog.get(), "--model");
      } else {
        report.model = load_config(f.config, "--config");
      }
    });
  }
  if (have_model && diags.empty()) {
    // The weights' packing: the spec's one precedence rule.
    const spec::ModelSpec& model = report.model;
    if (auto note = spec::resolve_packing(w, model, {pf.quant, f.has("--dtype"), f.double_quant, pf.skip}))
      report.notes.push_back(std::move(*note));
    for (const std::string& name : pf.skip) {
      bool found = false;
      for (const auto& g : model.layers)
        for (const auto& l : g.linears) found = found || spec::lora_target_matches(name, l.name);
      if (!found)
        diags.add("--skip-modules", fmt::format("'{}' is not a linear module of this model", name),
                  "name linear modules of the model, e.g. o_proj or down_proj");
    }
    spec::validate(w, model, diags);
  }
}

}  // namespace

CatalogSource::CatalogSource(std::string data_dir, std::string field)
    : dir_(std::move(data_dir)), field_(std::move(field)) {}

const catalog::Catalog& CatalogSource::get() {
  if (dir_.empty()) return catalog::Catalog::embedded();
  if (!loaded_) loaded_ = catalog::Catalog::parse(read_data_dir(dir_, field_));
  return *loaded_;
}

Estimate build_estimate(const EstimateFlags& f, CatalogSource& catalog, BudgetRule rule) {
  Diagnostics diags;
  Estimate result;
  render::EstimateReport& report = result.report;
  result.fail_on_tight = f.fail_on_tight;
  spec::Workload& w = report.workload;

  const std::vector<std::string> sources = model_sources(f, diags);
  parse_workload_names(f, w, diags);
  const PackingFlags packing = parse_packing_flags(f, w, diags);
  parse_workload_numbers(f, w, diags);
  apply_recipe_flag(f, w, diags);
  check_mode_flags(f, w, diags);
  parse_budget(f, catalog, rule, report, diags);
  load_model(f, catalog, sources, packing, report, diags);
  diags.throw_if_any();

  try {
    report.breakdown = engine::estimate(report.model, w);
  } catch (const InputError& e) {
    throw overflow_error(f, w, e);
  }
  return result;
}

/// Under a TIGHT verdict, the fix that buys the missing margin: the advisor's walk against the
/// budget the upper bound needs (the usable memory divided by the workload's factor), checked
/// with the three-way verdict on the original budget. A fix may move the workload to a group
/// with a larger factor (gradient checkpointing: train/single 1.014 -> train/single/ckpt 1.038),
/// so a walk that fits the first budget but is still TIGHT is walked again against the budget
/// its own factor needs (llama-3.1-8b AdamW b1 x 2048 on an H100: checkpointing alone leaves it
/// TIGHT, checkpointing and 4-bit quantization cover it).
static std::string tight_fix(const render::EstimateReport& report, CatalogSource& catalog) {
  const advisor::Budget& budget = *report.budget;
  const engine::Breakdown& b = report.breakdown;
  if (b.upper_permille <= 1000) return {};
  const std::uint64_t usable = budget.bytes.value() - budget.headroom_bytes().value();
  advisor::Budget need = budget;
  need.headroom = {};
  need.headroom_label.clear();
  advisor::AdviseOptions options;
  options.tiers = false;
  std::uint64_t factor = b.upper_permille;
  for (int walk = 0; walk < 3; ++walk) {
    need.bytes = Bytes{usable / factor * 1000 + (usable % factor) * 1000 / factor};
    const advisor::Advice a = advisor::advise(report.model, report.workload, need, catalog.get(), options);
    std::vector<std::string> ids;
    for (const auto& s : a.steps)
      if (s.applied) ids.push_back(s.id);
    const engine::Breakdown& f = a.final_estimate;
    if (a.fits && !ids.empty() && budget.verdict(f.device_total, f.upper()) == advisor::Verdict::fits) {
      const std::string list = joined(ids);
      return fmt::format("{} {} it ({} upper bound {}; 'vramfit advise' with the same flags for the steps)", list,
                         ids.size() == 1 ? "buys" : "buy", ids.size() == 1 ? "its" : "their",
                         render::format_bytes(f.upper()));
    }
    if (!a.fits || f.upper_permille <= factor) break;
    factor = f.upper_permille;
  }
  return "no fix of the advisor covers the upper bound: a larger GPU does";
}

ExitCode run_estimate(const Estimate& e, CatalogSource& catalog, render::Format format, std::ostream& out) {
  render::EstimateReport report = e.report;
  std::optional<advisor::Advice> advice;
  const engine::Breakdown& b = report.breakdown;
  if (report.budget && !report.budget->fits(b.device_total)) {
    advisor::AdviseOptions options;
    advice = advisor::advise(report.model, report.workload, *report.budget, catalog.get(), options);
  }
  const bool tight = report.budget && report.budget->verdict(b.device_total, b.upper()) == advisor::Verdict::tight;
  if (tight) report.tight_fix = tight_fix(report, catalog);
  // Render first, print after: an error while rendering leaves stdout empty.
  out << render::render_estimate(report, advice, format);
  if (tight && e.fail_on_tight) return ExitCode::does_not_fit;
  return advice ? advisor::exit_code(*advice) : ExitCode::ok;
}

}  // namespace vramfit::cli
