// Bad input through the real command line (issue #7): every case exits 2, prints nothing on
// stdout, says on stderr which flag or field is wrong and how to fix it (the exact text), and
// writes nothing: neither in the folder its files live in nor in the current directory.
//
// Each case gets a fresh folder (TempDir) for its files. What is *not* an error is said where
// it comes up and not counted: unknown keys in config.json, gpus.json and truth files are
// ignored by design (Hugging Face configs carry dozens of keys vramfit does not use), and a
// log without an OOM message (binary garbage, an empty file) is exit 1 for `explain`, not 2.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_helper.hpp"

using vramfit::test::CliResult;
using vramfit::test::fixture_dir;
using vramfit::test::require_usage_error;
using vramfit::test::run_cli;
using vramfit::test::TempDir;

namespace fs = std::filesystem;

namespace {

/// Everything under `dir` (recursively when asked): path, kind, size and modification time,
/// so that a file created, removed, grown or rewritten shows as a difference.
std::set<std::string> listing(const fs::path& dir, bool recursive) {
  std::set<std::string> out;
  std::error_code ec;
  const auto add = [&](const fs::directory_entry& e) {
    std::string row = e.path().lexically_relative(dir).string();
    if (e.is_directory(ec)) {
      row += "/";
    } else if (e.is_regular_file(ec)) {
      row += " " + std::to_string(e.file_size(ec)) + " " +
             std::to_string(e.last_write_time(ec).time_since_epoch().count());
    }
    out.insert(row);
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir, ec)) add(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) add(e);
  }
  return out;
}

/// One bad-input case: a fresh folder for its files, and the checks above.
class Case {
 public:
  /// Writes `text` to `name` in the case's folder; returns the full path.
  std::string write(const std::string& name, const std::string& text) const { return dir_.write(name, text); }
  /// The full path of `name` in the case's folder (which need not exist).
  [[nodiscard]] std::string path(const std::string& name = {}) const {
    return name.empty() ? dir_.str() : (dir_.path() / name).string();
  }

  /// Runs `vramfit args...` and checks exit 2, an empty stdout, exactly `err` on stderr, and
  /// that neither the case's folder nor the current directory changed.
  void expect(const std::vector<std::string>& args, const std::string& err,
              const std::string& stdin_text = {}) {
    check(args, err, [&] { return run_cli(args, stdin_text); });
  }

  /// As expect(), on a thread that cannot read `file` (mode 000). Root ignores permission
  /// bits (CAP_DAC_OVERRIDE), and CI runs the tests as root, so chmod alone proves nothing
  /// there: the thread moves its file-system uid to nobody (setfsuid is per thread in Linux
  /// and drops those capabilities for that thread only). When the file is still readable
  /// (some other capability or file system), the case is skipped with a warning.
  void expect_unreadable(const std::string& file, const std::vector<std::string>& args,
                         const std::string& err) {
    fs::permissions(file, fs::perms::none);
    bool readable = false;
    check(args, err, [&] {
      CliResult r;
      std::thread t([&] {
        if (::geteuid() == 0) ::syscall(SYS_setfsuid, 65534);
        const int fd = ::open(file.c_str(), O_RDONLY);
        if (fd >= 0) {
          ::close(fd);
          readable = true;
          return;
        }
        r = run_cli(args);
      });
      t.join();
      return r;
    });
    if (readable) WARN("skipped: " << file << " stays readable with mode 000 here");
    fs::permissions(file, fs::perms::owner_all);  // so that TempDir can remove it
  }

 private:
  template <typename Run>
  void check(const std::vector<std::string>& args, const std::string& err, Run run) {
    const fs::path cwd = fs::current_path();
    const auto before_dir = listing(dir_.path(), true);
    const auto before_cwd = listing(cwd, false);
    const CliResult r = run();
    std::string shown;
    for (const auto& a : args) shown += " " + a;
    INFO("vramfit" << shown);
    if (r.code == -1) return;  // expect_unreadable's skip
    require_usage_error(r, err);
    CHECK(listing(dir_.path(), true) == before_dir);
    CHECK(listing(cwd, false) == before_cwd);
  }

  TempDir dir_;
};

/// `vramfit COMMAND --data-dir <fixture> args...`: the small, stable catalog of the CLI tests.
std::vector<std::string> cmd(const std::string& command, std::vector<std::string> args) {
  args.insert(args.begin(), {command, "--data-dir", fixture_dir()});
  return args;
}
std::vector<std::string> est(std::vector<std::string> args) { return cmd("estimate", std::move(args)); }

/// A Llama config with `extra` keys appended (they override nothing: JSON keys must be unique,
/// so each case leaves out what it replaces).
std::string llama(const std::string& fields) { return "{\"model_type\": \"llama\", " + fields + "}"; }
const std::string kDims = R"("hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,)";
const std::string kLayersVocab = R"("num_hidden_layers": 32, "vocab_size": 32000)";

std::string smollm_config() { return vramfit::test::source_file("tests/cli/data/smollm2-135m.config.json"); }

