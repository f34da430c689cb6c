// Checkpoint headers that would give a silently wrong count (issue #14): GGUF files with no
// tensors or empty ones, tensors whose data overlap or leave gaps (GGUF and safetensors, whose
// own loaders refuse them), and counts past the documented 10^15 parameters.
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
  // the tiny llama: 1.1e15 parameters.
  GgufWriter w = tiny_llama_gguf();
  w.tensor("huge.weight", {std::uint64_t{1} << 50}, 0);
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
