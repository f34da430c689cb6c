#include "vramfit/advisor/budget.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::advisor {

namespace {

// A percentage is stored in parts per million, so 4 decimals of a percent are exact.
constexpr std::uint64_t kPpmPerPercent = 10'000;
constexpr std::uint64_t kMillion = 1'000'000;
constexpr std::size_t kMaxPercentDecimals = 4;

constexpr std::string_view kHeadroomFix = "give a percentage of the budget like 10% or a size like 2GiB";

/// "7.5" -> 75000 ppm. Plain decimals only: no sign, exponent, nan or inf.
Headroom parse_percent(std::string_view whole, std::string_view number, std::string_view field) {
  const auto bad = [&](std::string problem) -> Headroom {
    throw InputError(std::string(field), std::move(problem), std::string(kHeadroomFix));
  };
  const std::size_t dot = number.find('.');
  const std::string_view int_part = number.substr(0, dot);
  const std::string_view frac_part =
      dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
  bool digits_ok = !number.empty() && !(int_part.empty() && frac_part.empty());
  for (const char c : int_part) digits_ok = digits_ok && is_digit(c);
  for (const char c : frac_part) digits_ok = digits_ok && is_digit(c);
  if (!digits_ok) return bad(fmt::format("'{}' is not a percentage", whole));
  if (frac_part.size() > kMaxPercentDecimals)
    return bad(fmt::format("'{}' has more than {} decimals", whole, kMaxPercentDecimals));
  // Leading zeros are harmless; more than 3 significant integer digits is >= 100% anyway.
  std::string_view significant = int_part;
  while (!significant.empty() && significant.front() == '0') significant.remove_prefix(1);
  if (significant.size() > 3) return bad(fmt::format("{} is not below 100% of the budget", whole));
  std::uint64_t ppm = 0;
  for (const char c : significant) ppm = ppm * 10 + static_cast<std::uint64_t>(c - '0');
  ppm *= kPpmPerPercent;
  std::uint64_t scale = kPpmPerPercent / 10;
  for (const char c : frac_part) {
    ppm += static_cast<std::uint64_t>(c - '0') * scale;
    scale /= 10;
  }
  if (ppm >= 100 * kPpmPerPercent) return bad(fmt::format("{} is not below 100% of the budget", whole));
  Headroom h;
  h.is_percent = true;
  h.ppm = ppm;
  return h;
}

}  // namespace

Bytes Headroom::on(Bytes memory) const {
  if (!is_percent) return bytes;
  // ceil(memory * ppm / 10^6) without a 128-bit product: split memory by 10^6.
  const std::uint64_t q = memory.value() / kMillion;
  const std::uint64_t r = memory.value() % kMillion;
  return Bytes{q * ppm + (r * ppm + kMillion - 1) / kMillion};
}

std::string Headroom::label() const {
  if (!is_percent) return bytes.value() == 0 ? "0" : fmt::format("{} B", bytes.value());
  std::string s = std::to_string(ppm / kPpmPerPercent);
  if (const std::uint64_t frac = ppm % kPpmPerPercent; frac != 0) {
    std::string f = fmt::format("{:04d}", frac);
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s + "%";
}

Headroom parse_headroom(std::string_view text, std::string_view field) {
  const std::string_view t = trim(text);
  if (t.empty()) throw InputError(std::string(field), "is empty", std::string(kHeadroomFix));
  if (t.front() == '-')
    throw InputError(std::string(field), fmt::format("'{}' is negative", t), std::string(kHeadroomFix));
  const std::string l = lower(t);
  if (l.find("nan") != std::string::npos || l.find("inf") != std::string::npos)
    throw InputError(std::string(field), fmt::format("'{}' is not a finite number", t),
                     std::string(kHeadroomFix));
  if (t.back() == '%') return parse_percent(t, trim(t.substr(0, t.size() - 1)), field);

  // spec::parse_size rejects zero, but no margin is a valid choice: "0", "0.0", "0GiB".
  std::size_t n = 0;
  while (n < t.size() && (is_digit(t[n]) || t[n] == '.')) ++n;
  const std::string_view number = t.substr(0, n);
  if (!number.empty() && number.find_first_not_of("0.") == std::string_view::npos &&
      number.find_first_of('0') != std::string_view::npos) {
    const std::string_view unit = trim(t.substr(n));
    // Validate the unit alone, so "0xyz" is still an error.
    if (!unit.empty()) (void)spec::parse_size("1" + std::string(unit), field);
    return Headroom{};
  }
  Headroom h;
  h.bytes = spec::parse_size(t, field);
  return h;
}

std::string_view name_of(Verdict v) noexcept {
  switch (v) {
    case Verdict::fits: return "fits";
    case Verdict::does_not_fit: return "does_not_fit";
    case Verdict::tight: return "tight";
  }
  return "does_not_fit";
}

Verdict Budget::verdict(Bytes device_total) const {
  const Bytes margin = headroom_bytes();
  return margin <= bytes && device_total <= bytes - margin ? Verdict::fits : Verdict::does_not_fit;
}

Verdict Budget::verdict(Bytes device_total, Bytes upper) const {
  if (verdict(device_total) == Verdict::does_not_fit) return Verdict::does_not_fit;
  return verdict(std::max(device_total, upper)) == Verdict::fits ? Verdict::fits : Verdict::tight;
}

std::int64_t Budget::spare(Bytes device_total) const noexcept {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const std::uint64_t have = bytes.value();
  const std::uint64_t need = device_total.value();
  if (have >= need) return static_cast<std::int64_t>(std::min(have - need, kMax));
  const std::uint64_t short_of = need - have;
  if (short_of > kMax) return std::numeric_limits<std::int64_t>::min();
  return -static_cast<std::int64_t>(short_of);
}

Bytes Budget::short_by(Bytes device_total) const noexcept {
  // device_total + margin - bytes without overflow: the margin beyond the budget (a fixed size
  // may exceed it) adds to the total, saturated.
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t total = device_total.value();
  const std::uint64_t margin = headroom.on(bytes).value();
  const std::uint64_t have = bytes.value();
  if (margin <= have) return Bytes{total > have - margin ? total - (have - margin) : 0};
  const std::uint64_t over = margin - have;
  return Bytes{total > kMax - over ? kMax : total + over};
}

Budget budget_for_gpu(const catalog::Gpu& gpu, const Headroom& headroom) {
  Budget b;
  b.bytes = gpu.memory;
  b.headroom = headroom;
  b.gpu_bf16 = gpu.bf16;
  b.gpu_id = gpu.id;
  b.label = fmt::format("{} ({})", gpu.id, gpu.name);
  return b;
}

Budget budget_of(Bytes bytes, const Headroom& headroom) {
  Budget b;
  b.bytes = bytes;
  b.headroom = headroom;
  return b;
}

void check_budget(const Budget& budget) {
  const Bytes margin = budget.headroom_bytes();
  if (margin >= budget.bytes)
    throw InputError("--headroom",
                     fmt::format("a margin of {} bytes leaves nothing of the budget ({} bytes)",
                                 margin.value(), budget.bytes.value()),
                     "use a smaller margin or a larger budget");
}

}  // namespace vramfit::advisor
