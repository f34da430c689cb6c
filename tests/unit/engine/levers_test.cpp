// engine/levers.cpp: the training levers' exact bytes (a small Llama: hidden 256, vocab
// 32000, untied lm_head) and what each changes in a whole estimate.
#include <catch2/catch.hpp>

#include <algorithm>

#include "../../../src/engine/levers.hpp"
#include "vramfit/engine/estimate.hpp"
#include "vramfit/spec/parse.hpp"

using namespace vramfit;
using namespace vramfit::engine::detail;
using engine::ComponentId;
using engine::PhaseId;

namespace {

spec::ModelSpec tiny() {
  return spec::from_config_text(R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
      "tie_word_embeddings": false})",
                                "tiny.json");
}

spec::Workload training(spec::Mode mode, DType weights) {
  spec::Workload w;
  w.mode = mode;
  w.weights = weights;
  w.batch = 2;
  w.seq = 512;
  return w;
}

std::uint64_t part(const engine::Breakdown& b, ComponentId id) {
  const auto* c = b.find(id);
  REQUIRE(c != nullptr);
  return c->bytes.value();
}

std::uint64_t phase(const engine::Breakdown& b, PhaseId id) {
  for (const auto& p : b.phases)
    if (p.id == id) return p.allocated.value();
  FAIL("no phase " << engine::to_string(id));
  return 0;
}

}  // namespace

TEST_CASE("levers: autocast caches casts of trained leaf weights only", "[engine][levers]") {
  auto w = training(spec::Mode::train, DType::fp32);
  CHECK(autocast_caches_weights(w));
  w.mode = spec::Mode::lora;  // frozen base: requires_grad is False
  CHECK_FALSE(autocast_caches_weights(w));
  w.mode = spec::Mode::train;
  w.gpus = 2;
  for (auto s : {spec::Sharding::fsdp, spec::Sharding::fsdp_grad_op}) {  // views into the all-gather buffer
    w.sharding = s;
    CHECK_FALSE(autocast_caches_weights(w));
  }
  w.sharding = spec::Sharding::ddp;
  CHECK(autocast_caches_weights(w));
}

TEST_CASE("levers: LoRA on fp32 weights under autocast keeps no cast past a checkpointed layer", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::lora, DType::fp32);
  w.autocast = DType::bf16;
  w.checkpointing = true;
  const std::uint64_t tokens = 1024;
  const std::uint64_t lc = tokens * 32000 * 2;
  const std::uint64_t l4 = tokens * 32000 * 4;
  // Between forward's end and backward's start only the loss and autocast's copies change.
  // LoRA: the layers' casts die with each checkpointed layer (not cached); the lm_head's cast,
  // saved by its matmul outside the checkpoints, is in both phases.
  const auto lora = engine::estimate(m, w);
  CHECK(phase(lora, PhaseId::backward_start) - phase(lora, PhaseId::forward_end) == l4 - lc);
  // Full training caches every layer's cast until forward ends: 2 layers of 16-bit weights.
  w.mode = spec::Mode::train;
  const auto full = engine::estimate(m, w);
  std::uint64_t layer_params = 0;
  for (const auto& l : m.layers[0].linears) layer_params += l.params();
  const std::uint64_t casts = 2 * layer_params * m.layers[0].count;
  CHECK(phase(full, PhaseId::forward_end) + (l4 - lc) - phase(full, PhaseId::backward_start) == casts);
}

