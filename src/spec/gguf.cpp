// GGUF: llama.cpp's file format.
//
// Sources, all from github.com/ggml-org/llama.cpp:
// - the type table: ggml/src/ggml.c `type_traits` (blck_size, type_size = sizeof(block_*) in
//   ggml/src/ggml-common.h) and gguf-py/gguf/constants.py `GGML_QUANT_SIZES`, which spells
//   the same sizes out but Q8_1's, with GGMLQuantizationType for the enum values;
// - the file types: include/llama.h `llama_ftype` (gguf-py `LlamaFileType`);
// - the per-tensor mixes: src/llama-quant.cpp at commit 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714
//   (llama_tensor_get_type_impl, tensor_type_fallback, tensor_allows_quantization);
// - which tensors the converter keeps in F32: convert_hf_to_gguf.py, ModelBase.prepare_tensors
//   (1-D tensors, biases, ffn_gate_inp, ffn_gate_inp_shexp, position_embd);
// - the header layout: ggml/src/gguf.cpp (gguf_init_from_file_impl) and docs/gguf.md.

#include "vramfit/spec/gguf.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/spec/parse.hpp"
#include "vramfit/spec/quant.hpp"

namespace vramfit::spec {

namespace {

constexpr std::uint64_t QK_K = 256;  // super-block of the k-quants (ggml-common.h)

// One row per ggml type: {name, enum ggml_type, block size, bytes per block}. The byte
// counts are sizeof(block_<type>) from ggml-common.h, written as gguf-py spells them.
constexpr GgmlType kTypes[] = {
    {"F32", 0, 1, 4},
    {"F16", 1, 1, 2},
    {"Q4_0", 2, 32, 2 + 16},          // d, 32 nibbles
    {"Q4_1", 3, 32, 2 + 2 + 16},      // d, m, 32 nibbles
    {"Q5_0", 6, 32, 2 + 4 + 16},      // d, qh, 32 nibbles
    {"Q5_1", 7, 32, 2 + 2 + 4 + 16},  // d, m, qh, 32 nibbles
    {"Q8_0", 8, 32, 2 + 32},          // d, 32 int8
    {"Q8_1", 9, 32, 2 + 2 + 32},      // d, s as halves: gguf-py's 4 + 4 + 32 predates them (ggml-common.h)
    {"Q2_K", 10, QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},              // 84
    {"Q3_K", 11, QK_K, 2 + QK_K / 4 + QK_K / 8 + 12},              // 110
    {"Q4_K", 12, QK_K, 2 + 2 + QK_K / 2 + 12},                     // 144
    {"Q5_K", 13, QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12},          // 176
    {"Q6_K", 14, QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16},       // 210
    {"Q8_K", 15, QK_K, 4 + QK_K + QK_K / 8},                       // 292
    {"IQ2_XXS", 16, QK_K, 2 + QK_K / 4},                           // 66
    {"IQ2_XS", 17, QK_K, 2 + QK_K / 4 + QK_K / 32},                // 74
    {"IQ3_XXS", 18, QK_K, 2 + QK_K / 4 + QK_K / 8},                // 98
    {"IQ1_S", 19, QK_K, 2 + QK_K / 8 + QK_K / 16},                 // 50
    {"IQ4_NL", 20, 32, 2 + 16},                                    // 18
    {"IQ3_S", 21, QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4},  // 110
    {"IQ2_S", 22, QK_K, 2 + QK_K / 4 + QK_K / 16},                 // 82
    {"IQ4_XS", 23, QK_K, 2 + 2 + QK_K / 2 + QK_K / 64},            // 136
    {"I8", 24, 1, 1},
    {"I16", 25, 1, 2},
    {"I32", 26, 1, 4},
    {"I64", 27, 1, 8},
    {"F64", 28, 1, 8},
    {"IQ1_M", 29, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},  // 56
    {"BF16", 30, 1, 2},
    {"TQ1_0", 34, QK_K, 2 + 4 * 13},  // 54
    {"TQ2_0", 35, QK_K, 2 + 64},      // 66
    {"MXFP4", 39, 32, 1 + 16},        // e (E8M0), 32 E2M1 nibbles: gpt-oss's experts
    {"NVFP4", 40, 64, 4 + 32},        // four UE4M3 scales (one a 16), 64 E2M1 nibbles (ggml-common.h block_nvfp4)
    {"Q1_0", 41, 128, 2 + 16},        // d, 128 bits (block_q1_0)
};

// One row per llama_ftype: {name, value, llama_ftype_get_default_type, rules implemented}.
// 4 (MOSTLY_Q4_1_SOME_F16) and 33-35 (Q4_0_4_4 ...) were removed from llama.cpp.
constexpr GgufFileType kFileTypes[] = {
    {"F32", 0, "F32", true},         {"F16", 1, "F16", true},           {"Q4_0", 2, "Q4_0", true},
    {"Q4_1", 3, "Q4_1", true},       {"Q8_0", 7, "Q8_0", true},         {"Q5_0", 8, "Q5_0", true},
    {"Q5_1", 9, "Q5_1", true},       {"Q2_K", 10, "Q2_K", true},        {"Q3_K_S", 11, "Q3_K", true},
    {"Q3_K_M", 12, "Q3_K", true},    {"Q3_K_L", 13, "Q3_K", true},      {"Q4_K_S", 14, "Q4_K", true},
    {"Q4_K_M", 15, "Q4_K", true},    {"Q5_K_S", 16, "Q5_K", true},      {"Q5_K_M", 17, "Q5_K", true},
    {"Q6_K", 18, "Q6_K", true},      {"IQ2_XXS", 19, "IQ2_XXS", false}, {"IQ2_XS", 20, "IQ2_XS", false},
    {"Q2_K_S", 21, "Q2_K", false},   {"IQ3_XS", 22, "IQ3_S", false},    {"IQ3_XXS", 23, "IQ3_XXS", false},
    {"IQ1_S", 24, "IQ1_S", false},   {"IQ4_NL", 25, "IQ4_NL", false},   {"IQ3_S", 26, "IQ3_S", false},
    {"IQ3_M", 27, "IQ3_S", false},   {"IQ2_S", 28, "IQ2_XS", false},    {"IQ2_M", 29, "IQ2_S", false},
    {"IQ4_XS", 30, "IQ4_XS", false}, {"IQ1_M", 31, "IQ1_M", false},     {"BF16", 32, "BF16", true},
    {"TQ1_0", 36, "TQ1_0", false},   {"TQ2_0", 37, "TQ2_0", false},     {"MXFP4_MOE", 38, "MXFP4", false},
    {"NVFP4", 39, "NVFP4", false},   {"Q1_0", 40, "Q1_0", false},
};

const GgmlType& type(std::string_view name) {
  const GgmlType* t = ggml_type_by_name(name);
  if (t == nullptr) throw std::logic_error("ggml type missing from kTypes: " + std::string(name));
  return *t;
}

bool is_quantized(const GgmlType& t) { return t.block_size > 1; }

std::string mix_names() {
  std::vector<std::string> names;
  for (const GgufFileType& f : kFileTypes)
    if (f.mix_known) names.emplace_back(f.name);
  return joined(names);
}

// ---------------------------------------------------------------------------------------
// llama-quant.cpp's rules.

/// use_more_bits in llama_tensor_get_type_impl: the first and last eighth of the layers,
/// and every third layer in between.
bool use_more_bits(std::uint64_t i, std::uint64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/// tensor_type_fallback: a row that does not fill whole blocks gets a type with smaller ones.
const GgmlType& fallback(const GgmlType& t, std::uint64_t row, std::string_view file_type) {
  if (row % t.block_size == 0) return t;
  const GgmlType* r = nullptr;
  const std::string_view n = t.name;
  if (n == "IQ1_S" || n == "IQ1_M" || n == "IQ2_XXS" || n == "IQ2_XS" || n == "IQ2_S" || n == "IQ3_XXS" ||
      n == "IQ3_S" || n == "IQ4_XS")
    r = &type("IQ4_NL");
  else if (n == "Q2_K" || n == "Q3_K" || n == "TQ1_0" || n == "TQ2_0")
    r = &type("Q4_0");
  else if (n == "Q4_K")
    r = &type("Q5_0");
  else if (n == "Q5_K")
    r = &type("Q5_1");
  else if (n == "Q6_K")
    r = &type("Q8_0");
  if (r == nullptr) {
    // llama-quantize stops here ("no tensor type fallback is defined for type ...").
    throw InputError(
        "GGUF file type",
        fmt::format(
            "llama.cpp cannot quantize a row of {} elements to {} (blocks of {}), so no {} file exists", row,
            t.name, t.block_size, file_type),
        "choose a k-quant (Q4_K_M, ...) or F16");
  }
  // Still not whole blocks (a row not a multiple of 32): llama.cpp keeps F16.
  return row % r->block_size == 0 ? *r : type("F16");
}

bool attn_v_like(TensorRole r) {
  // category_is_attn_v: attn_v, attn_qkv and attn_kv_b share the attn_v rules and counter.
  return r == TensorRole::attn_v || r == TensorRole::attn_qkv || r == TensorRole::attn_kv_b;
}

bool ffn_down_like(TensorRole r) { return r == TensorRole::ffn_down || r == TensorRole::ffn_down_exp; }

// ---------------------------------------------------------------------------------------
// Mapping a ModelSpec's modules onto GGUF tensors.

/// The role of a Hugging Face linear in llama.cpp's naming (convert_hf_to_gguf.py's tensor
/// map). `after_fc`: an up projection came earlier in the layer, so GPT-2's and
/// Starcoder2's second `c_proj` is the MLP's down projection.
TensorRole role_of(const Linear& l, bool after_fc) {
  std::string_view n = l.name;
  if (const auto dot = n.rfind('.'); dot != std::string_view::npos) n = n.substr(dot + 1);
  if (l.name == "gate" || l.name == "shared_expert_gate")
    return TensorRole::kept_f32;  // ffn_gate_inp(_shexp)
  const auto ffn = [&](TensorRole dense, TensorRole exp) { return l.expert ? exp : dense; };
  if (n == "q_proj") return TensorRole::attn_q;
  if (n == "k_proj") return TensorRole::attn_k;
  if (n == "v_proj") return TensorRole::attn_v;
  if (n == "o_proj") return TensorRole::attn_output;
  if (n == "c_attn" || n == "qkv_proj" || n == "query_key_value") return TensorRole::attn_qkv;
  if (n == "kv_b_proj") return TensorRole::attn_kv_b;
  if (n == "dense") return TensorRole::attn_output;  // gpt_neox, phi
  if (n == "c_proj") return after_fc ? TensorRole::ffn_down : TensorRole::attn_output;
  if (n == "gate_proj") return ffn(TensorRole::ffn_gate, TensorRole::ffn_gate_exp);
  if (n == "up_proj" || n == "gate_up_proj") return ffn(TensorRole::ffn_up, TensorRole::ffn_up_exp);
  if (n == "down_proj") return ffn(TensorRole::ffn_down, TensorRole::ffn_down_exp);
  if (n == "c_fc" || n == "dense_h_to_4h" || n == "fc1") return TensorRole::ffn_up;
  if (n == "dense_4h_to_h" || n == "fc2") return TensorRole::ffn_down;
  return TensorRole::other;  // deepseek's q_a_proj, q_b_proj, kv_a_proj_with_mqa
}

bool is_up(const Linear& l) {
  return l.name == "c_fc" || l.name == "dense_h_to_4h" || l.name == "fc1" || l.name == "up_proj" ||
         l.name == "gate_up_proj";
}

std::uint64_t f32_bytes(std::uint64_t elements) { return checked_mul(elements, 4, "parameters"); }

// Layer counts beyond any real model: the per-layer walk below would take too long.
constexpr std::uint64_t kMaxLayers = 100'000;

// ---------------------------------------------------------------------------------------
// The header parser.

constexpr std::string_view kFixDamaged = "the file is truncated or damaged: download it again";
constexpr std::uint64_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr std::uint64_t kMaxName = 64;        // GGML_MAX_NAME, with the terminating NUL
constexpr std::uint64_t kMaxKey = 65535;      // docs/gguf.md: keys are at most 2^16 - 1 bytes
constexpr std::uint64_t kMinTensorInfo = 24;  // name length, n_dims, type, offset
constexpr std::uint64_t kMinKv = 13;          // key length, value type, one byte of value

/// Reads little-endian values from the prefix; every read checks the bytes are there.
class Cursor {
 public:
  Cursor(std::string_view data, std::uint64_t file_size, std::string origin)
      : data_(data.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), file_size)))),
        file_size_(file_size),
        origin_(std::move(origin)) {}

  [[nodiscard]] std::uint64_t pos() const { return pos_; }
  /// Bytes from here to the end of the file (not of the prefix).
  [[nodiscard]] std::uint64_t left_in_file() const { return file_size_ - pos_; }

  void need(std::uint64_t n, std::string_view what) const {
    if (n <= data_.size() - pos_) return;
    if (n > file_size_ - pos_)
      fail(fmt::format("{} at byte {} needs {} bytes, past the end of the file ({} bytes)", what, pos_, n,
                       file_size_),
           std::string(kFixDamaged));
    throw GgufPrefixShort(
        origin_,
        fmt::format("the header goes past the first {} bytes, the most vramfit reads: {} at byte {} needs {} bytes",
                    data_.size(), what, pos_, n),
        "a GGUF header this large is unusual: check the file, or give the model's config.json instead", pos_ + n);
  }

  std::uint64_t uint(unsigned bytes, std::string_view what) {
    need(bytes, what);
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[static_cast<std::size_t>(pos_ + i)]))
           << (8 * i);
    pos_ += bytes;
    return v;
  }
  std::uint32_t u32(std::string_view what) { return static_cast<std::uint32_t>(uint(4, what)); }
  std::uint64_t u64(std::string_view what) { return uint(8, what); }

  /// A gguf_string: u64 length, then the bytes. `max` bounds the length.
  std::string str(std::string_view what, std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const std::uint64_t n = u64(what);
    if (n > max)
      fail(fmt::format("{} at byte {} is {} bytes long, over the limit of {}", what, pos_ - 8, n, max),
           std::string(kFixDamaged));
    need(n, what);
    std::string s(data_.substr(static_cast<std::size_t>(pos_), static_cast<std::size_t>(n)));
    pos_ += n;
    return s;
  }

  void skip(std::uint64_t n, std::string_view what) {
    need(n, what);
    pos_ += n;
  }

  [[noreturn]] void fail(std::string problem, std::string fix) const {
    throw InputError(origin_, std::move(problem), std::move(fix));
  }

 private:
  std::string_view data_;
  std::uint64_t file_size_;
  std::string origin_;
  std::uint64_t pos_ = 0;
};