/// A safetensors file: the 8-byte little-endian header length, then `header`, then `data`
/// bytes of zeros. `declared` overrides the length the first 8 bytes claim.
std::string safetensors(const std::string& header, std::size_t data = 0,
                        std::optional<std::uint64_t> declared = std::nullopt) {
  const std::uint64_t n = declared.value_or(header.size());
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

/// Bytes that are no text in any encoding: a deterministic stand-in for a corrupted file.
std::string garbage() {
  std::string s;
  for (int i = 0; i < 64; ++i) s += static_cast<char>(0x80 + (i * 37) % 128);
  return s;
}

const std::string kErr = "vramfit: error: ";
const std::string kConfigFix = " (check the value against the model's config.json on the Hugging Face Hub)\n";
const std::string kCatalogFix = " (fix the catalog file)\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Flags: numbers that are not numbers, out of range, or contradict each other.

TEST_CASE("params: NaN, infinity, huge and fractional counts", "[bad-input]") {
  const std::string fix = " (write it like 7e9, 7B, 1.5b, 350M, 70k or 7000000000)\n";
  const std::string too_large =
      " parameters (the largest models have about 2e12) (check the exponent and the suffix: 7e9 and 7B are 7 "
      "billion)\n";
  Case().expect(est({"--params", "nan"}), kErr + "--params: 'nan' is not a parameter count" + fix);
  Case().expect(est({"--params", "inf"}), kErr + "--params: 'inf' is not a parameter count" + fix);
  Case().expect(est({"--params", "1e400"}), kErr + "--params: too large: 1e400" + too_large);
  Case().expect(est({"--params", "99999999999999999999"}),
                kErr + "--params: too large: 99999999999999999999" + too_large);
  // One more than the documented limit (1e15).
  Case().expect(est({"--params", "1000000000000001"}),
                kErr + "--params: too large: 1000000000000001" + too_large);
  Case().expect(est({"--params", "0.5"}),
                kErr +
                    "--params: '0.5' is not a whole number of parameters (give a whole "
                    "count, like 7500000000 or 7.5B)\n");
  Case().expect(est({"--params", "16GB"}),
                kErr +
                    "--params: '16GB' is a memory size, not a parameter count (give the "
                    "number of parameters, like 7B or 7e9; memory sizes go in --budget)\n");
}

TEST_CASE("budget: NaN, infinity, beyond 64 bits, negative, ambiguous, rounds to zero", "[bad-input]") {
  const std::string fix = " (write it like 24GiB, 80GB, 81920MiB, 1.5TB or a number of bytes)\n";
  Case().expect(est({"--params", "7B", "--budget", "inf"}),
                kErr + "--budget: 'inf' is not a memory size" + fix);
  Case().expect(est({"--params", "7B", "--budget", "nan"}),
                kErr + "--budget: 'nan' is not a memory size" + fix);
  Case().expect(
      est({"--params", "7B", "--budget", "1e400"}),
      kErr + "--budget: too large: 1e400 does not fit in 64 bits (16 EiB) (check the number and the unit)\n");
  Case().expect(
      est({"--params", "7B", "--budget", "18446744073709551616"}),
      kErr +
          "--budget: too large: 18446744073709551616 does not fit in 64 bits (16 EiB) (check the number "
          "and the unit)\n");
  Case().expect(est({"--params", "7B", "--budget", "-1GiB"}),
                kErr + "--budget: '-1GiB' is negative: a size must be positive" + fix);
  Case().expect(est({"--params", "7B", "--budget", "24G"}),
                kErr + "--budget: '24G' is ambiguous (write 24GB (powers of 10) or 24GiB (powers of 2))\n");
  Case().expect(est({"--params", "7B", "--budget", "0.4"}),
                kErr + "--budget: '0.4' is zero bytes: a size must be positive" + fix);
}

TEST_CASE("whole numbers: beyond 64 bits, zero, negative, beyond the model's limits", "[bad-input]") {
  Case().expect(
      est({"--params", "7B", "--batch", "18446744073709551616"}),
      kErr + "--batch: 18446744073709551616 is too large (give a positive whole number, e.g. --batch 8)\n");
  Case().expect(
      est({"--params", "7B", "--seq", "1e-3"}),
      kErr + "--seq: '1e-3' is not a whole number (give a positive whole number, e.g. --seq 4096)\n");
  Case().expect(
      est({"--params", "7B", "--seq", "2.5e0"}),
      kErr + "--seq: '2.5e0' is not a whole number (give a positive whole number, e.g. --seq 4096)\n");
  // An exact exponent form is a whole number: 1e12 reaches the model's limit, not "not whole".
  Case().expect(
      est({"--params", "7B", "--seq", "1e12"}),
      kErr +
          "--seq: 1000000000000 tokens is beyond what vramfit models (at most 2^31 = 2147483648) (use a "
          "realistic sequence length (the longest contexts are about 10^7 tokens))\n");
  Case().expect(
      est({"--params", "7B", "--seq", "1e-400"}),
      kErr + "--seq: '1e-400' is not a whole number (give a positive whole number, e.g. --seq 4096)\n");
  Case().expect(est({"--params", "7B", "--batch", "1e400"}),
                kErr + "--batch: 1e400 is too large (give a positive whole number, e.g. --batch 8)\n");
  Case().expect(est({"--params", "7B", "--batch", "1e30"}),
                kErr + "--batch: 1e30 is too large (give a positive whole number, e.g. --batch 8)\n");
  Case().expect(est({"--params", "7B", "--batch", "0e5"}),
                kErr + "--batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n");
  Case().expect(
      est({"--params", "7B", "--seq", "2147483649"}),
      kErr +
          "--seq: 2147483649 tokens is beyond what vramfit models (at most 2^31 = 2147483648) (use a "
          "realistic sequence length (the longest contexts are about 10^7 tokens))\n");
  Case().expect(
      est({"--params", "7B", "--mode", "generate", "--new-tokens", "0"}),
      kErr + "--new-tokens: 0 is not allowed (give a positive whole number, e.g. --new-tokens 512)\n");
  Case().expect(
      est({"--params", "7B", "--mode", "generate", "--seq", "2147483648", "--new-tokens", "1"}),
      kErr +
          "--new-tokens: 2147483648 prompt + 1 new tokens is beyond what vramfit models (at most 2^31 = "
          "2147483648) (use a realistic number of new tokens)\n");
  Case().expect(est({"--params", "7B", "--mode", "train", "--grad-accum", "-4"}),
                kErr + "--grad-accum: -4 is negative (give a positive whole number, e.g. --grad-accum 4)\n");
  Case().expect(est({"--params", "7B", "--gpus", "0"}),
                kErr + "--gpus: 0 is not allowed (give a positive whole number, e.g. --gpus 8)\n");
  Case().expect(
      est({"--params", "7B", "--gpus", "5000", "--sharding", "ddp"}),
      kErr +
          "--gpus: 5000 GPUs is more than vramfit models (at most 4096) (estimate per GPU: the memory of "
          "one GPU does not depend on thousands more)\n");
  Case().expect(est({"--params", "7B", "--mode", "lora", "--lora-rank", "0"}),
                kErr + "--lora-rank: 0 is not allowed (give a positive whole number, e.g. --lora-rank 16)\n");
  Case().expect(
      est({"--params", "7B", "--mode", "lora", "--lora-rank", "100000"}),
      kErr +
          "--lora-rank: 100000 is more than the model's hidden size 4096 (a low-rank adapter needs a rank "
          "below the hidden size: use 8, 16 or 64)\n");
}

TEST_CASE("a product beyond 64 bits names the flags, not 'size'", "[bad-input]") {
  // Each number alone is accepted; their product is not. Was "size: the size overflows 64 bits".
  Case().expect(
      est({"--params", "7B", "--batch", "18446744073709551615"}),
      kErr +
          "--params, --batch: the memory of batch 18446744073709551615 x 2048 tokens overflows 64 bits "
          "(over 16 EiB) (give smaller values: no GPU job comes near 16 EiB)\n");
  // Eager attention's seq x seq scores: the built-in 70B preset at a 10^9-token context.
  Case().expect(
      {"estimate", "--model", "llama-3.3-70b", "--attention", "eager", "--seq", "1000000000"},
      kErr +
          "--seq: the memory of batch 1 x 1000000000 tokens overflows 64 bits (over 16 EiB) (give "
          "smaller values: no GPU job comes near 16 EiB; eager attention's scores grow with seq x seq)\n");
}

TEST_CASE("probabilities and margins: NaN, infinity, negative, 100%", "[bad-input]") {
  const std::string dropout = " is not a probability in [0, 1) (e.g. --lora-dropout 0.05)\n";
  Case().expect(est({"--params", "7B", "--mode", "lora", "--lora-dropout", "nan"}),
                kErr + "--lora-dropout: 'nan'" + dropout);
  Case().expect(est({"--params", "7B", "--mode", "lora", "--lora-dropout", "inf"}),
                kErr + "--lora-dropout: 'inf'" + dropout);
  Case().expect(est({"--params", "7B", "--mode", "lora", "--lora-dropout", "-0.1"}),
                kErr + "--lora-dropout: '-0.1'" + dropout);
  const std::string margin = " (give a percentage of the budget like 10% or a size like 2GiB)\n";
  Case().expect(est({"--params", "7B", "--budget", "24GiB", "--headroom", "nan%"}),
                kErr + "--headroom: 'nan%' is not a finite number" + margin);
  Case().expect(est({"--params", "7B", "--budget", "24GiB", "--headroom", "inf"}),
                kErr + "--headroom: 'inf' is not a finite number" + margin);
  Case().expect(est({"--params", "7B", "--budget", "24GiB", "--headroom", "-5%"}),
                kErr + "--headroom: '-5%' is negative" + margin);
  Case().expect(est({"--params", "7B", "--budget", "24GiB", "--headroom", "100%"}),
                kErr + "--headroom: 100% is not below 100% of the budget" + margin);
  Case().expect(
      est({"--params", "7B", "--budget", "24GiB", "--headroom", "30GiB"}),
      kErr +
          "--headroom: a margin of 32212254720 bytes leaves nothing of the budget (25769803776 bytes) "
          "(use a smaller margin or a larger budget)\n");
}

TEST_CASE("contradictory workloads", "[bad-input]") {
  Case().expect(
      est({"--params", "7B", "--mode", "qlora", "--dtype", "bf16"}),
      kErr +
          "--dtype: qlora needs 4-bit weights, got bf16 (use --dtype nf4 (the default for --mode qlora) "
          "or int4, or --mode lora)\n");
  Case().expect(
      est({"--params", "7B", "--mode", "train", "--dtype", "int4"}),
      kErr + "--dtype: full fine-tuning of quantized weights is not supported (use --mode qlora or lora)\n");
  Case().expect(est({"--params", "7B", "--sharding", "fsdp"}),
                kErr +
                    "--gpus: --sharding fsdp needs at least 2 GPUs, got 1 (set --gpus 2 or more, or drop "
                    "--sharding)\n");
  Case().expect(est({"--params", "7B", "--gpus", "2"}),
                kErr +
                    "--sharding: 2 GPUs but no sharding strategy (say how the model is split: --sharding "
                    "ddp|zero1|zero2|zero3|fsdp|fsdp-grad-op|tp|pp|device-map)\n");
  Case().expect(
      est({"--model", "smollm2-135m", "--mode", "lora", "--lora-targets", "q_prj"}),
      kErr +
          "--lora-targets: 'q_prj' is not a linear module of this model (did you mean 'q_proj'? modules: "
          "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)\n");
}

// ---------------------------------------------------------------------------------------------
// config.json: malformed, wrong types, absurd and contradictory shapes.

TEST_CASE("config files: truncated, empty, binary, not an object", "[bad-input]") {
  {
    Case c;
    const auto f = c.write("config.json", R"({"model_type": "llama", "hidden_size": 40)");
    c.expect(est({"--config", f}),
             kErr + f +
                 ": not valid JSON: parse error at line 1, column 42: syntax error while "
                 "parsing object - unexpected end of input; expected '}' (check the file is "
                 "a complete config.json)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", "");
    c.expect(
        est({"--config", c.path()}),
        kErr + f +
            ": the file is empty (pass the model's config.json (download it from the model's Hugging Face "
            "repo))\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", " \n\t\n");
    c.expect(est({"--config", f}),
             kErr + f +
                 ": the file is empty (pass the model's config.json (download it from the "
                 "model's Hugging Face repo))\n");
  }
  {
    Case c;
    // Was printed raw: the parser quotes the byte it stopped at, and these are not text.
    const auto f = c.write("config.json", garbage());
    c.expect(est({"--config", c.path()}),
             kErr + f +
                 ": not valid JSON: parse error at line 1, column 1: syntax error while "
                 "parsing value - invalid literal; last read: '\\x80' (check the file "
                 "is a complete config.json)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", "[4096, 32]");
    c.expect(est({"--config", f}), kErr + f +
                                       ": expected a JSON object ({...}), got an array (pass the model's "
                                       "config.json, which holds one JSON object)\n");
  }
}

TEST_CASE("config files: numbers beyond double and 64 bits", "[bad-input]") {
  {
    Case c;
    const auto f = c.write("config.json", llama(R"("hidden_size": 1e999, "intermediate_size": 11008,
        "num_attention_heads": 32, )" + kLayersVocab));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": not valid JSON: number overflow parsing '1e999' (check the file is a "
                 "complete config.json)\n");
  }
  {
    // Read by the JSON parser as a double, and refused as no integer.
    Case c;
    const auto f = c.write("config.json", llama(kDims + R"("num_hidden_layers": 99999999999999999999,
        "vocab_size": 32000)"));
    c.expect(est({"--config", f}),
             kErr + f + ": num_hidden_layers: expected a positive integer, got 1e+20" + kConfigFix);
  }
  {
    // One more than the largest width vramfit takes (2^40).
    Case c;
    const auto f = c.write("config.json", llama(R"("hidden_size": 1099511627777, "intermediate_size": 11008,
        "num_attention_heads": 32, )" + kLayersVocab));
    c.expect(est({"--config", f}),
             kErr + f + ": hidden_size: 1099511627777 is absurdly large (over 2^40)" + kConfigFix);
  }
  {
    // 2^40 itself: accepted alone, but hidden x hidden overflows the parameter count.
    Case c;
    const auto f = c.write("config.json", llama(R"("hidden_size": 1099511627776, "intermediate_size": 11008,
        "num_attention_heads": 32, )" + kLayersVocab));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": the model's sizes are absurd: its parameter count overflows 64 bits (check hidden_size, "
                 "num_hidden_layers, vocab_size and the other sizes against the model's config.json)\n");
  }
}

TEST_CASE("config files: wrong JSON types", "[bad-input]") {
  // Each value of num_hidden_layers is its own case; a string is told to lose its quotes.
  for (const std::string value : {R"("32")", "true", "[32]", "null", "-32", "32.5", "0"}) {
    Case c;
    const auto f = c.write("config.json",
                           llama(kDims + R"("num_hidden_layers": )" + value + R"(, "vocab_size": 32000)"));
    const std::string fix = value == R"("32")" ? " (write the number without quotes)\n" : kConfigFix;
    c.expect(est({"--config", f}),
             kErr + f + ": num_hidden_layers: expected a positive integer, got " + value + fix);
  }
  {
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab + R"(, "tie_word_embeddings": "yes")"));
    c.expect(est({"--config", f}), kErr + f +
                                       ": tie_word_embeddings: expected true or false, got \"yes\" (write "
                                       "true or false without quotes)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", R"({"model_type": 7, )" + kDims + kLayersVocab + "}");
    c.expect(est({"--config", f}), kErr + f + ": model_type: expected a string, got 7" + kConfigFix);
  }
  {
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab + R"(, "hidden_act": 5)"));
    c.expect(est({"--config", f}), kErr + f + ": hidden_act: expected a string, got 5" + kConfigFix);
  }
  {
    // Was read only when a number, and a negative factor became an unsigned rotary width.
    Case c;
    const auto f =
        c.write("config.json", llama(kDims + kLayersVocab + R"(, "rope_parameters": {"rope_type": "default",
        "partial_rotary_factor": -3})"));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": rope_parameters.partial_rotary_factor: expected a non-negative number, got "
                 "-3" +
                 kConfigFix);
  }
  {
    // Was ignored silently (only numbers were read).
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab +
                                                R"(, "rope_parameters": {"partial_rotary_factor": "half"})"));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": rope_parameters.partial_rotary_factor: expected a non-negative number, got "
                 "\"half\"" +
                 kConfigFix);
  }
}