TEST_CASE("levers: loss bytes, hf / chunked / fused-linear / cce", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::train, DType::bf16);
  const Precision p = precision_of(w);
  const std::uint64_t tokens = 1024;
  const std::uint64_t lc = tokens * 32000 * 2;  // 65,536,000
  const std::uint64_t l4 = tokens * 32000 * 4;  // 131,072,000
  auto hf = loss_bytes(m, w, p, tokens);
  CHECK(hf.forward_end.value() == lc + 2 * l4);
  CHECK(hf.backward_start.value() == 3 * l4);
  w.loss = spec::Loss::chunked;
  auto ch = loss_bytes(m, w, p, tokens);
  CHECK(ch.forward_end.value() == lc + l4 + l4 / 8);
  // The first chunk's loss backward: nll_loss's and log_softmax's fp32 gradients beside every
  // saved log-softmax (measured: results/chunked_probe.jsonl).
  CHECK(ch.backward_start.value() == l4 + 2 * (l4 / 8));
  // The lm_head's backward: three vocab x hidden gradients (the sum of the first two chunks' out
  // of place) beside 6 of the 8 chunks' 16-bit logits gradients.
  const std::uint64_t vh = 32000ULL * 256 * 2;  // 16,384,000
  CHECK(ch.head_logits.value() == lc - 2 * (lc / 8));
  CHECK(ch.head_gradients.value() == vh);
  CHECK(ch.head_temporaries.value() == 2 * vh);
  CHECK(ch.head_grad_summed);
  // 8 times the tokens: a chunk's gradient is larger than vocab x hidden, the first product
  // beside every chunk's gradient is the moment.
  auto ch8 = loss_bytes(m, w, p, 8 * tokens);
  CHECK(ch8.head_logits.value() == 8 * lc);
  CHECK(ch8.head_gradients.value() == 0);
  CHECK(ch8.head_temporaries.value() == vh);
  w.mode = spec::Mode::lora;  // a frozen lm_head: no weight gradient
  const auto chl = loss_bytes(m, w, p, tokens);
  CHECK(chl.head_logits + chl.head_gradients + chl.head_temporaries == Bytes{});
  CHECK(!chl.head_grad_summed);
  CHECK(hf.head_temporaries == Bytes{});
  CHECK(!hf.head_grad_summed);
  w.mode = spec::Mode::train;
  w.loss = spec::Loss::fused_linear;
  // ceil(32000 / 256) = 125; ceil(1024 / 125) = 9; next power of two 16 rows per chunk.
  CHECK(fused_linear_chunk_rows(tokens, 256, 32000) == 16);
  CHECK(fused_linear_chunk_rows(3, 256, 32000) == 1);
  CHECK(fused_linear_chunk_rows(10, 4096, 1000) == 10);
  auto fl = loss_bytes(m, w, p, tokens);
  const std::uint64_t grad_input = tokens * 256 * 2;
  const std::uint64_t grad_weight = 32000ULL * 256 * 2;
  const std::uint64_t per_token = tokens * (4 + 1);  // loss_1d, target_mask
  const std::uint64_t chunk = 16 * 32000 * 2;
  // Liger's `grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()`: the bf16
  // product and its fp32 copy at once.
  CHECK(fl.forward_end.value() == grad_input + grad_weight + per_token + chunk + 32000ULL * 256 * (2 + 4));
  CHECK(fl.backward_start.value() == grad_input + grad_weight);
  w.mode = spec::Mode::lora;  // the lm_head is frozen: no grad_weight; grad_input's slice is the temporary
  CHECK(loss_bytes(m, w, p, tokens).forward_end.value() == grad_input + per_token + chunk + 16 * 256 * 2);
  CHECK(loss_bytes(m, w, p, tokens).backward_start.value() == grad_input);
  // Cut Cross-Entropy: lse (fp32), valids (int64) per token and logit_avg (fp32 per vocabulary
  // entry) saved; the per-token nll at forward's end; backward's vocab_ordering (int32) and
  // the gradients of e and c in bf16.
  w.mode = spec::Mode::train;
  w.loss = spec::Loss::cce;
  const std::uint64_t saved = tokens * (4 + 8) + 32000 * 4;
  auto cce = loss_bytes(m, w, p, tokens);
  CHECK(cce.forward_end.value() == saved + tokens * 4);
  CHECK(cce.backward_start.value() == saved + 32000 * 4 + grad_input + grad_weight);
  w.mode = spec::Mode::lora;
  CHECK(loss_bytes(m, w, p, tokens).backward_start.value() == saved + 32000 * 4 + grad_input);
  // fp32 weights under autocast: e and c were cast to bf16; their gradients are copied back to
  // fp32, dc first (dc bf16 + fp32 beside de), then de (de bf16 + fp32 beside dc's fp32).
  auto wa = training(spec::Mode::train, DType::fp32);
  wa.autocast = DType::bf16;
  wa.loss = spec::Loss::cce;
  const auto a = loss_bytes(m, wa, precision_of(wa), tokens);
  CHECK(a.backward_start.value() == saved + 32000 * 4 + std::max(grad_input + grad_weight * 3, grad_input * 3 + grad_weight * 2));
  // The lm_head's input stays saved under cce (e), not under fused-linear.
  CHECK(lm_head_input_not_saved(m, w, p) == 0);
  w.mode = spec::Mode::train;
  CHECK(lm_head_input_not_saved(m, w, p) == 0);
  w.loss = spec::Loss::fused_linear;
  CHECK(lm_head_input_not_saved(m, w, p) == 256 * 2);
}

