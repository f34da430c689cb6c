#include "vramfit/render/format.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

namespace vramfit::render {

std::string format_bytes(Bytes b) {
  const std::uint64_t v = b.value();
  if (v < 1024) return fmt::format("{} B", v);
  constexpr std::array<std::string_view, 4> kUnits{"KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  std::uint64_t unit = 1024;
  // Largest unit with v >= unit, up to TiB.
  while (u + 1 < kUnits.size() && v / unit >= 1024) {
    unit *= 1024;
    ++u;
  }
  std::uint64_t whole = v / unit;
  // rem < unit <= 2^40, so rem * 100 cannot overflow.
  const std::uint64_t rem = v % unit;
  std::uint64_t hundredths = (rem * 100 + unit / 2) / unit;
  if (hundredths == 100) {
    ++whole;
    hundredths = 0;
  }
  if (whole == 1024 && u + 1 < kUnits.size()) {
    whole = 1;
    ++u;
  }
  return fmt::format("{}.{:02} {}", whole, hundredths, kUnits[u]);
}

std::string format_signed_bytes(std::int64_t b) {
  if (b >= 0) return format_bytes(Bytes{static_cast<std::uint64_t>(b)});
  // -(b + 1) + 1 avoids negating INT64_MIN.
  return "-" + format_bytes(Bytes{static_cast<std::uint64_t>(-(b + 1)) + 1});
}

std::string format_count(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_params(std::uint64_t n) {
  struct Scale {
    std::uint64_t factor;
    char suffix;
  };
  constexpr std::array<Scale, 4> kScales{
      {{1'000'000'000'000ULL, 'T'}, {1'000'000'000ULL, 'B'}, {1'000'000ULL, 'M'}, {1'000ULL, 'K'}}};
  for (const auto& s : kScales) {
    const double x = static_cast<double>(n) / static_cast<double>(s.factor);
    // 999.6M prints as 1.00B, not 1000M: the thresholds are those of the rounded value.
    if (x < 0.9995) continue;
    // Three significant digits; "%.3g" would switch to exponents for large values.
    const int decimals = x >= 99.95 ? 0 : x >= 9.995 ? 1 : 2;
    return fmt::format("{:.{}f}{}", x, decimals, s.suffix);
  }
  return std::to_string(n);
}

std::string format_share(Bytes part, Bytes whole) {
  if (whole.value() == 0) return "-";
  const double pct = 100.0 * static_cast<double>(part.value()) / static_cast<double>(whole.value());
  return fmt::format("{:.1f}%", pct);
}

std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<Align>& align,
                  const std::string& indent) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const bool right = c < align.size() && align[c] == Align::right;
      const std::string pad(width[c] - row[c].size(), ' ');
      line += right ? pad + row[c] : row[c] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace vramfit::render