/// Bytes of one scalar of a GGUF value type, 0 for string and array.
std::uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64: return 8;
    case GgufType::string:
    case GgufType::array: return 0;
  }
  return 0;
}

bool signed_type(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

/// Reads one scalar (not a string or array) into v.
void read_scalar(Cursor& c, GgufType t, GgufValue& v, std::string_view what) {
  const unsigned n = static_cast<unsigned>(scalar_size(t));
  const std::uint64_t raw = c.uint(n, what);
  if (t == GgufType::f32) {
    float f = 0;
    const auto bits = static_cast<std::uint32_t>(raw);
    std::memcpy(&f, &bits, sizeof f);
    v.real = f;
  } else if (t == GgufType::f64) {
    std::memcpy(&v.real, &raw, sizeof v.real);
  } else if (signed_type(t)) {
    // Sign-extend from n bytes.
    const unsigned shift = 64 - 8 * n;
    v.sint = static_cast<std::int64_t>(raw << shift) >> shift;
  } else {
    v.uint = raw;
  }
}

std::string printable(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f && ch != '\\' && ch != '"')
      out += ch;
    else
      out += fmt::format("\\x{:02x}", u);
  }
  return out;
}

/// A name from the file, safe to print: escaped and cut short.
std::string shown(std::string_view s) {
  std::string p = printable(s.substr(0, 80));
  if (s.size() > 80) p += "...";
  return p;
}

// ---------------------------------------------------------------------------------------
// spec_from_gguf.

