#include "vramfit/engine/vllm.hpp"

#include <catch2/catch.hpp>

#include "vramfit/catalog/catalog.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::engine::vllm;

namespace {

spec::ModelSpec preset(const std::string& id) {
  const auto& p = catalog::Catalog::embedded().preset(id, "preset");
  return spec::from_config(p.config, p.id);
}

Settings on(Bytes card) {
  Settings s;
  s.gpu_memory = card;
  return s;
}

}  // namespace

TEST_CASE("vllm: KV bytes per token follow the heads each GPU keeps", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");  // 32 layers, 8 KV heads of 128
  Settings s = on(GiB(80));
  CHECK(kv_bytes_per_token(m, s) == 32 * 2 * 8 * 128 * 2);  // 131072
  s.kv_fp8 = true;
  CHECK(kv_bytes_per_token(m, s) == 32 * 2 * 8 * 128 * 1);
  s.kv_fp8 = false;
  s.tensor_parallel = 2;
  CHECK(kv_bytes_per_token(m, s) == 32 * 2 * 4 * 128 * 2);
  s.tensor_parallel = 16;  // fewer KV heads than GPUs: each GPU keeps one (replicated)
  CHECK(kv_bytes_per_token(m, s) == 32 * 2 * 1 * 128 * 2);
  s.tensor_parallel = 1;
  s.pipeline_parallel = 4;
  CHECK(kv_bytes_per_token(m, s) == 8 * 2 * 8 * 128 * 2);
  // MLA: one latent of kv_lora_rank + the rope key per layer, not split by tensor parallel.
  const spec::ModelSpec mla = preset("deepseek-v2-lite");
  Settings t = on(GiB(80));
  t.tensor_parallel = 2;
  CHECK(kv_bytes_per_token(mla, t) == mla.num_layers * (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2);
}

TEST_CASE("vllm: weights as 'Model loading took', blocks from what the budget leaves", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  const Result r = estimate(m, s);
  // bf16 parameters + the rotary cos/sin cache (131072 positions x 128 x 2 bytes).
  CHECK(r.weights.value() == 8030261248ULL * 2 + 131072ULL * 128 * 2);
  CHECK(r.budget.value() == static_cast<std::uint64_t>(0.9L * 80 * 1024 * 1024 * 1024));
  CHECK(r.available_kv ==
        static_cast<std::int64_t>(r.budget.value()) -
            static_cast<std::int64_t>((r.weights + r.activation_peak + r.non_torch).value()));
  CHECK(r.page_bytes == 131072 * 16);
  CHECK(r.num_gpu_blocks == static_cast<std::uint64_t>(r.available_kv) / r.page_bytes);
  CHECK(r.kv_cache_tokens == r.num_gpu_blocks * 16);
  CHECK(r.max_concurrency == Approx(static_cast<double>(r.num_gpu_blocks) / 512.0));
  CHECK(r.max_model_len_fits);
  CHECK(r.error.empty());
  const engine::Breakdown b = breakdown_of(r);
  CHECK(b.peak_allocated == r.weights + r.activation_peak + r.kv_cache);
  CHECK(b.device_total <= r.budget);
  CHECK(b.device_total == b.peak_allocated + b.cuda_context);
}

TEST_CASE("vllm: the profile peak grows with max_num_batched_tokens; TP splits weights", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  s.max_num_batched_tokens = 2048;
  const Result small = estimate(m, s);
  s.max_num_batched_tokens = 16384;
  const Result big = estimate(m, s);
  CHECK(big.activation_peak > small.activation_peak);
  CHECK(big.num_gpu_blocks < small.num_gpu_blocks);
  s.tensor_parallel = 2;
  const Result tp = estimate(m, s);
  CHECK(tp.weights < big.weights);
  CHECK(tp.num_gpu_blocks > 2 * big.num_gpu_blocks);  // half the weights and half the bytes per token
}

TEST_CASE("vllm: the errors vLLM raises at start-up", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");
  Settings s = on(GiB(16));  // 14.99 GiB of weights in 0.9 x 16 GiB
  Result r = estimate(m, s);
  CHECK(r.num_gpu_blocks == 0);
  CHECK(r.error.rfind("No available memory for the cache blocks", 0) == 0);
  s = on(GiB(24));
  s.max_model_len = 131072;
  r = estimate(m, s);
  CHECK(r.num_gpu_blocks > 0);
  CHECK_FALSE(r.max_model_len_fits);
  CHECK(r.error.find("is larger than the maximum number of tokens that can be stored in KV cache (" +
                     std::to_string(r.kv_cache_tokens) + ")") != std::string::npos);
  const engine::Breakdown b = breakdown_of(r);
  CHECK(b.device_total > r.budget);  // the KV one full request needs does not fit the budget
  s.gpu_memory_utilization = 0;
  CHECK_THROWS_AS(estimate(m, s), InputError);
  s.gpu_memory_utilization = 0.9;
  s.tensor_parallel = 3;
  CHECK_THROWS_AS(estimate(m, s), InputError);
}
