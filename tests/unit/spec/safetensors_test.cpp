// Tests of parse_safetensors_header and apply_checkpoint, on headers built here.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::spec;

namespace {

/// The 8-byte little-endian length, then the header text.
std::string file_prefix(const std::string& header, std::uint64_t declared_len) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[static_cast<std::size_t>(i)] = static_cast<char>((declared_len >> (8 * i)) & 0xFF);
  return s + header;
}
std::string file_prefix(const std::string& header) { return file_prefix(header, header.size()); }

/// A header and the size of a file holding it and `data` bytes of tensors.
struct Built {
  std::string prefix;
  std::uint64_t file_size;
};
Built build(const nlohmann::json& header, std::uint64_t data) {
  const std::string text = header.dump();
  return {file_prefix(text), 8 + text.size() + data};
}

nlohmann::json tensor(const char* dtype, std::vector<std::uint64_t> shape, std::uint64_t begin,
                      std::uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

std::vector<Diagnostic> errors(const std::string& prefix, std::uint64_t file_size) {
  try {
    (void)parse_safetensors_header(prefix, file_size, "model.safetensors");
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

}  // namespace

TEST_CASE("safetensors: a valid header", "[spec]") {
  nlohmann::json h;
  h["__metadata__"] = {{"format", "pt"}};
  h["model.embed_tokens.weight"] = tensor("BF16", {1000, 64}, 0, 128000);
  h["model.norm.weight"] = tensor("F32", {64}, 128000, 128256);
  h["scalar"] = tensor("F16", {}, 128256, 128258);
  h["empty"] = tensor("I64", {0, 5}, 128258, 128258);
  const Built b = build(h, 128258);
  const auto t = parse_safetensors_header(b.prefix, b.file_size, "model.safetensors");
  REQUIRE(t.size() == 4);
  std::uint64_t total = 0;
  for (const auto& x : t) total += x.elements;
  CHECK(total == 64000 + 64 + 1);
  for (const auto& x : t) {
    if (x.name == "model.embed_tokens.weight") {
      CHECK(x.dtype == "BF16");
      CHECK(x.shape == std::vector<std::uint64_t>{1000, 64});
      CHECK(x.elements == 64000);
    }
  }
  // Trailing spaces pad the header in real files; extra bytes after the header are fine.
  const std::string padded = h.dump() + "    ";
  CHECK(parse_safetensors_header(file_prefix(padded) + "rest", 8 + padded.size() + 128258, "m").size() == 4);
}

TEST_CASE("safetensors: every known dtype and its size", "[spec]") {
  struct D {
    const char* name;
    std::uint64_t bytes_for_8;
  };
  const D ds[] = {{"F64", 64}, {"F32", 32}, {"F16", 16}, {"BF16", 16}, {"F8_E4M3", 8}, {"F8_E5M2", 8},
                  {"I64", 64}, {"I32", 32}, {"I16", 16}, {"I8", 8},    {"U8", 8},      {"BOOL", 8},
                  {"U16", 16}, {"U32", 32}, {"U64", 64}, {"F4", 4},    {"F8_E8M0", 8}};
  for (const D& d : ds) {
    INFO(d.name);
    nlohmann::json h;
    h["w"] = tensor(d.name, {2, 4}, 0, d.bytes_for_8);
    const Built b = build(h, d.bytes_for_8);
    CHECK(parse_safetensors_header(b.prefix, b.file_size, "m")[0].elements == 8);
  }
}

TEST_CASE("safetensors: the length prefix", "[spec]") {
  auto d = errors("1234567", 100);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "model.safetensors: too short for a safetensors file (7 bytes; the header length alone "
        "takes 8) (the file is truncated or not a safetensors file: download it again)");
  d = errors(file_prefix("{}", 200000000), 300000000);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "the header says it is 200000000 bytes, over the 100 MB safetensors allows");
  d = errors(file_prefix("{}", 5000), 1008);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "the header says 5000 bytes but the file has only 1000");
  d = errors(file_prefix("{}", 50), 1000);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "the header says 50 bytes but only 2 were read");
}