TEST_CASE("config files: contradictory and missing shapes", "[bad-input]") {
  {
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab + R"(, "num_key_value_heads": 64)"));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": num_key_value_heads: 64 does not divide num_attention_heads 32 "
                 "(grouped-query attention needs a whole number of query heads per key/value "
                 "head: check both values)\n");
  }
  {
    // GPT-2 spells the width n_embd and the heads n_head: the message uses the config's names.
    Case c;
    const auto f =
        c.write("config.json", R"({"model_type": "gpt2", "n_embd": 768, "n_head": 10, "n_layer": 12,
        "vocab_size": 50257})");
    c.expect(est({"--config", f}),
             kErr + f +
                 ": n_head: 10 does not divide n_embd 768 (check both values against the "
                 "model's config.json; set head_dim if the model has one)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", llama(R"("hidden_size": 4096, "intermediate_size": 0,
        "num_attention_heads": 32, )" + kLayersVocab));
    c.expect(est({"--config", f}),
             kErr + f + ": intermediate_size: expected a positive integer, got 0" + kConfigFix);
  }
  {
    Case c;
    const auto f = c.write("config.json", llama(kDims + R"("num_hidden_layers": 32)"));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": vocab_size: missing: the model's size cannot be worked out without it (add "
                 "\"vocab_size\" as it appears in the model's config.json on the Hugging "
                 "Face Hub)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", R"({"model_type": "mixtral", )" + kDims + kLayersVocab +
                                              R"(, "num_local_experts": 8, "num_experts_per_tok": 9})");
    c.expect(est({"--config", f}),
             kErr + f +
                 ": num_experts_per_tok: 9 is more than the 8 experts (a token cannot be "
                 "routed to more experts than exist: check both values)\n");
  }
  {
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab + R"(, "partial_rotary_factor": 2)"));
    c.expect(est({"--config", f}),
             kErr + f +
                 ": partial_rotary_factor: 2 is more than 1 (the rotary share of a head is a "
                 "fraction between 0 and 1)\n");
  }
  {
    // A dropout probability over 1 (nn.Dropout refuses it) was taken as given.
    Case c;
    const auto f = c.write("config.json", llama(kDims + kLayersVocab + R"(, "attention_dropout": 1.5)"));
    c.expect(
        est({"--config", f, "--mode", "train"}),
        kErr + f +
            ": attention_dropout: 1.5 is more than 1 (a dropout probability is between 0 and 1: check the "
            "value)\n");
  }
}

