// safetensors headers: exact parameter counts without reading the weights.
//
// Format (huggingface/safetensors, docs/source/index.mdx "Format"): 8 bytes, a little-endian
// u64 N; N bytes of UTF-8 JSON, an object of
//   name -> {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
// plus an optional "__metadata__" object of strings; then the data section. Offsets are
// relative to the data section, end - begin = elements * dtype size. The reference
// implementation caps N at 100 MB (MAX_HEADER_SIZE in safetensors/src/tensor.rs).

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vramfit/core/bytes.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/core/json.hpp"
#include "vramfit/core/text.hpp"
#include "vramfit/spec/parse.hpp"

namespace vramfit::spec {

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100'000'000;  // safetensors' MAX_HEADER_SIZE

/// Bits per element of each safetensors dtype (safetensors/src/tensor.rs, `Dtype::bitsize`).
struct DtypeRow {
  std::string_view name;
  std::uint64_t bits;
};
constexpr DtypeRow kDtypes[] = {
    {"BOOL", 8}, {"U8", 8},   {"I8", 8},    {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
    {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32},    {"U32", 32},    {"F32", 32},    {"F64", 64},
    {"I64", 64}, {"U64", 64}, {"C64", 64},  {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

std::optional<std::uint64_t> dtype_bits(std::string_view name) {
  for (const DtypeRow& d : kDtypes)
    if (d.name == name) return d.bits;
  return std::nullopt;
}

std::string known_dtypes() {
  std::vector<std::string> names;
  for (const DtypeRow& d : kDtypes) names.emplace_back(d.name);
  return joined(names);
}

std::string show(const json& v) { return json_excerpt(v); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

namespace {

constexpr std::string_view kFixFile = "the file is truncated or not a safetensors file: download it again";

/// The header length N in the first 8 bytes (little-endian), checked against the 100 MB
/// safetensors allows, the file's size and the bytes read.
std::uint64_t header_length(std::string_view prefix, std::uint64_t file_size, const std::string& org) {
  const std::string fix_file(kFixFile);
  if (prefix.size() < 8 || file_size < 8) {
    throw InputError(
        org,
        fmt::format("too short for a safetensors file ({} bytes; the header length alone takes 8)",
                    std::min<std::uint64_t>(prefix.size(), file_size)),
        fix_file);
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<std::size_t>(i)]);
  if (n > kMaxHeader) {
    throw InputError(
        org, fmt::format("the header says it is {} bytes, over the 100 MB safetensors allows", n), fix_file);
  }
  if (8 + n > file_size) {
    throw InputError(org, fmt::format("the header says {} bytes but the file has only {}", n, file_size - 8),
                     fix_file);
  }
  if (prefix.size() < 8 + n) {
    throw InputError(org, fmt::format("the header says {} bytes but only {} were read", n, prefix.size() - 8),
                     "read the first 8 + N bytes of the file");
  }
  return n;
}

/// A tensor's dtype: a name whose bits per element are known.
bool read_dtype(const json& entry, const std::string& field, TensorInfo& t, std::optional<std::uint64_t>& bits,
                Diagnostics& diags) {
  const std::string fix_file(kFixFile);
  if (const auto it = entry.find("dtype"); it != entry.end() && it->is_string()) {
    t.dtype = it->get<std::string>();
    bits = dtype_bits(t.dtype);
    if (!bits) {
      diags.add(field + ".dtype", fmt::format("unknown dtype {}", show(*it)), "known: " + known_dtypes());
      return false;
    }
  } else {
    diags.add(field + ".dtype",
              it == entry.end() ? "missing" : fmt::format("expected a string, got {}", show(*it)),
              fix_file);
    return false;
  }
  return true;
}

/// A tensor's shape: non-negative dimensions whose product fits 64 bits (`elements`).
bool read_shape(const json& entry, const std::string& field, TensorInfo& t, std::uint64_t& elements,
                Diagnostics& diags) {
  const std::string fix_file(kFixFile);
  if (const auto it = entry.find("shape"); it != entry.end() && it->is_array()) {
    for (const json& d : *it) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0)) {
        diags.add(field + ".shape", fmt::format("expected non-negative integers, got {}", show(*it)),
                  fix_file);
        return false;
      }
      const auto dim = d.get<std::uint64_t>();
      t.shape.push_back(dim);
      try {
        elements = checked_mul(elements, dim, field + ".shape");
      } catch (const InputError&) {
        // checked_mul's own fix speaks of batch and sequence length: not this file's problem.
        diags.add(field + ".shape", fmt::format("{}: the element count overflows 64 bits", show(*it)),
                  fix_file);
        return false;
      }
    }
  } else {
    diags.add(field + ".shape",
              it == entry.end() ? "missing" : fmt::format("expected a list, got {}", show(*it)), fix_file);
    return false;
  }
  return true;
}

/// A tensor's data_offsets [begin, end] within the data section of `data_size` bytes.
bool read_offsets(const json& entry, const std::string& field, std::uint64_t data_size, std::uint64_t& begin,
                  std::uint64_t& end, Diagnostics& diags) {
  const std::string fix_file(kFixFile);
  if (const auto it = entry.find("data_offsets"); it != entry.end() && it->is_array() && it->size() == 2 &&
                                                  (*it)[0].is_number_unsigned() &&
                                                  (*it)[1].is_number_unsigned()) {
    begin = (*it)[0].get<std::uint64_t>();
    end = (*it)[1].get<std::uint64_t>();
    if (end < begin) {
      diags.add(field + ".data_offsets", fmt::format("ends before it begins: {}", show(*it)), fix_file);
      return false;
    } else if (end > data_size) {
      diags.add(field + ".data_offsets",
                fmt::format("ends at byte {} but the data section has only {}", end, data_size), fix_file);
      return false;
    }
  } else {
    diags.add(field + ".data_offsets",
              it == entry.end() ? "missing" : fmt::format("expected [begin, end], got {}", show(*it)),
              fix_file);
    return false;
  }
  return true;
}

/// The bytes between the offsets are what the elements of the dtype take.
bool check_data_bytes(const std::string& field, const TensorInfo& t, std::uint64_t elements, std::uint64_t bits,
                      std::uint64_t begin, std::uint64_t end, Diagnostics& diags) {
  const std::string fix_file(kFixFile);
  std::uint64_t expected = 0;
  try {
    expected = bytes_of_bits(elements, bits).value();
  } catch (const InputError&) {
    expected = ~std::uint64_t{0};  // cannot fit any file: reported as a mismatch below
  }
  if (end - begin != expected) {
    diags.add(field + ".data_offsets",
              fmt::format("holds {} bytes but {} elements of {} take {}", end - begin, elements, t.dtype,
                          expected),
              fix_file);
    return false;
  }
  return true;
}

struct Span {
  std::uint64_t begin, end;
  std::size_t index;  // into the tensors
  auto operator<=>(const Span&) const = default;
};

/// The tensors' data lie one after the other over the whole data section.
void check_layout(std::vector<Span> spans, const std::vector<TensorInfo>& out, std::uint64_t data_size,
                  const std::string& org) {
  const std::string fix_file(kFixFile);
  // The safetensors crate (Metadata::validate) sorts the tensors by offsets and requires each to
  // begin where the one before it ends, from 0 to the end of the data section: overlapping data
  // would count the same bytes twice, and gaps are bytes no tensor owns.
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const Span& sp : spans) {
    const std::string field = org + ": " + text_excerpt(out[sp.index].name) + ".data_offsets";
    if (sp.begin < at)
      throw InputError(field,
                       fmt::format("[{}, {}] overlaps the tensor before it, which ends at byte {}", sp.begin, sp.end, at),
                       fix_file);
    if (sp.begin > at)
      throw InputError(field,
                       fmt::format("[{}, {}] leaves a gap: the tensor before it ends at byte {}", sp.begin, sp.end, at),
                       fix_file);
    at = sp.end;
  }
  if (!spans.empty() && at != data_size)
    throw InputError(org,
                     fmt::format("the tensors end at byte {} of the data section, which holds {}", at, data_size),
                     fix_file);
}

}  // namespace

