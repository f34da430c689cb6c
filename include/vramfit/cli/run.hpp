#pragma once

#include <iosfwd>

namespace vramfit::cli {

/// Runs the command line: parses `argv`, reads files, writes the report to `out` and the
/// diagnostics to `err`, and returns the process exit code (see ExitCode). Never throws.
/// `stdin_in` is read by commands that take standard input (`explain -`).
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err, std::istream& stdin_in);

}  // namespace vramfit::cli
