// Checkpoint headers that would give a silently wrong count (issue #14): GGUF files with no
// tensors or empty ones, tensors whose data overlap or leave gaps (GGUF and safetensors, whose
// own loaders refuse them), and counts past the documented 10^15 parameters.
#include <functional>
#include <catch2/catch.hpp>

#include <string>

#include "../unit/spec/gguf_writer.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::spec;
using vramfit::test::GgufWriter;
using vramfit::test::tiny_llama_gguf;

namespace {

std::string gguf_error(const GgufWriter& w, std::uint64_t data) {
  const std::string bytes = w.header();
  try {
    (void)spec_from_gguf(parse_gguf_header(bytes, bytes.size() + data, "m.gguf"), "m.gguf");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string safetensors(const std::string& header) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header;
}

std::string st_error(const std::string& header, std::uint64_t data) {
  const std::string bytes = safetensors(header);
  try {
    (void)parse_safetensors_header(bytes, bytes.size() + data, "m.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

const std::string kDamaged = " (the file is truncated or damaged: download it again)";
const std::string kStFix = " (the file is truncated or not a safetensors file: download it again)";

}  // namespace

TEST_CASE("checkpoints: a GGUF without tensors, or with an empty one, is refused", "[checkpoint]") {
  const GgufWriter bare = tiny_llama_gguf(false);
  CHECK(gguf_error(bare, 0) ==
        "m.gguf: the file holds no tensors (a vocabulary-only GGUF?): there are no weights to estimate (give the "
        "model's .gguf file, the one holding its weights)");
  GgufWriter empty = tiny_llama_gguf();
  empty.tensor("extra.weight", {64, 0}, 0);
  CHECK(gguf_error(empty, empty.data_size()) ==
        "m.gguf: tensor 'extra.weight' has a dimension of 0: it holds no data" + kDamaged);
  const GgufWriter ok = tiny_llama_gguf();
  CHECK(gguf_error(ok, ok.data_size()) == "no error");
}

TEST_CASE("checkpoints: a GGUF without the tokenizer llama.cpp sizes the embeddings by is refused", "[checkpoint]") {
  // llama_vocab::impl::load: tokenizer.ggml.model is required; "no_vocab"/"none" takes <arch>.vocab_size
  // dummy tokens (0 without it, then token_embd has the wrong shape); any other needs its token list.
  const auto error_of = [](const std::string& tokenizer, bool tokens, bool vocab_size = false) {
    vramfit::test::LlamaGguf g;
    g.tokenizer = tokenizer;
    g.tokens = tokens;
    GgufWriter w = vramfit::test::llama_gguf(g, false);
    if (vocab_size) w.kv_u32("llama.vocab_size", 256);
    for (const auto& t : tiny_llama_gguf().tensor_list())
      w.tensor(t.first, t.second, t.first.find("norm") != std::string::npos ? 0 : 8);
    return gguf_error(w, w.data_size());
  };
  const std::string no_tokenizer =
      " (the file holds no tokenizer: convert the model again with its tokenizer (convert_hf_to_gguf.py))";
  CHECK(error_of("llama", true) == "no error");
  CHECK(error_of("", true) ==
        "m.gguf: tokenizer.ggml.model: missing: llama.cpp refuses the file (key not found in model)" + no_tokenizer);
  CHECK(error_of("gpt2", false) ==
        "m.gguf: tokenizer.ggml.tokens: missing: llama.cpp refuses the file (cannot find tokenizer vocab in model "
        "file)" + no_tokenizer);
  CHECK(error_of("no_vocab", false) ==
        "m.gguf: token_embd.weight: shape [64, 256], but the metadata makes it [64, 0] (embedding_length x the "
        "vocabulary): llama.cpp refuses the file (tensor has wrong shape) (the file's metadata and its tensors "
        "disagree: llama.cpp refuses to load it; convert the model again (convert_hf_to_gguf.py))");
  CHECK(error_of("no_vocab", false, true) == "no error");
  CHECK(error_of("none", false, true) == "no error");
}

TEST_CASE("checkpoints: a GGUF whose tensors contradict its metadata is refused, as llama.cpp's loader refuses it",
          "[checkpoint]") {
  // The tiny llama (2 blocks, 64 wide, 4 heads of 16, 2 KV heads) with one key or one tensor changed.
  const auto tiny = [](const std::function<void(GgufWriter&)>& keys, const std::string& skip = "",
                       const std::function<void(GgufWriter&)>& more = {}) {
    GgufWriter w;
    w.kv_str("general.architecture", "llama");
    w.kv_u32("general.file_type", 7);
    keys(w);
    w.kv_str("tokenizer.ggml.model", "llama");
    w.kv_strings("tokenizer.ggml.tokens", std::vector<std::string>(256, "tok"));
    const GgufWriter full = tiny_llama_gguf();
    for (const auto& t : full.tensor_list())
      if (t.first != skip) w.tensor(t.first, t.second, t.first.find("norm") != std::string::npos ? 0 : 8);
    if (more) more(w);
    return gguf_error(w, w.data_size());
  };
  const auto sizes = [](GgufWriter& w, std::uint32_t blocks, std::uint32_t key_length) {
    w.kv_u32("llama.context_length", 512);
    w.kv_u32("llama.embedding_length", 64);
    w.kv_u32("llama.block_count", blocks);
    w.kv_u32("llama.feed_forward_length", 128);
    w.kv_u32("llama.attention.head_count", 4);
    w.kv_u32("llama.attention.head_count_kv", 2);
    if (key_length != 0) w.kv_u32("llama.attention.key_length", key_length);
  };
  const std::string fix = " (the file's metadata and its tensors disagree: llama.cpp refuses to load it; convert the "
                          "model again (convert_hf_to_gguf.py))";
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 2, 0); }) == "no error");
  // key_length 2^31: a KV cache of 128 TiB, estimated with exit 0 before.
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 2, 1U << 31); }) ==
        "m.gguf: blk.0.attn_q.weight: shape [64, 64], but the metadata makes it [64, 8589934592] (embedding_length x "
        "head_count x key_length): llama.cpp refuses the file (tensor has wrong shape)" + fix);
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 3, 0); }) ==
        "m.gguf: llama.block_count: 3 layers, but the file holds no tensor of layer 2 (llama.cpp: missing tensor "
        "'blk.2.attn_norm.weight')" + fix);
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 1, 0); }) ==
        "m.gguf: llama.block_count: 1 layers, but the file holds tensor 'blk.1.attn_norm.weight' of layer 1" + fix);
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 1000, 0); }) ==
        "m.gguf: llama.block_count: 1000 layers: llama.cpp loads at most 512 (LLAMA_MAX_LAYERS)" + fix);
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 2, 0); }, "blk.1.attn_k.weight") ==
        "m.gguf: missing tensor 'blk.1.attn_k.weight': llama.cpp refuses the file" + fix);
  CHECK(tiny([&](GgufWriter& w) { sizes(w, 2, 0); }, "output_norm.weight") ==
        "m.gguf: missing tensor 'output_norm.weight': llama.cpp refuses the file" + fix);
  CHECK(tiny([&](GgufWriter& w) {
          sizes(w, 2, 0);
          w.kv_u32("llama.expert_count", 4);
          w.kv_u32("llama.expert_used_count", 2);
        }) == "m.gguf: llama.expert_count: experts announced, but the file holds no expert tensor (*_exps)" + fix);
  // Sizes whose products pass 2^64 (4 x 2^32 - 1 heads and head widths): refused, not wrapped.
  const std::string wrapped = tiny([&](GgufWriter& w) {
    w.kv_u32("llama.context_length", 512);
    w.kv_u32("llama.embedding_length", 64);
    w.kv_u32("llama.block_count", 2);
    for (const char* k : {"head_count", "head_count_kv", "key_length", "value_length"})
      w.kv_u32(std::string("llama.attention.") + k, 0xFFFFFFFFU);
  });
  INFO(wrapped);
  CHECK(wrapped.rfind("m.gguf: attention sizes: ", 0) == 0);
  // A size stored as i32, or the context length missing: llama.cpp's get_key refuses the file.
  CHECK(tiny([&](GgufWriter& w) {
          w.kv_u32("llama.context_length", 512);
          w.kv_u32("llama.embedding_length", 64);
          w.kv_i32("llama.block_count", 2);
          w.kv_u32("llama.attention.head_count", 4);
        }) == "m.gguf: llama.block_count: stored as a i32 value: llama.cpp reads it as a 32-bit unsigned integer only "
              "(wrong type) and refuses the file (the file was not written by llama.cpp's converter, or is damaged)");
  CHECK(tiny([&](GgufWriter& w) {
          w.kv_u32("llama.embedding_length", 64);
          w.kv_u32("llama.block_count", 2);
          w.kv_u32("llama.attention.head_count", 4);
          w.kv_u32("llama.attention.head_count_kv", 2);
        }) == "m.gguf: llama.context_length: missing: llama.cpp requires it to load the model (the file was not "
              "written by llama.cpp's converter, or is damaged)");
}

