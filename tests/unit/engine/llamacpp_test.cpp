#include "vramfit/engine/llamacpp.hpp"

#include <catch2/catch.hpp>

#include "../spec/gguf_writer.hpp"
#include "vramfit/core/error.hpp"
#include "vramfit/spec/gguf.hpp"
#include "vramfit/spec/parse.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

using namespace vramfit;
using namespace vramfit::engine::llamacpp;
using engine::ComponentId;

namespace {

struct Tiny {
  spec::GgufHeader header;
  spec::ModelSpec spec;
};

/// The two-layer Q8_0 llama of gguf_writer.hpp: hidden 64, 2 KV heads of 16, MLP 128, 256 tokens.
Tiny tiny() {
  const test::GgufWriter w = test::tiny_llama_gguf();
  const std::string bytes = w.header();
  Tiny t;
  t.header = spec::parse_gguf_header(bytes, bytes.size() + w.data_size(), "tiny.gguf");
  t.spec = spec::spec_from_gguf(t.header, "tiny.gguf");
  return t;
}

// Tensor sizes of the tiny model (Q8_0: 34 bytes per 32 values). On CUDA, each quantized tensor
// whose rows are not a multiple of 512 gets one partial row more (448 values = 476 bytes, or
// 384 values = 408 bytes for ffn_down's 128-value rows), and every tensor is padded to 128 bytes:
//   norms 256; attn_q, attn_output 4352 + 476 -> 4864; attn_k, attn_v 2176 + 476 -> 2688;
//   ffn_gate, ffn_up 8704 + 476 -> 9216; ffn_down 8704 + 408 -> 9216; output 17408 + 476 -> 17920.
constexpr std::uint64_t kLayerOnCuda = 256 + 4864 + 2688 + 2688 + 4864 + 256 + 3 * 9216;  // 43264
constexpr std::uint64_t kOutputOnCuda = 256 + 17920;
constexpr std::uint64_t kTokenEmbd = 17408;  // 256 rows of 68 bytes
constexpr std::uint64_t kLayerInFile = 39680;

}  // namespace

TEST_CASE("llama.cpp: every layer offloaded, the token embeddings stay mapped on the host", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  const Result r = estimate(t.spec, t.header.tensors, s);
  REQUIRE(r.gpus.size() == 1);
  CHECK(r.gpus[0].model.value() == 2 * kLayerOnCuda + kOutputOnCuda);  // 104704
  CHECK(r.host.model.value() == kTokenEmbd);
  CHECK(r.offloaded == 3);
  CHECK(r.offloadable == 3);
  CHECK(r.output_on_gpu);
  // K and V: 2 heads x 16 = 32 f16 values (64 bytes) per cell, 512 cells, 2 layers.
  CHECK(r.gpus[0].kv.value() == 2 * 2 * 64 * 512);
  CHECK(r.host.kv.value() == 0);
  CHECK(r.n_ctx == 512);
  CHECK(r.output_buffer.value() == 256 * 4);
}

TEST_CASE("llama.cpp: -ngl puts the output layer first, then the last blocks", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.gpu_layers = 1;  // current rule: the output layer only
  Result r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == kOutputOnCuda);
  CHECK(r.gpus[0].layers == 0);
  CHECK(r.host.layers == 2);
  // The mapped range runs from token_embd to the end of blk.1.
  CHECK(r.host.model.value() == kTokenEmbd + 2 * kLayerInFile);
  CHECK(r.gpus[0].kv.value() == 0);
  CHECK(r.host.kv.value() == 2 * 2 * 64 * 512);

  s.gpu_layers = 2;  // the output layer and blk.1
  r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == kLayerOnCuda + kOutputOnCuda);
  CHECK(r.host.model.value() == kTokenEmbd + kLayerInFile);

  s.layer_rule = LayerRule::legacy;  // older builds: the last N blocks, the output layer only past n_layer
  s.gpu_layers = 1;
  r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == kLayerOnCuda);
  CHECK_FALSE(r.output_on_gpu);
  // The CPU tensors are token_embd, blk.0 and the output: the mapping spans the whole file.
  CHECK(r.host.model.value() == 114432);
  s.gpu_layers = 2;
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].model.value() == 2 * kLayerOnCuda);
}

TEST_CASE("llama.cpp: without mmap the host reads its tensors into buffers", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.gpu_layers = 0;
  s.mmap = false;
  const Result r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == 0);
  CHECK(r.host.model.value() == 114432);  // every size here is a multiple of 32
  CHECK(r.offloaded == 0);
}

