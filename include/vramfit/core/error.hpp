#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace vramfit {

/// One problem with user input: where it is, what is wrong, and how to fix it.
/// Rendered as `field: problem (fix)`, e.g.
/// `config.json: num_attention_heads: 30 does not divide hidden_size 4096 (check the config)`.
struct Diagnostic {
  std::string field;    ///< flag or field path: `--batch`, `config.json: hidden_size`
  std::string problem;  ///< what is wrong, with the offending value
  std::string fix;      ///< what to do instead; may be empty

  /// One line, without a trailing newline.
  [[nodiscard]] std::string str() const;
};

/// The one error type of the core: input that cannot be used. Carries the diagnostics
/// collected before giving up (the first 63 and a count of the rest; each part cut to 1 KiB). Caught in exactly one place, `cli::run`, which maps it to
/// exit code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  InputError(std::string field, std::string problem, std::string fix = {});

  [[nodiscard]] const std::vector<Diagnostic>& diagnostics() const noexcept { return diags_; }

 private:
  InputError(std::vector<Diagnostic> bounded_diagnostics, int);
  std::vector<Diagnostic> diags_;
};

/// Collects diagnostics; throws them all at once.
class Diagnostics {
 public:
  void add(std::string field, std::string problem, std::string fix = {});
  [[nodiscard]] bool empty() const noexcept { return diags_.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& items() const noexcept { return diags_; }
  /// Throws InputError with everything collected, if anything was.
  void throw_if_any() const;
  /// Runs `step`, moving the diagnostics of any InputError it throws here; false when it threw.
  bool collect(const std::function<void()>& step);

 private:
  std::vector<Diagnostic> diags_;
};

/// `text` with every byte outside ASCII written as \xNN: parse errors quote the bytes they
/// stopped at, and those of a binary file are not text to print on a terminal.
std::string printable(std::string_view text);

}  // namespace vramfit
