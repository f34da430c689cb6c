// The hostile inputs of issue #14 under resource limits: each case runs the real vramfit binary
// as a child process with RLIMIT_AS 256 MiB and RLIMIT_CPU 2 s (and is killed after 2 s of wall
// time), and the test checks that it finished within them, with the expected exit code and, for
// exit 2, a message on stderr. A case that should take milliseconds either stays inside these
// bounds or fails here; nothing is timed as a benchmark.
//
// Under AddressSanitizer (VRAMFIT_SANITIZE) the address-space limit cannot apply (ASan reserves
// terabytes of shadow memory) and instrumented code is slower: the case is then bounded by its
// resident memory (getrusage) and 10 s.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "../unit/spec/gguf_writer.hpp"
#include "run_limited.hpp"

using vramfit::test::TempDir;
using vramfit::test::limited::expect;
using vramfit::test::limited::run_limited;

namespace {

std::string deep(std::size_t n) { return std::string(n, '[') + std::string(n, ']'); }

std::string safetensors(const std::string& header, std::size_t data = 0) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

}  // namespace

TEST_CASE("limits: hostile inputs finish within 2 s and 256 MiB, with a message", "[limits][hostile]") {
  TempDir d;
  const std::string dir = d.str();
  const std::string smollm = vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json");
  const std::string gpus = vramfit::test::source_file("tests/cli/data/gpus.json");

  // Class 1: nesting 100,000 levels deep (200 KB), wherever JSON is read.
  d.write("deep.json", R"({"model_type": "llama", "hidden_size": )" + deep(100000) + "}");
  expect("config nested 100k", run_limited({"estimate", "--config", dir + "/deep.json"}), 2,
         "vramfit: error: " + dir + "/deep.json: nests arrays and objects deeper than 64 levels");
  d.write("ckpt/config.json", smollm);
  d.write("ckpt/model.safetensors", safetensors(R"({"a": )" + deep(100000) + "}"));
  expect("safetensors header nested 100k", run_limited({"estimate", "--config", dir + "/ckpt"}), 2);
  d.write("cat/gpus.json", R"({"gpus": )" + deep(100000) + "}");
  expect("gpus.json nested 100k", run_limited({"gpus", "--data-dir", dir + "/cat"}), 2);
  d.write("cat2/gpus.json", gpus);
  d.write("cat2/models/x.json", R"({"id": "x", "config": )" + deep(100000) + "}");
  expect("preset nested 100k", run_limited({"models", "--data-dir", dir + "/cat2"}), 2);
  d.write("deep.jsonl", R"({"id": )" + deep(100000) + "}\n");
  expect("truth line nested 100k", run_limited({"validate", dir + "/deep.jsonl"}), 2);

  // Class 2: what used to be quadratic. Valid inputs: exit 0.
  nlohmann::json moe = nlohmann::json::parse(vramfit::test::source_file("tests/fuzz/corpus/config/h200-qwen3-30b-a3b.json"));
  moe["num_hidden_layers"] = 80000;
  moe["decoder_sparse_step"] = 1;
  auto only = nlohmann::json::array();
  for (int i = 0; i < 80000; i += 2) only.push_back(i);
  moe["mlp_only_layers"] = only;
  d.write("moe.json", moe.dump());
  expect("qwen3_moe with 40,000 mlp_only_layers (275 KB)", run_limited({"estimate", "--config", dir + "/moe.json"}), 0);
  std::string line;
  for (int i = 0; i < 32000; ++i) line += "RuntimeError: CUDA error: out of memory; ";
  d.write("oomline.log", line + "\n");
  expect("explain: a 1.3 MB line of OOM text", run_limited({"explain", dir + "/oomline.log"}), 0);

  // Class 3: blocking and unbounded reads.
  REQUIRE(::mkfifo((dir + "/fifo.json").c_str(), 0600) == 0);
  expect("FIFO as --config", run_limited({"estimate", "--config", dir + "/fifo.json"}), 2);
  expect("FIFO as explain's log", run_limited({"explain", dir + "/fifo.json"}), 2);
  std::filesystem::create_directories(dir + "/fifocat");
  REQUIRE(::mkfifo((dir + "/fifocat/gpus.json").c_str(), 0600) == 0);
  expect("FIFO as gpus.json", run_limited({"gpus", "--data-dir", dir + "/fifocat"}), 2);
  expect("explain - < /dev/zero", run_limited({"explain", "-"}, "/dev/zero"), 2);
  expect("explain /dev/zero", run_limited({"explain", "/dev/zero"}), 2);
  expect("--config /dev/zero", run_limited({"estimate", "--config", "/dev/zero"}), 2);
  expect("--config /dev/urandom", run_limited({"estimate", "--config", "/dev/urandom"}), 2);
  expect("--config a folder holding only a FIFO", run_limited({"estimate", "--config", dir + "/fifocat"}), 2);
  {
    std::string zeros = smollm.substr(0, smollm.rfind('}')) + R"(, "pad": [0)";
    zeros.reserve(14'100'000);
    while (zeros.size() < 14'000'000) zeros += ",0";
    d.write("zeros.json", zeros + "]}");
  }
  expect("a 14 MB config of 7 million values", run_limited({"estimate", "--config", dir + "/zeros.json"}), 2);
  d.write("big.json", smollm + std::string(20'000'000, ' '));
  expect("a 20 MB config (past 16 MiB)", run_limited({"estimate", "--config", dir + "/big.json"}), 2);

  // Class 4: checkpoints that would give a silently wrong count.
  {
    vramfit::test::GgufWriter w = vramfit::test::tiny_llama_gguf();
    d.write("ok.gguf", w.header() + std::string(w.data_size(), '\0'));
    expect("a valid GGUF", run_limited({"estimate", "--config", dir + "/ok.gguf"}), 0);
    w.offset_of[1] = 0;
    d.write("overlap.gguf", w.header() + std::string(w.data_size(), '\0'));
    expect("GGUF tensors overlapping", run_limited({"estimate", "--config", dir + "/overlap.gguf"}), 2);
    const vramfit::test::GgufWriter bare = vramfit::test::tiny_llama_gguf(false);
    d.write("bare.gguf", bare.header());
    expect("GGUF without tensors", run_limited({"estimate", "--config", dir + "/bare.gguf"}), 2);
  }
  d.write("st-overlap/config.json", smollm);
  d.write("st-overlap/model.safetensors",
          safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                      R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      12));
  expect("safetensors tensors overlapping", run_limited({"estimate", "--config", dir + "/st-overlap"}), 2);

  // Class 5: explain and extreme figures (exit 0: the message is found, its figures refused).
  d.write("ovf.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 99999999999 PiB. GPU 0 has a "
                     "total capacity of 79.14 GiB of which 1.00 GiB is free.\n");
  expect("explain: a size past 64 bits", run_limited({"explain", dir + "/ovf.log"}), 0);

  // Class 6: messages.
  d.write("cat3/gpus.json", R"({"gpus": [{"id": ")" + std::string(10'000'000, 'A') + "\"}]}");
  expect("a 10 MB catalog id", run_limited({"gpus", "--data-dir", dir + "/cat3"}), 2);
  expect("a 100 KB --gpu name", run_limited({"estimate", "--params", "7B", "--gpu", std::string(100'000, 'h')}), 2);
  d.write("types.jsonl", R"({"id": "x", "config": "c.json", "mode": 5})"
                         "\n");
  expect("a truth line with a wrong type", run_limited({"validate", dir + "/types.jsonl"}), 2,
         "vramfit: error: " + dir + "/types.jsonl:1: mode: expected a string, got 5");
  expect("an unusable VRAMFIT_DATA_DIR", run_limited({"explain", "-"}, {}, {"VRAMFIT_DATA_DIR=" + dir + "/none"}), 2,
         "vramfit: error: VRAMFIT_DATA_DIR:");
  d.write("nul.json", std::string("{\"model_type\": \"llama\"}\0{}", 26));
  expect("a NUL byte in a config", run_limited({"estimate", "--config", dir + "/nul.json"}), 2);
}
