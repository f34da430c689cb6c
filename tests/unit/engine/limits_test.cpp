// The engine at the edges of what it accepts (issue #7): the parser's largest parameter count,
// a 10^9-token context, a batch of 10^6, 10^9 new tokens, widths of 2^40. Each gives either a
// finite answer that a hand computation checks, or a refusal (exit 2) that names the flag;
// never a product wrapped modulo 2^64 into a small, plausible number.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../cli/cli_helper.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"

using vramfit::test::CliResult;
using vramfit::test::run_cli;
using vramfit::test::TempDir;

namespace {

/// `vramfit estimate args... --json` on the built-in catalog; the parsed report (exit 0).
nlohmann::json estimate_json(std::vector<std::string> args) {
  args.insert(args.begin(), "estimate");
  args.emplace_back("--json");
  const CliResult r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.err.empty());
  return nlohmann::json::parse(r.out);
}

/// The bytes of one component of a JSON report.
std::uint64_t part(const nlohmann::json& j, const std::string& id) {
  for (const auto& c : j["components"])
    if (c["id"] == id) return c["bytes"].get<std::uint64_t>();
  FAIL("no component " << id);
  return 0;
}

/// The report's own invariant: the parts in the peak add up to it, and everything to the total.
void check_sums(const nlohmann::json& j) {
  std::uint64_t peak = 0, all = 0;
  for (const auto& c : j["components"]) {
    const auto b = c["bytes"].get<std::uint64_t>();
    REQUIRE(all + b >= all);  // no wrap in the test's own sum
    all += b;
    if (c["in_peak_allocated"].get<bool>()) peak += b;
  }
  CHECK(peak == j["peak_allocated_bytes"].get<std::uint64_t>());
  CHECK(all == j["device_total_bytes"].get<std::uint64_t>());
}

/// Checks a refusal: exit 2, nothing on stdout, exactly `err` on stderr.
void require_refusal(const std::vector<std::string>& args, const std::string& err) {
  const CliResult r = run_cli(args);
  INFO(r.out);
  CHECK(r.err == err);
  CHECK(r.out.empty());
  CHECK(r.code == 2);
}

// Llama-3.3-70B (the built-in preset): 80 layers, 8 KV heads of 128, vocab 128256.
constexpr std::uint64_t kVocab70 = 128256;
constexpr std::uint64_t kKvPerToken70 = 2ULL * 8 * 128 * 2 * 80;  // k and v, bf16, every layer

}  // namespace

TEST_CASE("params 1e15, the parser's limit, in every mode", "[limits]") {
  constexpr std::uint64_t kParams = 1'000'000'000'000'000ULL;
  // The assumed shape (Llama-3.1-405B's, capped at 504 layers) has head_dim 128: the rotary
  // buffers are 2 x 64 fp32 values.
  constexpr std::uint64_t kBuffers = 2 * 64 * 4;
  for (const char* mode : {"inference", "generate", "train", "lora"}) {
    INFO(mode);
    const auto j = estimate_json({"--params", "1e15", "--mode", mode});
    CHECK(j["model"]["params"] == kParams);
    CHECK(part(j, "weights") == kParams * 2 + kBuffers);  // bf16
    check_sums(j);
  }
  const auto train = estimate_json({"--params", "1e15", "--mode", "train"});
  CHECK(part(train, "gradients") == kParams * 2);
  CHECK(part(train, "optimizer_state") == kParams * 2 * 2);  // AdamW: two moments in bf16
  CHECK(part(train, "optimizer_step") == kParams * 2);       // foreach AdamW: one temporary
  CHECK(train["peak_allocated_bytes"].get<std::uint64_t>() > kParams * 10);

  // QLoRA stores the decoder's linears in 4 bits: at least half a byte per parameter.
  const auto qlora = estimate_json({"--params", "1e15", "--mode", "qlora"});
  CHECK(part(qlora, "weights") >= kParams / 2);
  CHECK(part(qlora, "weights") <= kParams * 2 + kBuffers);
  check_sums(qlora);

  // One more is refused, naming the flag.
  require_refusal({"estimate", "--params", "1000000000000001"},
                  "vramfit: error: --params: too large: 1000000000000001 parameters (the largest models have "
                  "about 2e12) (check the exponent and the suffix: 7e9 and 7B are 7 billion)\n");
}

