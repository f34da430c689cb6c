#include "vramfit/accuracy/truth.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/process.hpp"

namespace vramfit::accuracy {

namespace {

using nlohmann::json;

// measure.py's mode names: "forward" is our inference.
spec::Mode mode_of(const std::string& s, const std::string& where) {
  if (s == "forward") return spec::Mode::inference;
  if (auto m = spec::parse_mode(s)) return *m;
  throw InputError(where + ": mode", fmt::format("unknown mode '{}'", s), "use forward, generate, train or lora");
}

// A whole number of `key`, read strictly: a negative, fractional, string or missing value
// is an error naming the key (nlohmann would wrap -1, truncate 1.5 or throw its own text).
std::uint64_t count(const json& c, const char* key, const std::string& where, std::optional<std::uint64_t> fallback,
                    bool positive = true) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw InputError(where + ": " + key, "missing", "fix or remove the line");
  }
  if (!it->is_number_unsigned() || (positive && it->get<std::uint64_t>() == 0))
    throw InputError(where + ": " + key,
                     fmt::format("expected a {} whole number, got {}", positive ? "positive" : "non-negative",
                                 json_excerpt(*it)),
                     "fix or remove the line");
  return it->get<std::uint64_t>();
}

// A string under `key`: missing or null gives `fallback` (an error naming the key when there is
// none); any other type is an error naming the key and quoting the value, not nlohmann's text.
std::string text(const json& c, const char* key, const std::string& where,
                 std::optional<std::string> fallback = std::nullopt) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    if (fallback) return *fallback;
    throw InputError(where + ": " + key, "missing", "fix or remove the line");
  }
  if (!it->is_string())
    throw InputError(where + ": " + key, fmt::format("expected a string, got {}", json_excerpt(*it)),
                     "fix or remove the line");
  return it->get<std::string>();
}

// A boolean under `key`, false when missing or null.
bool flag(const json& c, const char* key, const std::string& where) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) return false;
  if (!it->is_boolean())
    throw InputError(where + ": " + key, fmt::format("expected true or false, got {}", json_excerpt(*it)),
                     "fix or remove the line");
  return it->get<bool>();
}

