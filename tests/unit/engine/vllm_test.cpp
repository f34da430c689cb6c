#include "vramfit/engine/vllm.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
  // bf16 parameters + the rotary cos/sin cache (131072 positions x 128 x 2 bytes) + the seven
  // scalar tensors of each attention layer (512-byte blocks); every weight fills its segment.
  CHECK(r.weights.value() == 8030261248ULL * 2 + 131072ULL * 128 * 2 + 32 * 7 * 512);
  CHECK(r.budget.value() == static_cast<std::uint64_t>(0.9L * 80 * 1024 * 1024 * 1024));
  // The current release (>= 0.21) takes its CUDA graph estimate off the KV cache too.
  REQUIRE(r.graphs.in_budget);
  CHECK(r.available_kv ==
        static_cast<std::int64_t>(r.budget.value()) -
            static_cast<std::int64_t>((r.weights + r.activation_peak + r.non_torch + r.cuda_graphs).value()));
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

TEST_CASE("vllm: the profile peak grows with max_num_batched_tokens, TP splits weights", "[vllm]") {
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

TEST_CASE("vllm: the hybrid KV cache manager gives sliding-window groups only the window's blocks", "[vllm]") {
  spec::ModelSpec m = preset("gemma-2-9b");  // 42 layers alternating: 21 sliding (4096), 21 full; 8 KV heads of 256
  REQUIRE(m.num_layers == 42);
  REQUIRE(m.sliding_layers == 21);
  REQUIRE(m.sliding_window == 4096);
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  s.max_num_batched_tokens = 2048;
  const std::uint64_t layer_page = 2ULL * 16 * 8 * 256 * 2;  // one block of one layer: 131072 bytes
  Result r = estimate(m, s);
  // Two groups of 21 layers (full, sliding); 21 pools each shared by one layer of each group.
  CHECK(r.kv_groups == 2);
  CHECK(r.kv_group_size == 21);
  CHECK(r.page_bytes == layer_page * 21);
  CHECK(r.num_gpu_blocks == static_cast<std::uint64_t>(r.available_kv) / (layer_page * 21));
  CHECK(r.kv_cache_tokens == r.num_gpu_blocks / 2 * 16);
  // One 8192-token request: 512 blocks in the full group, cdiv(min(4095 + 2048, 8192), 16) + 1 = 385
  // in the sliding one.
  CHECK(r.blocks_per_request == 512 + 385);
  CHECK(r.kv_for_max_model_len.value() == (512 + 385) * layer_page * 21);
  CHECK(kv_bytes_for_request(m, s, 8192) == r.kv_for_max_model_len.value());
  CHECK(r.max_concurrency == Approx(static_cast<double>(r.num_gpu_blocks) / 897.0));
  // The longest request the KV memory holds fits, one more token does not.
  const auto avail = static_cast<std::uint64_t>(r.available_kv);
  const std::uint64_t longest = largest_model_len(m, s, avail);
  CHECK(kv_bytes_for_request(m, s, longest) <= avail);
  CHECK(kv_bytes_for_request(m, s, longest + 1) > avail);
  CHECK(r.largest_model_len == longest);

  // Off (--disable-hybrid-kv-cache-manager, or the V0 engine): one group, every layer full length.
  s.hybrid_kv = false;
  const Result u = estimate(m, s);
  CHECK(u.kv_groups == 1);
  CHECK(u.page_bytes == kv_bytes_per_token(m, s) * 16);
  CHECK(u.blocks_per_request == 512);
  CHECK(u.kv_for_max_model_len.value() == 512 * layer_page * 42);

  // A 5:1 pattern (Gemma 3 27B: 62 layers, 52 sliding): groups of 10 layers, the sliding kind
  // padded to 6 groups, 7 in all.
  s.hybrid_kv = true;
  m.num_layers = 62;
  m.sliding_layers = 52;
  m.sliding_window = 1024;
  r = estimate(m, s);
  CHECK(r.kv_group_size == 10);
  CHECK(r.kv_groups == 7);
  CHECK(r.kv_cache_tokens == r.num_gpu_blocks / 7 * 16);
  CHECK(r.blocks_per_request == 512 + 6 * ((1023 + 2048 + 15) / 16 + 1));
  // Nearly even counts (13 full, 12 sliding): one group of each, 13 layers, the sliding one padded.
  m.num_layers = 25;
  m.sliding_layers = 12;
  r = estimate(m, s);
  CHECK(r.kv_group_size == 13);
  CHECK(r.kv_groups == 2);
}

TEST_CASE("vllm: non-torch memory by what the release counts, and tensor parallel's communicators", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  // vLLM >= 0.6.5: the increase since init_device's snapshot (0.13 GiB on one GPU).
  CHECK(estimate(m, s).non_torch.value() == 139586437ULL);
  // With tensor parallel the NCCL communicators and custom all-reduce buffers come on top (0.41 GiB).
  s.tensor_parallel = 2;
  CHECK(estimate(m, s).non_torch.value() == 139586437ULL + 440234148ULL);
  // vLLM <= 0.6.4 counted everything outside PyTorch on the device: the CUDA context too.
  s.tensor_parallel = 1;
  s.profiler = Profiler::device_wide;
  const Result r = estimate(m, s);
  CHECK(r.non_torch.value() == 139586437ULL + r.cuda_context.value());
  CHECK(r.available_kv == static_cast<std::int64_t>(r.budget.value()) -
                              static_cast<std::int64_t>((r.weights + r.activation_peak + r.non_torch + r.cuda_graphs).value()));
}

TEST_CASE("vllm: CUDA graph capture sizes per release, their memory, and where vLLM counts it", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");  // 32 layers
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  // The current release: min(2 x 256, 512) = 512; [1, 2, 4] + 8..248 + 256..512 step 16 = 51
  // piecewise sizes, FULL decode graphs for the 35 sizes up to max_num_seqs.
  CudaGraphs g = cuda_graphs(m, s);
  CHECK(g.piecewise == 51);
  CHECK(g.full == 35);
  CHECK(g.largest_full == 256);
  REQUIRE(g.sizes.size() == 51);
  CHECK(g.sizes.front() == 512);
  CHECK(g.sizes[16] == 256);
  CHECK(g.sizes[17] == 248);
  CHECK(g.sizes.back() == 1);
  // The graph pool (the forward's activations at the largest size, 512 tokens: the residual
  // stream, the MLP's gate_up, activation and down outputs) and each graph's own memory a layer:
  // 0.223 MiB a piecewise size, 0.059 MiB a FULL graph.
  CHECK(g.pool.value() == 512ULL * 4096 * 4 + 512ULL * 14336 * 6 + 512ULL * 4096 * 2);
  CHECK(g.bytes.value() == g.pool.value() + 32 * (51ULL * 234013 + 35ULL * 62195));
  CHECK(g.in_budget);
  // A small max_num_seqs captures few graphs: 8 -> sizes up to 16, FULL up to 8.
  s.max_num_seqs = 8;
  g = cuda_graphs(m, s);
  CHECK(g.piecewise == 5);
  CHECK(g.full == 4);
  CHECK(g.sizes == std::vector<std::uint64_t>{16, 8, 4, 2, 1});
  // 0.20 and older: the graphs outside the budget; 0.10: 67 piecewise sizes up to 512.
  s.max_num_seqs = 256;
  s.release = *parse_release("0.10.1");
  g = cuda_graphs(m, s);
  CHECK(g.piecewise == 67);
  CHECK(g.full == 0);
  CHECK_FALSE(g.in_budget);
  const Result old = estimate(m, s);
  CHECK(old.available_kv == static_cast<std::int64_t>(old.budget.value()) -
                                static_cast<std::int64_t>((old.weights + old.activation_peak + old.non_torch).value()));
  // V0: one whole-model graph per size up to max_num_seqs.
  s.release = *parse_release("0.6.4");
  s.v0_engine = true;
  g = cuda_graphs(m, s);
  CHECK(g.full == 35);
  CHECK(g.piecewise == 0);
  CHECK(g.pool.value() == 256ULL * 4096 * 4 + 256ULL * 14336 * 6 + 256ULL * 4096 * 2);
  CHECK(g.bytes.value() == g.pool.value() + 35ULL * 32 * 374566);
  s.enforce_eager = true;
  CHECK(cuda_graphs(m, s).bytes.value() == 0);
  CHECK(cuda_graphs(m, s).sizes.empty());
}

TEST_CASE("vllm: --vllm-version strings", "[vllm]") {
  const auto v = parse_release("v0.21.0");
  REQUIRE(v);
  CHECK(v->minor == 21);
  CHECK(v->at_least(0, 21));
  CHECK_FALSE(v->at_least(0, 22));
  CHECK(parse_release("0.8.5.post1"));
  CHECK(parse_release("0.10.1rc1"));
  CHECK(parse_release("0.11")->patch == 0);
  CHECK_FALSE(parse_release("latest"));
  CHECK_FALSE(parse_release("0"));
  CHECK_FALSE(parse_release("0.x"));
  CHECK_FALSE(parse_release("0.123456"));
  CHECK_FALSE(parse_release(""));
}

TEST_CASE("vllm: a release newer than the newest followed is estimated as it, and says so", "[vllm]") {
  const spec::ModelSpec m = preset("llama-3.1-8b");
  const auto said = [](const Result& r) {
    return std::count_if(r.notes.begin(), r.notes.end(), [](const std::string& n) {
      return n.find("is newer than the newest release vramfit follows (0.27.1)") != std::string::npos;
    });
  };
  Settings s = on(GiB(80));
  s.max_model_len = 8192;
  const Result current = estimate(m, s);
  CHECK(said(current) == 0);
  s.release = *parse_release("0.27.1");
  CHECK(said(estimate(m, s)) == 0);
  s.release = *parse_release("0.20");
  CHECK(said(estimate(m, s)) == 0);
  s.release = *parse_release("0.28.0");
  const Result newer = estimate(m, s);
  CHECK(said(newer) == 1);
  // The same figures as the newest followed release.
  CHECK(newer.num_gpu_blocks == current.num_gpu_blocks);
  CHECK(newer.cuda_graphs == current.cuda_graphs);
}

TEST_CASE("vllm: the dummy sampler's kernel and its profile peak follow the release", "[vllm]") {
  using engine::vllm::SamplerKernel;
  using engine::vllm::sampler_kernel;
  const auto at = [](const char* v) { return sampler_kernel(*engine::vllm::parse_release(v)); };
  CHECK(at("0.7.3") == SamplerKernel::flashinfer);   // vllm#11394
  CHECK(at("0.8.0") == SamplerKernel::torch_sort);   // vllm#14815: FlashInfer >= 0.2.3 off
  CHECK(at("0.9.0") == SamplerKernel::torch_sort);
  CHECK(at("0.9.1") == SamplerKernel::flashinfer);   // vllm#15777
  CHECK(at("0.11.0") == SamplerKernel::flashinfer);
  CHECK(at("0.11.1") == SamplerKernel::torch_sort);  // vllm#26859
  CHECK(at("0.15.1") == SamplerKernel::torch_sort);
  CHECK(at("0.16.0") == SamplerKernel::triton);      // vllm#33538
  CHECK(at("0.27.1") == SamplerKernel::triton);

  // Qwen3-0.6B (vocab 151936) at max_num_seqs 1024, 2048 batched tokens: the sampler binds, its
  // logits at 38 bytes (the sort), 14 (FlashInfer) or 16 (Triton), beside the forward's hidden states [2048, 1024] and the
  // dummy requests' rows and their rand_like copy, 2 x [1024, 1024], in bf16.
  const spec::ModelSpec m = preset("qwen3-0.6b");
  engine::vllm::Settings s;
  s.gpu_memory = GiB(80);
  s.max_num_seqs = 1024;
  s.max_num_batched_tokens = 2048;
  // Plus the cuBLAS workspace PyTorch keeps from the first matmul: 8 MiB + 128 KiB on a card
  // not named or before Hopper, 32 MiB on Hopper and Blackwell.
  const std::uint64_t rows = 2048ULL * 1024 * 2 + 2 * 1024ULL * 1024 * 2;
  const std::uint64_t cublas = 4096ULL * 1024 * 2 + 16 * 1024 * 8;
  s.release = *engine::vllm::parse_release("0.14.0");
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 38 + rows + cublas);
  s.compute_capability = 90;
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 38 + rows + 32 * 1024 * 1024);
  s.compute_capability = 0;
  // FlashInfer (0.10): the bf16 logits, their fp32 copy, the top-k-masked logits and their
  // softmax, 2 + 4 + 4 + 4 bytes a logit.
  s.release = *engine::vllm::parse_release("0.10.1");
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 14 + rows + cublas);
  // The Triton top-k/top-p (0.16): the same 14 and its kernel's scratch, taken as 2.
  s.release = *engine::vllm::parse_release("0.16.0");
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 16 + rows + cublas);
  // V0 (0.6) without chunked prefill (max_num_batched_tokens covers max_model_len): the sampler
  // sorts the fp32 logits, 38 bytes a logit, beside the hidden states (no dummy request rows).
  s.release = *engine::vllm::parse_release("0.6.4");
  s.v0_engine = true;
  s.max_model_len = 2048;
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 38 + 2048ULL * 1024 * 2 + cublas);
  // With chunked prefill (max_model_len past max_num_batched_tokens) no sampler peak: the forward
  // at 2048 tokens binds (Qwen3-0.6B: hidden 1024, intermediate 3072).
  s.max_model_len = 32768;
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() ==
        2048ULL * 1024 * 4 + 2048ULL * 3072 * 6 + 2048ULL * 1024 * 2 + cublas);
  // From 0.8 the chunked V0 profile run shows the sort as well (a 0.8.5 log on Turing).
  s.release = *engine::vllm::parse_release("0.8.5");
  CHECK(engine::vllm::estimate(m, s).activation_peak.value() == 1024ULL * 151936 * 38 + 2048ULL * 1024 * 2 + cublas);
}

