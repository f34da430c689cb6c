#pragma once
// `vramfit validate`: the engine's accuracy against a measured truth file, as text and JSON.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

/// The accuracy report as an aligned text table: per mode, per model, per sharding strategy,
/// the device-total statistics, OOM and parameter counts, the worst cases. Ends with a newline.
std::string accuracy_text(const accuracy::Report& report);

/// `validate --one-process`: the device total with each case estimated after the file's earlier
/// cases in measure.py's one process (accuracy::evaluate_in_process).
struct OneProcess {
  std::size_t processes = 0;  ///< processes the file was measured in
  std::size_t unknown = 0;    ///< cases after a first backward whose workspace placement is not modelled
  accuracy::Stats device;
  /// The same without the context: estimated peak + reserve against the measured peak reserved
  /// (the context grows within a process as earlier cases load kernels: 687 -> 1277 MiB in
  /// shared/truth's first process; the estimate's is a fresh process's).
  accuracy::Stats reserved;
  /// Cases under by more than 5 % in either column: (own process, one process), in file order.
  std::vector<std::pair<const accuracy::CaseResult*, const accuracy::CaseResult*>> under;
};

/// What `vramfit validate` checked.
struct Validation {
  std::string file;            ///< the truth file as given
  std::size_t cases = 0;       ///< cases in it
  std::optional<Bytes> device;  ///< the card's memory from its environment line, when present
  accuracy::Report report;
  std::optional<OneProcess> one_process;  ///< with --one-process
};

/// `vramfit validate`: text, accuracy_text (and a line saying OOM cases were not checked when
/// the file gives no card memory); JSON, {schema_version, file, cases, device_bytes, by_mode,
/// all, by_model, by_sharding (when any), device, oom, params, worst}. Ends with a newline.
std::string render_validate(const Validation& v, Format f);

}  // namespace vramfit::render
