#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::spec {

/// The most parameters vramfit accepts, from --params, a config.json or a checkpoint: the
/// largest dense and MoE models have about 2e12; 1e15 leaves room for any what-if while keeping
/// every product in the engine far from 64-bit overflow.
inline constexpr std::uint64_t kMaxParams = 1'000'000'000'000'000ULL;

/// Parses a parameter count: `7e9`, `7B`, `1.5b`, `350M`, `124m`, `7000000000`, `70k`.
/// Throws InputError naming `field` for anything else, zero, negative, NaN or > kMaxParams (1e15).
std::uint64_t parse_param_count(std::string_view text, std::string_view field = "--params");

/// Parses a memory size: `24GiB`, `80GB`, `81920MiB`, `1.5TB`, `123456` (bytes).
/// GB/MB/KB/TB are powers of 10, GiB/MiB/KiB/TiB powers of 2; case-insensitive units.
/// Throws InputError naming `field` for anything else, zero or overflow.
Bytes parse_size(std::string_view text, std::string_view field = "--budget");

/// What from_config does with a model_type it has no layout for.
enum class UnknownType {
  refuse,   ///< InputError naming model_type (and any key announcing experts, vision, state space...)
  generic,  ///< a Llama-like layout with a note: only when the caller then takes the exact
            ///< weights from the checkpoint (safetensors headers, GGUF tensors)
};

/// Builds a spec from a Hugging Face config.json object. `origin` prefixes field names in
/// diagnostics (e.g. "config.json" or the file's path). Collects every problem, then
/// throws InputError. Encoders and encoder-decoders (bert, t5, whisper, ...) are always refused.
ModelSpec from_config(const nlohmann::json& config, std::string_view origin,
                      UnknownType unknown = UnknownType::refuse);

/// Parses config.json text (any file name); malformed JSON is an InputError naming `origin`.
ModelSpec from_config_text(std::string_view text, std::string_view origin,
                           UnknownType unknown = UnknownType::refuse);

/// A plausible Llama-like shape whose parameter count is close to `params` (say so in notes).
ModelSpec from_param_count(std::uint64_t params);

/// One tensor of a safetensors header.
struct TensorInfo {
  std::string name;
  std::string dtype;            ///< "BF16", "F32", "F16", "F8_E4M3", "I8", "U8", ...
  std::vector<std::uint64_t> shape;
  std::uint64_t elements = 0;
};

/// Parses the JSON header of a safetensors file: `prefix` holds the file's first bytes
/// (at least 8 + header length), `file_size` the whole size (checks the data offsets).
/// Throws InputError naming `origin` when the header lies about its length or is malformed.
std::vector<TensorInfo> parse_safetensors_header(std::string_view prefix, std::uint64_t file_size,
                                                 std::string_view origin);

/// Replaces the spec's parameter count and checkpoint dtype with the exact ones from the
/// checkpoint's tensors (all shards together); notes any disagreement with the config.
void apply_checkpoint(ModelSpec& spec, const std::vector<TensorInfo>& tensors);

}  // namespace vramfit::spec
