#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/text.hpp"
#include "vramfit/render/advice.hpp"
#include "vramfit/render/format.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

namespace {

using ojson = nlohmann::ordered_json;

std::string lora_targets(const spec::Lora& l) { return l.all_linear ? "all-linear" : joined(l.targets, ","); }

// "gptq-int4, group 128", "nf4, double quantization", "q4_k_m", ...
std::string scheme_text(const spec::Quantization& q) {
  std::string out = spec::name_of(q);
  if (q.method == spec::QuantMethod::gptq || q.method == spec::QuantMethod::awq)
    out += q.group_size ? fmt::format(", group {}", q.group_size) : std::string(", one group per row");
  if (q.double_quant) out += ", double quantization";
  if (!q.skip_modules.empty()) out += ", 16-bit " + joined(q.skip_modules, ",");
  return out;
}

// ---- text ------------------------------------------------------------------------

std::string shape_line(const spec::ModelSpec& m) {
  std::vector<std::string> parts;
  parts.push_back(fmt::format("{} layers", m.num_layers));
  parts.push_back(fmt::format("hidden {}", m.hidden_size));
  std::string heads = fmt::format("{} heads", m.num_heads);
  if (m.num_kv_heads != 0 && m.num_kv_heads != m.num_heads)
    heads += fmt::format(" ({} KV, head dim {})", m.num_kv_heads, m.head_dim);
  else
    heads += fmt::format(" (head dim {})", m.head_dim);
  parts.push_back(heads);
  if (m.intermediate_size != 0) parts.push_back(fmt::format("MLP {}", m.intermediate_size));
  if (m.moe.num_experts != 0)
    parts.push_back(fmt::format("MoE {} experts, top {}", m.moe.num_experts, m.moe.experts_per_token));
  parts.push_back(fmt::format("vocab {}", format_count(m.vocab_size)));
  return joined(parts, ", ");
}

std::vector<std::string> workload_lines(const spec::Workload& w) {
  std::vector<std::string> lines;
  std::string first = fmt::format("{}: batch {} x {} tokens", spec::name_of(w.mode), w.batch, w.seq);
  if (w.mode == spec::Mode::generate)
    first = fmt::format("generate: batch {}, prompt {} + {} new tokens", w.batch, w.seq, w.new_tokens);
  if (w.trains()) first += fmt::format(", {}", spec::name_of(w.optimizer));
  first += fmt::format(", {} attention", spec::name_of(w.attention));
  lines.push_back(first);
  std::vector<std::string> extra;
  if (w.mode == spec::Mode::lora || w.mode == spec::Mode::qlora)
    extra.push_back(
        fmt::format("LoRA rank {} on {}, dropout {}{}", w.lora.rank, lora_targets(w.lora), w.lora.dropout,
                    !w.lora.half_adapters ? "" : w.lora.half_is_fp16 ? ", fp16 adapters" : ", bf16 adapters"));
  if (w.autocast) extra.push_back(fmt::format("autocast {}", name_of(*w.autocast)));
  if (w.checkpointing && w.checkpoint_selective)
    extra.emplace_back("selective checkpointing");
  else if (w.checkpointing && w.checkpoint_every > 1)
    extra.push_back(fmt::format("checkpointing every {} layers", w.checkpoint_every));
  else if (w.checkpointing)
    extra.emplace_back("gradient checkpointing");
  if (w.compile != spec::Compile::none)
    extra.emplace_back(w.compile == spec::Compile::layers ? "compiled layers" : "compiled layers and loss");
  if (w.activation_offload) extra.emplace_back("activation offload");
  if (w.optimizer_in_backward) extra.emplace_back("optimizer in backward");
  if (w.sequence_packing) extra.emplace_back("packed sequences");
  if (w.images > 0)
    extra.push_back(w.image_width != 0
                        ? fmt::format("{} image{} of {}x{} per sequence", w.images, w.images == 1 ? "" : "s",
                                      w.image_width, w.image_height)
                        : fmt::format("{} image{} per sequence", w.images, w.images == 1 ? "" : "s"));
  if (w.grad_accum > 1) extra.push_back(fmt::format("gradient accumulation {}", w.grad_accum));
  if (w.master_weights) extra.emplace_back("fp32 master weights");
  if (w.loss != spec::Loss::hf) extra.push_back(fmt::format("loss {}", spec::name_of(w.loss)));
  if (w.fsdp_param_dtype) extra.push_back(fmt::format("FSDP mixed precision {}", name_of(*w.fsdp_param_dtype)));
  if (w.kv_cache) extra.push_back(fmt::format("KV cache {}", name_of(*w.kv_cache)));
  if (w.nodes > 1)
    extra.push_back(fmt::format("{} nodes x {} GPUs, sharding {}", w.nodes, w.gpus, spec::name_of(w.sharding)));
  else if (w.gpus > 1 || w.sharding != spec::Sharding::none)
    extra.push_back(fmt::format("{} GPUs, sharding {}", w.gpus, spec::name_of(w.sharding)));
  if (w.offload != spec::Offload::none) extra.push_back(fmt::format("offload {}", spec::name_of(w.offload)));
  if (!extra.empty()) lines.push_back(joined(extra, ", "));
  return lines;
}

// "rtx-4090 (NVIDIA GeForce RTX 4090), 24.00 GiB, 2.40 GiB kept free (10%)" or
// "40.00 GiB (40GiB)": the budget and its margin as given.
std::string budget_label(const advisor::Budget& budget) {
  const std::string size = format_bytes(budget.bytes);
  std::string label = size;
  if (!budget.gpu_id.empty())
    label = fmt::format("{}, {}", budget.label, size);
  else if (!budget.label.empty() && budget.label != size)
    label += fmt::format(" ({})", budget.label);
  const Bytes keep_free = budget.headroom_bytes();
  if (keep_free.value() > 0) {
    label += fmt::format(", {} kept free", format_bytes(keep_free));
    if (!budget.headroom_label.empty() && budget.headroom_label != format_bytes(keep_free))
      label += fmt::format(" ({})", budget.headroom_label);
  }
  return label;
}

// "FITS, headroom 1.20 GiB" / "TIGHT, ..." / "DOES NOT FIT, short by 3.00 GiB [with 2.40 GiB kept free]".
std::string verdict_text(const advisor::Budget& budget, const engine::Breakdown& b, const std::string& tight_fix) {
  const Bytes keep_free = budget.headroom_bytes();
  switch (budget.verdict(b.device_total, b.upper())) {
    case advisor::Verdict::fits:
      return fmt::format("FITS, headroom {}", format_signed_bytes(budget.spare(b.device_total)));
    case advisor::Verdict::tight: {
      std::string s = fmt::format("TIGHT, headroom {}, but the upper bound {} is short by {}",
                                  format_signed_bytes(budget.spare(b.device_total)), format_bytes(b.upper()),
                                  format_bytes(budget.short_by(b.upper())));
      if (keep_free.value() > 0) s += fmt::format(" with {} kept free", format_bytes(keep_free));
      if (!tight_fix.empty()) s += "; " + tight_fix;
      return s;
    }
    case advisor::Verdict::does_not_fit:
      if (keep_free.value() == 0)
        return fmt::format("DOES NOT FIT, short by {}", format_bytes(budget.short_by(b.device_total)));
      return fmt::format("DOES NOT FIT, short by {} with {} kept free", format_bytes(budget.short_by(b.device_total)),
                         format_bytes(keep_free));
  }
  return {};
}

// "x1.234 over 311 measured train/single cases (95th percentile)".
std::string upper_words(const engine::Breakdown& b) {
  if (b.upper_permille == 0) return "no measured error for this engine";
  std::string s = fmt::format("x{}.{:03} from {} measured {} cases (95th percentile)", b.upper_permille / 1000,
                              b.upper_permille % 1000, b.upper_cases, b.upper_from);
  if (b.upper_from != b.upper_group) s += fmt::format("; {} has fewer than 20", b.upper_group);
  return s;
}

// The Model and Workload lines.
std::vector<std::vector<std::string>> head_rows(const EstimateReport& r) {
  const auto& m = r.model;
  std::vector<std::vector<std::string>> head;
  std::string title = m.name;
  if (!m.source.empty() || !m.model_type.empty()) {
    std::vector<std::string> what;
    if (!m.source.empty()) what.push_back(m.source);
    if (!m.model_type.empty()) what.push_back(m.model_type);
    title += " (" + joined(what, ", ") + ")";
  }
  head.push_back({"Model", title});
  const spec::Quantization q = spec::scheme_of(r.workload);
  std::string params = fmt::format("{} parameters ({}), weights {}", format_params(m.params),
                                   format_count(m.params),
                                   q.method == spec::QuantMethod::none ? std::string(name_of(r.workload.weights))
                                                                       : scheme_text(q));
  if (m.exact_from_checkpoint) params += ", counted from the checkpoint";
  head.push_back({"", params});
  head.push_back({"", shape_line(m)});
  const auto wl = workload_lines(r.workload);
  for (std::size_t i = 0; i < wl.size(); ++i) head.push_back({i == 0 ? "Workload" : "", wl[i]});
  return head;
}

std::string estimate_text(const EstimateReport& r) {
  const auto& b = r.breakdown;
  std::string out = table(head_rows(r), {});
  out += '\n';

  std::vector<std::vector<std::string>> rows;
  rows.push_back({"Component", "Memory", "Share", "Description"});
  for (const auto& c : b.components) {
    // Empty parts (no KV cache in training, ...) stay in the JSON but would only clutter the table.
    if (!c.in_peak_allocated || c.bytes.value() == 0) continue;
    rows.push_back({std::string(to_string(c.id)), format_bytes(c.bytes), format_share(c.bytes, b.peak_allocated),
                    c.description});
  }
  const std::string at = b.peak_phase ? "at " + std::string(to_string(*b.peak_phase)) : std::string();
  rows.push_back({"peak allocated", format_bytes(b.peak_allocated),
                  format_share(b.peak_allocated, b.peak_allocated), at});
  for (const auto& c : b.components) {
    if (c.in_peak_allocated) continue;
    rows.push_back({std::string(to_string(c.id)), format_bytes(c.bytes), "-", c.description});
  }
  rows.push_back({"device total", format_bytes(b.device_total), "", "what the GPU must have"});
  if (b.upper_permille != 0) rows.push_back({"upper bound", format_bytes(b.upper()), "", upper_words(b)});
  out += table(rows, {Align::left, Align::right, Align::right, Align::left});

  if (r.budget) {
    out += '\n';
    out += table({{"Budget", budget_label(*r.budget)}, {"Verdict", verdict_text(*r.budget, b, r.tight_fix)}}, {});
  }

  const auto notes = all_notes(r);
  if (!notes.empty()) {
    out += "\nNotes\n";
    for (const auto& n : notes) out += "  - " + n + "\n";
  }
  return out;
}

}  // namespace

