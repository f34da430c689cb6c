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
/// `one_process` (--one-process) adds the device total with every case estimated as measure.py
/// ran the file: after the cases before it in one process (accuracy::evaluate_in_process).
ExitCode run_validate(const std::string& path, render::Format format, std::ostream& out, bool one_process = false);

}  // namespace vramfit::cli
