// What a hostile tester found (issue #14), through the real command line: each case exits 2
// with an exact message naming the file or field, instead of crashing, hanging, reading without
// end or echoing megabytes. The resource bounds of these cases are checked in
// tests/regress/limits_test.cpp.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/cli_helper.hpp"

using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::TempDir;

namespace {

const std::string kErr = "vramfit: error: ";

std::string deep(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string safetensors(const std::string& header, std::size_t data = 0) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

std::string smollm() { return vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json"); }

}  // namespace

TEST_CASE("hostile: JSON nested 100,000 levels deep is refused at 64 wherever it is read", "[hostile]") {
  TempDir d;
  // A config value quoted in a message used to be printed recursively: SIGSEGV.
  const auto cfg = d.write("deep.json", R"({"model_type": "llama", "hidden_size": )" + deep(100000) + "}");
  require_usage_error(run_cli({"estimate", "--config", cfg}),
                      kErr + cfg +
                          ": nests arrays and objects deeper than 64 levels (at offset 102) (check the file is a "
                          "complete config.json)\n");
  // A safetensors header entry: the same.
  d.write("ckpt/config.json", smollm());
  const auto st = d.write("ckpt/model.safetensors", safetensors(R"({"a": )" + deep(100000) + "}"));
  require_usage_error(run_cli({"estimate", "--config", d.str() + "/ckpt"}),
                      kErr + st +
                          ": nests arrays and objects deeper than 64 levels (at offset 69) (the file is truncated or "
                          "not a safetensors file: download it again)\n");
  // The catalog and a preset.
  d.write("cat/gpus.json", R"({"gpus": )" + deep(100000) + "}");
  require_usage_error(run_cli({"gpus", "--data-dir", d.str() + "/cat"}),
                      kErr + "gpus.json: nests arrays and objects deeper than 64 levels (at offset 72) (fix the "
                             "catalog file)\n");
  d.write("cat2/gpus.json", vramfit::test::source_file("tests/cli/data/gpus.json"));
  d.write("cat2/models/x.json", R"({"id": "x", "config": )" + deep(100000) + "}");
  require_usage_error(run_cli({"models", "--data-dir", d.str() + "/cat2"}),
                      kErr + "models/x.json: nests arrays and objects deeper than 64 levels (at offset 85) (fix the "
                             "catalog file)\n");
  // A truth line.
  const auto truth = d.write("truth.jsonl", R"({"id": )" + deep(100000) + "}\n");
  require_usage_error(run_cli({"validate", truth}),
                      kErr + truth +
                          ":1: nests arrays and objects deeper than 64 levels (at offset 70) (each line must be one "
                          "JSON object, as measure.py writes)\n");
}

TEST_CASE("hostile: a NUL byte does not end a JSON document early", "[hostile]") {
  TempDir d;
  using namespace std::string_literals;
  const auto cfg = d.write("nul.json", "{\"model_type\": \"llama\"}\0{\"hidden_size\": 1}"s);
  require_usage_error(run_cli({"estimate", "--config", cfg}),
                      kErr + cfg +
                          ": holds a NUL byte at offset 23, which JSON does not allow (check the file is a complete "
                          "config.json)\n");
}

TEST_CASE("hostile: messages quote an excerpt of a value, never all of it", "[hostile]") {
  TempDir d;
  d.write("cat/gpus.json", R"({"gpus": [{"id": ")" + std::string(10'000'000, 'A') + "\"}]}");
  require_usage_error(run_cli({"gpus", "--data-dir", d.str() + "/cat"}),
                      kErr + "gpus.json: gpus[0].id: '" + std::string(77, 'A') +
                          "...' is not a valid id (use lower-case letters, digits, '-', '.', '_') (fix the catalog "
                          "file)\n");
  const auto cfg = d.write("big.json", R"({"model_type": "llama", "hidden_size": ")" + std::string(10'000'000, 'x') +
                                           R"(", "num_hidden_layers": 2, "num_attention_heads": 2, )"
                                           R"("vocab_size": 10, "intermediate_size": 8})");
  const auto r = run_cli({"estimate", "--config", cfg});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == kErr + cfg + ": hidden_size: expected a positive integer, got \"" + std::string(36, 'x') +
                     "... (write the number without quotes)\n");
  // An unknown GPU a megabyte long: quoted short, and no suggestion searched for.
  require_usage_error(run_cli({"estimate", "--params", "7B", "--gpu", std::string(1'000'000, 'h')}),
                      kErr + "--gpu: unknown GPU '" + std::string(77, 'h') +
                          "...' (run 'vramfit gpus' to list them)\n");
}

