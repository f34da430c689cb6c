#pragma once
// `vramfit explain`: the OOM doctor's diagnosis as text for a human and as JSON for scripts,
// and its reconciliation with the engine's estimate. Free functions over the results,
// returning values; no I/O.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/doctor/diagnose.hpp"
#include "vramfit/doctor/oom.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

/// Version of the JSON document explain_json() returns. Bump on any breaking change.
inline constexpr int kExplainSchemaVersion = 1;

/// The report for a human: what failed, where the card's memory went, the diagnosis and the
/// ordered fixes. Without a diagnosis: one line saying no OOM message was found. Ends in '\n'.
std::string explain_text(const doctor::OomScan& scan, const std::optional<doctor::Diagnosis>& diagnosis);

/// The report as JSON: schema_version, found, messages_found, the explained message, the
/// accounting in integer bytes (null when unknown), primary, kinds, fixes (stable ids), findings,
/// and the memory summary. Keys are sorted (nlohmann::json), so the order is stable. Every
/// string is valid UTF-8, so dump() never throws.
nlohmann::json explain_json(const doctor::OomScan& scan, const std::optional<doctor::Diagnosis>& diagnosis);

/// The estimate beside what the message says of the card (the model flags were given).
struct Reconcile {
  EstimateReport report;  ///< the estimate (no budget)
  /// The tensor sizes passed to the doctor (engine::single_requests).
  std::vector<doctor::NamedSize> candidates;
  /// The advisor's walk against the card's total (no tiers), when the estimate is above it.
  std::optional<advisor::Advice> advice;
};

/// `vramfit explain`: text, explain_text then (with a reconciliation and a diagnosis) a
/// "Reconcile with the estimate" section; JSON, explain_json with an `estimate` key (null
/// without a reconciliation). Ends with a newline.
std::string render_explain(const doctor::OomScan& scan, const std::optional<doctor::Diagnosis>& diagnosis,
                           const std::optional<Reconcile>& reconcile, Format f);

}  // namespace vramfit::render