// ---------------------------------------------------------------------------------------------
// Checkpoint folders: safetensors headers that lie, and files that are not what they say.

TEST_CASE("safetensors headers that lie about their length", "[bad-input]") {
  const std::string fix = " (the file is truncated or not a safetensors file: download it again)\n";
  {
    // The header says 16 bytes; the file holds 2 after the length.
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors", safetensors("{}", 0, 16));
    c.expect(est({"--config", c.path()}),
             kErr + st + ": the header says 16 bytes but the file has only 2" + fix);
  }
  {
    // A length with the top bit set: over safetensors' 100 MB limit, refused before any read.
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors", safetensors("{}", 0, 0x8000000000000002ULL));
    c.expect(est({"--config", c.path()}), kErr + st +
                                              ": header length 9223372036854775810 is over the 100 MB limit "
                                              "(the file is not a safetensors file, "
                                              "or is damaged)\n");
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors", "abc");
    c.expect(
        est({"--config", c.path()}),
        kErr + st + ": too short for a safetensors file (3 bytes; the header length alone takes 8)" + fix);
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors", "");
    c.expect(
        est({"--config", c.path()}),
        kErr + st + ": too short for a safetensors file (0 bytes; the header length alone takes 8)" + fix);
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors", safetensors("[1,2]"));
    c.expect(est({"--config", c.path()}), kErr + st + ": the header is not a JSON object" + fix);
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors",
                            safetensors(R"({"w":{"dtype":"BF16","shape":[-1,4],"data_offsets":[0,8]}})", 8));
    c.expect(est({"--config", c.path()}),
             kErr + st + ": w.shape: expected non-negative integers, got [-1,4]" + fix);
  }
  {
    // The offsets hold 8 bytes; a 4 x 4 BF16 tensor takes 32.
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write("model.safetensors",
                            safetensors(R"({"w":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,8]}})", 8));
    c.expect(est({"--config", c.path()}),
             kErr + st + ": w.data_offsets: holds 8 bytes but 16 elements of BF16 take 32" + fix);
  }
  {
    // Dimensions whose product overflows 64 bits.
    Case c;
    c.write("config.json", smollm_config());
    const auto st = c.write(
        "model.safetensors",
        safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8));
    // Its fix spoke of "parameters, batch and sequence length", which the user did not give.
    c.expect(est({"--config", c.path()}),
             kErr + st + ": w.shape: [4294967296,4294967296]: the element count overflows 64 bits" + fix);
  }
}