TEST_CASE("vllm: MXFP4 experts in the layout of the kernels the card runs", "[vllm]") {
  // gpt-oss-20b: 24 MoE layers of 32 experts, hidden 2880, expert intermediate 2880.
  CHECK(mxfp4_backend(90, true) == Mxfp4Backend::triton);  // Hopper: FlashInfer's SM90 path is opt-in
  CHECK(mxfp4_backend(100, true) == Mxfp4Backend::flashinfer_sm100);
  CHECK(mxfp4_backend(100, false) == Mxfp4Backend::triton);
  CHECK(mxfp4_backend(80, true) == Mxfp4Backend::marlin);
  CHECK(mxfp4_backend(120, true) == Mxfp4Backend::marlin);  // consumer Blackwell (>= 11.0)
  CHECK(mxfp4_backend(0, true) == Mxfp4Backend::marlin);    // an unknown card (--budget)
  const spec::ModelSpec m = preset("gpt-oss-20b");
  REQUIRE(m.moe.num_experts == 32);
  Settings s = on(GiB(80));
  s.max_model_len = 4096;
  REQUIRE(m.quantization);  // the checkpoint's quantization_config: only the experts are MXFP4
  spec::set_packing(s.weights, *m.quantization);
  const auto weights = [&](unsigned cc) {
    Settings t = s;
    t.compute_capability = cc;
    return estimate(m, t).weights.value();
  };
  const std::uint64_t L = 24, E = 32;
  // Triton: the swizzled scales (w13 rows 5760 -> 5888, w2 rows 2880 -> 3072, 90 columns) held
  // beside the layer's own, and the biases (5760 + 2880 per expert) in fp32 instead of bf16.
  const std::uint64_t triton_extra = L * E * ((5888 * 90 + 3072 * 90) + (5760 + 2880) * 2);
  // Marlin: I 2880 -> 2944 (128), H 2880 -> 3072 (256): values, scales and bf16 biases grow.
  const auto layout = [&](std::uint64_t I, std::uint64_t H, std::uint64_t bias) {
    return L * E * (3 * I * H / 2 + 3 * I * (H / 32) + (2 * I + H) * bias);
  };
  const std::uint64_t marlin_extra = layout(2944, 3072, 2) - layout(2880, 2880, 2);
  const std::uint64_t sm100_extra = layout(3072, 3072, 4) - layout(2880, 2880, 2);
  // The caching allocator's blocks: a tensor that leaves 1 MiB or less of its segment (its size
  // rounded up to 2 MiB from 10 MiB on) keeps the whole segment. Triton: w13 265,420,800 bytes in
  // 127 x 2 MiB (917,504 more), its scales 16,588,800 in 8 x 2 MiB (188,416 more); w2 (1.44 MiB
  // left), the swizzled w13 scales (1.83 left) split, the rest under 10 MiB (20 MiB segments) or
  // 1 MiB (small pool). Marlin: w13's scales 18,087,936 in 9 x 2 MiB (786,432 more), the rest
  // whole multiples of 2 MiB or split. FlashInfer SM100: every large tensor a multiple of 2 MiB.
  const std::uint64_t triton_blocks = L * (917504 + 188416), marlin_blocks = L * 786432, sm100_blocks = 0;
  CHECK(weights(90) - weights(80) == (triton_extra + triton_blocks) - (marlin_extra + marlin_blocks));
  CHECK(weights(100) - weights(80) == (sm100_extra + sm100_blocks) - (marlin_extra + marlin_blocks));
  CHECK(weights(80) == weights(0));
  // The layout taken is said, and that an unnamed card gets Marlin's.
  const auto notes = [&](unsigned cc) {
    Settings t = s;
    t.compute_capability = cc;
    std::string all;
    for (const auto& n : estimate(m, t).notes) all += n + "\n";
    return all;
  };
  CHECK_THAT(notes(90), Catch::Contains("MXFP4 experts laid out for triton_kernels (the scales held twice), vLLM's "
                                        "kernels on compute capability 9.0"));
  CHECK_THAT(notes(0), Catch::Contains("MXFP4 experts laid out for Marlin (I padded to 128, H to 256): the card is "
                                       "not named (give --gpu ID), so Marlin's (Ampere, Ada) is taken"));
  // "Model loading took 13.47 GiB" for gpt-oss-20b on an H100 (vLLM 0.14; serving logs): 13.4614
  // with the fp32 rotary cache gpt_oss.py asks for (32 MiB, not 16), the experts' blocks and the
  // attention scalars (13.4366 without them); 3.6 to 13.6 MiB not found ("13.47" is [13.465, 13.475)).
  CHECK(static_cast<double>(weights(90)) / static_cast<double>(GiB(1).value()) == Approx(13.4614).margin(0.00005));
  // A dense model is untouched by the card.
  const spec::ModelSpec dense = preset("llama-3.1-8b");
  Settings d = on(GiB(80));
  d.max_model_len = 4096;
  d.compute_capability = 90;
  const auto w90 = estimate(dense, d).weights;
  d.compute_capability = 80;
  CHECK(estimate(dense, d).weights == w90);
}