// ---- JSON ------------------------------------------------------------------------

ojson model_json(const spec::ModelSpec& m, const spec::Workload& w) {
  ojson j;
  j["name"] = m.name;
  j["source"] = m.source;
  j["model_type"] = m.model_type;
  j["family"] = m.family;
  j["params"] = m.params;
  j["dtype"] = name_of(w.weights);
  const spec::Quantization q = spec::scheme_of(w);
  if (q.method != spec::QuantMethod::none) {
    ojson qj;
    qj["scheme"] = spec::name_of(q);
    qj["bits"] = q.bits;
    qj["group_size"] =
        q.method == spec::QuantMethod::gptq || q.method == spec::QuantMethod::awq ? ojson(q.group_size) : ojson(nullptr);
    qj["double_quant"] = q.double_quant;
    qj["skip_modules"] = q.skip_modules;
    qj["exact_bytes_from_checkpoint"] = spec::keeps_checkpoint_packing(m, w);
    j["quantization"] = qj;
  } else {
    j["quantization"] = nullptr;
  }
  j["checkpoint_dtype"] = m.checkpoint_dtype ? ojson(name_of(*m.checkpoint_dtype)) : ojson(nullptr);
  j["exact_from_checkpoint"] = m.exact_from_checkpoint;
  j["hidden_size"] = m.hidden_size;
  j["num_layers"] = m.num_layers;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["intermediate_size"] = m.intermediate_size;
  j["vocab_size"] = m.vocab_size;
  j["max_positions"] = m.max_positions;
  j["tied_embeddings"] = m.tied_embeddings;
  if (m.moe.num_experts > 0) {
    ojson moe;
    moe["num_experts"] = m.moe.num_experts;
    moe["experts_per_token"] = m.moe.experts_per_token;
    moe["expert_intermediate"] = m.moe.expert_intermediate;
    moe["shared_intermediate"] = m.moe.shared_intermediate;
    j["moe"] = moe;
  } else {
    j["moe"] = nullptr;
  }
  return j;
}