TEST_CASE("checkpoints: GGUF tensors must follow each other as llama.cpp's loader requires", "[checkpoint]") {
  // token_embd.weight is 64 x 256 in Q8_0: 17408 bytes, a multiple of 32. The next tensor
  // starts there; 0 overlaps it, 17440 leaves a gap.
  GgufWriter overlap = tiny_llama_gguf();
  overlap.offset_of[1] = 0;
  CHECK(gguf_error(overlap, overlap.data_size()) ==
        "m.gguf: tensor 'blk.0.attn_norm.weight' starts at offset 0 of the data section, but the tensors before it "
        "end at 17408: its data overlaps theirs (llama.cpp refuses such a file)" + kDamaged);
  GgufWriter gap = tiny_llama_gguf();
  gap.offset_of[1] = 17440;
  CHECK(gguf_error(gap, gap.data_size() + 32) ==
        "m.gguf: tensor 'blk.0.attn_norm.weight' starts at offset 17440 of the data section, but the tensors before "
        "it end at 17408: its data leaves a gap after theirs (llama.cpp refuses such a file)" + kDamaged);
}

TEST_CASE("checkpoints: a sparse GGUF past 10^15 parameters is refused", "[checkpoint]") {
  // One F32 vector of 2^50 elements (4 PiB of data a sparse file can claim) beside the 106816 of
  // the tiny llama: 1.1e15 parameters. Named as a tensor llama.cpp creates for llama (rope_freqs),
  // so that the limit is what stops it.
  GgufWriter w = tiny_llama_gguf();
  w.tensor("rope_freqs.weight", {std::uint64_t{1} << 50}, 0);
  CHECK(gguf_error(w, w.data_size()) ==
        "m.gguf: the file's tensors hold 1125899906949440 parameters, more than the 10^15 vramfit accepts" +
            kDamaged);
}

TEST_CASE("checkpoints: safetensors data that overlap, leave gaps or stop short are refused", "[checkpoint]") {
  const std::string a = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  CHECK(st_error("{" + a + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 16) == "no error");
  CHECK(st_error("{" + a + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 16) ==
        "m.safetensors: b.data_offsets: [4, 12] overlaps the tensor before it, which ends at byte 8" + kStFix);
  CHECK(st_error("{" + a + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 16) ==
        "m.safetensors: b.data_offsets: [0, 8] overlaps the tensor before it, which ends at byte 8" + kStFix);
  CHECK(st_error("{" + a + R"(, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})", 20) ==
        "m.safetensors: b.data_offsets: [12, 20] leaves a gap: the tensor before it ends at byte 8" + kStFix);
  CHECK(st_error("{" + a + "}", 16) ==
        "m.safetensors: the tensors end at byte 8 of the data section, which holds 16" + kStFix);
  // Empty tensors take no bytes and may sit anywhere in the run.
  CHECK(st_error("{" + a + R"(, "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})", 8) == "no error");
}
