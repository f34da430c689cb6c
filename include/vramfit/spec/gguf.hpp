#pragma once

// GGUF, llama.cpp's file format: the ggml tensor types, llama.cpp's file-type mixes (which
// tensor gets which type), the header parser, and a ModelSpec built from a header.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/model_spec.hpp"

namespace vramfit::spec {

/// One ggml tensor type: a block of `block_size` elements takes `type_size` bytes.
struct GgmlType {
  std::string_view name;     ///< upper case, as llama.cpp prints it ("Q4_K")
  std::uint32_t id;          ///< enum ggml_type value, as stored in GGUF tensor infos
  std::uint64_t block_size;  ///< elements per block
  std::uint64_t type_size;   ///< bytes per block
};

/// Every ggml type vramfit knows, in id order.
std::span<const GgmlType> ggml_types() noexcept;
/// The type with this enum value, or nullptr.
const GgmlType* ggml_type_by_id(std::uint32_t id) noexcept;
/// The type with this name (case-insensitive), or nullptr.
const GgmlType* ggml_type_by_name(std::string_view name) noexcept;

/// Bytes of a tensor of ggml shape `ne` (ne[0] is the row length) in type `t`: rows of
/// ne[0] / block_size blocks (ggml_row_size). Throws InputError naming `field` when ne[0]
/// is not a multiple of the block size or the size overflows 64 bits.
std::uint64_t ggml_tensor_bytes(const GgmlType& t, std::span<const std::uint64_t> ne, std::string_view field);

/// A llama.cpp file type (enum llama_ftype, general.file_type in GGUF).
struct GgufFileType {
  std::string_view name;  ///< "Q4_K_M", "F16", ...
  std::uint32_t id;       ///< LLAMA_FTYPE_* value
  std::string_view base;  ///< the ggml type most tensors get (llama_ftype_get_default_type)
  bool mix_known;         ///< gguf_tensor_type implements its per-tensor rules
};

/// Every LLAMA_FTYPE_* value, in id order.
std::span<const GgufFileType> gguf_file_types() noexcept;
const GgufFileType* gguf_file_type_by_id(std::uint32_t id) noexcept;
/// By name, case-insensitive ("q4_k_m" finds Q4_K_M).
const GgufFileType* gguf_file_type_by_name(std::string_view name) noexcept;

/// What a tensor is, as llama.cpp's quantizer tells tensors apart (tensor_get_category).
enum class TensorRole {
  token_embd,  ///< token_embd.weight
  output,      ///< output.weight (the lm_head)
  attn_q,
  attn_k,
  attn_v,
  attn_output,
  attn_qkv,   ///< fused q, k, v (gpt2 c_attn, phi3 qkv_proj, gpt_neox query_key_value)
  attn_kv_b,  ///< deepseek2's kv_b_proj: treated like attn_v
  ffn_gate,
  ffn_up,
  ffn_down,
  ffn_gate_exp,  ///< routed experts, one 3-D tensor per layer (ffn_gate_exps)
  ffn_up_exp,
  ffn_down_exp,
  other,     ///< any other 2-D weight: the file type's base type
  kept_f32,  ///< 1-D tensors (norms, biases) and what the converter keeps in F32
             ///< (router ffn_gate_inp, position_embd)
};

/// Where a tensor sits in the model, for the rules that depend on it.
struct TensorPlace {
  std::uint64_t layer = 0;     ///< absolute layer index (blk.N); also the index among attn_v tensors
  std::uint64_t n_layers = 1;  ///< block count
  std::uint64_t row = 0;       ///< ne[0], the row length (in_features of a Linear)
  bool has_output = true;      ///< a separate output.weight exists (untied embeddings)
  std::uint64_t gqa = 1;       ///< n_head / n_head_kv
  std::uint64_t n_expert = 0;  ///< routed experts (0: dense)
  bool llama_70b = false;      ///< llama.cpp's LLM_TYPE_70B: llama arch, 80 layers, GQA
};

/// The model-wide part of a TensorPlace (layer and row left at 0): the one place the model's
/// facts that llama-quantize reads are worked out (gguf_model_bytes, the llama.cpp engine).
TensorPlace tensor_place(const ModelSpec& m);

/// The ggml type llama-quantize gives a tensor in `file_type` (a name of gguf_file_types()
/// whose mix_known is true). Follows llama_tensor_get_type in src/llama-quant.cpp of
/// llama.cpp commit 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714 without an imatrix or overrides.
/// Throws InputError for other file types, and where llama.cpp refuses the shape.
const GgmlType& gguf_tensor_type(std::string_view file_type, TensorRole role, const TensorPlace& place);

/// Bytes a model's tensors take in a GGUF file of `file_type` (tensor data only, no
/// metadata), tensor by tensor as convert_hf_to_gguf.py + llama-quantize lay them out.
std::uint64_t gguf_model_bytes(const ModelSpec& m, std::string_view file_type);

/// GGUF metadata value types (gguf_type in ggml/include/gguf.h).
enum class GgufType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// One metadata value. Scalars are kept; arrays keep their element type and length, and
/// string arrays their strings when there are at most kGgufKeptStrings of them.
struct GgufValue {
  GgufType type = GgufType::u8;
  std::uint64_t uint = 0;  ///< u8..u64, and bool (0/1)
  std::int64_t sint = 0;   ///< i8..i64
  double real = 0;         ///< f32, f64
  std::string str;         ///< string
  GgufType array_type = GgufType::u8;
  std::uint64_t array_length = 0;
  std::vector<std::string> array_strings;

