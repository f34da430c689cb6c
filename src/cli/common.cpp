// Small helpers of the CLI layer (see common.hpp).
#include "common.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "vramfit/core/json.hpp"

namespace vramfit::cli::util {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

bool has_control(std::string_view s) noexcept {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

std::string quote(const std::filesystem::path& p) { return "'" + text_excerpt(p.string(), 200) + "'"; }

bool plain_path_parts(std::string_view s) noexcept {
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = std::min(s.find('/', start), s.size());
    const std::string_view part = s.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

std::string hub_download_command(const HubId& id) {
  return fmt::format("huggingface-cli download {}{} --include config.json '*.json'", id.repo,
                     id.revision_given ? " --revision " + id.revision : "");
}

ExponentValue whole_from_exponent(const std::string& text) {
  const auto e = text.find_first_of("eE");
  if (e == std::string::npos || e == 0 || text.find_first_not_of("0123456789.eE+-") != std::string::npos ||
      text.front() == '-' || text.front() == '+')
    return {};
  double d = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, d, std::chars_format::scientific);
  // Out of a double's range: "1e400" is too large, "1e-400" is no whole number (it underflows).
  if (ec == std::errc::result_out_of_range)
    return e + 1 < text.size() && text[e + 1] == '-' ? ExponentValue{} : ExponentValue{ExponentForm::too_large, 0};
  if (ec != std::errc() || ptr != end || !std::isfinite(d) || d != std::floor(d)) return {};
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (d > kExact) return {ExponentForm::too_large, 0};
  return {ExponentForm::whole, static_cast<std::uint64_t>(d)};
}

}  // namespace vramfit::cli::util
