// Tests of the GGUF module: the ggml type table, llama.cpp's file-type mixes against
// published file sizes, the header parser on files written here, and spec_from_gguf.
#include "vramfit/spec/gguf.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "gguf_writer.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::spec;
using vramfit::test::GgufWriter;

namespace {

std::vector<Diagnostic> errors(const std::string& prefix, std::uint64_t file_size) {
  try {
    (void)parse_gguf_header(prefix, file_size, "m.gguf");
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

/// The one problem parsing `w` reports (the file holds its header and `data` bytes).
std::string problem(const GgufWriter& w, std::uint64_t data = 0) {
  const std::string bytes = w.header();
  const auto d = errors(bytes, bytes.size() + data);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "m.gguf");
  return d[0].problem;
}

/// Llama-2-7B's config.json (meta-llama/Llama-2-7b-hf).
ModelSpec llama2_7b() {
  return from_config_text(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
    "max_position_embeddings": 4096, "tie_word_embeddings": false})",
                          "config.json");
}

TensorPlace place(std::uint64_t layer, std::uint64_t n_layers, std::uint64_t row) {
  TensorPlace p;
  p.layer = layer;
  p.n_layers = n_layers;
  p.row = row;
  return p;
}

std::string_view type_of(std::string_view ft, TensorRole r, const TensorPlace& p) {
  return gguf_tensor_type(ft, r, p).name;
}

}  // namespace

TEST_CASE("gguf: the ggml type table", "[gguf]") {
  // {name, id, block, bytes}: ggml/src/ggml.c type_traits, sizeof(block_*) in ggml-common.h.
  struct Row {
    const char* name;
    std::uint32_t id;
    std::uint64_t block, bytes;
  };
  const Row rows[] = {
      {"F32", 0, 1, 4},         {"F16", 1, 1, 2},         {"Q4_0", 2, 32, 18},      {"Q4_1", 3, 32, 20},
      {"Q5_0", 6, 32, 22},      {"Q5_1", 7, 32, 24},      {"Q8_0", 8, 32, 34},      {"Q8_1", 9, 32, 36},
      {"Q2_K", 10, 256, 84},    {"Q3_K", 11, 256, 110},   {"Q4_K", 12, 256, 144},   {"Q5_K", 13, 256, 176},
      {"Q6_K", 14, 256, 210},   {"Q8_K", 15, 256, 292},   {"IQ2_XXS", 16, 256, 66}, {"IQ2_XS", 17, 256, 74},
      {"IQ3_XXS", 18, 256, 98}, {"IQ1_S", 19, 256, 50},   {"IQ4_NL", 20, 32, 18},   {"IQ3_S", 21, 256, 110},
      {"IQ2_S", 22, 256, 82},   {"IQ4_XS", 23, 256, 136}, {"I8", 24, 1, 1},         {"I16", 25, 1, 2},
      {"I32", 26, 1, 4},        {"I64", 27, 1, 8},        {"F64", 28, 1, 8},        {"IQ1_M", 29, 256, 56},
      {"BF16", 30, 1, 2},       {"TQ1_0", 34, 256, 54},   {"TQ2_0", 35, 256, 66},   {"MXFP4", 39, 32, 17},
      {"NVFP4", 40, 64, 36},    {"Q1_0", 41, 128, 18},  // the June 2026 build's newest
  };
  CHECK(ggml_types().size() == std::size(rows));
  for (const Row& r : rows) {
    INFO(r.name);
    const GgmlType* by_id = ggml_type_by_id(r.id);
    REQUIRE(by_id != nullptr);
    CHECK(by_id->name == r.name);
    CHECK(by_id->block_size == r.block);
    CHECK(by_id->type_size == r.bytes);
    CHECK(ggml_type_by_name(r.name) == by_id);
  }
  CHECK(ggml_type_by_name("q4_k")->id == 12);
  CHECK(ggml_type_by_id(4) == nullptr);  // Q4_2, removed
  CHECK(ggml_type_by_id(36) == nullptr);
  CHECK(ggml_type_by_name("Q4_K_M") == nullptr);
}

TEST_CASE("gguf: tensor bytes", "[gguf]") {
  const std::vector<std::uint64_t> ne{4096, 11008};
  CHECK(ggml_tensor_bytes(*ggml_type_by_name("Q4_K"), ne, "t") == 4096 / 256 * 144 * 11008);
  CHECK(ggml_tensor_bytes(*ggml_type_by_name("Q8_0"), ne, "t") == 4096 / 32 * 34 * 11008);
  CHECK(ggml_tensor_bytes(*ggml_type_by_name("F32"), std::vector<std::uint64_t>{7}, "t") == 28);
  CHECK(ggml_tensor_bytes(*ggml_type_by_name("F16"), std::vector<std::uint64_t>{}, "t") == 2);  // a scalar
  // gpt-oss-20b's blk.0.ffn_gate_exps.weight: [2880, 2880, 32] in MXFP4, 17 bytes per 32 values.
  CHECK(ggml_tensor_bytes(*ggml_type_by_name("MXFP4"), std::vector<std::uint64_t>{2880, 2880, 32}, "t") ==
        2880 / 32 * 17 * 2880 * 32);
  try {
    (void)ggml_tensor_bytes(*ggml_type_by_name("Q6_K"), std::vector<std::uint64_t>{100, 3}, "blk.0.x");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.diagnostics()[0].str() ==
          "blk.0.x: a row of 100 elements is not a multiple of Q6_K's block of 256 (the file is truncated or "
          "damaged: download it again)");
  }
  CHECK_THROWS_AS(
      ggml_tensor_bytes(*ggml_type_by_name("F64"), std::vector<std::uint64_t>{1ULL << 62, 8}, "t"),
      InputError);
}