TEST_CASE("levers: Unsloth's fused cross-entropy, chunk by chunk of at most 4 GiB of fp32 logits", "[engine][levers]") {
  // unsloth_zoo fused_losses get_chunk_size: one chunk while tokens x vocab x 4 <= 4 GiB, else the
  // next multiple of 4 chunks over exact = fp32 logits / 4 GiB; torch.chunk's rows.
  CHECK(unsloth_chunk_rows(0, 32000) == 0);
  CHECK(unsloth_chunk_rows(1024, 32000) == 1024);
  CHECK(unsloth_chunk_rows(8192, 128256) == 8192);      // 4.20e9 bytes <= 4 GiB (4.29e9): one chunk
  CHECK(unsloth_chunk_rows(16384, 128256) == 4096);     // exact 1.96: 4 chunks
  CHECK(unsloth_chunk_rows(8192, 151936) == 2048);      // exact 1.16: 4 chunks
  CHECK(unsloth_chunk_rows(131072, 128256) == 8192);    // exact 15.7: 16 chunks
  CHECK(unsloth_chunk_rows(131073, 128256) == 8193);    // torch.chunk rounds the rows up
  const auto m = tiny();
  auto w = training(spec::Mode::train, DType::bf16);
  w.loss = spec::Loss::unsloth;
  const Precision p = precision_of(w);
  const std::uint64_t tokens = 1024;
  const std::uint64_t grad_input = tokens * 256 * 2;
  const std::uint64_t grad_weight = 32000ULL * 256 * 2;
  const std::uint64_t labels = tokens * 8;
  const std::uint64_t chunk = tokens * 32000 * 2;  // one chunk: the whole logits
  // The chunk's logits, their gradient and grad_input's chunk; the vocab x hidden gradient comes
  // after the logits are freed (measured: 2.02 logits chunks above what forward leaves).
  auto b = loss_bytes(m, w, p, tokens);
  CHECK(b.forward_end.value() == grad_input + grad_weight + labels + 2 * chunk + tokens * 256 * 2);
  CHECK(b.backward_start.value() == 2 * (grad_input + grad_weight) + labels);
  w.mode = spec::Mode::lora;
  b = loss_bytes(m, w, p, tokens);
  CHECK(b.forward_end.value() == grad_input + labels + 2 * chunk + tokens * 256 * 2);
  CHECK(b.backward_start.value() == 2 * grad_input + labels);
  CHECK(lm_head_input_not_saved(m, w, p) == 0);  // frozen lm_head: nothing to take off
  w.mode = spec::Mode::train;
  CHECK(lm_head_input_not_saved(m, w, p) == 256 * 2);
}

TEST_CASE("levers: Cut Cross-Entropy saves the lm_head's input even when the lm_head is frozen", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::lora, DType::bf16);
  const Precision p = precision_of(w);
  CHECK(frozen_head_input_saved(m, w, p) == 0);  // hf: the frozen lm_head's matmul saves no input
  w.loss = spec::Loss::cce;
  CHECK(frozen_head_input_saved(m, w, p) == 256 * 2);
  w.mode = spec::Mode::train;  // head_saved counts it already
  CHECK(frozen_head_input_saved(m, w, p) == 0);
}