/// One row per general.architecture: the transformers model_type it reads as, and every tensor
/// llama.cpp's loader may create for it, required or optional (TENSOR_NOT_REQUIRED): `globals` by
/// name, `blocks` by role in 'blk.N.<role>', each a list of words. `qkv`: the row calls
/// create_tensor_qkv (llama-model.cpp), which takes a fused attn_qkv or attn_q/k/v, each with an
/// optional bias (kQkvRoles). load_tensors' generic pass adds the optional NVFP4 '.scale' and
/// '.input_scale' of the matrices (kScaledRoles, output). A file holding any other tensor is refused
/// by llama_model_loader::done_getting_tensors ("wrong number of tensors"): check_tensor_names.
/// Sources: src/models/<file>.cpp, load_arch_tensors, in llama.cpp of June 2026.
struct ArchRow {
  std::string_view arch;
  std::string_view model_type;
  bool qkv;
  std::string_view globals;
  std::string_view blocks;
};
constexpr ArchRow kArchs[] = {
    // llama.cpp (mistral converts to llama too; with experts: mixtral): optional biases, the experts
    // (ffn_gate_exps optional; the shared expert for Granite MoE), rope_freqs or LongRoPE's factors
    // (created for every layer, TENSOR_DUPLICATED: one tensor in the file).
    {"llama", "llama", true,
     "token_embd.weight output_norm.weight output.weight rope_freqs.weight rope_factors_long.weight "
     "rope_factors_short.weight",
     "attn_norm.weight attn_output.weight attn_output.bias ffn_norm.weight ffn_gate.weight ffn_gate.bias "
     "ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias ffn_gate_inp.weight ffn_gate_exps.weight "
     "ffn_down_exps.weight ffn_up_exps.weight ffn_gate_shexp.weight ffn_up_shexp.weight "
     "ffn_down_shexp.weight"},
    // qwen2.cpp: the lm_head may carry a bias.
    {"qwen2", "qwen2", true, "token_embd.weight output_norm.weight output.weight output.bias",
     "attn_norm.weight attn_output.weight ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight"},
    // qwen2moe.cpp: a router in every block, the experts, the shared expert and its gate.
    {"qwen2moe", "qwen2_moe", true, "token_embd.weight output_norm.weight output.weight",
     "attn_norm.weight attn_output.weight ffn_norm.weight ffn_gate_inp.weight ffn_gate_exps.weight "
     "ffn_down_exps.weight ffn_up_exps.weight ffn_gate_inp_shexp.weight ffn_gate_shexp.weight "
     "ffn_down_shexp.weight ffn_up_shexp.weight"},
    // qwen3.cpp: q/k norms; a reranker's cls.output.
    {"qwen3", "qwen3", true, "token_embd.weight output_norm.weight output.weight cls.output.weight",
     "attn_norm.weight attn_output.weight attn_k_norm.weight attn_q_norm.weight ffn_norm.weight "
     "ffn_gate.weight ffn_down.weight ffn_up.weight"},
    // qwen3moe.cpp.
    {"qwen3moe", "qwen3_moe", true, "token_embd.weight output_norm.weight output.weight",
     "attn_norm.weight attn_output.weight attn_k_norm.weight attn_q_norm.weight ffn_norm.weight "
     "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight"},
    // gemma.cpp: the output is always the embedding (no output.weight).
    {"gemma", "gemma", true, "token_embd.weight output_norm.weight",
     "attn_norm.weight attn_output.weight ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight"},
    // gemma2.cpp: post norms; the output is always the embedding.
    {"gemma2", "gemma2", true, "token_embd.weight output_norm.weight",
     "attn_norm.weight attn_output.weight post_attention_norm.weight ffn_norm.weight ffn_gate.weight "
     "ffn_up.weight ffn_down.weight post_ffw_norm.weight"},
    // gemma3.cpp: post norms, q/k norms; EmbeddingGemma's dense_2 and dense_3.
    {"gemma3", "gemma3_text", true,
     "token_embd.weight output_norm.weight output.weight dense_2.weight dense_3.weight",
     "attn_norm.weight attn_output.weight post_attention_norm.weight attn_k_norm.weight attn_q_norm.weight "
     "ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight"},
    // phi3.cpp: ffn_up holds gate and up; LongRoPE's factors once for every layer.
    {"phi3", "phi3", true,
     "token_embd.weight output_norm.weight output.weight rope_factors_long.weight rope_factors_short.weight",
     "attn_norm.weight attn_output.weight ffn_norm.weight ffn_down.weight ffn_up.weight"},
    // gpt2.cpp: learned positions, layer norms and linears with biases, attn_qkv only.
    {"gpt2", "gpt2", false,
     "token_embd.weight position_embd.weight output_norm.weight output_norm.bias output.weight",
     "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias "
     "ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias"},
    // gptneox.cpp: as gpt2, without learned positions.
    {"gptneox", "gpt_neox", false, "token_embd.weight output_norm.weight output_norm.bias output.weight",
     "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias "
     "ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias"},
    // starcoder2.cpp.
    {"starcoder2", "starcoder2", true, "token_embd.weight output_norm.weight output_norm.bias output.weight",
     "attn_norm.weight attn_norm.bias attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias "
     "ffn_down.weight ffn_up.weight ffn_down.bias ffn_up.bias"},
    // olmoe.cpp: q/k norms over the whole width.
    {"olmoe", "olmoe", true, "token_embd.weight output_norm.weight output.weight",
     "attn_norm.weight attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight "
     "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight"},
    // openai-moe.cpp (llama.cpp's openai-moe): sinks, biased router and experts, no ffn_norm.
    {"gpt-oss", "gpt_oss", true, "token_embd.weight output_norm.weight output.weight",
     "attn_norm.weight post_attention_norm.weight attn_output.weight attn_output.bias attn_sinks.weight "
     "ffn_gate_inp.weight ffn_gate_inp.bias ffn_gate_exps.weight ffn_gate_exps.bias ffn_down_exps.weight "
     "ffn_down_exps.bias ffn_up_exps.weight ffn_up_exps.bias"},
};
/// create_tensor_qkv: attn_qkv with its bias, or attn_q/k/v with theirs (each bias optional).
constexpr std::string_view kQkvRoles =
    "attn_qkv.weight attn_qkv.bias attn_q.weight attn_q.bias attn_k.weight attn_k.bias attn_v.weight "
    "attn_v.bias";
/// load_tensors' generic pass (llama-model.cpp): the optional NVFP4 '<role>.scale' and
/// '<role>.input_scale' of these matrices, where the row has '<role>.weight'; output's likewise.
constexpr std::string_view kScaledRoles =
    "attn_q attn_k attn_v attn_output attn_qkv ffn_gate ffn_down ffn_up ffn_gate_shexp ffn_down_shexp "
    "ffn_up_shexp ffn_gate_exps ffn_down_exps ffn_up_exps";

/// The words of one of kArchs' lists, added to `out`.
void add_words(std::string_view words, std::set<std::string>& out) {
  while (!words.empty()) {
    const auto space = words.find(' ');
    if (space != 0) out.emplace(words.substr(0, space));
    words = space == std::string_view::npos ? std::string_view() : words.substr(space + 1);
  }
}

/// kArchs' row as two sets: the names without a block, the roles of 'blk.N.<role>'.
std::pair<std::set<std::string>, std::set<std::string>> arch_tensor_sets(const ArchRow& row) {
  std::set<std::string> globals, blocks, scaled;
  add_words(row.globals, globals);
  add_words(row.blocks, blocks);
  if (row.qkv) add_words(kQkvRoles, blocks);
  add_words(kScaledRoles, scaled);
  for (const std::string& m : scaled)
    if (blocks.count(m + ".weight") > 0) blocks.insert({m + ".scale", m + ".input_scale"});
  if (globals.count("output.weight") > 0) globals.insert({"output.scale", "output.input_scale"});
  return {std::move(globals), std::move(blocks)};
}

constexpr std::array<std::string_view, std::size(kArchs)> kArchNames = [] {
  std::array<std::string_view, std::size(kArchs)> a{};
  for (std::size_t i = 0; i < std::size(kArchs); ++i) a[i] = kArchs[i].arch;
  return a;
}();

/// gguf.c's gguf_type_name: the names llama.cpp prints in its type errors.
std::string_view gguf_type_name(GgufType t) {
  constexpr std::string_view kNames[] = {"u8",   "i8",     "u16", "i16", "u32", "i32",
                                         "f32", "bool", "str", "arr", "u64", "i64", "f64"};
  const auto i = static_cast<std::size_t>(t);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

std::string describe(const GgufValue& v) {
  switch (v.type) {
    case GgufType::string: return fmt::format("the string \"{}\"", shown(v.str));
    case GgufType::array: return fmt::format("an array of {} elements", v.array_length);
    case GgufType::f32:
    case GgufType::f64: return fmt::format("{}", v.real);
    case GgufType::boolean: return v.uint ? "true" : "false";
    default: return signed_type(v.type) ? fmt::format("{}", v.sint) : fmt::format("{}", v.uint);
  }
}

/// The llama-model-loader guess when general.file_type is absent: the type most tensors
/// have, as the file type that makes it (llama_model_loader's ftype from type_max).
std::string guess_file_type(const GgufHeader& h) {
  std::map<std::string_view, std::uint64_t> count;
  for (const GgufTensor& t : h.tensors)
    if (t.ne.size() >= 2) ++count[t.type->name];
  std::string_view top = "F32";
  std::uint64_t n = 0;
  for (const auto& [name, c] : count)
    if (c > n) {
      top = name;
      n = c;
    }
  if (top == "Q3_K") return "Q3_K_M";
  if (top == "Q4_K") return "Q4_K_M";
  if (top == "Q5_K") return "Q5_K_M";
  return std::string(top);
}

/// The Quantization of a GGUF file type: --quant's own when it has one, else bits = whole
/// bits per weight of the file type's base type (16 for F16).
Quantization gguf_quantization(const std::string& ftype) {
  Quantization q;
  if (const auto parsed = parse_quant(ftype)) {
    q = *parsed;
  } else {
    const GgufFileType* f = gguf_file_type_by_name(ftype);
    const GgmlType* base = ggml_type_by_name(f != nullptr ? f->base : std::string_view(ftype));
    if (base != nullptr) q.bits = base->type_size * 8 / base->block_size;
  }
  q.method = QuantMethod::gguf;
  q.gguf_type = ftype;
  return q;
}

}  // namespace