std::vector<TensorInfo> parse_safetensors_header(std::string_view prefix, std::uint64_t file_size,
                                                 std::string_view origin) {
  const std::string org(origin);
  const std::string fix_file(kFixFile);
  const std::uint64_t n = header_length(prefix, file_size, org);
  const std::uint64_t data_size = file_size - 8 - n;

  const json header = parse_json(prefix.substr(8, n), org, fix_file, "the header is not valid JSON: ");
  if (!header.is_object()) throw InputError(org, "the header is not a JSON object", fix_file);

  Diagnostics diags;
  std::vector<TensorInfo> out;
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      // Free-form strings (format, quantization, ...): the safetensors crate reads a map of
      // string to string and refuses anything else; so does vramfit (issue #14).
      bool strings = entry.is_object();
      if (strings)
        for (const auto& [key, value] : entry.items()) strings = strings && value.is_string();
      if (!strings)
        diags.add(org + ": __metadata__", fmt::format("expected an object of strings, got {}", show(entry)), fix_file);
      continue;
    }
    const std::string field = org + ": " + name;
    if (!entry.is_object()) {
      diags.add(field,
                fmt::format("expected an object with dtype, shape and data_offsets, got {}", show(entry)),
                fix_file);
      continue;
    }
    TensorInfo t;
    t.name = name;
    std::optional<std::uint64_t> bits;
    std::uint64_t elements = 1, begin = 0, end = 0;
    const bool dtype_ok = read_dtype(entry, field, t, bits, diags);
    const bool shape_ok = read_shape(entry, field, t, elements, diags);
    const bool offsets_ok = read_offsets(entry, field, data_size, begin, end, diags);
    if (!dtype_ok || !shape_ok || !offsets_ok || !check_data_bytes(field, t, elements, *bits, begin, end, diags))
      continue;
    t.elements = elements;
    spans.push_back({begin, end, out.size()});
    out.push_back(std::move(t));
  }
  diags.throw_if_any();
  check_layout(std::move(spans), out, data_size, org);
  return out;
}