TEST_CASE("gguf: file types", "[gguf]") {
  CHECK(gguf_file_type_by_id(15)->name == "Q4_K_M");
  CHECK(gguf_file_type_by_id(0)->name == "F32");
  CHECK(gguf_file_type_by_id(1)->name == "F16");
  CHECK(gguf_file_type_by_id(7)->name == "Q8_0");
  CHECK(gguf_file_type_by_id(8)->name == "Q5_0");
  CHECK(gguf_file_type_by_id(18)->name == "Q6_K");
  CHECK(gguf_file_type_by_id(32)->name == "BF16");
  CHECK(gguf_file_type_by_id(30)->name == "IQ4_XS");
  CHECK(gguf_file_type_by_id(38)->name == "MXFP4_MOE");
  CHECK(gguf_file_type_by_id(38)->base == "MXFP4");
  CHECK(gguf_file_type_by_id(4) == nullptr);  // MOSTLY_Q4_1_SOME_F16, removed
  CHECK(gguf_file_type_by_name("q5_k_s")->id == 16);
  CHECK(gguf_file_type_by_name("Q4_K_M")->base == "Q4_K");
  CHECK(gguf_file_type_by_name("IQ2_M")->base == "IQ2_S");
  for (const GgufFileType& f : gguf_file_types()) {
    INFO(f.name);
    CHECK(ggml_type_by_name(f.base) != nullptr);
    CHECK(gguf_file_type_by_id(f.id) == &f);
  }
}

TEST_CASE("gguf: llama-quant's per-tensor rules", "[gguf]") {
  using R = TensorRole;
  // The output tensor: Q6_K, except in Q8_0 files; Q8_0 when rows do not fill the base blocks.
  CHECK(type_of("Q4_0", R::output, place(0, 32, 4096)) == "Q6_K");
  CHECK(type_of("Q4_K_M", R::output, place(0, 32, 4096)) == "Q6_K");
  CHECK(type_of("Q8_0", R::output, place(0, 32, 4096)) == "Q8_0");
  CHECK(type_of("Q4_K_M", R::output, place(0, 32, 4000)) == "Q8_0");  // 4000 % 256 != 0
  CHECK(type_of("F16", R::output, place(0, 32, 4096)) == "F16");
  // Tied: the embedding serves as the output; untied it keeps the base type.
  TensorPlace tied = place(0, 32, 2048);
  tied.has_output = false;
  CHECK(type_of("Q4_K_M", R::token_embd, tied) == "Q6_K");
  CHECK(type_of("Q4_K_M", R::token_embd, place(0, 32, 2048)) == "Q4_K");
  // 1-D tensors and the router stay F32.
  CHECK(type_of("Q4_K_M", R::kept_f32, place(0, 32, 4096)) == "F32");
  CHECK(type_of("BF16", R::kept_f32, place(0, 32, 4096)) == "F32");
  CHECK(type_of("BF16", R::attn_q, place(0, 32, 4096)) == "BF16");
  // use_more_bits for 32 layers: 0-3, 28-31 and 6, 9, 12, ..., 27.
  std::string more;
  for (std::uint64_t i = 0; i < 32; ++i)
    more += type_of("Q4_K_M", R::ffn_down, place(i, 32, 11008)) == "Q6_K" ? '6' : '4';
  CHECK(more == "66664464464464464464464464466666");
  CHECK(type_of("Q4_K_M", R::attn_v, place(5, 32, 4096)) == "Q4_K");
  CHECK(type_of("Q4_K_M", R::attn_v, place(6, 32, 4096)) == "Q6_K");
  CHECK(type_of("Q4_K_M", R::attn_q, place(0, 32, 4096)) == "Q4_K");
  CHECK(type_of("Q4_K_M", R::attn_qkv, place(0, 32, 4096)) == "Q6_K");  // attn_v rules
  CHECK(type_of("Q4_K_M", R::ffn_down_exp, place(0, 32, 14336)) == "Q6_K");
  // Q3_K_M: attn_v Q5_K in the first two layers, ffn_down Q5_K in the first 1/16th.
  CHECK(type_of("Q3_K_M", R::attn_v, place(1, 32, 4096)) == "Q5_K");
  CHECK(type_of("Q3_K_M", R::attn_v, place(2, 32, 4096)) == "Q4_K");
  CHECK(type_of("Q3_K_M", R::ffn_down, place(1, 32, 11008)) == "Q5_K");
  CHECK(type_of("Q3_K_M", R::ffn_down, place(2, 32, 11008)) == "Q4_K");
  CHECK(type_of("Q3_K_M", R::attn_output, place(2, 32, 4096)) == "Q4_K");
  CHECK(type_of("Q3_K_S", R::attn_output, place(2, 32, 4096)) == "Q3_K");
  CHECK(type_of("Q3_K_L", R::attn_output, place(2, 32, 4096)) == "Q5_K");
  // Q2_K: attn_v depends on grouped-query attention.
  TensorPlace gqa = place(3, 32, 4096);
  gqa.gqa = 4;
  CHECK(type_of("Q2_K", R::attn_v, gqa) == "Q4_K");
  CHECK(type_of("Q2_K", R::attn_v, place(3, 32, 4096)) == "Q3_K");
  CHECK(type_of("Q2_K", R::ffn_down, place(3, 32, 11008)) == "Q3_K");
  CHECK(type_of("Q2_K", R::ffn_up, place(3, 32, 4096)) == "Q2_K");
  // Q4_K_S: more bits in the first layers.
  CHECK(type_of("Q4_K_S", R::attn_v, place(3, 32, 4096)) == "Q5_K");
  CHECK(type_of("Q4_K_S", R::attn_v, place(4, 32, 4096)) == "Q4_K");
  CHECK(type_of("Q4_K_S", R::ffn_down, place(3, 32, 11008)) == "Q5_K");
  CHECK(type_of("Q4_K_S", R::ffn_down, place(4, 32, 11008)) == "Q4_K");
  // Eight experts (Mixtral): attn_v and attn_k in Q8_0, attn_output in Q5_K.
  TensorPlace mixtral = place(10, 32, 4096);
  mixtral.n_expert = 8;
  mixtral.gqa = 4;
  CHECK(type_of("Q4_K_M", R::attn_v, mixtral) == "Q8_0");
  CHECK(type_of("Q4_K_M", R::attn_k, mixtral) == "Q8_0");
  CHECK(type_of("Q4_K_M", R::attn_output, mixtral) == "Q5_K");
  CHECK(type_of("Q5_K_M", R::attn_output, mixtral) == "Q5_K");
  // LLM_TYPE_70B lifts attn_v from Q4_K to Q5_K.
  TensorPlace b70 = place(11, 80, 8192);  // not a use_more_bits layer
  b70.llama_70b = true;
  CHECK(type_of("Q4_K_M", R::attn_v, b70) == "Q5_K");
  // Fallbacks when a row does not fill 256-element blocks.
  CHECK(type_of("Q4_K_M", R::ffn_up, place(0, 24, 2880)) == "Q5_0");
  CHECK(type_of("Q5_K_S", R::ffn_up, place(0, 24, 2880)) == "Q5_1");
  CHECK(type_of("Q6_K", R::ffn_up, place(0, 24, 2880)) == "Q8_0");
  CHECK(type_of("Q2_K", R::ffn_up, place(0, 24, 2880)) == "Q4_0");
  CHECK(type_of("Q4_K_M", R::ffn_up, place(0, 24, 100)) == "F16");  // not even 32
  try {
    (void)gguf_tensor_type("Q4_0", R::ffn_up, place(0, 24, 100));
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.diagnostics()[0].str() ==
          "GGUF file type: llama.cpp cannot quantize a row of 100 elements to Q4_0 (blocks of 32), so no "
          "Q4_0 file "
          "exists (choose a k-quant (Q4_K_M, ...) or F16)");
  }
  try {
    (void)gguf_tensor_type("IQ4_XS", R::ffn_up, place(0, 24, 4096));
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.diagnostics()[0].str() ==
          "GGUF file type: no per-tensor rules for 'IQ4_XS' (known: F32, F16, Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, "
          "Q2_K, "
          "Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, BF16)");
  }
}