TEST_CASE("checkpoint folders: folders and broken indexes where files belong", "[bad-input]") {
  {
    // Was "cannot read ...: Is a directory (check the file's permissions)".
    Case c;
    c.write("config.json", smollm_config());
    fs::create_directories(c.path("model.safetensors"));
    c.expect(est({"--config", c.path()}), kErr + "--config: '" + c.path("model.safetensors") +
                                              "' is a folder, not a file (give a file)\n");
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto index = c.write("model.safetensors.index.json", R"({"weight_map": )");
    c.expect(est({"--config", c.path()}), kErr + index +
                 ": malformed JSON: parse error at line 1, column 16: syntax error while parsing value - "
                 "unexpected end of input; expected '[', '{', or a literal (download the file again)\n");
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    const auto index = c.write("model.safetensors.index.json", R"({"weight_map": ["a.safetensors"]})");
    c.expect(est({"--config", c.path()}),
             kErr + index + ": weight_map: missing or not an object (download the file again)\n");
  }
  {
    Case c;
    c.write("config.json", smollm_config());
    c.write("model.safetensors.index.json", R"({"weight_map": {"w": "model-00001-of-00001.safetensors"}})");
    fs::create_directories(c.path("model-00001-of-00001.safetensors"));
    c.expect(est({"--config", c.path()}), kErr + "--config: '" + c.path("model-00001-of-00001.safetensors") +
                                              "' is a folder, not a file (give a file)\n");
  }
}

