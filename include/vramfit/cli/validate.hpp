#pragma once

#include <iosfwd>
#include <string>

#include "vramfit/core/exit_code.hpp"
#include "vramfit/render/render.hpp"

namespace vramfit::cli {

/// `vramfit validate PATH.jsonl`: estimates every case of a truth file (measure.py's
/// format) and prints the accuracy report (render::render_validate: text, or JSON: per-mode and
/// per-model statistics, the device-total statistics, OOM and parameter counts, the worst
/// cases). Each case's `config` is read relative to the file's folder, else its parent
/// folder (shared/truth keeps results/ beside models/). Returns ok; throws InputError when
/// the file cannot be read, is malformed, holds no case, or names a config that is missing.
ExitCode run_validate(const std::string& path, render::Format format, std::ostream& out);

}  // namespace vramfit::cli