TEST_CASE("hostile: a truth line with a wrong type names the field", "[hostile]") {
  TempDir d;
  const auto f = d.write("t.jsonl", R"({"id": "x", "config": "c.json", "mode": 5, "weights_dtype": "bf16"})"
                                    "\n");
  require_usage_error(run_cli({"validate", f}), kErr + f + ":1: mode: expected a string, got 5 (fix or remove the line)\n");
  const auto g = d.write("u.jsonl", R"({"id": ["x"], "config": "c.json"})"
                                    "\n");
  require_usage_error(run_cli({"validate", g}),
                      kErr + g + ":1: id: expected a string, got [\"x\"] (fix or remove the line)\n");
  const auto h = d.write("v.jsonl", R"({"env": "yes"})"
                                    "\n");
  require_usage_error(run_cli({"validate", h}),
                      kErr + h + ":1: env: expected true or false, got \"yes\" (fix or remove the line)\n");
  const auto l = d.write("w.jsonl", R"({"id": "x", "config": "c.json", "mode": "train", "weights_dtype": "bf16", )"
                                    R"("batch": 1, "seq": 8, "lora": {"r": 8, "targets": [1]}})"
                                    "\n");
  require_usage_error(run_cli({"validate", l}),
                      kErr + l +
                          ":1: lora: targets: expected \"all-linear\" or a list of module names, got [1] (fix or "
                          "remove the line)\n");
}

TEST_CASE("hostile: FIFOs and devices are refused before opening, without blocking", "[hostile]") {
  TempDir d;
  const std::string fifo = d.str() + "/fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string kind = "' is a named pipe (FIFO), not a file (save the input to a regular file and give that file)\n";
  require_usage_error(run_cli({"estimate", "--config", fifo}), kErr + "--config: '" + fifo + kind);
  require_usage_error(run_cli({"explain", fifo}), kErr + "log: '" + fifo + kind);
  const std::string cat = d.str() + "/cat";
  std::filesystem::create_directories(cat);
  REQUIRE(::mkfifo((cat + "/gpus.json").c_str(), 0600) == 0);
  require_usage_error(run_cli({"gpus", "--data-dir", cat}), kErr + "--data-dir: '" + cat + "/gpus.json" + kind);
  require_usage_error(run_cli({"explain", "/dev/zero"}),
                      kErr + "log: '/dev/zero' is a character device, not a file (save the input to a regular file "
                             "and give that file)\n");
}

TEST_CASE("hostile: a log on standard input is read up to 64 MiB", "[hostile]") {
  require_usage_error(run_cli({"explain", "-"}, std::string((64u << 20) + 1, 'x')),
                      kErr +
                          "log: standard input is longer than 64 MiB (give the log as a file (vramfit explain FILE), "
                          "or pipe only its end: tail -c 50M LOG | vramfit explain -)\n");
}

TEST_CASE("hostile: an unusable --data-dir or VRAMFIT_DATA_DIR is an error for every command", "[hostile]") {
  TempDir d;
  const std::string missing = d.str() + "/missing";
  const std::string msg = "' is not a folder (give a folder holding gpus.json and models/*.json)\n";
  require_usage_error(run_cli({"explain", "--data-dir", missing, "-"}, "no oom here"),
                      kErr + "--data-dir: '" + missing + msg);
  require_usage_error(run_cli({"estimate", "--params", "7B", "--data-dir", missing}),
                      kErr + "--data-dir: '" + missing + msg);
  // run_cli clears the variable; set it for one in-process run.
  ::setenv("VRAMFIT_DATA_DIR", missing.c_str(), 1);
  std::ostringstream out, err;
  std::istringstream in("no oom here");
  const char* argv[] = {"vramfit", "explain", "-"};
  const int code = vramfit::cli::run(3, argv, out, err, in);
  ::unsetenv("VRAMFIT_DATA_DIR");
  CHECK(code == 2);
  CHECK(err.str() == kErr + "VRAMFIT_DATA_DIR: '" + missing + msg);
  CHECK(out.str().empty());
}

TEST_CASE("hostile: 40,000 mlp_only_layers lay out like the periodic rule they spell", "[hostile]") {
  // Qwen2MoeDecoderLayer is sparse when i is not in mlp_only_layers and (i + 1) % step == 0:
  // every even layer dense with step 1 is decoder_sparse_step 2. The layout looks the list up
  // once per change (it rescanned the whole list at every change: 14 s for this 275 KB file).
  TempDir d;
  nlohmann::json c = nlohmann::json::parse(vramfit::test::source_file("tests/fuzz/corpus/config/h200-qwen3-30b-a3b.json"));
  c["num_hidden_layers"] = 80000;
  c["decoder_sparse_step"] = 1;
  auto only = nlohmann::json::array();
  for (int i = 0; i < 80000; i += 2) only.push_back(i);
  c["mlp_only_layers"] = only;
  const auto listed = d.write("listed.json", c.dump());
  c["mlp_only_layers"] = nlohmann::json::array();
  c["decoder_sparse_step"] = 2;
  const auto periodic = d.write("periodic.json", c.dump());
  const auto a = run_cli({"estimate", "--config", listed, "--json"});
  const auto b = run_cli({"estimate", "--config", periodic, "--json"});
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  auto ja = nlohmann::json::parse(a.out);
  auto jb = nlohmann::json::parse(b.out);
  CHECK(ja["model"]["params"] == 27190546171904ULL);
  ja["model"].erase("name");
  jb["model"].erase("name");
  CHECK(ja == jb);
}
