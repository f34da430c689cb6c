// The non-PyTorch memory from its parts (engine/context.hpp): kernels loaded once, a cuDNN
// attention graph per distinct SDPA shape, 2 MiB pages, in a process of its own and through a process.
#include <catch2/catch.hpp>

#include "vramfit/engine/constants.hpp"
#include "vramfit/engine/context.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/engine/process.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;

namespace {

constexpr std::uint64_t kMiB = 1024ULL * 1024;
constexpr std::uint64_t kInit = 718077952;  // non_torch_bytes_after_init, every H200 results file
constexpr std::uint64_t kPlan = 92ULL * 1024;

// A small Llama: 2 layers, hidden 256, 4 heads of 64 (2 kv heads).
spec::ModelSpec tiny(const char* type = "llama", const char* extra = "") {
  return spec::from_config_text(std::string(R"({"model_type": ")") + type + R"(", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
      "tie_word_embeddings": false)" + extra + "}",
                                "tiny.json");
}

spec::Workload generate(std::uint64_t seq, std::uint64_t n) {
  spec::Workload w;
  w.mode = spec::Mode::generate;
  w.batch = 1;
  w.seq = seq;
  w.new_tokens = n;
  return w;
}

std::uint64_t round2(std::uint64_t v) { return (v + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB); }

}  // namespace

TEST_CASE("context: a long generate keeps a cuDNN graph per decode step, above the typical-process allowance",
          "[engine][context]") {
  const auto m = tiny();
  // 4096 new tokens: the prefill's shape and 4095 decode steps over 513 .. 4607 keys.
  const auto b = engine::estimate(m, generate(512, 4096));
  const std::uint64_t ctx4k = kInit + round2(2 * kMiB + 8 * kMiB + 4096 * kPlan);
  CHECK(ctx4k == 1114439680ULL);  // 1062.8 MiB
  CHECK(b.cuda_context.value() == ctx4k);
  CHECK(b.device_total == b.peak_allocated + b.allocator_reserve + b.cuda_context);
  bool noted = false;
  for (const auto& n : b.notes) noted = noted || n.find("cuDNN attention plans: 4096 shapes x 92 KiB = 368.0 MiB") != std::string::npos;
  CHECK(noted);
  const auto* c = b.find(engine::ComponentId::cuda_context);
  REQUIRE(c != nullptr);
  CHECK(c->description.find("cuDNN attention plans: 4096 shapes x 92 KiB") != std::string::npos);

  // 32768 new tokens: 2.9 GiB of graphs.
  CHECK(engine::estimate(m, generate(512, 32768)).cuda_context.value() ==
        kInit + round2(10 * kMiB + 32768ULL * kPlan));
  CHECK(kInit + round2(10 * kMiB + 32768ULL * kPlan) == 3815571456ULL);  // 3638.8 MiB

  // --cuda-context still decides.
  auto given = generate(512, 32768);
  given.cuda_context = Bytes{700 * kMiB};
  CHECK(engine::estimate(m, given).cuda_context.value() == 700 * kMiB);
}

TEST_CASE("context: eager attention and fp32 sdpa build no cuDNN graphs, short workloads keep the allowance",
          "[engine][context]") {
  const auto m = tiny();
  auto eager = generate(512, 32768);
  eager.attention = spec::Attention::eager;
  engine::ContextState s;
  CHECK(engine::add_workload(s, m, eager) == 0);
  CHECK(engine::context_bytes(s).value() == kInit + 2 * kMiB);  // 686.8 MiB: a first forward's kernels
  CHECK(engine::estimate(m, eager).cuda_context == engine::kCudaContext);

  auto fp32 = generate(512, 32768);
  fp32.weights = DType::fp32;
  CHECK(!engine::uses_cudnn_attention(m, fp32));
  CHECK(engine::estimate(m, fp32).cuda_context == engine::kCudaContext);

  // 512 new tokens in a process of its own: 740.8 MiB, under the 938.8 MiB allowance.
  engine::ContextState g;
  CHECK(engine::add_workload(g, m, generate(512, 512)) == 512);
  CHECK(engine::context_bytes(g).value() == kInit + round2(10 * kMiB + 512 * kPlan));
  CHECK(engine::estimate(m, generate(512, 512)).cuda_context == engine::kCudaContext);
}

