#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vramfit/core/dtype.hpp"

namespace vramfit::spec {

/// How the weights of the decoder's linear layers are stored.
enum class QuantMethod {
  none,      ///< plain fp32/fp16/bf16 (Workload::weights)
  bnb_8bit,  ///< bitsandbytes LLM.int8: int8 weights + one fp32 scale per output row
  bnb_4bit,  ///< bitsandbytes nf4/fp4: 4-bit values + fp32 absmax per 64 (double quant: 8-bit absmax)
  gptq,      ///< GPTQ (auto-gptq / gptqmodel): packed int32 qweight, fp16 scales, packed zeros
  awq,       ///< AWQ (autoawq): packed qweight, fp16 scales, packed zeros per group
  fp8,       ///< float8 e4m3 weights, per-tensor, per-channel or block scales
  mxfp4,     ///< OCP microscaling fp4: 4-bit values + one 8-bit exponent per 32 (gpt-oss)
  gguf,      ///< llama.cpp GGUF types (Q4_0, Q4_K_M, ...): the file type's per-tensor mix
};

/// A quantization scheme with every detail that changes its size.
struct Quantization {
  QuantMethod method = QuantMethod::none;
  std::uint64_t bits = 16;           ///< bits per packed weight value (8, 4, 3, 2)
  bool fp4 = false;                  ///< bnb_4bit_quant_type "fp4" instead of "nf4" (same size)
  bool double_quant = false;         ///< bnb_4bit_use_double_quant: absmax stored in 8 bits
  std::uint64_t group_size = 128;    ///< GPTQ/AWQ group; 0 = one group per input row (group_size -1)
  /// fp8 scales: 0/0 = one per tensor; rows=1, cols=0 = one per output channel; else blocks
  /// of rows x cols (DeepSeek-V3's weight_block_size [128, 128]).
  std::uint64_t fp8_block_rows = 0;
  std::uint64_t fp8_block_cols = 0;
  /// Module names kept in 16 bits besides the embeddings, lm_head and norms
  /// (llm_int8_skip_modules / modules_to_not_convert), matched like LoRA targets.
  std::vector<std::string> skip_modules;
  std::optional<DType> compute_dtype;  ///< bnb_4bit_compute_dtype (default: the 16-bit dtype)
  std::string gguf_type;               ///< GGUF file type, upper case ("Q4_K_M")
};

/// The flag spelling of a scheme: "nf4", "fp4", "bnb-int8", "gptq-int4", "awq-int4",
/// "fp8", "fp8-channel", "fp8-block", "mxfp4", "q4_k_m", ... (stable: used in JSON).
std::string name_of(const Quantization& q);

/// Parses `--quant` names (the spellings of name_of, case-insensitive; GGUF file types
/// q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k).
std::optional<Quantization> parse_quant(std::string_view s);

/// Every name parse_quant accepts, for messages.
const std::vector<std::string>& quant_names();

/// The scheme that `--dtype` implies for the packed dtypes: nf4 -> bitsandbytes 4-bit,
/// int8 -> LLM.int8, int4 -> GPTQ 4-bit group 128, fp8 -> per-tensor fp8; none otherwise.
Quantization default_quantization(DType weights);

/// The packed dtype that stands for a scheme in Workload::weights (nf4, int4, int8, fp8).
DType packed_dtype(const Quantization& q);

/// True when two schemes store a weight in the same bytes (the names alone miss the group
/// size, double quantization and fp8 block shape).
bool same_storage(const Quantization& a, const Quantization& b);

/// Reads a config.json `quantization_config` object (bitsandbytes, gptq, awq, fp8,
/// mxfp4, compressed-tensors). Unknown methods and bad fields throw InputError naming
/// `<origin>: quantization_config.<field>`.
Quantization quant_from_config(const nlohmann::json& qc, std::string_view origin);

}  // namespace vramfit::spec
