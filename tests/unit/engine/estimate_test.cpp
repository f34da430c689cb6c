#include <catch2/catch.hpp>

#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/optimizers.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using engine::ComponentId;
using engine::PhaseId;

namespace {

// A small Llama: 2 layers, hidden 256, 4 heads of 64 (2 kv heads), MLP 512, vocab 32000.
spec::ModelSpec tiny() {
  return spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
      "tie_word_embeddings": false})",
                                "tiny.json");
}

std::uint64_t part(const engine::Breakdown& b, ComponentId id) {
  const auto* c = b.find(id);
  REQUIRE(c != nullptr);
  return c->bytes.value();
}

}  // namespace

TEST_CASE("tiny llama has the expected parameter count", "[engine]") {
  // embed 32000*256 + lm_head 32000*256 + final norm 256 + 2 layers of
  // (q 256*256 + k 256*128 + v 256*128 + o 256*256 + 3 * 256*512 + 2 norms of 256)
  const std::uint64_t layer = 256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 512 + 2 * 256;
  CHECK(tiny().params == 2 * 32000 * 256 + 256 + 2 * layer);
}

TEST_CASE("inference peak is weights + workspace + all-position logits + the last hidden state", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::inference;
  w.batch = 2;
  w.seq = 512;
  const auto b = engine::estimate(m, w);
  const std::uint64_t weights = m.params * 2 + m.buffer_bytes;
  CHECK(part(b, ComponentId::weights) == weights);
  CHECK(part(b, ComponentId::cublas_workspace) == engine::kCublasWorkspace.value());
  CHECK(part(b, ComponentId::logits) == 2ULL * 512 * 32000 * 2);
  CHECK(b.peak_phase == PhaseId::forward_logits);
  CHECK(b.peak_allocated.value() == weights + engine::kCublasWorkspace.value() + 2ULL * 512 * 32000 * 2 + 2ULL * 512 * 256 * 2);
  CHECK(b.device_total == b.peak_allocated + b.allocator_reserve + b.cuda_context);
}

TEST_CASE("the KV cache holds keys and values of every layer and position", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::generate;
  w.batch = 4;
  w.seq = 100;
  w.new_tokens = 28;
  const auto b = engine::estimate(m, w);
  REQUIRE(b.phases.size() == 2);
  CHECK(b.phases[0].id == PhaseId::prefill);
  CHECK(b.phases[1].id == PhaseId::decode);
  // The last decode step: the resident weights and workspace, the cache at every position
  // (2 (k, v) * 2 layers * 2 kv heads * 64 * 2 bytes * 4 sequences * 128 positions), torch.cat's
  // copy of one layer's keys (a quarter of it: 2 layers x k and v), and the last position's
  // logits in bf16 plus their fp32 copy (4 sequences x 32000 x (2 + 4) bytes).
  const std::uint64_t resident = m.params * 2 + m.buffer_bytes + engine::kCublasWorkspace.value();
  const std::uint64_t cache = 2ULL * 2 * 2 * 64 * 2 * 4 * 128;
  CHECK(b.phases[1].allocated.value() == resident + cache + cache / 4 + 4ULL * 32000 * 6);
  // The prefill holds the prompt's 100 positions of cache.
  CHECK(b.phases[0].allocated.value() > resident + 2ULL * 2 * 2 * 64 * 2 * 4 * 100 + 4ULL * 32000 * 6);

  // A long generation: the cache sets the peak, at the last decode step.
  w.new_tokens = 8092;
  const auto g = engine::estimate(m, w);
  CHECK(g.peak_phase == PhaseId::decode);
  const std::uint64_t long_cache = 2ULL * 2 * 2 * 64 * 2 * 4 * 8192;
  CHECK(part(g, ComponentId::kv_cache) == long_cache);
  CHECK(part(g, ComponentId::temporaries) == long_cache / 4);
  CHECK(part(g, ComponentId::logits) == 4ULL * 32000 * 6);
  CHECK(g.peak_allocated.value() == resident + long_cache + long_cache / 4 + 4ULL * 32000 * 6);
}

TEST_CASE("optimizer state and step temporaries follow the optimizer table", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.batch = 1;
  w.seq = 8;  // tiny activations: the optimizer step sets the peak
  w.optimizer = spec::Optimizer::adamw;
  auto b = engine::estimate(m, w);
  CHECK(b.peak_phase == PhaseId::optimizer_step);
  CHECK(part(b, ComponentId::optimizer_state) == 2 * m.params * 2);
  CHECK(part(b, ComponentId::gradients) == m.params * 2);
  CHECK(part(b, ComponentId::optimizer_step) == m.params * 2);

  w.optimizer = spec::Optimizer::adamw_fused;
  b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::optimizer_step) == 0);

  w.optimizer = spec::Optimizer::adamw_forloop;
  b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::optimizer_step) == 2ULL * (32000 * 256) * 2);  // two copies of the largest tensor

  w.optimizer = spec::Optimizer::sgd;
  b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::optimizer_state) == 0);

  w.optimizer = spec::Optimizer::sgd_momentum;
  w.weights = DType::fp32;
  b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::optimizer_state) == m.params * 4);
}