TEST_CASE("config files that cannot be read", "[bad-input]") {
  Case c;
  const auto f = c.write("config.json", smollm_config());
  c.expect_unreadable(
      f, {"estimate", "--config", c.path()},
      kErr + "--config: cannot read '" + f + "': Permission denied (check the file's permissions)\n");
}

// ---------------------------------------------------------------------------------------------
// Catalog folders (--data-dir): gpus.json and models/*.json.

TEST_CASE("catalog folders: malformed, empty, binary, beyond double, a folder", "[bad-input]") {
  const std::string fix = " (fix the catalog file)\n";
  {
    Case c;
    c.write("gpus.json", R"({"gpus": [)");
    c.expect(
        {"gpus", "--data-dir", c.path()},
        kErr +
            "gpus.json: malformed JSON: parse error at line 1, column 11: syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal" +
            kCatalogFix);
  }
  {
    Case c;
    c.write("gpus.json", "");
    c.expect(
        {"models", "--data-dir", c.path()},
        kErr +
            "gpus.json: malformed JSON: parse error at line 1, column 1: syntax error while parsing value - "
            "unexpected end of input; expected '[', '{', or a literal" +
            kCatalogFix);
  }
  {
    Case c;
    c.write("gpus.json", garbage());
    c.expect(
        {"gpus", "--data-dir", c.path()},
        kErr +
            "gpus.json: malformed JSON: parse error at line 1, column 1: syntax error while parsing value - "
            "invalid literal; last read: '\\x80'" +
            kCatalogFix);
  }
  {
    // Was an internal error (exit 3): nlohmann's out_of_range.406 escaped the catalog's parser.
    Case c;
    c.write("gpus.json", R"({"gpus": [{"id": "x", "name": "X", "vendor": "v", "memory_label": "1",
        "memory_bytes": 1e400, "bf16": true, "source": "s"}], "providers": []})");
    c.expect({"gpus", "--data-dir", c.path()},
             kErr + "gpus.json: malformed JSON: number overflow parsing '1e400'" + kCatalogFix);
  }
  {
    Case c;
    c.write("gpus.json", R"({"gpus": [{"id": "x", "name": "X", "vendor": "v", "memory_label": "1",
        "memory_bytes": -5, "bf16": true, "source": "s"}], "providers": []})");
    c.expect({"estimate", "--data-dir", c.path(), "--params", "7B", "--gpu", "x"},
             kErr + "gpus.json: gpus[0].memory_bytes: must be a positive integer, not -5" + kCatalogFix);
  }
  {
    Case c;
    fs::create_directories(c.path("gpus.json"));
    c.expect({"gpus", "--data-dir", c.path()},
             kErr + "--data-dir: '" + c.path("gpus.json") + "' is a folder, not a file (give a file)\n");
  }
  {
    Case c;
    const auto f = c.write("gpus.json", "{}");
    c.expect({"gpus", "--data-dir", f},
             kErr + "--data-dir: '" + f +
                 "' is not a folder (give a folder holding gpus.json and models/*.json)\n");
  }
  {
    Case c;
    c.write("gpus.json", vramfit::test::source_file("tests/cli/data/gpus.json"));
    c.write("models/m.json", R"({"id": "m")");
    c.expect({"models", "--data-dir", c.path()}, kErr +
                                                     "models/m.json: malformed JSON: parse error at line 1, "
                                                     "column 11: syntax error while parsing object "
                                                     "- unexpected end of input; expected '}'" +
                                                     kCatalogFix);
  }
  {
    // A preset whose config is wrong: named by the catalog file and the key.
    Case c;
    c.write("gpus.json", vramfit::test::source_file("tests/cli/data/gpus.json"));
    std::string preset = vramfit::test::source_file("tests/cli/data/models/smollm2-135m.json");
    preset.replace(preset.find("\"hidden_size\": 576"), 18, "\"hidden_size\": \"576\"");
    c.write("models/smollm2-135m.json", preset);
    c.expect({"estimate", "--data-dir", c.path(), "--model", "smollm2-135m"},
             kErr +
                 "models/smollm2-135m.json: config: hidden_size: expected a positive integer, got \"576\" "
                 "(write the "
                 "number without quotes)\n");
  }
  {
    Case c;
    const auto f = c.write("gpus.json", vramfit::test::source_file("tests/cli/data/gpus.json"));
    c.expect_unreadable(
        f, {"gpus", "--data-dir", c.path()},
        kErr + "--data-dir: cannot read '" + f + "': Permission denied (check the file's permissions)\n");
  }
}

// ---------------------------------------------------------------------------------------------
// The other commands: advise, fit, explain, validate, models, gpus.

