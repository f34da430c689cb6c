// Quantization schemes: their names, the config.json quantization_config that describes a
// pre-quantized checkpoint, and what --dtype implies.

#include "vramfit/spec/quant.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"

namespace vramfit::spec {

namespace {

using nlohmann::json;

// llama.cpp's file types that vramfit sizes (src/llama-quant.cpp, llama_tensor_get_type).
constexpr std::array<std::string_view, 14> kGgufTypes{"q4_0",   "q4_1",   "q5_0",   "q5_1",   "q8_0",
                                                      "q2_k",   "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s",
                                                      "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"};

Quantization make(QuantMethod m, std::uint64_t bits) {
  Quantization q;
  q.method = m;
  q.bits = bits;
  return q;
}

constexpr std::string_view kFix =
    "remove quantization_config from a copy of config.json and describe the weights with --quant "
    "(see 'vramfit estimate --help')";

}  // namespace

std::string name_of(const Quantization& q) {
  switch (q.method) {
    case QuantMethod::none: return "none";
    case QuantMethod::bnb_8bit: return "bnb-int8";
    case QuantMethod::bnb_4bit: return q.fp4 ? "fp4" : "nf4";
    case QuantMethod::gptq: return fmt::format("gptq-int{}", q.bits);
    case QuantMethod::awq: return fmt::format("awq-int{}", q.bits);
    case QuantMethod::fp8:
      if (q.fp8_block_rows > 1 || q.fp8_block_cols > 0) return "fp8-block";
      return q.fp8_block_rows == 1 ? "fp8-channel" : "fp8";
    case QuantMethod::mxfp4: return "mxfp4";
    case QuantMethod::gguf: return lower(q.gguf_type);
  }
  return "none";
}

const std::vector<std::string>& quant_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"nf4",       "fp4",       "bnb-int8",  "gptq-int2", "gptq-int3",   "gptq-int4",
                               "gptq-int8", "awq-int4",  "fp8",       "fp8-channel", "fp8-block", "mxfp4"};
    n.insert(n.end(), kGgufTypes.begin(), kGgufTypes.end());
    return n;
  }();
  return names;
}

std::optional<Quantization> parse_quant(std::string_view s) {
  const std::string n = lower(s);
  if (n == "nf4") return make(QuantMethod::bnb_4bit, 4);
  if (n == "fp4") {
    auto q = make(QuantMethod::bnb_4bit, 4);
    q.fp4 = true;
    return q;
  }
  if (n == "bnb-int8" || n == "int8") return make(QuantMethod::bnb_8bit, 8);
  for (const std::uint64_t bits : std::initializer_list<std::uint64_t>{2, 3, 4, 8})
    if (n == fmt::format("gptq-int{}", bits)) return make(QuantMethod::gptq, bits);
  if (n == "awq-int4") return make(QuantMethod::awq, 4);
  if (n == "fp8") return make(QuantMethod::fp8, 8);
  if (n == "fp8-channel") {
    auto q = make(QuantMethod::fp8, 8);
    q.fp8_block_rows = 1;
    return q;
  }
  if (n == "fp8-block") {
    // DeepSeek-V3 / transformers' FineGrainedFP8: weight_block_size [128, 128].
    auto q = make(QuantMethod::fp8, 8);
    q.fp8_block_rows = 128;
    q.fp8_block_cols = 128;
    return q;
  }
  if (n == "mxfp4") return make(QuantMethod::mxfp4, 4);
  for (const auto t : kGgufTypes)
    if (n == t) {
      auto q = make(QuantMethod::gguf, t == "q8_0" ? 8 : 4);
      q.gguf_type = upper(t);
      return q;
    }
  return std::nullopt;
}

Quantization default_quantization(DType weights) {
  switch (weights) {
    case DType::nf4: return make(QuantMethod::bnb_4bit, 4);
    case DType::int8: return make(QuantMethod::bnb_8bit, 8);
    case DType::int4: return make(QuantMethod::gptq, 4);
    case DType::fp8: return make(QuantMethod::fp8, 8);
    default: return {};
  }
}

DType packed_dtype(const Quantization& q) {
  switch (q.method) {
    case QuantMethod::none: return DType::bf16;
    case QuantMethod::bnb_4bit: return DType::nf4;
    case QuantMethod::bnb_8bit: return DType::int8;
    case QuantMethod::fp8: return DType::fp8;
    default: return q.bits >= 8 ? DType::int8 : DType::int4;
  }
}

