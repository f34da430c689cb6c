// `--config model.gguf`: a GGUF file (or a folder holding one) through the whole CLI.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "../unit/spec/gguf_writer.hpp"
#include "cli_helper.hpp"

using vramfit::test::estimate;
using vramfit::test::GgufWriter;
using vramfit::test::require_usage_error;
using vramfit::test::TempDir;

namespace {

/// The whole file: the header and zeroed tensor data.
std::string gguf_file(const GgufWriter& w) { return w.header() + std::string(w.data_size(), '\0'); }

}  // namespace

TEST_CASE("estimate --config model.gguf", "[gguf][cli]") {
  const TempDir dir;
  const std::string path = dir.write("tiny.gguf", gguf_file(vramfit::test::tiny_llama_gguf()));

  const auto r = estimate({"--config", path, "--mode", "inference", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& m = j["model"];
  CHECK(m["source"] == "gguf");
  CHECK(m["name"] == path);
  CHECK(m["model_type"] == "llama");
  CHECK(m["params"] == 106816);
  CHECK(m["exact_from_checkpoint"] == true);
  CHECK(m["hidden_size"] == 64);
  CHECK(m["num_layers"] == 2);
  CHECK(m["num_kv_heads"] == 2);
  CHECK(m["vocab_size"] == 256);
  CHECK(m["tied_embeddings"] == false);

  // A folder holding one .gguf file and no config.json reads the same.
  const auto f = estimate({"--config", dir.str(), "--mode", "inference", "--json"});
  REQUIRE(f.code == 0);
  CHECK(nlohmann::json::parse(f.out)["model"]["params"] == 106816);
}

TEST_CASE("estimate --config model-00001-of-00002.gguf: a split GGUF read whole", "[gguf][cli]") {
  // gguf-split's files: the first holds the metadata, each holds split.no (u16), split.count (u16)
  // and split.tensors.count (i32); llama.cpp maps each file on its own (one CPU_Mapped buffer a file).
  const GgufWriter whole = vramfit::test::tiny_llama_gguf();
  const auto tensors = whole.tensor_list();
  const auto u16 = [](unsigned v) { return std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}; };
  const auto shard = [&](unsigned no, unsigned first, unsigned last, bool metadata) {
    GgufWriter w = metadata ? vramfit::test::tiny_llama_gguf(false) : GgufWriter{};
    w.kv_raw("split.no", 2, u16(no));
    w.kv_raw("split.count", 2, u16(2));
    w.kv_i32("split.tensors.count", static_cast<std::int32_t>(tensors.size()));
    for (unsigned i = first; i < last; ++i)
      w.tensor(tensors[i].first, tensors[i].second, tensors[i].first.find("norm") != std::string::npos ? 0 : 8);
    return w.header() + std::string(w.data_size(), '\0');
  };
  const TempDir dir;
  const std::string one = dir.write("whole/m.gguf", whole.header() + std::string(whole.data_size(), '\0'));
  const std::string a = dir.write("split/m-00001-of-00002.gguf", shard(0, 0, 11, true));
  const std::string b = dir.write("split/m-00002-of-00002.gguf", shard(1, 11, static_cast<unsigned>(tensors.size()), false));
  const auto run = [](const std::string& path) {
    return estimate({"--config", path, "--engine", "llama.cpp", "--device", "none", "--ctx-size", "512", "--json"});
  };
  const auto w = run(one);
  REQUIRE(w.code == 0);
  const auto jw = nlohmann::json::parse(w.out);
  for (const std::string& given : {a, b, dir.str() + "/split"}) {  // either file, or their folder
    INFO(given);
    const auto r = run(given);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["model"]["params"] == 106816);
    // Every tensor is a multiple of 32 bytes: the two files' mapped ranges add up to the one file's.
    CHECK(j["engine"]["host"]["model_buffer_bytes"] == jw["engine"]["host"]["model_buffer_bytes"]);
    CHECK(j["engine"]["host"]["compute_buffer_bytes"] == jw["engine"]["host"]["compute_buffer_bytes"]);
  }
  // The transformers engine reads it whole too.
  const auto t = estimate({"--config", a, "--json"});
  REQUIRE(t.code == 0);
  CHECK(nlohmann::json::parse(t.out)["model"]["params"] == 106816);
  // A file missing, or one of another split: exit 2.
  std::filesystem::remove(b);
  const auto missing = run(a);
  CHECK(missing.code == 2);
  CHECK(missing.err.find("the split GGUF has 2 files and") != std::string::npos);
  dir.write("split/m-00002-of-00002.gguf", shard(0, 11, static_cast<unsigned>(tensors.size()), false));
  const auto wrong = run(a);
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("is not file 2 of the split (its split.no)") != std::string::npos);
}

