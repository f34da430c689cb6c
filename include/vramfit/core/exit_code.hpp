#pragma once

namespace vramfit {

/// The process exit codes, documented in the README. Scripts and CI depend on them.
enum class ExitCode : int {
  ok = 0,            ///< the command succeeded; with a budget, the workload fits
  does_not_fit = 1,  ///< the workload does not fit the budget (or: no OOM found, for `explain`)
  usage = 2,         ///< bad flags or bad input (a file, a field, a value)
  internal = 3,      ///< a bug in vramfit
};

/// The integer value handed to the operating system.
constexpr int to_int(ExitCode c) noexcept { return static_cast<int>(c); }

}  // namespace vramfit