TEST_CASE("llama.cpp: KV cache types, padding and sequences", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 500;  // padded to 512
  s.cache_type_k = "q8_0";
  s.flash_attn = true;
  s.cache_type_v = "q4_0";
  // With flash attention (on, or auto) llama.cpp refuses a cache whose blocks of 32 do not divide
  // the head (16 here): "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16".
  try {
    (void)estimate(t.spec, t.header.tensors, s);
    FAIL("estimated");
  } catch (const InputError& e) {
    CHECK(e.diagnostics().at(0).field == "--cache-type-k");
    CHECK(e.diagnostics().at(0).problem == "K cache type Q8_0 has blocks of 32 values, which do not divide the K head "
                                           "of 16: llama.cpp refuses it with flash attention on");
  }
  s.flash_attn = false;
  s.flash_attn_auto = true;  // auto resolved off: the check ran before
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.flash_attn_auto = false;  // off: a quantized K cache is taken, a quantized V one is not
  s.cache_type_v = "f16";
  Result r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.n_ctx == 512);
  // q8_0: one 34-byte block per cell, + 15 blocks of row padding on CUDA, to 128: 17408 + 510 -> 17920;
  // f16 V: 512 cells x 32 values x 2 bytes.
  CHECK(r.gpus[0].kv.value() == 2 * (17920 + 32768));

  s.cache_type_v = "q4_0";
  s.flash_attn = false;
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.cache_type_v = "q3_x";
  s.cache_type_k = "f16";
  s.flash_attn = true;
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.cache_type_v = "q4_K";  // a ggml type, but not one llama.cpp accepts for the cache
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.cache_type_v = "f16";
  s.parallel = 600;  // more than LLAMA_MAX_SEQ: "n_seq_max must be <= 256"
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.parallel = 256;  // the most llama.cpp takes
  CHECK(estimate(t.spec, t.header.tensors, s).n_stream == 256);
  s.parallel = 257;
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.parallel = 1;

  // --parallel 3 without a unified cache: 1000 -> 1024 cells, 3 streams of pad(341, 256) = 512.
  Settings p;
  p.ctx_size = 1000;
  p.parallel = 3;
  r = estimate(t.spec, t.header.tensors, p);
  CHECK(r.n_ctx_seq == 512);
  CHECK(r.n_ctx == 1536);
  CHECK(r.n_stream == 3);
  CHECK(r.gpus[0].kv.value() == 2 * 2 * 64 * 512 * 3);
  p.kv_unified = true;
  r = estimate(t.spec, t.header.tensors, p);
  CHECK(r.n_ctx == 1024);
  CHECK(r.gpus[0].kv.value() == 2 * 2 * 64 * 1024);
  CHECK(r.output_buffer.value() == 256 * 4 * 3);

  p.kv_offload = false;
  r = estimate(t.spec, t.header.tensors, p);
  CHECK(r.gpus[0].kv.value() == 0);
  CHECK(r.host.kv.value() == 2 * 2 * 64 * 1024);
}

TEST_CASE("llama.cpp: two GPUs split the layers by --tensor-split, the output layer on the last", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.gpu_memory = {GiB(24), GiB(12)};
  s.tensor_split = {1, 1};
  // Layers 0, 1 and the output (index 2) over 3: 0/3 and 1/3 < 0.5 -> CUDA0, 2/3 -> CUDA1.
  Result r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].layers == 2);
  CHECK(r.gpus[1].layers == 0);
  CHECK(r.gpus[0].model.value() == 2 * kLayerOnCuda);
  CHECK(r.gpus[1].model.value() == kOutputOnCuda);
  CHECK(r.gpus[1].kv.value() == 0);
  CHECK(r.output_gpu == 1);

  s.tensor_split = {1, 3};  // split point 0.25: layer 0 on CUDA0, layer 1 and the output on CUDA1
  r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == kLayerOnCuda);
  CHECK(r.gpus[1].model.value() == kLayerOnCuda + kOutputOnCuda);
  CHECK(r.gpus[0].kv.value() == 2 * 64 * 512);

  s.tensor_split.clear();  // by memory: 24:12 -> split point 2/3: layers 0, 1 on CUDA0
  r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].layers == 2);

  s.tensor_split = {1, 2, 3};
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
}