bool same_storage(const Quantization& a, const Quantization& b) {
  // GGUF names carry everything; the parsed bits of a file's type may differ from --quant's.
  if (a.method == QuantMethod::gguf && b.method == QuantMethod::gguf) return name_of(a) == name_of(b);
  return a.method == b.method && a.bits == b.bits && a.group_size == b.group_size &&
         a.double_quant == b.double_quant && a.fp8_block_rows == b.fp8_block_rows &&
         a.fp8_block_cols == b.fp8_block_cols && a.gguf_type == b.gguf_type;
}

namespace {

/// Typed reads of a quantization_config: a wrong type is an error naming the key, never a
/// silent default.
struct QcReader {
  const json& qc;
  std::string field;  ///< "<origin>: quantization_config"

  [[nodiscard]] bool get_bool(const char* key, bool fallback) const {
    const auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw InputError(field + "." + key, "expected true or false", std::string(kFix));
    return it->get<bool>();
  }
  static std::int64_t get_int(const json& obj, const std::string& name, const char* key, std::int64_t fallback) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) throw InputError(name + "." + key, "expected a whole number", std::string(kFix));
    return it->get<std::int64_t>();
  }
  /// The string in lower case; empty when absent.
  static std::string get_str(const json& obj, const std::string& name, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (!it->is_string()) throw InputError(name + "." + key, "expected a string", std::string(kFix));
    return lower(it->get<std::string>());
  }
  [[nodiscard]] std::vector<std::string> get_names(const char* key) const {
    std::vector<std::string> out;
    const auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) return out;
    if (!it->is_array()) throw InputError(field + "." + key, "expected a list of module names", std::string(kFix));
    for (const auto& v : *it) {
      if (!v.is_string()) throw InputError(field + "." + key, "expected a list of module names", std::string(kFix));
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  static std::uint64_t bits_in(const std::string& name, std::int64_t bits, std::initializer_list<std::int64_t> ok) {
    if (std::find(ok.begin(), ok.end(), bits) == ok.end())
      throw InputError(name + ".bits", fmt::format("{} bits is not a size this method stores", bits),
                       std::string(kFix));
    return static_cast<std::uint64_t>(bits);
  }
  static std::uint64_t group_of(const std::string& name, const json& obj) {
    const std::int64_t g = get_int(obj, name, "group_size", 128);
    if (g == -1 || g == 0) return 0;  // one group per input row (GPTQ's "-1")
    if (g < 0 || g > (1LL << 20))
      throw InputError(name + ".group_size", fmt::format("{} is not a group size", g), std::string(kFix));
    return static_cast<std::uint64_t>(g);
  }
};

/// bitsandbytes: load_in_4bit (nf4 or fp4, double quantization, compute dtype) or load_in_8bit.
Quantization bitsandbytes_of(const QcReader& r) {
  const std::string& field = r.field;
  const bool four = r.get_bool("load_in_4bit", false);
  const bool eight = r.get_bool("load_in_8bit", false);
  if (four == eight)
    throw InputError(field, "bitsandbytes needs exactly one of load_in_4bit and load_in_8bit set to true",
                     std::string(kFix));
  Quantization q;
  if (four) {
    q = make(QuantMethod::bnb_4bit, 4);
    const std::string type = QcReader::get_str(r.qc, field, "bnb_4bit_quant_type");
    if (!type.empty() && type != "nf4" && type != "fp4")
      throw InputError(field + ".bnb_4bit_quant_type", fmt::format("'{}' is not nf4 or fp4", type),
                       std::string(kFix));
    q.fp4 = type == "fp4";
    q.double_quant = r.get_bool("bnb_4bit_use_double_quant", false);
    const std::string compute = QcReader::get_str(r.qc, field, "bnb_4bit_compute_dtype");
    if (!compute.empty()) {
      const auto d = parse_dtype(compute);
      if (!d || !is_float_compute(*d))
        throw InputError(field + ".bnb_4bit_compute_dtype", fmt::format("'{}' is not a float dtype", compute),
                         std::string(kFix));
      q.compute_dtype = d;
    }
  } else {
    q = make(QuantMethod::bnb_8bit, 8);
  }
  q.skip_modules = r.get_names("llm_int8_skip_modules");
  return q;
}

/// transformers' FineGrainedFP8Config: weight_block_size [rows, cols] (default [128, 128]).
Quantization fp8_of(const QcReader& r) {
  Quantization q = make(QuantMethod::fp8, 8);
  q.fp8_block_rows = 128;
  q.fp8_block_cols = 128;
  if (const auto it = r.qc.find("weight_block_size"); it != r.qc.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_unsigned() || !(*it)[1].is_number_unsigned() ||
        (*it)[0].get<std::uint64_t>() == 0 || (*it)[1].get<std::uint64_t>() == 0)
      throw InputError(r.field + ".weight_block_size", "expected two positive whole numbers, e.g. [128, 128]",
                       std::string(kFix));
    q.fp8_block_rows = (*it)[0].get<std::uint64_t>();
    q.fp8_block_cols = (*it)[1].get<std::uint64_t>();
  }
  q.skip_modules = r.get_names("modules_to_not_convert");
  return q;
}