TEST_CASE("gguf: Llama-2-7B sizes match published GGUF files", "[gguf]") {
  // tensorblock/llama-2-7b-GGUF (https://huggingface.co/tensorblock/llama-2-7b-GGUF, model card,
  // "Model file specification"), quantized with llama.cpp b4242: file sizes in GB (10^9 bytes)
  // with three decimals, so +-0.5 MB of rounding. A file also holds its metadata: the 32000-token
  // vocabulary with scores and token types (~0.7 MB), 291 tensor infos and alignment padding,
  // together between 0.5 and 1.0 MB. So tensor bytes lie in [published - 1.5 MB, published].
  // TheBloke/Llama-2-7B-GGUF lists the same sizes to two decimals (3.83, 4.08, 4.78, 5.53,
  // 7.16 GB) except Q2_K (2.83 GB): its Sept. 2023 llama.cpp kept attn_v in Q4_K.
  struct Published {
    const char* file_type;
    double gb;
  };
  const Published published[] = {
      {"Q2_K", 2.533},   {"Q3_K_S", 2.948}, {"Q3_K_M", 3.298}, {"Q3_K_L", 3.597},
      {"Q4_0", 3.826},   {"Q4_K_S", 3.857}, {"Q4_K_M", 4.081}, {"Q5_0", 4.652},
      {"Q5_K_S", 4.652}, {"Q5_K_M", 4.783}, {"Q6_K", 5.529},   {"Q8_0", 7.161},
  };
  const ModelSpec m = llama2_7b();
  for (const Published& p : published) {
    INFO(p.file_type);
    const auto bytes = static_cast<double>(gguf_model_bytes(m, p.file_type));
    CHECK(bytes <= p.gb * 1e9);
    CHECK(bytes >= p.gb * 1e9 - 1.5e6);
  }
  // Exact values: 6.738e9 parameters; Q4_0 is 4.5 bits a weight, plus the Q6_K output and
  // F32 norms.
  CHECK(gguf_model_bytes(m, "Q4_0") == 3'825'065'984);
  CHECK(gguf_model_bytes(m, "F16") == 2 * (m.params - 65 * 4096) + 4 * 65 * 4096);
}

TEST_CASE("gguf: model bytes of other families", "[gguf]") {
  // GPT-2 small: tied embeddings (token_embd takes the output's Q6_K), F32 position table,
  // biases; c_proj is attn_output then ffn_down.
  const ModelSpec gpt2 = from_config_text(
      R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
          "n_positions": 1024})",
      "config.json");
  const std::uint64_t q8 = 768 / 32 * 34;                         // one Q8_0 row of 768
  const std::uint64_t layer = q8 * (3 * 768 + 768 + 3072)         // c_attn, c_proj, c_fc rows
                              + 3072 / 32 * 34 * 768              // c_proj (down): rows of 3072
                              + 4 * (3 * 768 + 768 + 3072 + 768)  // biases
                              + 4 * 4 * 768;                      // ln_1, ln_2 weight + bias
  const std::uint64_t expected = q8 * 50257 + 4 * 1024 * 768 + 12 * layer + 4 * 2 * 768;
  CHECK(gguf_model_bytes(gpt2, "Q8_0") == expected);
  // Q4_K_M: the tied embedding becomes Q6_K (768 = 3 blocks of 256).
  CHECK(gguf_model_bytes(gpt2, "Q4_K_M") > gguf_model_bytes(gpt2, "Q4_K_S"));
}