ojson workload_json(const spec::Workload& w) {
  ojson j;
  j["mode"] = spec::name_of(w.mode);
  j["weights"] = name_of(w.weights);
  j["batch"] = w.batch;
  j["seq"] = w.seq;
  j["new_tokens"] = w.mode == spec::Mode::generate ? ojson(w.new_tokens) : ojson(nullptr);
  j["optimizer"] = w.trains() ? ojson(spec::name_of(w.optimizer)) : ojson(nullptr);
  j["autocast"] = w.autocast ? ojson(name_of(*w.autocast)) : ojson(nullptr);
  j["checkpointing"] = w.checkpointing;
  j["attention"] = spec::name_of(w.attention);
  if (spec::uses_lora(w.mode)) {
    ojson l;
    l["rank"] = w.lora.rank;
    l["targets"] = w.lora.all_linear ? ojson::array({"all-linear"}) : ojson(w.lora.targets);
    l["dropout"] = w.lora.dropout;
    l["dtype"] = !w.lora.half_adapters ? "fp32" : w.lora.half_is_fp16 ? "fp16" : "bf16";
    l["kernels"] = w.lora.unsloth_kernels ? "unsloth" : "peft";
    j["lora"] = l;
  } else {
    j["lora"] = nullptr;
  }
  j["grad_accum"] = w.grad_accum;
  j["gpus"] = w.gpus;
  j["nodes"] = w.nodes;
  j["sharding"] = spec::name_of(w.sharding);
  j["offload"] = spec::name_of(w.offload);
  j["master_weights"] = w.master_weights;
  j["kv_cache"] = w.kv_cache ? ojson(name_of(*w.kv_cache)) : ojson(nullptr);
  j["expandable_segments"] = w.expandable_segments;
  const std::string alloc_conf = spec::alloc_conf_string(w);
  j["alloc_conf"] = alloc_conf.empty() ? ojson(nullptr) : ojson(alloc_conf);
  j["cuda_context"] = w.cuda_context ? ojson(w.cuda_context->value()) : ojson(nullptr);
  j["checkpointing_kind"] = !w.checkpointing              ? ojson(nullptr)
                            : w.checkpoint_selective        ? ojson("selective")
                            : w.checkpoint_every > 1        ? ojson(fmt::format("every-{}", w.checkpoint_every))
                                                            : ojson("full");
  j["activation_offload"] = w.activation_offload;
  j["optimizer_in_backward"] = w.optimizer_in_backward;
  j["sequence_packing"] = w.sequence_packing;
  j["loss"] = w.trains() ? ojson(spec::name_of(w.loss)) : ojson(nullptr);
  j["fsdp_mixed_precision"] = w.fsdp_param_dtype ? ojson(name_of(*w.fsdp_param_dtype)) : ojson(nullptr);
  j["images"] = w.images;
  j["image_size"] = w.image_width != 0 ? ojson::array({w.image_width, w.image_height}) : ojson(nullptr);
  j["compile"] = w.compile == spec::Compile::none     ? ojson(nullptr)
                 : w.compile == spec::Compile::layers ? ojson("layers")
                                                      : ojson("all");
  return j;
}