spec::Workload workload_of(const json& c, const std::string& where) {
  spec::Workload w;
  w.mode = mode_of(text(c, "mode", where), where);
  const auto dt = parse_dtype(text(c, "weights_dtype", where));
  if (!dt) throw InputError(where + ": weights_dtype", "unknown dtype", "use fp32, bf16 or fp16");
  w.weights = *dt;
  if (c.contains("autocast") && !c["autocast"].is_null()) {
    const auto a = c["autocast"].is_string() ? parse_dtype(c["autocast"].get<std::string>()) : std::nullopt;
    if (a != DType::bf16 && a != DType::fp16)
      throw InputError(where + ": autocast", fmt::format("{} is not an autocast dtype", json_excerpt(c["autocast"])),
                       "use \"bf16\", \"fp16\" or null");
    w.autocast = a;
  }
  w.batch = count(c, "batch", where, std::nullopt);
  w.seq = count(c, "seq", where, std::nullopt);
  w.new_tokens = count(c, "new_tokens", where, 0, false);
  if (c.contains("optimizer") && !c["optimizer"].is_null()) {
    const auto o = spec::parse_optimizer(text(c, "optimizer", where));
    if (!o) throw InputError(where + ": optimizer", "unknown optimizer", "see vramfit estimate --help");
    w.optimizer = *o;
  }
  // checkpointing: true, or a kind (tests/accuracy/levers): "full", "selective", "every-N".
  if (const auto ck = c.find("checkpointing"); ck != c.end() && ck->is_string()) {
    const std::string k = ck->get<std::string>();
    w.checkpointing = true;
    if (k == "selective") {
      w.checkpoint_selective = true;
    } else if (k.rfind("every-", 0) == 0 && k.size() > 6 &&
               std::all_of(k.begin() + 6, k.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) && k.size() < 16) {
      w.checkpoint_every = std::stoull(k.substr(6));
      if (w.checkpoint_every == 0)
        throw InputError(where + ": checkpointing", "every-0 checkpoints nothing", "use every-N with N >= 1");
    } else if (k != "full") {
      throw InputError(where + ": checkpointing", fmt::format("unknown kind {}", json_excerpt(*ck)),
                       "use true, false, \"full\", \"selective\" or \"every-N\"");
    }
  } else {
    w.checkpointing = flag(c, "checkpointing", where);
  }
  // The training levers (tests/accuracy/levers/measure_levers.py).
  if (c.contains("loss") && !c["loss"].is_null()) {
    const auto l = c["loss"].is_string() ? spec::parse_loss(c["loss"].get<std::string>()) : std::nullopt;
    if (!l) throw InputError(where + ": loss", fmt::format("unknown loss {}", json_excerpt(c["loss"])), "use hf, chunked, fused-linear or cce");
    w.loss = *l;
  }
  if (c.contains("compile") && !c["compile"].is_null()) {
    const auto& v = c["compile"];
    // "model": torch.compile(model) with the loss inside its forward (HF Trainer's
    // torch_compile), modelled as "all".
    if (v == "layers")
      w.compile = spec::Compile::layers;
    else if (v == "all" || v == "model")
      w.compile = spec::Compile::all;
    else
      throw InputError(where + ": compile", fmt::format("unknown compile {}", json_excerpt(v)),
                       "use null, \"layers\", \"all\" or \"model\"");
  }
  w.activation_offload = flag(c, "activation_offload", where);
  w.optimizer_in_backward = flag(c, "optimizer_in_backward", where);
  w.sequence_packing = flag(c, "sequence_packing", where);
  w.master_weights = flag(c, "master_weights", where);
  if (c.contains("fsdp_mixed_precision") && !c["fsdp_mixed_precision"].is_null()) {
    const auto& v = c["fsdp_mixed_precision"];
    const auto d = v.is_string() ? parse_dtype(v.get<std::string>()) : std::nullopt;
    if (d != DType::bf16 && d != DType::fp16)
      throw InputError(where + ": fsdp_mixed_precision", fmt::format("{} is not a 16-bit dtype", json_excerpt(v)),
                       "use \"bf16\", \"fp16\" or null");
    w.fsdp_param_dtype = d;
  }
  w.attention = text(c, "attn", where, "sdpa") == "eager" ? spec::Attention::eager : spec::Attention::sdpa;
  if (c.contains("lora") && !c["lora"].is_null()) {
    const auto& l = c["lora"];
    const std::string lw = where + ": lora";
    if (!l.is_object())
      throw InputError(lw, fmt::format("expected an object, got {}", json_excerpt(l)), "fix or remove the line");
    w.lora.rank = count(l, "r", lw, std::nullopt);
    const auto t = l.find("targets");
    if (t == l.end() || t->is_null()) throw InputError(lw + ": targets", "missing", "fix or remove the line");
    if (t->is_string()) {
      w.lora.all_linear = t->get<std::string>() == "all-linear";
      if (!w.lora.all_linear) w.lora.targets = {t->get<std::string>()};
    } else {
      w.lora.all_linear = false;
      bool ok = t->is_array();
      for (const auto& e : *t) ok = ok && e.is_string();
      if (!ok)
        throw InputError(lw + ": targets",
                         fmt::format("expected \"all-linear\" or a list of module names, got {}", json_excerpt(*t)),
                         "fix or remove the line");
      w.lora.targets = t->get<std::vector<std::string>>();
    }
    // "dtype": the adapters' dtype (peft's autocast_adapter_dtype=False keeps them in the
    // base weights' 16-bit dtype; --lora-dtype).
    if (const auto d = l.find("dtype"); d != l.end() && !d->is_null()) {
      const auto adt = d->is_string() ? parse_dtype(d->get<std::string>()) : std::nullopt;
      if (!adt || (*adt != DType::fp32 && *adt != DType::bf16 && *adt != DType::fp16))
        throw InputError(lw + ": dtype", fmt::format("{} is not an adapter dtype", json_excerpt(*d)),
                         "use \"fp32\", \"bf16\" or \"fp16\"");
      w.lora.half_adapters = *adt != DType::fp32;
      w.lora.half_is_fp16 = *adt == DType::fp16;
    }
    if (const auto d = l.find("dropout"); d != l.end() && !d->is_null()) {
      if (!d->is_number() || !(d->get<double>() >= 0.0 && d->get<double>() < 1.0))
        throw InputError(where + ": lora: dropout", fmt::format("expected a probability in [0, 1), got {}", json_excerpt(*d)),
                         "fix or remove the line");
      w.lora.dropout = d->get<double>();
    }
  }
  // Sharded training (tests/accuracy/sharded/measure_sharded.py): the figures are per GPU,
  // the busiest rank's.
  w.gpus = count(c, "gpus", where, 1);
  if (c.contains("sharding") && !c["sharding"].is_null()) {
    const auto s = spec::parse_sharding(text(c, "sharding", where));
    if (!s)
      throw InputError(where + ": sharding", "unknown sharding strategy", "use ddp, fsdp, fsdp-grad-op, zero2 or zero3");
    w.sharding = *s;
  }
  return w;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest-rank percentile: the smallest value with at least q of the values at or below it.
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<TruthCase> parse_truth(std::string_view jsonl, std::string_view origin) {
  std::vector<TruthCase> out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  bool expandable = false;
  std::uint64_t device_memory = 0;
  while (pos < jsonl.size()) {
    std::size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view line = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", origin, line_no);
    const json c = parse_json(line, where, "each line must be one JSON object, as measure.py writes");
    if (!c.is_object()) throw InputError(where, "not a JSON object", "each line must be one case object");
    if (flag(c, "env", where)) {
      // The environment line says how the allocator was configured for every case after it.
      const auto conf = text(c, "alloc_conf", where, "");
      expandable = conf.find("expandable_segments:True") != std::string::npos;
      // The card the cases ran on: its allocator reserves within it (Workload::device_memory).
      device_memory = count(c, "total_bytes", where, 0, false);
      continue;
    }
    try {
      TruthCase t;
      t.id = text(c, "id", where);
      t.model = text(c, "model", where, "");
      t.config = text(c, "config", where);
      t.status = text(c, "status", where, "ok");
      t.workload = workload_of(c, where);
      t.workload.expandable_segments = expandable;
      t.workload.device_memory = device_memory;
      t.params = count(c, "params", where, 0, false);
      t.peak_allocated = Bytes{count(c, "peak_allocated_bytes", where, 0, false)};
      t.peak_reserved = Bytes{count(c, "peak_reserved_bytes", where, 0, false)};
      t.non_torch = Bytes{count(c, "non_torch_bytes", where, 0, false)};
      out.push_back(std::move(t));
    } catch (const json::exception& e) {
      // Every field is read through text/flag/count above; this is a last guard, kept short.
      throw InputError(where, fmt::format("bad case: {}", text_excerpt(e.what(), 160)), "fix or remove the line");
    }
  }
  return out;
}

std::optional<Bytes> truth_device_bytes(std::string_view jsonl) {
  const std::string_view first = jsonl.substr(0, jsonl.find('\n'));
  const auto parsed = try_parse_json(first);
  if (!parsed) return std::nullopt;
  const json& env = *parsed;
  if (env.is_object() && env.contains("env") && env["env"].is_boolean() && env["env"].get<bool>() &&
      env.contains("total_bytes") && env["total_bytes"].is_number_unsigned())
    return Bytes{env["total_bytes"].get<std::uint64_t>()};
  return std::nullopt;
}

namespace {

// One case's estimate `b` against what was measured.
CaseResult result_of(const TruthCase& truth, const spec::ModelSpec& model, const engine::Breakdown& b) {
  CaseResult r;
  r.truth = &truth;
  r.estimate_peak = b.peak_allocated;
  r.estimate_device_total = b.device_total;
  r.estimate_device_upper = b.upper();
  r.estimate_context = b.cuda_context;
  r.estimate_params = model.params;
  if (truth.status == "ok" && truth.peak_allocated.value() > 0) {
    r.error = static_cast<double>(b.peak_allocated.value()) / static_cast<double>(truth.peak_allocated.value()) - 1;
    const auto measured = truth.peak_reserved + truth.non_torch;
    r.device_error = static_cast<double>(b.device_total.value()) / static_cast<double>(measured.value()) - 1;
  }
  return r;
}

}  // namespace

CaseResult evaluate(const TruthCase& truth, const spec::ModelSpec& model) {
  return result_of(truth, model, engine::estimate(model, truth.workload));
}

CaseModels::CaseModels(const std::vector<TruthCase>& cases, const Loader& load) {
  for (const auto& c : cases)
    if (by_config_.count(c.config) == 0) by_config_.emplace(c.config, load(c));
}

std::vector<const spec::ModelSpec*> CaseModels::of_all(const std::vector<TruthCase>& cases) const {
  std::vector<const spec::ModelSpec*> out;
  out.reserve(cases.size());
  for (const auto& c : cases) out.push_back(&of(c));
  return out;
}

std::vector<CaseResult> evaluate_all(const std::vector<TruthCase>& cases, const CaseModels& models,
                                     std::string_view origin) {
  std::vector<CaseResult> out;
  out.reserve(cases.size());
  for (const auto& c : cases) {
    try {
      out.push_back(evaluate(c, models.of(c)));
    } catch (const InputError& e) {
      std::vector<Diagnostic> diags = e.diagnostics();
      for (auto& d : diags) d.field = fmt::format("{}: case '{}': {}", origin, c.id, d.field);
      throw InputError(std::move(diags));
    }
  }
  return out;
}

InProcess evaluate_in_process(const std::vector<TruthCase>& cases, const std::vector<const spec::ModelSpec*>& models) {
  InProcess out;
  engine::ProcessHistory history;
  std::uint64_t context = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const TruthCase& truth = cases[i];
    if (i == 0 || truth.non_torch.value() < context) {
      history = {};
      ++out.processes;
    }
    context = truth.non_torch.value();
    if (history.unknown) ++out.unknown;
    engine::ProcessHistory after = history;
    const auto b = engine::estimate_in_process(*models[i], truth.workload, after);
    if (truth.status == "ok") history = after;
    out.results.push_back(result_of(truth, *models[i], b));
  }
  return out;
}