// ---------------------------------------------------------------------------------------
// The parser.

TEST_CASE("gguf: a header round-trips", "[gguf]") {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("general.file_type", 15);
  w.kv_u64("llama.context_length", 4096);
  w.kv_i32("test.negative", -7);
  w.kv_f32("llama.attention.layer_norm_rms_epsilon", 0.5f);
  w.kv_bool("test.flag", true);
  w.kv_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.kv_strings("tokenizer.ggml.merges", std::vector<std::string>(100, "a b"));
  w.kv_u32_array("test.ints", {1, 2, 3, 4});
  w.tensor("token_embd.weight", {256, 10}, 12);        // Q4_K
  w.tensor("output_norm.weight", {256}, 0);            // F32
  w.tensor("blk.0.attn_q.weight", {64, 64, 1, 2}, 8);  // Q8_0
  const std::string bytes = w.header();
  const GgufHeader h = parse_gguf_header(bytes, bytes.size() + w.data_size(), "m.gguf");

  CHECK(h.version == 3);
  CHECK(h.alignment == 32);
  CHECK(h.data_start == bytes.size());
  CHECK(h.data_start % 32 == 0);
  CHECK(h.metadata.size() == 9);
  CHECK(h.find("general.architecture")->str == "llama");
  CHECK(h.find("general.file_type")->type == GgufType::u32);
  CHECK(h.find("general.file_type")->as_uint() == 15u);
  CHECK(h.find("llama.context_length")->as_uint() == 4096u);
  CHECK(h.find("test.negative")->sint == -7);
  CHECK_FALSE(h.find("test.negative")->as_uint());
  CHECK(h.find("llama.attention.layer_norm_rms_epsilon")->real == 0.5);
  CHECK(h.find("test.flag")->uint == 1);
  const GgufValue* tokens = h.find("tokenizer.ggml.tokens");
  CHECK(tokens->type == GgufType::array);
  CHECK(tokens->array_type == GgufType::string);
  CHECK(tokens->array_length == 3);
  CHECK(tokens->array_strings == std::vector<std::string>{"<unk>", "<s>", "</s>"});
  CHECK(h.find("tokenizer.ggml.merges")->array_length == 100);
  CHECK(h.find("tokenizer.ggml.merges")->array_strings.empty());  // over kGgufKeptStrings
  CHECK(h.find("test.ints")->array_type == GgufType::u32);
  CHECK(h.find("test.ints")->array_length == 4);
  CHECK(h.find("absent") == nullptr);

  REQUIRE(h.tensors.size() == 3);
  const GgufTensor& e = h.tensors[0];
  CHECK(e.name == "token_embd.weight");
  CHECK(e.ne == std::vector<std::uint64_t>{256, 10});
  CHECK(e.type->name == "Q4_K");
  CHECK(e.offset == 0);
  CHECK(e.bytes == 1440);
  CHECK(e.elements() == 2560);
  CHECK(h.tensors[1].bytes == 1024);
  CHECK(h.tensors[1].offset == 1440);
  CHECK(h.tensors[2].bytes == 2 * 34 * 64 * 2);
  CHECK(h.tensors[2].offset == 2464);
  CHECK(h.tensor("output_norm.weight") == &h.tensors[1]);

  // Version 2 reads the same; general.alignment moves the data section.
  GgufWriter v2;
  v2.version = 2;
  v2.alignment = 64;
  v2.kv_u32("general.alignment", 64);
  v2.tensor("a", {64}, 0);
  v2.tensor("b", {3}, 0);
  const std::string b2 = v2.header();
  const GgufHeader h2 = parse_gguf_header(b2, b2.size() + v2.data_size(), "m.gguf");
  CHECK(h2.version == 2);
  CHECK(h2.alignment == 64);
  CHECK(h2.data_start % 64 == 0);
  CHECK(h2.tensors[1].offset == 256);
  // Trailing bytes (the data) after the header are fine.
  CHECK(parse_gguf_header(b2 + std::string(300, '\0'), b2.size() + v2.data_size(), "m").tensors.size() == 2);
}

