// vLLM's start-up memory, from its source (github.com/vllm-project/vllm, V1 engine):
// - vllm/v1/worker/gpu_worker.py, determine_available_memory: requested_memory =
//   total x gpu_memory_utilization; under memory_profiling() the profile run gives
//   non_kv_cache_memory = weights_memory + torch_peak_increase + non_torch_increase, and
//   available_kv_cache_memory = requested_memory - non_kv_cache_memory;
// - vllm/v1/worker/gpu_model_runner.py, profile_run: a dummy forward of
//   max_num_batched_tokens tokens, then the sampler on max_num_seqs dummy requests (logits of
//   [max_num_seqs, vocab] in fp32);
// - vllm/v1/core/kv_cache_utils.py: a block holds block_size tokens of every attention layer
//   (page_size_bytes = 2 x block_size x num_kv_heads x head_size x dtype bytes; MLA keeps one
//   latent of kv_lora_rank + qk_rope_head_dim per token), num_blocks = available // (page
//   size x layers); "GPU KV cache size: num_blocks x block_size tokens"; "Maximum concurrency
//   for max_model_len tokens per request: num_blocks / cdiv(max_model_len, block_size)";
//   check_enough_kv_cache_memory raises when max_model_len needs more than is available;
//   "No available memory for the cache blocks" when nothing is left;
// - tensor parallel: heads and MLP columns split over the GPUs, the KV heads too (replicated
//   when there are fewer KV heads than GPUs: vllm/config ModelConfig.get_num_kv_heads).
#include "vramfit/engine/vllm.hpp"

#include <algorithm>
#include <tuple>
#include <utility>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/engine/allocator.hpp"
#include "serving_layout.hpp"
#include "weights.hpp"