TEST_CASE("llama.cpp: pipeline parallelism keeps four copies of each GPU's split inputs", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.gpu_memory = {GiB(24), GiB(24)};
  s.tensor_split = {1, 3};  // layer 0 on CUDA0; layer 1 and the output on CUDA1
  // Every layer and the output offloaded over two GPUs: n_copies = 4. The scheduler allocates
  // all 4 copies of each of CUDA0's split inputs first and keeps them: the hidden state coming in
  // ([64, 512] f32 = 131072 bytes), the positions (512 x 4 bytes), the K and V cells' indices
  // (ggml_set_rows: K's [512] i64, V's without flash attention one per element of the transposed
  // V rows, [512 x 32] i64) and the f32 KQ mask ([512, 512]).
  const Result pp = estimate(t.spec, t.header.tensors, s);
  s.kv_offload = false;  // no pipeline parallelism without the KV cache on the GPUs
  const Result flat_kv_host = estimate(t.spec, t.header.tensors, s);
  s.kv_offload = true;
  s.gpu_layers = 2;  // the output on the host: no pipeline parallelism either
  const Result partial = estimate(t.spec, t.header.tensors, s);
  // Above them, CUDA0's graph (one layer, no output, no flash attention) peaks at the KQ scores
  // [512, 512, 4 heads] f32, placed on the tail above the RoPE'd Q ([64, 512] f32): RoPE of the
  // reshaped Q projection is not in place (a view is never reused), so Q's copy sits at 2 x
  // 131072, above the normed input and the projection, whose freed 262144 bytes the smaller K
  // and V tensors reuse but the 4 MiB of scores cannot.
  const std::uint64_t graph = 3 * (64ULL * 512 * 4) + 512ULL * 512 * 4 * 4;                // 4587520
  const std::uint64_t copies =
      4 * (64ULL * 512 * 4 + 512 * 4) + 4 * (512 * 8 + 512 * 32 * 8) + 4 * (512ULL * 512 * 4);  // 5267456
  CHECK(pp.gpus[0].compute.value() == graph + copies);
  CHECK(partial.gpus[0].compute.value() < pp.gpus[0].compute.value());
  CHECK(flat_kv_host.gpus[0].compute.value() < pp.gpus[0].compute.value());
}

TEST_CASE("llama.cpp: compute buffers shrink with flash attention and a smaller ubatch", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 4096;
  const Result base = estimate(t.spec, t.header.tensors, s);
  s.flash_attn = true;
  const Result fa = estimate(t.spec, t.header.tensors, s);
  CHECK(fa.gpus[0].compute < base.gpus[0].compute);
  s.ubatch_size = 128;
  const Result small = estimate(t.spec, t.header.tensors, s);
  CHECK(small.gpus[0].compute < fa.gpus[0].compute);
  // The attention scores without flash attention: 4096 cells x 512 tokens x 4 heads x 4 bytes.
  CHECK(base.gpus[0].compute.value() >= 4096ULL * 512 * 4 * 4);
}

TEST_CASE("llama.cpp: a context under the ubatch sizes the ubatch", "[llamacpp]") {
  // llama_context: n_batch = min(-c as given, n_batch), n_ubatch = min(n_batch, n_ubatch): -c 100
  // (256 cells once padded) runs ubatches of 100 tokens, as -c 256 -ub 100 does (a Qwen2-1.5B-shaped
  // file on the build machine's CPU: 59.13 MiB as llama.cpp logged, 151.38 with ubatches of 256).
  const Tiny t = tiny();
  Settings small;
  small.ctx_size = 100;
  Settings ub;
  ub.ctx_size = 256;
  ub.ubatch_size = 100;
  const Result a = estimate(t.spec, t.header.tensors, small), b = estimate(t.spec, t.header.tensors, ub);
  CHECK(a.n_ctx == 256);
  CHECK(a.gpus[0].compute == b.gpus[0].compute);
  CHECK(a.host.compute == b.host.compute);
  Settings full;
  full.ctx_size = 256;
  CHECK(estimate(t.spec, t.header.tensors, full).gpus[0].compute > a.gpus[0].compute);
}

