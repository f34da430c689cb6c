#include "vramfit/render/advice.hpp"

#include <string>

#include <fmt/format.h>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/render/format.hpp"

namespace vramfit::render {

using advisor::Advice;
using advisor::FitResult;
using advisor::LargerBatch;
using advisor::StepResult;
using advisor::TierChoice;

namespace {

using json = nlohmann::ordered_json;

std::string human(Bytes b) { return format_bytes(b); }

/// before - after as a saving (never negative: the walk keeps only fixes that lower memory).
Bytes saving(const StepResult& s) { return Bytes::saturating_sub(s.before, s.after); }

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

std::string_view status_of(const StepResult& s) {
  if (s.applied) return "applied";
  return s.ruled_out ? "ruled_out" : "skipped";
}

json tier_json(const std::optional<TierChoice>& t) {
  if (!t) return nullptr;
  json fixes_applied = json::array();
  for (const auto& f : t->fixes) fixes_applied.push_back(f);
  return json{{"id", t->tier.id},
              {"provider", or_null(t->tier.provider)},
              {"gpu", t->tier.gpu},
              {"count", t->tier.count},
              {"gpu_memory", t->gpu_memory.value()},
              {"total_memory", t->total_memory.value()},
              {"per_gpu_total", t->per_gpu_total.value()},
              {"fixes", std::move(fixes_applied)},
              {"workload", json(workload_json(t->workload))}};
}

std::string tier_line(const TierChoice& t) {
  std::string s =
      t.tier.provider.empty() ? std::string{} : fmt::format("{} tier '{}': ", t.tier.provider, t.tier.id);
  s += fmt::format("{} x {} ({} in all), {} per GPU", t.tier.count, t.tier.gpu, human(t.total_memory),
                   human(t.per_gpu_total));
  if (t.tier.count > 1) s += fmt::format(", sharding {}", spec::name_of(t.workload.sharding));
  return s;
}

std::size_t applied_count(const Advice& a) {
  std::size_t n = 0;
  for (const auto& s : a.steps) n += s.applied ? 1 : 0;
  return n;
}

std::string budget_words(const Advice& a) {
  std::string s = fmt::format("a budget of {}", human(a.budget.bytes));
  if (a.budget.headroom_bytes().value() > 0) s += fmt::format(" ({} kept free)", human(a.budget.headroom_bytes()));
  return s;
}

std::string larger_batch_line(const Advice& a) {
  const LargerBatch& l = *a.larger_batch;
  std::string s = fmt::format("With these fixes a larger micro-batch fits too: batch {}", l.batch);
  if (a.final_workload.trains()) s += fmt::format(", grad_accum {}", l.grad_accum);
  return s + fmt::format(" ({}).", human(l.device_total));
}

}  // namespace

nlohmann::ordered_json advice_json(const Advice& a) {
  json steps = json::array();
  for (const auto& s : a.steps) {
    steps.push_back(json{{"id", s.id},
                         {"title", s.title},
                         {"status", status_of(s)},
                         {"reason", s.reason},
                         {"how", or_null(s.how)},
                         {"warning", or_null(s.warning)},
                         {"before", s.before.value()},
                         {"after", s.after.value()},
                         {"saves", saving(s).value()},
                         {"fits", s.fits},
                         {"workload", json(workload_json(s.workload))}});
  }
  return json{{"budget", json(budget_json(a.budget, a.initial_estimate))},
              {"fits_initially", a.fits_initially},
              {"fits", a.fits},
              {"initial_device_total", a.initial_estimate.device_total.value()},
              {"initial_device_total_upper", a.initial_estimate.upper().value()},
              {"final_device_total", a.final_estimate.device_total.value()},
              {"final_device_total_upper", a.final_estimate.upper().value()},
              {"steps", std::move(steps)},
              {"final_workload", json(workload_json(a.final_workload))},
              {"larger_batch", a.larger_batch ? json{{"batch", a.larger_batch->batch},
                                                     {"grad_accum", a.larger_batch->grad_accum},
                                                     {"device_total", a.larger_batch->device_total.value()}}
                                              : json(nullptr)},
              {"tiers", json{{"provider", a.provider ? json(*a.provider) : json(nullptr)},
                             {"considered", a.tiers_considered},
                             {"unchanged", tier_json(a.tier_unchanged)},
                             {"with_fixes", tier_json(a.tier_with_fixes)}}}};
}

std::string advice_text(const Advice& a) {
  std::string out;
  const Bytes initial = a.initial_estimate.device_total;
  if (a.fits_initially && !a.budget.fits(a.initial_estimate.upper())) {
    out += fmt::format("Tight: needs {} of {}, but the upper bound {} does not fit (short by {}); "
                       "'vramfit estimate' with the same flags names the fix that covers it.\n",
                       human(initial), budget_words(a), human(a.initial_estimate.upper()),
                       human(a.budget.short_by(a.initial_estimate.upper())));
  } else if (a.fits_initially) {
    out += fmt::format("Fits: needs {} of {}; nothing to fix.\n", human(initial), budget_words(a));
  } else {
    out += fmt::format("Does not fit: needs {} on {}.\n", human(initial), budget_words(a));
    out += "\nFixes, in order, each re-estimated by the engine:\n";
    for (std::size_t i = 0; i < a.steps.size(); ++i) {
      const StepResult& s = a.steps[i];
      out += fmt::format("  {}. {}  {}\n", i + 1, s.id, s.title);
      if (s.applied) {
        out += fmt::format("     applied: {} -> {} (saves {})\n", human(s.before), human(s.after),
                           human(saving(s)));
        out += fmt::format("     {}\n", s.reason);
        if (!s.how.empty()) out += fmt::format("     how: {}\n", s.how);
        if (!s.warning.empty()) out += fmt::format("     cost: {}\n", s.warning);
      } else {
        out += fmt::format("     {}: {}\n", s.ruled_out ? "ruled out" : "skipped", s.reason);
        if (!s.how.empty()) out += fmt::format("     how: {}\n", s.how);
      }
    }
    const Bytes final_total = a.final_estimate.device_total;
    if (a.fits)
      out += fmt::format("\nFits after {} fix{}: {} on {}.\n", applied_count(a),
                         applied_count(a) == 1 ? "" : "es", human(final_total), budget_words(a));
    else
      out += fmt::format("\nStill does not fit after every fix: {} on {}.\n", human(final_total),
                         budget_words(a));
    if (a.larger_batch) out += larger_batch_line(a) + "\n";
  }
  if (a.tiers_considered > 0) {
    out += fmt::format("\nGPU tiers ({} considered{}, smallest total memory first):\n", a.tiers_considered,
                       a.provider ? ", provider " + *a.provider : "");
    const std::string none = a.provider ? fmt::format("no tier of {} fits ('--provider {}' searches every tier and GPU)",
                                                      *a.provider, catalog::kAllProviders)
                                        : std::string("no tier fits");
    out += "  as given:    " + (a.tier_unchanged ? tier_line(*a.tier_unchanged) : none) + "\n";
    std::string fixed = none;
    if (a.tier_with_fixes) {
      fixed = tier_line(*a.tier_with_fixes);
      const std::string ids = joined(a.tier_with_fixes->fixes);
      fixed += ids.empty() ? ", no fix needed" : ", after " + ids;
    }
    out += "  with fixes:  " + fixed + "\n";
  }
  return out;
}

std::string advice_summary(const Advice& a) {
  if (a.fits_initially) return {};
  std::string out = "Advice (run 'vramfit advise' with the same flags for details):\n";
  for (const auto& s : a.steps)
    if (s.applied) out += fmt::format("  - {}: {} (saves {})\n", s.id, s.reason, human(saving(s)));
  if (a.fits)
    out += fmt::format("  => fits: {} on {}\n", human(a.final_estimate.device_total), budget_words(a));
  else
    out +=
        fmt::format("  => still does not fit after every fix ({})\n", human(a.final_estimate.device_total));
  if (a.larger_batch) out += "  " + larger_batch_line(a) + "\n";
  if (a.tier_unchanged)
    out += "  smallest tier as given: " + tier_line(*a.tier_unchanged) + "\n";
  else if (a.tiers_considered > 0)
    out += a.provider ? fmt::format("  no tier of {} runs it as given ('--provider {}' searches every tier and GPU)\n",
                                    *a.provider, catalog::kAllProviders)
                      : std::string("  no tier runs it as given\n");
  if (a.tier_with_fixes && !a.tier_with_fixes->fixes.empty())
    out += "  smallest tier with fixes: " + tier_line(*a.tier_with_fixes) + "\n";
  return out;
}

nlohmann::ordered_json fit_json(const FitResult& f) {
  return json{{"dimension", advisor::name_of(f.dimension)},
              {"fits_at_one", f.fits_at_one},
              {"value", f.value},
              {"capped", f.capped},
              {"cap", advisor::search_cap(f.dimension)},
              {"device_total", f.estimate.device_total.value()},
              {"device_total_upper", f.estimate.upper().value()},
              {"budget", json(budget_json(f.budget, f.estimate))},
              {"estimates", f.estimates},
              {"notes", f.notes},
              {"workload", json(workload_json(f.workload))}};
}

std::string fit_text(const FitResult& f) {
  std::string out;
  std::string budget = human(f.budget.bytes);
  if (f.budget.headroom_bytes().value() > 0) budget += fmt::format(" ({} kept free)", human(f.budget.headroom_bytes()));
  const std::string_view dim = advisor::name_of(f.dimension);
  if (!f.fits_at_one) {
    out += fmt::format("Nothing fits: even {} 1 needs {} on a budget of {}.\n", dim,
                       human(f.estimate.device_total), budget);
    out += "Run 'vramfit advise' with the same flags for fixes and GPU tiers.\n";
    return out;
  }
  std::string upper;
  if (f.estimate.upper_permille != 0)
    upper = fmt::format("; upper bound {}{}", human(f.estimate.upper()),
                        f.budget.fits(f.estimate.upper()) ? "" : ", TIGHT");
  out += fmt::format("Largest {} that fits: {}{} (needs {} of {}{}).\n", dim, f.value, f.capped ? " or more" : "",
                     human(f.estimate.device_total), budget, upper);
  for (const auto& n : f.notes) out += fmt::format("note: {}\n", n);
  return out;
}

namespace {

/// {schema_version, model, workload} of the estimate (the workload as given), then every key
/// of `body` in its order; a body key that clashes with those three gets `rename` prefixed.
std::string document(const EstimateReport& report, const nlohmann::ordered_json& body, const std::string& rename) {
  nlohmann::ordered_json doc;
  doc["schema_version"] = kSchemaVersion;
  doc["model"] = model_json(report.model, report.workload);
  doc["workload"] = workload_json(report.workload);
  for (const auto& [key, value] : body.items()) {
    const bool clash = key == "schema_version" || key == "model" || key == "workload";
    doc[clash ? rename + key : key] = value;
  }
  return doc.dump(2) + "\n";
}

}  // namespace

std::string render_advice(const EstimateReport& report, const Advice& advice, Format f) {
  return f == Format::json ? document(report, advice_json(advice), "body_")
                           : heading(report) + "\n" + advice_text(advice);
}

std::string render_fit(const EstimateReport& report, const FitResult& fit, Format f) {
  return f == Format::json ? document(report, fit_json(fit), "solved_") : heading(report) + "\n" + fit_text(fit);
}

}  // namespace vramfit::render
