// Parameter counts (`7B`, `1.5e9`) and memory sizes (`24GiB`, `80GB`) typed by users.
//
// Both are parsed as exact decimals (digits and a power of ten) rather than through
// `double`: `1.5TB` must be 1500000000000 bytes exactly, and `7.000000001B` must not be
// rounded silently.

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::spec {

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC and Clang; -Wpedantic-clean

constexpr std::uint64_t kU64Max = ~std::uint64_t{0};

/// A decimal number: value = digits * 10^exp10, digits without leading zeros.
struct Decimal {
  bool negative = false;
  std::string digits;  // significant digits; empty means zero
  std::int64_t exp10 = 0;
};

/// Parses `[+-] digits [. digits] [(e|E) [+-] digits]` at the start of `s`; `rest` gets what
/// follows. nullopt when no digit starts the text.
std::optional<Decimal> parse_decimal(std::string_view s, std::string_view& rest) {
  Decimal d;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) d.negative = s[i++] == '-';
  std::string mantissa;
  std::int64_t frac_digits = 0;
  bool any_digit = false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    mantissa += s[i++];
    any_digit = true;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      mantissa += s[i++];
      ++frac_digits;
      any_digit = true;
    }
  }
  if (!any_digit) return std::nullopt;
  std::int64_t exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    bool neg = false;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) neg = s[j++] == '-';
    if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        // Exponents beyond a few thousand only ever mean "absurd"; cap to stay in range.
        if (exp < 100000) exp = exp * 10 + (s[j] - '0');
        ++j;
      }
      exp = neg ? -exp : exp;
      i = j;
    }
    // "7e" without digits: leave the 'e' for the caller to reject as a unit.
  }
  // Significant digits only: drop leading zeros, move trailing zeros into the exponent.
  const std::size_t first = mantissa.find_first_not_of('0');
  mantissa = first == std::string::npos ? std::string() : mantissa.substr(first);
  std::int64_t e10 = exp - frac_digits;
  while (!mantissa.empty() && mantissa.back() == '0') {
    mantissa.pop_back();
    ++e10;
  }
  d.digits = std::move(mantissa);
  d.exp10 = e10;
  rest = s.substr(i);
  return d;
}

/// 10^k for k <= 38 (fits 128 bits).
u128 pow10(std::int64_t k) {
  u128 r = 1;
  for (std::int64_t i = 0; i < k; ++i) r *= 10;
  return r;
}

}  // namespace

std::uint64_t parse_param_count(std::string_view text, std::string_view field_name) {
  const std::string field(field_name);
  const std::string_view t = trim(text);
  const std::string example = "write it like 7e9, 7B, 1.5b, 350M, 70k or 7000000000";
  if (t.empty()) throw InputError(field, "no parameter count given", example);

  std::string_view rest;
  const auto d = parse_decimal(t, rest);
  if (!d) throw InputError(field, fmt::format("'{}' is not a parameter count", t), example);

  // Suffixes: thousand, million, billion, trillion (the model-card convention: 7B, 350M).
  const std::string unit = lower(trim(rest));
  std::int64_t unit_exp = 0;
  if (unit.empty()) {
    unit_exp = 0;
  } else if (unit == "k") {
    unit_exp = 3;
  } else if (unit == "m") {
    unit_exp = 6;
  } else if (unit == "b") {
    unit_exp = 9;
  } else if (unit == "t") {
    unit_exp = 12;
  } else if (unit.size() >= 2 && unit.back() == 'b' &&
             std::string_view("kmgtp").find(unit[0]) != std::string::npos) {
    throw InputError(field, fmt::format("'{}' is a memory size, not a parameter count", t),
                     "give the number of parameters, like 7B or 7e9; memory sizes go in --budget");
  } else {
    throw InputError(field, fmt::format("'{}' is not a parameter count", t), example);
  }

  if (d->digits.empty())
    throw InputError(field, fmt::format("'{}' parameters: the count must be positive", t), example);
  if (d->negative)
    throw InputError(field, fmt::format("'{}' is negative: the count must be positive", t), example);

  const std::int64_t e10 = d->exp10 + unit_exp;
  if (e10 < 0) {
    throw InputError(field, fmt::format("'{}' is not a whole number of parameters", t),
                     "give a whole count, like 7500000000 or 7.5B");
  }
  // The largest dense and MoE models have about 2e12 parameters; 1e15 leaves room for any
  // what-if while keeping every product in the engine far from 64-bit overflow.
  const auto too_large = [&] {
    return InputError(field, fmt::format("too large: {} parameters (the largest models have about 2e12)", t),
                      "check the exponent and the suffix: 7e9 and 7B are 7 billion");
  };
  if (static_cast<std::int64_t>(d->digits.size()) + e10 > 16) throw too_large();
  u128 v = 0;
  for (char c : d->digits) v = v * 10 + static_cast<unsigned>(c - '0');
  v *= pow10(e10);
  if (v > static_cast<u128>(kMaxParams)) throw too_large();
  return static_cast<std::uint64_t>(v);
}

