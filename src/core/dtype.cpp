#include "vramfit/core/dtype.hpp"

#include <array>
#include <utility>

namespace vramfit {

namespace {
// Flag spellings first; aliases after (PyTorch and Hugging Face names).
constexpr std::array<std::pair<std::string_view, DType>, 15> kNames{{
    {"fp32", DType::fp32},   {"fp16", DType::fp16},      {"bf16", DType::bf16},
    {"fp8", DType::fp8},     {"int8", DType::int8},      {"int4", DType::int4},
    {"nf4", DType::nf4},     {"float32", DType::fp32},   {"float", DType::fp32},
    {"float16", DType::fp16}, {"half", DType::fp16},     {"bfloat16", DType::bf16},
    {"float8", DType::fp8},  {"float8_e4m3fn", DType::fp8}, {"8bit", DType::int8},
}};
}  // namespace

std::string_view name_of(DType t) noexcept {
  for (const auto& [name, d] : kNames)
    if (d == t) return name;
  return "fp32";
}

std::optional<DType> parse_dtype(std::string_view s) noexcept {
  for (const auto& [name, d] : kNames)
    if (name == s) return d;
  return std::nullopt;
}

}  // namespace vramfit
