// The non-PyTorch device memory from its parts (see vramfit/engine/context.hpp for the measured table).
#include "vramfit/engine/context.hpp"

#include <algorithm>

#include "activations.hpp"
#include "checked.hpp"

namespace vramfit::engine {

namespace {

// One attention geometry of the model's layers: heads, key/value heads, head dims (d_qk, d_v).
struct Geometry {
  std::uint64_t heads = 0, kv_heads = 0, d_qk = 0, d_v = 0;
  auto operator<=>(const Geometry&) const = default;
};

std::vector<Geometry> geometries(const spec::ModelSpec& m) {
  std::set<Geometry> out;
  for (const auto& g : m.layers) {
    if (g.linear_attention || g.count == 0) continue;
    Geometry x;
    x.heads = m.num_heads;
    x.kv_heads = g.kv_heads ? g.kv_heads : m.num_kv_heads;
    if (m.kv_lora_rank > 0) {
      // Multi-head latent attention as transformers runs it: q and k of qk_nope + qk_rope, v of v_head_dim.
      x.d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
      x.d_v = m.v_head_dim;
    } else {
      x.d_qk = x.d_v = g.head_dim ? g.head_dim : m.head_dim;
    }
    out.insert(x);
  }
  return {out.begin(), out.end()};
}

// The attention layers, and whether every one of them attends over a sliding window.
bool all_sliding(const spec::ModelSpec& m) {
  std::uint64_t attention = 0;
  for (const auto& g : m.layers)
    if (!g.linear_attention) attention += g.count;
  return m.sliding_window > 0 && attention > 0 && m.sliding_layers >= attention;
}

std::uint64_t dtype_key(const spec::Workload& w) {
  if (w.autocast) return static_cast<std::uint64_t>(*w.autocast);
  if (w.weights == DType::bf16 || w.weights == DType::fp16) return static_cast<std::uint64_t>(w.weights);
  return static_cast<std::uint64_t>(DType::bf16);  // quantized weights compute in bf16
}

// Adds [lo, hi] to the sorted disjoint intervals `v`; returns how many values were new.
std::uint64_t add_interval(std::vector<std::pair<std::uint64_t, std::uint64_t>>& v, std::uint64_t lo, std::uint64_t hi) {
  if (lo > hi) return 0;
  std::uint64_t covered = 0;
  std::uint64_t nlo = lo, nhi = hi;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  out.reserve(v.size() + 1);
  for (const auto& [a, b] : v) {
    // Overlapping or adjacent intervals merge with the new one.
    if (b + 1 < lo || a > hi + 1) {
      out.emplace_back(a, b);
      continue;
    }
    const std::uint64_t olo = std::max(a, lo), ohi = std::min(b, hi);
    if (olo <= ohi) covered += ohi - olo + 1;
    nlo = std::min(nlo, a);
    nhi = std::max(nhi, b);
  }
  out.emplace_back(nlo, nhi);
  std::sort(out.begin(), out.end());
  v = std::move(out);
  return (hi - lo + 1) - covered;
}

}  // namespace

bool prefers_cudnn_attention(unsigned cc) { return cc == 0 || cc == 90 || cc == 100; }

bool uses_cudnn_attention(const spec::ModelSpec& m, const spec::Workload& w) {
  if (w.attention != spec::Attention::sdpa) return false;
  if (!prefers_cudnn_attention(w.compute_capability)) return false;
  if (detail::precision_of(w).compute != 2) return false;  // cuDNN attention takes fp16/bf16 only
  const auto gs = geometries(m);
  if (gs.empty()) return false;
  return std::all_of(gs.begin(), gs.end(), [](const Geometry& g) {
    return g.d_qk % 8 == 0 && g.d_v % 8 == 0 && g.d_qk <= 256 && g.d_v <= 256;
  });
}

Bytes context_bytes(const ContextState& s) {
  std::uint64_t parts = 0;
  if (s.forward) parts += kForwardKernels.value();
  if (s.cudnn) parts += kCudnnAttentionKernels.value();
  if (s.training) parts += kTrainingKernels.value();
  if (s.cudnn_backward) parts += kCudnnBackwardKernels.value();
  if (s.trained_models.size() > 1) parts += (s.trained_models.size() - 1) * kTrainedModelKernels.value();
  parts = detail::add(parts, detail::mul(s.plan_count, kCudnnPlan.value()), kDriverPage - 1);
  parts = parts / kDriverPage * kDriverPage;
  return Bytes{detail::add(kContextAfterInit.value(), parts)};
}

std::uint64_t add_workload(ContextState& s, const spec::ModelSpec& m, const spec::Workload& w) {
  s.forward = true;
  const bool trains = w.trains();
  if (trains) {
    s.training = true;
    s.trained_models.insert(m.name + "#" + std::to_string(m.params));
  }
  if (!uses_cudnn_attention(m, w)) return 0;
  s.cudnn = true;
  if (trains) s.cudnn_backward = true;
  enum : std::uint64_t { main_thread = 0, autograd_thread = 1, forward = 0, backward = 1 };
  const std::uint64_t dt = dtype_key(w);
  const std::uint64_t b = w.batch, seq = w.seq;
  const bool sliding = all_sliding(m);
  std::uint64_t added = 0;
  const auto add = [&](std::uint64_t thread, std::uint64_t pass, const Geometry& g, std::uint64_t s_q, bool causal,
                       std::uint64_t lo, std::uint64_t hi) {
    lo = std::max<std::uint64_t>(lo, 2);  // cuDNN SDPA refuses a key length of 1 (check_cudnn_tensor_shapes)
    if (lo > hi) return;
    const std::array<std::uint64_t, 9> key{thread, pass, dt, b, g.heads, g.kv_heads, g.d_qk * 4096 + g.d_v, s_q,
                                           causal ? 1ULL : 0ULL};
    added += add_interval(s.plans[key], lo, hi);
  };
  for (const auto& g : geometries(m)) {
    // The prompt (a forward, a training step's forward, a generate's prefill): one causal shape.
    add(main_thread, forward, g, seq, true, seq, seq);
    if (trains) {
      // Backward runs on the autograd engine's device thread: its own thread_local caches.
      add(autograd_thread, backward, g, seq, true, seq, seq);
      if (w.checkpointing) add(autograd_thread, forward, g, seq, true, seq, seq);  // the recomputed forward
    }
    if (w.mode == spec::Mode::generate && w.new_tokens > 1) {
      // Decode steps 2..n: one query over seq+1 .. seq+n-1 keys (a sliding-window cache stops at the window).
      std::uint64_t lo = detail::add(seq, 1), hi = detail::add(seq, w.new_tokens - 1);
      if (sliding) {
        lo = std::min(lo, m.sliding_window);
        hi = std::min(hi, m.sliding_window);
      }
      add(main_thread, forward, g, 1, false, lo, hi);
    }
  }
  s.plan_count = detail::add(s.plan_count, added);
  return added;
}

}  // namespace vramfit::engine
