// Many GPUs: ZeRO's model-state formulas against the ZeRO paper and DeepSpeed's estimator,
// pipeline stages, nodes, offload.
#include <catch2/catch.hpp>

#include <cmath>

#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using engine::ComponentId;

namespace {

std::uint64_t part(const engine::Breakdown& b, ComponentId id) {
  const auto* c = b.find(id);
  REQUIRE(c != nullptr);
  return c->bytes.value();
}

// weights + gradients + optimizer state: the "model states" of the ZeRO paper. The
// weights' component also holds the model's buffers (rotary tables), not counted there.
std::uint64_t model_states(const engine::Breakdown& b, const spec::ModelSpec& m) {
  return part(b, ComponentId::weights) + part(b, ComponentId::gradients) + part(b, ComponentId::optimizer_state) - m.buffer_bytes;
}

// Mixed-precision Adam as the ZeRO paper counts it: 16-bit parameters and gradients, fp32
// master weights, momentum and variance (K = 12 bytes per parameter).
spec::Workload mixed_adam(spec::Sharding s, std::uint64_t gpus, std::uint64_t nodes) {
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.weights = DType::fp16;
  w.master_weights = true;
  w.optimizer = spec::Optimizer::adamw_fused;
  w.batch = 1;
  w.seq = 1;
  w.gpus = gpus;
  w.nodes = nodes;
  w.sharding = s;
  return w;
}

double gb(std::uint64_t b) { return static_cast<double>(b) / 1e9; }

}  // namespace

TEST_CASE("ZeRO paper, Figure 1: 7.5B parameters on 64 GPUs", "[engine][sharding]") {
  // Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  // Models" (SC'20), Figure 1: baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB.
  const auto m = spec::from_param_count(7500000000);
  const std::uint64_t psi = 7500000000;
  struct Row {
    spec::Sharding s;
    std::uint64_t expected;
    double paper_gb;
  };
  for (const Row& r : {Row{spec::Sharding::ddp, 16 * psi, 120.0}, Row{spec::Sharding::zero1, 4 * psi + 12 * psi / 64, 31.4},
                       Row{spec::Sharding::zero2, 2 * psi + 14 * psi / 64, 16.6},
                       Row{spec::Sharding::zero3, 16 * psi / 64, 1.9}}) {
    // 8 nodes of 8 GPUs: ZeRO shards over all 64.
    const auto b = engine::estimate(m, mixed_adam(r.s, 8, 8));
    INFO(spec::name_of(r.s));
    // Each part is rounded up per GPU; the buffers are sharded with the weights under ZeRO-3.
    CHECK(model_states(b, m) + m.buffer_bytes >= r.expected);
    CHECK(model_states(b, m) <= r.expected + 3);
    CHECK(std::round(gb(model_states(b, m)) * 10) / 10 == Approx(r.paper_gb));
  }
}

TEST_CASE("DeepSpeed's estimator: what offloading leaves on the GPU", "[engine][sharding]") {
  // deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs:
  // offload_optimizer=cpu -> gpu_mem = 2 * total_params (the 16-bit parameters).
  // stage3.py estimate_zero3_model_states_mem_needs, offload_optimizer only:
  // gpu_mem = largest_layer_memory + 2 * total_params / total_gpus (gathered layers apart).
  const auto m = spec::from_param_count(7000000000);
  auto w = mixed_adam(spec::Sharding::zero2, 4, 1);
  w.offload = spec::Offload::optimizer;
  CHECK(model_states(engine::estimate(m, w), m) == 2ULL * 7000000000);
  w.sharding = spec::Sharding::zero3;  // the buffers are sharded with the parameters
  const auto z3 = engine::estimate(m, w);
  CHECK(part(z3, ComponentId::weights) == (2ULL * 7000000000 + m.buffer_bytes + 3) / 4);
  CHECK(part(z3, ComponentId::gradients) + part(z3, ComponentId::optimizer_state) == 0);
  // ZeRO-Offload's point: one GPU (world size 1) with the optimizer on the CPU.
  w.gpus = 1;
  w.sharding = spec::Sharding::zero2;
  CHECK(model_states(engine::estimate(m, w), m) == 2ULL * 7000000000);
  w.offload = spec::Offload::params;
  w.sharding = spec::Sharding::zero3;
  const auto b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::weights) + part(b, ComponentId::gradients) + part(b, ComponentId::optimizer_state) == 0);
  CHECK(part(b, ComponentId::sharding_buffers) > 0);  // the gathered layers stay on the GPU
}