TEST_CASE("levers: a fused or chunked loss lowers a logits-bound peak", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::lora, DType::bf16);
  const auto hf = engine::estimate(m, w);
  w.loss = spec::Loss::chunked;
  const auto ch = engine::estimate(m, w);
  w.loss = spec::Loss::fused_linear;
  const auto fl = engine::estimate(m, w);
  w.loss = spec::Loss::cce;
  const auto cce = engine::estimate(m, w);
  CHECK(part(hf, ComponentId::logits) == 3 * 1024ULL * 32000 * 4);
  CHECK(hf.peak_allocated > ch.peak_allocated);
  CHECK(ch.peak_allocated > fl.peak_allocated);
  // Neither builds the logits: both peak inside the last layer's forward, at down_proj's LoRA
  // adapter, before the head (measured: the same peak to the byte, results/loss.jsonl).
  CHECK(fl.peak_phase == PhaseId::forward_layer);
  CHECK(cce.peak_phase == PhaseId::forward_layer);
  CHECK(fl.peak_allocated == cce.peak_allocated);
}

TEST_CASE("levers: the forward's transients at the last layer and the final norm", "[engine][levers]") {
  const auto m = tiny();  // hidden 256, intermediate 512, bf16
  auto w = training(spec::Mode::train, DType::bf16);
  auto t = forward_transient(m, w, precision_of(w));
  // Full training: inputs_embeds, the norm's input and its fp32 normalised product (the cast is
  // saved): 8 h. At down_proj: inputs_embeds, the layer's input, the residual, the MLP's input and
  // down's output (the product is saved): 5 x 2 h.
  CHECK(t.final_norm == 2 * 256 + 2 * 256 + 4 * 256);
  CHECK(t.has_mlp_moment);
  CHECK(t.mlp_out == 4 * 2 * 256 + 2 * 256);
  // LoRA (fp32 adapters): the norm's unsaved cast too; at down_proj the product (not saved by the
  // frozen down_proj), the base result, the scaled lora_B output and the sum in fp32: 18 h + 2 I.
  w.mode = spec::Mode::lora;
  t = forward_transient(m, w, precision_of(w));
  CHECK(t.final_norm == 2 * 256 + 2 * 256 + 4 * 256 + 2 * 256);
  CHECK(t.mlp_out == 4 * 2 * 256 + 512 * 2 + 256 * 2 + 2 * 256 * 4);
  // The final norm's backward: four fp32 hidden-sized tensors at pow's backward.
  CHECK(t.norm_backward == 4 * 256 * 4);
  // Checkpointed: the layer saved nothing, so down's fp32 cast of the product is alive too.
  w.checkpointing = true;
  CHECK(forward_transient(m, w, precision_of(w)).mlp_out == 4 * 2 * 256 + 512 * 2 + 512 * 4 + 256 * 2 + 2 * 256 * 4);
  // Whole estimate, LoRA with Cut Cross-Entropy: the forward_layer phase is the activations saved
  // before the head plus the down_proj moment's bytes.
  w.checkpointing = false;
  w.loss = spec::Loss::cce;
  const auto b = engine::estimate(m, w);
  CHECK(b.peak_phase == PhaseId::forward_layer);
  const auto* tmp = b.find(ComponentId::temporaries);
  REQUIRE(tmp != nullptr);
  CHECK(tmp->bytes.value() == 1024ULL * (4 * 2 * 256 + 512 * 2 + 256 * 2 + 2 * 256 * 4));
  // Full training with Cut Cross-Entropy: backward's start is the final norm's backward (the
  // loss's tensors and the lm_head's input freed; the lm_head's gradient and the norm's fp32
  // temporaries beside every other saved tensor), not the loss's own backward.
  auto f = training(spec::Mode::train, DType::bf16);
  f.loss = spec::Loss::cce;
  const auto fb = engine::estimate(m, f);
  const std::int64_t loss_fwd = 1024 * (4 + 8) + 32000 * 4 + 1024 * 4;  // lse, valids, logit_avg, nll
  CHECK(static_cast<std::int64_t>(phase(fb, PhaseId::backward_start)) - static_cast<std::int64_t>(phase(fb, PhaseId::forward_end)) ==
        -loss_fwd - 1024 * 256 * 2 + 32000 * 256 * 2 + 1024 * 4 * 256 * 4);
}