// ---------------------------------------------------------------------------------------

std::span<const GgmlType> ggml_types() noexcept { return kTypes; }

const GgmlType* ggml_type_by_id(std::uint32_t id) noexcept {
  for (const GgmlType& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

const GgmlType* ggml_type_by_name(std::string_view name) noexcept {
  for (const GgmlType& t : kTypes)
    if (iequals(t.name, name)) return &t;
  return nullptr;
}

std::uint64_t ggml_tensor_bytes(const GgmlType& t, std::span<const std::uint64_t> ne,
                                std::string_view field) {
  const std::uint64_t row = ne.empty() ? 1 : ne[0];
  if (row % t.block_size != 0)
    throw InputError(
        std::string(field),
        fmt::format("a row of {} elements is not a multiple of {}'s block of {}", row, t.name, t.block_size),
        std::string(kFixDamaged));
  std::uint64_t bytes = checked_mul(row / t.block_size, t.type_size, field);
  for (std::size_t i = 1; i < ne.size(); ++i) bytes = checked_mul(bytes, ne[i], field);
  return bytes;
}

std::span<const GgufFileType> gguf_file_types() noexcept { return kFileTypes; }

const GgufFileType* gguf_file_type_by_id(std::uint32_t id) noexcept {
  for (const GgufFileType& f : kFileTypes)
    if (f.id == id) return &f;
  return nullptr;
}

const GgufFileType* gguf_file_type_by_name(std::string_view name) noexcept {
  for (const GgufFileType& f : kFileTypes)
    if (iequals(f.name, name)) return &f;
  return nullptr;
}

const GgmlType& gguf_tensor_type(std::string_view file_type, TensorRole role, const TensorPlace& p) {
  const GgufFileType* ft = gguf_file_type_by_name(file_type);
  if (ft == nullptr || !ft->mix_known)
    throw InputError("GGUF file type", fmt::format("no per-tensor rules for '{}'", shown(file_type)),
                     "known: " + mix_names());
  if (role == TensorRole::kept_f32) return type("F32");
  const GgmlType& base = type(ft->base);
  // tensor_allows_quantization keeps 2-D weights in the base type when it is not quantized.
  if (!is_quantized(base)) return base;

  const std::string_view f = ft->name;
  const GgmlType* t = &base;
  const std::uint64_t i = p.layer, n = p.n_layers;
  const bool tied_embd = role == TensorRole::token_embd && !p.has_output;
  if (role == TensorRole::output || tied_embd) {
    // The output tensor (or the tied embedding that serves as it) gets Q6_K, except in Q8_0
    // files, and Q8_0 when its rows do not fill the base type's blocks.
    if (p.row % t->block_size != 0)
      t = &type("Q8_0");
    else if (t->name != "Q8_0")
      t = &type("Q6_K");
  } else if (role == TensorRole::token_embd) {
    // Untied embeddings keep the base type in every file type sized here.
  } else if (attn_v_like(role)) {
    if (f == "Q2_K")
      t = &type(p.gqa >= 4 ? "Q4_K" : "Q3_K");
    else if (f == "Q3_K_M")
      t = &type(i < 2 ? "Q5_K" : "Q4_K");
    else if (f == "Q3_K_L")
      t = &type("Q5_K");
    else if ((f == "Q4_K_M" || f == "Q5_K_M") && use_more_bits(i, n))
      t = &type("Q6_K");
    else if (f == "Q4_K_S" && i < 4)
      t = &type("Q5_K");
    // LLM_TYPE_70B: the 8x smaller attn_v of Llama-2-70B gets more bits at little cost.
    if (p.llama_70b && (t->name == "Q3_K" || t->name == "Q4_K")) t = &type("Q5_K");
    if (p.n_expert == 8) t = &type("Q8_0");  // Mixtral-8x7B: "trades just ~128MB"
  } else if (role == TensorRole::attn_k) {
    if (p.n_expert == 8) t = &type("Q8_0");
  } else if (ffn_down_like(role)) {
    if (f == "Q2_K")
      t = &type("Q3_K");
    else if (f == "Q3_K_M")
      t = &type(i < n / 16 ? "Q5_K" : "Q4_K");  // use_more_bits only matters for falcon
    else if (f == "Q3_K_L")
      t = &type("Q5_K");
    else if (f == "Q4_K_M") {
      if (use_more_bits(i, n)) t = &type("Q6_K");
    } else if (f == "Q5_K_M" && use_more_bits(i, n))
      t = &type("Q6_K");
    else if (f == "Q4_K_S" && i < n / 8)
      t = &type("Q5_K");
  } else if (role == TensorRole::attn_output) {
    if (p.n_expert == 8) {
      if (f == "Q2_K" || f == "Q3_K_S" || f == "Q3_K_M" || f == "Q4_K_S" || f == "Q4_K_M") t = &type("Q5_K");
    } else if (f == "Q2_K") {
      t = &type("Q3_K");
    } else if (f == "Q3_K_M") {
      t = &type("Q4_K");
    } else if (f == "Q3_K_L") {
      t = &type("Q5_K");
    }
  }
  // attn_q, ffn_gate, ffn_up and other 2-D weights keep the base type in these file types.
  return fallback(*t, p.row, f);
}

TensorPlace tensor_place(const ModelSpec& m) {
  TensorPlace place;
  place.n_layers = m.num_layers;
  place.has_output = !m.tied_embeddings;
  place.gqa = m.num_kv_heads == 0 ? 1 : m.num_heads / m.num_kv_heads;
  place.n_expert = m.moe.num_experts;
  // llama-model.cpp load_hparams, LLM_ARCH_LLAMA: 80 layers are LLM_TYPE_70B with GQA (65B
  // without). convert_hf_to_gguf.py writes llama, mistral and mixtral as the llama arch.
  place.llama_70b = (m.model_type == "llama" || m.model_type == "mistral" || m.model_type == "mixtral") &&
                    m.num_layers == 80 && m.num_heads != m.num_kv_heads;
  return place;
}

std::uint64_t gguf_model_bytes(const ModelSpec& m, std::string_view file_type) {
  if (m.num_layers > kMaxLayers)
    throw InputError("GGUF file type",
                     fmt::format("{} layers is far more than any real model has", m.num_layers),
                     "check num_hidden_layers");
  TensorPlace place = tensor_place(m);

  const std::uint64_t H = m.hidden_size;
  const auto tensor = [&](TensorRole role, std::uint64_t row, std::uint64_t rows, std::uint64_t copies) {
    place.row = row;
    const GgmlType& t = gguf_tensor_type(file_type, role, place);
    const std::array<std::uint64_t, 3> ne{row, rows, copies};
    return ggml_tensor_bytes(t, ne, "parameters");
  };

  std::uint64_t total = tensor(TensorRole::token_embd, H, m.vocab_size, 1);
  const std::uint64_t token_elems = checked_mul(H, m.vocab_size, "parameters");
  if (m.embedding_params > token_elems)  // GPT-2's position_embd, kept in F32
    total = checked_add(total, f32_bytes(m.embedding_params - token_elems), "parameters");

  std::uint64_t layer = 0;
  for (const LayerGroup& g : m.layers) {
    for (std::uint64_t k = 0; k < g.count; ++k, ++layer) {
      place.layer = layer;
      bool after_fc = false;
      for (const Linear& l : g.linears) {
        total = checked_add(total, tensor(role_of(l, after_fc), l.in_features, l.out_features, l.copies),
                            "parameters");
        if (l.bias)
          total = checked_add(total, f32_bytes(checked_mul(l.out_features, l.copies)), "parameters");
        after_fc = after_fc || is_up(l);
      }
      total = checked_add(total, f32_bytes(checked_add(g.norm_params, g.other_params)), "parameters");
    }
  }
  total = checked_add(total, f32_bytes(m.final_norm_params), "parameters");
  if (!m.tied_embeddings) {
    total = checked_add(total, tensor(TensorRole::output, H, m.vocab_size, 1), "parameters");
    if (m.lm_head_params > token_elems)  // phi's lm_head bias
      total = checked_add(total, f32_bytes(m.lm_head_params - token_elems), "parameters");
  }
  return total;
}

// ---------------------------------------------------------------------------------------

std::optional<std::uint64_t> GgufValue::as_uint() const noexcept {
  switch (type) {
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64: return uint;
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64:
      if (sint >= 0) return static_cast<std::uint64_t>(sint);
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::uint64_t GgufTensor::elements() const {
  std::uint64_t n = 1;
  for (const std::uint64_t d : ne) n = checked_mul(n, d, "parameters");
  return n;
}

const GgufValue* GgufHeader::find(std::string_view key) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufHeader::tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

/// The magic and the version: little-endian GGUF 2 or 3.
void read_magic_and_version(Cursor& c, std::string_view prefix, std::uint64_t file_size, GgufHeader& h) {
  if (std::min<std::uint64_t>(prefix.size(), file_size) < 4)
    c.fail(fmt::format("too short for a GGUF file ({} bytes)",
                       std::min<std::uint64_t>(prefix.size(), file_size)),
           std::string(kFixDamaged));
  if (prefix.substr(0, 4) != "GGUF")
    c.fail(
        fmt::format("not a GGUF file: it starts with \"{}\", not \"GGUF\"", printable(prefix.substr(0, 4))),
        "give a .gguf file, a config.json, or the folder holding them");
  c.skip(4, "the magic");
  h.version = c.u32("the version");
  if (h.version != 0 && (h.version & 0xFFFFu) == 0)  // a big-endian 2 or 3 read little-endian (gguf.cpp)
    c.fail(
        fmt::format("the file is big-endian (its version reads {:#x}); only little-endian GGUF is supported",
                    h.version),
        "convert the model again without --bigendian");
  if (h.version == 1)
    c.fail("GGUF version 1 is not supported (only versions 2 and 3)",
           "convert the model again with a llama.cpp from after August 2023");
  if (h.version != 2 && h.version != 3)
    c.fail(fmt::format("GGUF version {} is not supported (only versions 2 and 3)", h.version),
           "check the file, or convert the model with a current llama.cpp");
}

/// An array value's element type, length and elements (strings kept up to kGgufKeptStrings).
void read_array(Cursor& c, const std::string& key, const std::string& what, std::uint64_t file_size, GgufValue& v) {
  const std::uint32_t et = c.u32(what);
  if (et > static_cast<std::uint32_t>(GgufType::f64) || et == static_cast<std::uint32_t>(GgufType::array))
    c.fail(fmt::format("metadata '{}' is an array of {}, which GGUF does not allow", shown(key),
                       et == static_cast<std::uint32_t>(GgufType::array) ? std::string("arrays")
                                                                         : fmt::format("type {}", et)),
           std::string(kFixDamaged));
  v.array_type = static_cast<GgufType>(et);
  v.array_length = c.u64(what);
  const std::uint64_t elem = v.array_type == GgufType::string ? 8 : scalar_size(v.array_type);
  if (v.array_length > c.left_in_file() / elem)
    c.fail(fmt::format("metadata '{}' declares {} elements, more than the file's {} bytes can hold", shown(key),
                       v.array_length, file_size),
           std::string(kFixDamaged));
  if (v.array_type == GgufType::string) {
    const bool keep = v.array_length <= kGgufKeptStrings;
    for (std::uint64_t e = 0; e < v.array_length; ++e) {
      std::string s = c.str(what);
      if (keep) v.array_strings.push_back(std::move(s));
    }
  } else {
    c.skip(v.array_length * elem, what);
  }
}

/// The `n_kv` metadata entries, each key once.
void read_metadata(Cursor& c, std::uint64_t n_kv, std::uint64_t file_size, GgufHeader& h) {
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.str(fmt::format("the key of metadata entry {}", k), kMaxKey);
    const std::string what = fmt::format("the value of '{}'", shown(key));
    GgufValue v;
    const std::uint32_t vt = c.u32(what);
    if (vt > static_cast<std::uint32_t>(GgufType::f64))
      c.fail(fmt::format("metadata '{}' has unknown value type {}", shown(key), vt), std::string(kFixDamaged));
    v.type = static_cast<GgufType>(vt);
    if (v.type == GgufType::string) {
      v.str = c.str(what);
    } else if (v.type == GgufType::array) {
      read_array(c, key, what, file_size, v);
    } else {
      read_scalar(c, v.type, v, what);
    }
    if (!h.metadata.emplace(key, std::move(v)).second)
      c.fail(fmt::format("metadata key '{}' appears twice", shown(key)), std::string(kFixDamaged));
  }
  if (const GgufValue* a = h.find("general.alignment")) {
    const auto al = a->as_uint();
    if (!al || *al == 0 || (*al & (*al - 1)) != 0 || *al > (1ULL << 30))
      c.fail(fmt::format("general.alignment is {}, not a power of two", describe(*a)), std::string(kFixDamaged));
    h.alignment = *al;
  }
}

/// Tensor info `k`: name, dimensions, ggml type, size and offset, checked as ggml does.
GgufTensor read_tensor_info(Cursor& c, std::uint64_t k, std::uint64_t alignment, std::string_view origin) {
  GgufTensor t;
  t.name = c.str(fmt::format("the name of tensor {}", k), kMaxName - 1);
  const std::string label = fmt::format("tensor '{}'", shown(t.name));
  const std::uint32_t n_dims = c.u32(label);
  if (n_dims > kMaxDims)
    c.fail(fmt::format("{} has {} dimensions; ggml allows at most {}", label, n_dims, kMaxDims),
           std::string(kFixDamaged));
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const std::uint64_t ne = c.u64(label);
    // ggml keeps sizes in int64_t: each dimension and their product must fit.
    if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (ne != 0 && elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ne))
      c.fail(fmt::format("{} has absurd dimensions: its element count overflows 63 bits", label),
             std::string(kFixDamaged));
    elements *= ne;
    t.ne.push_back(ne);
  }
  const std::uint32_t id = c.u32(label);
  t.type = ggml_type_by_id(id);
  if (t.type == nullptr)
    c.fail(fmt::format("{} has unknown ggml type id {}", label, id),
           "the file uses a type this vramfit does not know, or is damaged");
  const std::uint64_t row = t.ne.empty() ? 1 : t.ne[0];
  if (row % t.type->block_size != 0)
    c.fail(fmt::format("{}: a row of {} elements is not a multiple of {}'s block of {}", label, row, t.type->name,
                       t.type->block_size),
           std::string(kFixDamaged));
  try {
    t.bytes = ggml_tensor_bytes(*t.type, t.ne, origin);
  } catch (const InputError&) {  // 2^63 elements of 8 bytes
    c.fail(fmt::format("{} has absurd dimensions: its size overflows 64 bits", label), std::string(kFixDamaged));
  }
  t.offset = c.u64(label);
  if (t.offset % alignment != 0)
    c.fail(fmt::format("{} starts at offset {}, not a multiple of the alignment {}", label, t.offset, alignment),
           std::string(kFixDamaged));
  return t;
}

/// The tensors lie one after the other in the data section, which ends within the file.
void check_tensor_layout(const Cursor& c, std::uint64_t file_size, GgufHeader& h) {
  // llama.cpp's loader (ggml/src/gguf.cpp, gguf_init_from_file_impl) requires each tensor to start
  // where the one before it ends, padded to the alignment ("tensor '%s' has offset %lu, expected
  // %zu"): tensors that overlap, or leave gaps, are refused there, so they are here.
  std::uint64_t expected = 0;
  for (const GgufTensor& t : h.tensors) {
    if (t.offset != expected)
      c.fail(fmt::format("tensor '{}' starts at offset {} of the data section, but the tensors before it end at "
                         "{}: its data {} theirs (llama.cpp refuses such a file)",
                         shown(t.name), t.offset, expected, t.offset < expected ? "overlaps" : "leaves a gap after"),
             std::string(kFixDamaged));
    const std::uint64_t padded = t.bytes + (h.alignment - t.bytes % h.alignment) % h.alignment;
    if (padded < t.bytes || expected > std::numeric_limits<std::uint64_t>::max() - padded)
      c.fail(fmt::format("tensor '{}' ends past 2^64 bytes", shown(t.name)), std::string(kFixDamaged));
    expected += padded;
  }

  // The data section starts at the next multiple of the alignment (gguf.cpp: GGML_PAD).
  h.data_start = c.pos() + (h.alignment - c.pos() % h.alignment) % h.alignment;
  for (const GgufTensor& t : h.tensors) {
    // A data section that starts past the end holds not even an empty tensor.
    if (h.data_start > file_size || t.offset > file_size - h.data_start ||
        t.bytes > file_size - h.data_start - t.offset)
      c.fail(
          fmt::format("tensor '{}' ({} bytes at offset {} of the data section, which starts at byte {}) ends "
                      "past the end of the file ({} bytes)",
                      shown(t.name), t.bytes, t.offset, h.data_start, file_size),
          std::string(kFixDamaged));
  }
}

}  // namespace

