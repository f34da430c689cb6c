#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

/// The memory a job may use on one GPU.
struct Budget {
  Bytes bytes;                     ///< usable device memory
  std::string label;               ///< how it was given: "h100-80gb" or "24GiB"
  std::optional<std::string> gpu;  ///< the GPU id when given by `--gpu`
  /// A margin kept free on the GPU (`--headroom`): the job fits when device_total + keep_free
  /// <= bytes. Zero when no margin was asked for.
  Bytes keep_free{};
  /// How the margin was given ("10%", "2GiB"); empty when none.
  std::string keep_free_label{};
};

/// True when the job fits: the device total (peak allocated + allocator reserve + CUDA
/// context, what the GPU must have) is at most the budget.
[[nodiscard]] bool fits(const engine::Breakdown& b, Bytes budget) noexcept;

/// True when the job fits the budget with its margin kept free: device_total + keep_free <= bytes.
[[nodiscard]] bool fits(const engine::Breakdown& b, const Budget& budget) noexcept;

/// budget - device total in bytes, negative when it does not fit (saturates at the int64 range).
[[nodiscard]] std::int64_t headroom_bytes(const engine::Breakdown& b, Bytes budget) noexcept;

/// Everything `vramfit estimate` reports.
struct EstimateReport {
  spec::ModelSpec model;
  spec::Workload workload;
  engine::Breakdown breakdown;
  std::optional<Budget> budget;
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