TEST_CASE("advise and fit: bad flags of their own", "[bad-input]") {
  Case().expect(
      cmd("advise", {"--params", "7B", "--budget", "24GiB", "--allow", "frob"}),
      kErr +
          "--allow: unknown fix 'frob' (known fixes: reduce_batch, mixed_precision, gradient_checkpointing, "
          "quantize_8bit, quantize_4bit, inference_mode, expandable_segments, chunked_logits, "
          "selective_checkpointing, activation_offload, optimizer_in_backward, compile, shorter_sequence, quantize)\n");
  Case().expect(cmd("advise", {"--params", "7B", "--budget", "24GiB", "--provider", "nope"}),
                kErr + "--provider: unknown provider 'nope' (known providers: cloudy; 'all' searches every tier and GPU)\n");
  Case().expect(cmd("advise", {"--params", "nan", "--budget", "24GiB"}),
                kErr +
                    "--params: 'nan' is not a parameter count (write it like 7e9, 7B, 1.5b, 350M, 70k or "
                    "7000000000)\n");
  Case().expect(cmd("advise", {"--params", "7B", "--budget", "24GiB", "--frob"}),
                kErr + "The following argument was not expected: --frob (run 'vramfit advise --help')\n");
  Case().expect(cmd("fit", {"--params", "7B", "--budget", "24GiB", "--solve", "frob"}),
                kErr + "--solve: unknown dimension 'frob' (use 'batch' or 'seq')\n");
  Case().expect(
      cmd("fit", {"--params", "7B", "--budget", "inf", "--solve", "seq"}),
      kErr +
          "--budget: 'inf' is not a memory size (write it like 24GiB, 80GB, 81920MiB, 1.5TB or a number of "
          "bytes)\n");
  // Every problem at once.
  Case().expect(
      cmd("fit", {"--params", "7B", "--solve", "seq", "--batch", "-1"}),
      kErr + "--batch: -1 is negative (give a positive whole number, e.g. --batch 8)\n" + kErr +
          "budget: no budget given (give --gpu ID or --budget SIZE, e.g. --gpu rtx-4090 or --budget "
          "24GiB; 'vramfit gpus' lists the GPUs)\n");
}

TEST_CASE("explain: logs that cannot be read, and bad model flags", "[bad-input]") {
  // Not an error, so not counted: a log with no OOM message in it (binary garbage, an empty
  // file, empty standard input) is exit 1, "No out-of-memory message found".
  {
    Case c;
    const auto f = c.write("garbage.log", garbage());
    const CliResult r = run_cli({"explain", f});
    CHECK(r.code == 1);
    CHECK(r.err.empty());
  }
  {
    Case c;
    c.expect({"explain", c.path("train.log")},
             kErr + "log: '" + c.path("train.log") + "' does not exist (check the path)\n");
  }
  {
    Case c;
    c.expect({"explain", c.path()}, kErr + "log: '" + c.path() + "' is a folder, not a file (give a file)\n");
  }
  {
    Case c;
    const auto f = c.write("train.log", "CUDA out of memory. Tried to allocate 2.00 GiB.\n");
    c.expect_unreadable(
        f, {"explain", f},
        kErr + "log: cannot read '" + f + "': Permission denied (check the file's permissions)\n");
  }
  {
    Case c;
    const auto f = c.write("train.log", "");
    c.expect({"explain", f, "--mode", "train"},
             kErr +
                 "model: no model given (give exactly one of --params, --model, --config, e.g. --model "
                 "llama-3.1-8b; 'vramfit models' lists the presets)\n");
  }
  {
    Case c;
    const auto f = c.write("train.log", "");
    // explain compares with the card of the message: it takes no budget.
    c.expect(
        {"explain", f, "--params", "7B", "--gpu", "h100-80gb"},
        kErr + "The following arguments were not expected: h100-80gb --gpu (run 'vramfit explain --help')\n");
  }
  Case().expect({"explain", "-", "--params", "7B", "--batch", "0"},
                kErr + "--batch: 0 is not allowed (give a positive whole number, e.g. --batch 8)\n",
                "garbage\n");
}

TEST_CASE("validate: truth files that are missing, empty, malformed or name missing configs", "[bad-input]") {
  const std::string line =
      R"({"id": "c1", "model": "m", "config": "models/m.json", "mode": "forward", "weights_dtype": "bf16",
 "autocast": null, "optimizer": null, "batch": 8, "seq": 2048, "new_tokens": 0, "checkpointing": false,
 "attn": "sdpa", "lora": null, "params": 134515008, "peak_allocated_bytes": 1968175616,
 "peak_reserved_bytes": 2529165312, "status": "ok", "non_torch_bytes": 1317863424})";
  const auto one_line = [](std::string s) {
    for (char& ch : s)
      if (ch == '\n') ch = ' ';
    return s + "\n";
  };
  {
    Case c;
    c.expect({"validate", c.path("truth.jsonl")},
             kErr + "truth file: '" + c.path("truth.jsonl") + "' does not exist (check the path)\n");
  }
  {
    Case c;
    c.expect({"validate", c.path()},
             kErr + "truth file: '" + c.path() + "' is a folder, not a file (give a file)\n");
  }
  {
    Case c;
    const auto f = c.write("truth.jsonl", "\n\n");
    c.expect({"validate", f},
             kErr + "truth file: '" + f +
                 "' holds no cases (give a JSONL file written by measure.py: one case per line)\n");
  }
  {
    Case c;
    const auto f = c.write("truth.jsonl", R"({"id": )");
    c.expect({"validate", f},
             kErr + f +
                 ":1: not valid JSON: parse error at line 1, column 8: syntax error while parsing value - unexpected "
                 "end of input; expected '[', '{', or a literal (each line must be one JSON object, as measure.py "
                 "writes)\n");
  }
  {
    Case c;
    const auto f = c.write("truth.jsonl", "[1, 2]\n");
    c.expect({"validate", f}, kErr + f + ":1: not a JSON object (each line must be one case object)\n");
  }
  {
    Case c;
    c.write("models/m.json", vramfit::test::source_file("tests/cli/data/truth/models/smollm2-135m.json"));
    std::string bad = line;
    bad.replace(bad.find("\"forward\""), 9, "\"fwd\"");
    const auto f = c.write("truth.jsonl", one_line(bad));
    c.expect({"validate", f},
             kErr + f + ":1: mode: unknown mode 'fwd' (use forward, generate, train or lora)\n");
  }
  {
    Case c;
    const auto f = c.write("truth.jsonl", one_line(line));
    c.expect({"validate", f},
             kErr + f + ": case 'c1': config: 'models/m.json' is neither in '" + c.path() +
                 "' nor in its parent folder (keep the model configs where the truth file names "
                 "them; shared/truth keeps results/ beside models/)\n");
  }
  {
    Case c;
    const auto config = c.write("models/m.json", garbage());
    const auto f = c.write("truth.jsonl", one_line(line));
    c.expect({"validate", f},
             kErr + config +
                 ": not valid JSON: parse error at line 1, column 1: syntax error while parsing "
                 "value - invalid literal; last read: '\\x80' (check the file is a complete "
                 "config.json)\n");
  }
  {
    Case c;
    const auto f = c.write("truth.jsonl", one_line(line));
    c.expect_unreadable(
        f, {"validate", f},
        kErr + "truth file: cannot read '" + f + "': Permission denied (check the file's permissions)\n");
  }
}