Bytes parse_size(std::string_view text, std::string_view field_name) {
  const std::string field(field_name);
  const std::string_view t = trim(text);
  const std::string example = "write it like 24GiB, 80GB, 81920MiB, 1.5TB or a number of bytes";
  if (t.empty()) throw InputError(field, "no size given", example);

  std::string_view rest;
  const auto d = parse_decimal(t, rest);
  if (!d) throw InputError(field, fmt::format("'{}' is not a memory size", t), example);

  // Decimal units are powers of ten (GB = 10^9, as GPU vendors print them); binary units
  // powers of two (GiB = 2^30, what nvidia-smi and PyTorch print). Bare K/M/G/T is ambiguous.
  const std::string unit = lower(trim(rest));
  std::int64_t dec_exp = 0;
  int bin_exp = 0;
  struct Unit {
    std::string_view name;
    std::int64_t dec;
    int bin;
  };
  constexpr Unit kUnits[] = {
      {"", 0, 0},    {"b", 0, 0},    {"kb", 3, 0},   {"mb", 6, 0},   {"gb", 9, 0},   {"tb", 12, 0},
      {"pb", 15, 0}, {"kib", 0, 10}, {"mib", 0, 20}, {"gib", 0, 30}, {"tib", 0, 40}, {"pib", 0, 50},
  };
  bool known = false;
  for (const Unit& u : kUnits) {
    if (u.name == unit) {
      dec_exp = u.dec;
      bin_exp = u.bin;
      known = true;
    }
  }
  if (!known) {
    if (unit.size() == 1 && std::string_view("kmgtp").find(unit[0]) != std::string::npos) {
      const std::string num(t.substr(0, t.size() - trim(rest).size()));
      const std::string n(trim(num));
      const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
      throw InputError(field, fmt::format("'{}' is ambiguous", t),
                       fmt::format("write {}{}B (powers of 10) or {}{}iB (powers of 2)", n, u, n, u));
    }
    throw InputError(field, fmt::format("'{}' is not a memory size", t), example);
  }
  if (d->negative && !d->digits.empty())
    throw InputError(field, fmt::format("'{}' is negative: a size must be positive", t), example);

  const auto overflow = [&] {
    return InputError(field, fmt::format("too large: {} does not fit in 64 bits (16 EiB)", t),
                      "check the number and the unit");
  };
  // Keep 20 significant digits (enough for any 64-bit byte count): the value stays exact
  // below 2^64 and the arithmetic fits 128 bits.
  std::string digits = d->digits;
  std::int64_t e10 = d->exp10 + dec_exp;
  if (digits.size() > 20) {
    e10 += static_cast<std::int64_t>(digits.size() - 20);
    digits.resize(20);
  }
  u128 v = 0;
  for (char c : digits) v = v * 10 + static_cast<unsigned>(c - '0');
  v <<= bin_exp;  // < 10^20 * 2^50 < 2^117
  if (e10 >= 0) {
    for (std::int64_t i = 0; i < e10 && v != 0; ++i) {
      v *= 10;
      if (v > kU64Max) throw overflow();
    }
  } else if (e10 < -38) {
    v = 0;
  } else {
    const u128 p = pow10(-e10);
    v = (v + p / 2) / p;  // to the nearest byte
  }
  if (v > kU64Max) throw overflow();
  if (v == 0) throw InputError(field, fmt::format("'{}' is zero bytes: a size must be positive", t), example);
  return Bytes{static_cast<std::uint64_t>(v)};
}

}  // namespace vramfit::spec