TEST_CASE("levers: FSDP mixed precision gathers 16-bit units over fp32 shards", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::train, DType::fp32);
  w.gpus = 4;
  w.sharding = spec::Sharding::fsdp;
  CHECK(gathered_param_bytes(w, precision_of(w)) == 4);
  const auto plain = engine::estimate(m, w);
  w.fsdp_param_dtype = DType::bf16;
  const Precision p = precision_of(w);
  CHECK(p.param == 4);
  CHECK(p.compute == 2);
  CHECK(p.residual == 2);
  CHECK_FALSE(p.autocast);
  CHECK(gathered_param_bytes(w, p) == 2);
  const auto mp = engine::estimate(m, w);
  // The sharded fp32 weights are those of plain fp32 FSDP, and there are no autocast casts.
  CHECK(part(mp, ComponentId::weights) == part(plain, ComponentId::weights));
  CHECK(part(mp, ComponentId::autocast_cache) == 0);
  // The gathered units: the layer and the prefetched next in 16 bits and the root (embedding,
  // lm_head, final norm) in 16 bits; in backward also the layer's fp32 reduce-scatter input.
  std::uint64_t layer = m.layers[0].norm_params + m.layers[0].other_params;
  for (const auto& l : m.layers[0].linears) layer += l.params();
  const std::uint64_t root = m.embedding_params + m.lm_head_params + m.final_norm_params;
  const bool backward = mp.peak_phase && engine::info(*mp.peak_phase).backward;
  REQUIRE(mp.peak_phase != PhaseId::optimizer_step);
  CHECK(part(mp, ComponentId::sharding_buffers) == 2 * layer * 2 + 2 * root + (backward ? 4 * layer : 0));
  CHECK(mp.peak_allocated < plain.peak_allocated);
  // --autocast over plain FSDP keeps the whole model's 16-bit casts saved by the matmuls.
  auto ac = training(spec::Mode::train, DType::fp32);
  ac.gpus = 4;
  ac.sharding = spec::Sharding::fsdp;
  ac.autocast = DType::bf16;
  CHECK(engine::estimate(m, ac).peak_allocated > mp.peak_allocated);
}

TEST_CASE("levers: which layers every-N checkpointing wraps", "[engine][levers]") {
  CHECK(checkpointed_layers(0, 16, 1) == 16);
  CHECK(checkpointed_layers(0, 16, 2) == 8);   // 0, 2, ..., 14
  CHECK(checkpointed_layers(0, 15, 2) == 8);   // 0, 2, ..., 14
  CHECK(checkpointed_layers(1, 3, 2) == 1);    // 2 of 1, 2, 3
  CHECK(checkpointed_layers(0, 28, 3) == 10);  // 0, 3, ..., 27
  CHECK(checkpointed_layers(5, 0, 2) == 0);
}

TEST_CASE("levers: torchtitan's op-level policy keeps every other mm output", "[engine][levers]") {
  const auto m = tiny();
  const Precision p = precision_of(training(spec::Mode::train, DType::bf16));
  // mm #1 q_proj (256), #3 v_proj (128), #5 gate_proj (512), #7 down_proj (256), 2 bytes each;
  // the input (256 x 2); SDPA's output (4 x 64 x 2) and fp32 logsumexp (4 x 4).
  CHECK(selective_layer_saved(m, m.layers[0], p) == (256 + 128 + 512 + 256) * 2 + 256 * 2 + 4 * 64 * 2 + 4 * 4);
  // qwen2's q/k/v have biases (addmm, recomputed): mm #1 o_proj and #3 up_proj are kept.
  const auto q = spec::from_config_text(R"({"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000})",
                                        "qwen.json");
  CHECK(selective_layer_saved(q, q.layers[0], p) == (256 + 512) * 2 + 256 * 2 + 4 * 64 * 2 + 4 * 4);
}

TEST_CASE("levers: activation offload leaves no saved activation on the GPU at backward's start", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::lora, DType::bf16);
  const auto plain = engine::estimate(m, w);
  REQUIRE(plain.peak_phase == PhaseId::backward_start);
  w.activation_offload = true;
  const auto off = engine::estimate(m, w);
  CHECK(phase(off, PhaseId::backward_start) ==
        phase(plain, PhaseId::backward_start) - part(plain, ComponentId::activations));
  CHECK(off.peak_allocated < plain.peak_allocated);
}

