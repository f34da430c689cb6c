#include "vramfit/core/error.hpp"

#include <cstddef>
#include <utility>

#include <fmt/format.h>

namespace vramfit {

std::string Diagnostic::str() const {
  std::string s = field.empty() ? problem : field + ": " + problem;
  if (!fix.empty()) s += " (" + fix + ")";
  return s;
}

namespace {

/// A value quoted in a message is cut to its first bytes: an error must not echo a 10 MB flag
/// value or JSON key (issue #14). Cut at a UTF-8 character boundary.
constexpr std::size_t kMaxPart = 1024;
constexpr std::size_t kMaxDiagnostics = 64;

std::string bounded(std::string text) {
  if (text.size() <= kMaxPart) return text;
  std::size_t cut = kMaxPart - 128;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const std::size_t total = text.size();
  text.resize(cut);
  text += fmt::format("... [cut: {} bytes in all]", total);
  return text;
}

std::vector<Diagnostic> bounded(std::vector<Diagnostic> d) {
  const std::size_t total = d.size();
  if (total > kMaxDiagnostics) d.resize(kMaxDiagnostics - 1);
  for (auto& x : d) {
    x.field = bounded(std::move(x.field));
    x.problem = bounded(std::move(x.problem));
    x.fix = bounded(std::move(x.fix));
  }
  if (total > kMaxDiagnostics)
    d.push_back(Diagnostic{"", fmt::format("and {} more problems not shown", total - d.size()), "fix the ones above first"});
  return d;
}

std::string join(const std::vector<Diagnostic>& d) {
  std::string s;
  for (const auto& x : d) {
    if (!s.empty()) s += "\n";
    s += x.str();
  }
  return s;
}
}  // namespace

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : InputError(bounded(std::move(diagnostics)), 0) {}

InputError::InputError(std::vector<Diagnostic> bounded_diagnostics, int /*already bounded*/)
    : std::runtime_error(join(bounded_diagnostics)), diags_(std::move(bounded_diagnostics)) {}

InputError::InputError(std::string field, std::string problem, std::string fix)
    : InputError(std::vector<Diagnostic>{Diagnostic{std::move(field), std::move(problem), std::move(fix)}}) {}

void Diagnostics::add(std::string field, std::string problem, std::string fix) {
  diags_.push_back(Diagnostic{std::move(field), std::move(problem), std::move(fix)});
}

bool Diagnostics::collect(const std::function<void()>& step) {
  try {
    step();
    return true;
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) diags_.push_back(d);
    return false;
  }
}

void Diagnostics::throw_if_any() const {
  if (!diags_.empty()) throw InputError(diags_);
}

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x80 ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

}  // namespace vramfit