/// What --images adds (null without images): the size each image is resized to, the tokens
/// one image and all of a sequence's images add to the prompt, the sequence the language model
/// sees, and the tower's sequences per image and tokens per sequence.
static ojson image_tokens_json(const spec::ModelSpec& m, const spec::Workload& w) {
  if (w.images == 0 || !m.vision) return ojson(nullptr);
  const spec::ImageWork iw = spec::image_work(*m.vision, w.images, w.image_width, w.image_height);
  ojson o;
  o["width"] = iw.per_image.width;
  o["height"] = iw.per_image.height;
  o["per_image"] = iw.per_image.prompt_tokens;
  o["per_sequence"] = iw.prompt_tokens;
  o["seq"] = w.seq + iw.prompt_tokens;
  o["tower_sequences_per_image"] = iw.per_image.sequences;
  o["tower_sequence_len"] = iw.per_image.sequence_len;
  return o;
}

ojson estimate_json(const EstimateReport& r) {
  const auto& b = r.breakdown;
  ojson j;
  j["schema_version"] = kSchemaVersion;
  j["model"] = model_json(r.model, r.workload);
  j["workload"] = workload_json(r.workload);
  j["image_tokens"] = image_tokens_json(r.model, r.workload);
  ojson components = ojson::array();
  for (const auto& c : b.components) {
    ojson o;
    o["id"] = std::string(to_string(c.id));
    o["bytes"] = c.bytes.value();
    o["description"] = c.description;
    o["in_peak_allocated"] = c.in_peak_allocated;
    components.push_back(o);
  }
  j["components"] = components;
  ojson phases = ojson::array();
  for (const auto& p : b.phases) {
    ojson o;
    o["id"] = std::string(to_string(p.id));
    o["bytes"] = p.allocated.value();
    phases.push_back(o);
  }
  j["phases"] = phases;
  j["peak_phase"] = b.peak_phase ? std::string(to_string(*b.peak_phase)) : std::string();
  j["peak_allocated_bytes"] = b.peak_allocated.value();
  j["device_total_bytes"] = b.device_total.value();
  j["device_total_upper_bytes"] = b.upper().value();
  j["upper_bound"] = upper_json(b);
  j["budget"] = r.budget ? budget_json(*r.budget, b) : ojson(nullptr);
  j["tight_fix"] = r.tight_fix.empty() ? ojson(nullptr) : ojson(r.tight_fix);
  j["notes"] = all_notes(r);
  return j;
}