namespace {

/// A preset's config.json with some keys changed, as a served checkpoint's.
spec::ModelSpec preset_with(const std::string& id, const nlohmann::json& patch) {
  const auto& p = catalog::Catalog::embedded().preset(id, "preset");
  nlohmann::json c = p.config;
  c.merge_patch(patch);
  return spec::from_config(c, p.id);
}

/// The diagnostic estimate() throws, or an empty one.
Diagnostic refusal(const spec::ModelSpec& m, const Settings& s) {
  try {
    (void)estimate(m, s);
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    return e.diagnostics().front();
  }
  return {};
}

}  // namespace

TEST_CASE("vllm: a --max-model-len past the model's derived maximum is refused before any memory", "[vllm]") {
  Settings s = on(GiB(80));
  SECTION("a plain config: max_position_embeddings") {
    const spec::ModelSpec m = preset("qwen3-8b");  // max_position_embeddings 40960, rope_scaling null
    const DerivedMaxLen d = derived_max_model_len(m);
    CHECK(d.tokens == 40960);
    CHECK(d.key == "max_position_embeddings");
    CHECK_FALSE(d.scaled);
    CHECK(default_max_model_len(m, s) == 40960);
    CHECK(estimate(m, s).max_model_len == 40960);
    s.max_model_len = 40960;
    CHECK(refusal(m, s).field.empty());
    s.max_model_len = 40961;
    const Diagnostic r = refusal(m, s);
    CHECK(r.field == "--max-model-len");
    CHECK(r.problem ==
          "40961 is more than the model's derived maximum, 40960: vLLM refuses it before it measures any memory "
          "(\"User-specified max_model_len (40961) is greater than the derived max_model_len "
          "(max_position_embeddings=40960 or model_max_length=None in model's config.json). To allow overriding this "
          "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.\")");
    CHECK(r.fix.rfind("--max-model-len 40960 (or less); or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", 0) == 0);
    // VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM warns and serves it.
    s.allow_long_max_model_len = true;
    const Result long_ok = estimate(m, s);
    CHECK(long_ok.max_model_len == 40961);
    CHECK(std::any_of(long_ok.notes.begin(), long_ok.notes.end(), [](const std::string& n) {
      return n.rfind("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: --max-model-len 40961 is past the model's derived maximum, 40960", 0) == 0;
    }));
  }
  SECTION("yarn: original_max_position_embeddings x factor, in either spelling") {
    // Qwen3's model card: rope_scaling yarn, factor 4, original 32768 for 131072 tokens.
    const nlohmann::json yarn = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
    for (const spec::ModelSpec& m : {preset_with("qwen3-8b", {{"rope_scaling", yarn}}),
                                     preset_with("qwen3-8b", {{"rope_parameters", yarn}})}) {
      const DerivedMaxLen d = derived_max_model_len(m);
      CHECK(d.tokens == 131072);
      CHECK(d.scaled);
      CHECK(d.rope == "yarn: original_max_position_embeddings 32768 x factor 4");
      Settings t = s;
      CHECK(estimate(m, t).max_model_len == 131072);  // the default
      t.max_model_len = 131072;
      CHECK(refusal(m, t).field.empty());
      t.max_model_len = 131073;
      const Diagnostic r = refusal(m, t);
      CHECK(r.field == "--max-model-len");
      CHECK(r.problem.rfind("131073 is more than the model's derived maximum, 131072 (yarn: "
                            "original_max_position_embeddings 32768 x factor 4)",
                            0) == 0);
      CHECK(r.problem.find("(max_position_embeddings=131072.0 or model_max_length=None") != std::string::npos);
    }
    // DeepSeek-V2-Lite's legacy "type": yarn, 4096 x 40 = its max_position_embeddings.
    CHECK(derived_max_model_len(preset("deepseek-v2-lite")).tokens == 163840);
    // gpt-oss: 4096 x 32.
    CHECK(derived_max_model_len(preset("gpt-oss-20b")).tokens == 131072);
  }
  SECTION("linear and dynamic multiply max_position_embeddings; llama3 and gemma3 do not") {
    CHECK(derived_max_model_len(preset_with("qwen3-8b", {{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}})).tokens ==
          81920);
    CHECK(derived_max_model_len(preset_with("qwen3-8b", {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 1.5}}}})).tokens ==
          61440);
    const DerivedMaxLen llama3 = derived_max_model_len(preset("llama-3.1-8b"));
    CHECK(llama3.tokens == 131072);
    CHECK(llama3.rope.empty());
    // Gemma 3's linear factor 8 is already in its 131072 positions.
    const spec::ModelSpec g = preset("gemma-3-4b");
    CHECK(derived_max_model_len(g).tokens == static_cast<double>(g.max_positions));
  }
  SECTION("longrope: max_position_embeddings is the long context; the default is the short one from 0.11.1") {
    // Phi-3-mini-128k-instruct's config: 131072 positions, original 4096, rope_scaling longrope
    // (short and long factors per rotary dimension pair).
    const spec::ModelSpec m = preset_with(
        "phi-3-mini-4k", {{"max_position_embeddings", 131072},
                          {"original_max_position_embeddings", 4096},
                          {"sliding_window", 262144},
                          {"rope_scaling", {{"type", "longrope"}, {"long_factor", {1.0, 1.1}}, {"short_factor", {1.0, 1.0}}}}});
    const DerivedMaxLen d = derived_max_model_len(m);
    CHECK(d.tokens == 131072);
    CHECK(d.rope.empty());
    CHECK(default_max_model_len(m, s) == 4096);  // 0.27.1, after vllm#27431
    Settings old = s;
    old.release = *parse_release("0.11.0");
    CHECK(default_max_model_len(m, old) == 131072);
    s.max_model_len = 131072;
    CHECK(refusal(m, s).field.empty());
    s.max_model_len = 131073;
    CHECK(refusal(m, s).problem.find("(max_position_embeddings=131072.0 or model_max_length=None") != std::string::npos);
  }
  SECTION("Command-R's model_max_length is the maximum") {
    const spec::ModelSpec m = preset_with("qwen3-8b", {{"model_max_length", 131072}});
    const DerivedMaxLen d = derived_max_model_len(m);
    CHECK(d.tokens == 131072);
    CHECK(d.key == "model_max_length");
    s.max_model_len = 131073;
    CHECK(refusal(m, s).problem.find("(model_max_length=131072 or model_max_length=131072 in") != std::string::npos);
  }
  SECTION("an absurd factor is named, not multiplied into a length") {
    const spec::ModelSpec m = preset_with("qwen3-8b", {{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 1e300}}}});
    CHECK(refusal(m, s).field == "rope_scaling.factor");
  }
}