TEST_CASE("estimate --config with bad GGUF files", "[gguf][cli]") {
  const TempDir dir;
  const std::string truncated =
      dir.write("cut.gguf", vramfit::test::tiny_llama_gguf().header().substr(0, 3005));
  require_usage_error(
      estimate({"--config", truncated}),
      "vramfit: error: " + truncated +
          ": the value of 'tokenizer.ggml.tokens' at byte 3001 needs 8 bytes, past the end of the "
          "file (3005 bytes) (the file is truncated or damaged: download it again)\n");

  const std::string header_only = dir.write("empty.gguf", vramfit::test::tiny_llama_gguf().header());
  const auto r = estimate({"--config", header_only});
  CHECK(r.code == 2);
  CHECK(
      r.err.find(header_only + ": tensor 'token_embd.weight' (17408 bytes at offset 0 of the data section") !=
      std::string::npos);

  const TempDir two;
  two.write("a.gguf", gguf_file(vramfit::test::tiny_llama_gguf()));
  two.write("b.gguf", gguf_file(vramfit::test::tiny_llama_gguf()));
  require_usage_error(estimate({"--config", two.str()}),
                      "vramfit: error: --config: folder '" + two.str() +
                          "' has no config.json and 2 .gguf files (give one "
                          "of them, e.g. '" +
                          two.str() + "/a.gguf')\n");

  // A tensor llama.cpp never creates for the architecture: its loader refuses the file.
  vramfit::test::GgufWriter extra = vramfit::test::tiny_llama_gguf();
  extra.tensor("blk.0.foo.weight", {64}, 0);
  const std::string extra_path = dir.write("extra.gguf", gguf_file(extra));
  require_usage_error(estimate({"--config", extra_path, "--engine", "llama.cpp"}),
                      "vramfit: error: " + extra_path +
                          ": tensor 'blk.0.foo.weight' is one llama.cpp never creates for architecture 'llama': its "
                          "loader refuses the file (wrong number of tensors) (the file is damaged, or was made for "
                          "another architecture or by another llama.cpp build)\n");
}

