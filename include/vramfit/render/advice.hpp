#pragma once
// The advisor's answers as text and JSON: `vramfit advise`, `vramfit fit`, and the short
// advice `estimate` prints under an exceeded budget.

#include <string>

#include <nlohmann/json.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/fit.hpp"
#include "vramfit/render/render.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::render {

/// The advice as JSON (keys in the order below; integer bytes; stable fix ids). See the README section
/// "JSON output" for `vramfit advise`: {budget (budget_json of the workload as given), fits_initially, fits,
/// initial_device_total, final_device_total, steps: [{id, title, status ("applied",
/// "skipped", "ruled_out"), reason, how, warning, before, after, saves, fits, workload}],
/// final_workload (workloads as workload_json), larger_batch ({batch, grad_accum, device_total} or null),
/// tiers: {provider, considered, unchanged, with_fixes}}. Without `schema_version`:
/// render_advice wraps it in its document.
nlohmann::ordered_json advice_json(const advisor::Advice& advice);

/// The advice for a human: the verdict, the fixes with before/after/saving, the tiers.
/// Ends with a newline.
std::string advice_text(const advisor::Advice& advice);

/// The short form `estimate` prints under an exceeded budget: one line per applied fix
/// ("  - reduce_batch: batch 8 -> 2, grad_accum 1 -> 4 (saves 3.20 GiB)"), the verdict
/// after them, the smallest tier, and a pointer to `vramfit advise`. Empty when it fits.
/// Ends with a newline when not empty.
std::string advice_summary(const advisor::Advice& advice);

/// The fit result as JSON: {dimension, fits_at_one, value, capped, cap, device_total,
/// budget (budget_json at the answer), estimates, notes, workload}.
nlohmann::ordered_json fit_json(const advisor::FitResult& fit);

/// The fit result for a human ("largest batch that fits: 12 (device total 71.20 GiB of
/// 80.00 GiB)" or "nothing fits: even batch 1 needs ..."). Ends with a newline.
std::string fit_text(const advisor::FitResult& fit);

/// `vramfit advise`: text, the estimate's heading and advice_text; JSON, {schema_version,
/// model, workload (the workload as given), then every key of advice_json}. Ends with a newline.
std::string render_advice(const EstimateReport& report, const advisor::Advice& advice, Format f);

/// `vramfit fit`: text, the estimate's heading and fit_text; JSON, {schema_version, model,
/// workload, then every key of fit_json, its `workload` as `solved_workload`}. Ends with a newline.
std::string render_fit(const EstimateReport& report, const advisor::FitResult& fit, Format f);

}  // namespace vramfit::render