TEST_CASE("nodes multiply the data-parallel world, tensor parallelism stays in a node", "[engine][sharding]") {
  const auto m = spec::from_param_count(7000000000);
  CHECK(model_states(engine::estimate(m, mixed_adam(spec::Sharding::zero3, 8, 2)), m) ==
        model_states(engine::estimate(m, mixed_adam(spec::Sharding::zero3, 16, 1)), m));
  const auto tp1 = engine::estimate(m, mixed_adam(spec::Sharding::tp, 8, 1));
  const auto tp2 = engine::estimate(m, mixed_adam(spec::Sharding::tp, 8, 2));
  CHECK(model_states(tp1, m) == model_states(tp2, m));
  CHECK(part(tp1, ComponentId::sharding_buffers) == 0);
  CHECK(part(tp2, ComponentId::sharding_buffers) == (7000000000ULL * 2 + 7) / 8);  // DDP buckets across nodes
}

TEST_CASE("pipeline stages: the first stage holds its layers and S micro-batches in flight", "[engine][sharding]") {
  const auto m = spec::from_config_text(R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
      "num_hidden_layers": 16, "num_attention_heads": 16, "vocab_size": 32000, "tie_word_embeddings": false})",
                                        "pp.json");
  spec::Workload one;
  one.mode = spec::Mode::train;
  one.batch = 4;
  one.seq = 1024;
  one.grad_accum = 8;
  spec::Workload pp = one;
  pp.gpus = 4;
  pp.sharding = spec::Sharding::pp;
  const auto b1 = engine::estimate(m, one);
  const auto b4 = engine::estimate(m, pp);
  // Parameters: 4 of 16 layers plus the larger edge (embedding or lm_head, equal here).
  std::uint64_t layer = 0;
  for (const auto& l : m.layers[0].linears) layer += l.params();
  layer += m.layers[0].norm_params;
  const std::uint64_t stage = 4 * layer + m.embedding_params;
  CHECK(part(b4, ComponentId::weights) == Approx(static_cast<double>(stage * 2 + m.buffer_bytes)).epsilon(1e-5));
  CHECK(part(b4, ComponentId::weights) < part(b1, ComponentId::weights) / 3);
  // Activations: 4 micro-batches of a quarter of the layers = one micro-batch of all layers.
  CHECK(part(b4, ComponentId::activations) <= part(b1, ComponentId::activations));
  CHECK(part(b4, ComponentId::activations) >= part(b1, ComponentId::activations) * 9 / 10);
}

TEST_CASE("paged optimizers keep their state outside PyTorch's allocator", "[engine][sharding]") {
  const auto m = spec::from_param_count(1000000000);
  spec::Workload w;
  w.mode = spec::Mode::train;
  w.optimizer = spec::Optimizer::paged_adamw_8bit;
  const auto b = engine::estimate(m, w);
  CHECK(part(b, ComponentId::optimizer_state) == 0);
  const std::uint64_t paged = part(b, ComponentId::paged_optimizer_state);
  CHECK(paged == 2ULL * 1000000000 + (1000000000ULL + 2047) / 2048 * 8);
  CHECK(b.device_total == b.peak_allocated + b.allocator_reserve + b.cuda_context + Bytes{paged});
  CHECK_FALSE(b.find(ComponentId::paged_optimizer_state)->in_peak_allocated);
  w.optimizer = spec::Optimizer::paged_adamw;  // fp32 states whatever the parameters' dtype
  CHECK(part(engine::estimate(m, w), ComponentId::paged_optimizer_state) == 8ULL * 1000000000);
}