TEST_CASE("gguf: malformed headers", "[gguf]") {
  auto d = errors("GGU", 3);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "m.gguf: too short for a GGUF file (3 bytes) (the file is truncated or damaged: download it "
        "again)");
  d = errors(std::string("{\"a\": 1}") + std::string(40, ' '), 48);
  REQUIRE(d.size() == 1);
  CHECK(d[0].str() ==
        "m.gguf: not a GGUF file: it starts with \"{\\x22a\\x22\", not \"GGUF\" (give a .gguf file, a "
        "config.json, or the folder holding them)");

  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("t", {32}, 0);
  const std::string good = w.header();

  SECTION("truncated") {
    const std::string cut = good.substr(0, 60);
    d = errors(cut, cut.size());
    REQUIRE(d.size() == 1);
    CHECK(d[0].str() ==
          "m.gguf: the value of 'general.architecture' at byte 56 needs 8 bytes, past the end of the "
          "file (60 bytes) (the file is truncated or damaged: download it again)");
    // The caller read only part of a larger file.
    d = errors(cut, 1'000'000);
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "the header goes past the first 60 bytes, the most vramfit reads: the value of "
          "'general.architecture' at byte 56 needs 8 bytes");
    // Counts that cannot fit what is left.
    d = errors(good.substr(0, 40), 40);
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem == "the header declares 1 tensor, more than the file's 40 bytes can describe");
  }
  SECTION("version 1, big-endian, unknown versions") {
    GgufWriter v1;
    v1.version = 1;
    CHECK(problem(v1) == "GGUF version 1 is not supported (only versions 2 and 3)");
    GgufWriter be;
    be.version = 0x03000000;  // 3 written big-endian
    CHECK(problem(be) ==
          "the file is big-endian (its version reads 0x3000000); only little-endian GGUF is supported");
    GgufWriter v4;
    v4.version = 4;
    CHECK(problem(v4) == "GGUF version 4 is not supported (only versions 2 and 3)");
  }
  SECTION("a string longer than the file") {
    std::string s = good;
    // The length of the value "llama": after the preamble, the key (8 + 20 bytes) and its type.
    const std::uint64_t huge = 1ULL << 40;
    std::memcpy(s.data() + 24 + 8 + 20 + 4, &huge, 8);
    d = errors(s, s.size() + 32);
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "the value of 'general.architecture' at byte 64 needs 1099511627776 bytes, past the end "
          "of the file (160 bytes)");
    // Keys have a limit of their own.
    std::memcpy(s.data() + 24, &huge, 8);
    d = errors(s, s.size() + 32);
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "the key of metadata entry 0 at byte 24 is 1099511627776 bytes long, over the limit of "
          "65535");
  }
  SECTION("counts larger than the file") {
    std::string s = good;
    const std::uint64_t many = 1ULL << 50;
    std::memcpy(s.data() + 8, &many, 8);
    d = errors(s, s.size() + 32);
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "the header declares 1125899906842624 tensors, more than the file's 160 bytes can "
          "describe");
    GgufWriter a;
    a.kv_u32_array("x", {1, 2});
    std::string arr = a.header();
    std::memcpy(arr.data() + 24 + 8 + 1 + 4 + 4, &many, 8);  // the array's length
    d = errors(arr, arr.size());
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "metadata 'x' declares 1125899906842624 elements, more than the file's 64 bytes can hold");
  }
  SECTION("a tensor past the end") {
    d = errors(good, good.size() + 127);  // the F32 tensor needs 128 bytes
    REQUIRE(d.size() == 1);
    CHECK(d[0].str() ==
          "m.gguf: tensor 't' (128 bytes at offset 0 of the data section, which starts at byte 128) "
          "ends past the end of the file (255 bytes) (the file is truncated or damaged: download it "
          "again)");
    CHECK(errors(good, good.size() + 128).empty());
    // Found by the fuzzer (tests/fuzz/crashes/gguf/empty-tensor-past-end): an empty tensor when
    // the file ends before its data section starts.
    GgufWriter empty;
    empty.tensor("t", {64, 0}, 0);
    const std::string head = empty.header().substr(0, 70);  // the infos end at 65, the data at 96
    d = errors(head, head.size());
    REQUIRE(d.size() == 1);
    CHECK(d[0].problem ==
          "tensor 't' (0 bytes at offset 0 of the data section, which starts at byte 96) ends past "
          "the end of the file (70 bytes)");
  }
  SECTION("an unknown type id") {
    GgufWriter u;
    u.tensor("blk.0.ffn_up.weight", {32, 2}, 99);
    CHECK(problem(u, 1000) == "tensor 'blk.0.ffn_up.weight' has unknown ggml type id 99");
  }
  SECTION("a row not a multiple of the block") {
    GgufWriter r;
    r.tensor("blk.0.ffn_down.weight", {100, 2}, 12);
    CHECK(problem(r, 1000) ==
          "tensor 'blk.0.ffn_down.weight': a row of 100 elements is not a multiple of Q4_K's "
          "block of 256");
  }
  SECTION("other lies") {
    GgufWriter dims;
    dims.tensor("t", {1, 1, 1, 1, 1}, 0);
    CHECK(problem(dims, 1000) == "tensor 't' has 5 dimensions; ggml allows at most 4");
    GgufWriter big;
    big.tensor("t", {1ULL << 40, 1ULL << 40}, 0);
    CHECK(problem(big, 1000) == "tensor 't' has absurd dimensions: its element count overflows 63 bits");
    GgufWriter dup;
    dup.tensor("t", {32}, 0);
    dup.tensor("t", {32}, 0);
    CHECK(problem(dup, 1000) == "tensor 't' appears twice");
    GgufWriter key;
    key.kv_u32("k", 1);
    key.kv_u32("k", 2);
    CHECK(problem(key) == "metadata key 'k' appears twice");
    GgufWriter align;
    align.kv_u32("general.alignment", 48);
    CHECK(problem(align) == "general.alignment is 48, not a power of two");
    GgufWriter nested;
    nested.kv_raw("n", 9, std::string("\x09\x00\x00\x00", 4) + std::string(8, '\0'));
    CHECK(problem(nested) == "metadata 'n' is an array of arrays, which GGUF does not allow");
    GgufWriter vt;
    vt.kv_raw("v", 13, "");
    CHECK(problem(vt) == "metadata 'v' has unknown value type 13");
    GgufWriter name;
    name.tensor(std::string(64, 'n'), {32}, 0);
    CHECK(problem(name, 1000) == "the name of tensor 0 at byte 24 is 64 bytes long, over the limit of 63");
    GgufWriter odd;
    odd.tensor("t", {32}, 0);
    odd.force_offset = 3;
    CHECK(problem(odd, 1000) == "tensor 't' starts at offset 3, not a multiple of the alignment 32");
  }
}

// ---------------------------------------------------------------------------------------
// spec_from_gguf.