TEST_CASE("llama.cpp: without flash attention ggml-cuda's pool holds cuBLAS's f16 copy of the scores", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 4096;
  const Result base = estimate(t.spec, t.header.tensors, s);
  // KQV at a full cache: the scores in f16, 4096 cells x 512 tokens x 4 heads (16 MiB), the
  // product in f16, 16 x 512 x 4 (64 KiB), the pointer arrays 4 x 16 and 4 x 8 bytes (128 each
  // after alignment): 16842752 + 256 bytes, mapped in 2 MiB pieces: 18 MiB.
  CHECK(base.gpus[0].pool.value() == 18ULL << 20);
  CHECK(base.gpus[0].total() == base.gpus[0].model + base.gpus[0].kv + base.gpus[0].compute + base.gpus[0].pool);
  const engine::Breakdown b = breakdown_of(base, s);
  REQUIRE(b.find(ComponentId::temporaries) != nullptr);
  CHECK(b.find(ComponentId::temporaries)->bytes.value() == 18ULL << 20);
  s.flash_attn = true;  // the flash-attention kernels' temporaries are in the compute buffer
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].pool.value() == 0);
  s.flash_attn = false;
  s.ubatch_size = 16;  // mul_mat_f: no cuBLAS, no copy
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].pool.value() == 0);
  s.ubatch_size = 512;
  s.parallel = 2;  // two streams of 2048 cells: 8 MiB of scores + 64 KiB + 256 -> 10 MiB
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].pool.value() == 10ULL << 20);
  s.parallel = 1;
  s.cache_type_k = s.cache_type_v = "f32";  // nothing converted: the pointer arrays, one 2 MiB piece
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].pool.value() == 2ULL << 20);
  s.cache_type_k = s.cache_type_v = "f16";
  s.gpu_layers = 0;  // no GPU layer: op offload still runs the host's attention on the GPU
  CHECK(estimate(t.spec, t.header.tensors, s).gpus[0].pool.value() == 18ULL << 20);
  s.no_gpu = true;  // --device none: no GPU backend, the CPU runs the attention
  const Result cpu = estimate(t.spec, t.header.tensors, s);
  CHECK((cpu.gpus.empty() || cpu.gpus[0].pool.value() == 0));
  CHECK((cpu.gpus.empty() || cpu.gpus[0].compute.value() == 0));
}

TEST_CASE("llama.cpp: the breakdown adds up on the binding GPU", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.gpu_memory = {GiB(1), GiB(1)};
  s.tensor_split = {1, 3};
  const Result r = estimate(t.spec, t.header.tensors, s);
  const engine::Breakdown b = breakdown_of(r, s);
  CHECK(binding_gpu(r, s) == 1);  // CUDA1 holds more
  std::uint64_t sum = 0;
  for (const auto& c : b.components)
    if (c.in_peak_allocated) sum += c.bytes.value();
  CHECK(sum == b.peak_allocated.value());
  CHECK(b.peak_allocated.value() == r.gpus[1].total().value());
  CHECK(b.device_total == b.peak_allocated + b.allocator_reserve + b.cuda_context);
  CHECK(b.find(ComponentId::compute_buffer) != nullptr);
}

TEST_CASE("llama.cpp: tensors_of lays a config out as llama-quantize does", "[llamacpp]") {
  const Tiny t = tiny();
  const auto tensors = tensors_of(t.spec, "Q8_0");
  std::uint64_t bytes = 0;
  for (const auto& x : tensors) bytes += x.bytes;
  CHECK(bytes == 114432);
  CHECK(tensors.front().name == "token_embd.weight");
  CHECK(tensors.back().name == "output.weight");
  // The same buffers as the file's own tensors.
  Settings s;
  s.ctx_size = 512;
  const Result a = estimate(t.spec, t.header.tensors, s);
  const Result b = estimate(t.spec, tensors, s);
  CHECK(b.host.model == a.host.model);
}

TEST_CASE("llama.cpp: --override-tensor moves the tensors its first matching pattern names", "[llamacpp]") {
  const Tiny t = tiny();
  Settings s;
  s.ctx_size = 512;
  s.override_tensor = {{"blk\\.1\\.ffn_(gate|up|down)", -1}};
  Result r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == 2 * kLayerOnCuda + kOutputOnCuda - 3 * 9216);
  CHECK(r.host.model.value() > kTokenEmbd);  // the mapped range now reaches blk.1's FFN
  // The first pattern that matches wins: ffn_down stays, ffn_gate, ffn_up and ffn_norm (256
  // bytes) of both blocks go.
  s.override_tensor = {{"ffn_down", 0}, {"ffn_.*", -1}};
  r = estimate(t.spec, t.header.tensors, s);
  CHECK(r.gpus[0].model.value() == 2 * kLayerOnCuda + kOutputOnCuda - 4 * 9216 - 2 * 256);
  // A pattern onto a GPU that is not there, or one that is not a regex: the flag's error.
  s.override_tensor = {{"output", 1}};
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
  s.override_tensor = {{"blk.(", -1}};
  CHECK_THROWS_AS(estimate(t.spec, t.header.tensors, s), InputError);
}