Stats stats(const std::vector<const CaseResult*>& results, bool device) {
  Stats s;
  std::vector<double> abs;
  std::size_t unsafe = 0;
  for (const auto* r : results) {
    if (r->truth->status != "ok") continue;
    const double e = device ? r->device_error : r->error;
    abs.push_back(std::fabs(e));
    if (e < -0.05) ++unsafe;
  }
  s.cases = abs.size();
  if (abs.empty()) return s;
  s.median_abs = median(abs);
  s.p90_abs = percentile(abs, 0.9);
  s.max_abs = *std::max_element(abs.begin(), abs.end());
  s.unsafe_share = static_cast<double>(unsafe) / static_cast<double>(abs.size());
  return s;
}

Report make_report(const std::vector<CaseResult>& results, Bytes device_bytes) {
  Report r;
  std::map<std::string, std::vector<const CaseResult*>> modes;
  std::map<std::string, std::vector<const CaseResult*>> models;
  std::map<std::string, std::vector<const CaseResult*>> shardings;
  std::vector<const CaseResult*> all;
  for (const auto& x : results) {
    const std::string mode = x.truth->workload.mode == spec::Mode::inference ? "forward"
                                                                             : std::string(spec::name_of(x.truth->workload.mode));
    modes[mode].push_back(&x);
    models[x.truth->model].push_back(&x);
    const auto& w = x.truth->workload;
    if (w.sharding != spec::Sharding::none || w.gpus > 1) {
      const std::string name(spec::name_of(w.sharding));
      shardings[name].push_back(&x);
      shardings[fmt::format("{} x{}", name, w.gpus)].push_back(&x);
    }
    all.push_back(&x);
    if (x.truth->status == "oom") {
      ++r.oom_cases;
      if (x.estimate_peak > device_bytes) ++r.oom_predicted;
    }
    if (x.truth->params > 0 && x.truth->workload.mode != spec::Mode::lora) {
      ++r.params_checked;
      if (x.estimate_params == x.truth->params) ++r.params_exact;
    }
  }
  for (const auto& [k, v] : modes) r.by_mode.emplace_back(k, stats(v));
  for (const auto& [k, v] : models) r.by_model.emplace_back(k, stats(v));
  for (const auto& [k, v] : shardings) r.by_sharding.emplace_back(k, stats(v));
  r.all = stats(all);
  r.device = stats(all, true);
  std::vector<const CaseResult*> ok;
  for (const auto* x : all)
    if (x->truth->status == "ok") ok.push_back(x);
  std::sort(ok.begin(), ok.end(), [](const CaseResult* a, const CaseResult* b) {
    return std::fabs(a->error) > std::fabs(b->error);
  });
  ok.resize(std::min<std::size_t>(ok.size(), 10));
  r.worst = ok;
  return r;
}

}  // namespace vramfit::accuracy