GgufHeader parse_gguf_header(std::string_view prefix, std::uint64_t file_size, std::string_view origin) {
  Cursor c(prefix, file_size, std::string(origin));
  GgufHeader h;
  read_magic_and_version(c, prefix, file_size, h);

  const std::uint64_t n_tensors = c.u64("the tensor count");
  const std::uint64_t n_kv = c.u64("the metadata count");
  if (n_tensors > c.left_in_file() / kMinTensorInfo)
    c.fail(fmt::format("the header declares {} tensor{}, more than the file's {} bytes can describe",
                       n_tensors, n_tensors == 1 ? "" : "s", file_size),
           std::string(kFixDamaged));
  if (n_kv > c.left_in_file() / kMinKv)
    c.fail(fmt::format("the header declares {} metadata entr{}, more than the file's {} bytes can hold", n_kv,
                       n_kv == 1 ? "y" : "ies", file_size),
           std::string(kFixDamaged));

  // --- metadata ------------------------------------------------------------------------
  read_metadata(c, n_kv, file_size, h);

  // --- tensor infos --------------------------------------------------------------------
  std::set<std::string, std::less<>> names;
  h.tensors.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n_tensors, 1 << 16)));
  for (std::uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t = read_tensor_info(c, k, h.alignment, origin);
    if (!names.insert(t.name).second)
      c.fail(fmt::format("tensor '{}' appears twice", shown(t.name)), std::string(kFixDamaged));
    h.tensors.push_back(std::move(t));
  }

  // --- where the data lies ---------------------------------------------------------------
  check_tensor_layout(c, file_size, h);
  return h;
}

