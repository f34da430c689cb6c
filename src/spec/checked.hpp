#pragma once
// Internal to spec: checked products and sums of config dimensions.

#include <cstdint>

#include "vramfit/core/bytes.hpp"

namespace vramfit::spec::detail {

// Config dimensions go up to 2^40 each (config.cpp's kMaxDim), so a product of two can overflow
// 64 bits: these throw InputError("parameters", ...) instead of handing on a wrapped number;
// from_config reports it with the config's name.
inline std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return checked_mul(a, b, "parameters"); }
inline std::uint64_t add(std::uint64_t a, std::uint64_t b) { return checked_add(a, b, "parameters"); }

}  // namespace vramfit::spec::detail
