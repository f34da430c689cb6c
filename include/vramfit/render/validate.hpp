#pragma once
// `vramfit validate`: the engine's accuracy against a measured truth file, as text and JSON.

#include <cstddef>
#include <optional>
#include <string>

#include "vramfit/accuracy/truth.hpp"
#include "vramfit/core/bytes.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::render {

/// The accuracy report as an aligned text table: per mode, per model, per sharding strategy,
/// the device-total statistics, OOM and parameter counts, the worst cases. Ends with a newline.
std::string accuracy_text(const accuracy::Report& report);

/// What `vramfit validate` checked.
struct Validation {
  std::string file;            ///< the truth file as given
  std::size_t cases = 0;       ///< cases in it
  std::optional<Bytes> device;  ///< the card's memory from its environment line, when present
  accuracy::Report report;
};

/// `vramfit validate`: text, accuracy_text (and a line saying OOM cases were not checked when
/// the file gives no card memory); JSON, {schema_version, file, cases, device_bytes, by_mode,
/// all, by_model, by_sharding (when any), device, oom, params, worst}. Ends with a newline.
std::string render_validate(const Validation& v, Format f);

}  // namespace vramfit::render