std::span<const std::string_view> gguf_architectures() noexcept { return kArchNames; }

GgufArchTensors gguf_arch_tensors(std::string_view arch) {
  for (const ArchRow& r : kArchs)
    if (r.arch == arch) {
      auto [globals, blocks] = arch_tensor_sets(r);
      return {{globals.begin(), globals.end()}, {blocks.begin(), blocks.end()}};
    }
  return {};
}

namespace {

constexpr std::string_view kFixMissing = "the file was not written by llama.cpp's converter, or is damaged";

/// A block tensor's layer and role: "blk.12.ffn_gate_inp.weight" -> {12, "ffn_gate_inp.weight"}.
struct BlockTensor {
  std::uint64_t layer = 0;
  std::string role;
};
std::optional<BlockTensor> block_tensor(const std::string& name) {
  unsigned long long i = 0;
  char rest[64] = {};
  if (std::sscanf(name.c_str(), "blk.%llu.%63s", &i, rest) != 2) return std::nullopt;
  return BlockTensor{i, rest};
}

/// The row of the file's general.architecture; throws naming the supported ones.
const ArchRow& arch_row(const GgufHeader& h, const std::string& org) {
  const GgufValue* archv = h.find("general.architecture");
  if (archv == nullptr || archv->type != GgufType::string)
    throw InputError(
        org + ": general.architecture",
        archv == nullptr ? "missing" : fmt::format("expected a string, got {}", describe(*archv)),
        std::string(kFixMissing));
  const ArchRow* row = nullptr;
  for (const ArchRow& r : kArchs)
    if (r.arch == archv->str) row = &r;
  if (row == nullptr)
    throw InputError(org + ": general.architecture",
                     fmt::format("architecture '{}' is not supported", shown(archv->str)),
                     "supported: " + joined({kArchNames.begin(), kArchNames.end()}) +
                         "; or give the model's config.json");
  return *row;
}

/// The metadata of one architecture ("llama.block_count"), each problem collected in `diags`.
struct ArchKeys {
  const GgufHeader& h;
  const std::string& org;
  std::string arch;
  Diagnostics& diags;