TEST_CASE("vllm: the rotary cos/sin cache has the rows its scaling gives and MLA's rope width", "[vllm]") {
  const Settings s = on(GiB(80));
  const auto weights = [&](const spec::ModelSpec& m) { return estimate(m, s).weights.value(); };
  // Qwen3-8B (head_dim 128, 40960 positions): yarn x4 over 32768 makes 131072 rows (YaRNScaling-
  // RotaryEmbedding: original_max_position x factor), bf16.
  const spec::ModelSpec plain = preset("qwen3-8b");
  const spec::ModelSpec yarn = preset_with(
      "qwen3-8b", {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}}});
  CHECK(weights(yarn) - weights(plain) == (131072ULL - 40960) * 128 * 2);
  // Dynamic NTK: max_position_embeddings x factor; a fractional length has its ceiling's rows.
  const spec::ModelSpec dyn = preset_with("qwen3-8b", {{"rope_scaling", {{"type", "dynamic"}, {"factor", 1.00001}}}});
  // ceil(40960.4096) = 40961 rows: 256 bytes more, a 512-byte block more in the caching allocator.
  CHECK(weights(dyn) - weights(plain) == 512);
  // Phi-3's LongRoPE keeps the short and the long caches: 4096 + 131072 rows of 96.
  const nlohmann::json phi_long = {{"max_position_embeddings", 131072}, {"original_max_position_embeddings", 4096}};
  nlohmann::json with_rope = phi_long;
  with_rope["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  CHECK(weights(preset_with("phi-3-mini-4k", with_rope)) - weights(preset_with("phi-3-mini-4k", phi_long)) ==
        4096ULL * 96 * 2);
  // MLA: the cache rotates qk_rope_head_dim of each head, its yarn rows original x factor. A small
  // DeepSeek-V2 (every tensor a multiple of 512 bytes, so each block is its size) with a rope
  // width of 32: halving the factor 4 over 32 positions takes 64 rows of 32 off.
  const auto mini = [](double factor) {
    const nlohmann::json cfg = {
        {"model_type", "deepseek_v2"},   {"hidden_size", 256},         {"intermediate_size", 512},
        {"moe_intermediate_size", 64},   {"n_routed_experts", 4},      {"n_shared_experts", 1},
        {"num_experts_per_tok", 2},      {"first_k_dense_replace", 1}, {"moe_layer_freq", 1},
        {"num_attention_heads", 4},      {"num_key_value_heads", 4},   {"kv_lora_rank", 256},
        {"q_lora_rank", nullptr},        {"qk_nope_head_dim", 32},     {"qk_rope_head_dim", 32},
        {"v_head_dim", 32},              {"num_hidden_layers", 3},     {"vocab_size", 1024},
        {"max_position_embeddings", 128}, {"tie_word_embeddings", false},
        {"rope_scaling", {{"type", "yarn"}, {"factor", factor}, {"original_max_position_embeddings", 32},
                          {"mscale", 0.707}, {"mscale_all_dim", 0.707}}}};
    return spec::from_config(cfg, "deepseek-v2-mini");
  };
  CHECK(weights(mini(4)) - weights(mini(2)) == 64ULL * 32 * 2);
  REQUIRE(preset("deepseek-v2-lite").qk_rope_head_dim == 64);
  // llama3 keeps max_position_embeddings: Llama 3.1 8B's 131072 x 128 x 2.
  // (And 0.27.1's seven scalar tensors of each attention layer, 512 bytes each.)
  CHECK(weights(preset("llama-3.1-8b")) == 8030261248ULL * 2 + 131072ULL * 128 * 2 + 32 * 7 * 512);
  // A partial rotary model rotates int(head_size x partial_rotary_factor) of a head (phi.py):
  // phi-1.5 (heads of 64, factor 0.5) keeps [2048, 32], 128 KiB; with the whole head, 256 KiB.
  const nlohmann::json phi = {{"model_type", "phi"},       {"hidden_size", 2048},          {"num_hidden_layers", 24},
                              {"num_attention_heads", 32}, {"intermediate_size", 8192},    {"vocab_size", 51200},
                              {"max_position_embeddings", 2048}, {"partial_rotary_factor", 0.5}, {"tie_word_embeddings", false}};
  nlohmann::json phi_whole = phi;
  phi_whole["partial_rotary_factor"] = 1.0;
  const spec::ModelSpec half_rot = spec::from_config(phi, "phi-1_5");
  CHECK(half_rot.partial_rotary_factor == 0.5);
  CHECK(weights(spec::from_config(phi_whole, "phi-1_5")) - weights(half_rot) == 2048ULL * 32 * 2);
  // gpt_neox's rotary_pct (Pythia: 0.25 of heads of 128): [2048, 32].
  CHECK(preset("pythia-6.9b").partial_rotary_factor == 0.25);
}