namespace vramfit::engine::vllm {

namespace {

std::uint64_t cdiv(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

/// The CUDA context and the kernels loaded before vLLM's first memory snapshot: outside the
/// budget (vLLM checks only that the free memory at start-up covers requested_memory).
/// Measured on the H200 with PyTorch 2.11: the context alone after init is 685 MiB
/// (engine/constants.hpp, kCudaContext's note).
constexpr Bytes kContext = Bytes{718077952};

/// Memory outside PyTorch's allocator that vLLM charges to the budget ("non_torch_memory",
/// "non-torch forward increase memory"). What it counts depends on the release:
/// - vLLM <= 0.6.4 (worker.py determine_num_available_blocks): after the profile run and
///   empty_cache, mem_get_info's used bytes minus torch's allocated bytes: the whole CUDA
///   context is in it (Profiler::device_wide);
/// - vLLM >= 0.6.5 (utils.memory_profiling, V0 and V1): the increase of that figure since the
///   snapshot taken in init_device, after the context exists (Profiler::since_snapshot).
/// The increase is what the first forward loads outside PyTorch (kernel modules, library
/// workspaces) and, with tensor parallel, the NCCL communicators and the custom all-reduce
/// buffers set up after the snapshot. Neither has a closed form (the modules depend on the
/// kernels a model runs, NCCL's buffers on the interconnect), so both are the medians of the
/// logs in tests/accuracy/serving/vllm_logs.jsonl that isolate them: one GPU 0.02, 0.05,
/// 0.13 x 5, 0.14 x 2 GiB (median 0.13); what tensor parallel adds 0.12 (PCIe), 0.41, 0.42
/// (NVLink) GiB (median 0.41).
constexpr Bytes kFirstForwardNonTorch = Bytes{139586437};  // 0.13 GiB
constexpr Bytes kTensorParallelNonTorch = Bytes{440234148};  // 0.41 GiB

Bytes non_torch(const Settings& s) {
  Bytes b = kFirstForwardNonTorch;
  if (s.tensor_parallel > 1) b += kTensorParallelNonTorch;
  if (s.profiler == Profiler::device_wide) b += kContext;
  return b;
}

std::uint64_t dtype_bytes(DType d) {
  switch (d) {
    case DType::fp32: return 4;
    case DType::fp8:
    case DType::int8: return 1;
    default: return 2;
  }
}

/// What vLLM's code does its own way for a model type where it changes memory or the limits:
/// one row per model type, a newcomer adds one; a type without a row has none of it.
struct ModelRow {
  std::string_view model_type;
  /// Matched anywhere in the config's model_type, as vLLM tests it (`"gemma3" not in
  /// hf_config.model_type`: gemma3, gemma3_text, gemma3n, ...).
  bool substring = false;
  /// max_position_embeddings is already the rope-scaled length (config/model.py: "Gemma3's
  /// max_model_len (128K) is already scaled by RoPE scaling"): the factor is not applied again;
  /// its model's two rotary caches (default for sliding, scaled for global layers) are not followed.
  bool positions_prescaled = false;
  /// get_rope(dtype=torch.float32): an fp32 cos/sin cache (models/gpt_oss.py OAIAttention).
  bool rope_fp32 = false;
  /// MLA served as MLA (config/model.py is_deepseek_mla: these model types with a kv_lora_rank):
  /// the cache keeps the latent and the rope key. Another type with a kv_lora_rank runs its own
  /// attention: refused unless its row says how it caches (heads_cache).
  bool mla = false;
  /// Latent projections decompressed into every head before attention, which caches them all
  /// (models/minicpm3.py MiniCPM3Attention: Attention(num_local_heads, qk_head_dim,
  /// num_kv_heads=num_local_heads), V padded with zeros to qk_head_dim): K and V of
  /// qk_nope + qk_rope per head, the heads split over tensor parallel.
  bool heads_cache = false;
  /// Chunked local attention (Llama 4's attention_chunk_size layers): VllmConfig turns the hybrid KV
  /// cache manager off for it by default in the releases of hybrid_manager().
  bool chunked_local = false;
};
constexpr ModelRow kModelRows[] = {
    {.model_type = "gemma3", .substring = true, .positions_prescaled = true},
    {.model_type = "gpt_oss", .rope_fp32 = true},
    {.model_type = "deepseek_v2", .mla = true},
    {.model_type = "deepseek_v3", .mla = true},
    {.model_type = "deepseek_v32", .mla = true},
    {.model_type = "deepseek_mtp", .mla = true},
    {.model_type = "kimi_k2", .mla = true},
    {.model_type = "longcat_flash", .mla = true},
    {.model_type = "minicpm3", .heads_cache = true},
    {.model_type = "llama4", .substring = true, .chunked_local = true},
};

const ModelRow& model_row(std::string_view model_type) {
  static constexpr ModelRow kNone{};
  for (const ModelRow& r : kModelRows)
    if (r.substring ? model_type.find(r.model_type) != std::string_view::npos : model_type == r.model_type) return r;
  return kNone;
}

/// The longest max_model_len vramfit takes (2^40 tokens, the config reader's bound on a length).
constexpr std::uint64_t kMaxModelLen = 1ULL << 40;

/// A derived length as Python prints it: an int, or a float once a rotary factor multiplied it.
std::string py_number(double v, bool is_float) {
  if (!is_float) return fmt::format("{}", static_cast<std::uint64_t>(v));
  return v == std::floor(v) && std::fabs(v) < 1e16 ? fmt::format("{:.1f}", v) : fmt::format("{}", v);
}

/// vLLM's ValueError text for a max_model_len past the derived maximum.
std::string long_len_message(const spec::ModelSpec& m, const Settings& s, const DerivedMaxLen& d);

}  // namespace

DerivedMaxLen derived_max_model_len(const spec::ModelSpec& m) {
  // The smallest of the length keys (max_position_embeddings, n_positions, max_seq_len, ...:
  // the one the spec read), overridden by the config's model_max_length (Command-R, Cohere2).
  DerivedMaxLen d;
  d.tokens = static_cast<double>(m.max_positions);
  d.key = "max_position_embeddings";
  if (m.model_max_length > 0) {
    d.tokens = static_cast<double>(m.model_max_length);
    d.key = "model_max_length";
  }
  if (d.tokens <= 0) d.tokens = 2048;  // no key: vLLM assumes 2048 (and warns)
  // The rotary scalings (transformers 5: one per layer type), except gemma3's, whose
  // max_position_embeddings (128K) is already the scaled one. llama3, longrope and su keep the
  // length; any other type multiplies it by its factor (the last factor given; "default" has
  // none), yarn from its original_max_position_embeddings.
  if (m.rope_scaling.empty() || model_row(m.model_type).positions_prescaled) {
    if (m.max_positions == 0 && m.model_max_length == 0) d.tokens = 0;
    return d;
  }
  d.scaled = true;
  double factor = 1.0;
  std::string type;
  std::uint64_t yarn_original = 0;
  const double base = d.tokens;
  for (const spec::RopeScaling& rs : m.rope_scaling) {
    if (rs.type == "su" || rs.type == "longrope" || rs.type == "llama3") continue;
    if (rs.factor) {
      factor = *rs.factor;
      type = rs.type;
    }
    if (rs.type == "yarn") {
      yarn_original = rs.original_max_positions > 0 ? rs.original_max_positions : m.max_positions;
      d.tokens = static_cast<double>(yarn_original);
    }
  }
  d.tokens *= factor;
  if (yarn_original > 0)
    d.rope = fmt::format("yarn: original_max_position_embeddings {} x factor {}", yarn_original, factor);
  else if (factor != 1.0)
    d.rope = fmt::format("{}: {} {} x factor {}", type, d.key, static_cast<std::uint64_t>(base), factor);
  return d;
}

std::uint64_t default_max_model_len(const spec::ModelSpec& m, const Settings& s) {
  const DerivedMaxLen d = derived_max_model_len(m);
  if (d.tokens <= 0) return 2048;
  const auto key = [](const Release& v) { return std::tuple(v.major, v.minor, v.patch); };
  const bool longrope = std::any_of(m.rope_scaling.begin(), m.rope_scaling.end(),
                                    [](const spec::RopeScaling& rs) { return rs.type == "longrope" || rs.type == "su"; });
  // vllm#27431 (0.11.1): a LongRoPE model defaults to its short context, the config's
  // original_max_position_embeddings, so that shorter requests keep the short factors.
  if (longrope && key(s.release) >= std::tuple(0U, 11U, 1U) && m.original_max_positions > 0)
    return m.original_max_positions;
  return static_cast<std::uint64_t>(std::min(std::floor(d.tokens), static_cast<double>(kMaxModelLen)));
}

namespace {

std::string long_len_message(const spec::ModelSpec& m, const Settings& s, const DerivedMaxLen& d) {
  return fmt::format(
      "User-specified max_model_len ({}) is greater than the derived max_model_len ({}={} or model_max_length={} in "
      "model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
      s.max_model_len.value_or(0), d.key, py_number(d.tokens, d.scaled),
      m.model_max_length > 0 ? std::to_string(m.model_max_length) : std::string("None"));
}

}  // namespace

namespace {

/// One kind of attention layer that keeps a cache of its own, where a model's layers differ
/// (gemma4_text): its key/value heads and head size, and how many layers.
struct LayerKind {
  std::uint64_t kv_heads = 0, head_dim = 0, layers = 0;
};

/// The caching layers of a model whose layers differ (gemma4_text), as vLLM's gemma4.py builds
/// them: full-attention layers of global_head_dim (num_global_key_value_heads with
/// attention_k_eq_v, whose V slot is still cached: the K weights are loaded into both), sliding
/// layers of head_dim, and the last num_kv_shared_layers layers with kv_sharing_target_layer_name
/// set, which get no KV cache spec of their own. The spec keeps each layer's heads and head size
/// and the totals per kind (kv_full_per_token, kv_sliding_per_token); the kinds are told apart by
/// their widths and checked against those totals. nullopt: every layer alike (the plain layout);
/// throws when the layers cannot be put into two kinds of one width each.
std::optional<std::pair<LayerKind, LayerKind>> layer_kinds(const spec::ModelSpec& m) {
  bool differ = m.kv_full_per_token != 0 || m.kv_sliding_per_token != 0;
  for (const spec::LayerGroup& g : m.layers) differ = differ || g.kv_shared || g.head_dim != 0 || g.kv_heads != 0;
  if (!differ) return std::nullopt;
  const std::uint64_t kvh0 = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
  std::vector<LayerKind> widths;  // distinct (kv heads, head size) of the caching layers
  for (const spec::LayerGroup& g : m.layers) {
    if (g.kv_shared || g.linear_attention) continue;
    const LayerKind k{g.kv_heads != 0 ? g.kv_heads : kvh0, g.head_dim != 0 ? g.head_dim : m.head_dim, g.count};
    auto it = std::find_if(widths.begin(), widths.end(),
                           [&](const LayerKind& w) { return w.kv_heads == k.kv_heads && w.head_dim == k.head_dim; });
    if (it == widths.end()) widths.push_back(k);
    else it->layers = checked_add(it->layers, k.layers);
  }
  const auto width = [](const LayerKind& k) { return checked_mul(checked_mul(2, k.kv_heads), k.head_dim); };
  const std::uint64_t F = m.kv_full_per_token, S = m.kv_sliding_per_token;
  std::optional<std::pair<LayerKind, LayerKind>> kinds;
  if (widths.size() == 1 && width(widths[0]) > 0 && F % width(widths[0]) == 0 && S % width(widths[0]) == 0 &&
      F / width(widths[0]) + S / width(widths[0]) == widths[0].layers) {
    LayerKind full = widths[0], sliding = widths[0];
    full.layers = F / width(full);
    sliding.layers = S / width(sliding);
    kinds = {full, sliding};
  } else if (widths.size() == 2 && S == 0 && m.sliding_window == 0 &&
             checked_add(checked_mul(width(widths[0]), widths[0].layers), checked_mul(width(widths[1]), widths[1].layers)) == F) {
    // No sliding window (sliding_window null): every layer is full attention, FullAttentionSpecs of
    // two head sizes, one UniformTypeKVCacheSpecs group (kv_layout_per_kind without the hybrid path).
    kinds = {widths[0], widths[1]};
  } else if (widths.size() == 2) {
    const auto is = [&](const LayerKind& f, const LayerKind& sl) {
      return checked_mul(width(f), f.layers) == F && checked_mul(width(sl), sl.layers) == S;
    };
    const bool first_full = is(widths[0], widths[1]), second_full = is(widths[1], widths[0]);
    if (first_full != second_full) kinds = first_full ? std::pair{widths[0], widths[1]} : std::pair{widths[1], widths[0]};
  }
  if (!kinds)
    throw InputError("--engine",
                     fmt::format("vllm: model_type '{}' has caching layers of more than one width within a kind "
                                 "(full or sliding-window attention); vramfit lays out one width per kind",
                                 m.model_type),
                     "estimate it with the default engine (--engine transformers), which lays these layers out");
  return kinds;
}

}  // namespace

std::uint64_t kv_bytes_per_token(const spec::ModelSpec& m, const Settings& s) {
  const std::uint64_t elem = s.kv_fp8 ? 1 : 2;
  if (const auto kinds = layer_kinds(m)) {
    // Every caching layer's K and V, its KV heads split over TP (replicated below one a GPU).
    std::uint64_t b = 0;
    for (const LayerKind& k : {kinds->first, kinds->second})
      b = checked_add(b, checked_mul(checked_mul(checked_mul(2, std::max<std::uint64_t>(1, k.kv_heads / s.tensor_parallel)),
                                                 checked_mul(k.head_dim, elem)),
                                     k.layers));
    return b;
  }
  const std::uint64_t layers = cdiv(m.num_layers, s.pipeline_parallel);
  std::uint64_t per_layer = 0;
  if (m.kv_lora_rank > 0 && model_row(m.model_type).heads_cache) {
    // Every head's K and V of qk_nope + qk_rope (ModelRow::heads_cache), split over TP.
    const std::uint64_t per_gpu = std::max<std::uint64_t>(1, m.num_heads / s.tensor_parallel);
    per_layer = checked_mul(checked_mul(checked_mul(2, per_gpu), m.qk_nope_head_dim + m.qk_rope_head_dim), elem);
  } else if (m.kv_lora_rank > 0) {
    // MLA: one latent (kv_lora_rank) + the rope key per token, not split by tensor parallel.
    per_layer = checked_mul(m.kv_lora_rank + m.qk_rope_head_dim, elem);
  } else {
    const std::uint64_t kvh = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
    const std::uint64_t per_gpu = std::max<std::uint64_t>(1, kvh / s.tensor_parallel);
    const std::uint64_t head = m.head_dim;
    per_layer = checked_mul(checked_mul(checked_mul(2, per_gpu), head), elem);
  }
  return checked_mul(per_layer, layers);
}

namespace {

/// How vLLM V1 lays out the KV cache (vllm/v1/core/kv_cache_utils.py get_kv_cache_groups,
/// _get_kv_cache_groups_uniform_page_size, get_kv_cache_config_from_groups; kv_cache_interface.py
/// FullAttentionSpec / SlidingWindowSpec.max_memory_usage_bytes):
/// - every layer has the same page (block_size tokens of its K and V), so a model with full and
///   sliding-window layers is cut into groups of group_size layers of one kind: group_size is the
///   smaller count (the larger one when it is under 1.5x the smaller), the last group of a kind
///   padded; group_size pools are allocated, each shared by one layer of every group, and
///   num_blocks = available // layer_page // group_size;
/// - one request needs cdiv(max_model_len, block_size) blocks in a full-attention group and
///   cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1 in a
///   sliding-window group;
/// - without sliding-window layers this is one group of every layer, the uniform cache.
struct KvLayout {
  std::uint64_t layer_page = 0;   // bytes of one block of one layer
  std::uint64_t group_size = 0;   // layers per group
  std::uint64_t full_groups = 1;
  std::uint64_t sliding_groups = 0;
  std::uint64_t window = 0;
  std::uint64_t block_size = 16;  // tokens a block of a full-attention group holds
  /// Tokens a block of a sliding-window group holds: block_size unless the pages were unified
  /// (unify_kv_cache_spec_page_size: the smaller page's block grows by max page / its page).
  std::uint64_t sliding_block = 16;
  std::uint64_t batched_tokens = 0;
  [[nodiscard]] std::uint64_t blocks(std::uint64_t len) const {
    std::uint64_t b = checked_mul(full_groups, cdiv(len, block_size));
    if (sliding_groups > 0) {
      const std::uint64_t tokens = std::min(checked_add(window - 1, batched_tokens), len);
      b = checked_add(b, checked_mul(sliding_groups, cdiv(tokens, sliding_block) + 1));
    }
    return b;
  }
  /// The tokens a block id stands for in "GPU KV cache size" (_report_kv_cache_config: the
  /// smallest block size of the groups).
  [[nodiscard]] std::uint64_t min_block() const {
    return full_groups > 0 && sliding_groups > 0 ? std::min(block_size, sliding_block)
           : full_groups > 0                      ? block_size
                                                  : sliding_block;
  }
};

/// A model whose layers differ (layer_kinds): vLLM's get_kv_cache_groups over their specs. With
/// the hybrid manager and both kinds: the pages unified to the larger (the smaller kind's blocks
/// hold max page / its page times the tokens; vLLM raises NotImplementedError when it does not
/// divide), then the uniform-page grouping as below. Without it (or one kind only): a uniform
/// spec when the pages agree, else UniformTypeKVCacheSpecs, one group whose page is every caching
/// layer's page summed (num_blocks = available // that sum).
/// Whether V1's hybrid KV cache manager lays the sliding (or chunked) layers out on their own:
/// not on V0 nor with --disable-hybrid-kv-cache-manager; for chunked local attention not by default
/// from 0.10.1 (vllm#21761: VllmConfig disables it, "There is a latency regression when using
/// chunked local attention with the hybrid KV cache manager", unless
/// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1) until vllm#29627 turned the default to
/// "1", taken here as 0.23 (vllm#46553 dates a change of Llama 4's behaviour between 0.22 and 0.23).
bool chunked_hybrid_default_off(const Release& r) {
  const bool from = r.at_least(0, 11) || (r.major == 0 && r.minor == 10 && r.patch >= 1);
  return from && !r.at_least(0, 23);
}

bool hybrid_manager(const spec::ModelSpec& m, const Settings& s) {
  if (!s.hybrid_kv || s.v0_engine) return false;
  if (model_row(m.model_type).chunked_local)
    return s.chunked_local_hybrid.value_or(!chunked_hybrid_default_off(s.release));
  return true;
}

KvLayout kv_layout_per_kind(const std::pair<LayerKind, LayerKind>& kinds, const spec::ModelSpec& m, const Settings& s) {
  KvLayout k;
  k.block_size = k.sliding_block = s.block_size;
  k.batched_tokens = s.max_num_batched_tokens;
  const std::uint64_t elem = s.kv_fp8 ? 1 : 2;
  const auto page = [&](const LayerKind& kind) {
    return checked_mul(checked_mul(checked_mul(2, std::max<std::uint64_t>(1, kind.kv_heads / s.tensor_parallel)),
                                   checked_mul(kind.head_dim, elem)),
                       s.block_size);
  };
  const LayerKind& full = kinds.first;
  const LayerKind& sliding = kinds.second;
  const bool hybrid = hybrid_manager(m, s) && m.sliding_window > 0 && full.layers > 0 && sliding.layers > 0;
  if (!hybrid) {
    const std::uint64_t pf = full.layers > 0 ? page(full) : 0, ps = sliding.layers > 0 ? page(sliding) : 0;
    if (pf == 0 || ps == 0 || pf == ps) {
      k.layer_page = pf != 0 ? pf : ps;
      k.group_size = full.layers + sliding.layers;
    } else {
      k.layer_page = checked_add(checked_mul(pf, full.layers), checked_mul(ps, sliding.layers));
      k.group_size = 1;
    }
    if (full.layers == 0 && m.sliding_window > 0 && hybrid_manager(m, s)) {  // sliding layers alone
      k.window = m.sliding_window;
      k.full_groups = 0;
      k.sliding_groups = 1;
    }
    return k;
  }
  const std::uint64_t pf = page(full), ps = page(sliding), p = std::max(pf, ps);
  if (p % pf != 0 || p % ps != 0)
    throw InputError("--engine",
                     fmt::format("vllm: the full-attention layers' page ({} bytes a block) and the sliding-window "
                                 "layers' ({}) do not divide: vLLM's unify_kv_cache_spec_page_size raises "
                                 "NotImplementedError (\"The page size of the layer is not divisible by the maximum "
                                 "page size. Cannot unify by adjusting block_size.\")",
                                 pf, ps),
                     "serve it with --disable-hybrid-kv-cache-manager (one group of every layer's page)");
  k.layer_page = p;
  k.block_size = checked_mul(s.block_size, p / pf);
  k.sliding_block = checked_mul(s.block_size, p / ps);
  k.window = m.sliding_window;
  const std::uint64_t lo = std::min(full.layers, sliding.layers), hi = std::max(full.layers, sliding.layers);
  k.group_size = 2 * hi < 3 * lo ? hi : lo;
  k.full_groups = cdiv(full.layers, k.group_size);
  k.sliding_groups = cdiv(sliding.layers, k.group_size);
  return k;
}

KvLayout kv_layout(const spec::ModelSpec& m, const Settings& s) {
  if (const auto kinds = layer_kinds(m)) return kv_layout_per_kind(*kinds, m, s);
  KvLayout k;
  k.block_size = k.sliding_block = s.block_size;
  k.batched_tokens = s.max_num_batched_tokens;
  const std::uint64_t layers = cdiv(m.num_layers, s.pipeline_parallel);
  k.layer_page = checked_mul(kv_bytes_per_token(m, s) / layers, s.block_size);
  k.group_size = layers;
  const bool hybrid = hybrid_manager(m, s) && s.pipeline_parallel == 1 && m.kv_lora_rank == 0 &&
                      m.sliding_window > 0 && m.sliding_layers > 0;
  if (!hybrid) return k;
  const std::uint64_t sliding = std::min(m.sliding_layers, m.num_layers);
  const std::uint64_t full = m.num_layers - sliding;
  k.window = m.sliding_window;
  if (full == 0) {  // every layer slides: one group of them all
    k.full_groups = 0;
    k.sliding_groups = 1;
    return k;
  }
  const std::uint64_t lo = std::min(full, sliding), hi = std::max(full, sliding);
  k.group_size = 2 * hi < 3 * lo ? hi : lo;
  k.full_groups = cdiv(full, k.group_size);
  k.sliding_groups = cdiv(sliding, k.group_size);
  return k;
}

/// The longest request whose blocks fit in `available` bytes (vLLM's binary search in
/// _estimate_max_model_len_from_groups). With a full-attention group a request of n tokens
/// takes at least cdiv(n, block_size) blocks; with sliding-window groups alone the need stops
/// growing past the window, and `cap` (the model's limit) bounds the answer.
std::uint64_t largest_len(const KvLayout& kv, std::uint64_t page_bytes, std::uint64_t available, std::uint64_t cap) {
  std::uint64_t lo = 0;
  std::uint64_t hi = kv.full_groups > 0 ? checked_mul(available / page_bytes, kv.block_size) : cap;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (checked_mul(kv.blocks(mid), page_bytes) <= available) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace

bool chunked_local(const spec::ModelSpec& m) { return model_row(m.model_type).chunked_local && m.sliding_layers > 0; }

bool served_as_mla(const spec::ModelSpec& m) { return m.kv_lora_rank > 0 && model_row(m.model_type).mla; }

std::uint64_t kv_bytes_for_request(const spec::ModelSpec& m, const Settings& s, std::uint64_t tokens) {
  const KvLayout kv = kv_layout(m, s);
  return checked_mul(kv.blocks(tokens), checked_mul(kv.layer_page, kv.group_size));
}

std::uint64_t largest_model_len(const spec::ModelSpec& m, const Settings& s, std::uint64_t available) {
  const KvLayout kv = kv_layout(m, s);
  return largest_len(kv, checked_mul(kv.layer_page, kv.group_size), available,
                     std::max<std::uint64_t>(s.max_model_len.value_or(0), m.max_positions));
}

std::optional<Release> parse_release(const std::string& text) {
  std::string_view t = text;
  if (!t.empty() && (t.front() == 'v' || t.front() == 'V')) t.remove_prefix(1);
  unsigned parts[3] = {0, 0, 0};
  std::size_t n = 0;
  while (n < 3) {
    std::size_t i = 0;
    unsigned v = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9' && i < 4) v = v * 10 + static_cast<unsigned>(t[i++] - '0');
    if (i == 0 || (i < t.size() && t[i] >= '0' && t[i] <= '9')) return std::nullopt;
    parts[n++] = v;
    t.remove_prefix(i);
    if (t.empty() || t.front() != '.' || t.size() < 2 || t[1] < '0' || t[1] > '9') break;
    t.remove_prefix(1);
  }
  if (n < 2) return std::nullopt;
  // What may follow: ".post1", "rc1", ".dev123+gabc", "+cu128".
  if (!t.empty() && t.front() != '.' && t.front() != '+' && t.front() != '-' && t.front() != 'r' && t.front() != 'a' &&
      t.front() != 'b')
    return std::nullopt;
  return Release{parts[0], parts[1], parts[2]};
}

SamplerKernel sampler_kernel(const Release& r) {
  const auto before = [&r](unsigned mi, unsigned pa) { return r.major == 0 && (r.minor < mi || (r.minor == mi && r.patch < pa)); };
  if (before(8, 0)) return SamplerKernel::flashinfer;
  if (before(9, 1)) return SamplerKernel::torch_sort;
  if (before(11, 1)) return SamplerKernel::flashinfer;
  if (before(16, 0)) return SamplerKernel::torch_sort;
  return SamplerKernel::triton;
}

namespace {

/// The dummy forward of `T` tokens: the residual stream (hidden + residual) lives through the
/// layer; the MLP holds its gate_up output [T, 2I/tp], the activation [T, I/tp] and the down
/// projection [T, H]; attention its qkv and output. The profile run's at max_num_batched_tokens,
/// and a CUDA graph capture's at its size.
std::uint64_t forward_peak(const spec::ModelSpec& m, const Settings& s, std::uint64_t T) {
  const std::uint64_t tp = s.tensor_parallel;
  const std::uint64_t d = 2;  // activations in the model dtype
  const std::uint64_t H = m.hidden_size;
  std::uint64_t I = m.intermediate_size;
  for (const spec::LayerGroup& g : m.layers) I = std::max(I, g.intermediate);  // gemma4's double-wide MLPs
  if (m.moe.num_experts > 0) I = std::max(I, checked_mul(m.moe.expert_intermediate, m.moe.experts_per_token));
  const std::uint64_t q = checked_mul(m.num_heads, m.head_dim);
  const std::uint64_t kvh = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
  const std::uint64_t qkv = q + 2 * checked_mul(kvh, m.head_dim);
  const std::uint64_t stream = checked_mul(checked_mul(T, H), d * 2);
  // With tensor parallel the all-reduce after down_proj is out of place (GroupCoordinator
  // all_reduce -> _all_reduce_out_place: pynccl and the custom all-reduce both return a new
  // tensor), so its [T, H] output is alive beside the row-parallel partial sum.
  const std::uint64_t down = checked_mul(checked_mul(T, H), tp > 1 ? 2 * d : d);
  const std::uint64_t mlp = checked_add(checked_mul(checked_mul(T, cdiv(I, tp)), d * 3), down);
  const std::uint64_t attn = checked_mul(checked_mul(T, cdiv(qkv + q, tp)), d);
  return checked_add(stream, std::max(mlp, attn));
}

/// CUDA graph memory, "Graph capturing finished in S secs, took X GiB" (capture_model: the
/// free device memory before and after capturing every size), is two things:
/// - the graph pool: every graph is captured through one memory pool, largest size first
///   (V0 model_runner.py capture_model, graph_runner.graph.pool(); V1 the global graph pool of
///   cuda_graph.py / piecewise_backend.py), and each graph's output is turned into a weak
///   reference (weak_ref_tensors), so the pool holds what the largest capture had alive at its
///   peak, and every smaller graph replays inside it: the forward's activations at the
///   largest size (forward_peak). The eager warmup runs before each capture are freed and
///   torch.cuda.graph's entry empties the cache, so they are not kept;
/// - each graph's own memory: cudaGraphInstantiate puts every kernel node (its parameters,
///   launch configuration) in device memory outside PyTorch, so it grows with the layers and
///   with the number of graph objects: a V0 graph is the whole model, a V1 piecewise size is
///   one graph per piece between attention layers (layers + 1 objects, attention left out),
///   a V1 FULL graph the whole model with attention. What the driver keeps per node has no
///   closed form in vLLM's or PyTorch's source, so one figure per kind of graph comes from
///   the one log that isolates it, after the pool is taken off:
///   - V0 whole-model graphs: Llama-3.2-1B on 0.6.5, 35 graphs of 16 layers, "took 0.21 GiB"
///     (vllm#11349), pool 15 MiB at 256 tokens: 0.357 MiB a layer a graph;
///   - V1 piecewise: Llama-3.1-8B on 0.10.1.1, 67 sizes of 32 layers, "took 0.52 GiB", pool
///     54 MiB at 512 tokens: 0.223 MiB a layer a size (vllm#23184's per-size lines for the
///     sizes under 112 of the same model, 6 to 8 MiB a size, give 0.19 to 0.25);
///   - V1 FULL: Qwen3-8B on >= 0.21, "Estimated CUDA graph memory: 0.52 GiB" for 51 piecewise
///     and 35 FULL sizes of 36 layers (LMCache#3430), pool 48 MiB at 512 tokens: what the
///     piecewise figure leaves, 0.059 MiB a layer a graph (one graph object a size, not 37).
/// vLLM >= 0.21's estimate (gpu_model_runner.py profile_cudagraph_memory) captures the first
/// two sizes of each mode: the first's memory (the pool and one graph) plus the second's (one
/// graph) times the sizes left; the larger mode's first capture counts, as the modes share the
/// pool. It comes to the same sum, one graph apart, and is taken as it.
constexpr std::uint64_t kGraphPerLayerV0 = 374566;         // 0.357 MiB
constexpr std::uint64_t kGraphPerLayerPiecewise = 234013;  // 0.223 MiB
constexpr std::uint64_t kGraphPerLayerFull = 62195;        // 0.059 MiB

std::uint64_t round_up(std::uint64_t v, std::uint64_t m) { return cdiv(v, m) * m; }

// What vLLM's MXFP4 MoE layer holds on one GPU beyond the checkpoint's packing that
// detail::weight_bytes counts (4-bit values, one E8M0 scale per 32, bf16 biases), per
// Mxfp4MoEMethod (vllm/model_executor/layers/quantization/mxfp4.py, create_weights and
// process_weights_after_loading). FusedMoE holds w13 [E, 2 I, H / 2] and w2 [E, H, I / 2] with
// their scales [E, 2 I, H / 32], [E, H, I / 32] and biases [E, 2 I], [E, H] (I per TP rank):
//  - Marlin pads I to 128 and H to 256 (its n % 256 and k % 128 rules), biases bf16;
//  - FlashInfer on SM100 pads both to 256 and keeps the biases in fp32;
//  - Triton (triton_kernels' matmul_ogs) pads I to 64, makes the biases fp32, and swizzles the
//    scales into a new tensor (HopperMXScaleLayout: rows padded to 2 x num_warps(8) x 2 x 8 = 256,
//    columns to 2) held by its PrecisionConfig, while the layer keeps its w13/w2_weight_scale:
//    the scales are held twice. gpt-oss-20b on an H100 (vLLM 0.14, "Model loading took 13.47
//    GiB"): 12.83 GiB of checkpoint + 0.58 GiB of swizzled scales + 0.01 GiB of fp32 biases.
std::uint64_t mxfp4_expert_extra(const spec::ModelSpec& m, const Settings& s, std::uint64_t tp) {
  if (m.moe.num_experts == 0 || m.moe.expert_intermediate == 0) return 0;
  const spec::Quantization q = spec::scheme_of(s.weights);
  if (q.method != spec::QuantMethod::mxfp4) return 0;
  const Mxfp4Backend be = mxfp4_backend(s.compute_capability, s.flashinfer);
  const std::uint64_t E = m.moe.num_experts;
  const std::uint64_t I0 = cdiv(m.moe.expert_intermediate, tp), H0 = m.hidden_size;
  const std::uint64_t I = round_up(I0, be == Mxfp4Backend::marlin ? 128 : be == Mxfp4Backend::triton ? 64 : 256);
  const std::uint64_t H = be == Mxfp4Backend::triton ? H0 : round_up(H0, 256);
  const std::uint64_t bias = be == Mxfp4Backend::marlin ? 2 : 4;
  // vLLM's layout of one layer's experts: its tensors in the order the layer makes them
  // (create_weights: w13, its scale and bias, w2, its scale and bias; then the swizzled scales).
  std::vector<std::uint64_t> tensors = {checked_mul(E, checked_mul(2 * I, H) / 2), checked_mul(E, checked_mul(2 * I, cdiv(H, 32))),
                                        checked_mul(E, checked_mul(2 * I, bias)),  checked_mul(E, checked_mul(H, I) / 2),
                                        checked_mul(E, checked_mul(H, cdiv(I, 32))), checked_mul(E, checked_mul(H, bias))};
  if (be == Mxfp4Backend::triton) {
    tensors.push_back(checked_mul(E, checked_mul(round_up(2 * I, 256), round_up(cdiv(H, 32), 2))));
    tensors.push_back(checked_mul(E, checked_mul(round_up(H, 256), round_up(cdiv(I, 32), 2))));
  }
  std::uint64_t held = 0;
  for (const std::uint64_t t : tensors) held = checked_add(held, t);
  // ...less what weight_bytes counted for it: the experts' linears of one MoE layer, over TP.
  std::uint64_t counted = 0, moe_layers = 0;
  for (const auto& g : m.layers) {
    if (!g.moe) continue;
    std::uint64_t one = 0;
    for (const auto& l : g.linears)
      if (l.expert && !detail::skipped(l, q)) one = checked_add(one, detail::quantized_linear_bytes(l, q).value());
    if (one == 0) continue;
    counted = checked_add(counted, checked_mul(cdiv(one, tp), g.count));
    moe_layers = checked_add(moe_layers, g.count);
  }
  if (moe_layers == 0) return 0;
  // The caching allocator's blocks, not the tensors' bytes: an expert tensor takes a new segment
  // (its size rounded up to 2 MiB, or 20 MiB under 10 MiB) and keeps the whole of it when 1 MiB
  // or less would be left (c10/cuda/CUDACachingAllocator.cpp should_split), as allocated_weights
  // replays an unquantized model's tensors. Each is taken as the first block of its own segment:
  // the load's order among the other tensors (the attention, norms, routers, the bf16 biases the
  // fp32 ones replace), which could carve a small tensor from a segment's rest, is not replayed.
  // gpt-oss-120b on triton_kernels: w13's scales 63.28 MiB in 64, w2's 31.64 in 32, the swizzled
  // w2 scales 33.75 in 34: 1.33 MiB a layer, 47.9 MiB over 36 layers (its log's "64.38 GiB":
  // 64.3806 here, was 64.3338); gpt-oss-20b on Marlin (A100) 0.75 MiB a layer (w13's scales
  // 17.25 MiB in 18): 13.7199 for "13.72" (was 13.7023).
  std::uint64_t excess_layer = 0;
  for (const std::uint64_t t : tensors) {
    CachingAllocator alloc;
    (void)alloc.malloc(t);
    excess_layer = checked_add(excess_layer, alloc.allocated() - alloc.requested());
  }
  const std::uint64_t excess = checked_mul(excess_layer, moe_layers);
  const std::uint64_t vllm_bytes = checked_add(checked_mul(held, moe_layers), excess);
  return vllm_bytes > counted ? vllm_bytes - counted : 0;
}

}  // namespace

Mxfp4Backend mxfp4_backend(unsigned cc, bool flashinfer) {
  // SM100 family with FlashInfer: its TRT-LLM kernels; Hopper (the FlashInfer SM90 path is off
  // unless VLLM_USE_FLASHINFER_MOE_MXFP4_BF16 is set) and SM100 without it: triton_kernels,
  // "confirmed to work on SM90 and SM100" (9.0 <= cc < 11.0); anything else: Marlin.
  if (cc >= 100 && cc < 110 && flashinfer) return Mxfp4Backend::flashinfer_sm100;
  if (cc >= 90 && cc < 110) return Mxfp4Backend::triton;
  return Mxfp4Backend::marlin;
}

CudaGraphs cuda_graphs(const spec::ModelSpec& m, const Settings& s) {
  CudaGraphs g;
  if (s.enforce_eager) return g;
  const Release& v = s.release;
  std::vector<std::uint64_t> sizes;
  const auto fill = [&sizes](std::uint64_t cap, bool step16) {
    for (const std::uint64_t b : {1, 2, 4})
      if (b <= cap) sizes.push_back(b);
    for (std::uint64_t b = 8; b <= cap && (!step16 || b < 256); b += 8) sizes.push_back(b);
    if (step16)
      for (std::uint64_t b = 256; b <= cap; b += 16) sizes.push_back(b);
  };
  if (s.v0_engine || !v.at_least(0, 8)) {
    // V0 (vllm/worker/model_runner.py capture_model; from 0.7 vllm/config.py
    // _set_cudagraph_sizes): [1, 2, 4] and the multiples of 8 up to max_num_seqs rounded up to
    // 8, at most 256 (512 from 0.7); one graph of the whole model per size.
    const std::uint64_t padded = cdiv(s.max_num_seqs, 8) * 8;
    fill(std::min<std::uint64_t>(padded, v.at_least(0, 7) ? 512 : 256), false);
    g.full = sizes.size();
  } else if (!v.at_least(0, 11)) {
    // V1 0.8 to 0.10 (vllm/config.py _set_cudagraph_sizes, cuda_graph_sizes = [512]):
    // [1, 2, 4] + range(8, 513, 8), the 67 graphs of vllm#20098, at most
    // max_num_batched_tokens; piecewise only (full_cuda_graph off).
    fill(std::min<std::uint64_t>(512, s.max_num_batched_tokens), false);
    g.piecewise = sizes.size();
  } else {
    // V1 from 0.11 (vllm/config/vllm.py _set_cudagraph_sizes): max_cudagraph_capture_size =
    // min(2 x max_num_seqs, 512), at most max_num_batched_tokens; [1, 2, 4] + range(8, 256, 8)
    // + range(256, max + 1, 16). cudagraph_mode FULL_AND_PIECEWISE (the default): every size
    // piecewise for mixed prefill-decode batches, and the sizes up to max_num_seqs as FULL
    // decode graphs ("Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35
    // (largest=256)" at max_num_seqs 256).
    fill(std::min({checked_mul(2, s.max_num_seqs), std::uint64_t{512}, s.max_num_batched_tokens}), true);
    g.piecewise = sizes.size();
    for (const std::uint64_t b : sizes)
      if (b <= s.max_num_seqs) {
        ++g.full;
        g.largest_full = b;
      }
  }
  if (g.full > 0 && g.largest_full == 0) g.largest_full = sizes.empty() ? 0 : sizes.back();
  std::reverse(sizes.begin(), sizes.end());  // captured largest first
  g.sizes = std::move(sizes);
  const std::uint64_t layers = cdiv(m.num_layers, s.pipeline_parallel);
  const bool v0 = s.v0_engine || !v.at_least(0, 8);
  g.pool = g.sizes.empty() ? Bytes{} : Bytes{forward_peak(m, s, g.sizes.front())};
  const std::uint64_t per_graph = checked_add(checked_mul(g.piecewise, kGraphPerLayerPiecewise),
                                              checked_mul(g.full, v0 ? kGraphPerLayerV0 : kGraphPerLayerFull));
  g.bytes = g.pool + Bytes{checked_mul(per_graph, layers)};
  // vLLM >= 0.21 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default; opt-in since its
  // introduction in vllm#30515): gpu_worker.py determine_available_memory captures the graphs
  // once during profiling (profile_cudagraph_memory: the first two graphs of each mode,
  // extrapolated linearly to the rest) and takes the estimate off the KV cache
  // ("cudagraph_memory_estimate_applied"). Before, the graphs came after, outside the budget.
  g.in_budget = !s.v0_engine && v.at_least(0, 21);
  return g;
}

namespace {

const auto gib = [](std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); };

/// vLLM's check of --max-model-len against the derived maximum (config/model.py
/// _get_and_verify_max_len), made when the config is read, before any memory is measured:
/// "User-specified max_model_len (N) is greater than the derived max_model_len (...)", a
/// ValueError unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set (then a warning, in the notes).
void check_max_model_len(const spec::ModelSpec& m, const Settings& s, Diagnostics& diags) {
  const DerivedMaxLen d = derived_max_model_len(m);
  if (d.scaled && !(d.tokens >= 1 && d.tokens <= static_cast<double>(kMaxModelLen))) {
    diags.add("rope_scaling.factor",
              fmt::format("the rotary scaling makes the model's maximum length {} ({})", d.tokens, d.rope),
              "check rope_scaling (or rope_parameters) against the model's config.json on the Hugging Face Hub");
    return;
  }
  if (!s.max_model_len || d.tokens <= 0 || static_cast<double>(*s.max_model_len) <= d.tokens ||
      s.allow_long_max_model_len)
    return;
  const std::uint64_t most = static_cast<std::uint64_t>(std::floor(d.tokens));
  diags.add("--max-model-len",
            fmt::format("{} is more than the model's derived maximum, {}{}: vLLM refuses it before it measures any "
                        "memory (\"{}\")",
                        *s.max_model_len, most, d.rope.empty() ? "" : " (" + d.rope + ")", long_len_message(m, s, d)),
            fmt::format("--max-model-len {} (or less); or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to serve it anyway (vLLM "
                        "warns: {}){}",
                        most,
                        m.learned_positions ? fmt::format("positions past {} are out of the position table, a CUDA error", most)
                                            : fmt::format("with RoPE, positions past {} give NaN", most),
                        d.scaled || m.learned_positions ? ""
                                                        : "; a rotary scaling the model card documents (such as Qwen's "
                                                          "YaRN), added to config.json's rope_scaling, raises the maximum"));
}

/// The settings vLLM refuses before it starts (all named at once).
void check_settings(const spec::ModelSpec& m, const Settings& s) {
  Diagnostics diags;
  if (!(s.gpu_memory_utilization > 0.0 && s.gpu_memory_utilization <= 1.0))
    diags.add("--gpu-memory-utilization", fmt::format("{} is not in (0, 1]", s.gpu_memory_utilization),
              "give a fraction of the card, e.g. --gpu-memory-utilization 0.9");
  if (s.tensor_parallel == 0 || (m.num_heads != 0 && m.num_heads % s.tensor_parallel != 0))
    diags.add("--tensor-parallel-size",
              fmt::format("{} does not divide the {} attention heads", s.tensor_parallel, m.num_heads),
              "vLLM needs num_attention_heads divisible by the tensor parallel size: use a divisor, e.g. 2, 4 or 8");
  // The splits vLLM's parallel layers assert (model_executor/layers/linear.py, utils divide):
  // QKVParallelLinear's KV heads (split, or replicated when the GPUs are a multiple of them), the
  // MLP's columns (MergedColumnParallelLinear), each expert's (FusedMoE's
  // intermediate_size_per_partition), and a block-fp8 checkpoint's per-GPU widths in whole blocks
  // (fp8.py validate_fp8_block_shape / Fp8MoEMethod: "is not divisible by weight quantization
  // block_n"), a GPTQ/AWQ one's input rows in whole groups. MLA's latent is not split.
  const std::uint64_t tp = s.tensor_parallel;
  if (tp > 1 && m.num_heads != 0 && m.num_heads % tp == 0) {
    const std::uint64_t kv = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
    if (m.kv_lora_rank == 0 && (tp >= kv ? tp % kv != 0 : kv % tp != 0))
      diags.add("--tensor-parallel-size",
                fmt::format("{} GPUs and {} KV heads: vLLM splits the KV heads over the GPUs, or copies them when the "
                            "GPUs are a multiple of them, and asserts otherwise",
                            tp, kv),
                "use a tensor parallel size that divides the KV heads or is a multiple of them");
    const auto widths = [&](std::uint64_t width, const char* what) {
      if (width == 0) return;
      if (width % tp != 0) {
        diags.add("--tensor-parallel-size",
                  fmt::format("{} does not divide the {} width {}: vLLM's parallel linear layers assert it", tp, what,
                              width),
                  "use a tensor parallel size that divides it");
        return;
      }
      const spec::Quantization* q = &s.weights.quant;  // the checkpoint's, or --quant's
      if (q->method == spec::QuantMethod::fp8 && q->fp8_block_rows > 1 && (width / tp) % q->fp8_block_rows != 0)
        diags.add("--tensor-parallel-size",
                  fmt::format("the {} width {} over {} GPUs is {} a GPU, not a multiple of the checkpoint's fp8 block "
                              "of {}: vLLM refuses it (\"is not divisible by weight quantization block_n\")",
                              what, width, tp, width / tp, q->fp8_block_rows),
                  "use fewer GPUs (the width over them in whole blocks), or an unquantized or per-channel fp8 checkpoint");
      else if ((q->method == spec::QuantMethod::gptq || q->method == spec::QuantMethod::awq) && q->group_size > 0 &&
               (width / tp) % q->group_size != 0)
        diags.add("--tensor-parallel-size",
                  fmt::format("the {} width {} over {} GPUs is {} a GPU, not a multiple of the checkpoint's group of {}: "
                              "vLLM refuses it (input_size_per_partition not divisible by the group size)",
                              what, width, tp, width / tp, q->group_size),
                  "use fewer GPUs, so that each holds whole groups");
    };
    widths(m.intermediate_size, "MLP");
    widths(m.moe.expert_intermediate, "expert");
  }
  if (s.pipeline_parallel == 0 || s.pipeline_parallel > m.num_layers)
    diags.add("--pipeline-parallel-size", fmt::format("{} stages for {} layers", s.pipeline_parallel, m.num_layers),
              "give at most one stage per layer");
  if (s.block_size == 0) diags.add("--block-size", "0 tokens", "vLLM's default is 16");
  if (s.max_num_seqs == 0) diags.add("--max-num-seqs", "0 sequences", "give at least 1");
  if (s.gpu_memory.value() == 0) diags.add("budget", "no GPU memory", "give --gpu ID or --budget SIZE");
  check_max_model_len(m, s, diags);
  if (m.kv_lora_rank > 0 && !model_row(m.model_type).mla && !model_row(m.model_type).heads_cache)
    diags.add("--engine",
              fmt::format("vllm: model_type '{}' has latent attention (kv_lora_rank {}) that vLLM does not serve as "
                          "MLA (is_deepseek_mla: deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2, longcat_flash) "
                          "nor as minicpm3's every-head cache; its own attention's cache is not laid out by vramfit",
                          m.model_type, m.kv_lora_rank),
              "estimate it with the default engine (--engine transformers)");
  diags.throw_if_any();
  // Layers that differ (gemma4_text) are laid out per kind (layer_kinds), on one pipeline stage.
  if (!layer_kinds(m)) require_uniform_layers(m, "vllm");
  else if (s.pipeline_parallel > 1)
    throw InputError("--pipeline-parallel-size",
                     fmt::format("model_type '{}' has caching layers of different widths and KV-shared layers; vramfit "
                                 "lays them out on one pipeline stage only",
                                 m.model_type),
                     "use --tensor-parallel-size instead, or estimate with --pipeline-parallel-size 1");
}

/// The rows of vLLM's rotary cos/sin caches (model_executor/layers/rotary_embedding get_rope, one
/// instance per distinct scaling, shared through _ROPE_DICT): RotaryEmbedding and llama3's
/// max_position_embeddings; LinearScaling and DynamicNTKScaling max_position_embeddings x factor;
/// YaRN and DeepseekScaling (DeepSeek's yarn) original_max_position_embeddings x factor;
/// Phi3LongRoPEScaled the short and the long caches, original + max_position_embeddings.
/// torch.arange of a fractional length has its ceiling's rows. Gemma 3 is left at
/// max_position_embeddings (ModelRow::positions_prescaled).
std::uint64_t rope_cache_rows(const spec::ModelSpec& m) {
  const std::uint64_t P = m.max_positions;
  if (m.rope_scaling.empty() || model_row(m.model_type).positions_prescaled) return P;
  const auto times = [](std::uint64_t n, double f) {
    const double r = std::ceil(static_cast<double>(n) * f);
    return r > 0 && r < static_cast<double>(kMaxModelLen) ? static_cast<std::uint64_t>(r) : n;
  };
  std::uint64_t rows = 0;
  std::vector<const spec::RopeScaling*> seen;
  for (const spec::RopeScaling& rs : m.rope_scaling) {
    // Per-layer-type entries that are the same scaling share one instance.
    if (std::any_of(seen.begin(), seen.end(), [&](const spec::RopeScaling* o) {
          return o->type == rs.type && o->factor == rs.factor && o->original_max_positions == rs.original_max_positions;
        }))
      continue;
    seen.push_back(&rs);
    const std::uint64_t original = rs.original_max_positions > 0 ? rs.original_max_positions : m.original_max_positions;
    std::uint64_t r = P;
    if ((rs.type == "linear" || rs.type == "dynamic") && rs.factor)
      r = times(P, *rs.factor);
    else if (rs.type == "yarn" && rs.factor)
      r = times(original > 0 ? original : P, *rs.factor);
    else if ((rs.type == "longrope" || rs.type == "su") && original > 0)
      r = checked_add(original, P);
    rows = checked_add(rows, r);
  }
  return rows;
}

/// The attention layer's scalar tensors, made on the GPU when the model is built (vllm/attention/
/// layer.py Attention.__init__, torch.tensor(...) under the loader's device context), each a
/// 512-byte block of the caching allocator: none up to 0.6.4 (Python floats), _k_scale and
/// _v_scale from 0.6.5, and from 0.7.3 also _q_scale, _prob_scale and the q/k/v_range constants.
std::uint64_t attention_scalars(const Release& r) {
  const auto key = std::tuple(r.major, r.minor, r.patch);
  if (key < std::tuple(0U, 6U, 5U)) return 0;
  if (key < std::tuple(0U, 7U, 3U)) return 2;
  return 7;
}

/// The decoder layers [first, last) of pipeline stage `stage` of `pp` (vllm/distributed/utils.py
/// get_pp_indices, VLLM_PP_LAYER_PARTITION unset): layers // pp each, and the remainder one more
/// each to the stages before the last, from the second-last back (partitions[-i] += 1 for i in
/// 2 .. remainder + 1), since the last stage also holds the final norm and the lm_head.
std::pair<std::uint64_t, std::uint64_t> stage_layers(std::uint64_t layers, std::uint64_t stage, std::uint64_t pp) {
  const std::uint64_t base = layers / pp, extra = layers % pp;
  // Stages pp - 1 - extra .. pp - 2 get one more.
  const auto count = [&](std::uint64_t k) { return base + (k + 1 < pp && k + 1 + extra >= pp ? 1 : 0); };
  std::uint64_t first = 0;
  for (std::uint64_t k = 0; k < stage; ++k) first += count(k);
  return {first, first + count(stage)};
}

/// More layers than this are not replayed one by one (no model has them; a hostile config might).
constexpr std::uint64_t kMaxReplayedLayers = 4096;

/// The V1 model runner's device buffers that exist before the model is loaded, in the order
/// GPUModelRunner.__init__ makes them, as the caching allocator sees them (only blocks of the
/// large pool, over 1 MiB, can change where the weights land; the small ones live in the 2 MiB
/// segments of the small pool): the input batch's block table, int32 [max_num_seqs,
/// cdiv(max_model_len, block_size)] (gpu_input_batch.py InputBatch -> block_table.py
/// BlockTable), and the persistent inputs_embeds buffer, [max_num_batched_tokens, hidden_size]
/// in the model dtype, kept for CUDA graphs and prompt embeddings. Both stay allocated, so they
/// are outside "Model loading took" (DeviceMemoryProfiler's memory_allocated() difference), but
/// the free rest of their 20 MiB segments takes the first weights that fit: Qwen2.5-1.5B on
/// 0.11.2 (max_num_batched_tokens 2048: a 6 MiB inputs_embeds) then lays its o_proj blocks so
/// that one fewer leaves an unsplit 0.5 MiB tail, 2.8871 GiB as logged (2.8876 without them).
std::vector<std::uint64_t> runner_buffers(const spec::ModelSpec& m, const Settings& s, std::uint64_t wb,
                                          std::uint64_t max_model_len) {
  const std::uint64_t block_table =
      checked_mul(checked_mul(s.max_num_seqs, cdiv(max_model_len, std::max<std::uint64_t>(1, s.block_size))), 4);
  const std::uint64_t inputs_embeds = checked_mul(checked_mul(s.max_num_batched_tokens, m.hidden_size), wb);
  return {block_table, inputs_embeds};
}

/// Whether vLLM runs the model's AWQ linears with its Marlin kernels (quantization/awq_marlin.py,
/// AWQMarlinConfig.is_awq_marlin_compatible: 4 or 8 bits with zero points, a group size Marlin
/// takes, CUDA of compute capability 8.0 or more; vLLM picks awq_marlin over awq there): dense
/// models only here (AWQ experts are AWQMoEMethod's, not replayed); a card of unknown compute
/// capability is taken as one that runs Marlin (Ampere and later).
bool awq_marlin(const spec::ModelSpec& m, const Settings& s, const spec::Quantization& q) {
  if (q.method != spec::QuantMethod::awq || (q.bits != 4 && q.bits != 8)) return false;
  if (q.group_size != 0 && q.group_size != 32 && q.group_size != 64 && q.group_size != 128) return false;
  if (s.compute_capability != 0 && s.compute_capability < 80) return false;
  for (const spec::LayerGroup& g : m.layers)
    for (const spec::Linear& l : g.linears)
      if (l.expert || l.copies > 1) return false;
  return true;
}

/// The Marlin workspace each AWQ linear gets (marlin_utils.py marlin_make_workspace_new: one int32
/// per streaming multiprocessor): one 1024-byte block for the 129 to 256 SMs of the cards these
/// logs name (188 on an RTX PRO 6000 Blackwell; 132 on an H100), 512 bytes below that.
constexpr std::uint64_t kMarlinWorkspace = 188 * 4;

/// MLA's down-projections (deepseek_v2.py, minicpm3.py): they write the latents (q_lora_rank;
/// kv_lora_rank + the rope key), not heads, and are ReplicatedLinear, whole on every rank;
/// q_proj (no q_lora) reads the same input but is split by heads.
bool mla_latent(const spec::ModelSpec& m, const spec::Linear& l) {
  return m.kv_lora_rank > 0 && l.role == spec::Role::attn_in &&
         (l.out_features == m.kv_lora_rank + m.qk_rope_head_dim || (m.q_lora_rank > 0 && l.out_features == m.q_lora_rank));
}

/// vLLM's parameters of one GPU as PyTorch's caching allocator lays them out. "Model loading
/// took" is torch.cuda.memory_allocated() after the model is built and loaded, less before
/// (DeviceMemoryProfiler), and the allocator counts blocks, not requests: a tensor of 10 MiB or
/// more gets a segment rounded up to 2 MiB, and the block is split off only when more than
/// 1 MiB would be left (c10/cuda/CUDACachingAllocator.cpp should_split), so a weight that leaves
/// 1 MiB or less of its segment counts the whole segment. A weight may instead reuse a freed
/// block: the first attention layer's rotary cache is computed on the GPU in fp32 (arange,
/// einsum, cos, sin, cat; rotary_embedding.py _compute_cos_sin_cache) and cast, leaving those
/// temporaries cached. The model is built under the loader's device context (model_loader
/// DefaultModelLoader.load_model: `with target_device`) in its modules' order, the checkpoint's
/// tensors are copied into the parameters from host memory, so the build order decides:
///  - the token embedding, the vocabulary padded to 64 (VocabParallelEmbedding,
///    DEFAULT_VOCAB_PADDING_SIZE) and split over TP;
///  - per layer: the attention (q/k/v fused, QKVParallelLinear: the heads split, the KV heads
///    replicated when fewer than the GPUs; its bias split; o_proj RowParallelLinear, its input
///    split and its bias whole), the rotary cache in the first layer, the attention's scalars;
///    the MLP (gate/up fused and split, MergedColumnParallelLinear; down_proj's input split, its
///    bias whole; MoE experts as FusedMoE's w13 [E, 2I/tp, H] and w2 [E, H, I/tp], the router
///    ReplicatedLinear whole); the norms, whole on every GPU;
///  - the final norm and the lm_head (padded and split like the embedding) unless tied.
/// R1-Distill-Qwen-14B with TP 2 (vllm#13061): o_proj 25 MiB and qkv_proj 35 MiB in segments of
/// 26 and 36, gate_up 135 in 136, down 67.5 in 68: 164.05 MiB more than the parameters.
/// With pipeline parallel each stage is one process that builds only its own part (the layers
/// of stage_layers, PPMissingLayer for the others): the first stage the embedding, the last the
/// final norm and the lm_head (and, tied, the embedding again: llama.py and qwen2.py build
/// embed_tokens on the first rank or, with tie_word_embeddings, the last); each stage's first
/// layer builds its rotary cache. vLLM sizes the KV cache by the tightest worker, so the stage
/// holding the most is the figure.
/// AWQ checkpoints run with Marlin (awq_marlin) as well: each linear is created as qweight
/// [K, N x bits / 32] int32, qzeros [K / group, N x bits / 32] int32 and scales [K / group, N] in
/// the model dtype (AWQMarlinLinearMethod.create_weights), and after the whole model is loaded
/// process_weights_after_loading repacks them module by module into new tensors
/// (replace_parameter re-registers a plain tensor, so each original is freed after its
/// replacement is made): the workspace, awq_marlin_repack's qweight, marlin_permute_scales'
/// indexed copy, and awq_to_marlin_zero_points' chain (unpack_cols' [K / group, N] int32 made on
/// the host and copied in, the undone interleave and Marlin's two permutations as indexed copies,
/// pack_cols' result copied in), a bias permuted by marlin_permute_bias. The replacements land in
/// the blocks the originals and the chain left, and the blocks they leave unsplit are what
/// "Model loading took" shows beyond the parameters: Llama-3.1-70B AWQ on an RTX PRO 6000
/// (vLLM 0.14): 37.0940 GiB here (created only: 37.080; the parameters' bytes: 37.068), "37.09"
/// logged.
/// MLA (DeepSeek-V2-Lite's shapes, without a q_lora): q_proj and kv_b_proj split by heads,
/// kv_a_proj_with_mqa whole (ReplicatedLinear), o_proj's input split, the rotary cache after
/// o_proj (DeepseekScalingRotaryEmbedding: cos and sin times the YaRN mscale, cast to the model
/// dtype); MLA's process_weights_after_loading takes views of kv_b_proj (W_UV, W_UK_T), no copy.
/// Other quantized decoders are not replayed (nullopt), nor MLA with a q_lora (fused later) or a
/// vision tower.
std::optional<std::uint64_t> allocated_weights(const spec::ModelSpec& m, const Settings& s, std::uint64_t wb,
                                               std::uint64_t rope_rows, std::uint64_t rotary_dim,
                                               std::uint64_t rope_bytes, std::uint64_t stage,
                                               std::uint64_t max_model_len) {
  const spec::Quantization q = spec::scheme_of(s.weights);
  const bool awq = awq_marlin(m, s, q);
  // MLA served as MLA: each projection its own module (no fused QKV). With a q_lora, later
  // releases fuse q_a_proj and kv_a_proj_with_mqa (fused_qkv_a_proj): not replayed.
  const bool mla = m.kv_lora_rank > 0;
  if ((mla && (!model_row(m.model_type).mla || m.q_lora_rank > 0 || awq)) || m.learned_positions || m.vision || m.packed_weight_bytes ||
      (q.method != spec::QuantMethod::none && !awq) || (!awq && !is_float_compute(s.weights.weights)) ||
      spec::count_params(m) != m.params || m.hidden_size == 0 || m.vocab_size == 0 ||
      m.embedding_params != checked_mul(m.vocab_size, m.hidden_size))
    return std::nullopt;
  // A layer count no real model has (a hostile config) is not replayed layer by layer.
  std::uint64_t layers = 0;
  for (const spec::LayerGroup& g : m.layers) layers = checked_add(layers, g.count);
  if (layers > kMaxReplayedLayers) return std::nullopt;
  const std::uint64_t tp = s.tensor_parallel;
  const std::uint64_t H = m.hidden_size;
  const auto [from, to] = stage_layers(layers, stage, s.pipeline_parallel);
  const bool first_stage = stage == 0, last_stage = stage + 1 == s.pipeline_parallel;
  CachingAllocator alloc;
  // V1's model runner is built before the model (gpu_worker.py init_device, then load_model) and
  // keeps its persistent device buffers alive through the load (runner_buffers): the weights
  // are placed around them, and "Model loading took" counts only what the load adds.
  if (!s.v0_engine)
    for (const std::uint64_t b : runner_buffers(m, s, wb, max_model_len)) (void)alloc.malloc(b);
  const std::uint64_t before_load = alloc.allocated();
  const auto keep = [&](std::uint64_t bytes) { (void)alloc.malloc(bytes); };
  const std::uint64_t vocab = round_up(m.vocab_size, 64);
  if (first_stage || (last_stage && m.lm_head_params == 0)) keep(checked_mul(checked_mul(cdiv(vocab, tp), H), wb));
  const std::uint64_t kvh = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
  const std::uint64_t qkv_full = checked_mul(m.num_heads + 2 * kvh, m.head_dim);
  const std::uint64_t qkv_rank = checked_mul(m.num_heads / tp + 2 * std::max<std::uint64_t>(1, kvh / tp), m.head_dim);
  const std::uint64_t scalars = attention_scalars(s.release);
  // The AWQ linears made, in the model's module order (process_weights_after_loading's order).
  struct AwqLinear {
    std::uint64_t k = 0, n = 0, groups = 0, bias_n = 0;
    CachingAllocator::Handle qweight = 0, qzeros = 0, scales = 0, bias = 0;
  };
  std::vector<AwqLinear> awq_linears;
  bool rope_built = m.learned_positions;
  std::uint64_t index = 0;  // the layer's number in the model
  for (const spec::LayerGroup& g : m.layers) {
    for (std::uint64_t layer = 0; layer < g.count; ++layer, ++index) {
      if (index < from || index >= to) continue;  // another stage's (PPMissingLayer)
      // Consecutive linears of one role (and kind) are one vLLM module.
      std::size_t i = 0;
      bool attention_done = false;
      while (i < g.linears.size()) {
        const spec::Linear& first = g.linears[i];
        std::uint64_t out = 0, bias = 0;
        std::size_t j = i;
        for (; j < g.linears.size(); ++j) {
          const spec::Linear& l = g.linears[j];
          if (l.role != first.role || l.expert != first.expert || l.shared_expert != first.shared_expert ||
              l.in_features != first.in_features || l.copies != first.copies ||
              (j > i && ((first.role != spec::Role::attn_in && first.role != spec::Role::mlp_in) ||
                         (mla && first.role == spec::Role::attn_in))))
            break;
          out = checked_add(out, l.out_features);
          if (l.bias) bias = checked_add(bias, l.out_features);
        }
        const std::uint64_t copies = first.copies;
        const std::uint64_t in = first.in_features;
        // This rank's [rows, cols] of the module's weight and its bias's length.
        std::uint64_t rows = 0, cols = in, bias_n = 0;
        switch (first.role) {
          case spec::Role::attn_in:  // column parallel; q/k/v by heads
            if (mla_latent(m, first)) {  // kv_a_proj_with_mqa, ReplicatedLinear: whole on every rank
              rows = out;
              bias_n = bias;
              break;
            }
            rows = !mla && out == qkv_full ? qkv_rank : cdiv(out, tp);
            bias_n = bias == 0 ? 0 : !mla && out == qkv_full ? qkv_rank : cdiv(bias, tp);
            break;
          case spec::Role::attn_out:
          case spec::Role::mlp_out:  // row parallel: the input split, the bias whole
            rows = out;
            cols = cdiv(in, tp);
            bias_n = bias;
            break;
          case spec::Role::router:  // ReplicatedLinear
            rows = out;
            bias_n = bias;
            break;
          default:  // column parallel (gate/up, experts' w13, attention inner projections)
            rows = cdiv(out, tp);
            bias_n = bias == 0 ? 0 : cdiv(bias, tp);
            break;
        }
        bool quantized = awq && !detail::skipped(first, q);
        if (quantized) {
          // Marlin's shape rules (verify_marlin_supports_shape: N a multiple of 64, K of 128 and of
          // the group): a module outside them falls back to the plain AWQ kernel, not replayed.
          if (rows % 64 != 0 || cols % 128 != 0 || (q.group_size != 0 && cols % q.group_size != 0)) return std::nullopt;
          AwqLinear a;
          a.k = cols;
          a.n = rows;
          a.groups = q.group_size == 0 ? 1 : cols / q.group_size;
          a.qweight = alloc.malloc(checked_mul(checked_mul(cols, rows), q.bits) / 8);
          a.qzeros = alloc.malloc(checked_mul(checked_mul(a.groups, rows), q.bits) / 8);
          a.scales = alloc.malloc(checked_mul(checked_mul(a.groups, rows), wb));
          if (bias_n > 0) a.bias = alloc.malloc(checked_mul(bias_n, wb));
          a.bias_n = bias_n;
          awq_linears.push_back(a);
        } else {
          keep(checked_mul(checked_mul(rows, cols), checked_mul(wb, copies)));
          if (bias_n > 0) keep(checked_mul(checked_mul(bias_n, wb), first.role == spec::Role::router ? 1 : copies));
        }
        if (first.role == spec::Role::attn_out && !attention_done) {
          attention_done = true;
          if (!rope_built && rope_rows > 0 && rotary_dim > 0) {
            // get_rope's cos/sin cache, computed in fp32 and cast (kept in fp32 when asked).
            rope_built = true;
            const std::uint64_t half = checked_mul(checked_mul(rope_rows, rotary_dim / 2), 4);
            const auto inv_freq = alloc.malloc(rotary_dim / 2 * 4);
            const auto t = alloc.malloc(checked_mul(rope_rows, 4));
            const auto freqs = alloc.malloc(half);
            // YaRN multiplies cos and sin by its mscale: freqs.cos() * mscale (the product is new).
            const bool yarn = std::any_of(m.rope_scaling.begin(), m.rope_scaling.end(),
                                          [](const spec::RopeScaling& rs) { return rs.type == "yarn"; });
            const auto scaled = [&] {
              if (!yarn) return alloc.malloc(half);
              const auto raw = alloc.malloc(half);
              const auto product = alloc.malloc(half);
              alloc.free(raw);
              return product;
            };
            const auto cos = scaled();
            const auto sin = scaled();
            const auto cat = alloc.malloc(checked_mul(checked_mul(rope_rows, rotary_dim), 4));
            for (const auto h : {inv_freq, t, freqs, cos, sin}) alloc.free(h);
            if (rope_bytes != 4) {
              keep(checked_mul(checked_mul(rope_rows, rotary_dim), rope_bytes));
              alloc.free(cat);
            }
          }
          for (std::uint64_t k = 0; k < scalars; ++k) keep(4);
        }
        i = j;
      }
      if (g.other_params > 0) keep(checked_mul(g.other_params, wb));
      if (g.norm_params > 0) keep(checked_mul(g.norm_params, wb));
    }
  }
  if (last_stage) {
    if (m.final_norm_params > 0) keep(checked_mul(m.final_norm_params, wb));
    if (m.lm_head_params > 0) {
      keep(checked_mul(checked_mul(cdiv(vocab, tp), H), wb));
      if (m.lm_head_params > checked_mul(m.vocab_size, H)) keep(checked_mul(cdiv(vocab, tp), wb));  // its bias
    }
  }
  // AWQ with Marlin: every linear repacked after the load, in module order (awq_marlin.py
  // AWQMarlinLinearMethod.process_weights_after_loading; marlin_utils.py, quant_utils.py).
  for (const AwqLinear& a : awq_linears) {
    const std::uint64_t packed = checked_mul(checked_mul(a.k, a.n), q.bits) / 8;
    const std::uint64_t zeros = checked_mul(checked_mul(a.groups, a.n), q.bits) / 8;
    const std::uint64_t unpacked = checked_mul(checked_mul(a.groups, a.n), 4);  // [groups, N] int32
    keep(kMarlinWorkspace);
    (void)alloc.malloc(packed);  // awq_marlin_repack's output replaces qweight
    alloc.free(a.qweight);
    (void)alloc.malloc(checked_mul(checked_mul(a.groups, a.n), wb));  // marlin_permute_scales: s[:, perm]
    alloc.free(a.scales);
    // awq_to_marlin_zero_points: unpack_cols (numpy, then .to(device)), the AWQ interleave undone
    // (an indexed copy; unpack_cols' result dropped), then marlin_zero_points: scale_perm's indexed
    // copy, the interleave's (the first dropped), pack_cols (numpy) copied in; the caller's and
    // the last copy dropped on return, then the old qzeros by replace_parameter.
    const auto unpacked_h = alloc.malloc(unpacked);
    const auto undone = alloc.malloc(unpacked);
    alloc.free(unpacked_h);
    const auto permuted = alloc.malloc(unpacked);
    const auto interleaved = alloc.malloc(unpacked);
    alloc.free(permuted);
    (void)alloc.malloc(zeros);
    alloc.free(interleaved);
    alloc.free(undone);
    alloc.free(a.qzeros);
    if (a.bias_n > 0) {  // marlin_permute_bias: an indexed copy replaces bias.data
      (void)alloc.malloc(checked_mul(a.bias_n, wb));
      alloc.free(a.bias);
    }
  }
  return alloc.allocated() - before_load;
}

/// What vLLM keeps whole on every tensor-parallel rank, in the bytes weight_bytes counts for it:
/// the norms (RMSNorm and LayerNorm are plain parameters, never split), every MoE router
/// (ReplicatedLinear: qwen2_moe.py, qwen3_moe.py, deepseek_v2.py `self.gate`), and the latent
/// down-projections (deepseek_v2.py DeepseekV2MLAAttention, minicpm3.py: q_a_proj and kv_a_proj_with_mqa are
/// ReplicatedLinear, later releases fuse them as fused_qkv_a_proj, a MergedColumnParallelLinear
/// with disable_tp=True): each rank runs them on the whole hidden state, and only q_b_proj,
/// kv_b_proj and o_proj are split by heads; Gemma 4's per-layer-input gate and projection.
std::uint64_t replicated_bytes(const spec::ModelSpec& m, const Settings& s, std::uint64_t wb) {
  const spec::Quantization q = spec::scheme_of(s.weights);
  const auto stored = [&](const spec::Linear& l) -> std::uint64_t {
    if (q.method == spec::QuantMethod::none) return checked_mul(l.params(), wb);
    if (detail::skipped(l, q)) return checked_mul(l.params(), 2);
    return detail::quantized_linear_bytes(l, q).value();
  };
  // Gemma 4's per-layer inputs (gemma4.py Gemma4DecoderLayer: per_layer_input_gate and
  // per_layer_projection are ReplicatedLinear).
  const auto per_layer_input = [&](const spec::Linear& l) {
    return m.model_type == "gemma4_text" && (l.name == "per_layer_input_gate" || l.name == "per_layer_projection");
  };
  std::uint64_t b = checked_mul(m.final_norm_params, wb);
  for (const spec::LayerGroup& g : m.layers) {
    std::uint64_t layer = checked_mul(g.norm_params, wb);
    for (const spec::Linear& l : g.linears)
      if (l.role == spec::Role::router || mla_latent(m, l) || per_layer_input(l))
        layer = checked_add(layer, stored(l));
    b = checked_add(b, checked_mul(layer, g.count));
  }
  return b;
}

/// The weights on one GPU ("Model loading took X GiB"): the checkpoint's bytes split over TP x
/// PP, the rotary cos/sin cache, MXFP4 experts in their kernels' layout (with a note saying which).
Bytes weights_on_gpu(const spec::ModelSpec& m, const Settings& s, std::uint64_t max_model_len,
                     std::vector<std::string>& notes) {
  const std::uint64_t tp = s.tensor_parallel, pp = s.pipeline_parallel;
  const std::uint64_t wb = dtype_bytes(is_float_compute(s.weights.weights) ? s.weights.weights : DType::bf16);
  // HF's rotary inv_freq buffers (ModelSpec::buffer_bytes) have no place in vLLM's model: its
  // rotary layer keeps the cos/sin cache instead (added below).
  const Bytes all = Bytes::saturating_sub(detail::weight_bytes(m, s.weights, wb), Bytes{m.buffer_bytes});
  const std::uint64_t emb = checked_mul(m.embedding_params, 2);
  const std::uint64_t head = checked_mul(m.lm_head_params, 2);
  const std::uint64_t ends = std::min(all.value(), emb + head);
  const std::uint64_t body = all.value() - ends;
  // Each stage holds its share of the layers; the first the embeddings, the last the lm_head
  // (the larger end is counted, the stage that binds); vocab-parallel over TP. What every
  // tensor-parallel rank keeps whole (replicated_bytes) is not split.
  const std::uint64_t end = pp == 1 ? ends : std::max(emb, head);
  const std::uint64_t whole = std::min(body, replicated_bytes(m, s, wb));
  Bytes w{cdiv(body - whole, tp * pp) + cdiv(whole, pp) + cdiv(end, tp)};
  // The rotary embedding's cos/sin cache, a buffer of [max_position_embeddings, rotary_dim]
  // in the model dtype on every GPU (vllm/model_executor/layers/rotary_embedding.py,
  // _compute_cos_sin_cache): Llama-3.1-8B's 131072 x 128 x 2 bytes = 32 MiB is why vLLM
  // logs "Model loading took 14.9888 GiB" for 14.9575 GiB of parameters. gpt-oss asks
  // get_rope for an fp32 cache (models/gpt_oss.py OAIAttention: dtype=torch.float32; YaRN's
  // original 4096 positions x factor 32 = 131072 rows of 64): 32 MiB, not 16.
  // The rows follow the rotary scaling (rope_cache_rows); MLA rotates only qk_rope_head_dim of
  // a head (deepseek_v2.py: get_rope(qk_rope_head_dim, ...)), a partial rotary model
  // int(head_size x partial_rotary_factor) (phi.py, gpt_neox.py, stablelm.py; get_rope's
  // partial_rotary_factor argument for glm4): phi-1.5's [2048, 32], not [2048, 64].
  const std::uint64_t rope_bytes = model_row(m.model_type).rope_fp32 ? 4 : 2;
  const double factor = m.partial_rotary_factor > 0.0 && m.partial_rotary_factor < 1.0 ? m.partial_rotary_factor : 1.0;
  const std::uint64_t rotary_dim = m.kv_lora_rank > 0 ? m.qk_rope_head_dim
                                                      : static_cast<std::uint64_t>(static_cast<double>(m.head_dim) * factor);
  if (!m.learned_positions) w += Bytes{checked_mul(checked_mul(rope_cache_rows(m), rotary_dim), rope_bytes)};
  // Layers that differ (gemma4.py Gemma4Attention): every layer builds a whole QKVParallelLinear,
  // (heads + 2 x KV heads) x head size, where the checkpoint has no k_proj/v_proj (KV-shared
  // layers) or no v_proj (attention_k_eq_v: the K weights are loaded into the V slot too), and
  // a k_norm of the head size on the KV-shared layers: what vLLM allocates beyond the parameters.
  if (layer_kinds(m)) {
    const std::uint64_t kvh0 = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
    std::uint64_t linear = 0, norms = 0;
    for (const spec::LayerGroup& g : m.layers) {
      const std::uint64_t hd = g.head_dim != 0 ? g.head_dim : m.head_dim, kvh = g.kv_heads != 0 ? g.kv_heads : kvh0;
      std::uint64_t out = 0;
      bool bias = false;
      for (const spec::Linear& l : g.linears)
        if (l.role == spec::Role::attn_in) {
          out = checked_add(out, l.out_features);
          bias = bias || l.bias;
        }
      const std::uint64_t want = checked_mul(m.num_heads + 2 * kvh, hd);
      if (want > out)
        linear = checked_add(linear, checked_mul(checked_mul(want - out, m.hidden_size + (bias ? 1 : 0)), g.count));
      if (g.kv_shared) norms = checked_add(norms, checked_mul(hd, g.count));
    }
    w += Bytes{checked_add(cdiv(checked_mul(linear, wb), tp), checked_mul(norms, wb))};
  }
  // An unquantized decoder: its tensors as the caching allocator places them (allocated_weights).
  std::optional<std::uint64_t> laid_out;
  for (std::uint64_t stage = 0; stage < pp; ++stage) {
    const auto one = allocated_weights(m, s, wb, m.learned_positions ? 0 : rope_cache_rows(m), rotary_dim, rope_bytes, stage,
                                       max_model_len);
    if (!one) break;
    laid_out = std::max(laid_out.value_or(0), *one);
  }
  if (laid_out) {
    w = Bytes{*laid_out};
  } else {
    // Not replayed (quantized, MLA, vision): the attention layers' scalar tensors are made all the
    // same (attention_scalars: Attention.__init__ builds them whatever the weights' quantization),
    // one 512-byte block each, on the stage holding the most layers. Llama-3.1-70B W8A8 on V1 0.7
    // (vllm#12569, "67.7229 GiB"): 80 x 2 blocks, 67.72287 here (67.72279 without).
    std::uint64_t attention_layers = 0;
    for (const spec::LayerGroup& g : m.layers)
      if (!g.linear_attention) attention_layers = checked_add(attention_layers, g.count);
    w += Bytes{checked_mul(checked_mul(cdiv(attention_layers, pp), attention_scalars(s.release)), 512)};
  }
  // MXFP4 experts in the layout of vLLM's kernels (each stage holds its share of the layers).
  const std::uint64_t mx = mxfp4_expert_extra(m, s, tp);
  w += Bytes{cdiv(mx, pp)};
  if (mx > 0) {
    const Mxfp4Backend be = mxfp4_backend(s.compute_capability, s.flashinfer);
    const char* kernels = be == Mxfp4Backend::triton             ? "triton_kernels (the scales held twice)"
                          : be == Mxfp4Backend::flashinfer_sm100 ? "FlashInfer's SM100 MoE (I and H padded to 256)"
                                                                 : "Marlin (I padded to 128, H to 256)";
    notes.push_back(s.compute_capability == 0
                        ? fmt::format("MXFP4 experts laid out for {}: the card is not named (give --gpu ID), "
                                      "so Marlin's (Ampere, Ada) is taken",
                                      kernels)
                        : fmt::format("MXFP4 experts laid out for {}, vLLM's kernels on compute capability {}.{}",
                                      kernels, s.compute_capability / 10, s.compute_capability % 10));
  }
  return w;
}

/// The dummy sampler run over max_num_seqs requests (gpu_model_runner.py _dummy_sampler_run:
/// the forward's hidden states [T, H] stay alive, plus the requests' rows and their
/// torch.rand_like copy, 2 x [max_num_seqs, H]; the logits are [max_num_seqs, vocab]):
/// - V0 (worker/model_runner.py profile_run: max_num_seqs dummy prompts sharing
///   max_num_batched_tokens, each sampled with SamplingParams(top_p=0.99, top_k=vocab - 1);
///   layers/sampler.py Sampler.forward): execute_model holds the bf16 logits (2 bytes a logit)
///   while the sampler makes its fp32 copy (4) and _apply_top_k_top_p sorts it: torch.sort's
///   fp32 values (4) and int64 indices (8), and its segmented radix sort's int64 index input
///   (8) and cub's double buffer of keys and values (4 + 8): 38 bytes a logit at the sort,
///   the run's peak (after it: the masks, softmax and cumsum of the sorted logits, 32; then
///   probs, logprobs and _multinomial's copy and exponential draw, 22). FlashInfer's sampler
///   is off in V0 unless VLLM_USE_FLASHINFER_SAMPLER=1. Four logs without chunked prefill
///   (0.6.4 on a T4 and an H200, 0.6.5 on H100 with TP 1 and 2) match it within 1%;
/// - V0 with chunked prefill (max_num_batched_tokens < max_model_len; on by default past 32K
///   tokens) before 0.8: the three logs (0.6.4 at 35000 tokens, 0.7 twice) show no sampler peak
///   at all, the forward at max_num_batched_tokens and the cuBLAS workspace make up the whole
///   figure (0.06 of 0.06 GiB, 0.22 of 0.22, and 0.17 of 0.19 with TP 2). From 0.8 the sort
///   shows as without chunked prefill: V0 0.8.5 on four RTX 2080 Ti (Turing runs V0), Qwen3-8B's
///   shapes at 8192 batched tokens and max_model_len 65536, logs 1.45 GiB, the sort's 38 bytes
///   a logit over 256 requests, the hidden states and the workspace (1.447 here; the forward
///   alone is 0.40). The path that skips the dummy sampling before 0.8 was not found in the
///   source: taken as the logs show it, with the sort kept from 0.8 (the larger peak, so the
///   smaller cache, where a release between is not known);
/// - V1 with FlashInfer's sampling kernels (the default where FlashInfer is installed, on
///   a CUDA GPU with more than 16 SMs: topk_topp_sampler.py flashinfer_sampler_supported):
///   flashinfer_sample calls top_k_top_p_sampling_from_logits, which in FlashInfer's default
///   "top_k_first" order masks the logits into a new tensor (top_k_mask_logits: fp32, as its
///   input) and takes their softmax (fp32) while the sampler's fp32 copy (sampler.py
///   logits.to(torch.float32)) and the caller's bf16 logits stay referenced: 2 + 4 + 4 + 4 =
///   14 bytes a logit (Llama 3.2 1B on V1 0.10, 256 requests: 0.4458 GiB against 0.45 logged;
///   it was +12.7% at the 16 bytes taken before);
/// - V1 with the PyTorch-native top-k/top-p (sampler_kernel: 0.8.0-0.9.0, 0.11.1-0.15):
///   apply_top_k_top_p sorts the fp32 logits while the bf16 logits (2) and their fp32 copy
///   (4) stay alive: 38 bytes a logit as V0's sort. The five H100 runs of the late-2025
///   write-up (vocab 128256 to 201088, max_num_seqs 1024) log 4.76 to 7.38 GiB.
/// - V1 with the Triton top-k/top-p (from 0.16): the bf16 logits, their fp32 copy, the
///   probabilities and the exponential noise (2 + 4 + 4 + 4) and the kernel's [programs,
///   vocab] scratch (topk_topp_triton.py: [min(SMs, requests), vocab] fp32, kept in a cache):
///   the SM count is not in the GPU catalog, so the scratch is taken as 2 bytes a logit, 16
///   in all (256 requests on 108 SMs: 1.7; kvcached#448's 2026 run on an A100: +0.3%).
std::uint64_t sampler_peak(const spec::ModelSpec& m, const Settings& s, std::uint64_t max_model_len) {
  const std::uint64_t T = s.max_num_batched_tokens;
  const std::uint64_t d = 2;
  const std::uint64_t H = m.hidden_size;
  SamplerKernel kernel = sampler_kernel(s.release);
  if (kernel == SamplerKernel::flashinfer && !s.flashinfer) kernel = SamplerKernel::torch_sort;
  const bool v0_chunked = s.v0_engine && s.max_num_batched_tokens < max_model_len && s.release.major == 0 &&
                          s.release.minor < 8;
  const bool sorts = s.v0_engine ? !v0_chunked : kernel == SamplerKernel::torch_sort;
  const std::uint64_t per_logit = v0_chunked                            ? 0
                                   : sorts                               ? 38
                                   : kernel == SamplerKernel::flashinfer ? 14
                                                                         : 16;
  std::uint64_t sampler = checked_add(checked_mul(checked_mul(s.max_num_seqs, m.vocab_size), per_logit),
                                      checked_mul(checked_mul(T, H), d));
  if (!s.v0_engine) sampler = checked_add(sampler, checked_mul(checked_mul(2 * s.max_num_seqs, H), d));
  return sampler;
}

/// The cuBLAS workspace PyTorch allocates through its caching allocator at the profile run's
/// first matmul and keeps (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize,
/// CUBLAS_WORKSPACE_CONFIG unset): 4096 KiB x 8 = 32 MiB on Hopper and Blackwell (compute
/// capability 9.x and up), else ":4096:2:16:8", 8 MiB + 128 KiB; the latter for a card not
/// named. vLLM counts it in the torch peak increase.
std::uint64_t cublas_workspace(const Settings& s) {
  return s.compute_capability >= 90 ? 4096ULL * 8 * 1024 : 4096ULL * 1024 * 2 + 16ULL * 1024 * 8;
}

/// What is left of the budget becomes KV blocks: the block count, the tokens, the concurrency at
/// max_model_len and the longest request that fits (kv_cache_utils.py).
void kv_blocks(Result& r, const spec::ModelSpec& m, const KvLayout& kv) {
  r.kv_groups = kv.full_groups + kv.sliding_groups;
  r.kv_group_size = kv.group_size;
  r.page_bytes = checked_mul(kv.layer_page, kv.group_size);
  const std::uint64_t available = r.available_kv > 0 ? static_cast<std::uint64_t>(r.available_kv) : 0;
  r.num_gpu_blocks = available / r.page_bytes;
  // "GPU KV cache size": the blocks of one group, in tokens (_report_kv_cache_config).
  r.kv_cache_tokens = checked_mul(r.num_gpu_blocks / r.kv_groups, kv.min_block());
  r.kv_cache = Bytes{checked_mul(r.num_gpu_blocks, r.page_bytes)};
  r.blocks_per_request = kv.blocks(r.max_model_len);
  r.max_concurrency = static_cast<double>(r.num_gpu_blocks) / static_cast<double>(r.blocks_per_request);
  // check_enough_kv_cache_memory: one request of max_model_len tokens in every group.
  r.kv_for_max_model_len = Bytes{checked_mul(r.blocks_per_request, r.page_bytes)};
  r.max_model_len_fits = r.num_gpu_blocks > 0 && r.kv_for_max_model_len.value() <= available;
  r.largest_model_len = largest_len(kv, r.page_bytes, available, std::max<std::uint64_t>(r.max_model_len, m.max_positions));
}

/// The error vLLM raises when the KV cache is empty or one max_model_len request does not fit,
/// in the engine's own wording, and the fix.
void startup_error(Result& r, const KvLayout& kv) {
  const std::uint64_t available = r.available_kv > 0 ? static_cast<std::uint64_t>(r.available_kv) : 0;
  if (r.num_gpu_blocks == 0) {
    r.error = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.";
    r.fix = "raise --gpu-memory-utilization, quantize the weights (--quant awq-int4 / fp8), lower "
            "--max-num-batched-tokens, or spread the model with --tensor-parallel-size";
  } else if (!r.max_model_len_fits && r.kv_groups == 1 && kv.sliding_groups == 0) {
    r.error = fmt::format(
        "ValueError: The model's max seq len ({}) is larger than the maximum number of tokens that can be stored "
        "in KV cache ({}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        r.max_model_len, r.largest_model_len);
  } else if (!r.max_model_len_fits) {  // V1's wording (kv_cache_utils.py check_enough_kv_cache_memory)
    r.error = fmt::format(
        "ValueError: To serve at least one request with the model's max seq len ({}), ({:.2f} GiB KV cache is "
        "needed, which is larger than the available KV cache memory ({:.2f} GiB). Based on the available memory, "
        "the estimated maximum model length is {}. Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.",
        r.max_model_len, gib(r.kv_for_max_model_len.value()), gib(available), r.largest_model_len);
  }
  if (r.num_gpu_blocks > 0 && !r.max_model_len_fits)
    r.fix = fmt::format("--max-model-len {} (the most the KV cache holds), or --kv-cache-dtype fp8, or a larger "
                        "--tensor-parallel-size",
                        r.largest_model_len);
}

/// The notes that close the result: a release newer than the rules followed, the budget, the
/// KV layout of sliding-window models.
void closing_notes(Result& r, const spec::ModelSpec& m, const Settings& s, const KvLayout& kv) {
  {
    // A release newer than the newest whose source was read (the Release default) is
    // estimated with that one's rules: say so rather than pass it off as modelled.
    const Release newest{};
    const auto key = [](const Release& v) { return std::tuple(v.major, v.minor, v.patch); };
    if (key(s.release) > key(newest))
      r.notes.push_back(fmt::format(
          "vLLM {}.{}.{} is newer than the newest release vramfit follows ({}.{}.{}): its CUDA graphs and "
          "profiling are estimated as {}.{}.{}'s; check the release notes for memory changes",
          s.release.major, s.release.minor, s.release.patch, newest.major, newest.minor, newest.patch, newest.major,
          newest.minor, newest.patch));
  }
  if (s.kv_cache_memory)
    r.notes.push_back(fmt::format("--kv-cache-memory-bytes: the KV cache is {:.2f} GiB as given and "
                                  "gpu_memory_utilization is not read; vLLM takes {:.2f} GiB with it",
                                  gib(s.kv_cache_memory->value()), gib(r.budget.value())));
  else
    r.notes.push_back(fmt::format("vLLM budget {:.2f} GiB = {} x the card; available KV cache memory {:.2f} GiB",
                                  gib(r.budget.value()), s.gpu_memory_utilization,
                                  static_cast<double>(r.available_kv) / (1024.0 * 1024.0 * 1024.0)));
  if (kv.sliding_groups > 0)
    r.notes.push_back(fmt::format(
        "hybrid KV cache manager: {} full-attention and {} sliding-window groups of {} layers; a sliding-window "
        "group keeps min(window - 1 + max_num_batched_tokens, max_model_len) tokens of a request",
        kv.full_groups, kv.sliding_groups, kv.group_size));
  else if (m.sliding_window != 0 && chunked_local(m) && s.hybrid_kv && !s.v0_engine && !hybrid_manager(m, s))
    r.notes.push_back(fmt::format(
        "chunked local attention: vLLM {}.{}.{} turns the hybrid KV cache manager off for it by default (\"There is a "
        "latency regression when using chunked local attention with the hybrid KV cache manager\"), so every layer "
        "keeps a full-length cache; VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 keeps only the chunks",
        s.release.major, s.release.minor, s.release.patch));
  else if (m.sliding_window != 0 && m.sliding_layers > 0)
    r.notes.push_back("sliding-window layers keep a full-length cache here (the V0 engine, pipeline parallel or "
                      "the hybrid KV cache manager disabled)");
}

}  // namespace

Result estimate(const spec::ModelSpec& m, const Settings& s) {
  check_settings(m, s);
  Result r;
  r.max_model_len = s.max_model_len.value_or(default_max_model_len(m, s));
  if (r.max_model_len == 0) r.max_model_len = 2048;
  if (s.max_model_len && s.allow_long_max_model_len) {
    const DerivedMaxLen d = derived_max_model_len(m);
    if (d.tokens > 0 && static_cast<double>(*s.max_model_len) > d.tokens)
      r.notes.push_back(fmt::format("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: --max-model-len {} is past the model's derived "
                                    "maximum, {}; vLLM warns and serves it (with RoPE, positions past the maximum "
                                    "give NaN)",
                                    *s.max_model_len, static_cast<std::uint64_t>(std::floor(d.tokens))));
  }
  if (s.max_num_batched_tokens < r.max_model_len && s.max_num_batched_tokens < s.max_num_seqs)
    throw InputError("--max-num-batched-tokens",
                     fmt::format("{} is smaller than --max-num-seqs {}", s.max_num_batched_tokens, s.max_num_seqs),
                     "vLLM requires max_num_batched_tokens >= max_num_seqs");
  r.budget = Bytes{static_cast<std::uint64_t>(
      std::floor(static_cast<long double>(s.gpu_memory.value()) * static_cast<long double>(s.gpu_memory_utilization)))};

  r.weights = weights_on_gpu(m, s, r.max_model_len, r.notes);
  // The profile run's activation peak (torch_peak_increase): the forward's or the sampler's.
  r.activation_peak = Bytes{checked_add(std::max(forward_peak(m, s, s.max_num_batched_tokens), sampler_peak(m, s, r.max_model_len)), cublas_workspace(s))};
  r.non_torch = non_torch(s);
  r.cuda_context = kContext;
  // CUDA graphs (cuda_graphs() above): captured after the KV cache is allocated; up to 0.20
  // outside the budget, from 0.21 vLLM's estimate of them comes off it.
  r.graphs = cuda_graphs(m, s);
  r.cuda_graphs = r.graphs.bytes;

  Bytes taken = r.weights + r.activation_peak + r.non_torch;
  if (r.graphs.in_budget) taken += r.cuda_graphs;
  if (s.kv_cache_memory) {
    // The cache is what was asked for; the budget is what vLLM then takes.
    r.budget = taken + *s.kv_cache_memory;
    r.available_kv = static_cast<std::int64_t>(s.kv_cache_memory->value());
  } else {
    r.available_kv = static_cast<std::int64_t>(r.budget.value()) - static_cast<std::int64_t>(taken.value());
  }
  const KvLayout kv = kv_layout(m, s);
  kv_blocks(r, m, kv);
  startup_error(r, kv);
  closing_notes(r, m, s, kv);
  return r;
}

Breakdown breakdown_of(const Result& r) {
  Breakdown b;
  const Bytes kv = r.max_model_len_fits ? r.kv_cache : r.kv_for_max_model_len;
  b.components.push_back({ComponentId::weights, r.weights, "weights on this GPU (\"Model loading took\")", true});
  b.components.push_back({ComponentId::activations, r.activation_peak, "profile run's peak at max_num_batched_tokens", true});
  b.components.push_back(
      {ComponentId::kv_cache, kv,
       r.max_model_len_fits
           ? fmt::format("{} KV blocks ({} tokens)", r.num_gpu_blocks, r.kv_cache_tokens)
           : fmt::format("the KV blocks one request of {} tokens needs (the budget leaves {} tokens)", r.max_model_len,
                         r.kv_cache_tokens),
       true});
  const Bytes inside = r.graphs.in_budget ? r.non_torch + r.cuda_graphs : r.non_torch;
  b.components.push_back({ComponentId::cuda_context, inside,
                          r.graphs.in_budget ? "non-torch memory (cuBLAS, NCCL) and the CUDA graphs inside the budget"
                                             : "non-torch memory (cuBLAS, NCCL) inside the budget",
                          false});
  b.peak_allocated = r.weights + r.activation_peak + kv;
  b.cuda_context = inside;
  b.device_total = b.peak_allocated + inside;
  b.phases = {{PhaseId::load, r.weights}, {PhaseId::profile, r.weights + r.activation_peak}, {PhaseId::serve, b.peak_allocated}};
  b.peak_phase = PhaseId::serve;
  b.notes = r.notes;
  const std::string graphs = fmt::format("{} piecewise + {} FULL CUDA graphs ({} MiB)", r.graphs.piecewise,
                                         r.graphs.full, r.cuda_graphs.value() >> 20);
  if (r.graphs.in_budget)
    b.notes.push_back(fmt::format("inside the budget: {} (vLLM >= 0.21 takes its estimate of them off the KV "
                                  "cache); outside it: the CUDA context ({} MiB)",
                                  graphs, r.cuda_context.value() >> 20));
  else
    b.notes.push_back(fmt::format("outside the budget: the CUDA context ({} MiB) and {} need the rest of the card",
                                  r.cuda_context.value() >> 20, graphs));
  return b;
}

}  // namespace vramfit::engine::vllm