TEST_CASE("gguf: a llama spec from a header", "[gguf]") {
  const GgufWriter w = vramfit::test::tiny_llama_gguf();
  const std::string bytes = w.header();
  const GgufHeader h = parse_gguf_header(bytes, bytes.size() + w.data_size(), "tiny.gguf");
  const ModelSpec m = spec_from_gguf(h, "tiny.gguf");
  CHECK(m.source == "gguf");
  CHECK(m.name == "tiny.gguf");
  CHECK(m.model_type == "llama");
  CHECK(m.hidden_size == 64);
  CHECK(m.num_layers == 2);
  CHECK(m.num_heads == 4);
  CHECK(m.num_kv_heads == 2);
  CHECK(m.head_dim == 16);
  CHECK(m.intermediate_size == 128);
  CHECK(m.vocab_size == 256);
  CHECK(m.max_positions == 512);
  CHECK_FALSE(m.tied_embeddings);
  // embed + lm_head 2 * 16384, final norm 64, per layer q 4096 + k 2048 + v 2048 + o 4096 +
  // 3 * 8192 + two norms 128.
  CHECK(m.params == 106'816);
  CHECK(m.exact_from_checkpoint);
  REQUIRE(m.quantization);
  CHECK(m.quantization->method == QuantMethod::gguf);
  CHECK(m.quantization->gguf_type == "Q8_0");
  CHECK(m.quantization->bits == 8);
  // Q8_0: 34 bytes per 32 weights for the 2-D tensors, F32 norms.
  CHECK(m.packed_weight_bytes == (106'816 - 64 - 2 * 128) / 32 * 34 + 4 * (64 + 2 * 128));
  CHECK(m.packed_weight_bytes == w.data_size_unpadded());
  REQUIRE(m.notes.size() == 1);
  CHECK(m.notes[0] ==
        "GGUF Q8_0: the tensors take 114432 bytes as stored; transformers dequantizes GGUF weights to "
        "the compute dtype when it loads them (from_pretrained(gguf_file=...)), while llama.cpp-style "
        "runtimes keep them packed");
  // gguf_model_bytes agrees with the file it would write, tensor by tensor.
  CHECK(gguf_model_bytes(m, "Q8_0") == 114'432);
}

TEST_CASE("gguf: architectures and missing keys", "[gguf]") {
  GgufWriter w;
  w.kv_str("general.architecture", "mamba");
  std::string bytes = w.header();
  try {
    (void)spec_from_gguf(parse_gguf_header(bytes, bytes.size(), "m.gguf"), "m.gguf");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(
        e.diagnostics()[0].str() ==
        "m.gguf: general.architecture: architecture 'mamba' is not supported (supported: llama, qwen2, "
        "qwen2moe, "
        "qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, gpt2, gptneox, starcoder2, olmoe, gpt-oss; or give the model's "
        "config.json)");
  }
  GgufWriter none;
  bytes = none.header();
  CHECK_THROWS_WITH(
      spec_from_gguf(parse_gguf_header(bytes, bytes.size(), "m.gguf"), "m.gguf"),
      "m.gguf: general.architecture: missing (the file was not written by llama.cpp's converter, or "
      "is damaged)");
  GgufWriter partial;
  partial.kv_str("general.architecture", "qwen2");
  partial.kv_u32("qwen2.embedding_length", 64);
  partial.kv_i32("qwen2.block_count", -2);
  bytes = partial.header();
  try {
    (void)spec_from_gguf(parse_gguf_header(bytes, bytes.size(), "m.gguf"), "m.gguf");
    FAIL("no error");
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 3);
    CHECK(e.diagnostics()[0].str() ==
          "m.gguf: qwen2.block_count: expected a non-negative integer, got -2 (the file "
          "was not written by llama.cpp's converter, or is damaged)");
    CHECK(e.diagnostics()[1].field == "m.gguf: qwen2.attention.head_count");
    CHECK(e.diagnostics()[1].problem == "missing: the model's size cannot be worked out without it");
    CHECK(e.diagnostics()[2].problem ==
          "missing, and neither tokenizer.ggml.tokens nor token_embd.weight gives the vocabulary");
  }
  CHECK(gguf_architectures().size() == 14);
}

namespace {

/// A one-block Qwen3-MoE's metadata: hidden 64, 4 heads of 16, 2 KV heads, 4 experts of 32 (2 a
/// token), vocab_size 100 with no_vocab's dummy tokens, as llama.cpp reads them.
GgufWriter qwen3moe_keys() {
  GgufWriter w;
  w.kv_str("general.architecture", "qwen3moe");
  w.kv_u32("general.file_type", 1);
  w.kv_u32("qwen3moe.embedding_length", 64);
  w.kv_u32("qwen3moe.block_count", 1);
  w.kv_u32("qwen3moe.attention.head_count", 4);
  w.kv_u32("qwen3moe.attention.head_count_kv", 2);
  w.kv_u32("qwen3moe.attention.key_length", 16);
  w.kv_u32("qwen3moe.expert_count", 4);
  w.kv_u32("qwen3moe.expert_used_count", 2);
  w.kv_u32("qwen3moe.expert_feed_forward_length", 32);
  w.kv_u32("qwen3moe.vocab_size", 100);
  w.kv_u32("qwen3moe.context_length", 4096);
  w.kv_str("tokenizer.ggml.model", "no_vocab");
  return w;
}

}  // namespace

TEST_CASE("gguf: MoE and tied models from headers", "[gguf]") {
  // A Qwen3-MoE-like header: experts, expert width, tied embeddings (no output.weight).
  GgufWriter w = qwen3moe_keys();
  w.tensor("token_embd.weight", {64, 100}, 1);
  w.tensor("blk.0.ffn_gate_inp.weight", {64, 4}, 0);
  w.tensor("blk.0.ffn_up_exps.weight", {64, 32, 4}, 1);
  // What llama.cpp requires of every block and the head (attention as the metadata sizes it).
  w.tensor("output_norm.weight", {64}, 0);
  w.tensor("blk.0.attn_norm.weight", {64}, 0);
  w.tensor("blk.0.attn_q.weight", {64, 64}, 1);
  w.tensor("blk.0.attn_k.weight", {64, 32}, 1);
  w.tensor("blk.0.attn_v.weight", {64, 32}, 1);
  w.tensor("blk.0.attn_output.weight", {64, 64}, 1);
  const std::string bytes = w.header();
  const ModelSpec m =
      spec_from_gguf(parse_gguf_header(bytes, bytes.size() + w.data_size(), "q.gguf"), "q.gguf");
  CHECK(m.model_type == "qwen3_moe");
  CHECK(m.tied_embeddings);
  CHECK(m.moe.num_experts == 4);
  CHECK(m.moe.experts_per_token == 2);
  CHECK(m.moe.expert_intermediate == 32);
  CHECK(m.head_dim == 16);
  CHECK(m.vocab_size == 100);
  CHECK(m.params == 64 * 100 + 64 * 4 + 64 * 32 * 4 + 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32);
  CHECK(m.quantization->gguf_type == "F16");
  CHECK(m.quantization->bits == 16);
  REQUIRE(m.notes.size() == 2);
  CHECK(m.notes[0].rfind(
            "the file's tensors hold 27264 parameters; its metadata describes a qwen3_moe model of ", 0) == 0);

  // llama with experts is Mixtral; general.file_type absent: guessed from the tensors.
  GgufWriter x;
  x.kv_str("general.architecture", "llama");
  x.kv_u32("llama.embedding_length", 256);
  x.kv_u32("llama.block_count", 1);
  x.kv_u32("llama.attention.head_count", 4);
  x.kv_u32("llama.feed_forward_length", 512);
  x.kv_u32("llama.expert_count", 8);
  x.kv_u32("llama.expert_used_count", 2);
  x.kv_u32("llama.context_length", 4096);
  x.kv_str("tokenizer.ggml.model", "llama");
  x.kv_strings("tokenizer.ggml.tokens", std::vector<std::string>(300, "t"));
  x.tensor("token_embd.weight", {256, 300}, 12);
  x.tensor("output.weight", {256, 300}, 14);
  x.tensor("blk.0.ffn_up_exps.weight", {256, 512, 8}, 12);
  x.tensor("output_norm.weight", {256}, 0);
  x.tensor("blk.0.attn_norm.weight", {256}, 0);
  for (const char* t : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"})
    x.tensor(t, {256, 256}, 12);
  const std::string xb = x.header();
  const ModelSpec mx = spec_from_gguf(parse_gguf_header(xb, xb.size() + x.data_size(), "x.gguf"), "x.gguf");
  CHECK(mx.model_type == "mixtral");
  CHECK(mx.vocab_size == 300);
  CHECK_FALSE(mx.tied_embeddings);
  CHECK(mx.moe.num_experts == 8);
  CHECK(mx.quantization->gguf_type == "Q4_K_M");
  CHECK(mx.notes[1] ==
        "general.file_type is absent or unknown: the file type is taken as Q4_K_M, from the type "
        "most tensors have");
}

namespace {

/// The problems spec_from_gguf reports for `w` (its data present), one rendered line each; none
/// when it reads.
std::vector<std::string> spec_errors(const GgufWriter& w) {
  const std::string bytes = w.header();
  std::vector<std::string> out;
  try {
    (void)spec_from_gguf(parse_gguf_header(bytes, bytes.size() + w.data_size(), "m.gguf"), "m.gguf");
  } catch (const InputError& e) {
    for (const Diagnostic& d : e.diagnostics()) out.push_back(d.str());
  }
  return out;
}

/// The refusal of a tensor llama.cpp never creates (and of `more` others) for `arch`.
std::vector<std::string> unknown_tensor(const std::string& name, const std::string& arch, int more = 0) {
  return {"m.gguf: tensor '" + name + "'" +
          (more == 0 ? std::string(" is one") : " and " + std::to_string(more) + " more are tensors") +
          " llama.cpp never creates for architecture '" + arch +
          "': its loader refuses the file (wrong number of tensors) (the file is damaged, or was made for "
          "another architecture or by another llama.cpp build)"};
}

/// A one-block Qwen3-MoE header, as llama.cpp's qwen3moe.cpp creates its tensors: 4 experts of 32.
GgufWriter tiny_qwen3moe() {
  GgufWriter w = qwen3moe_keys();
  w.tensor("token_embd.weight", {64, 100}, 1);
  w.tensor("blk.0.attn_norm.weight", {64}, 0);
  w.tensor("blk.0.attn_q.weight", {64, 64}, 1);
  w.tensor("blk.0.attn_k.weight", {64, 32}, 1);
  w.tensor("blk.0.attn_v.weight", {64, 32}, 1);
  w.tensor("blk.0.attn_output.weight", {64, 64}, 1);
  w.tensor("blk.0.attn_q_norm.weight", {16}, 0);
  w.tensor("blk.0.attn_k_norm.weight", {16}, 0);
  w.tensor("blk.0.ffn_norm.weight", {64}, 0);
  w.tensor("blk.0.ffn_gate_inp.weight", {64, 4}, 0);
  w.tensor("blk.0.ffn_gate_exps.weight", {64, 32, 4}, 1);
  w.tensor("blk.0.ffn_up_exps.weight", {64, 32, 4}, 1);
  w.tensor("blk.0.ffn_down_exps.weight", {32, 64, 4}, 1);
  w.tensor("output_norm.weight", {64}, 0);
  w.tensor("output.weight", {64, 100}, 1);
  return w;
}

}  // namespace

TEST_CASE("gguf: a tensor llama.cpp never creates is refused, as its loader refuses the file", "[gguf]") {
  // llama_model_loader::done_getting_tensors: "wrong number of tensors; expected %d, got %d" when
  // the file holds a tensor load_tensors does not create. Its bytes are not counted as weights.
  GgufWriter global = vramfit::test::tiny_llama_gguf();
  global.tensor("bogus.weight", {64}, 0);
  CHECK(spec_errors(global) == unknown_tensor("bogus.weight", "llama"));
  GgufWriter block = vramfit::test::tiny_llama_gguf();
  block.tensor("blk.0.foo.weight", {64}, 0);
  CHECK(spec_errors(block) == unknown_tensor("blk.0.foo.weight", "llama"));
  // Another architecture's role (qwen3's q norm), a block number llama.cpp does not spell so, a
  // tensor without a block given one: the first is named, the others counted.
  GgufWriter several = vramfit::test::tiny_llama_gguf();
  several.tensor("blk.1.attn_q_norm.weight", {16}, 0);
  several.tensor("blk.01.attn_q.weight", {64, 64}, 8);
  several.tensor("blk.0.rope_freqs.weight", {8}, 0);
  CHECK(spec_errors(several) == unknown_tensor("blk.1.attn_q_norm.weight", "llama", 2));

  // MoE: qwen2's lm_head bias and qwen2moe's shared-expert gate are not qwen3moe's.
  CHECK(spec_errors(tiny_qwen3moe()).empty());
  GgufWriter moe_global = tiny_qwen3moe();
  moe_global.tensor("output.bias", {100}, 0);
  CHECK(spec_errors(moe_global) == unknown_tensor("output.bias", "qwen3moe"));
  GgufWriter moe_block = tiny_qwen3moe();
  moe_block.tensor("blk.0.ffn_gate_inp_shexp.weight", {64}, 0);
  CHECK(spec_errors(moe_block) == unknown_tensor("blk.0.ffn_gate_inp_shexp.weight", "qwen3moe"));
  // gemma's output is its embedding: an output.weight is one tensor too many.
  vramfit::test::LlamaGguf gemma;
  gemma.arch = "gemma";
  CHECK(spec_errors(vramfit::test::llama_gguf(gemma)) == unknown_tensor("output.weight", "gemma"));
}

TEST_CASE("gguf: every tensor llama.cpp may create for an architecture is accepted", "[gguf]") {
  // Llama 3.1's rope_freqs (one tensor, which llama.cpp creates for every layer), every optional
  // bias, and NVFP4's per-tensor scales.
  GgufWriter llama = vramfit::test::tiny_llama_gguf();
  llama.tensor("rope_freqs.weight", {8}, 0);
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const auto& [role, n] : std::vector<std::pair<const char*, std::uint64_t>>{
             {"attn_q.bias", 64}, {"attn_k.bias", 32}, {"attn_v.bias", 32}, {"attn_output.bias", 64},
             {"ffn_gate.bias", 128}, {"ffn_up.bias", 128}, {"ffn_down.bias", 64}})
      llama.tensor(b + role, {n}, 0);
    llama.tensor(b + "attn_q.scale", {1}, 0);
    llama.tensor(b + "ffn_down.input_scale", {1}, 0);
  }
  llama.tensor("output.scale", {1}, 0);
  CHECK(spec_errors(llama).empty());

  // Each architecture: a file holding every tensor of its row of the table reads; one more does not.
  for (const std::string_view arch : gguf_architectures()) {
    const std::string a(arch);
    INFO(a);
    const GgufArchTensors names = gguf_arch_tensors(arch);
    REQUIRE(std::find(names.globals.begin(), names.globals.end(), "token_embd.weight") != names.globals.end());
    REQUIRE(std::find(names.block_roles.begin(), names.block_roles.end(), "attn_norm.weight") !=
            names.block_roles.end());
    bool moe = false;
    for (const std::string& r : names.block_roles) moe = moe || r.find("_exps.") != std::string::npos;
    GgufWriter w;
    w.kv_str("general.architecture", a);
    w.kv_u32("general.file_type", 1);
    w.kv_u32(a + ".context_length", 512);
    w.kv_u32(a + ".embedding_length", 64);
    w.kv_u32(a + ".block_count", 2);
    w.kv_u32(a + ".feed_forward_length", 128);
    w.kv_u32(a + ".attention.head_count", 4);
    w.kv_u32(a + ".attention.head_count_kv", 4);
    w.kv_u32(a + ".rope.dimension_count", 16);
    if (moe) {
      w.kv_u32(a + ".expert_count", 4);
      w.kv_u32(a + ".expert_used_count", 2);
      w.kv_u32(a + ".expert_feed_forward_length", 32);
    }
    w.kv_str("tokenizer.ggml.model", "llama");
    w.kv_strings("tokenizer.ggml.tokens", std::vector<std::string>(256, "tok"));
    // The shapes llama.cpp checks (check_tensors_match); the others are vectors.
    const auto shape = [](const std::string& n) -> std::vector<std::uint64_t> {
      if (n == "token_embd.weight" || n == "output.weight") return {64, 256};
      if (n == "attn_q.weight" || n == "attn_k.weight" || n == "attn_v.weight") return {64, 64};
      if (n == "attn_qkv.weight") return {64, 192};
      return {64};
    };
    for (const std::string& g : names.globals) w.tensor(g, shape(g), 0);
    for (int i = 0; i < 2; ++i)
      for (const std::string& r : names.block_roles) w.tensor("blk." + std::to_string(i) + "." + r, shape(r), 0);
    CHECK(spec_errors(w).empty());
    w.tensor("blk.1.bogus.weight", {64}, 0);
    CHECK(spec_errors(w) == unknown_tensor("blk.1.bogus.weight", a));
  }
  CHECK(gguf_arch_tensors("mamba").globals.empty());
  CHECK(gguf_arch_tensors("mamba").block_roles.empty());
}
