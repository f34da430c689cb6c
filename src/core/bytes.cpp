#include "vramfit/core/bytes.hpp"

#include <limits>
#include <string>

#include "vramfit/core/error.hpp"

namespace vramfit {

namespace {
[[noreturn]] void overflow(std::string_view what) {
  throw InputError(std::string(what), "the size overflows 64 bits (over 16 EiB)",
                   "use realistic sizes: parameters, batch and sequence length are far too large");
}
}  // namespace

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what);
  return r;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(what);
  return r;
}

Bytes operator+(Bytes a, Bytes b) { return Bytes{checked_add(a.v_, b.v_)}; }

Bytes operator-(Bytes a, Bytes b) {
  if (b.v_ > a.v_) throw std::logic_error("Bytes subtraction below zero");
  return Bytes{a.v_ - b.v_};
}

Bytes operator*(Bytes a, std::uint64_t k) { return Bytes{checked_mul(a.v_, k)}; }

Bytes Bytes::round_up(std::uint64_t granule) const {
  if (granule == 0) throw std::logic_error("round_up to a zero granule");
  const std::uint64_t rem = v_ % granule;
  return rem == 0 ? *this : Bytes{checked_add(v_, granule - rem)};
}

Bytes bytes_of_bits(std::uint64_t elements, std::uint64_t bits) {
  const std::uint64_t total_bits = checked_mul(elements, bits);
  return Bytes{total_bits / 8 + (total_bits % 8 != 0 ? 1 : 0)};
}

}  // namespace vramfit