  [[nodiscard]] std::string key(std::string_view suffix) const { return arch + "." + std::string(suffix); }
  std::optional<std::uint64_t> uint_of(const std::string& k) const {
    const GgufValue* v = h.find(k);
    if (v == nullptr) return std::nullopt;
    if (const auto u = v->as_uint()) return u;
    diags.add(org + ": " + k, fmt::format("expected a non-negative integer, got {}", describe(*v)),
              std::string(kFixMissing));
    return std::nullopt;
  }
  std::uint64_t required(const std::string& k) const {
    if (h.find(k) == nullptr) {
      diags.add(org + ": " + k, "missing: the model's size cannot be worked out without it", std::string(kFixMissing));
      return 0;
    }
    return uint_of(k).value_or(0);
  }
  std::optional<double> real_of(const std::string& k) const {
    const GgufValue* v = h.find(k);
    if (v == nullptr) return std::nullopt;
    if (v->type == GgufType::f32 || v->type == GgufType::f64) return v->real;
    diags.add(org + ": " + k, fmt::format("expected a number, got {}", describe(*v)), std::string(kFixMissing));
    return std::nullopt;
  }
  [[nodiscard]] bool has(std::string_view tensor) const { return h.tensor(tensor) != nullptr; }
};

/// The config.json keys of the sizes: layers, widths, heads, context, vocabulary, tied
/// embeddings, rotary share and sliding window.
void add_sizes(const ArchKeys& a, nlohmann::json& cfg) {
  cfg["hidden_size"] = a.required(a.key("embedding_length"));
  cfg["num_hidden_layers"] = a.required(a.key("block_count"));
  const std::uint64_t heads = a.required(a.key("attention.head_count"));
  cfg["num_attention_heads"] = heads;
  if (const auto kv = a.uint_of(a.key("attention.head_count_kv"))) cfg["num_key_value_heads"] = *kv;
  std::uint64_t head_dim = 0;
  if (const auto kl = a.uint_of(a.key("attention.key_length"))) {
    cfg["head_dim"] = *kl;
    head_dim = *kl;
  } else if (heads != 0) {
    head_dim = cfg["hidden_size"].get<std::uint64_t>() / heads;
  }
  if (const auto ctx = a.uint_of(a.key("context_length"))) cfg["max_position_embeddings"] = *ctx;
  if (const auto ff = a.uint_of(a.key("feed_forward_length"))) cfg["intermediate_size"] = *ff;

  // The vocabulary: the architecture's key, else the tokenizer's list, else the embedding's rows.
  if (const auto v = a.uint_of(a.key("vocab_size"))) {
    cfg["vocab_size"] = *v;
  } else if (const GgufValue* tokens = a.h.find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->type == GgufType::array) {
    cfg["vocab_size"] = tokens->array_length;
  } else if (const GgufTensor* emb = a.h.tensor("token_embd.weight"); emb != nullptr && emb->ne.size() == 2) {
    cfg["vocab_size"] = emb->ne[1];
  } else {
    a.diags.add(a.org + ": " + a.key("vocab_size"),
                "missing, and neither tokenizer.ggml.tokens nor token_embd.weight gives the vocabulary",
                std::string(kFixMissing));
  }
  // convert_hf_to_gguf.py writes no output.weight when the embeddings are tied.
  cfg["tie_word_embeddings"] = !a.has("output.weight");

  if (const auto rope = a.uint_of(a.key("rope.dimension_count")); rope && head_dim != 0 && *rope < head_dim)
    cfg["partial_rotary_factor"] = static_cast<double>(*rope) / static_cast<double>(head_dim);
  if (const auto sw = a.uint_of(a.key("attention.sliding_window"))) cfg["sliding_window"] = *sw;
}

/// The flags of the model type: biases the converter stored (their presence is the config's
/// flag), gpt_neox's residual and rotary share, gemma2's soft-capping.
void add_type_flags(const ArchKeys& a, const std::string& model_type, nlohmann::json& cfg) {
  if (model_type == "llama" || model_type == "mixtral") {
    cfg["attention_bias"] = a.has("blk.0.attn_q.bias");
    cfg["mlp_bias"] = a.has("blk.0.ffn_up.bias");
  }
  if (model_type == "starcoder2") cfg["use_bias"] = a.has("blk.0.attn_q.bias");
  if (model_type == "gpt_oss") {
    // openai-moe.cpp: biased attention, sinks, and every other layer sliding (its
    // sliding_window_pattern, 2 by default: the even layers slide, as GptOssConfig's layer_types;
    // llama_hparams::set_swa_pattern: layer il slides where il % n < n - 1, every layer for n = 0).
    cfg["attention_bias"] = a.has("blk.0.attn_q.bias");
    const std::uint64_t period = a.uint_of(a.key("attention.sliding_window_pattern")).value_or(2);
    const std::uint64_t L = cfg["num_hidden_layers"].get<std::uint64_t>();
    if (cfg.contains("sliding_window") && L <= kMaxLayers) {
      nlohmann::json types = nlohmann::json::array();
      for (std::uint64_t i = 0; i < L; ++i)
        types.push_back(period == 0 || i % period < period - 1 ? "sliding_attention" : "full_attention");
      cfg["layer_types"] = types;
    }
  }
  if (model_type == "gpt_neox") {
    cfg["attention_bias"] = a.has("blk.0.attn_qkv.bias");
    if (const GgufValue* pr = a.h.find(a.key("use_parallel_residual")); pr && pr->type == GgufType::boolean)
      cfg["use_parallel_residual"] = pr->uint != 0;
    if (!cfg.contains("partial_rotary_factor")) cfg["rotary_pct"] = 1.0;  // the whole head rotates
  }
  if (model_type == "gemma2") {
    if (const auto sc = a.real_of(a.key("final_logit_softcapping"))) cfg["final_logit_softcapping"] = *sc;
    if (const auto sc = a.real_of(a.key("attn_logit_softcapping"))) cfg["attn_logit_softcapping"] = *sc;
  }
}

/// The mixture of experts of a model with `experts` > 0: counts, expert widths, and the dense
/// layers of qwen2_moe / qwen3_moe (those without a router).
void add_experts(const ArchKeys& a, const std::string& model_type, std::uint64_t experts, nlohmann::json& cfg) {
  cfg[model_type == "mixtral" || model_type == "gpt_oss" ? "num_local_experts" : "num_experts"] = experts;
  cfg["num_experts_per_tok"] = a.required(a.key("expert_used_count"));
  const auto expert_ff = a.uint_of(a.key("expert_feed_forward_length"));
  if (model_type == "qwen2_moe" || model_type == "qwen3_moe") {
    cfg["moe_intermediate_size"] = a.required(a.key("expert_feed_forward_length"));
    if (const auto sh = a.uint_of(a.key("expert_shared_feed_forward_length")))
      cfg["shared_expert_intermediate_size"] = *sh;
    // Layers without a router are dense (mlp_only_layers).
    nlohmann::json dense = nlohmann::json::array();
    const std::uint64_t L = cfg["num_hidden_layers"].get<std::uint64_t>();
    std::set<std::uint64_t> routed;
    for (const GgufTensor& t : a.h.tensors)
      if (const auto b = block_tensor(t.name); b && b->role == "ffn_gate_inp.weight") routed.insert(b->layer);
    if (!routed.empty() && L <= kMaxLayers)
      for (std::uint64_t i = 0; i < L; ++i)
        if (routed.count(i) == 0) dense.push_back(i);
    if (!dense.empty()) cfg["mlp_only_layers"] = dense;
  } else if (!cfg.contains("intermediate_size") && expert_ff) {
    cfg["intermediate_size"] = *expert_ff;  // mixtral, olmoe: intermediate_size is the expert's
  }
}

/// The tensors against the metadata, as llama.cpp's loader holds them (llama-model.cpp load_hparams
/// and load_tensors: create_tensor's expected shapes, check_tensor_dims, LLAMA_MAX_LAYERS): a file
/// llama.cpp refuses to load is refused here too, not estimated from a metadata that its tensors
/// contradict (a key_length of 2^31 made a KV cache of 128 TiB, a block_count of 1000 over two
/// blocks of tensors a fit of 1001 layers).
void check_tensors_match(const ArchKeys& a, const nlohmann::json& cfg) {
  constexpr std::string_view fix = "the file's metadata and its tensors disagree: llama.cpp refuses to load it; "
                                   "convert the model again (convert_hf_to_gguf.py)";
  const auto get = [&](const char* k) { return cfg.contains(k) ? cfg[k].get<std::uint64_t>() : 0; };
  const std::uint64_t n_embd = get("hidden_size"), n_layer = get("num_hidden_layers"), n_head = get("num_attention_heads");
  // llama.h LLAMA_MAX_LAYERS: load_hparams checks block_count against it ("n > N_MAX").
  constexpr std::uint64_t kLlamaMaxLayers = 512;
  if (n_layer > kLlamaMaxLayers) {
    a.diags.add(a.org + ": " + a.key("block_count"),
                fmt::format("{} layers: llama.cpp loads at most {} (LLAMA_MAX_LAYERS)", n_layer, kLlamaMaxLayers),
                std::string(fix));
    return;
  }
  // llama_model_loader: the context length is a required key (get_key(LLM_KV_CONTEXT_LENGTH)).
  if (a.h.find(a.key("context_length")) == nullptr)
    a.diags.add(a.org + ": " + a.key("context_length"), "missing: llama.cpp requires it to load the model",
                std::string(kFixMissing));
  // get_key's type check (GGUFMeta validate_type: "key X has wrong type i32 but expected type
  // u32"): the sizes are u32, or arrays of them where get_key_or_arr takes one a layer.
  for (const char* k : {"block_count", "context_length", "embedding_length", "feed_forward_length",
                        "attention.head_count", "attention.head_count_kv", "attention.key_length",
                        "attention.value_length", "expert_count", "expert_used_count", "rope.dimension_count"}) {
    const GgufValue* v = a.h.find(a.key(k));
    if (v != nullptr && v->type != GgufType::u32 && v->type != GgufType::array)
      a.diags.add(a.org + ": " + a.key(k),
                  fmt::format("stored as a {} value: llama.cpp reads it as a 32-bit unsigned integer only "
                              "(wrong type) and refuses the file",
                              gguf_type_name(v->type)),
                  std::string(kFixMissing));
  }
  if (n_embd == 0 || n_head == 0 || n_layer == 0) return;  // reported by from_config
  // The blocks the tensors hold: each of 0 .. block_count - 1, none beyond.
  std::vector<bool> seen(static_cast<std::size_t>(n_layer), false);
  bool exps = false, router = false;
  for (const GgufTensor& t : a.h.tensors) {
    const auto b = block_tensor(t.name);
    if (!b) continue;
    if (b->layer >= n_layer) {
      a.diags.add(a.org + ": " + a.key("block_count"),
                  fmt::format("{} layers, but the file holds tensor '{}' of layer {}", n_layer, shown(t.name), b->layer),
                  std::string(fix));
      return;
    }
    seen[static_cast<std::size_t>(b->layer)] = true;
    exps = exps || b->role.find("_exps.") != std::string::npos;
    router = router || b->role == "ffn_gate_inp.weight";
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) {
      a.diags.add(a.org + ": " + a.key("block_count"),
                  fmt::format("{} layers, but the file holds no tensor of layer {} (llama.cpp: missing tensor "
                              "'blk.{}.attn_norm.weight')",
                              n_layer, i, i),
                  std::string(fix));
      return;
    }
  // The tensors every supported architecture creates as required (create_tensor without
  // TENSOR_NOT_REQUIRED: "missing tensor 'X'"): the embeddings, the final norm, and in each block
  // its norm, attention (fused or not) and output projection.
  for (const char* t : {"token_embd.weight", "output_norm.weight"})
    if (a.h.tensor(t) == nullptr)
      a.diags.add(a.org, fmt::format("missing tensor '{}': llama.cpp refuses the file", t), std::string(fix));
  for (std::uint64_t il = 0; il < n_layer && a.diags.empty(); ++il) {
    const std::string b = fmt::format("blk.{}.", il);
    const bool fused = a.h.tensor(b + "attn_qkv.weight") != nullptr;
    for (const char* r : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) {
      const std::string_view role = r;
      if (fused && (role == "attn_q.weight" || role == "attn_k.weight" || role == "attn_v.weight")) continue;
      if (a.h.tensor(b + r) == nullptr)
        a.diags.add(a.org, fmt::format("missing tensor '{}{}': llama.cpp refuses the file", b, r), std::string(fix));
    }
  }
  if (!a.diags.empty()) return;
  const bool moe = cfg.contains("num_experts") || cfg.contains("num_local_experts");
  if (moe && !exps)
    a.diags.add(a.org + ": " + a.key("expert_count"), "experts announced, but the file holds no expert tensor (*_exps)",
                std::string(fix));
  if (!moe && (exps || router))
    a.diags.add(a.org + ": " + a.key("expert_count"),
                "absent, but the file holds expert tensors (*_exps, ffn_gate_inp)", std::string(fix));
  // The widths llama.cpp creates the tensors with: n_embd_head_k = key_length, else n_embd / n_head;
  // n_embd_head_v = value_length, else n_embd / n_head; n_embd_k_gqa = n_embd_head_k x n_head_kv.
  const std::uint64_t n_kv = cfg.contains("num_key_value_heads") ? get("num_key_value_heads") : n_head;
  const std::uint64_t hk = cfg.contains("head_dim") ? get("head_dim") : n_embd / n_head;
  const std::uint64_t hv = a.uint_of(a.key("attention.value_length")).value_or(n_embd / n_head);
  const auto check = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, const char* what) {
    const GgufTensor* t = a.h.tensor(name);
    if (t == nullptr || t->ne.size() < 2 || (t->ne[0] == ne0 && t->ne[1] == ne1)) return true;
    a.diags.add(a.org + ": " + name,
                fmt::format("shape [{}, {}], but the metadata makes it [{}, {}] ({}): llama.cpp refuses the file "
                            "(tensor has wrong shape)",
                            t->ne[0], t->ne[1], ne0, ne1, what),
                std::string(fix));
    return false;
  };
  // The vocabulary llama.cpp sizes token_embd by (llama_vocab::impl::load): tokenizer.ggml.model is
  // required ("key not found"); "no_vocab" or "none" takes <arch>.vocab_size dummy tokens (0 without
  // it); any other tokenizer needs its list ("cannot find tokenizer vocab in model file").
  if (!a.diags.empty()) return;
  constexpr std::string_view kNoTokenizer =
      "the file holds no tokenizer: convert the model again with its tokenizer (convert_hf_to_gguf.py)";
  const GgufValue* model = a.h.find("tokenizer.ggml.model");
  if (model == nullptr || model->type != GgufType::string) {
    a.diags.add(a.org + ": tokenizer.ggml.model",
                model == nullptr ? "missing: llama.cpp refuses the file (key not found in model)"
                                 : "not a string: llama.cpp refuses the file",
                std::string(kNoTokenizer));
    return;
  }
  std::uint64_t n_vocab = 0;
  if (model->str == "no_vocab" || model->str == "none") {
    n_vocab = a.uint_of(a.key("vocab_size")).value_or(0);
  } else if (const GgufValue* tokens = a.h.find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->type == GgufType::array) {
    n_vocab = tokens->array_length;
  } else {
    a.diags.add(a.org + ": tokenizer.ggml.tokens",
                "missing: llama.cpp refuses the file (cannot find tokenizer vocab in model file)",
                std::string(kNoTokenizer));
    return;
  }
  if (!check("token_embd.weight", n_embd, n_vocab, "embedding_length x the vocabulary")) return;
  // Products of the metadata's sizes, which a damaged file can make overflow: refused then.
  const std::string sizes = a.org + ": attention sizes";
  const std::uint64_t q = checked_mul(n_head, hk, sizes), k = checked_mul(n_kv, hk, sizes),
                      v = checked_mul(n_kv, hv, sizes), qkv = checked_add(q, checked_add(k, v, sizes), sizes);
  for (std::uint64_t il = 0; il < n_layer; ++il) {
    const std::string b = fmt::format("blk.{}.", il);
    if (!check(b + "attn_q.weight", n_embd, q, "embedding_length x head_count x key_length") ||
        !check(b + "attn_k.weight", n_embd, k, "embedding_length x head_count_kv x key_length") ||
        !check(b + "attn_v.weight", n_embd, v, "embedding_length x head_count_kv x value_length") ||
        !check(b + "attn_qkv.weight", n_embd, qkv,
               "embedding_length x (head_count + head_count_kv) x key_length + head_count_kv x value_length"))
      return;
  }
  // llama.cpp's n_rot: rope.dimension_count, at most the head ("invalid n_rot").
  if (const auto rope = a.uint_of(a.key("rope.dimension_count")); rope && *rope > hk)
    a.diags.add(a.org + ": " + a.key("rope.dimension_count"),
                fmt::format("{} rotary dimensions, more than the head's {}: llama.cpp refuses the file (invalid n_rot)",
                            *rope, hk),
                std::string(fix));
}