TEST_CASE("safetensors: malformed headers", "[spec]") {
  auto d = errors(file_prefix("{\"a\": "), 100);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "model.safetensors");
  CHECK(d[0].problem.rfind("the header is not valid JSON: parse error", 0) == 0);
  d = errors(file_prefix("{\"a\": 9e999}"), 100);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem.rfind("the header is not valid JSON: number overflow", 0) == 0);
  d = errors(file_prefix("[1,2]"), 100);
  REQUIRE(d.size() == 1);
  CHECK(d[0].problem == "the header is not a JSON object");

  // Every bad tensor is reported, each naming its field.
  nlohmann::json h;
  h["a"] = tensor("Q4", {2}, 0, 2);
  h["b"] = {{"shape", {2}}, {"data_offsets", {0, 4}}};
  h["c"] = {{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}};
  h["d"] = tensor("F32", {2}, 8, 4);
  h["e"] = tensor("F32", {2}, 0, 12);
  h["f"] = tensor("F32", {4}, 0, 8);
  h["g"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", "0-8"}};
  h["h"] = 3;
  h["i"] = tensor("F32", {1ULL << 40, 1ULL << 40}, 0, 8);
  const Built b = build(h, 10);
  d = errors(b.prefix, b.file_size);
  REQUIRE(d.size() == 9);
  CHECK(d[0].str() ==
        "model.safetensors: a.dtype: unknown dtype \"Q4\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, "
        "F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, C64, F4, F6_E2M3, F6_E3M2)");
  CHECK(d[1].field == "model.safetensors: b.dtype");
  CHECK(d[1].problem == "missing");
  CHECK(d[2].field == "model.safetensors: c.shape");
  CHECK(d[2].problem == "expected non-negative integers, got [-2]");
  CHECK(d[3].problem == "ends before it begins: [8,4]");
  CHECK(d[4].problem == "ends at byte 12 but the data section has only 10");
  CHECK(d[5].problem == "holds 8 bytes but 4 elements of F32 take 16");
  CHECK(d[6].problem == "expected [begin, end], got \"0-8\"");
  CHECK(d[7].field == "model.safetensors: h");
  CHECK(d[8].field == "model.safetensors: i.shape");
  CHECK(d[8].problem == "[1099511627776,1099511627776]: the element count overflows 64 bits");
  for (const auto& x : d) CHECK_FALSE(x.fix.empty());
}

TEST_CASE("safetensors: apply_checkpoint takes the exact count and the main dtype", "[spec]") {
  ModelSpec s;
  s.params = 1000;
  std::vector<TensorInfo> t{{"model.embed_tokens.weight", "BF16", {10, 50}, 500},
                            {"model.layers.0.mlp.up_proj.weight", "BF16", {10, 40}, 400},
                            {"model.norm.weight", "F32", {110}, 110}};
  apply_checkpoint(s, t);
  CHECK(s.params == 1010);
  CHECK(s.exact_from_checkpoint);
  REQUIRE(s.checkpoint_dtype);
  CHECK(*s.checkpoint_dtype == DType::bf16);
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0] ==
        "the checkpoint holds 1010 parameters; the config gives 1000: the checkpoint's count is used");

  ModelSpec same;
  same.params = 1010;
  apply_checkpoint(same, t);
  CHECK(same.notes.empty());

  // fp32 checkpoints, and old checkpoints with a saved inv_freq buffer.
  ModelSpec f;
  f.params = 100;
  apply_checkpoint(
      f, {{"w", "F32", {100}, 100}, {"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {64}, 64}});
  CHECK(f.params == 100);
  CHECK(*f.checkpoint_dtype == DType::fp32);

  // A tied model whose checkpoint also stores lm_head.weight counts it once.
  ModelSpec tied;
  tied.tied_embeddings = true;
  tied.params = 500;
  apply_checkpoint(
      tied, {{"model.embed_tokens.weight", "F16", {10, 50}, 500}, {"lm_head.weight", "F16", {10, 50}, 500}});
  CHECK(tied.params == 500);
  CHECK(*tied.checkpoint_dtype == DType::fp16);
}

TEST_CASE("safetensors: quantized checkpoints keep the config's count", "[spec]") {
  ModelSpec s;
  s.params = 8030261248ULL;
  apply_checkpoint(s, {{"model.layers.0.mlp.up_proj.weight", "U8", {100, 1}, 100},
                       {"model.layers.0.mlp.up_proj.weight.absmax", "F32", {3}, 3},
                       {"model.layers.0.mlp.up_proj.weight.quant_state.bitsandbytes__nf4", "U8", {50}, 50}});
  CHECK(s.params == 8030261248ULL);
  CHECK_FALSE(s.exact_from_checkpoint);
  CHECK(*s.checkpoint_dtype == DType::nf4);
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0].rfind("the checkpoint is quantized (bitsandbytes 4-bit)", 0) == 0);

  ModelSpec g;
  g.params = 7000;
  apply_checkpoint(g, {{"model.layers.0.mlp.up_proj.qweight", "I32", {10, 10}, 100},
                       {"model.layers.0.mlp.up_proj.scales", "F16", {10}, 10}});
  CHECK(g.params == 7000);
  CHECK(*g.checkpoint_dtype == DType::int4);

  // bitsandbytes int8 stores one I8 per parameter: the count is exact.
  ModelSpec i8;
  i8.params = 100;
  apply_checkpoint(i8, {{"l.weight", "I8", {10, 10}, 100}, {"l.SCB", "F32", {10}, 10}});
  CHECK(i8.params == 100);
  CHECK(*i8.checkpoint_dtype == DType::int8);
}

TEST_CASE("safetensors: a checkpoint of empty tensors is an error, not a model of 0 parameters", "[spec]") {
  // Found by tests/fuzz/safetensors_fuzz.cpp (crashes/safetensors/only-empty-tensors-zero-params).
  ModelSpec s;
  s.params = 100;
  try {
    apply_checkpoint(s, {{"e", "F16", {0}, 0}, {"model.rotary_emb.inv_freq", "F32", {4}, 4}});
    FAIL("no error");
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].str() ==
          "safetensors: the checkpoint's tensors hold no parameters (every one is empty or a buffer) "
          "(download the weights again, or give the config file alone)");
  }
  CHECK(s.params == 100);
}
