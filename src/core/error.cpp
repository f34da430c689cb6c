#include "vramfit/core/error.hpp"

#include <utility>

#include <fmt/format.h>

namespace vramfit {

std::string Diagnostic::str() const {
  std::string s = field.empty() ? problem : field + ": " + problem;
  if (!fix.empty()) s += " (" + fix + ")";
  return s;
}

namespace {
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
    : std::runtime_error(join(diagnostics)), diags_(std::move(diagnostics)) {}

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