ojson upper_json(const engine::Breakdown& b) {
  if (b.upper_permille == 0) return ojson(nullptr);
  ojson o;
  o["group"] = b.upper_group;
  o["from"] = b.upper_from;
  o["cases"] = b.upper_cases;
  o["factor_permille"] = b.upper_permille;
  return o;
}

ojson budget_json(const advisor::Budget& budget, const engine::Breakdown& b) {
  ojson o;
  o["bytes"] = budget.bytes.value();
  o["gpu"] = budget.gpu_id.empty() ? ojson(nullptr) : ojson(budget.gpu_id);
  o["headroom_bytes"] = budget.headroom_bytes().value();
  o["fits"] = budget.fits(b.device_total);
  o["spare_bytes"] = budget.spare(b.device_total);
  o["verdict"] = advisor::name_of(budget.verdict(b.device_total, b.upper()));
  o["upper_spare_bytes"] = budget.spare(b.upper());
  return o;
}

std::string heading(const EstimateReport& r) {
  auto rows = head_rows(r);
  if (r.budget) rows.push_back({"Budget", budget_label(*r.budget)});
  return table(rows, {});
}

std::vector<std::string> all_notes(const EstimateReport& r) {
  std::vector<std::string> notes;
  for (const auto* list : {&r.model.notes, &r.breakdown.notes, &r.notes})
    for (const auto& n : *list)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  return notes;
}

std::string render_estimate(const EstimateReport& r, Format f) {
  switch (f) {
    case Format::text: return estimate_text(r);
    case Format::json: return estimate_json(r).dump(2) + "\n";
  }
  return {};
}

std::string render_estimate(const EstimateReport& r, const std::optional<advisor::Advice>& advice, Format f) {
  if (f == Format::json) {
    ojson doc = estimate_json(r);
    doc["advice"] = advice ? ojson(advice_json(*advice)) : ojson();
    return doc.dump(2) + "\n";
  }
  std::string text = estimate_text(r);
  if (advice) text += "\n" + advice_summary(*advice);
  return text;
}

}  // namespace vramfit::render