TEST_CASE("models and gpus: stray arguments and flags", "[bad-input]") {
  Case().expect(cmd("models", {"extra"}),
                kErr + "The following argument was not expected: extra (run 'vramfit models --help')\n");
  Case().expect(cmd("gpus", {"--json", "--frob"}),
                kErr + "The following argument was not expected: --frob (run 'vramfit gpus --help')\n");
}

TEST_CASE("bad input: a config that never ends (/dev/zero) is refused before reading", "[bad-input]") {
  if (!std::filesystem::exists("/dev/zero")) {
    WARN("no /dev/zero here: skipped");
    return;
  }
  vramfit::test::require_usage_error(vramfit::test::estimate({"--config", "/dev/zero"}),
                      "vramfit: error: --config: '/dev/zero' is a character device, not a file (save the input to "
                      "a regular file and give that file)\n");
}

TEST_CASE("bad input: a near miss of a closed list is named with its fix", "[bad-input]") {
  using vramfit::test::estimate;
  using vramfit::test::require_usage_error;
  const std::vector<std::string> train{"--model", "smollm2-135m", "--mode", "train"};
  const std::vector<std::string> lora{"--model", "smollm2-135m", "--mode", "lora"};
  const auto with = [](std::vector<std::string> a, std::initializer_list<std::string> extra) {
    a.insert(a.end(), extra);
    return a;
  };
  require_usage_error(estimate(with(train, {"--checkpointing", "selectiv"})),
                      "vramfit: error: --checkpointing: unknown checkpointing 'selectiv' (did you mean 'selective'? "
                      "give full, selective or every-N (N a whole number >= 1), e.g. --checkpointing every-2)\n");
  require_usage_error(estimate(with(train, {"--checkpointing", "xyz"})),
                      "vramfit: error: --checkpointing: unknown checkpointing 'xyz' (give full, selective or every-N "
                      "(N a whole number >= 1), e.g. --checkpointing every-2)\n");
  require_usage_error(estimate(with(train, {"--compile", "layer"})),
                      "vramfit: error: --compile: unknown compile 'layer' (did you mean 'layers'? give all (the layers "
                      "and the loss) or layers (the decoder layers only))\n");
  require_usage_error(estimate(with(lora, {"--lora-kernels", "unslot"})),
                      "vramfit: error: --lora-kernels: unknown LoRA kernels 'unslot' (did you mean 'unsloth'?)\n");
  require_usage_error(estimate(with(lora, {"--lora-dtype", "bf61"})),
                      "vramfit: error: --lora-dtype: unknown adapter dtype 'bf61' (did you mean 'bf16'? give fp32 "
                      "(peft's default), bf16 or fp16)\n");
  require_usage_error(estimate(with(train, {"--alloc-conf", "expandable_segment:True"})),
                      "vramfit: error: --alloc-conf: unknown setting 'expandable_segment' (did you mean "
                      "'expandable_segments'? the settings are expandable_segments, max_split_size_mb, "
                      "roundup_power2_divisions, garbage_collection_threshold, backend and the pinned_* ones (PyTorch "
                      "refuses others too))\n");
}

TEST_CASE("bad input: LoRA dropout on an MoE's fused experts is refused as peft refuses it", "[bad-input]") {
  // peft 0.21 lora.ParamWrapper (all-linear over transformers 5's fused experts) raises
  // "lora.ParamWrapper does not work with lora_dropout != 0." (measured: olmoe-1b-7b, heldout-arch).
  using vramfit::test::estimate;
  const std::string olmoe = std::string(VRAMFIT_SOURCE_DIR) + "/tests/accuracy/h200/models/olmoe-1b-7b.json";
  vramfit::test::require_usage_error(
      estimate({"--config", olmoe, "--mode", "lora", "--lora-dropout", "0.05"}),
      "vramfit: error: --lora-dropout: 0.05 with all-linear on this MoE model: peft adapts its fused experts "
      "through lora.ParamWrapper, which refuses a dropout other than 0 (give --lora-dropout 0, or name the "
      "attention modules in --lora-targets (e.g. q_proj,v_proj))\n");
  CHECK(estimate({"--config", olmoe, "--mode", "lora", "--lora-dropout", "0.05", "--lora-targets",
                  "q_proj,v_proj"}).code == 0);
  CHECK(estimate({"--config", olmoe, "--mode", "lora", "--lora-dropout", "0"}).code == 0);
  CHECK(estimate({"--model", "smollm2-135m", "--mode", "lora", "--lora-dropout", "0.05"}).code == 0);
}
