// Issue #14's adversarial pass: a generator of hostile inputs by class, each run through the real
// vramfit binary under the limits of limits_test.cpp (RLIMIT_AS 256 MiB, 2 s CPU and wall). The
// expected outcome is per case: exit 2 with "vramfit: error: " and a message that names the
// field (the flag, the JSON key, the file), or exit 0 with the right figure on stdout. Never a
// crash, a hang, memory without bound, or exit 0 with a wrong number.
//
// Run alone: ./build/tests/vramfit_tests "[adversarial]" (the count per class is printed with -s).
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../unit/spec/gguf_writer.hpp"
#include "../run_limited.hpp"

using vramfit::test::TempDir;
using vramfit::test::limited::Outcome;
using vramfit::test::limited::run_limited;
using Json = nlohmann::json;

namespace {

struct Case {
  std::string cls;                 ///< the class of input (issue #14's list)
  std::string name;
  std::vector<std::string> args;
  std::string stdin_path;          ///< empty: /dev/null
  std::vector<std::string> env;
  int code = 2;                    ///< the expected exit code
  std::string names;               ///< exit 2: stderr names this (the field); exit 0: stdout holds it
};

std::string deep(std::size_t n, char open = '[', char close = ']') {
  return std::string(n, open) + std::string(n, close);
}

/// `{"a": {"a": ... 1 ...}}`: objects nested `n` deep.
std::string deep_objects(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += "{\"a\": ";
  s += "1";
  s += std::string(n, '}');
  return s;
}

std::string safetensors(const std::string& header, std::size_t data = 0) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("adversarial: 200+ hostile inputs by class, each within 2 s and 256 MiB", "[adversarial][limits][hostile]") {
  TempDir d;
  const std::string dir = d.str();
  const std::string smollm = vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json");
  const Json base = Json::parse(smollm);
  const std::string gpus = vramfit::test::source_file("tests/cli/data/gpus.json");
  std::vector<Case> cases;
  int file_no = 0;
  // A config.json with `key` set to the raw JSON text `value`; returns its path.
  auto config_with = [&](const std::string& key, const std::string& value) {
    std::string text = base.dump();
    text.pop_back();
    const std::string path = dir + "/c" + std::to_string(file_no++) + ".json";
    Json without = base;
    without.erase(key);
    text = without.dump();
    text.pop_back();
    d.write(path.substr(dir.size() + 1), text + ", \"" + key + "\": " + value + "}");
    return path;
  };
  auto file = [&](const std::string& content, const std::string& ext = ".json") {
    const std::string name = "f" + std::to_string(file_no++) + ext;
    d.write(name, content);
    return dir + "/" + name;
  };

  // --- Deep nesting: everywhere JSON is read, at and past the 64 levels allowed. ------------
  for (const std::size_t n : {65, 100, 1000, 20000, 100000}) {
    const std::string tag = std::to_string(n);
    cases.push_back({"deep nesting", "config value arrays " + tag,
                     {"estimate", "--config", config_with("hidden_size", deep(n))}, {}, {}, 2, "deeper than 64 levels"});
    cases.push_back({"deep nesting", "config value objects " + tag,
                     {"estimate", "--config", config_with("rope_scaling", deep_objects(n))}, {}, {}, 2, "deeper than 64 levels"});
    cases.push_back({"deep nesting", "config top level " + tag, {"estimate", "--config", file(deep(n))}, {}, {}, 2,
                     "deeper than 64 levels"});
    d.write("st" + tag + "/config.json", smollm);
    d.write("st" + tag + "/model.safetensors", safetensors("{\"a\": " + deep_objects(n) + "}"));
    cases.push_back({"deep nesting", "safetensors header " + tag, {"estimate", "--config", dir + "/st" + tag}, {}, {}, 2,
                     "model.safetensors"});
    d.write("cat" + tag + "/gpus.json", "{\"gpus\": [" + deep_objects(n) + "]}");
    cases.push_back({"deep nesting", "gpus.json " + tag, {"gpus", "--data-dir", dir + "/cat" + tag}, {}, {}, 2, "gpus.json"});
    d.write("pre" + tag + "/gpus.json", gpus);
    d.write("pre" + tag + "/models/x.json", "{\"id\": \"x\", \"config\": " + deep_objects(n) + "}");
    cases.push_back({"deep nesting", "preset " + tag, {"models", "--data-dir", dir + "/pre" + tag}, {}, {}, 2, "x.json"});
    cases.push_back({"deep nesting", "truth line " + tag, {"validate", file("{\"id\": " + deep(n) + "}\n", ".jsonl")}, {}, {}, 2,
                     ":1:"});
  }
  // Within the limit the value is read, and refused for its type, naming the key.
  cases.push_back({"deep nesting", "config value 63 deep", {"estimate", "--config", config_with("hidden_size", deep(63))}, {},
                   {}, 2, "hidden_size"});

  // --- Huge numbers and overflow in a config's sizes. ----------------------------------------
  const std::vector<std::string> size_keys = {"hidden_size", "intermediate_size", "num_hidden_layers",
                                              "num_attention_heads", "num_key_value_heads", "vocab_size"};
  for (const auto& key : size_keys) {
    for (const std::string v : {"1e308", "1e400", "18446744073709551616", "18446744073709551615",
                                "9223372036854775807", "4294967296000", "9007199254740993"}) {
      // nlohmann refuses a number past a double's range while parsing: the message quotes it.
      cases.push_back({"huge numbers", key + " = " + v, {"estimate", "--config", config_with(key, v)}, {}, {}, 2,
                       v == "1e400" ? std::string("number overflow parsing '1e400'") : key});
    }
  }
  // Sizes whose product overflows 64 bits though each one fits.
  {
    Json j = base;
    j["hidden_size"] = 1ULL << 31;
    j["intermediate_size"] = 1ULL << 40;
    j["num_attention_heads"] = 1;
    j["num_key_value_heads"] = 1;
    cases.push_back({"huge numbers", "hidden x intermediate past 2^64", {"estimate", "--config", file(j.dump())}, {}, {}, 2,
                     "overflows 64 bits"});
  }

  // --- NaN, negative, zero and fractions. ---------------------------------------------------
  for (const auto& key : size_keys) {
    for (const std::string v : {"-1", "0", "1.5", "-0.0", "NaN", "-Infinity"}) {
      cases.push_back({"NaN/negative", key + " = " + v, {"estimate", "--config", config_with(key, v)}, {}, {}, 2,
                       v == "NaN" || v == "-Infinity" ? std::string("not valid JSON") : key});
    }
  }
  for (const std::string v : {"-1", "NaN", "1e400"})
    cases.push_back({"NaN/negative", "rms_norm_eps = " + v, {"estimate", "--config", config_with("rms_norm_eps", v)}, {}, {},
                     v == "-1" ? 0 : 2, v == "-1" ? std::string("134,515,008") : std::string("not valid JSON")});
  // rms_norm_eps holds no memory: a negative one is the config's business, the estimate is exact.

  // --- Wrong types. -------------------------------------------------------------------------
  for (const auto& key : size_keys) {
    for (const std::string v : {"\"576\"", "true", "null", "[]", "{}"}) {
      // LlamaConfig reads num_key_value_heads = None as num_attention_heads (multi-head
      // attention, 9 KV heads): 147,786,048 parameters, as transformers builds it.
      if (key == "num_key_value_heads" && v == "null") {
        cases.push_back({"wrong types", key + " = " + v, {"estimate", "--config", config_with(key, v)}, {}, {}, 0, "147,786,048"});
        continue;
      }
      cases.push_back({"wrong types", key + " = " + v, {"estimate", "--config", config_with(key, v)}, {}, {}, 2, key});
    }
  }
  for (const std::string v : {"5", "null", "[\"llama\"]", "{}"})
    cases.push_back({"wrong types", "model_type = " + v, {"estimate", "--config", config_with("model_type", v)}, {}, {}, 2,
                     "model_type"});
  for (const std::string v : {"\"yes\"", "1", "[true]"})
    cases.push_back({"wrong types", "tie_word_embeddings = " + v,
                     {"estimate", "--config", config_with("tie_word_embeddings", v)}, {}, {}, 2, "tie_word_embeddings"});
  cases.push_back({"wrong types", "config is an array", {"estimate", "--config", file("[1, 2]")}, {}, {}, 2, "got an array"});
  cases.push_back({"wrong types", "config is a string", {"estimate", "--config", file("\"llama\"")}, {}, {}, 2, "got a string"});
  for (const std::string line : {R"({"id": 5, "config": "c.json"})", R"({"id": "x", "config": 5})",
                                 R"({"id": "x", "config": "c.json", "batch": "8"})", R"({"id": "x", "config": "c.json", "seq": -1})",
                                 R"({"id": "x", "config": "c.json", "peak_allocated": "big"})", R"([1, 2, 3])", R"("line")"})
    cases.push_back({"wrong types", "truth " + line, {"validate", file(line + std::string("\n"), ".jsonl")}, {}, {}, 2, ":1:"});
  for (const std::string g : {R"({"gpus": 5})", R"({"gpus": [{"id": 5}]})", R"({"gpus": [{"id": "x", "memory": "lots"}]})",
                              R"({"gpus": [{"id": "x", "memory": -80}]})", R"([])"}) {
    const std::string name = "g" + std::to_string(file_no++);
    d.write(name + "/gpus.json", g);
    cases.push_back({"wrong types", "gpus.json " + g, {"gpus", "--data-dir", dir + "/" + name}, {}, {}, 2, "gpus.json"});
  }

  // --- FIFOs, devices, folders and sockets where a file is expected. ------------------------
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  std::filesystem::create_directories(dir + "/empty");
  std::filesystem::create_directories(dir + "/confdir/config.json");
  std::filesystem::create_directory_symlink(dir + "/loop", dir + "/loop");
  {
    const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string p = dir + "/sock";
    if (s >= 0 && p.size() < sizeof(a.sun_path)) {
      std::copy(p.begin(), p.end(), a.sun_path);
      (void)::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
  }
  for (const std::string& p : std::vector<std::string>{dir + "/fifo", "/dev/zero", "/dev/null", "/dev/urandom", dir + "/empty", dir + "/confdir",
                              dir + "/loop", dir + "/sock", dir + "/missing"}) {
    cases.push_back({"special files", "--config " + p, {"estimate", "--config", p}, {}, {}, 2, "--config"});
    if (p != "/dev/null") cases.push_back({"special files", "explain " + p, {"explain", p}, {}, {}, 2, p});
    cases.push_back({"special files", "validate " + p, {"validate", p}, {}, {}, 2, p});
    cases.push_back({"special files", "--data-dir " + p, {"gpus", "--data-dir", p}, {}, {}, 2, "--data-dir"});
  }
  for (const std::string what : {"fifo", "dir"}) {
    const std::string c = "cat-" + what;
    std::filesystem::create_directories(dir + "/" + c);
    if (what == "fifo") REQUIRE(::mkfifo((dir + "/" + c + "/gpus.json").c_str(), 0600) == 0);
    else std::filesystem::create_directories(dir + "/" + c + "/gpus.json");
    cases.push_back({"special files", "gpus.json is a " + what, {"gpus", "--data-dir", dir + "/" + c}, {}, {}, 2, "gpus.json"});
  }
  cases.push_back({"special files", "explain - < /dev/zero", {"explain", "-"}, "/dev/zero", {}, 2, "standard input"});
  cases.push_back({"special files", "explain - < /dev/urandom", {"explain", "-"}, "/dev/urandom", {}, 2, "standard input"});

  // --- Truncated, overlapping and lying checkpoints. ----------------------------------------
  {
    vramfit::test::GgufWriter w = vramfit::test::tiny_llama_gguf();
    const std::string ok = w.header() + std::string(w.data_size(), '\0');
    cases.push_back({"checkpoints", "a valid GGUF", {"estimate", "--config", file(ok, ".gguf"), "--json"}, {}, {}, 0, "\"params\""});
    for (std::size_t cut : {0, 3, 4, 8, 16, 24, 40, 64, 100, 200, 400}) {
      if (cut >= w.header().size()) continue;
      const std::string path = dir + "/cut" + std::to_string(cut) + ".gguf";
      d.write(path.substr(dir.size() + 1), w.header().substr(0, cut));
      cases.push_back({"checkpoints", "GGUF cut at " + std::to_string(cut), {"estimate", "--config", path}, {}, {}, 2, path});
    }
    const std::string header = w.header();
    cases.push_back({"checkpoints", "GGUF without its data", {"estimate", "--config", file(header, ".gguf")}, {}, {}, 2, "--config"});
    vramfit::test::GgufWriter over = w;
    over.offset_of[1] = 0;
    cases.push_back({"checkpoints", "GGUF tensors overlapping", {"estimate", "--config", file(over.header() + std::string(w.data_size(), '\0'), ".gguf")},
                     {}, {}, 2, "--config"});
    vramfit::test::GgufWriter past = w;
    past.offset_of[1] = 1ULL << 62;
    cases.push_back({"checkpoints", "GGUF tensor offset past the file",
                     {"estimate", "--config", file(past.header() + std::string(w.data_size(), '\0'), ".gguf")}, {}, {}, 2, "--config"});
    // Counts that promise more than the file holds.
    std::string lie = header;
    lie.replace(8, 8, le64(1ULL << 40));
    cases.push_back({"checkpoints", "GGUF claims 2^40 tensors", {"estimate", "--config", file(lie, ".gguf")}, {}, {}, 2, "--config"});
    lie = header;
    lie.replace(16, 8, le64(~0ULL));
    cases.push_back({"checkpoints", "GGUF claims 2^64-1 keys", {"estimate", "--config", file(lie, ".gguf")}, {}, {}, 2, "--config"});
    lie = header;
    lie.replace(4, 4, std::string("\x63\x00\x00\x00", 4));
    cases.push_back({"checkpoints", "GGUF version 99", {"estimate", "--config", file(lie, ".gguf")}, {}, {}, 2, "--config"});
    const vramfit::test::GgufWriter bare = vramfit::test::tiny_llama_gguf(false);
    cases.push_back({"checkpoints", "GGUF without tensors", {"estimate", "--config", file(bare.header(), ".gguf")}, {}, {}, 2, "--config"});
  }
  const std::vector<std::pair<std::string, std::string>> st = {
      {"header length past the file", std::string(le64(1000)) + "{}"},
      {"header length 2^63", std::string(le64(1ULL << 63)) + "{}"},
      {"header length 0", std::string(le64(0))},
      {"5 bytes", std::string("\x02\x00\x00\x00\x00", 5)},
      {"header not JSON", safetensors("{\"a\": ")},
      {"header an array", safetensors("[]")},
      {"offsets past the data", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4)},
      {"offsets reversed", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8)},
      {"offsets and shape disagree", safetensors(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8)},
      {"offsets overlap", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                                      R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12)},
      {"unknown dtype", safetensors(R"({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", 8)},
      {"negative shape", safetensors(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8)},
      {"shape product past 2^64", safetensors(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})", 8)},
      {"offsets not numbers", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": ["0", "8"]}})", 8)},
      {"three offsets", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}})", 8)},
      {"metadata not an object", safetensors(R"({"__metadata__": 5, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8)},
      {"tensor entry a string", safetensors(R"({"a": "F32"})", 8)},
      {"no tensors", safetensors(R"({"__metadata__": {}})")},
      {"zero-size tensors only", safetensors(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})")},
      {"data past the last tensor", safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4096)},
  };
  for (const auto& [what, bytes] : st) {
    const std::string name = "st-" + std::to_string(file_no++);
    d.write(name + "/config.json", smollm);
    d.write(name + "/model.safetensors", bytes);
    cases.push_back({"checkpoints", "safetensors " + what, {"estimate", "--config", dir + "/" + name}, {}, {}, 2, "safetensors"});
  }
  {
    d.write("idx/config.json", smollm);
    d.write("idx/model.safetensors.index.json", R"({"weight_map": {"a": "../../../etc/passwd"}})");
    cases.push_back({"checkpoints", "safetensors index pointing outside", {"estimate", "--config", dir + "/idx"}, {}, {}, 2, "is not a file name in the model's folder"});
    d.write("idx2/config.json", smollm);
    d.write("idx2/model.safetensors.index.json", R"({"weight_map": {"a": "missing.safetensors"}})");
    cases.push_back({"checkpoints", "safetensors index naming a missing shard", {"estimate", "--config", dir + "/idx2"}, {}, {}, 2,
                     "missing.safetensors"});
  }

  // --- Unicode, NUL and other bytes. --------------------------------------------------------
  {
    const std::string text = base.dump();
    const std::string body = text.substr(1);  // without the opening brace
    cases.push_back({"unicode/NUL", "NUL after the document", {"estimate", "--config", file(text + std::string(1, '\0'))}, {}, {}, 2, "--config"});
    cases.push_back({"unicode/NUL", "NUL inside a string",
                     {"estimate", "--config", file(std::string("{\"model_type\": \"lla\0ma\", ", 25) + body)}, {}, {}, 2, "--config"});
    cases.push_back({"unicode/NUL", "escaped NUL in model_type", {"estimate", "--config", config_with("model_type", "\"llama\\u0000\"")},
                     {}, {}, 2, "model_type"});
    cases.push_back({"unicode/NUL", "byte-order mark", {"estimate", "--config", file("\xEF\xBB\xBF" + text)}, {}, {}, 0, "134,515,008"});
    cases.push_back({"unicode/NUL", "invalid UTF-8 in a key", {"estimate", "--config", file("{\"\xC3\x28\": 1, " + body)}, {}, {}, 2,
                     "--config"});
    cases.push_back({"unicode/NUL", "overlong UTF-8", {"estimate", "--config", file("{\"x\": \"\xC0\xAF\", " + body)}, {}, {}, 2,
                     "--config"});
    cases.push_back({"unicode/NUL", "lone surrogate escape", {"estimate", "--config", config_with("model_type", "\"\\ud800\"")}, {}, {}, 2,
                     "--config"});
    cases.push_back({"unicode/NUL", "Cyrillic a in model_type", {"estimate", "--config", config_with("model_type", "\"ll\xD0\xB0ma\"")}, {},
                     {}, 2, "model_type"});
    cases.push_back({"unicode/NUL", "UTF-16 config", {"estimate", "--config", file(std::string("\xFF\xFE{\0}\0", 6))}, {}, {}, 2,
                     "--config"});
    cases.push_back({"unicode/NUL", "NUL in a truth line", {"validate", file(std::string("{\"id\": \"a\0b\"}\n", 14), ".jsonl")}, {}, {}, 2, ":1:"});
    cases.push_back({"unicode/NUL", "NUL in gpus.json", {"gpus", "--data-dir", [&] {
                       d.write("nulcat/gpus.json", gpus + std::string(1, '\0'));
                       return dir + "/nulcat";
                     }()}, {}, {}, 2, "gpus.json"});
    cases.push_back({"unicode/NUL", "emoji --gpu", {"estimate", "--params", "7B", "--gpu", "\xF0\x9F\x92\xA5"}, {}, {}, 2, "--gpu"});
    cases.push_back({"unicode/NUL", "invalid UTF-8 --model", {"estimate", "--model", "\xFF\xFE"}, {}, {}, 2, "--model"});
    cases.push_back({"unicode/NUL", "right-to-left override --dtype", {"estimate", "--params", "7B", "--dtype", "\xE2\x80\xAE" "bf16"}, {}, {}, 2,
                     "--dtype"});
    // A log of binary junk holds no OOM message: explain says so (exit 2 naming the log).
    cases.push_back({"unicode/NUL", "explain a log of NULs and invalid UTF-8",
                     {"explain", file(std::string(4096, '\0') + "\xFF\xFE\xC0\xAF" + std::string(4096, '\x01'))}, {}, {}, 1, "No out-of-memory message found"});
  }

  // --- Huge lines for explain (exit 0: the message is found; or the log is refused). --------
  {
    const std::string oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                            "capacity of 79.14 GiB of which 1.00 GiB is free. ";
    std::string line;
    for (int i = 0; i < 8000; ++i) line += oom;  // 1.1 MB, one line
    cases.push_back({"huge lines", "8,000 OOM messages on one 1.1 MB line", {"explain", file(line + "\n"), "--json"}, {}, {}, 0,
                     "\"requested_bytes\""});
    std::string lines;
    for (int i = 0; i < 20000; ++i) lines += oom + "\n";
    cases.push_back({"huge lines", "20,000 OOM lines (past the 10,000 kept)", {"explain", file(lines), "--json"}, {}, {}, 0,
                     "\"requested_bytes\""});
    cases.push_back({"huge lines", "one 15 MB line of 'a'", {"explain", file(std::string(15'000'000, 'a'))}, {}, {}, 1, "No out-of-memory message found"});
    cases.push_back({"huge lines", "a 20 MB log of empty lines", {"explain", file(std::string(20'000'000, '\n'))}, {}, {}, 1,
                     "No out-of-memory message found"});
    std::string anchors;
    for (int i = 0; i < 100000; ++i) anchors += "Tried to allocate ";
    cases.push_back({"huge lines", "100,000 anchors without a size", {"explain", file(anchors + "\n")}, {}, {}, 1, "No out-of-memory message found"});
    std::string digits = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + std::string(1'000'000, '9') +
                         " GiB. GPU 0 has a total capacity of 79.14 GiB of which 1.00 GiB is free.\n";
    cases.push_back({"huge lines", "a size of a million digits", {"explain", file(digits)}, {}, {}, 0, "out of memory"});
  }

  // --- Contradictory flags. -----------------------------------------------------------------
  const std::vector<std::pair<std::vector<std::string>, std::string>> contra = {
      {{"--params", "7B", "--model", "llama-3.1-8b"}, "model"},
      {{"--params", "7B", "--config", dir + "/c0.json"}, "model"},
      {{"--params", "7B", "--gpu", "h100-sxm", "--budget", "80GiB"}, "--budget"},
      {{"--params", "7B", "--engine", "vllm", "--mode", "train"}, "--mode"},
      {{"--params", "7B", "--engine", "llama.cpp", "--tensor-parallel-size", "2"}, "--tensor-parallel-size"},
      {{"--params", "7B", "--engine", "vllm", "--gpu-layers", "10"}, "--gpu-layers"},
      {{"--params", "7B", "--lora-rank", "8"}, "--lora-rank"},
      {{"--params", "7B", "--optimizer", "sgd"}, "--optimizer"},
      {{"--params", "7B", "--mode", "train", "--kv-cache", "fp8"}, "--kv-cache"},
      {{"--params", "7B", "--headroom", "10%"}, "--headroom"},
      {{"--params", "7B", "--budget", "80GiB", "--headroom", "100%"}, "--headroom"},
      {{"--params", "7B", "--budget", "80GiB", "--headroom", "81GiB"}, "--headroom"},
      {{"--params", "7B", "--mode", "train", "--sharding", "zero3", "--offload", "bogus"}, "--offload"},
      {{"--params", "7B", "--quant", "nf4", "--dtype", "fp32"}, ""},  // fp32: the unquantized layers' dtype
      {{"--params", "7B", "--engine", "llama.cpp", "--cache-type-v", "q8_0", "--flash-attn", "off"}, "--cache-type-v"},
      {{"--params", "7B", "--engine", "llama.cpp", "--ubatch-size", "4096", "--batch-size", "512"}, ""},
      {{"--params", "7B", "--engine", "ollama", "--split-mode", "diagonal"}, "--split-mode"},
      {{"--params", "7B", "--mode", "inference", "--grad-accum", "4"}, "--grad-accum"},
      {{"--params", "7B", "--mode", "lora", "--lora-targets", "nonexistent_proj"}, "--lora-targets"},
      {{"--params", "7B", "--mode", "train", "--sharding", "tp", "--gpus", "3"}, "--gpus"},  // 32 heads over 3
  };
  for (const auto& [args, field] : contra) {
    std::vector<std::string> a = {"estimate"};
    a.insert(a.end(), args.begin(), args.end());
    std::string n;
    for (const auto& x : args) n += x + " ";
    // "" marks combinations that are legal: they must not crash (exit 0), checked below.
    cases.push_back({"contradictory flags", n, a, {}, {}, field.empty() ? 0 : 2, field.empty() ? "device total" : field});
  }
  cases.push_back({"contradictory flags", "advise --allow x --deny x",
                   {"advise", "--params", "7B", "--budget", "8GiB", "--allow", "quantize", "--deny", "quantize"}, {}, {}, 2, "--allow"});
  cases.push_back({"contradictory flags", "fit --solve seq with vllm",
                   {"fit", "--params", "7B", "--budget", "80GiB", "--engine", "vllm", "--solve", "seq"}, {}, {}, 2, "--solve"});

  // --- Every numeric CLI flag with values out of range. -------------------------------------
  const std::vector<std::pair<std::string, std::vector<std::string>>> numeric = {
      {"--params", {}}, {"--batch", {}}, {"--seq", {}}, {"--new-tokens", {"--mode", "generate"}},
      {"--lora-rank", {"--mode", "lora"}}, {"--lora-dropout", {"--mode", "lora"}}, {"--grad-accum", {"--mode", "train"}},
      {"--gpus", {}}, {"--nodes", {}}, {"--group-size", {"--quant", "gptq-int4"}}, {"--budget", {}}, {"--headroom", {}},
      {"--gpu-layers", {"--engine", "llama.cpp"}}, {"--n-cpu-moe", {"--engine", "llama.cpp"}},
      {"--ctx-size", {"--engine", "llama.cpp"}}, {"--parallel", {"--engine", "llama.cpp"}},
      {"--batch-size", {"--engine", "llama.cpp"}}, {"--ubatch-size", {"--engine", "llama.cpp"}},
      {"--tensor-split", {"--engine", "llama.cpp"}}, {"--gpu-memory-utilization", {"--engine", "vllm"}},
      {"--max-model-len", {"--engine", "vllm"}}, {"--max-num-seqs", {"--engine", "vllm"}},
      {"--max-num-batched-tokens", {"--engine", "vllm"}}, {"--tensor-parallel-size", {"--engine", "vllm"}},
      {"--pipeline-parallel-size", {"--engine", "vllm"}}, {"--block-size", {"--engine", "vllm"}},
      {"--kv-cache-memory-bytes", {"--engine", "vllm"}},
  };
  for (const auto& [flag, extra] : numeric) {
    for (std::string v : {"-1", "nan", "inf", "1e400", "abc", "", "0x10"}) {
      // vLLM reads --max-model-len -1 as auto (its auto-fit, from 0.12): -2 is the negative one.
      if (flag == "--max-model-len" && v == "-1") v = "-2";
      std::vector<std::string> a = {"estimate"};
      if (flag != "--params") a.insert(a.end(), {"--params", "7B"});
      a.insert(a.end(), extra.begin(), extra.end());
      if (flag != "--budget") a.insert(a.end(), {"--budget", "80GiB"});
      a.insert(a.end(), {flag, v});
      cases.push_back({"CLI flag out of range", flag + " '" + v + "'", a, {}, {}, 2, flag});
    }
  }
  for (const auto& [flag, v] : std::vector<std::pair<std::string, std::string>>{
           {"--tensor-parallel-size", "9223372036854775807"}, {"--pipeline-parallel-size", "100000"},
           {"--gpus", "9223372036854775807"}, {"--nodes", "100000"}, {"--batch", "18446744073709551615"},
           {"--seq", "18446744073709551615"}, {"--lora-rank", "18446744073709551615"}, {"--budget", "99999999999EiB"},
           {"--ctx-size", "18446744073709551615"}, {"--max-model-len", "18446744073709551615"},
           {"--gpu-memory-utilization", "1.5"}, {"--lora-dropout", "1"}}) {
    std::vector<std::string> a = {"estimate", "--params", "7B", "--budget", "80GiB", flag, v};
    if (flag == "--budget") a = {"estimate", "--params", "7B", flag, v};
    if (flag.find("parallel-size") != std::string::npos || flag == "--max-model-len" || flag == "--gpu-memory-utilization")
      a.insert(a.end(), {"--engine", "vllm"});
    if (flag == "--ctx-size") a.insert(a.end(), {"--engine", "llama.cpp"});
    if (flag == "--lora-rank" || flag == "--lora-dropout") a.insert(a.end(), {"--mode", "lora"});
    cases.push_back({"CLI flag out of range", flag + " " + v, a, {}, {}, 2, flag});
  }
  cases.push_back({"CLI flag out of range", "--data-dir ''", {"gpus", "--data-dir", ""}, {}, {}, 2, "--data-dir"});
  cases.push_back({"CLI flag out of range", "a 100 KB --dtype", {"estimate", "--params", "7B", "--dtype", std::string(100'000, 'x')}, {},
                   {}, 2, "--dtype"});
  cases.push_back({"CLI flag out of range", "a 100 KB --quant", {"estimate", "--params", "7B", "--quant", std::string(100'000, 'x')}, {},
                   {}, 2, "--quant"});

  // --- Run them all. ------------------------------------------------------------------------
  std::map<std::string, int> per_class;
  std::map<std::string, int> failed_per_class;
  for (const Case& c : cases) {
    const Outcome o = run_limited(c.args, c.stdin_path, c.env);
    ++per_class[c.cls];
    // "--config" is named by the flag or by the file it was given (messages about a file's
    // content start with its path).
    std::string named_file;
    for (std::size_t i = 0; i + 1 < c.args.size(); ++i)
      if (c.args[i] == "--config") named_file = c.args[i + 1];
    const bool names_it = o.err.find(c.names) != std::string::npos ||
                          (c.names == "--config" && !named_file.empty() && o.err.find(named_file) != std::string::npos);
    const bool ok = !o.timed_out && o.signal == 0 && o.code == c.code &&
                    static_cast<std::uint64_t>(o.max_rss_kib) * 1024 < vramfit::test::limited::kMemory &&
                    (c.code == 2 ? o.err.rfind("vramfit: error: ", 0) == 0 && o.err.size() < 4096 &&
                                       names_it
                                 : o.out.find(c.names) != std::string::npos);
    if (!ok) ++failed_per_class[c.cls];
    INFO("[" << c.cls << "] " << c.name.substr(0, 200) << ": exit " << o.code << ", signal " << o.signal << ", "
             << o.wall << " s, " << o.max_rss_kib << " KiB; expected exit " << c.code << " naming '" << c.names
             << "'; stderr: " << o.err.substr(0, 400) << "; stdout: " << o.out.substr(0, 200));
    CHECK(ok);
  }
  std::string summary;
  int total = 0;
  for (const auto& [cls, n] : per_class) {
    summary += cls + ": " + std::to_string(n) + " (" + std::to_string(failed_per_class[cls]) + " failed)\n";
    total += n;
  }
  WARN("adversarial inputs by class:\n" << summary << "total: " << total);
  CHECK(total >= 200);
}