TEST_CASE("a 10^9-token context with the 70B preset", "[limits]") {
  constexpr std::uint64_t kSeq = 1'000'000'000ULL;
  // Inference: the logits of every position, bf16.
  const auto inference = estimate_json({"--model", "llama-3.3-70b", "--seq", "1000000000"});
  CHECK(inference["peak_phase"] == "forward_logits");
  CHECK(part(inference, "logits") == kSeq * kVocab70 * 2);
  check_sums(inference);

  // Generation: the prompt's KV cache at the prefill.
  const auto generate = estimate_json(
      {"--model", "llama-3.3-70b", "--mode", "generate", "--seq", "1000000000", "--new-tokens", "1"});
  CHECK(part(generate, "kv_cache") == kSeq * kKvPerToken70);
  check_sums(generate);

  // Training: three fp32 logits-sized tensors at the start of backward.
  const auto train = estimate_json({"--model", "llama-3.3-70b", "--mode", "train", "--seq", "1000000000"});
  CHECK(train["peak_phase"] == "backward_start");
  CHECK(part(train, "logits") == 3 * kSeq * kVocab70 * 4);
  check_sums(train);

  // Eager attention materialises seq x seq scores: beyond 64 bits, refused with the flag.
  require_refusal(
      {"estimate", "--model", "llama-3.3-70b", "--seq", "1000000000", "--attention", "eager"},
      "vramfit: error: --seq: the memory of batch 1 x 1000000000 tokens overflows 64 bits (over 16 "
      "EiB) (give smaller values: no GPU job comes near 16 EiB; eager attention's scores grow with "
      "seq x seq)\n");
}

TEST_CASE("a batch of 10^6", "[limits]") {
  constexpr std::uint64_t kTokens = 1'000'000ULL * 2048;
  const auto inference = estimate_json({"--model", "llama-3.3-70b", "--batch", "1000000"});
  CHECK(part(inference, "logits") == kTokens * kVocab70 * 2);
  check_sums(inference);
  const auto lora = estimate_json({"--model", "llama-3.3-70b", "--mode", "lora", "--batch", "1000000"});
  CHECK(part(lora, "logits") == 3 * kTokens * kVocab70 * 4);
  check_sums(lora);
  const auto generate =
      estimate_json({"--model", "llama-3.3-70b", "--mode", "generate", "--batch", "1000000"});
  // The prefill is the peak (one layer's MLP intermediates over 2 x 10^9 tokens outweigh 256 more
  // positions of cache): the prompt's 2048 positions for every sequence.
  CHECK(generate["peak_phase"] == "prefill");
  CHECK(part(generate, "kv_cache") == 1'000'000ULL * 2048 * kKvPerToken70);
  check_sums(generate);
}