TEST_CASE("LoRA trains fp32 adapters only", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::lora;
  w.lora.all_linear = false;
  w.lora.targets = {"q_proj", "v_proj"};
  w.lora.rank = 8;
  w.batch = 1;
  w.seq = 8;
  const auto b = engine::estimate(m, w);
  // per layer: q (8*(256+256)) + v (8*(256+128)); 2 layers; fp32
  const std::uint64_t adapters = 2 * (8 * (256 + 256) + 8 * (256 + 128));
  CHECK(part(b, ComponentId::lora_adapters) == adapters * 4);
  CHECK(part(b, ComponentId::optimizer_state) == 2 * adapters * 4);
}

TEST_CASE("LoRA targets match modules as spec::validate accepts them", "[engine]") {
  // peft's rule: `self_attn.q_proj` and `q_proj` select the same modules; validation and the
  // engine share spec::lora_target_matches, so an accepted target is never silently unadapted.
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::lora;
  w.lora.all_linear = false;
  w.lora.rank = 8;
  w.lora.targets = {"q_proj"};
  const auto plain = engine::estimate(m, w);
  w.lora.targets = {"self_attn.q_proj"};
  Diagnostics d;
  spec::validate(w, m, d);
  CHECK(d.empty());
  const auto dotted = engine::estimate(m, w);
  CHECK(part(dotted, ComponentId::lora_adapters) == 2ULL * 8 * (256 + 256) * 4);
  CHECK(dotted.peak_allocated == plain.peak_allocated);
}

TEST_CASE("fixes never add memory", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.batch = 8;
  w.seq = 1024;
  const auto base = engine::estimate(m, w);
  auto smaller = w;
  smaller.batch = 4;
  CHECK(engine::estimate(m, smaller).peak_allocated <= base.peak_allocated);
  auto ckpt = w;
  ckpt.checkpointing = true;
  CHECK(engine::estimate(m, ckpt).peak_allocated <= base.peak_allocated);
  auto fp32 = w;
  fp32.weights = DType::fp32;
  auto amp = fp32;
  amp.autocast = DType::bf16;
  CHECK(engine::estimate(m, amp).peak_allocated <= engine::estimate(m, fp32).peak_allocated);
}

TEST_CASE("sharding divides the per-GPU figure", "[engine]") {
  const auto m = tiny();
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.batch = 1;
  w.seq = 8;
  const auto one = engine::estimate(m, w);
  w.gpus = 4;
  w.sharding = spec::Sharding::fsdp;
  const auto four = engine::estimate(m, w);
  CHECK(part(four, ComponentId::optimizer_state) == (2 * m.params * 2 + 3) / 4);
  CHECK(four.peak_allocated < one.peak_allocated);
  CHECK(!four.notes.empty());
}

TEST_CASE("absurd sizes are refused, not wrapped", "[engine]") {
  const auto m = spec::from_param_count(1000000000000000ULL);
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.batch = 1ULL << 40;
  w.seq = 1ULL << 30;
  CHECK_THROWS_AS(engine::estimate(m, w), InputError);
}

TEST_CASE("the kv_cache component says what this model's cache keeps", "[engine]") {
  spec::Workload w;
  w.mode = spec::Mode::generate;
  w.batch = 1;
  w.seq = 2048;
  w.new_tokens = 16;
  const auto described = [&](const spec::ModelSpec& m) {
    const auto b = engine::estimate(m, w);
    const auto* c = b.find(ComponentId::kv_cache);
    REQUIRE(c != nullptr);
    return c->description;
  };
  CHECK(described(tiny()) == "keys and values: 2 layers for every token");
  // Sliding-window layers keep the window once decoding, the whole prompt at the prefill.
  const auto sliding = spec::from_config_text(R"({"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
      "sliding_window": 1024})",
                                              "sliding.json");
  CHECK(described(sliding) ==
        "keys and values: 4 sliding-window layers for at most 1024 tokens (the whole prompt at the prefill)");
  // Multi-head latent attention caches the compressed latent and the rope key.
  const auto mla = spec::from_config_text(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 128, "num_hidden_layers": 3, "first_k_dense_replace": 3, "num_attention_heads": 4,
      "num_key_value_heads": 4, "vocab_size": 32000, "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 64, "q_lora_rank": 96, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32})",
                                          "mla.json");
  CHECK(described(mla) == "the compressed latent (kv_lora_rank 64 + rope 16): 3 layers for every token");
  // A quantized cache (transformers' QuantizedCache).
  w.kv_cache = DType::int4;
  CHECK(described(tiny()) ==
        "keys and values: 2 layers for every token; quantized to int4 in groups of 64 (the latest 128 tokens in 16-bit)");
  w.kv_cache = DType::fp8;
  CHECK(described(tiny()) == "keys and values: 2 layers for every token; stored as fp8");
}