TEST_CASE("vllm: weights as the caching allocator lays them out, per tensor-parallel rank", "[vllm]") {
  // One Qwen2.5-14B layer on 2 GPUs (vLLM 0.6.4: no attention scalars on the GPU): each rank holds
  // the embedding and lm_head halves (76032 x 5120, 742.5 MiB, split off a 744 MiB segment),
  // qkv_proj (20 + 2 x 4 heads of 128) x 5120 = 35 MiB, o_proj 5120 x 2560 = 25 MiB, gate_up
  // 13824 x 5120 = 135 MiB, down 5120 x 6912 = 67.5 MiB: each leaves 1 MiB or less of its
  // 2 MiB-rounded segment, which is not split off, so it counts 36, 26, 136 and 68 MiB; the
  // q/k/v bias is split (3584), the norms are whole (2 x 5120 + the final 5120); the rotary
  // cache 4096 x 128 in bf16.
  const nlohmann::json layer = {{"model_type", "qwen2"},          {"hidden_size", 5120},
                                {"num_hidden_layers", 1},         {"num_attention_heads", 40},
                                {"num_key_value_heads", 8},       {"intermediate_size", 13824},
                                {"vocab_size", 152064},           {"max_position_embeddings", 4096},
                                {"tie_word_embeddings", false},   {"rope_theta", 1000000.0}};
  const spec::ModelSpec m = spec::from_config(layer, "qwen2.5-14b-one-layer");
  Settings s = on(GiB(80));
  s.release = Release{0, 6, 4};
  s.tensor_parallel = 2;
  const std::uint64_t MiB = 1ULL << 20;
  const std::uint64_t params = 2 * 76032ULL * 5120 * 2 + 35 * MiB + 3584 * 2 + 25 * MiB + 135 * MiB + 135 * MiB / 2 +
                               3 * 5120 * 2 + 4096ULL * 128 * 2;
  CHECK(estimate(m, s).weights.value() == params + 3 * MiB + MiB / 2);
  // From 0.6.5 the attention's _k_scale and _v_scale are GPU tensors, from 0.7.3 seven of them:
  // one 512-byte block each.
  s.release = Release{0, 7, 2};
  CHECK(estimate(m, s).weights.value() == params + 3 * MiB + MiB / 2 + 2 * 512);
  s.release = Release{0, 14, 0};
  CHECK(estimate(m, s).weights.value() == params + 3 * MiB + MiB / 2 + 7 * 512);
  // A layer count no model has is not replayed layer by layer (a hostile config stays fast): the
  // parameters' bytes, the rotary cache and the attention layers' scalars (7 blocks of 512 bytes a
  // layer on the default release), as for a quantized model.
  const nlohmann::json deep = {{"model_type", "llama"},     {"hidden_size", 64},   {"num_hidden_layers", 5000},
                               {"num_attention_heads", 4},  {"intermediate_size", 128}, {"vocab_size", 128},
                               {"max_position_embeddings", 64}};
  const spec::ModelSpec d = spec::from_config(deep, "deep");
  CHECK(estimate(d, on(GiB(80))).weights.value() == d.params * 2 + 64ULL * 16 * 2 + 5000ULL * 7 * 512);
  // Fewer KV heads than GPUs: each rank keeps a replica of one, as many as with one KV head a
  // rank to begin with (Qwen2.5-1.5B's 2 KV heads on 4 GPUs against 4 KV heads).
  Settings t = on(GiB(80));
  t.tensor_parallel = 4;
  CHECK(estimate(preset("qwen2.5-1.5b"), t).weights ==
        estimate(preset_with("qwen2.5-1.5b", {{"num_key_value_heads", 4}}), t).weights);
}

