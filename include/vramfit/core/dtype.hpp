#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace vramfit {

/// Storage or compute data types of tensors.
enum class DType { fp32, fp16, bf16, fp8, int8, int4, nf4 };

/// Bits per element of the packed values (scales of quantized formats are counted apart).
constexpr std::uint64_t bits_of(DType t) noexcept {
  switch (t) {
    case DType::fp32: return 32;
    case DType::fp16: return 16;
    case DType::bf16: return 16;
    case DType::fp8: return 8;
    case DType::int8: return 8;
    case DType::int4: return 4;
    case DType::nf4: return 4;
  }
  return 32;
}

/// True for fp32/fp16/bf16: dtypes PyTorch computes in directly.
constexpr bool is_float_compute(DType t) noexcept {
  return t == DType::fp32 || t == DType::fp16 || t == DType::bf16;
}

/// The flag spelling: "fp32", "bf16", ... (stable: used in JSON).
std::string_view name_of(DType t) noexcept;
/// Parses the flag spelling (also accepts "float32", "bfloat16", "float16", "half").
std::optional<DType> parse_dtype(std::string_view s) noexcept;

}  // namespace vramfit