TEST_CASE("context: a sliding-window cache stops making new decode shapes at the window", "[engine][context]") {
  // mistral: every layer slides over 1024 keys. Decode attends over 513 .. 1024 keys, then 1024 again.
  const auto m = tiny("mistral", R"(, "sliding_window": 1024)");
  REQUIRE(m.sliding_layers == 2);
  engine::ContextState s;
  CHECK(engine::add_workload(s, m, generate(512, 4096)) == 1 + 512);
}

TEST_CASE("context: one process accumulates kernels once and graphs per distinct shape", "[engine][context]") {
  const auto m = tiny();
  engine::ProcessHistory h;
  spec::Workload fwd;
  fwd.mode = spec::Mode::inference;
  fwd.batch = 1;
  fwd.seq = 512;
  // A forward: its kernels, cuDNN's, one graph.
  CHECK(engine::estimate_in_process(m, fwd, h).cuda_context.value() == kInit + round2(10 * kMiB + kPlan));
  CHECK(kInit + round2(10 * kMiB + kPlan) == 730660864ULL);  // 696.8 MiB
  // A generate over the same prompt: the prefill's shape is cached, 255 decode shapes are new.
  CHECK(engine::estimate_in_process(m, generate(512, 256), h).cuda_context.value() ==
        kInit + round2(10 * kMiB + 256 * kPlan));
  CHECK(h.context.plan_count == 256);
  // The same generate again adds nothing; an eager one adds nothing.
  CHECK(engine::estimate_in_process(m, generate(512, 256), h).cuda_context.value() ==
        kInit + round2(10 * kMiB + 256 * kPlan));
  auto eager = generate(512, 1024);
  eager.attention = spec::Attention::eager;
  (void)engine::estimate_in_process(m, eager, h);
  CHECK(h.context.plan_count == 256);
  // A longer one over the same prompt: only the steps past 767 keys are new.
  (void)engine::estimate_in_process(m, generate(512, 300), h);
  CHECK(h.context.plan_count == 300);
  // Training: its kernels, cuDNN backward's, the backward's graph on the autograd thread (the forward's is cached).
  spec::Workload train;
  train.mode = spec::Mode::train;
  train.batch = 1;
  train.seq = 512;
  const auto t = engine::estimate_in_process(m, train, h);
  CHECK(h.context.plan_count == 301);
  CHECK(t.cuda_context.value() == kInit + round2((2 + 8 + 64 + 8) * kMiB + 301 * kPlan));
  // A second model trained: 2 MiB more of its shapes' kernels.
  const auto other = tiny("qwen2");
  (void)engine::estimate_in_process(other, train, h);
  CHECK(h.context.trained_models.size() == 2);
  // estimate() of the same case knows no history: the allowance.
  CHECK(engine::estimate(m, train).cuda_context == engine::kCudaContext);
}

TEST_CASE("context: only sm90 and sm100 put cuDNN attention first, other GPUs build no graphs", "[engine][context]") {
  // sdp_utils.cpp check_prefer_cudnn_attention: major 9 or 10, minor 0.
  CHECK(engine::prefers_cudnn_attention(0));  // no GPU named: the H200's rules
  CHECK(engine::prefers_cudnn_attention(90));
  CHECK(engine::prefers_cudnn_attention(100));
  for (unsigned cc : {70U, 75U, 80U, 86U, 89U, 103U, 120U}) CHECK_FALSE(engine::prefers_cudnn_attention(cc));
  const auto m = tiny();
  auto on = [&](unsigned cc) {
    auto w = generate(512, 32768);
    w.compute_capability = cc;
    return w;
  };
  CHECK(engine::estimate(m, on(90)).cuda_context.value() == kInit + round2(10 * kMiB + 32768ULL * kPlan));
  CHECK(engine::estimate(m, on(100)).cuda_context.value() == kInit + round2(10 * kMiB + 32768ULL * kPlan));
  // An RTX 4090 (8.9) or an A100 (8.0): flash attention runs the decode, no graph, the allowance.
  CHECK(engine::estimate(m, on(89)).cuda_context == engine::kCudaContext);
  CHECK(engine::estimate(m, on(80)).cuda_context == engine::kCudaContext);
  engine::ContextState s;
  CHECK(engine::add_workload(s, m, on(89)) == 0);
  CHECK(engine::context_bytes(s).value() == kInit + 2 * kMiB);  // a first forward's kernels only
}