TEST_CASE("vllm: what every tensor-parallel rank keeps whole: norms, routers, MLA's down-projections", "[vllm]") {
  // A small DeepSeek-V2 (no q_lora; every tensor a multiple of 512 bytes at TP 1 and 2, so each
  // block the replay makes is its size): kv_a_proj_with_mqa 256 x (256 + 32) is a
  // ReplicatedLinear, as is each MoE layer's router 256 x 4 (2 of the 3 layers); the two RMSNorms
  // of a layer, the kv_a_layernorm (256) and the final norm are plain parameters. The rest is
  // split by TP. The rotary cache and the attention layers' scalars (7 blocks of 512 bytes a
  // layer) are the same on every rank, so 2 x (TP 2) - (TP 1) leaves the whole part and them.
  const nlohmann::json cfg = {{"model_type", "deepseek_v2"},   {"hidden_size", 256},         {"intermediate_size", 512},
                              {"moe_intermediate_size", 64},   {"n_routed_experts", 4},      {"n_shared_experts", 1},
                              {"num_experts_per_tok", 2},      {"first_k_dense_replace", 1}, {"moe_layer_freq", 1},
                              {"num_attention_heads", 4},      {"num_key_value_heads", 4},   {"kv_lora_rank", 256},
                              {"q_lora_rank", nullptr},        {"qk_nope_head_dim", 32},     {"qk_rope_head_dim", 32},
                              {"v_head_dim", 32},              {"num_hidden_layers", 3},     {"vocab_size", 1024},
                              {"max_position_embeddings", 64}, {"tie_word_embeddings", false}};
  const spec::ModelSpec ds = spec::from_config(cfg, "deepseek-v2-mini");
  Settings s = on(GiB(80));
  const std::uint64_t one = estimate(ds, s).weights.value();
  s.tensor_parallel = 2;
  const std::uint64_t two = estimate(ds, s).weights.value();
  const std::uint64_t whole = 3ULL * (2 * 256 + 256 + 256 * 288) * 2 + 2ULL * 256 * 4 * 2 + 256 * 2;
  const std::uint64_t rope = 64ULL * 32 * 2;  // [max_position_embeddings, qk_rope_head_dim] in bf16
  CHECK(2 * two - one == whole + rope + 3 * 7 * 512);
  // The whole model at TP 1, tensor by tensor: the embedding and lm_head 1024 x 256; per layer
  // q_proj 256 x 256, kv_b 256 x 256 (4 heads x (32 + 32) from the latent),
  // o_proj 256 x 128, the dense MLP's gate_up 1024 x 256 and down 256 x 512 (layer 0), the MoE
  // layers' experts (w13 4 x 128 x 256, w2 4 x 256 x 64) and shared expert (128 x 256, 256 x 64).
  const std::uint64_t attn = (256 * 256 + 256 * 256 + 256 * 128) * 2;  // kv_a is in `whole`
  const std::uint64_t dense = (1024 * 256 + 256 * 512) * 2;
  const std::uint64_t moe = (4 * 128 * 256 + 4 * 256 * 64 + 128 * 256 + 256 * 64) * 2;
  CHECK(one == 2 * 1024 * 256 * 2 + 3 * attn + dense + 2 * moe + whole + rope + 3 * 7 * 512);
}