TEST_CASE("llama.cpp: experts left on the host are copied into the GPU's compute buffer from 32 rows on", "[llamacpp]") {
  // A small Qwen3-MoE: 4 layers, 16 experts of 128, 2 used.
  const nlohmann::json cfg = {{"model_type", "qwen3_moe"}, {"hidden_size", 256}, {"num_hidden_layers", 4},
                              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64},
                              {"intermediate_size", 512}, {"moe_intermediate_size", 128}, {"num_experts", 16},
                              {"num_experts_per_tok", 2}, {"vocab_size", 1000}, {"max_position_embeddings", 4096},
                              {"tie_word_embeddings", false}};
  const spec::ModelSpec m = spec::from_config(cfg, "tiny-moe");
  const auto tensors = tensors_of(m, "Q8_0");
  std::size_t experts = 0;
  for (const auto& t : tensors)
    if (t.name.find("_exps.weight") != std::string::npos) ++experts;
  CHECK(experts == 4 * 3);  // ffn_gate_exps, ffn_up_exps (the fused gate_up, split), ffn_down_exps
  Settings s;
  s.ctx_size = 512;
  s.flash_attn = true;
  const auto compute = [&](std::uint64_t ub, std::uint64_t n_cpu_moe) {
    s.ubatch_size = ub;
    s.n_cpu_moe = n_cpu_moe;
    return estimate(m, tensors, s).gpus.at(0).compute.value();
  };
  // Below 32 rows ggml-cuda leaves the host experts' matmuls to the CPU: nothing is copied.
  CHECK(compute(16, 4) == compute(16, 0));
  // From 32 rows on it runs them, each weight copied in at its own split.
  CHECK(compute(512, 4) > compute(512, 0));
  CHECK(compute(512, 2) > compute(512, 0));
}