/// Every tensor is one llama.cpp creates for the architecture (kArchs' row): llama_model_loader
/// counts the tensors load_tensors creates, and done_getting_tensors refuses a file holding more
/// ("wrong number of tensors; expected %d, got %d"). An unknown tensor ('bogus.weight',
/// 'blk.0.foo.weight', or 'blk.01.attn_q.weight', a name llama.cpp never asks for) would otherwise
/// count as weights of a file that does not load.
void check_tensor_names(const ArchRow& row, const GgufHeader& h, const std::string& org, Diagnostics& diags) {
  const auto sets = arch_tensor_sets(row);
  const std::set<std::string>& globals = sets.first;
  const std::set<std::string>& blocks = sets.second;
  const auto known = [&](const std::string& name) {
    if (const auto b = block_tensor(name))  // 'blk.<layer>.<role>', as llama.cpp's tn() spells it
      return blocks.count(b->role) > 0 && name == fmt::format("blk.{}.{}", b->layer, b->role);
    return globals.count(name) > 0;
  };
  const GgufTensor* first = nullptr;
  std::uint64_t unknown = 0;
  for (const GgufTensor& t : h.tensors)
    if (!known(t.name)) {
      if (first == nullptr) first = &t;
      ++unknown;
    }
  if (first == nullptr) return;
  diags.add(org,
            fmt::format("tensor '{}'{} llama.cpp never creates for architecture '{}': its loader refuses the file "
                        "(wrong number of tensors)",
                        shown(first->name),
                        unknown == 1 ? std::string(" is one") : fmt::format(" and {} more are tensors", unknown - 1),
                        row.arch),
            "the file is damaged, or was made for another architecture or by another llama.cpp build");
}

/// A file of metadata alone (llama.cpp's vocab-only GGUFs) has no weights to estimate; an empty
/// tensor holds no data. Either would silently count as 0 parameters: both are refused.
void check_has_weights(const GgufHeader& h, const std::string& org) {
  if (h.tensors.empty())
    throw InputError(org, "the file holds no tensors (a vocabulary-only GGUF?): there are no weights to estimate",
                     "give the model's .gguf file, the one holding its weights");
  for (const GgufTensor& t : h.tensors)
    if (t.elements() == 0)
      throw InputError(org, fmt::format("tensor '{}' has a dimension of 0: it holds no data", shown(t.name)),
                       std::string(kFixDamaged));
}

/// The parameters and bytes the tensors hold, at most kMaxParams parameters.
std::pair<std::uint64_t, std::uint64_t> tensor_totals(const GgufHeader& h, const std::string& org) {
  std::uint64_t elements = 0, bytes = 0;
  for (const GgufTensor& t : h.tensors) {
    elements = checked_add(elements, t.elements(), "parameters");
    bytes = checked_add(bytes, t.bytes, "parameters");
  }
  if (elements > kMaxParams)
    throw InputError(org, fmt::format("the file's tensors hold {} parameters, more than the 10^15 vramfit accepts",
                                      elements),
                     std::string(kFixDamaged));
  return {elements, bytes};
}

}  // namespace

ModelSpec spec_from_gguf(const GgufHeader& h, std::string_view origin) {
  const std::string org(origin);
  const ArchRow& row = arch_row(h, org);
  Diagnostics diags;
  const ArchKeys a{h, org, std::string(row.arch), diags};

  // --- the config.json the metadata describes ----------------------------------------------
  nlohmann::json cfg;
  std::string model_type(row.model_type);
  const std::uint64_t experts = a.uint_of(a.key("expert_count")).value_or(0);
  if (a.arch == "llama" && experts > 0) model_type = "mixtral";
  cfg["model_type"] = model_type;
  add_sizes(a, cfg);
  add_type_flags(a, model_type, cfg);
  if (experts > 0) add_experts(a, model_type, experts, cfg);
  diags.throw_if_any();

  // --- the weights: the tensors' count, over the config's --------------------------------
  check_has_weights(h, org);
  check_tensors_match(a, cfg);
  if (diags.empty()) check_tensor_names(row, h, org, diags);
  diags.throw_if_any();
  ModelSpec spec = from_config(cfg, origin, UnknownType::generic);  // the tensors give the weights
  const auto [elements, bytes] = tensor_totals(h, org);
  if (elements != spec.params)
    spec.notes.push_back(
        fmt::format("the file's tensors hold {} parameters; its metadata describes a {} model of {}: the "
                    "file's count is used",
                    elements, model_type, spec.params));
  spec.params = elements;
  spec.exact_from_checkpoint = true;

  // --- the file type ---------------------------------------------------------------------------
  std::string ftype;
  if (const auto id = a.uint_of("general.file_type"); id && *id <= std::numeric_limits<std::uint32_t>::max()) {
    if (const GgufFileType* f = gguf_file_type_by_id(static_cast<std::uint32_t>(*id))) ftype = f->name;
  }
  diags.throw_if_any();
  if (ftype.empty()) {
    ftype = guess_file_type(h);
    spec.notes.push_back(
        fmt::format("general.file_type is absent or unknown: the file type is taken as {}, "
                    "from the type most tensors have",
                    ftype));
  }
  spec.quantization = gguf_quantization(ftype);
  spec.packed_weight_bytes = bytes;
  spec.name = org;
  spec.source = "gguf";
  spec.notes.push_back(fmt::format(
      "GGUF {}: the tensors take {} bytes as stored; transformers dequantizes GGUF weights to the compute "
      "dtype when "
      "it loads them (from_pretrained(gguf_file=...)), while llama.cpp-style runtimes keep them packed",
      ftype, bytes));
  return spec;
}

}  // namespace vramfit::spec
