#pragma once

// Runs vramfit::cli::run in-process, as the shell would, and captures everything it prints.
#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "vramfit/cli/run.hpp"

namespace vramfit::test {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

/// Runs `vramfit args...`. VRAMFIT_DATA_DIR is cleared so the user's environment does not leak in.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = {}) {
  ::unsetenv("VRAMFIT_DATA_DIR");
  std::vector<const char*> argv{"vramfit"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  std::istringstream in(stdin_text);
  CliResult r;
  r.code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err, in);
  r.out = out.str();
  r.err = err.str();
  return r;
}

/// Checks an input error: exit 2, nothing on stdout, exactly `expected_err` on stderr.
inline void require_usage_error(const CliResult& r, const std::string& expected_err) {
  INFO("stdout: " << r.out);
  CHECK(r.err == expected_err);
  CHECK(r.out.empty());
  CHECK(r.code == 2);
}

/// The catalog fixture of the CLI tests (a few GPUs, one preset): stable whatever data/ holds.
inline std::string fixture_dir() { return std::string(VRAMFIT_SOURCE_DIR) + "/tests/cli/data"; }

/// `vramfit estimate --data-dir <fixture> args...`.
inline CliResult estimate(std::vector<std::string> args) {
  args.insert(args.begin(), {"estimate", "--data-dir", fixture_dir()});
  return run_cli(args);
}

/// A fresh temporary folder, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("vramfit-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string str() const { return path_.string(); }

  /// Writes `text` to `name` inside the folder (creating sub-folders); returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

/// The whole text of a file (empty when it cannot be read).
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The text of a file of the source tree.
inline std::string source_file(const std::string& relative) {
  return read_text(std::string(VRAMFIT_SOURCE_DIR) + "/" + relative);
}

}  // namespace vramfit::test