TEST_CASE("10^9 new tokens", "[limits]") {
  const auto j = estimate_json(
      {"--model", "llama-3.3-70b", "--mode", "generate", "--seq", "1", "--new-tokens", "1000000000"});
  CHECK(j["peak_phase"] == "decode");
  CHECK(part(j, "kv_cache") == 1'000'000'001ULL * kKvPerToken70);
  check_sums(j);
  // The prompt and the new tokens together stay within 2^31 positions.
  require_refusal(
      {"estimate", "--model", "llama-3.3-70b", "--mode", "generate", "--seq", "2000000000", "--new-tokens",
       "1000000000"},
      "vramfit: error: --new-tokens: 2000000000 prompt + 1000000000 new tokens is beyond what vramfit "
      "models (at most 2^31 = 2147483648) (use a realistic number of new tokens)\n");
}

TEST_CASE("widths of 2^40 in a config", "[limits]") {
  TempDir dir;
  // An MLP 2^40 wide, on a narrow model: the count stays below the 10^15 parameters vramfit
  // accepts, and is exact.
  const std::string wide = dir.write("wide.json", R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 1099511627776, "num_hidden_layers": 1, "num_attention_heads": 1,
      "vocab_size": 32000})");
  constexpr std::uint64_t H = 64, I = 1ULL << 40, L = 1, V = 32000;
  // Per layer: q, k, v, o (one KV head: all hidden x hidden), gate/up/down, two RMSNorms.
  constexpr std::uint64_t kParams = 2 * V * H + H + L * (4 * H * H + 3 * H * I + 2 * H);
  const auto j = estimate_json({"--config", wide});
  CHECK(j["model"]["params"] == kParams);
  CHECK(part(j, "weights") == kParams * 2 + 2 * 32 * 4);  // bf16 + the rotary buffers
  check_sums(j);
  const auto train = estimate_json({"--config", wide, "--mode", "train"});
  CHECK(part(train, "optimizer_state") == kParams * 4);
  check_sums(train);
  // With 2^31 tokens its saved activations pass 2^64.
  require_refusal(
      {"estimate", "--config", wide, "--mode", "train", "--batch", "1048576"},
      "vramfit: error: --config, --batch: the memory of batch 1048576 x 2048 tokens overflows 64 bits "
      "(over 16 EiB) (give smaller values: no GPU job comes near 16 EiB)\n");
  // The same width on a 4096-wide, 32-layer model is 4.3e17 parameters: past the documented limit.
  const std::string wider = dir.write("wider.json", R"({"model_type": "llama", "hidden_size": 4096,
      "intermediate_size": 1099511627776, "num_hidden_layers": 32, "num_attention_heads": 32,
      "vocab_size": 32000})");
  require_refusal({"estimate", "--config", wider},
                  "vramfit: error: " + wider +
                      ": the model's sizes describe 432345566637461504 parameters, more than the 10^15 vramfit "
                      "accepts (check hidden_size, num_hidden_layers, vocab_size and the other sizes against the "
                      "model's config.json)\n");

  // A hidden size of 2^40: hidden x hidden overflows the parameter count itself.
  const std::string hidden = dir.write("hidden.json", R"({"model_type": "llama", "hidden_size": 1099511627776,
      "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})");
  require_refusal(
      {"estimate", "--config", hidden},
      "vramfit: error: " + hidden +
          ": the model's sizes are absurd: its parameter count overflows 64 bits (check hidden_size, "
          "num_hidden_layers, vocab_size and the other sizes against the model's config.json)\n");
}

TEST_CASE("the engine's own products are checked", "[limits]") {
  // Shapes no config reader would pass (2^33 heads of 2^32): the attention width 2^65 used to
  // wrap to 0 and the activations came out small. Now the engine refuses.
  vramfit::spec::ModelSpec m = vramfit::spec::from_param_count(7'000'000'000ULL);
  m.num_heads = 1ULL << 33;
  m.num_kv_heads = 1ULL << 33;
  m.head_dim = 1ULL << 32;
  vramfit::spec::Workload w;
  w.mode = vramfit::spec::Mode::train;
  w.batch = 1;
  w.seq = 16;
  CHECK_THROWS_AS(vramfit::engine::estimate(m, w), vramfit::InputError);
  w.mode = vramfit::spec::Mode::inference;
  w.attention = vramfit::spec::Attention::eager;
  CHECK_THROWS_AS(vramfit::engine::estimate(m, w), vramfit::InputError);

  // An MoE width whose top-k product overflows.
  vramfit::spec::ModelSpec moe = vramfit::spec::from_param_count(7'000'000'000ULL);
  moe.layers[0].moe = true;
  moe.moe.num_experts = 8;
  moe.moe.experts_per_token = 1ULL << 32;
  moe.moe.expert_intermediate = 1ULL << 33;
  w.attention = vramfit::spec::Attention::sdpa;
  CHECK_THROWS_AS(vramfit::engine::estimate(moe, w), vramfit::InputError);
}
