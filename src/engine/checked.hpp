#pragma once
// Internal to the engine: checked products and sums of sizes.

#include <cstdint>

#include "vramfit/core/bytes.hpp"

namespace vramfit::engine::detail {

// Config widths go up to 2^40 each (spec/config.cpp's kMaxDim), so a product of two widths, or
// widths times bytes, can overflow 64 bits: checked_mul and checked_add throw InputError instead
// of handing on a wrapped, small number. Only sums of dtype widths (a few bytes each, like
// `kFp32 + 1`) stay unchecked.
inline std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return checked_mul(a, b); }
inline std::uint64_t mul(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return checked_mul(checked_mul(a, b), c);
}
inline std::uint64_t add(std::uint64_t a, std::uint64_t b) { return checked_add(a, b); }
inline std::uint64_t add(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return checked_add(checked_add(a, b), c);
}

}  // namespace vramfit::engine::detail
