#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
inline constexpr int kSchemaVersion = 1;

/// Everything `vramfit estimate` reports.
struct EstimateReport {
  spec::ModelSpec model;
  spec::Workload workload;
  engine::Breakdown breakdown;
  std::optional<advisor::Budget> budget;  ///< the one budget type; its verdict decides "fits"
  std::vector<std::string> notes;  ///< the command's own notes, printed after the spec's and engine's
};

/// The notes of a report in print order: the model's, the engine's, the command's; duplicates dropped.
[[nodiscard]] std::vector<std::string> all_notes(const EstimateReport& r);

/// The estimate as a table (model, workload, components, totals, verdict, notes) or as JSON
/// (see README "JSON output"). Ends with a newline.
std::string render_estimate(const EstimateReport& r, Format f);

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