TEST_CASE("llama.cpp: a deepseek2 file without attn_k_b / attn_v_b caches every head's K and V", "[llamacpp]") {
  // A small DeepSeek-V2: 2 layers, 4 heads, MLA latent 64 + rope 16, no-rope 32, V 32.
  const nlohmann::json cfg = {{"model_type", "deepseek_v2"}, {"hidden_size", 256}, {"num_hidden_layers", 2},
                              {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"intermediate_size", 512},
                              {"kv_lora_rank", 64}, {"q_lora_rank", nullptr}, {"qk_rope_head_dim", 16},
                              {"qk_nope_head_dim", 32}, {"v_head_dim", 32}, {"vocab_size", 1000},
                              {"max_position_embeddings", 4096}, {"tie_word_embeddings", false},
                              {"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 64},
                              {"n_shared_experts", 1}, {"first_k_dense_replace", 1}, {"moe_layer_freq", 1}};
  const spec::ModelSpec m = spec::from_config(cfg, "tiny-mla");
  auto tensors = tensors_of(m, "F16");
  // The current converter: kv_b_proj split into attn_k_b [32, 64, 4] and attn_v_b [64, 32, 4].
  std::size_t k_b = 0, v_b = 0, kv_b = 0;
  for (const auto& t : tensors) {
    if (t.name.find(".attn_k_b.") != std::string::npos && t.ne == std::vector<std::uint64_t>{32, 64, 4}) ++k_b;
    if (t.name.find(".attn_v_b.") != std::string::npos && t.ne == std::vector<std::uint64_t>{64, 32, 4}) ++v_b;
    if (t.name.find(".attn_kv_b.") != std::string::npos) ++kv_b;
  }
  CHECK(k_b == 2);
  CHECK(v_b == 2);
  CHECK(kv_b == 0);
  Settings s;
  s.ctx_size = 512;
  // MLA: per layer and cell the latent + rope key (80) and the latent as V (64), in f16.
  CHECK(estimate(m, tensors, s).gpus.at(0).kv.value() == 2 * 512 * (80 + 64) * 2);
  // MLA's absorbed graph is simulated: without flash attention the scores of 4 heads over one
  // latent K head, [512 cells, 512 tokens, 4] f32 (4 MiB), are alive in the compute buffer.
  const std::uint64_t scores = 512ULL * 512 * 4 * 4;
  const std::uint64_t no_fa = estimate(m, tensors, s).gpus.at(0).compute.value();
  CHECK(no_fa >= scores);
  s.flash_attn = true;  // flash_attn_ext: no scores
  CHECK(estimate(m, tensors, s).gpus.at(0).compute.value() + scores / 2 < no_fa);
  s.flash_attn = false;
  // A file converted before MLA support (one attn_kv_b): every head's K (32 + 16) and V (32).
  for (auto& t : tensors)
    if (const auto at = t.name.find(".attn_k_b."); at != std::string::npos) t.name.replace(at, 10, ".attn_kv_b.");
  CHECK(estimate(m, tensors, s).gpus.at(0).kv.value() == 2 * 512 * (4 * 48 + 4 * 32) * 2);
}

TEST_CASE("llama.cpp: minicpm3 caches every head's decompressed K and V", "[llamacpp]") {
  // MiniCPM3 (llama.cpp's MINICPM3 architecture): 2 layers, 16 heads, latent 256, no-rope 32 +
  // rope 32 a K head; v_head_dim null, so V heads of hidden / heads = 64.
  nlohmann::json cfg = {{"model_type", "minicpm3"}, {"hidden_size", 1024}, {"num_hidden_layers", 2},
                        {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"intermediate_size", 2560},
                        {"q_lora_rank", 768}, {"kv_lora_rank", 256}, {"qk_nope_head_dim", 64},
                        {"qk_rope_head_dim", 32}, {"vocab_size", 1000}, {"max_position_embeddings", 32768},
                        {"scale_emb", 12}, {"scale_depth", 1.4}, {"dim_model_base", 256},
                        {"tie_word_embeddings", true}};
  const spec::ModelSpec m = spec::from_config(cfg, "tiny-minicpm3");
  const auto tensors = tensors_of(m, "F16");
  // MiniCPM3Model (convert_hf_to_gguf.py) keeps kv_b_proj whole: attn_kv_b [256, 16 x (64 + 64)].
  std::size_t kv_b = 0, k_b = 0;
  for (const auto& t : tensors) {
    if (t.name.find(".attn_kv_b.") != std::string::npos && t.ne == std::vector<std::uint64_t>{256, 2048}) ++kv_b;
    if (t.name.find(".attn_k_b.") != std::string::npos) ++k_b;
  }
  CHECK(kv_b == 2);
  CHECK(k_b == 0);
  Settings s;
  s.ctx_size = 512;
  // Per layer and cell: K 16 heads x (64 + 32) = 1536 f16 (3072 bytes), V 16 x 64 = 1024 f16
  // (2048 bytes); 512 cells, 2 layers: 2 x 512 x 5120 = 5242880 bytes, each tensor a multiple of 128.
  CHECK(estimate(m, tensors, s).gpus.at(0).kv.value() == 5242880);
  // q8_0 K (34 bytes a 32-value block: 1536 -> 1632 bytes), f16 V: 2 x 512 x (1632 + 2048).
  s.cache_type_k = "q8_0";
  CHECK(estimate(m, tensors, s).gpus.at(0).kv.value() == 2 * 512 * (1632 + 2048));
  s.cache_type_k = "f16";
  // Longrope: rope_factors_long and rope_factors_short [16] f32 (64 bytes, 128 on CUDA), created
  // per layer with TENSOR_DUPLICATED: one copy of each on the GPU holding the layers.
  cfg["rope_scaling"] = {{"type", "longrope"},
                         {"long_factor", std::vector<double>(16, 1.0)},
                         {"short_factor", std::vector<double>(16, 1.0)},
                         {"original_max_position_embeddings", 32768}};
  const spec::ModelSpec lr = spec::from_config(cfg, "tiny-minicpm3-longrope");
  CHECK(estimate(lr, tensors_of(lr, "F16"), s).gpus.at(0).model.value() ==
        estimate(m, tensors, s).gpus.at(0).model.value() + 2 * 128);
  // A V head other than hidden / heads: llama.cpp cannot load attn_kv_b (no value_length key).
  cfg.erase("rope_scaling");
  cfg["v_head_dim"] = 32;
  const spec::ModelSpec v32 = spec::from_config(cfg, "tiny-minicpm3-v32");
  CHECK_THROWS_AS(estimate(v32, tensors_of(v32, "F16"), s), InputError);
}

TEST_CASE("llama.cpp: gemma4 caches each layer at its own width, the KV-shared layers none", "[llamacpp]") {
  // A small Gemma 4 (E2B-like): 10 layers, full attention on layers 5 and 9 (every 6th, the last
  // forced), the last 4 (6..9) KV-shared; sliding layers 1 KV head of 256, full ones 1 of 512
  // (global_head_dim); window 512; per-layer inputs of 256.
  nlohmann::json cfg = {{"model_type", "gemma4_text"}, {"hidden_size", 1024}, {"intermediate_size", 2048},
                        {"num_attention_heads", 8}, {"num_key_value_heads", 1}, {"head_dim", 256},
                        {"global_head_dim", 512}, {"num_hidden_layers", 10}, {"num_kv_shared_layers", 4},
                        {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 256},
                        {"vocab_size", 1000}, {"vocab_size_per_layer_input", 1000}, {"sliding_window", 512},
                        {"max_position_embeddings", 131072}, {"final_logit_softcapping", 30.0},
                        {"tie_word_embeddings", true}};
  const spec::ModelSpec m = spec::from_config(cfg, "tiny-gemma4");
  const auto tensors = tensors_of(m, "F16");
  Settings s;
  s.ctx_size = 4096;
  // The caching layers 0..5: sliding 0..4 in the SWA cache of pad(min(4096, 512 + 512), 256) = 1024
  // cells, full 5 in the 4096-cell one. Without flash attention every V row is padded to the widest
  // layer's, 512 (n_embd_v_gqa_max): full K 512 + V 512 f16 x 4096 = 8 MiB; each sliding layer K 256
  // + V 512 f16 x 1024 = 1.5 MiB, 7.5 MiB for five. Layers 6..9 hold nothing.
  Result r = estimate(m, tensors, s);
  CHECK(r.kv_cells_swa == 1024);
  CHECK(r.kv_size.value() == 8388608);
  CHECK(r.kv_size_swa.value() == 7864320);
  CHECK(r.kv_layers == 1);
  CHECK(r.kv_layers_swa == 5);
  CHECK(r.gpus.at(0).kv.value() == 8388608 + 7864320);
  // With flash attention each layer's V at its own width: the sliding layers 5 x 1 MiB.
  s.flash_attn = true;
  r = estimate(m, tensors, s);
  CHECK(r.kv_size_swa.value() == 5 * 1048576);
  CHECK(r.gpus.at(0).kv.value() == 8388608 + 5 * 1048576);
  // q8_0 K (34 bytes a block of 32: 256 -> 272 bytes, 512 -> 544): full (544 + 1024) x 4096,
  // sliding 5 x (272 + 512) x 1024, each sliding K tensor (rows of 256, not a multiple of 512) with
  // the CUDA buffer's partial row of 256 values (272 bytes), padded to 128: + 384 bytes.
  s.cache_type_k = "q8_0";
  CHECK(estimate(m, tensors, s).gpus.at(0).kv.value() == 1568ULL * 4096 + 5ULL * (784 * 1024 + 384));
  s.cache_type_k = "f16";
  s.flash_attn = false;
  // The per-layer inputs as the converter writes them, rope_freqs of the full layers (256 f32) and
  // each layer's layer_output_scale; no position table.
  const auto find = [&](const std::string& name) -> const spec::GgufTensor* {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  };
  REQUIRE(find("per_layer_token_embd.weight") != nullptr);
  CHECK(find("per_layer_token_embd.weight")->ne == std::vector<std::uint64_t>{2560, 1000});
  REQUIRE(find("per_layer_model_proj.weight") != nullptr);
  CHECK(find("per_layer_model_proj.weight")->ne == std::vector<std::uint64_t>{1024, 2560});
  REQUIRE(find("per_layer_proj_norm.weight") != nullptr);
  REQUIRE(find("rope_freqs.weight") != nullptr);
  CHECK(find("rope_freqs.weight")->ne == std::vector<std::uint64_t>{256});
  CHECK(find("blk.9.layer_output_scale.weight") != nullptr);
  CHECK(find("position_embd.weight") == nullptr);
  // -ngl 3: the output layer and blocks 8, 9 on the GPU, which hold no cache; rope_freqs (1 KiB) sits
  // once on the GPU, whose layer 9 is a full one, and once on the host.
  s.gpu_layers = 3;
  r = estimate(m, tensors, s);
  CHECK(r.gpus.at(0).kv.value() == 0);
  CHECK(r.host.kv.value() == 8388608 + 7864320);
  // Full and sliding layers of one width cannot be told apart: refused, naming --engine.
  cfg["global_head_dim"] = 256;
  const spec::ModelSpec same = spec::from_config(cfg, "tiny-gemma4-one-width");
  CHECK_THROWS_AS(estimate(same, tensors_of(same, "F16"), Settings{}), InputError);
}

TEST_CASE("llama.cpp: phi3's fused QKV split as each build splits it", "[llamacpp]") {
  // Phi-3 mini's shapes (hidden 3072, 32 heads of 96, no GQA, MLP 8192, 32 layers), every layer
  // on the GPU, ubatch 256, 4096 cells, no flash attention, KV stores as ggml_cpy (set_rows off).
  const nlohmann::json config = {{"model_type", "phi3"},          {"hidden_size", 3072},
                                 {"num_hidden_layers", 32},       {"num_attention_heads", 32},
                                 {"num_key_value_heads", 32},     {"intermediate_size", 8192},
                                 {"vocab_size", 32064},           {"max_position_embeddings", 4096},
                                 {"sliding_window", 2047},        {"tie_word_embeddings", false}};
  const spec::ModelSpec m = spec::from_config(config, "phi3-mini-shapes");
  const auto tensors = tensors_of(m, "Q4_K_M");
  Settings s;
  s.ctx_size = 4096;
  s.batch_size = s.ubatch_size = 256;
  s.set_rows = false;
  s.layer_rule = LayerRule::legacy;
  s.gpu_memory = {GiB(24)};
  const auto compute = [&](FusedQkv q) {
    s.fused_qkv = q;
    return estimate(m, tensors, s).gpus.at(0).compute.value();
  };
  const std::uint64_t views = compute(FusedQkv::views), v_copy = compute(FusedQkv::v_copy),
                      copies = compute(FusedQkv::copies);
  // The peak is at the KQ scores [4096, 256, 32] f32 (128 MiB), placed above what ggml-alloc's
  // free blocks hold then. With copies, Q, K and V are each copied out of the [9216, 256] product
  // and Q and K reshaped and RoPE'd into new tensors: the product dies at the V copy, and its
  // 9 MiB and the copies' blocks leave the scores 12 MiB (4 x [3072, 256] f32) higher than with
  // views, where the product lives to the V store and the RoPE'd Q and K fill its place. The July
  // 2025 build (copies) logs "CUDA0 compute buffer size = 150.00 MiB" for Phi-3 mini Q4_K_M
  // (tests/accuracy/serving/llamacpp_logs.jsonl); the views give 138.00 (the V copy alone, of the
  // builds between, changes nothing here).
  const std::uint64_t act = 3072ULL * 256 * 4;  // 3 MiB
  CHECK(views == 144705536);                    // 138.0039 MiB
  CHECK(v_copy == views);
  CHECK(copies == views + 4 * act);             // 157288448 = 150.0039 MiB
  CHECK(std::abs(static_cast<double>(copies) / (1024.0 * 1024.0) - 150.00) <= 0.005);
}

TEST_CASE("llama.cpp --fit's context step: kept, cut, uneven devices, short at the floor", "[llamacpp]") {
  const Tiny t = tiny();  // trained context 512
  REQUIRE(t.spec.max_positions == 512);
  const auto used = [](const DeviceBuffers& d) { return (d.model + d.kv + d.compute).value(); };
  Settings s;
  // No card: the trained context.
  CHECK(fit_ctx(t.spec, t.header.tensors, s, 512).n_ctx == 512);
  // A card that keeps the margin at the trained context: nothing changes.
  s.gpu_memory = {GiB(8)};
  FitCtx f = fit_ctx(t.spec, t.header.tensors, s, 512);
  CHECK(f.n_ctx == 512);
  CHECK_FALSE(f.cut());
  CHECK(f.short_by == Bytes{});
  CHECK_FALSE(f.uneven);
  // At or under --fit-ctx (4096) the context is not cut: what the margin lacks is left to the
  // layers. A card 1 MiB short of the projection plus the reserve and the 1024 MiB margin.
  Settings at = s;
  at.ctx_size = 512;
  const std::uint64_t need = used(estimate(t.spec, t.header.tensors, at).gpus[0]);
  s.gpu_memory = {Bytes{need} + s.gpu_reserve + MiB(1024) - MiB(1)};
  f = fit_ctx(t.spec, t.header.tensors, s, 512);
  CHECK(f.n_ctx == 512);
  CHECK(f.short_by == MiB(1));
  // A context above the floor is interpolated between the two projections: with 8192 cells asked,
  // a card that leaves room for the floor's projection and half the difference gets about half
  // of the cells over 4096, rounded down to 256.
  Settings big = s;
  big.ctx_size = 8192;
  const std::uint64_t full = used(estimate(t.spec, t.header.tensors, big).gpus[0]);
  big.ctx_size = 4096;
  const std::uint64_t low = used(estimate(t.spec, t.header.tensors, big).gpus[0]);
  const std::uint64_t room = low + (full - low) / 2;
  s.gpu_memory = {Bytes{room} + s.gpu_reserve + MiB(1024)};
  f = fit_ctx(t.spec, t.header.tensors, s, 8192);
  std::uint64_t expect = 4096 + (8192 - 4096) * (room - low) / (full - low);
  expect -= expect % 256;
  CHECK(f.n_ctx == expect);
  CHECK(f.cut());
  CHECK(f.short_by == Bytes{});
  // Two GPUs that keep their margins together but not each (every block on the first, 512 MiB
  // free beside them; the second has 8 GiB): --fit moves layers between them, the context stays.
  s.gpu_memory = {Bytes{full} + s.gpu_reserve + MiB(512), GiB(8)};
  s.tensor_split = {1, 0};
  f = fit_ctx(t.spec, t.header.tensors, s, 8192);
  CHECK(f.uneven);
  CHECK(f.n_ctx == 8192);
}