/// llm-compressor's format: config_groups.<group>.weights {num_bits, type, strategy,
/// group_size, block_structure}; `ignore` lists modules left in 16 bits.
Quantization compressed_tensors_of(const QcReader& r) {
  const json& qc = r.qc;
  const auto groups = qc.find("config_groups");
  if (groups == qc.end() || !groups->is_object() || groups->empty())
    throw InputError(r.field + ".config_groups", "missing: compressed-tensors needs at least one group",
                     std::string(kFix));
  const auto& g = groups->begin().value();
  const std::string gname = r.field + ".config_groups." + groups->begin().key() + ".weights";
  const auto wit = g.is_object() ? g.find("weights") : g.end();
  if (!g.is_object() || wit == g.end() || !wit->is_object())
    throw InputError(gname, "missing: the group has no weights scheme", std::string(kFix));
  const json& wq = *wit;
  const std::int64_t bits = QcReader::get_int(wq, gname, "num_bits", 8);
  const std::string type = QcReader::get_str(wq, gname, "type");
  const std::string strategy = QcReader::get_str(wq, gname, "strategy");
  Quantization q;
  if (type == "float") {
    if (bits != 8) throw InputError(gname + ".num_bits", "float weights are stored in 8 bits", std::string(kFix));
    q = make(QuantMethod::fp8, 8);
    if (strategy == "channel") q.fp8_block_rows = 1;
    if (strategy == "block") {
      q.fp8_block_rows = 128;
      q.fp8_block_cols = 128;
      if (const auto bs = wq.find("block_structure"); bs != wq.end() && bs->is_array() && bs->size() == 2 &&
                                                      (*bs)[0].is_number_unsigned() && (*bs)[1].is_number_unsigned()) {
        q.fp8_block_rows = std::max<std::uint64_t>(1, (*bs)[0].get<std::uint64_t>());
        q.fp8_block_cols = std::max<std::uint64_t>(1, (*bs)[1].get<std::uint64_t>());
      }
    }
  } else if (type == "int") {
    // Packed int4/int8 with group scales: stored as GPTQ stores them (pack-quantized).
    q = make(QuantMethod::gptq, QcReader::bits_in(gname, bits, {2, 3, 4, 8}));
    q.group_size = strategy == "group" ? QcReader::group_of(gname, wq) : 0;
  } else {
    throw InputError(gname + ".type", fmt::format("'{}' is not int or float", type), std::string(kFix));
  }
  q.skip_modules = r.get_names("ignore");
  return q;
}

}  // namespace

Quantization quant_from_config(const json& qc, std::string_view origin) {
  const QcReader r{qc, fmt::format("{}: quantization_config", origin)};
  const std::string& field = r.field;
  if (!qc.is_object()) throw InputError(field, "expected a JSON object", std::string(kFix));

  std::string method = QcReader::get_str(qc, field, "quant_method");
  // Old bitsandbytes configs (transformers < 4.35) have no quant_method, only the flags.
  if (method.empty() && (qc.contains("load_in_4bit") || qc.contains("load_in_8bit"))) method = "bitsandbytes";

  if (method == "bitsandbytes") return bitsandbytes_of(r);
  if (method == "gptq") {
    Quantization q = make(QuantMethod::gptq, QcReader::bits_in(field, QcReader::get_int(qc, field, "bits", 4),
                                                                {2, 3, 4, 8}));
    q.group_size = QcReader::group_of(field, qc);
    return q;
  }
  if (method == "awq") {
    Quantization q = make(QuantMethod::awq, QcReader::bits_in(field, QcReader::get_int(qc, field, "bits", 4), {4}));
    q.group_size = QcReader::group_of(field, qc);
    q.skip_modules = r.get_names("modules_to_not_convert");
    return q;
  }
  if (method == "fp8") return fp8_of(r);
  if (method == "mxfp4") {
    Quantization q = make(QuantMethod::mxfp4, 4);
    q.skip_modules = r.get_names("modules_to_not_convert");
    return q;
  }
  if (method == "compressed-tensors") return compressed_tensors_of(r);
  if (method.empty()) throw InputError(field + ".quant_method", "missing", std::string(kFix));
  throw InputError(field + ".quant_method",
                   fmt::format("'{}' is not modelled (bitsandbytes, gptq, awq, fp8, mxfp4 and "
                               "compressed-tensors are)",
                               method),
                   std::string(kFix));
}

}  // namespace vramfit::spec