  /// The value as a non-negative integer (any integer type), or nullopt.
  [[nodiscard]] std::optional<std::uint64_t> as_uint() const noexcept;
};

/// String arrays longer than this (a tokenizer's 32000+ tokens) keep only their length.
constexpr std::uint64_t kGgufKeptStrings = 64;

/// One tensor info of a GGUF header.
struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> ne;  ///< ggml dims, ne[0] first (the reverse of PyTorch's shape)
  const GgmlType* type = nullptr;
  std::uint64_t offset = 0;  ///< from the start of the data section (of its file)
  std::uint64_t bytes = 0;
  /// The file of a split GGUF holding it (gguf-split's <prefix>-0000k-of-0000n.gguf, k - 1), 0 for
  /// one file: llama.cpp maps each file on its own, one CPU_Mapped buffer a file.
  std::uint32_t file = 0;
  [[nodiscard]] std::uint64_t elements() const;
};

/// A parsed GGUF header.
struct GgufHeader {
  std::uint32_t version = 0;
  std::map<std::string, GgufValue, std::less<>> metadata;
  std::vector<GgufTensor> tensors;  ///< in file order
  std::uint64_t alignment = 32;     ///< general.alignment, GGUF_DEFAULT_ALIGNMENT when absent
  std::uint64_t data_start = 0;     ///< file offset of the data section

  [[nodiscard]] const GgufValue* find(std::string_view key) const;
  [[nodiscard]] const GgufTensor* tensor(std::string_view name) const;
};

/// How many bytes of a GGUF file the CLI reads for its header. Headers hold the tokenizer
/// (a 256k-token vocabulary with merges takes ~10 MB), so 64 MiB leaves a wide margin.
constexpr std::uint64_t kGgufMaxHeader = 64ULL << 20;

/// Thrown by parse_gguf_header when the header runs past the `prefix` it was given but not past
/// the file: `needed` is the prefix length the field at hand needs. Callers that read the file
/// step by step read more and parse again; to others it is an InputError like any.
class GgufPrefixShort : public InputError {
 public:
  GgufPrefixShort(std::string field, std::string problem, std::string fix, std::uint64_t needed_bytes)
      : InputError(std::move(field), std::move(problem), std::move(fix)), needed(needed_bytes) {}
  std::uint64_t needed;
};

/// Parses the header of a GGUF file (v2 or v3, little-endian) from its first bytes
/// `prefix`; `file_size` is the whole file's size (tensors must lie inside it). Every
/// count and length is checked against the bytes present. Throws InputError naming
/// `origin` when the header is malformed, GgufPrefixShort when the prefix is too short for it.
GgufHeader parse_gguf_header(std::string_view prefix, std::uint64_t file_size, std::string_view origin);

/// The llama.cpp architectures spec_from_gguf understands (general.architecture values).
std::span<const std::string_view> gguf_architectures() noexcept;

/// The tensors llama.cpp's loader may create for a general.architecture, required or optional:
/// `globals` by name ("token_embd.weight"), `block_roles` as the <role> of "blk.N.<role>"
/// ("attn_q.bias"), each sorted. A file holding any other tensor does not load in llama.cpp
/// ("wrong number of tensors"), and spec_from_gguf refuses it. Both empty for an architecture
/// not in gguf_architectures().
struct GgufArchTensors {
  std::vector<std::string> globals;
  std::vector<std::string> block_roles;
};
GgufArchTensors gguf_arch_tensors(std::string_view arch);

/// Builds a spec from a GGUF header: the architecture's hyper-parameters become the
/// config.json of the matching transformers model_type, then from_config; params, the
/// quantization (file type) and packed_weight_bytes come from the tensors themselves.
/// Throws InputError naming `origin` for unknown architectures and missing keys.
ModelSpec spec_from_gguf(const GgufHeader& h, std::string_view origin);

}  // namespace vramfit::spec
