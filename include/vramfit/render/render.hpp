#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vramfit/advisor/advise.hpp"
#include "vramfit/advisor/budget.hpp"
#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/engine/breakdown.hpp"
#include "vramfit/spec/model_spec.hpp"
#include "vramfit/spec/workload.hpp"

namespace vramfit::render {

/// Output formats of every command.
enum class Format {
  text,  ///< aligned tables for a human (the default)
  json,  ///< `--json`: stable keys, schema_version, integer bytes
};

/// The version of every JSON document vramfit prints. Bumped only when a key changes
/// meaning or disappears; new keys may appear within a version.
inline constexpr int kSchemaVersion = 3;

/// Everything `vramfit estimate` reports.
struct EstimateReport {
  spec::ModelSpec model;
  spec::Workload workload;
  engine::Breakdown breakdown;
  std::optional<advisor::Budget> budget;  ///< the one budget type; its verdict decides "fits"
  std::vector<std::string> notes;  ///< the command's own notes, printed after the spec's and engine's
  /// Under a TIGHT verdict: the fix that makes the upper bound fit too ("the fix that buys it"),
  /// or why none does; empty otherwise.
  std::string tight_fix;
};

/// The notes of a report in print order: the model's, the engine's, the command's; duplicates dropped.
[[nodiscard]] std::vector<std::string> all_notes(const EstimateReport& r);

/// The estimate as a table (model, workload, components, totals, verdict, notes) or as JSON
/// (see README "JSON output"). Ends with a newline.
std::string render_estimate(const EstimateReport& r, Format f);

/// `vramfit estimate`: the estimate and, under an exceeded budget, the advisor's short advice
/// (text: render::advice_summary after the report; JSON: the `advice` key, null when there is
/// none). Ends with a newline.
std::string render_estimate(const EstimateReport& r, const std::optional<advisor::Advice>& advice, Format f);

// The pieces of the documents, for the commands that build on the estimate (advise, fit,
// explain): nothing renders a document to parse it back.

/// The `model` object: name, source, shape, the weights' dtype and packing as `w` loads them.
nlohmann::ordered_json model_json(const spec::ModelSpec& m, const spec::Workload& w);
/// The `workload` object: the one serializer of spec::Workload (estimate, advise's steps and
/// tiers, fit, explain).
nlohmann::ordered_json workload_json(const spec::Workload& w);
/// The `budget` object of a job needing `b.device_total`, the one serializer of
/// advisor::Budget: bytes, gpu, headroom_bytes (the --headroom margin), fits (the budget's
/// verdict), spare_bytes (bytes - device_total, negative when the GPU has less).
nlohmann::ordered_json budget_json(const advisor::Budget& budget, const engine::Breakdown& b);
/// The `upper_bound` object: {group, from, cases, factor_permille} of Breakdown's upper bound, or
/// null when no calibration applies.
nlohmann::ordered_json upper_json(const engine::Breakdown& b);
/// The whole estimate document (schema_version first), as render_estimate prints it.
nlohmann::ordered_json estimate_json(const EstimateReport& r);
/// The heading of `advise` and `fit`: the estimate's Model and Workload lines, and the Budget
/// line when there is one, aligned as one block. Ends with a newline.
std::string heading(const EstimateReport& r);

/// One row of `vramfit models`: a preset and the spec built from its config.
struct ModelEntry {
  catalog::Preset preset;
  spec::ModelSpec spec;
};

/// The preset list. Ends with a newline.
std::string render_models(const std::vector<ModelEntry>& models, Format f);

/// The GPU catalog and the provider tiers. Ends with a newline.
std::string render_gpus(const catalog::Catalog& c, Format f);

}  // namespace vramfit::render
