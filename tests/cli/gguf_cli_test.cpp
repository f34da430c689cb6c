// `--config model.gguf`: a GGUF file (or a folder holding one) through the whole CLI.
#include <catch2/catch.hpp>

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
}