TEST_CASE("vllm: pipeline parallel replays each stage's own layers, the stage holding most is the figure", "[vllm]") {
  // Three small llama layers (every tensor a multiple of 512 bytes, so each block is its size):
  // qkv 768 x 256, o_proj 256 x 256, gate_up 1024 x 256, down 256 x 512, two norms of 256, the
  // 7 attention scalars of 512 bytes: 1315328 bytes a layer; embedding and lm_head 1024 x 256
  // (524288), the final norm 512, the rotary cache [64, 64] in bf16 (8192) on every stage.
  const nlohmann::json cfg = {{"model_type", "llama"},          {"hidden_size", 256},       {"num_hidden_layers", 3},
                              {"num_attention_heads", 4},       {"num_key_value_heads", 4}, {"intermediate_size", 512},
                              {"vocab_size", 1024},             {"max_position_embeddings", 64},
                              {"tie_word_embeddings", false}};
  const spec::ModelSpec m = spec::from_config(cfg, "three-layers");
  const std::uint64_t layer = 393216 + 131072 + 524288 + 262144 + 1024 + 7 * 512;
  Settings s = on(GiB(80));
  CHECK(estimate(m, s).weights.value() == 524288 + 3 * layer + 8192 + 512 + 524288);
  // Two stages: get_pp_indices gives the odd layer to the stage before the last, [2, 1]: the
  // first holds the embedding and two layers, the last one layer, the final norm and lm_head.
  s.pipeline_parallel = 2;
  CHECK(estimate(m, s).weights.value() == std::max<std::uint64_t>(524288 + 2 * layer + 8192, layer + 8192 + 512 + 524288));
  CHECK(estimate(m, s).weights.value() == 3163136);
  // Three stages of one layer: the first and the last hold their end, the last also the norm.
  s.pipeline_parallel = 3;
  CHECK(estimate(m, s).weights.value() == layer + 8192 + 512 + 524288);
}

TEST_CASE("vllm: minicpm3 caches every head's decompressed K and V", "[vllm]") {
  // models/minicpm3.py: Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads),
  // V padded to qk_head_dim: 2 x heads x (qk_nope 64 + qk_rope 32) per layer, not the latent.
  const nlohmann::json cfg = {{"model_type", "minicpm3"},  {"hidden_size", 1024},      {"intermediate_size", 2560},
                              {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"q_lora_rank", 768},
                              {"kv_lora_rank", 256},       {"qk_nope_head_dim", 64},    {"qk_rope_head_dim", 32},
                              {"num_hidden_layers", 8},    {"vocab_size", 73448},       {"max_position_embeddings", 32768},
                              {"tie_word_embeddings", true}};
  const spec::ModelSpec m = spec::from_config(cfg, "minicpm3-mini");
  Settings s = on(GiB(80));
  CHECK(kv_bytes_per_token(m, s) == 8 * 2 * 16 * 96 * 2);
  s.tensor_parallel = 2;
  CHECK(kv_bytes_per_token(m, s) == 8 * 2 * 8 * 96 * 2);
  const Result r = estimate(m, s);
  CHECK(r.page_bytes == 8 * 2 * 8 * 96 * 2 * 16);
  // Its q_a_proj (1024 x 768) and kv_a_proj_with_mqa (1024 x 288) are ReplicatedLinear, whole on
  // each rank with the norms (2 x 1024 a layer, q_a 768, kv_a 256, the final 1024).
  Settings one = on(GiB(80));
  const std::uint64_t w1 = estimate(m, one).weights.value(), w2 = r.weights.value();
  const std::uint64_t whole = 8ULL * (1024 * 768 + 1024 * 288 + 2 * 1024 + 768 + 256) * 2 + 1024 * 2;
  const std::uint64_t rope = 32768ULL * 32 * 2;  // [max_position_embeddings, qk_rope_head_dim] in bf16
  CHECK(2 * w2 - w1 == whole + rope + 8 * 7 * 512);  // and the 8 layers' attention scalars
}

namespace {
spec::ModelSpec gemma4_e2b_mini() {
  // tests/accuracy/arch/models/gemma4-e2b-mini.json: 10 layers, sliding but layers 5 and 9 (the
  // last is forced full), the last 4 KV-shared: caching layers 0-4 (sliding, 1 KV head of 256)
  // and 5 (full, 1 KV head of global_head_dim 512).
  const nlohmann::json cfg = {{"model_type", "gemma4_text"}, {"hidden_size", 1024},          {"intermediate_size", 2048},
                              {"num_attention_heads", 8},    {"num_key_value_heads", 1},     {"head_dim", 256},
                              {"global_head_dim", 512},      {"num_hidden_layers", 10},      {"num_kv_shared_layers", 4},
                              {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 256},
                              {"vocab_size", 262144},        {"vocab_size_per_layer_input", 262144},
                              {"sliding_window", 512},       {"max_position_embeddings", 131072},
                              {"final_logit_softcapping", 30.0}, {"tie_word_embeddings", true}};
  return spec::from_config(cfg, "gemma4-e2b-mini");
}
}  // namespace