TEST_CASE("levers: optimizer in backward holds one parameter's gradient", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::train, DType::bf16);
  const auto plain = engine::estimate(m, w);
  w.optimizer_in_backward = true;
  const auto ib = engine::estimate(m, w);
  for (const auto& ph : ib.phases) CHECK(ph.id != PhaseId::optimizer_step);
  // backward_end: all gradients (params x 2 bytes) become the largest parameter's (the
  // 32000 x 256 embedding) plus its own foreach AdamW temporary (the same size again). The plain
  // step is replayed through the allocator model (its whole blocks counted), the other not.
  const std::uint64_t largest = 32000ULL * 256 * 2;
  Bytes rounding;
  for (const auto& ph : plain.phases)
    if (ph.id == PhaseId::backward_end) rounding = ph.block_rounding;
  CHECK(rounding.value() > 0);
  CHECK(phase(plain, PhaseId::backward_end) - rounding.value() - phase(ib, PhaseId::backward_end) ==
        m.params * 2 - 2 * largest);
}

TEST_CASE("levers: a paged optimizer's state is sharded under FSDP", "[engine][levers]") {
  // Issue #18: Llama 3.3 70B on 8 GPUs with FSDP and paged AdamW 8-bit kept the whole paged
  // state on every GPU (131.67 GiB); each rank pages its shard's: 16.46 GiB.
  const auto m = spec::from_config_text(R"({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
      "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256})",
                                        "llama70b.json");
  auto w = training(spec::Mode::train, DType::bf16);
  w.optimizer = spec::Optimizer::paged_adamw_8bit;
  const auto one = engine::estimate(m, w);
  w.gpus = 8;
  w.sharding = spec::Sharding::fsdp;
  const auto eight = engine::estimate(m, w);
  const std::uint64_t whole = part(one, ComponentId::paged_optimizer_state);
  CHECK(part(eight, ComponentId::paged_optimizer_state) == whole / 8 + (whole % 8 != 0));
  CHECK(part(eight, ComponentId::paged_optimizer_state) == 17672876676ULL);  // 16.46 GiB
  w.sharding = spec::Sharding::ddp;  // a replica per GPU keeps it whole
  CHECK(part(engine::estimate(m, w), ComponentId::paged_optimizer_state) == whole);
}

TEST_CASE("levers: packed rows give SDPA a mask that each layer saves as an additive copy", "[engine][levers]") {
  const auto m = tiny();
  auto w = training(spec::Mode::lora, DType::bf16);
  const Precision p = precision_of(w);
  CHECK_FALSE(packed_sdpa_mask(w));
  CHECK(packed_mask_bias(w, p) == 0);
  const auto plain = engine::estimate(m, w);
  w.sequence_packing = true;
  CHECK(packed_sdpa_mask(w));
  CHECK(packed_mask_bias(w, p) == 2);  // bf16, the query's dtype
  const auto packed = engine::estimate(m, w);
  // 2 rows of 512: per layer the (2, 1, 512, 512) bf16 bias and repeat_kv's copies of k and v
  // (q + 2 x 4-head k/v = 768 values a token, against q + k + v = 512); once, the boolean mask.
  const std::uint64_t bias = 2ULL * 512 * 512 * 2;
  const std::uint64_t repeat = 2ULL * 512 * (768 - 512) * 2;
  const std::uint64_t mask = 2ULL * 512 * 512;
  CHECK(part(packed, ComponentId::activations) - part(plain, ComponentId::activations) == 2 * (bias + repeat) + mask);
  // Eager attention builds its (batch, 1, seq, seq) mask packed or not: no change.
  w.attention = spec::Attention::eager;
  CHECK_FALSE(packed_sdpa_mask(w));
  const auto eager_packed = engine::estimate(m, w);
  w.sequence_packing = false;
  CHECK(engine::estimate(m, w).peak_allocated == eager_packed.peak_allocated);
}