TEST_CASE("estimate --config: a GGUF header past the first MiB read on, up to 64 MiB", "[gguf][cli]") {
  // The CLI reads a header's first MiB, then more while it runs on (read_gguf_header); a 3 MiB
  // description puts the tokenizer and the tensor infos past the first read.
  const TempDir dir;
  vramfit::test::GgufWriter big = vramfit::test::tiny_llama_gguf();
  big.kv_str("general.description", std::string(3U << 20, 'x'));
  const std::string path = dir.write("big.gguf", gguf_file(big));
  const auto r = estimate({"--config", path, "--mode", "inference", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["model"]["params"] == 106816);

  // Past 64 MiB: refused, naming the limit and where the header still needed bytes.
  vramfit::test::GgufWriter huge = vramfit::test::tiny_llama_gguf();
  huge.kv_str("general.description", std::string(65U << 20, 'x'));
  const std::string huge_path = dir.write("huge.gguf", gguf_file(huge));
  const auto h = estimate({"--config", huge_path});
  CHECK(h.code == 2);
  CHECK(h.err.find(huge_path + ": the header goes past the first 67108864 bytes, the most vramfit reads") !=
        std::string::npos);
}

TEST_CASE("estimate --config gpt-oss.gguf: llama.cpp's openai-moe read as gpt_oss", "[gguf][cli]") {
  // A small file of gpt-oss's tensor set (openai-moe.cpp: biased Q/K/V/O, sinks, a biased router,
  // biased MXFP4 experts, post_attention_norm as the FFN's norm) and its keys.
  GgufWriter w;
  constexpr std::uint32_t F32 = 0, Q8_0 = 8, MXFP4 = 39;
  w.kv_str("general.architecture", "gpt-oss");
  w.kv_u32("general.file_type", 38);
  w.kv_u32("gpt-oss.context_length", 131072);
  w.kv_u32("gpt-oss.embedding_length", 64);
  w.kv_u32("gpt-oss.block_count", 4);
  w.kv_u32("gpt-oss.feed_forward_length", 64);
  w.kv_u32("gpt-oss.attention.head_count", 4);
  w.kv_u32("gpt-oss.attention.head_count_kv", 2);
  w.kv_u32("gpt-oss.attention.key_length", 16);
  w.kv_u32("gpt-oss.attention.value_length", 16);
  w.kv_u32("gpt-oss.attention.sliding_window", 128);
  w.kv_u32("gpt-oss.expert_count", 4);
  w.kv_u32("gpt-oss.expert_used_count", 2);
  w.kv_u32("gpt-oss.expert_feed_forward_length", 64);
  w.kv_f32("gpt-oss.attention.layer_norm_rms_epsilon", 1e-5f);
  w.kv_u32("gpt-oss.vocab_size", 256);
  w.kv_str("tokenizer.ggml.model", "no_vocab");
  w.tensor("token_embd.weight", {64, 256}, Q8_0);
  for (int i = 0; i < 4; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.tensor(b + "attn_norm.weight", {64}, F32);
    w.tensor(b + "post_attention_norm.weight", {64}, F32);
    for (const auto& [name, rows] : {std::pair{"attn_q", 64}, std::pair{"attn_k", 32}, std::pair{"attn_v", 32}}) {
      w.tensor(b + name + ".weight", {64, static_cast<std::uint64_t>(rows)}, Q8_0);
      w.tensor(b + name + ".bias", {static_cast<std::uint64_t>(rows)}, F32);
    }
    w.tensor(b + "attn_output.weight", {64, 64}, Q8_0);
    w.tensor(b + "attn_output.bias", {64}, F32);
    w.tensor(b + "attn_sinks.weight", {4}, F32);
    w.tensor(b + "ffn_gate_inp.weight", {64, 4}, F32);
    w.tensor(b + "ffn_gate_inp.bias", {4}, F32);
    for (const char* e : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      w.tensor(b + e + ".weight", {64, 64, 4}, MXFP4);
      w.tensor(b + e + ".bias", {64, 4}, F32);
    }
  }
  w.tensor("output_norm.weight", {64}, F32);
  w.tensor("output.weight", {64, 256}, Q8_0);
  const TempDir dir;
  const std::string path = dir.write("oss.gguf", gguf_file(w));
  const auto r = estimate({"--config", path, "--engine", "llama.cpp", "--ctx-size", "4096", "--gpu-layers", "0", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["model"]["model_type"] == "gpt_oss");
  // Every other layer slides (layers 0 and 2, a window of 128): llama.cpp's two caches, the full
  // layers' 4096 cells and the sliding layers' 128 + a ubatch of 512, padded to 256: 768 cells;
  // K and V of 2 heads of 16 in f16, 128 bytes a cell a layer: 2 x 4096 x 128 + 2 x 768 x 128.
  CHECK(j["engine"]["host"]["kv_buffer_bytes"] == 2 * 4096 * 128 + 2 * 768 * 128);
  // The MXFP4 experts (4 layers x 3 x 64 x 64 x 4 values, 17 bytes a block of 32: 104448 bytes) are
  // what an AVX2 CPU repacks, but with a GPU in the process nothing is (CUDA_Host comes first in
  // the CPU's buffer list): a note; with no GPU backend (--device none) they are CPU_REPACK's, in
  // the host figure and out of the mapped range (gpt-oss-20b's shapes on the build machine:
  // "CPU_REPACK model buffer size = 9682.03 MiB", this figure for that file).
  std::string notes;
  for (const auto& n : j["notes"]) notes += n.get<std::string>() + "\n";
  CHECK(notes.find("would repack 0.10 MiB of the host's Q4_0/Q4_K/IQ4_NL/MXFP4 matrices") != std::string::npos);
  CHECK(j["engine"]["host"]["repack_buffer_bytes"] == 0);
  const auto rn = estimate({"--config", path, "--engine", "llama.cpp", "--ctx-size", "4096", "--device", "none", "--json"});
  INFO(rn.err);
  REQUIRE(rn.code == 0);
  const auto jn = nlohmann::json::parse(rn.out);
  CHECK(jn["engine"]["host"]["repack_buffer_bytes"] == 12 * 64 * 64 * 4 / 32 * 17);
  const auto& h = jn["engine"]["host"];
  CHECK(jn["engine"]["host_bytes"] == h["model_buffer_bytes"].get<std::uint64_t>() + h["kv_buffer_bytes"].get<std::uint64_t>() +
                                         h["compute_buffer_bytes"].get<std::uint64_t>() +
                                         h["repack_buffer_bytes"].get<std::uint64_t>() +
                                         h["output_buffer_bytes"].get<std::uint64_t>());
  // A sliding_window_pattern of 0 makes every layer slide (llama_hparams::set_swa_pattern): four
  // layers of 768 cells.
  GgufWriter all_swa = w;
  all_swa.kv_u32("gpt-oss.attention.sliding_window_pattern", 0);
  const auto r0 = estimate({"--config", dir.write("oss0.gguf", gguf_file(all_swa)), "--engine", "llama.cpp", "--ctx-size",
                            "4096", "--gpu-layers", "0", "--json"});
  INFO(r0.err);
  REQUIRE(r0.code == 0);
  CHECK(nlohmann::json::parse(r0.out)["engine"]["host"]["kv_buffer_bytes"] == 4 * 768 * 128);
}