TEST_CASE("vllm: gemma4's layers laid out per kind: KV-shared layers cache nothing, pages unified", "[vllm]") {
  const spec::ModelSpec m = gemma4_e2b_mini();
  Settings s = on(GiB(80));
  s.max_model_len = 131072;
  s.max_num_batched_tokens = 8192;
  // Every caching layer's K and V: 5 x 2 x 256 + 1 x 2 x 512 values a token, in bf16.
  CHECK(kv_bytes_per_token(m, s) == (5 * 2 * 256 + 2 * 512) * 2);
  // The hybrid manager: a sliding page (16 x 2 x 256 x 2 = 16384) and a full one (32768) unified
  // to 32768, the sliding blocks holding 32 tokens; 5 sliding layers and 1 full: group size 1,
  // 6 groups; num_blocks = available // 32768; "GPU KV cache size" num_blocks // 6 x 16 tokens; a
  // request of 131072 tokens takes 8192 full blocks and 5 x (cdiv(511 + 8192, 32) + 1) sliding.
  const Result r = estimate(m, s);
  CHECK(r.page_bytes == 32768);
  CHECK(r.kv_groups == 6);
  CHECK(r.kv_group_size == 1);
  CHECK(r.num_gpu_blocks == static_cast<std::uint64_t>(r.available_kv) / 32768);
  CHECK(r.kv_cache_tokens == r.num_gpu_blocks / 6 * 16);
  CHECK(r.blocks_per_request == 8192 + 5 * (272 + 1));
  CHECK(kv_bytes_for_request(m, s, 131072) == (8192ULL + 5 * 273) * 32768);
  // Without the hybrid manager: one UniformTypeKVCacheSpecs group, every layer's page summed.
  s.hybrid_kv = false;
  const Result u = estimate(m, s);
  CHECK(u.page_bytes == 5 * 16384 + 32768);
  CHECK(u.kv_groups == 1);
  CHECK(u.kv_cache_tokens == u.num_gpu_blocks * 16);
  CHECK(u.blocks_per_request == 8192);
  // Weights: Gemma4Attention builds a whole qkv_proj on every layer, so the KV-shared layers
  // hold K and V slots the checkpoint lacks (3 sliding x 2 x 256 and 1 full x 2 x 512 rows of
  // 1024) and a k_norm (3 x 256 + 512), beyond the parameters, the rotary cache (131072 x 256)
  // and the 10 attention layers' scalar tensors (7 blocks of 512 bytes each).
  CHECK(r.weights.value() ==
        m.params * 2 + 131072ULL * 256 * 2 + (3 * 512 + 1024) * 1024 * 2 + (3 * 256 + 512) * 2 + 10 * 7 * 512);
  // Pipeline parallel is not laid out for these layers.
  s.pipeline_parallel = 2;
  CHECK_THROWS_AS(estimate(m, s), InputError);
}

TEST_CASE("vllm: gemma4 without a sliding window: every caching layer full, one group of their pages summed", "[vllm]") {
  nlohmann::json cfg = {{"model_type", "gemma4_text"}, {"hidden_size", 1024},          {"intermediate_size", 2048},
                        {"num_attention_heads", 8},    {"num_key_value_heads", 1},     {"head_dim", 256},
                        {"global_head_dim", 512},      {"num_hidden_layers", 10},      {"num_kv_shared_layers", 4},
                        {"hidden_size_per_layer_input", 256}, {"vocab_size", 262144}, {"sliding_window", nullptr},
                        {"max_position_embeddings", 131072}, {"tie_word_embeddings", true}};
  const spec::ModelSpec m = spec::from_config(cfg, "gemma4-no-window");
  Settings s = on(GiB(80));
  s.max_model_len = 131072;
  const Result r = estimate(m, s);
  // Caching layers 0-4 (head 256) and 5 (head 512), 1 KV head each: a block of 16 tokens is
  // 5 x 16384 + 32768 bytes; requests take cdiv(len, 16) blocks.
  CHECK(r.page_bytes == 5 * 16384 + 32768);
  CHECK(r.kv_groups == 1);
  CHECK(r.blocks_per_request == 8192);
  CHECK(kv_bytes_per_token(m, s) == (5 * 2 * 256 + 2 * 512) * 2);
}

TEST_CASE("vllm: gemma4 under tensor parallel keeps its norms and per-layer-input projections whole", "[vllm]") {
  // gemma4-e2b-mini: the norms (q_norm of the head size, k_norm on the caching layers, 4 of 1024,
  // post_per_layer_input_norm 1024: 56064 a model, the final 1024) and the ReplicatedLinear
  // per_layer_input_gate / per_layer_projection (1024 x 256 each, 10 layers) are whole on each
  // rank, as is the KV-shared layers' extra k_norm; the rotary cache is on every rank.
  const spec::ModelSpec m = gemma4_e2b_mini();
  Settings one = on(GiB(80)), two = on(GiB(80));
  two.tensor_parallel = 2;
  const std::uint64_t w1 = estimate(m, one).weights.value(), w2 = estimate(m, two).weights.value();
  const std::uint64_t whole = (57088ULL + 10 * 2 * 1024 * 256) * 2;
  CHECK(2 * w2 - w1 == whole + (3 * 256 + 512) * 2 + 131072ULL * 256 * 2 + 10 * 7 * 512);  // and the attention scalars
}

TEST_CASE("vllm: V1's runner buffers are allocated before the load, and the first weights fill their segment", "[vllm]") {
  // Qwen2.5-1.5B on V1 0.11.2 with max_num_batched_tokens 2048 and max_model_len 32768: the
  // model runner's block table (256 x 2048 int32, 2 MiB) and inputs_embeds (2048 x 1536 bf16,
  // 6 MiB) are live in one 20 MiB segment before the model is built; the first qkv_proj (6 MiB)
  // and o_proj (4.5 MiB) take its free 12 MiB, and the 4.5 MiB o_proj blocks of the later layers
  // pack so that one fewer is left with an unsplit 0.5 MiB tail than when the load starts on an
  // empty large pool (V0, whose buffers are made after the load): 512 KiB less, "2.8871 GiB".
  const spec::ModelSpec m = preset("qwen2.5-1.5b");
  Settings s = on(GiB(16));
  s.release = Release{0, 11, 2};
  s.max_model_len = 32768;
  s.max_num_batched_tokens = 2048;
  const std::uint64_t v1 = estimate(m, s).weights.value();
  s.v0_engine = true;
  const std::uint64_t v0 = estimate(m, s).weights.value();
  CHECK(v0 - v1 == 512 * 1024);
  CHECK(v1 == 3099980800ULL);  // 2.88706 GiB
  // Buffers of the small pool (1 MiB or less) leave the large pool empty: the same layout.
  s.max_model_len = 2048;            // block table 256 x 128 x 4 = 128 KiB
  s.max_num_batched_tokens = 256;    // inputs_embeds 256 x 1536 x 2 = 768 KiB
  const std::uint64_t small_v0 = estimate(m, s).weights.value();
  s.v0_engine = false;
  CHECK(estimate(m, s).weights.value() == small_v0);
}