void apply_checkpoint(ModelSpec& spec, const std::vector<TensorInfo>& all) {
  // The Gated DeltaNet models' checkpoints (Qwen3-Next, Qwen3.5) store a multi-token-prediction
  // layer under the root `mtp.` that transformers 5.17 builds no module for (Qwen3_5PreTrainedModel:
  // _keys_to_ignore_on_load_unexpected = [r"^mtp.*"]; Qwen3Next has no mtp module either): from_pretrained
  // leaves those tensors on disk, so they are neither parameters nor GPU bytes.
  std::vector<TensorInfo> tensors;
  tensors.reserve(all.size());
  std::uint64_t mtp_tensors = 0, mtp_elements = 0;
  for (const TensorInfo& t : all) {
    if (spec.linear_attention.layers > 0 && t.name.rfind("mtp.", 0) == 0) {
      ++mtp_tensors;
      mtp_elements = checked_add(mtp_elements, t.elements, "parameters");
      continue;
    }
    tensors.push_back(t);
  }
  if (mtp_tensors > 0)
    spec.notes.push_back(fmt::format("the checkpoint's {} mtp.* tensors ({} values: the multi-token-prediction "
                                     "layer) are not loaded by transformers and are not counted",
                                     mtp_tensors, mtp_elements));
  // Quantized checkpoints store packed integer tensors (bitsandbytes: U8 weights with
  // .absmax / .quant_state.*; GPTQ/AWQ: I32 .qweight / .qzeros; bnb int8: I8 with .SCB):
  // their element counts are not parameter counts, so the config's count stands.
  bool bnb4 = false, packed_int = false, int8 = false;
  for (const TensorInfo& t : tensors) {
    const bool integer = t.dtype == "U8" || t.dtype == "I32" || t.dtype == "I8";
    if (!integer) continue;
    if (t.name.find(".absmax") != std::string::npos || t.name.find(".quant_state") != std::string::npos ||
        t.name.find(".quant_map") != std::string::npos)
      bnb4 = true;
    if (ends_with(t.name, ".qweight") || ends_with(t.name, ".qzeros")) packed_int = true;
    if (t.dtype == "I8" && ends_with(t.name, ".weight")) int8 = true;
  }
  for (const TensorInfo& t : tensors)
    if (ends_with(t.name, ".SCB")) int8 = true;  // bitsandbytes LLM.int8() row scales
  bool fp8 = false;
  for (const TensorInfo& t : tensors) fp8 = fp8 || t.dtype == "F8_E4M3" || t.dtype == "F8_E5M2";

  // A packed checkpoint is loaded as it is stored: its tensors' bytes (each rounded to the
  // caching allocator's 512-byte blocks) are the weights' exact footprint on the GPU.
  if (bnb4 || packed_int || int8 || fp8) {
    std::uint64_t bytes = 0;
    for (const TensorInfo& t : tensors) {
      const std::uint64_t b = bytes_of_bits(t.elements, dtype_bits(t.dtype).value_or(8)).round_up(512).value();
      bytes = checked_add(bytes, b, "parameters");
    }
    spec.packed_weight_bytes = bytes;
  }

  if (bnb4 || packed_int) {
    spec.checkpoint_dtype = bnb4 ? DType::nf4 : DType::int4;
    spec.notes.push_back(
        fmt::format("the checkpoint is quantized ({}): its packed tensors do not give the parameter count, "
                    "so the config's "
                    "{} is used",
                    bnb4 ? "bitsandbytes 4-bit" : "GPTQ/AWQ packed int4", spec.params));
    return;
  }

  // Parameters per dtype; the dtype holding the largest share is the checkpoint's dtype.
  std::map<std::string, std::uint64_t> by_dtype;
  std::uint64_t total = 0;
  for (const TensorInfo& t : tensors) {
    // Old conversions saved the rotary `inv_freq` buffer (persistent before transformers
    // 4.31); it is not a parameter.
    if (ends_with(t.name, "rotary_emb.inv_freq")) continue;
    // bitsandbytes LLM.int8() row scales and format flags live beside the I8 weights; in the
    // loaded model they are attributes of the weight, not parameters.
    if (ends_with(t.name, ".SCB") || ends_with(t.name, ".weight_format")) continue;
    // A tied model's lm_head is the embedding: model.parameters() counts it once, but some
    // checkpoints store the copy too.
    if (spec.tied_embeddings && t.name == "lm_head.weight") {
      spec.notes.push_back(
          "the checkpoint stores lm_head.weight although the embeddings are tied: counted once");
      continue;
    }
    total = checked_add(total, t.elements, "parameters");
    by_dtype[t.dtype] = checked_add(by_dtype[t.dtype], t.elements, "parameters");
  }
  // Only empty tensors (a 0 in every shape) or buffers: a model of 0 parameters would estimate
  // as nothing at all (found by tests/fuzz/safetensors_fuzz.cpp).
  if (total > kMaxParams)
    throw InputError("safetensors",
                     fmt::format("the checkpoint's tensors hold {} parameters, more than the 10^15 vramfit accepts",
                                 total),
                     "download the weights again, or give the config file alone");
  if (total == 0) {
    throw InputError("safetensors",
                     "the checkpoint's tensors hold no parameters (every one is empty or a buffer)",
                     "download the weights again, or give the config file alone");
  }
  std::string top;
  std::uint64_t top_n = 0;
  for (const auto& [d, n] : by_dtype)
    if (n > top_n) {
      top = d;
      top_n = n;
    }

  std::optional<DType> dtype;
  if (top == "F32")
    dtype = DType::fp32;
  else if (top == "F16")
    dtype = DType::fp16;
  else if (top == "BF16")
    dtype = DType::bf16;
  else if (top == "F8_E4M3" || top == "F8_E5M2")
    dtype = DType::fp8;
  else if (top == "I8" || int8)
    dtype = DType::int8;

  if (spec.params != 0 && total != spec.params) {
    spec.notes.push_back(
        fmt::format("the checkpoint holds {} parameters; the config gives {}: the checkpoint's count is used",
                    total, spec.params));
  }
  spec.params = total;
  spec.checkpoint_dtype = dtype;
  spec.exact_from_checkpoint = true;
}

}  // namespace vramfit::spec