TEST_CASE("levers: a compiled cross-entropy saves the 16-bit logits, not the fp32 log-softmax", "[engine][levers]") {
  // torch.compile of the loss (measured, tests/accuracy/levers/results/compile.jsonl): forward's
  // end holds the 16-bit logits, backward's start them and their gradient; chunked, one chunk's
  // gradient beside them (each chunk's backward frees what it saved; results/chunked.jsonl),
  // then the lm_head's backward as in eager.
  const auto m = tiny();
  auto w = training(spec::Mode::train, DType::bf16);
  const Precision p = precision_of(w);
  const std::uint64_t tokens = 1024;
  const std::uint64_t lc = tokens * 32000 * 2;
  w.compile = spec::Compile::all;
  for (auto loss : {spec::Loss::hf, spec::Loss::chunked}) {
    w.loss = loss;
    const auto b = loss_bytes(m, w, p, tokens);
    CHECK(b.forward_end.value() == lc);
    CHECK(b.backward_start.value() == (loss == spec::Loss::hf ? 2 * lc : lc + lc / 8));
    CHECK(b.head_logits.value() == (loss == spec::Loss::hf ? 0 : lc - 2 * (lc / 8)));
    CHECK(b.head_temporaries.value() == (loss == spec::Loss::hf ? 0 : 2 * 32000ULL * 256 * 2));
  }
  // Liger's and Cut Cross-Entropy's losses are kernels already: compiling leaves them as they are.
  auto eager = w;
  eager.compile = spec::Compile::none;
  for (auto loss : {spec::Loss::fused_linear, spec::Loss::cce}) {
    w.loss = eager.loss = loss;
    CHECK(loss_bytes(m, w, p, tokens).forward_end == loss_bytes(m, eager, p, tokens).forward_end);
    CHECK(loss_bytes(m, w, p, tokens).backward_start == loss_bytes(m, eager, p, tokens).backward_start);
  }
  w.loss = spec::Loss::hf;
  w.compile = spec::Compile::layers;
  eager.loss = spec::Loss::hf;
  CHECK(loss_bytes(m, w, p, tokens).backward_start == loss_bytes(m, eager, p, tokens).backward_start);
}

TEST_CASE("levers: a compiled layer keeps its norms' inputs, recomputes act(gate), shares LoRA casts", "[engine][levers]") {
  const auto m = tiny();  // intermediate 512, hidden 256
  auto w = training(spec::Mode::train, DType::bf16);
  const Precision p = precision_of(w);
  const auto& g = m.layers.front();
  CHECK(compiled_layer_not_saved(m, g, w, p) == 0);  // not compiled
  w.compile = spec::Compile::layers;
  // Full training: each of the 2 norms saves its 16-bit input (512) instead of its fp32 copy and
  // normalised output (1024 + 512), and act(gate) (512 x 2) is recomputed: 8 h + 2 I.
  CHECK(compiled_layer_not_saved(m, g, w, p) == 2 * (1536 - 512) + 512 * 2);
  CHECK(compiled_layer_not_saved(m, g, w, p) == 8 * 256 + 2 * 512);
  // LoRA on all linears (frozen norms: the fp32 copy only, 1024): q, k, v share one fp32 cast of
  // the attention input, gate and up one of the MLP input: 16 h + 2 I, as measured.
  w.mode = spec::Mode::lora;
  const Precision pl = precision_of(w);
  CHECK(compiled_layer_not_saved(m, g, w, pl) == 2 * (1024 - 512) + 512 * 2 + 3 * 256 * 4);
  CHECK(compiled_layer_not_saved(m, g, w, pl) == 16 * 256 + 2 * 512);
  // Whole estimates: 2 x 512 tokens x 2 layers x 3072 bytes fewer saved at forward's end.
  w.mode = spec::Mode::train;
  w.compile = spec::Compile::none;
  const auto eager = engine::estimate(m, w);
  w.compile = spec::Compile::layers;
  const auto compiled = engine::estimate(m, w);
  CHECK(phase(eager, PhaseId::forward_end) - phase(compiled, PhaseId::forward_end) == 1024ULL * 2 * 3072);
}
