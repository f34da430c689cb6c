// llama.cpp's buffers, from its source (github.com/ggml-org/llama.cpp):
// - layer placement: src/llama-model.cpp, llama_model::load_tensors (i_gpu_start,
//   act_gpu_layers, get_layer_buft_list, the split points from tensor_split; the input layer
//   always on the CPU; the output layer as layer n_layer);
// - model buffers: a device buffer holds its tensors one after the other, each padded to the
//   buffer type's alignment (ggml-backend.cpp, ggml_backend_alloc_ctx_tensors_from_buft: 128
//   bytes for CUDA); the CUDA buffer type adds one partial row to quantized tensors whose rows
//   are not a multiple of MATRIX_ROW_PADDING = 512 (ggml-cuda.cu,
//   ggml_backend_cuda_buffer_type_get_alloc_size); with mmap the CPU buffer is the file range
//   from the first to the last CPU tensor (load_all_data / create_backend_buffers);
// - the KV cache: src/llama-kv-cache.cpp (one K and one V tensor per layer of
//   ggml_row_size(type, n_embd_k_gqa) x kv_size x n_stream, on the layer's device when
//   offloaded), src/llama-kv-cache-iswa.cpp (the SWA cache: min(kv_size, n_swa x n_seq + n_ubatch)
//   padded to 256), src/llama-context.cpp (n_ctx padded to 256; without --kv-unified each
//   sequence gets its own stream of n_ctx / n_seq cells, padded to 256);
// - compute buffers: the graph allocator's peak for a worst-case ubatch (llama-context.cpp,
//   graph_reserve with n_tokens = n_outputs = n_ubatch and every KV cell in view): ggml-alloc
//   simulated over each GPU's part of the graph (dense, MoE and interleaved-SWA decoders, MLA's
//   absorbed attention; simulated_compute), else (deepseek2 without MLA, row split) the
//   largest set of tensors live at once: the
//   attention scores (without flash attention), the FFN, or the logits on the device holding
//   the output layer.
#include "vramfit/engine/llamacpp.hpp"

#include <algorithm>
#include <map>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <regex>

#include <fmt/format.h>

#include "vramfit/core/error.hpp"
#include "vramfit/core/text.hpp"
#include "serving_layout.hpp"

namespace vramfit::engine::llamacpp {

namespace {

using spec::GgmlType;
using spec::GgufTensor;

constexpr std::uint64_t kCudaAlignment = 128;      // ggml_backend_cuda_buffer_type_get_alignment
constexpr std::uint64_t kCpuAlignment = 32;        // TENSOR_ALIGNMENT in ggml-cpu
constexpr std::uint64_t kGgufAlignment = 32;       // GGUF_DEFAULT_ALIGNMENT
constexpr std::uint64_t kMatrixRowPadding = 512;   // MATRIX_ROW_PADDING in ggml-cuda/common.cuh
constexpr std::uint64_t kCtxPad = 256;             // llama-context.cpp: GGML_PAD(n_ctx, 256)
constexpr std::uint64_t kKqMaskPad = 64;           // GGML_KQ_MASK_PAD
constexpr std::uint64_t kSchedMaxCopies = 4;       // GGML_SCHED_MAX_COPIES: n_copies with pipeline parallelism
constexpr std::uint64_t kVmmGranularity = 2ULL << 20;  // ggml_cuda_pool_vmm's mapping granularity on CUDA GPUs
constexpr std::uint64_t kPoolAlignment = 128;          // ggml_cuda_pool_vmm::alloc rounds each allocation up to it
constexpr std::uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlBf16 = 30;  // enum ggml_type
constexpr int kCpu = -1;                           // device index of the host

std::uint64_t pad(std::uint64_t n, std::uint64_t to) { return checked_mul((n + to - 1) / to, to); }

/// The cache types llama.cpp accepts for -ctk/-ctv (common/arg.cpp kv_cache_types).
constexpr std::array<std::string_view, 9> kCacheTypes{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};

const GgmlType& type_named(std::string_view name, std::string_view flag) {
  const GgmlType* t = spec::ggml_type_by_name(name);
  bool allowed = false;
  for (const std::string_view c : kCacheTypes)
    if (t != nullptr && spec::ggml_type_by_name(c) == t) allowed = true;
  if (t == nullptr || !allowed) {
    const std::vector<std::string> known(kCacheTypes.begin(), kCacheTypes.end());
    const std::string list = "one of " + joined(known);
    throw InputError(std::string(flag), fmt::format("unknown cache type '{}'", name),
                     did_you_mean_fix(name, known, list, list));
  }
  return *t;
}

/// ggml_row_size: bytes of `n` elements of type `t` (n a multiple of the block size).
std::uint64_t row_size(const GgmlType& t, std::uint64_t n) {
  return checked_mul(n / t.block_size, t.type_size);
}

/// The CUDA buffer type's allocation size of a tensor (before the 128-byte alignment).
std::uint64_t cuda_alloc_size(const GgufTensor& t) {
  std::uint64_t size = t.bytes;
  const std::uint64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
  if (t.type != nullptr && t.type->block_size > 1 && ne0 % kMatrixRowPadding != 0)
    size = checked_add(size, row_size(*t.type, kMatrixRowPadding - ne0 % kMatrixRowPadding));
  return size;
}

/// "blk.12.attn_q.weight" -> 12; nullopt for tensors outside the blocks.
std::optional<std::uint64_t> block_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  std::uint64_t i = 0;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(begin, end, i);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.') return std::nullopt;
  return i;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// Tensors of the input layer (LLM_TENSOR_LAYER_INPUT in llama-arch.cpp): always on the CPU.
bool input_tensor(std::string_view name) {
  return starts_with(name, "token_embd.") || starts_with(name, "token_embd_norm.") ||
         starts_with(name, "position_embd.") || starts_with(name, "token_types.") ||
         starts_with(name, "per_layer_token_embd.");
}

/// Routed expert tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps):
/// what --n-cpu-moe keeps on the CPU (common/arg.cpp: "blk\\.%d\\.ffn_(up|down|gate)_exps").
bool expert_tensor(std::string_view name) { return name.find("_exps.") != std::string_view::npos; }

/// How build_moe_ffn (llama-graph.cpp) weighs the top-k experts, as a model's builder in
/// llama-model.cpp calls it.
enum class Gating {
  softmax,           ///< soft_max over all experts, the top-k probabilities used as they are
  softmax_norm,      ///< the same, then the top-k weights renormalised (norm_w: sum_rows, div)
  softmax_weight,    ///< LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT: soft_max of the top-k logits
};

/// What llama.cpp does its own way for a transformers model type, where it changes memory:
/// one row per model type (the config's model_type); a type without a row has none of it.
/// To add a model, add its row with what its llm_build_* in llama-model.cpp does.
struct ArchRow {
  std::string_view model_type;
  /// load_hparams sets hparams.swa_type: the sliding layers get an SWA KV cache of the window.
  /// Without (mistral v0.1, phi3: "Phi SWA is currently disabled") every layer keeps a full cache.
  bool swa = false;
  Gating gating = Gating::softmax;
  /// Converted to llama.cpp's deepseek2 architecture (convert_hf_to_gguf.py DeepseekV2Model and its
  /// subclasses): the latent attention laid out by hparams_of. Another type with a kv_lora_rank
  /// and neither this nor heads_cache (youtu) is refused.
  bool mla = false;
  /// Latent attention run as multi-head attention over the decompressed heads (llama.cpp's
  /// MINICPM3: convert_hf_to_gguf.py MiniCPM3Model keeps kv_b_proj whole as attn_kv_b and writes
  /// key_length = qk_nope + qk_rope and no value_length, so n_embd_head_v = n_embd / n_head;
  /// llm_build_minicpm3 multiplies the latent by wkv_b and hands build_attn every head's K
  /// (k_nope and the repeated rope key) and V, which the KV cache stores).
  bool heads_cache = false;
  /// Layers of their own attention widths (llama.cpp's GEMMA4, src/models/gemma4.cpp and
  /// llama-hparams.cpp): a sliding layer's K and V heads of key_length_swa, a full one's of
  /// key_length (global_head_dim), head_count_kv per layer (num_global_key_value_heads on the full
  /// layers with attention_k_eq_v, whose V is still cached: Vcur = Kcur), and the last
  /// shared_kv_layers layers with no cache (has_kv: il < n_layer_kv_from_start); the sliding layers
  /// from sliding_window_pattern (layer_types). See layer_attn.
  bool per_layer = false;
  /// Ollama turns flash attention on by default for the architecture (fs/ggml GGML.FlashAttention's
  /// list: gemma3, gemma4, glm4moelite, gptoss, lfm2, lfm2moe, mistral3, olmo3, qwen3, qwen3moe,
  /// qwen35, qwen35moe, qwen3next, qwen3vl, qwen3vlmoe, nemotron_h, bert), by its Hugging Face name.
  bool ollama_fa = false;
  /// The FFN's residual add takes the residual first (phi3.cpp: ggml_add(ctx0, residual, cur)):
  /// ggml-alloc runs it in place over the residual, not over the FFN's output.
  bool residual_first = false;
  /// Attention sinks (openai-moe.cpp: ggml_soft_max_add_sinks / ggml_flash_attn_ext_add_sinks with
  /// the layer's attn_sinks weight): a host layer's soft_max reads a host weight, which starts a split.
  bool sinks = false;
  /// attn_q_norm and attn_k_norm of one head's width (qwen3.cpp, qwen3moe.cpp): a layout from a
  /// config writes them as their own tensors, which a host layer's run copies in one at a time.
  bool qk_norm_head = false;
};
constexpr ArchRow kArchRows[] = {
    {.model_type = "phi3", .residual_first = true},
    {.model_type = "gemma2", .swa = true},
    {.model_type = "gemma3", .swa = true, .ollama_fa = true},
    {.model_type = "gemma3_text", .swa = true, .ollama_fa = true},
    {.model_type = "cohere2", .swa = true},
    {.model_type = "gpt_oss", .swa = true, .gating = Gating::softmax_weight, .ollama_fa = true, .sinks = true},
    // build_moe_ffn(..., norm_w = true): llm_build_llama (mixtral), llm_build_qwen3moe, and the
    // models whose GGUF sets expert_weights_norm (deepseek2 for V3, glm4moe, ernie4_5-moe).
    {.model_type = "mixtral", .gating = Gating::softmax_norm},
    {.model_type = "qwen3_moe", .gating = Gating::softmax_norm, .ollama_fa = true, .qk_norm_head = true},
    {.model_type = "deepseek_v3", .gating = Gating::softmax_norm, .mla = true},
    {.model_type = "deepseek_v2", .mla = true},
    {.model_type = "glm4_moe_lite", .mla = true, .ollama_fa = true},
    {.model_type = "glm4_moe", .gating = Gating::softmax_norm},
    {.model_type = "ernie4_5_moe", .gating = Gating::softmax_norm},
    {.model_type = "minicpm3", .heads_cache = true},
    // llama_model_gemma4's build_moe_ffn(..., LLM_FFN_GELU, norm_w = true, ..., SOFTMAX, ...).
    {.model_type = "gemma4_text", .swa = true, .gating = Gating::softmax_norm, .per_layer = true, .ollama_fa = true},
    {.model_type = "qwen3", .ollama_fa = true, .qk_norm_head = true},
    {.model_type = "qwen3_next", .ollama_fa = true},
    {.model_type = "qwen3_5", .ollama_fa = true},
    {.model_type = "qwen3_5_moe", .ollama_fa = true},
    {.model_type = "qwen3_vl", .ollama_fa = true},
    {.model_type = "qwen3_vl_moe", .ollama_fa = true},
    {.model_type = "mistral3", .ollama_fa = true},
    {.model_type = "olmo3", .ollama_fa = true},
    {.model_type = "lfm2", .ollama_fa = true},
    {.model_type = "lfm2_moe", .ollama_fa = true},
    {.model_type = "nemotron_h", .ollama_fa = true},
};

/// The model type's row; a default row (no SWA cache, plain soft_max gating) for the others.
const ArchRow& arch_row(std::string_view model_type) {
  static constexpr ArchRow kNone{};
  for (const ArchRow& r : kArchRows)
    if (r.model_type == model_type) return r;
  return kNone;
}

/// Which layers use the sliding window, as llama.cpp's set_swa_pattern(n) does: with
/// period n every n-th layer is global (gemma2: 2, gemma3: 6), else all layers slide; none
/// where llama.cpp keeps no SWA cache for the type (ArchRow::swa).
std::vector<bool> swa_layers(const spec::ModelSpec& m) {
  const std::uint64_t L = m.num_layers;
  const std::uint64_t S = m.sliding_window == 0 || !arch_row(m.model_type).swa ? 0 : m.sliding_layers;
  std::vector<bool> swa(static_cast<std::size_t>(L), false);
  if (S == 0) return swa;
  if (S >= L) return std::vector<bool>(static_cast<std::size_t>(L), true);
  for (std::uint64_t p = 2; p <= L; ++p) {
    if (L / p == L - S) {
      for (std::uint64_t i = 0; i < L; ++i) swa[static_cast<std::size_t>(i)] = (i + 1) % p != 0;
      return swa;
    }
  }
  for (std::uint64_t i = 0; i < S; ++i) swa[static_cast<std::size_t>(i)] = true;
  return swa;
}

/// The name llama.cpp's converter gives a Hugging Face linear (convert_hf_to_gguf.py's map).
std::string gguf_name(const spec::Linear& l, spec::TensorRole role) {
  using R = spec::TensorRole;
  const std::string shexp = l.shared_expert ? "_shexp" : "";
  switch (role) {
    case R::attn_q: return "attn_q";
    case R::attn_k: return "attn_k";
    case R::attn_v: return "attn_v";
    case R::attn_output: return "attn_output";
    case R::attn_qkv: return "attn_qkv";
    case R::attn_kv_b: return "attn_kv_b";
    case R::ffn_gate: return "ffn_gate" + shexp;
    case R::ffn_up: return "ffn_up" + shexp;
    case R::ffn_down: return "ffn_down" + shexp;
    case R::ffn_gate_exp: return "ffn_gate_exps";
    case R::ffn_up_exp: return "ffn_up_exps";
    case R::ffn_down_exp: return "ffn_down_exps";
    case R::kept_f32: return "ffn_gate_inp" + shexp;
    default: return l.name;
  }
}

struct Placement {
  std::vector<int> layer_dev;  // n_layer + 1 entries: blocks, then the output layer
  std::uint64_t offloaded = 0;
};

/// load_tensors' get_layer_buft_list: the device of each layer (the output layer last).
Placement place_layers(std::uint64_t n_layer, const Settings& s, const std::vector<double>& splits) {
  Placement p;
  const std::uint64_t n_all = n_layer + 1;
  const std::uint64_t ngl = std::min(s.gpu_layers, n_all);
  const std::uint64_t start =
      s.layer_rule == LayerRule::current ? n_all - ngl : (ngl >= n_layer ? 0 : n_layer - ngl);
  const std::uint64_t act = ngl;
  p.layer_dev.assign(static_cast<std::size_t>(n_all), kCpu);
  for (std::uint64_t il = 0; il < n_all; ++il) {
    if (il < start || il - start >= act) continue;
    int dev = 0;
    if (s.split_mode == SplitMode::layer) {
      const float frac = static_cast<float>(il - start) / static_cast<float>(act);
      dev = static_cast<int>(std::upper_bound(splits.begin(), splits.end(), frac) - splits.begin());
      dev = std::min<int>(dev, static_cast<int>(splits.size()) - 1);
    }
    p.layer_dev[static_cast<std::size_t>(il)] = dev;
    ++p.offloaded;
  }
  return p;
}

struct Hparams {
  std::uint64_t n_embd = 0, n_head = 0, n_vocab = 0, n_ff = 0;
  std::uint64_t n_head_kv = 0, head_dim = 0;
  std::uint64_t n_embd_k = 0, n_embd_v = 0;  // per layer, over the KV heads
  std::uint64_t n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  bool qkv_bias = false;  // Q, K and V have biases (qwen2): one add each, in place
  bool fused_up = false;  // gate and up in one [n_embd, 2 n_ff] weight (phi3's, glm4's gate_up_proj)
  bool fused_qkv = false; // Q, K and V in one [n_embd, n_embd + 2 n_embd_gqa] weight (phi3's attn_qkv)
  /// LayerNorm (LLM_NORM: gpt2, gptneox, starcoder2): ggml_norm is not one of ggml-alloc's in-place
  /// ops (ggml_op_can_inplace lists RMS_NORM, not NORM), so its output is a new tensor beside its
  /// input; the weight's mul and the bias's add then run in place.
  bool layer_norm = false;
  /// RoPE on Q and K; gpt2's learned position table instead (pos_embd: get_rows of the positions,
  /// added to the token embeddings in place), with Q, K and V plain views of the fused product.
  bool rope = true;
  /// A plain MLP (LLM_FFN_SEQ: gpt2, gptneox, starcoder2): up, its bias and GELU in place, down.
  bool gated = true;
  /// gptneox's parallel residual (use_par_res): x + attn(ln1(x)) + ffn(ln2(x)).
  bool parallel_residual = false;
  bool residual_first = false;  // ArchRow::residual_first
  // MLA's absorbed attention (deepseek2 files with attn_k_b / attn_v_b): its widths.
  bool mla = false;
  std::uint64_t kv_lora = 0, q_lora = 0, qk_rope = 0, qk_nope = 0, v_head = 0;
  // MoE (llama-graph.cpp build_moe_ffn), as the model's builder calls it:
  std::uint64_t n_expert = 0;       // the router's rows
  bool router_bias = false;         // gpt-oss: ffn_gate_inp.bias, added in place
  bool expert_bias = false;         // gpt-oss: ffn_{gate,up,down}_exps.bias (ggml_add_id, in place)
  bool softmax_weight = false;      // gpt-oss: LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT (soft_max of the top-k weights)
  bool norm_w = false;              // the top-k weights normalised (sum_rows, div): norm_topk_prob
  bool sinks = false;               // gpt-oss: attn_sinks, a weight the soft_max reads (ggml_soft_max_add_sinks)
  std::vector<bool> moe_layer;      // per layer: the FFN is the MoE one
};

/// How llama.cpp runs a deepseek2 (MLA) file: with MLA's absorbed attention when the file has
/// the split attn_k_b / attn_v_b tensors (convert_hf_to_gguf.py since April 2025 splits kv_b_proj
/// into them and writes attention.key_length_mla: llama-model.cpp's is_mla), else, for a file
/// converted before (one attn_kv_b), as multi-head attention over the decompressed heads.
bool absorbed_mla(const spec::ModelSpec& m, const std::vector<GgufTensor>& tensors) {
  if (m.kv_lora_rank == 0) return false;
  for (const GgufTensor& t : tensors)
    if (t.name.find(".attn_k_b.") != std::string::npos) return true;
  return false;
}

Hparams hparams_of(const spec::ModelSpec& m, bool mla) {
  Hparams h;
  h.n_embd = m.hidden_size;
  h.n_head = m.num_heads;
  h.n_vocab = m.vocab_size;
  h.n_ff = m.intermediate_size;
  if (m.kv_lora_rank > 0 && mla) {
    // MLA (deepseek2): the cache holds the compressed latent and the rope part, one "head".
    h.n_embd_k = m.kv_lora_rank + m.qk_rope_head_dim;
    h.n_embd_v = m.kv_lora_rank;
    h.n_head_kv = 1;
    h.mla = true;
    h.kv_lora = m.kv_lora_rank;
    h.q_lora = m.q_lora_rank;
    h.qk_rope = m.qk_rope_head_dim;
    h.qk_nope = m.qk_nope_head_dim;
    h.v_head = m.v_head_dim;
  } else if (m.kv_lora_rank > 0) {
    // deepseek2 without MLA (a file with attn_kv_b, no attn_k_b), and minicpm3 (ArchRow::heads_cache):
    // the latent is decompressed by attn_kv_b into every head's K (no-rope part + the shared rope
    // part) and V, and those are cached: n_embd_k_gqa = n_head x (qk_nope + qk_rope),
    // n_embd_v_gqa = n_head x v_head_dim (minicpm3: n_embd / n_head, checked by estimate).
    h.n_head_kv = m.num_heads;
    h.n_embd_k = checked_mul(m.num_heads, m.qk_nope_head_dim + m.qk_rope_head_dim);
    h.n_embd_v = checked_mul(m.num_heads, m.v_head_dim);
  } else {
    const std::uint64_t kvh = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
    h.n_head_kv = kvh;
    h.n_embd_k = checked_mul(kvh, m.head_dim);
    h.n_embd_v = checked_mul(kvh, m.v_head_dim != 0 ? m.v_head_dim : m.head_dim);
  }
  h.head_dim = m.head_dim;
  if (arch_row(m.model_type).per_layer) {
    // Layers of their own widths (gemma4): the graph's tensors at the widest layer's (its KV cache
    // is laid out per layer by layer_attn).
    for (const spec::LayerGroup& g : m.layers) {
      const std::uint64_t hd = g.head_dim != 0 ? g.head_dim : m.head_dim;
      const std::uint64_t kvh = g.kv_heads != 0 ? g.kv_heads : h.n_head_kv;
      h.head_dim = std::max(h.head_dim, hd);
      h.n_embd_k = std::max(h.n_embd_k, checked_mul(kvh, hd));
      h.n_ff = std::max(h.n_ff, g.intermediate);
    }
    h.n_embd_v = h.n_embd_k;
    h.n_head_kv = h.head_dim == 0 ? 0 : h.n_embd_k / h.head_dim;
  }
  for (const spec::LayerGroup& g : m.layers)
    for (const spec::Linear& l : g.linears) {
      if (l.expert || l.shared_expert) continue;
      if (l.role == spec::Role::attn_in && l.bias) h.qkv_bias = true;
      if (l.role == spec::Role::mlp_in && l.out_features == checked_mul(m.intermediate_size, 2)) h.fused_up = true;
      if (l.role == spec::Role::attn_in && h.n_head_kv > 0 &&
          l.out_features == checked_add(checked_mul(m.num_heads, m.head_dim), h.n_embd_k + h.n_embd_v))
        h.fused_qkv = true;
    }
  h.layer_norm = m.norm == spec::Norm::layer;
  h.rope = !m.learned_positions;
  h.gated = m.gated_mlp;
  h.parallel_residual = m.parallel_residual;
  h.residual_first = arch_row(m.model_type).residual_first;
  h.n_expert_used = m.moe.experts_per_token;
  h.n_ff_exp = m.moe.expert_intermediate;
  h.n_ff_shexp = m.moe.shared_intermediate;
  h.n_expert = m.moe.num_experts;
  for (const spec::LayerGroup& g : m.layers) {
    for (std::uint64_t k = 0; k < g.count && h.moe_layer.size() < m.num_layers; ++k) h.moe_layer.push_back(g.moe);
    for (const spec::Linear& l : g.linears) {
      if (l.expert && l.bias) h.expert_bias = true;
      if (l.role == spec::Role::router && !l.shared_expert && l.bias) h.router_bias = true;
    }
  }
  h.moe_layer.resize(static_cast<std::size_t>(m.num_layers), false);
  // The gating llama-model.cpp passes to build_moe_ffn (the model type's ArchRow).
  const Gating gating = arch_row(m.model_type).gating;
  h.softmax_weight = gating == Gating::softmax_weight;
  h.norm_w = gating == Gating::softmax_norm;
  h.sinks = arch_row(m.model_type).sinks;
  return h;
}

/// One decoder layer's attention as llama.cpp's hparams see it (llama-hparams.cpp): an SWA layer
/// (is_swa), one with a cache of its own (has_kv), and its K and V rows (n_embd_k_gqa(il),
/// n_embd_v_gqa(il)).
struct LayerAttn {
  bool swa = false;
  bool has_kv = true;
  std::uint64_t k = 0, v = 0;            // n_embd_k_gqa, n_embd_v_gqa: the cached row widths
  std::uint64_t head_k = 0, head_v = 0;  // one head's K and V sizes
};

/// Every layer's attention. A model of one width (every row but ArchRow::per_layer): swa_layers'
/// pattern, each layer caching n_embd_k / n_embd_v. gemma4 (ArchRow::per_layer): each layer's own
/// heads and head size from its group (LayerGroup::head_dim / kv_heads: the full-attention layers'
/// global_head_dim and num_global_key_value_heads), no cache on the KV-shared layers
/// (LayerGroup::kv_shared: il >= n_layer_kv_from_start), and the sliding layers told apart from the
/// full ones by their width: the last layer is full (Gemma4TextConfig forces it, and so does
/// vramfit's config reader), every layer of another width slides. A model whose sliding and full
/// layers share one width (so the pattern cannot be read from the spec) is refused.
std::vector<LayerAttn> layer_attn(const spec::ModelSpec& m, const Hparams& h) {
  const std::uint64_t L = m.num_layers;
  std::vector<LayerAttn> out(static_cast<std::size_t>(L));
  if (!arch_row(m.model_type).per_layer) {
    const std::vector<bool> swa = swa_layers(m);
    const std::uint64_t head_v = h.n_head_kv == 0 ? h.head_dim : h.n_embd_v / h.n_head_kv;
    for (std::size_t il = 0; il < out.size(); ++il) out[il] = {swa[il], true, h.n_embd_k, h.n_embd_v, h.head_dim, head_v};
    return out;
  }
  const std::uint64_t kvh0 = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> width;  // (kv heads, head size) per layer
  std::size_t il = 0;
  for (const spec::LayerGroup& g : m.layers)
    for (std::uint64_t k = 0; k < g.count && il < out.size(); ++k, ++il) {
      const std::uint64_t hd = g.head_dim != 0 ? g.head_dim : m.head_dim;
      const std::uint64_t kvh = g.kv_heads != 0 ? g.kv_heads : kvh0;
      out[il].has_kv = !g.kv_shared;
      out[il].k = out[il].v = checked_mul(kvh, hd);  // gemma4: n_embd_head_k == n_embd_head_v
      out[il].head_k = out[il].head_v = hd;
      width.emplace_back(kvh, hd);
    }
  if (m.sliding_window == 0 || m.sliding_layers == 0 || width.empty()) return out;
  std::uint64_t sliding = 0;
  for (std::size_t i = 0; i < width.size(); ++i) {
    out[i].swa = width[i] != width.back();
    sliding += out[i].swa ? 1 : 0;
  }
  if (sliding != m.sliding_layers)
    throw InputError("--engine",
                     fmt::format("llama.cpp: model_type '{}' has {} sliding-window layers, but {} of its layers differ in "
                                 "width from its last (full-attention) layer: vramfit tells gemma4's sliding layers by "
                                 "their width and cannot place them",
                                 m.model_type, m.sliding_layers, sliding),
                     "estimate it with the default engine (--engine transformers)");
  return out;
}

/// The compute buffer of one backend: the largest set of f32 tensors alive at once during
/// the worst-case ubatch (ggml-alloc reuses memory as tensors die; softmax and the
/// element-wise FFN products run in place).
struct ComputeShape {
  std::uint64_t ub = 0;        // tokens of the ubatch
  std::uint64_t n_kv = 0;      // KV cells in view (the largest cache on this device)
  bool flash_attn = false;
  bool has_layers = false;     // repeating layers run here
  bool has_output = false;     // the output layer runs here
  /// Current builds keep the graph inputs copied to this GPU (the f32 KQ mask) allocated through
  /// the whole split, and the output stage holds the residual, the normed input and the
  /// embeddings output beside the logits; older builds (LayerRule::legacy) freed the mask
  /// after the last layer and held only the normed input.
  bool current_build = true;
  KqMask kq_mask = KqMask::f16;
  /// Weights left on the host that this GPU runs anyway (ggml's op offload of large batches,
  /// GGML_OP_OFFLOAD_MIN_BATCH = 32): the largest one's copy and its output [rows, ub] in f32.
  std::uint64_t offload_weight = 0;
  std::uint64_t offload_rows = 0;
  /// The offloaded weight is the output layer's (the output left on the host): the graph's
  /// whole tail then runs on this GPU (ggml-cuda's offload_op takes any op of >= 32 rows whose
  /// weight is on the host, and the ops after follow their inputs), so the last layer's output,
  /// its get_rows of the output tokens (inp_out_ids), the final norm and its scale, four
  /// [n_embd, ub] f32, are alive beside the weight's copy and the logits.
  bool offload_output = false;
};

/// The KQ mask's rows (Settings::kq_mask): the ubatch, padded to GGML_KQ_MASK_PAD before
/// llama.cpp#17910.
std::uint64_t mask_rows(std::uint64_t ub, KqMask km) { return km == KqMask::padded ? pad(ub, kKqMaskPad) : ub; }

/// llm_graph_input_attn's kq_mask [n_kv, rows], a graph input (in host memory, copied to each
/// GPU that runs attention): f16 under flash attention in current builds (llama.cpp#23764),
/// else f32.
std::uint64_t mask_input_bytes(std::uint64_t n_kv, std::uint64_t ub, KqMask km, bool flash_attn) {
  return checked_mul(checked_mul(n_kv, mask_rows(ub, km)), flash_attn && km == KqMask::f16 ? 2 : 4);
}

/// The mask input and, with flash attention in builds before llama.cpp#23764, its f16 cast
/// (self_kq_mask_cnv = ggml_cast(..., F16)).
std::uint64_t mask_bytes(std::uint64_t n_kv, std::uint64_t ub, KqMask km, bool flash_attn) {
  const std::uint64_t cast = flash_attn && km != KqMask::f16 ? checked_mul(checked_mul(n_kv, mask_rows(ub, km)), 2) : 0;
  return checked_add(mask_input_bytes(n_kv, ub, km, flash_attn), cast);
}

std::uint64_t compute_bytes(const Hparams& h, const ComputeShape& c) {
  const std::uint64_t f32 = 4;
  const std::uint64_t act = checked_mul(checked_mul(c.ub, h.n_embd), f32);  // one [n_embd, ub] f32
  std::uint64_t peak = 0;
  if (c.has_layers) {
    // Attention: the residual, the normed input, Q and the attention output stay alive with
    // the scores; the mask is copied in from the host.
    std::uint64_t attn = checked_add(checked_mul(act, 4), mask_bytes(c.n_kv, c.ub, c.kq_mask, c.flash_attn));
    if (!c.flash_attn)  // kq = [n_kv, n_tokens, n_head] in f32, soft-maxed in place
      attn = checked_add(attn, checked_mul(checked_mul(checked_mul(c.n_kv, c.ub), h.n_head), f32));
    // FFN: the residual and the normed input, with the gate and up products ([n_ff, ub]).
    std::uint64_t ff = h.n_ff;
    if (h.n_expert_used > 0 && h.n_ff_exp > 0)
      ff = std::max(ff, checked_add(checked_mul(h.n_ff_exp, h.n_expert_used), h.n_ff_shexp));
    const std::uint64_t ffn = checked_add(checked_mul(act, 2), checked_mul(checked_mul(checked_mul(c.ub, ff), f32), 2));
    peak = std::max(attn, ffn);
  }
  if (c.has_output) {  // the logits [n_vocab, n_outputs = ub] and what is alive beside them
    std::uint64_t out = checked_mul(checked_mul(c.ub, h.n_vocab), f32);
    if (c.current_build)
      out = checked_add(out, checked_add(checked_mul(act, 3),
                                         c.has_layers ? mask_input_bytes(c.n_kv, c.ub, c.kq_mask, c.flash_attn) : 0));
    else
      out = checked_add(out, act);
    peak = std::max(peak, out);
  }
  if (c.offload_weight > 0 && c.ub >= 32)
    peak = std::max(peak, checked_add(checked_add(c.offload_weight, checked_mul(checked_mul(c.ub, c.offload_rows), f32)),
                                      checked_mul(act, c.offload_output ? 4 : 1)));
  return peak;
}

// --- the graph allocator, simulated ---
// A GPU's compute buffer is the high-water mark of ggml-alloc over the scheduler's graph
// (ggml/src/ggml-alloc.c), which reuses memory but never moves a tensor, so the peak includes
// the holes left below live tensors. Modelled: ggml_dyn_tallocr (free blocks kept sorted by
// offset, best fit among all but the last block, else the tail; freed blocks merged with their
// neighbours; sizes padded to the CUDA buffer's 128 bytes) and ggml_gallocr_alloc_graph_impl
// (nodes in graph order; a node takes its parent's memory in place when the op allows it, the
// layouts match and the parent, a tensor the allocator placed and not a view, has no other child
// or view; a tensor is freed after its last child; views take no memory and keep their source
// alive).

/// ggml_dyn_tallocr: the free blocks of one buffer and its high-water mark.
class DynAlloc {
 public:
  explicit DynAlloc(std::uint64_t alignment) : alignment_(alignment) {}
  std::uint64_t alloc(std::uint64_t size) {
    size = pad(size, alignment_);
    std::size_t best = blocks_.size() - 1;  // the tail, unless a block before it fits
    std::uint64_t best_size = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 0; i + 1 < blocks_.size(); ++i)
      if (blocks_[i].size >= size && blocks_[i].size <= best_size) {
        best = i;
        best_size = blocks_[i].size;
      }
    const std::uint64_t off = blocks_[best].off;
    blocks_[best].off += size;
    blocks_[best].size -= size;
    if (blocks_[best].size == 0) blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
    max_ = std::max(max_, off + size);
    return off;
  }
  void free(std::uint64_t off, std::uint64_t size) {
    size = pad(size, alignment_);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      Block& b = blocks_[i];
      if (b.off + b.size == off) {  // at the end of a block: grow it, and merge with the next
        b.size += size;
        if (i + 1 < blocks_.size() && b.off + b.size == blocks_[i + 1].off) {
          b.size += blocks_[i + 1].size;
          blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i + 1));
        }
        return;
      }
      if (off + size == b.off) {  // at the start of a block: grow it, and merge with the previous
        b.off = off;
        b.size += size;
        if (i > 0 && blocks_[i - 1].off + blocks_[i - 1].size == b.off) {
          blocks_[i - 1].size += b.size;
          blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
        }
        return;
      }
    }
    auto at = std::find_if(blocks_.begin(), blocks_.end(), [&](const Block& b) { return b.off >= off; });
    blocks_.insert(at, Block{off, size});
  }
  [[nodiscard]] std::uint64_t peak() const { return max_; }

 private:
  struct Block {
    std::uint64_t off = 0, size = 0;
  };
  std::vector<Block> blocks_{Block{0, std::numeric_limits<std::uint64_t>::max() / 4}};
  std::uint64_t max_ = 0;
  std::uint64_t alignment_;  // the buffer type's: CUDA's 128 bytes, the CPU's TENSOR_ALIGNMENT 32
};

/// One tensor of the graph: a node the allocator places, a view of one, or an input
/// (a split input: allocated at the start of the split, or with pipeline parallelism one of
/// the scheduler's copies, kept to the end).
struct GNode {
  std::uint64_t size = 0;
  bool can_inplace = false;  // ggml_op_can_inplace: add, mul, scale, unary, rope, rms_norm, soft_max
  std::array<int, 4> src{-1, -1, -1, -1};
  int view_src = -1;         // a view (reshape, permute, transpose, view): takes no memory
  bool sink = false;         // takes no memory here (a store into the KV cache, a copy to the next device)
  bool keep = false;         // GGML_TENSOR_FLAG_OUTPUT: never freed, never reused
  // the allocator's bookkeeping
  int children = 0, views = 0;
  bool allocated = false;
  std::uint64_t off = 0;
};

class Graph {
 public:
  /// A tensor of `size` bytes computed from `srcs` (weights and the KV cache, allocated
  /// elsewhere, are left out of the sources).
  int node(std::uint64_t size, std::initializer_list<int> srcs, bool can_inplace = false) {
    GNode n;
    n.size = size;
    n.can_inplace = can_inplace;
    std::size_t k = 0;
    for (const int s : srcs)
      if (s >= 0) n.src.at(k++) = s;
    nodes_.push_back(n);
    return static_cast<int>(nodes_.size()) - 1;
  }
  /// A view of `a` (reshape, permute, transpose): the same memory.
  int view(int a) {
    const int base = nodes_[static_cast<std::size_t>(a)].view_src >= 0 ? nodes_[static_cast<std::size_t>(a)].view_src : a;
    const int v = node(0, {a});
    nodes_[static_cast<std::size_t>(v)].view_src = base;
    return v;
  }
  /// A child of `a` that takes no memory here (the KV cache store, a copy to the next device).
  void use(int a) { use_all({a}); }
  /// An op reading `srcs` whose result takes no memory here (ggml_set_rows into the KV cache).
  void use_all(std::initializer_list<int> srcs) { nodes_[static_cast<std::size_t>(node(0, srcs))].sink = true; }
  void keep(int a) { nodes_[static_cast<std::size_t>(a)].keep = true; }
  /// Leaves allocated before any node (the scheduler's copies of the split inputs).
  /// A leaf allocated before any node: kept (the scheduler's copies), or freed after its last
  /// child (a graph input of the backend that holds them, the host).
  int leaf(std::uint64_t size, bool keep = true) {
    const int n = node(size, {});
    nodes_[static_cast<std::size_t>(n)].keep = keep;
    leaves_.push_back(n);
    return n;
  }
  /// ggml_gallocr_alloc_graph_impl over the nodes in order; the buffer's size.
  std::uint64_t peak(std::uint64_t alignment) {
    DynAlloc a(alignment);
    auto at = [&](int i) -> GNode& { return nodes_[static_cast<std::size_t>(i)]; };
    const auto allocate = [&](int i) {
      GNode& n = at(i);
      if (n.allocated || n.view_src != -1 || n.sink) return;
      n.allocated = true;
      if (n.can_inplace) {
        for (const int p : n.src) {
          if (p < 0) continue;
          GNode& pn = at(p);
          // Only a parent the allocator placed itself (ggml_gallocr_is_own: a view never is), with
          // this node as its last child and no views left.
          if (pn.keep || !pn.allocated || pn.view_src >= 0 || pn.children != 1 || pn.views != 0) continue;
          if (pn.size != n.size) continue;  // the same layout: the same size here
          n.off = pn.off;
          pn.allocated = false;
          return;
        }
      }
      n.off = a.alloc(n.size);
    };
    for (const int l : leaves_) allocate(l);
    for (GNode& n : nodes_) {
      if (n.view_src >= 0) ++at(n.view_src).views;
      for (const int p : n.src)
        if (p >= 0) ++at(p).children;
    }
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      allocate(static_cast<int>(i));
      for (const int p : nodes_[i].src) {
        if (p < 0) continue;
        GNode& pn = at(p);
        if (--pn.children != 0 || pn.views != 0) continue;
        GNode* owner = &pn;
        if (pn.view_src >= 0) {
          owner = &at(pn.view_src);
          if (--owner->views != 0 || owner->children != 0) continue;
        }
        if (owner->allocated && !owner->keep) {
          a.free(owner->off, owner->size);
          owner->allocated = false;
        }
      }
    }
    return a.peak();
  }

 private:
  std::vector<GNode> nodes_;
  std::vector<int> leaves_;
};

/// A layer's routed-expert tensors left in host memory while the layer runs on a GPU
/// (--n-cpu-moe, -ot exps=CPU): their bytes, in the order the graph uses them.
struct HostExperts {
  std::uint64_t gate = 0, up = 0, down = 0;           // ffn_{gate,up,down}_exps.weight
  std::uint64_t gate_b = 0, up_b = 0, down_b = 0;     // their biases (gpt-oss)
  [[nodiscard]] bool any() const { return gate + up + down + gate_b + up_b + down_b > 0; }
};

/// A layer left in host memory (-ngl below the layer count) that the main GPU runs anyway: its
/// weights' bytes, each copied in at the split its op starts (ggml's op offload), and the bytes
/// of its K and V views of the host cache, copied in where its attention starts.
struct HostLayer {
  std::uint64_t attn_norm = 0, q = 0, k = 0, v = 0, qkv = 0, o = 0, ffn_norm = 0, gate = 0, up = 0, down = 0;
  std::uint64_t router = 0;                               // ffn_gate_inp (MoE)
  std::uint64_t gate_shexp = 0, up_shexp = 0, down_shexp = 0;  // the shared expert (MoE)
  std::uint64_t k_view = 0, v_view = 0;
  std::uint64_t sinks = 0;  // attn_sinks (gpt-oss): its soft_max's weight, copied in
  // biases, each copied in after its product's weight (a split of their own: a host weight)
  std::uint64_t q_b = 0, k_b = 0, v_b = 0, qkv_b = 0, o_b = 0, router_b = 0;
  std::uint64_t q_norm = 0, k_norm = 0;  // attn_q_norm / attn_k_norm (qwen3's per-head norms)
  HostExperts experts;  // the routed experts (MoE), copied in one weight at a time
};

/// What one GPU runs of the graph llama.cpp reserves its buffers with (llama-context.cpp,
/// graph_reserve: a ubatch of n_ubatch tokens, all of them outputs, every KV cell in view).
struct DeviceGraph {
  std::uint64_t ub = 0, n_kv = 0;
  std::uint64_t n_kv_swa = 0;     // cells of the SWA cache in view (interleaved-SWA models)
  std::uint64_t first_layer = 0;  // the first repeating layer run here
  std::uint64_t layers = 0;       // repeating layers run here (a contiguous range)
  bool last_layer = false;        // the last block runs here: its get_rows of the output tokens
  bool output = false;            // the output norm and the logits run here
  /// The output layer left in host memory but run here by op offload (-ngl 0: every layer the
  /// host's): its weight, copied in at the split the output norm starts, before the norm.
  std::uint64_t output_copy = 0;
  bool casts_mask = true;         // no earlier backend ran attention: the f32 KQ mask comes in
                                  // from the host (and is cast to f16 here with flash attention)
  std::uint64_t copies = 1;       // the scheduler's n_copies (pipeline parallelism)
  bool flash_attn = false;
  KqMask kq_mask = KqMask::f16;   // Settings::kq_mask
  bool glu_op = true;             // ggml's GLU op (swiglu_split): gate, up and product all alive
  /// The KV stores as ggml_set_rows with the cells' indices as graph inputs ([n_tokens] i64 for
  /// K, and for V without flash attention one per element of its transposed rows, per cache;
  /// Settings::set_rows): gpt-oss-20b --n-cpu-moe 99 at ub 512 is 456.98 MiB with them, 456.97
  /// without; Qwen3-30B-A3B of May 2025 1344.00 without them.
  bool kv_idxs = false;
  FusedQkv fused_qkv = FusedQkv::views;  // Settings::fused_qkv
  const std::vector<bool>* swa = nullptr;             // per layer of the model: an SWA layer
  const std::vector<HostExperts>* host = nullptr;     // per layer of the model: experts in host memory
  /// Layers [0, host_layers) stay in host memory but run here before first_layer (ggml's op
  /// offload: see compute_buffers), with their weights and K/V views (`host_layer`, per layer).
  std::uint64_t host_layers = 0;
  const std::vector<HostLayer>* host_layer = nullptr;
  /// The host's own graph (the CPU runs these layers): every graph input is its leaf, allocated
  /// before any node in the order the graph first uses them (the token ids, the embeddings input
  /// when `embd_input`, the positions, each cache's cell indices and mask, the output ids), and
  /// the token embeddings' get_rows is its first node; the CPU buffer's 32-byte alignment.
  bool host_graph = false;
  bool embd_input = false;
  /// The attention rotation's Hadamard matrices (Settings::attn_rot), bytes of K's and of V's, 0
  /// where none: inputs of each cache, Q and K rotated after RoPE, V before its store, and the
  /// attention's output rotated back.
  std::uint64_t rot_k = 0, rot_v = 0;
};

/// The V store's cell indices (llama-kv-cache.cpp build_input_v_idxs): [n_tokens] i64, but
/// without flash attention the V cache is transposed and ggml_set_rows writes it one element a
/// row ("the row becomes a single element"), so the indices are [n_tokens x n_embd_v_gqa].
/// gpt-oss-120b on Metal without flash attention (two caches, ub 512, n_embd_v_gqa 512): the
/// host compute buffer 25.64 MiB, 4 MiB of it these indices.
std::uint64_t v_idxs_bytes(const Hparams& h, std::uint64_t ub, bool flash_attn) {
  return checked_mul(checked_mul(ub, 8), flash_attn ? 1 : std::max<std::uint64_t>(1, h.n_embd_v));
}

/// The high-water mark of one GPU's compute buffer for a decoder of llama's graph
/// (src/models/llama.cpp and llama-graph.cpp's build_attn / build_ffn / build_moe_ffn: attention
/// norm, Q K V with their biases, RoPE, the KV store, attention, output projection, residual, FFN
/// norm, gate/up/down or a fused up of 2 n_ff or the routed experts, residual; then the output
/// norm and the logits).
///
/// Interleaved SWA (gpt-oss, gemma2/3): two caches, each with its own KQ mask input (cast to f16
/// with flash attention), each layer attending with its cache's mask.
///
/// MoE (build_moe_ffn): the router's logits [n_expert, n_tokens] (+ its bias, in place), their
/// soft_max in place (or none: gpt-oss soft-maxes the top-k weights instead), the argsort
/// [n_expert, n_tokens] i32 whose top-k view selects the experts, the weights' get_rows [n_used,
/// n_tokens] (then soft_max or sum_rows and div: new tensors, their parents are views),
/// ggml_mul_mat_id's outputs [n_ff_exp, n_used, n_tokens] for gate and up (+ ggml_add_id biases in
/// place), the GLU product, down [n_embd, n_used, n_tokens] (+ bias), weighted in place, and the
/// sum of its n_used views (the first add a new tensor, the others in place); a shared expert as a
/// dense FFN of n_ff_shexp added in place.
///
/// Experts in host memory on a GPU layer (--n-cpu-moe, -ot exps=CPU): ggml-cuda offloads
/// MUL_MAT_ID and ADD_ID of a batch of >= 32 rows (GGML_OP_OFFLOAD_MIN_BATCH) to the GPU, and the
/// scheduler starts a new split at every op whose weight is in host memory ("by starting a new
/// split, the memory of the previously offloaded weights can be reused": ggml-backend.cpp,
/// ggml_backend_sched_split_graph), so each such weight is copied into this buffer at its own
/// split's start and freed after its op; graph inputs first needed later (the second cache's
/// mask, the output ids) are copied in at the start of the split they are first used in.
std::uint64_t simulated_compute(const Hparams& h, const DeviceGraph& d) {
  constexpr std::uint64_t f32 = 4;
  Graph g;
  const std::uint64_t ub = d.ub;
  const std::uint64_t act = checked_mul(checked_mul(h.n_embd, ub), f32);
  const std::uint64_t qs = checked_mul(checked_mul(checked_mul(h.n_head, h.head_dim), ub), f32);
  const std::uint64_t ks = checked_mul(checked_mul(h.n_embd_k, ub), f32);
  const std::uint64_t vs = checked_mul(checked_mul(h.n_embd_v, ub), f32);
  const std::uint64_t head_dim_v = h.n_head_kv == 0 ? h.head_dim : h.n_embd_v / h.n_head_kv;
  const std::uint64_t os = checked_mul(checked_mul(checked_mul(h.n_head, head_dim_v), ub), f32);
  const auto is_swa = [&](std::uint64_t il) {
    return d.swa != nullptr && il < d.swa->size() && (*d.swa)[static_cast<std::size_t>(il)];
  };
  // A layer of the host's run here by op offload (before this GPU's own).
  const auto host_item = [&](std::uint64_t il) { return il < d.host_layers && il < d.first_layer; };
  const auto host_of = [&](std::uint64_t il) -> HostExperts {
    if (il >= h.moe_layer.size() || !h.moe_layer[static_cast<std::size_t>(il)]) return {};
    // A host layer run here (op offload): its own experts, all in host memory.
    if (d.host_layer != nullptr && host_item(il)) return (*d.host_layer)[static_cast<std::size_t>(il)].experts;
    if (d.host == nullptr || il >= d.host->size()) return {};
    return (*d.host)[static_cast<std::size_t>(il)];
  };
  const auto is_moe = [&](std::uint64_t il) {
    return h.n_expert_used > 0 && il < h.moe_layer.size() && h.moe_layer[static_cast<std::size_t>(il)];
  };
  // The layers simulated: every layer allocates the same tensors, so after the first few the
  // allocator's free blocks at a layer's start repeat, with a period of one or two layers: a run of
  // more than 24 layers of one kind (MoE or dense FFN, experts in host memory or not) is simulated
  // as 12 plus its length modulo 12, which keeps any period up to 4 (and 6, 12: the SWA patterns)
  // in step. Checked against the whole graph on random shapes (flash attention or not, GLU op or
  // not, pipeline copies, fused up, biases, 25 to 80 layers): the same peak to the byte. It keeps
  // an estimate of a 100,000-layer hostile config a few milliseconds.
  std::vector<std::uint64_t> plan;  // model layer indices, in order: the host's layers run here, then this GPU's
  const auto plan_range = [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t il = begin;
    while (il < end) {
      const bool moe = is_moe(il), host = host_of(il).any();
      std::uint64_t r = il;
      while (r < end && is_moe(r) == moe && host_of(r).any() == host) ++r;
      const std::uint64_t n = r - il;
      const std::uint64_t keep = n <= 24 ? n : 12 + (n - 12) % 12;
      for (std::uint64_t k = 0; k < keep; ++k) plan.push_back(il + k);
      il = r;
    }
  };
  plan_range(0, std::min(d.host_layers, d.first_layer));
  const std::size_t first_gpu_item = plan.size();  // the first of this GPU's own layers in the plan
  plan_range(d.first_layer, d.first_layer + d.layers);
  // The split's inputs, in the order the scheduler meets them: at the split's start, or with
  // pipeline parallelism n_copies leaves each, allocated first and kept.
  const auto input = [&](std::uint64_t size) {
    if (d.host_graph) return g.leaf(size, false);
    if (d.copies <= 1) return g.node(size, {});
    const int first = g.leaf(size);
    for (std::uint64_t c = 1; c < d.copies; ++c) g.leaf(size);
    return first;
  };
  struct Cache {
    std::uint64_t cells = 0;
    int mask = -1, cnv = -1, k_idxs = -1, v_idxs = -1, rot_k = -1, rot_v = -1;
    bool made_idxs = false, made_mask = false;
  };
  std::array<Cache, 2> caches;  // [0] the full cache, [1] the SWA cache
  caches[0].cells = d.n_kv;
  caches[1].cells = d.n_kv_swa;
  const auto make_mask = [&](Cache& c) {
    if (c.made_mask) return;
    c.made_mask = true;
    const std::uint64_t cells = checked_mul(c.cells, mask_rows(ub, d.kq_mask));
    // An f16 mask: reserved so (current builds), or the copy an earlier backend cast.
    const bool f16 = d.flash_attn && (!d.casts_mask || d.kq_mask == KqMask::f16);
    c.mask = input(checked_mul(cells, f16 ? 2 : 4));
    if (f16) c.cnv = c.mask;
  };
  // The rotation matrices, first used by the Q rotation and the V rotation, before the stores.
  const auto make_rot = [&](Cache& c) {
    if (d.rot_k > 0 && c.rot_k < 0) c.rot_k = input(d.rot_k);
    if (d.rot_v > 0 && c.rot_v < 0) c.rot_v = input(d.rot_v);
  };
  // The rotation matrices, the KV stores' cell indices (a GPU layer's ggml_set_rows) and the mask.
  const auto make_inputs = [&](Cache& c) {
    make_rot(c);
    if (d.kv_idxs && !c.made_idxs) {
      c.k_idxs = input(checked_mul(ub, 8));
      c.v_idxs = input(v_idxs_bytes(h, ub, d.flash_attn));
    }
    c.made_idxs = true;
    make_mask(c);
  };
  int out_ids = -1;
  // The inputs first used at plan[from..to) (their attention, or the last layer's output ids).
  const auto inputs_for = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to && i < plan.size(); ++i) {
      if (host_item(plan[i])) continue;  // a host layer's mask comes in at its attention
      make_inputs(caches[is_swa(plan[i]) ? 1 : 0]);
      if (i + 1 == plan.size() && d.last_layer && out_ids < 0) out_ids = input(checked_mul(ub, 4));
    }
  };
  // Where the next split starting at a host weight is: the first planned layer from `i` on whose
  // experts are in host memory.
  const auto next_host = [&](std::size_t i) {
    while (i < plan.size() && !host_of(plan[i]).any()) ++i;
    return i;
  };
  int inp = -1;
  int pos = -1;  // the positions: at the start, or with the host's layers first in their first RoPE's split
  if (d.host_graph) {
    const int tokens = input(checked_mul(ub, 4));
    if (d.embd_input) g.leaf(act);  // no child: never freed
    if (!plan.empty()) pos = input(checked_mul(ub, 4));
    inputs_for(0, plan.size());
    for (Cache& c : caches)
      if (c.cells > 0) make_inputs(c);  // a cache only the GPUs' layers attend over
    inp = g.node(act, {tokens});  // get_rows of the token embeddings
    if (!h.rope && pos >= 0) inp = g.node(act, {inp, g.node(act, {pos})}, true);  // + get_rows of the positions
  } else {
    inp = input(act);  // the hidden state: the host's embeddings or the previous GPU's output
    if (!plan.empty() && first_gpu_item == 0 && h.rope) pos = input(checked_mul(ub, 4));
    if (first_gpu_item == 0) inputs_for(0, next_host(0) + 1);
  }
  // A host layer's weight, copied in at the start of the split its op begins, freed after it.
  const HostLayer gpu_layer{};
  const auto wcopy = [&](std::uint64_t bytes) { return bytes > 0 ? g.node(bytes, {}) : -1; };
  // build_norm: the norm (RMS_NORM in place; LayerNorm's NORM a new tensor, see Hparams::layer_norm),
  // then the weight (a host layer's copied in after it) and its bias in place.
  const auto norm = [&](int x, std::uint64_t weight) {
    const int n = g.node(act, {x}, !h.layer_norm);
    return g.node(act, {n, wcopy(weight)}, true);
  };
  // A dense gated FFN of `rows` (build_ffn: gate, up, silu and product, or a fused up of 2 rows),
  // with a host layer's weights (`w`) copied in; plan item `pi`.
  const auto dense_ffn = [&](int cur, std::uint64_t rows, const HostLayer& w, std::size_t pi) {
    const std::uint64_t fsz = checked_mul(checked_mul(rows, ub), f32);
    int y = -1;
    if (!h.gated) {  // up (its bias and GELU in place)
      y = g.node(fsz, {cur, wcopy(w.up)});
    } else if (h.fused_up) {  // one up of 2 n_ff (phi3, glm4): swiglu on its halves
      const int up = g.node(checked_mul(fsz, 2), {cur, wcopy(w.up)});
      if (d.glu_op) {
        y = g.node(fsz, {up});
      } else {  // ggml_cont of each half, silu in place, the product in place
        const int x0 = g.node(fsz, {g.node(fsz, {g.view(up)})}, true);
        y = g.node(fsz, {x0, g.node(fsz, {g.view(up)})}, true);
      }
    } else if (d.glu_op) {
      const int gate = g.node(fsz, {cur, wcopy(w.gate)});
      y = g.node(fsz, {gate, g.node(fsz, {cur, wcopy(w.up)})});
    } else {  // silu(gate) in place, then gate x up in place
      const int gate = g.node(fsz, {g.node(fsz, {cur, wcopy(w.gate)})}, true);
      y = g.node(fsz, {gate, g.node(fsz, {cur, wcopy(w.up)})}, true);
    }
    const int dw = wcopy(w.down);
    // The last host layer's down split carries on into this GPU's layers: the inputs they first
    // use are copied in at its start.
    if (pi + 1 == first_gpu_item && first_gpu_item > 0) inputs_for(first_gpu_item, next_host(first_gpu_item) + 1);
    return g.node(act, {y, dw});  // down
  };
  for (std::size_t pi = 0; pi < plan.size(); ++pi) {
    const std::uint64_t il = plan[pi];
    const bool last = pi + 1 == plan.size();
    const bool off = host_item(il);  // a host layer run here by op offload
    // The model's last layer runs here: its own (last_layer), or the host's run here by op
    // offload (-ngl 0): its get_rows of the output tokens then run here too.
    const bool rows_here = last && (d.last_layer || (off && d.host_layers >= h.moe_layer.size()));  // moe_layer: one a layer
    const HostLayer& lw = off ? (*d.host_layer)[static_cast<std::size_t>(il)] : gpu_layer;
    Cache& cache = caches[is_swa(il) ? 1 : 0];
    int sa = inp;
    int cur = norm(inp, lw.attn_norm);
    const auto proj = [&](std::uint64_t size, std::uint64_t weight, std::uint64_t bias, bool take_pos = true) {
      const int wc = wcopy(weight);
      // The positions: the split's second input, after the weight; a host layer's biased Q has its
      // bias's split take them in, after the product and the bias (gpt-oss's trace: [attn_q.bias, pos]).
      const bool bias_split = h.qkv_bias && bias > 0;
      if (pos < 0 && h.rope && !bias_split && take_pos) pos = input(checked_mul(ub, 4));
      int t = g.node(size, {cur, wc});
      if (h.qkv_bias) {
        const int bc = wcopy(bias);
        if (pos < 0 && h.rope && take_pos) pos = input(checked_mul(ub, 4));
        t = g.node(size, {t, bc}, true);
      }
      return t;
    };
    int o = -1;
    if (h.mla) {
      // deepseek2 with MLA's absorbed attention (llama.cpp's deepseek2 builder, is_mla): Q from
      // q_a (its norm in place) and q_b, or from wq; the latent and the rope key from
      // wkv_a_mqa; RoPE of the rope views and the latent's norm (new tensors: their parents are
      // views); the no-rope Q through attn_k_b [kv_lora, n_tokens, n_head]; Q = concat(that,
      // q_pe), K = concat(latent, k_pe), V = the latent; attention of n_head heads over one
      // K/V head of kv_lora + rope; the result through attn_v_b to v_head_dim a head.
      const std::uint64_t nh = h.n_head, lat = h.kv_lora, rope = h.qk_rope, qk = h.qk_nope + h.qk_rope;
      int qb = cur;
      if (h.q_lora > 0) {
        const std::uint64_t qa = checked_mul(checked_mul(h.q_lora, ub), f32);
        qb = g.node(qa, {g.node(qa, {g.node(qa, {cur})}, true)}, true);  // q_a, its norm, x weight
      }
      const int q = g.node(checked_mul(checked_mul(checked_mul(nh, qk), ub), f32), {qb});
      const int kvpe = g.node(checked_mul(checked_mul(lat + rope, ub), f32), {cur});
      const int q_pe = g.node(checked_mul(checked_mul(checked_mul(nh, rope), ub), f32), {g.view(q), pos}, true);
      const int k_pe = g.node(checked_mul(checked_mul(rope, ub), f32), {g.view(kvpe), pos}, true);
      const std::uint64_t lsz = checked_mul(checked_mul(lat, ub), f32);
      const int kvc = g.node(lsz, {g.node(lsz, {g.view(kvpe)}, true)}, true);  // rms_norm, x weight
      const int qn = g.node(checked_mul(lsz, nh), {g.view(q)});                  // attn_k_b x q_nope
      const int qcat = g.node(checked_mul(checked_mul(checked_mul(nh, lat + rope), ub), f32), {g.view(qn), q_pe});
      const int kcat = g.node(checked_mul(checked_mul(lat + rope, ub), f32), {g.view(kvc), k_pe});
      if (d.kv_idxs) {
        g.use_all({kcat, cache.k_idxs});
        g.use_all({d.flash_attn ? kvc : g.view(g.view(kvc)), cache.v_idxs});
      } else {
        g.use(kcat);
        g.use(d.flash_attn ? kvc : g.view(g.view(kvc)));
      }
      const std::uint64_t vsz = checked_mul(checked_mul(checked_mul(nh, h.v_head), ub), f32);
      if (d.flash_attn) {
        if (cache.cnv < 0) cache.cnv = g.node(checked_mul(checked_mul(cache.cells, mask_rows(ub, d.kq_mask)), 2), {cache.mask});
        const int fa = g.node(checked_mul(lsz, nh), {g.view(qcat), cache.cnv});
        o = g.node(vsz, {g.view(g.node(vsz, {g.view(fa)}))});  // attn_v_b, permute, cont
      } else {
        const std::uint64_t kq_size = checked_mul(checked_mul(checked_mul(cache.cells, ub), nh), f32);
        const int kq = g.node(kq_size, {g.node(kq_size, {g.view(qcat)}), cache.mask}, true);  // KQ, soft_max in place
        const int kqv = g.node(checked_mul(lsz, nh), {kq});                                    // V x KQ
        o = g.node(vsz, {g.view(g.node(vsz, {kqv}))});                                          // attn_v_b, permute, cont
      }
    } else {
      int q = -1, k = -1, v = -1;
      if (h.fused_qkv) {
        // phi3 (src/models/phi3.cpp): one wqkv product [n_embd + 2 n_embd_gqa, n_tokens] and
        // Q, K, V strided views of it, copied out by older builds (Settings::fused_qkv). RoPE
        // of a view is a new tensor (ggml-alloc never computes in place over a view), as is
        // RoPE of a reshape of a copy; the product lives until its last view is consumed.
        // Phi-3 mini at ub 256 without flash attention, July 2025 (copies): 150.00 MiB logged,
        // 150.002 simulated; 144.002 with views (Q and K copies gone: 2 x 3 MiB).
        const int qkv = proj(checked_add(qs, checked_add(ks, vs)), lw.qkv, lw.qkv_b);
        const bool copy_qk = d.fused_qkv == FusedQkv::copies;
        if (h.rope) {
          q = g.node(qs, {copy_qk ? g.view(g.node(qs, {g.view(qkv)})) : g.view(qkv), pos}, true);
          k = g.node(ks, {copy_qk ? g.view(g.node(ks, {g.view(qkv)})) : g.view(qkv), pos}, true);
        } else {  // gpt2: no RoPE, Q and K views of the product (build_qkv)
          q = g.view(qkv);
          k = g.view(qkv);
        }
        v = d.fused_qkv == FusedQkv::views ? g.view(qkv) : g.view(g.node(vs, {g.view(qkv)}));
        if (d.rot_k > 0) {
          if (off) make_rot(cache);
          q = g.node(qs, {g.view(q), cache.rot_k});
          k = g.node(ks, {g.view(k), cache.rot_k});
        }
        // V rotated: a strided view is made contiguous first (ggml_mul_mat_aux's ggml_cont_2d).
        if (d.rot_v > 0) v = g.node(vs, {d.fused_qkv == FusedQkv::views ? g.node(vs, {v}) : v, cache.rot_v});
      } else {
        // A host layer's per-head norm (qwen3): RMS_NORM of the reshape (a new tensor), its weight
        // copied in (with the positions, in Q's case: the split's second input), x weight and RoPE
        // in place. On a GPU the same memory as RoPE of the reshape, so only a host layer's is laid out.
        const auto normed = [&](std::uint64_t size, int mm, std::uint64_t weight) {
          int n = g.node(size, {g.view(mm)});
          const int wc = wcopy(weight);
          if (pos < 0 && h.rope) pos = input(checked_mul(ub, 4));
          n = g.node(size, {n, wc}, true);
          return h.rope ? g.node(size, {n, pos}, true) : n;
        };
        if (lw.q_norm > 0) q = normed(qs, proj(qs, lw.q, lw.q_b, false), lw.q_norm);
        else
          q = h.rope ? g.node(qs, {g.view(proj(qs, lw.q, lw.q_b)), pos}, true)  // reshape, RoPE (a new tensor: its parent is a view)
                     : g.view(proj(qs, lw.q, lw.q_b));
        if (d.rot_k > 0) {  // Q rotated: mul_mat of the matrix and Q's reshape, a new tensor
          if (off) make_rot(cache);
          q = g.node(qs, {g.view(q), cache.rot_k});
        }
        const auto make_k = [&] {
          if (lw.k_norm > 0) k = normed(ks, proj(ks, lw.k, lw.k_b, false), lw.k_norm);
          else k = h.rope ? g.node(ks, {g.view(proj(ks, lw.k, lw.k_b)), pos}, true) : g.view(proj(ks, lw.k, lw.k_b));
          if (d.rot_k > 0) k = g.node(ks, {g.view(k), cache.rot_k});
        };
        const auto make_v = [&] {
          v = g.view(proj(vs, lw.v, lw.v_b));
          if (d.rot_v > 0) v = g.node(vs, {v, cache.rot_v});
        };
        // build_attn's expand order: Q, V, K with one cache ("expand k later to enable rope fusion"),
        // Q, K, V with an SWA cache beside it (the iswa overload). Where weights are copied in (a
        // host layer run here) the order moves them: Qwen3 8B's shapes at -ngl 0 without flash
        // attention, 1018.34 MiB as logged (935.34 in Q, K, V order).
        if (d.n_kv_swa > 0) {  // an SWA cache: llama_kv_cache_iswa
          make_k();
          make_v();
        } else {
          make_v();
          make_k();
        }
      }
      if (d.kv_idxs && !off) {  // ggml_set_rows into the cache views (a host layer's: on the host)
        g.use_all({k, cache.k_idxs});
        g.use_all({d.flash_attn ? v : g.view(g.view(v)), cache.v_idxs});
      } else {
        g.use(k);                                                    // the K store
        g.use(d.flash_attn ? v : g.view(g.view(v)));                // the V store (transposed without FA)
      }
      const int qp = g.view(q);
      // A host layer's attention: its split's inputs, the host cache's K view, the mask the first
      // time and the V view, copied in at its start.
      int kc = -1, vc = -1;
      // gpt-oss's soft_max reads a host weight (attn_sinks): without flash attention it starts a
      // new split, whose inputs (the mask the first time, the sinks, the V view) are copied in
      // after KQ: a full cache's mask then lands above a host layer's live KQ and stays there, so
      // the GPU layers' KQ goes above it. gpt-oss-20b's shapes at -ngl 12 without flash attention,
      // an H100: 4168.89 MiB as logged (2140.83 with the mask before KQ), the trace's placements.
      const bool sinks_split = off && !d.flash_attn && lw.sinks > 0;
      if (off) {  // in the order of their ops' sources: FA(q, k, v, mask), or KQ(k, q), soft_max(kq, mask), KQV(v, kq)
        kc = wcopy(lw.k_view);
        if (!sinks_split) {  // else the soft_max's split takes them, below
          if (!d.flash_attn) make_mask(cache);
          vc = wcopy(lw.v_view);
          make_mask(cache);
        }
      }
      if (d.flash_attn) {
        if (cache.cnv < 0) cache.cnv = g.node(checked_mul(checked_mul(cache.cells, mask_rows(ub, d.kq_mask)), 2), {cache.mask});
        o = g.view(g.node(os, {qp, kc, vc, cache.cnv}));
      } else {
        const std::uint64_t kq_size = checked_mul(checked_mul(checked_mul(cache.cells, ub), h.n_head), f32);
        int kq = g.node(kq_size, {qp, kc});  // KQ
        int sk = -1;
        if (sinks_split) {  // the soft_max's split: mask, sinks, V view
          make_mask(cache);
          sk = wcopy(lw.sinks);
          vc = wcopy(lw.v_view);
        }
        kq = g.node(kq_size, {kq, cache.mask, sk}, true);  // soft_max in place
        o = g.node(os, {g.view(g.node(os, {kq, vc}))});    // KQV, permute, cont
      }
      if (d.rot_v > 0) o = g.node(os, {g.view(o), cache.rot_v});  // the output rotated back
    }
    if (h.parallel_residual && !is_moe(il)) {
      // gptneox: x + attn(ln1(x)) + ffn(ln2(x)). build_attn expanded the graph up to the attention
      // core; the final add's first source, the FFN on x (x's output rows first in the last layer),
      // comes next in ggml's order, the output projection (and its rows) after it.
      if (rows_here) sa = g.node(act, {sa, out_ids});
      const int f = g.node(act, {dense_ffn(norm(sa, lw.ffn_norm), h.n_ff, lw, pi), sa}, true);  // down, + x
      cur = g.node(act, {o, wcopy(lw.o)});
      if (lw.o_b > 0) cur = g.node(act, {cur, wcopy(lw.o_b)}, true);  // a host layer's bias, copied in
      if (rows_here) cur = g.node(act, {cur, out_ids});
      inp = g.node(act, {f, cur}, true);
      continue;
    }
    const int o_copy = wcopy(lw.o);
    // The last layer a host layer run here: the output ids come in with its output projection's
    // split (the get_rows after it share the split), after the weight. Llama 3.1 8B's shapes at
    // -ngl 0 without flash attention: 891.31 MiB as logged (790.81 without the get_rows and their
    // ids: the output weight's copy then sat below the last result, 100.5 MiB lower).
    if (off && rows_here && out_ids < 0) out_ids = input(checked_mul(ub, 4));
    cur = g.node(act, {o, o_copy});  // the output projection
    if (lw.o_b > 0) cur = g.node(act, {cur, wcopy(lw.o_b)}, true);  // a host layer's bias, copied in
    if (rows_here) {
      cur = g.node(act, {cur, out_ids});
      sa = g.node(act, {sa, out_ids});
    }
    const int ffn_inp = g.node(act, {cur, sa}, true);
    cur = norm(ffn_inp, lw.ffn_norm);
    if (!is_moe(il)) {
      const int down = dense_ffn(cur, h.n_ff, lw, pi);
      inp = h.residual_first ? g.node(act, {ffn_inp, down}, true) : g.node(act, {down, ffn_inp}, true);  // + residual
      continue;
    }
    // build_moe_ffn
    const HostExperts he = host_of(il);
    const std::uint64_t nu = h.n_expert_used;
    const std::uint64_t rsz = checked_mul(checked_mul(h.n_expert, ub), f32);
    int logits = g.node(rsz, {cur, wcopy(lw.router)});
    if (h.router_bias) logits = g.node(rsz, {logits, wcopy(lw.router_b)}, true);
    const int probs = h.softmax_weight ? logits : g.node(rsz, {logits}, true);  // soft_max in place
    const int sel = g.view(g.node(checked_mul(checked_mul(h.n_expert, ub), 4), {probs}));  // argsort, top-k view
    const std::uint64_t wsz = checked_mul(checked_mul(nu, ub), f32);
    int w = g.node(wsz, {g.view(probs), sel});  // get_rows of the selected probabilities
    if (h.softmax_weight) w = g.node(wsz, {g.view(w)}, true);
    if (h.norm_w) w = g.node(wsz, {g.view(w), g.node(checked_mul(ub, f32), {g.view(w)})}, true);  // div by sum_rows
    const int x = g.view(cur);
    // An expert matmul, its weight copied in at its split's start when in host memory, and its bias.
    const std::uint64_t esz = checked_mul(checked_mul(checked_mul(h.n_ff_exp, nu), ub), f32);
    const auto mm_id = [&](int src, std::uint64_t out, std::uint64_t weight, std::uint64_t bias) {
      const int wcp = weight > 0 ? g.node(weight, {}) : -1;
      int t = g.node(out, {wcp, src, sel});
      if (h.expert_bias) {
        const int bcp = bias > 0 ? g.node(bias, {}) : -1;
        t = g.node(out, {t, bcp, sel}, true);  // ggml_add_id
      }
      return t;
    };
    const int gate = mm_id(x, esz, he.gate, he.gate_b);
    const int up = mm_id(x, esz, he.up, he.up_b);
    int y = -1;
    if (d.glu_op || h.softmax_weight) {
      y = g.node(esz, {gate, up});  // swiglu_split / swiglu_oai
    } else {
      y = g.node(esz, {g.node(esz, {gate}, true), up}, true);  // silu in place, product in place
    }
    // down: the last weight of this layer in host memory starts a split that carries on into the
    // next layers: the inputs they first use are copied in at its start.
    const int dwcp = he.down > 0 ? g.node(he.down, {}) : -1;
    if (he.any() && !h.expert_bias) inputs_for(pi + 1, next_host(pi + 1) + 1);
    int ex = g.node(checked_mul(act, nu), {dwcp, y, sel});
    if (h.expert_bias) {
      const int bcp = he.down_b > 0 ? g.node(he.down_b, {}) : -1;
      if (he.any()) inputs_for(pi + 1, next_host(pi + 1) + 1);
      ex = g.node(checked_mul(act, nu), {ex, bcp, sel}, true);
    }
    ex = g.node(checked_mul(act, nu), {ex, w}, true);  // weighted, in place
    int moe = g.view(ex);
    for (std::uint64_t e = 1; e < nu; ++e) moe = g.node(act, {moe, g.view(ex)}, true);
    if (nu == 1) moe = g.node(act, {moe});  // ggml_cont: no non-contiguous result
    if (h.n_ff_shexp > 0) {
      HostLayer shexp;
      shexp.gate = lw.gate_shexp;
      shexp.up = lw.up_shexp;
      shexp.down = lw.down_shexp;
      moe = g.node(act, {moe, dense_ffn(cur, h.n_ff_shexp, shexp, pi)}, true);
    }
    inp = g.node(act, {moe, ffn_inp}, true);  // residual
  }
  if (d.output) {
    if (d.output_copy > 0) g.node(d.output_copy, {});  // freed with the graph: the split's input
    const int e = norm(inp, 0);  // the output norm (its weight never copied in)
    g.node(checked_mul(checked_mul(h.n_vocab, ub), f32), {e});
  } else {
    g.use(inp);  // copied to the next device
  }
  return g.peak(d.host_graph ? kCpuAlignment : kCudaAlignment);
}

}  // namespace

Bytes cuda_context_bytes(unsigned sm_count, unsigned compute_capability) {
  // CUDA C Programming Guide, compute capabilities table: maximum resident threads per SM.
  unsigned threads = 0;
  switch (compute_capability) {
    case 75: threads = 1024; break;
    case 86: case 89: case 120: case 121: threads = 1536; break;
    case 70: case 72: case 80: case 87: case 90: case 100: case 101: case 103: case 110: threads = 2048; break;
    default: return Bytes{0};
  }
  return Bytes{static_cast<std::uint64_t>(sm_count) * threads * 2048};
}

Settings ollama_settings() {
  Settings s;
  // Ollama's runner options (api/types.go DefaultOptions: NumCtx from envconfig.ContextLength, 4096 by
  // default (2048 before v0.6; from v0.15.5 by the total VRAM, ollama_default_ctx), NumBatch 512,
  // NumGPU -1 = as many layers as fit; envconfig: OLLAMA_NUM_PARALLEL 1). The runner gets
  // num_ctx x parallel cells (llm/server.go: opts.NumCtx * numParallel).
  s.ctx_size = 4096;
  s.parallel = 1;
  s.batch_size = 512;
  s.ubatch_size = 512;
  s.kv_unified = true;  // one llama.cpp context shared by Ollama's slots
  return s;
}

bool flash_attn_auto(const spec::ModelSpec& m, const std::vector<GgufTensor>& tensors, std::string_view cache_k,
                     std::string_view cache_v) {
  // ggml-cuda's fattn.cu picks a kernel for these K/V head sizes (ggml_cuda_get_best_fattn_kernel):
  // equal ones of 40, 64, 72, 80, 96, 112, 128 or 256, and MLA's 576 over 512.
  const auto supported = [](std::uint64_t k, std::uint64_t v) {
    if (k == 576 && v == 512) return true;
    if (k != v) return false;
    for (const std::uint64_t d : {40, 64, 72, 80, 96, 112, 128, 256})
      if (k == d) return true;
    return false;
  };
  // The cache types its kernels read without GGML_CUDA_FA_ALL_QUANTS: K and V alike, f16, q8_0
  // or q4_0.
  if (cache_k != cache_v || (cache_k != "f16" && cache_k != "q8_0" && cache_k != "q4_0")) return false;
  const bool mla = absorbed_mla(m, tensors);
  const Hparams h = hparams_of(m, mla);
  if (mla) return supported(h.kv_lora + h.qk_rope, h.kv_lora);
  if (arch_row(m.model_type).per_layer) {
    for (const spec::LayerGroup& g : m.layers) {
      const std::uint64_t hd = g.head_dim != 0 ? g.head_dim : m.head_dim;
      if (!supported(hd, hd)) return false;
    }
    return true;
  }
  if (h.n_head_kv == 0) return false;
  return supported(h.n_embd_k / h.n_head_kv, h.n_embd_v / h.n_head_kv);
}

bool ollama_flash_attn(const spec::ModelSpec& m, const std::vector<GgufTensor>& tensors) {
  if (!arch_row(m.model_type).ollama_fa) return false;
  // SupportsFlashAttention: K and V heads of one size.
  const bool mla = absorbed_mla(m, tensors);
  const Hparams h = hparams_of(m, mla);
  if (mla) return false;
  if (arch_row(m.model_type).per_layer) return true;  // gemma4: each layer's K and V heads alike
  return h.n_head_kv != 0 && h.n_embd_k == h.n_embd_v;
}

std::uint64_t ollama_default_ctx(Bytes total_vram) {
  if (total_vram >= GiB(47)) return 262144;
  if (total_vram >= GiB(23)) return 32768;
  return 4096;
}

std::vector<GgufTensor> tensors_of(const spec::ModelSpec& m, std::string_view file_type) {
  using R = spec::TensorRole;
  std::vector<GgufTensor> out;
  std::uint64_t offset = 0;
  const auto add = [&](std::string name, const GgmlType& t, std::vector<std::uint64_t> ne) {
    GgufTensor g;
    g.name = std::move(name);
    g.type = &t;
    g.ne = std::move(ne);
    g.bytes = spec::ggml_tensor_bytes(t, g.ne, "parameters");
    g.offset = offset;
    offset = checked_add(offset, pad(g.bytes, kGgufAlignment));
    out.push_back(std::move(g));
  };
  const GgmlType& f32 = *spec::ggml_type_by_name("F32");
  spec::TensorPlace place = spec::tensor_place(m);
  const auto typed = [&](R role, std::uint64_t row) -> const GgmlType& {
    place.row = row;
    return spec::gguf_tensor_type(file_type, role, place);
  };
  const std::uint64_t H = m.hidden_size;
  add("token_embd.weight", typed(R::token_embd, H), {H, m.vocab_size});
  const std::uint64_t token_elems = checked_mul(H, m.vocab_size);
  const bool per_layer = arch_row(m.model_type).per_layer;
  // gemma4's per-layer inputs (its embedding_params beyond the token table: embed_tokens_per_layer
  // [V_ple, L x P], per_layer_model_projection [L x P, H] and its norm [P]): convert_hf_to_gguf.py
  // writes per_layer_token_embd (the input layer's, on the host), per_layer_model_proj and
  // per_layer_proj_norm (llama_model_gemma4::load_arch_tensors).
  std::uint64_t ple_width = 0;  // P: hidden_size_per_layer_input
  if (per_layer)
    for (const spec::LayerGroup& g : m.layers)
      for (const spec::Linear& l : g.linears)
        if (l.name == "per_layer_input_gate") ple_width = l.out_features;
  const std::uint64_t ple_cols = checked_mul(m.num_layers, ple_width);  // L x P
  const std::uint64_t ple_fixed = checked_add(checked_mul(H, ple_cols), ple_width);
  if (ple_width > 0 && m.embedding_params > checked_add(token_elems, ple_fixed) &&
      (m.embedding_params - token_elems - ple_fixed) % ple_cols == 0) {
    const std::uint64_t v_ple = (m.embedding_params - token_elems - ple_fixed) / ple_cols;
    add("per_layer_token_embd.weight", typed(R::token_embd, ple_cols), {ple_cols, v_ple});
    add("per_layer_model_proj.weight", typed(R::other, H), {H, ple_cols});
    add("per_layer_proj_norm.weight", f32, {ple_width});
  } else if (m.embedding_params > token_elems) {
    add("position_embd.weight", f32, {m.embedding_params - token_elems});
  }
  // gemma4's full-attention layers' proportional rope: rope_freqs [global_head_dim / 2] f32, required
  // by the first full layer (llama_model_gemma4::load_arch_tensors).
  if (per_layer && m.sliding_window != 0 && !m.layers.empty()) {
    const spec::LayerGroup& last = m.layers.back();  // the last layer is a full-attention one
    const std::uint64_t hd = last.head_dim != 0 ? last.head_dim : m.head_dim;
    if (hd >= 2) add("rope_freqs.weight", f32, {hd / 2});
  }
  std::uint64_t layer = 0;
  for (const spec::LayerGroup& g : m.layers) {
    for (std::uint64_t k = 0; k < g.count; ++k, ++layer) {
      place.layer = layer;
      const std::string blk = fmt::format("blk.{}.", layer);
      bool after_fc = false;
      for (const spec::Linear& l : g.linears) {
        std::string_view n = l.name;
        if (const auto dot = n.rfind('.'); dot != std::string_view::npos) n = n.substr(dot + 1);
        R role = R::other;
        if (l.name == "gate" || l.name == "shared_expert_gate" || (l.role == spec::Role::router && l.expert == false))
          role = R::kept_f32;
        else if (n == "q_proj") role = R::attn_q;
        else if (n == "k_proj") role = R::attn_k;
        else if (n == "v_proj") role = R::attn_v;
        else if (n == "o_proj" || n == "dense" || (n == "c_proj" && !after_fc)) role = R::attn_output;
        else if (n == "c_attn" || n == "qkv_proj" || n == "query_key_value") role = R::attn_qkv;
        else if (n == "kv_b_proj") role = R::attn_kv_b;
        else if (n == "gate_proj") role = l.expert ? R::ffn_gate_exp : R::ffn_gate;
        else if (n == "up_proj" || n == "gate_up_proj" || n == "c_fc" || n == "dense_h_to_4h" || n == "fc1")
          role = l.expert ? R::ffn_up_exp : R::ffn_up;
        else if (n == "down_proj" || n == "c_proj" || n == "dense_4h_to_h" || n == "fc2")
          role = l.expert ? R::ffn_down_exp : R::ffn_down;
        after_fc = after_fc || role == R::ffn_up || role == R::ffn_up_exp;
        if (l.expert && n == "gate_up_proj" && l.out_features % 2 == 0) {
          // transformers' fused experts.gate_up_proj: the converter writes ffn_gate_exps and
          // ffn_up_exps, each [n_embd, n_ff_exp, n_expert] (convert_hf_to_gguf.py), and their biases.
          for (const R r : {R::ffn_gate_exp, R::ffn_up_exp}) {
            add(blk + gguf_name(l, r) + ".weight", typed(r, l.in_features), {l.in_features, l.out_features / 2, l.copies});
            if (l.bias) add(blk + gguf_name(l, r) + ".bias", f32, {l.out_features / 2, l.copies});
          }
          continue;
        }
        if (role == R::attn_kv_b && arch_row(m.model_type).mla && m.kv_lora_rank > 0 && m.qk_nope_head_dim > 0 &&
            m.v_head_dim > 0) {
          // MLA: convert_hf_to_gguf.py (DeepseekV2Model.modify_tensors, since April 2025) splits
          // kv_b_proj for the absorbed attention into attn_k_b [qk_nope, kv_lora_rank, n_head]
          // (transposed) and attn_v_b [kv_lora_rank, v_head_dim, n_head]; "only old legacy GGUF
          // files will have the unsplit wkv_b tensor" (llama-model.cpp).
          add(blk + "attn_k_b.weight", typed(R::other, m.qk_nope_head_dim), {m.qk_nope_head_dim, m.kv_lora_rank, m.num_heads});
          add(blk + "attn_v_b.weight", typed(R::other, m.kv_lora_rank), {m.kv_lora_rank, m.v_head_dim, m.num_heads});
          continue;
        }
        std::vector<std::uint64_t> ne{l.in_features, l.out_features};
        if (l.copies > 1) ne.push_back(l.copies);
        add(blk + gguf_name(l, role) + ".weight", typed(role, l.in_features), ne);
        if (l.bias) add(blk + gguf_name(l, role) + ".bias", f32, {checked_mul(l.out_features, l.copies)});
      }
      std::uint64_t norms = checked_add(g.norm_params, g.other_params);
      if (m.qk_norm && arch_row(m.model_type).qk_norm_head && m.head_dim > 0 && norms >= 2 * m.head_dim) {
        add(blk + "attn_q_norm.weight", f32, {m.head_dim});
        add(blk + "attn_k_norm.weight", f32, {m.head_dim});
        norms -= 2 * m.head_dim;
      }
      if (norms > 0) add(blk + "norm.weight", f32, {norms});
      // gemma4's layer_scalar buffer, converted as layer_output_scale [1] f32 (layer.out_scale; Gemma 4
      // 31B's load log in llama.cpp#21760 lists blk.N.layer_output_scale.weight): 4 bytes, 128 on CUDA.
      if (per_layer) add(blk + "layer_output_scale.weight", f32, {1});
    }
  }
  if (m.final_norm_params > 0) add("output_norm.weight", f32, {m.final_norm_params});
  if (!m.tied_embeddings) add("output.weight", typed(R::output, H), {H, m.vocab_size});
  // minicpm3 with longrope: MiniCPM3Model.generate_extra_tensors writes rope_factors_long and
  // rope_factors_short, qk_rope_head_dim / 2 f32 each.
  if (arch_row(m.model_type).heads_cache && m.qk_rope_head_dim >= 2)
    for (const spec::RopeScaling& r : m.rope_scaling)
      if (r.type == "longrope") {
        add("rope_factors_long.weight", f32, {m.qk_rope_head_dim / 2});
        add("rope_factors_short.weight", f32, {m.qk_rope_head_dim / 2});
        break;
      }
  return out;
}

namespace {

/// The settings llama.cpp refuses, each named by its flag (all of them at once).
void check_settings(const spec::ModelSpec& m, const Settings& s, std::uint64_t n_gpu) {
  Diagnostics diags;
  if (!s.tensor_split.empty() && s.tensor_split.size() != n_gpu)
    diags.add("--tensor-split", fmt::format("{} shares for {} GPUs", s.tensor_split.size(), n_gpu),
              "give one share per GPU of --gpu, e.g. --gpu rtx-3090,rtx-3060 --tensor-split 3,1");
  // llama.cpp reads each share with std::stof and sums them in a float (llama_model_load's
  // split points): a share or a sum past FLT_MAX stops it (out_of_range) or makes every split
  // point inf / inf, so such shares are refused rather than placed.
  double sum = 0;
  for (const double x : s.tensor_split) {
    if (!(x >= 0) || !std::isfinite(x))
      diags.add("--tensor-split", fmt::format("{} is not a share", x), "give non-negative numbers, e.g. 3,1");
    else
      sum += x;
  }
  if (!(sum <= static_cast<double>(std::numeric_limits<float>::max())))
    diags.add("--tensor-split", fmt::format("the shares add up to {:g}, past a float's range", sum),
              "give shares in proportion, e.g. 3,1");
  if (s.ctx_size == 0) diags.add("--ctx-size", "0 cells", "give the context, e.g. --ctx-size 8192");
  if (s.parallel == 0) diags.add("--parallel", "0 sequences", "give at least 1");
  // llama-cparams.h LLAMA_MAX_SEQ: llama_context refuses more ("n_seq_max must be <= 256").
  constexpr std::uint64_t kLlamaMaxSeq = 256;
  if (s.parallel > kLlamaMaxSeq)
    diags.add("--parallel", fmt::format("{} sequences: llama.cpp takes at most {} (LLAMA_MAX_SEQ)", s.parallel, kLlamaMaxSeq),
              "give --parallel 256 or fewer");
  if (s.ubatch_size == 0 || s.batch_size == 0) diags.add("--ubatch-size", "0 tokens", "give at least 1");
  if (m.num_layers == 0 || m.num_layers > 100'000)
    diags.add("model", fmt::format("{} layers", m.num_layers), "check the model's block count");
  diags.throw_if_any();
}

struct CacheTypes {
  const GgmlType& k;
  const GgmlType& v;
};

/// --cache-type-k/-v as ggml types; a quantized V cache needs flash attention.
CacheTypes cache_types(const Settings& s) {
  const CacheTypes c{type_named(s.cache_type_k, "--cache-type-k"), type_named(s.cache_type_v, "--cache-type-v")};
  const GgmlType& tv = c.v;
  if (tv.block_size > 1 && !s.flash_attn)
    throw InputError("--cache-type-v",
                     fmt::format("a quantized V cache ({}) needs flash attention: llama.cpp refuses it "
                                 "(\"V cache quantization requires flash_attn\")",
                                 s.cache_type_v),
                     "add --flash-attn on, or use --cache-type-v f16");
  return c;
}

/// load_tensors' split points: the cumulative --tensor-split shares (or the GPUs' memory),
/// normalised, as llama.cpp computes them (in float).
std::vector<double> split_points(const Settings& s, std::uint64_t n_gpu) {
  std::vector<double> shares(static_cast<std::size_t>(n_gpu), 1.0);
  if (!s.tensor_split.empty() && std::any_of(s.tensor_split.begin(), s.tensor_split.end(), [](double x) { return x > 0; }))
    shares = s.tensor_split;
  else if (!s.gpu_memory.empty())
    for (std::size_t i = 0; i < s.gpu_memory.size(); ++i) shares[i] = static_cast<double>(s.gpu_memory[i].value());
  std::vector<double> splits(shares.size());
  double sum = 0;
  for (std::size_t i = 0; i < shares.size(); ++i) splits[i] = (sum += shares[i]);
  std::vector<float> fsplits(splits.size());
  for (std::size_t i = 0; i < splits.size(); ++i) fsplits[i] = static_cast<float>(splits[i] / sum);
  return {fsplits.begin(), fsplits.end()};
}

/// The largest weight left on the host: what ggml's op offload copies to the main GPU.
struct HostWeight {
  std::uint64_t bytes = 0, rows = 0;
  bool output = false;  // output.weight
  /// The same of the host weights outside the blocks (the output layer's): what op offload copies
  /// beside the host's layers where those are simulated one weight at a time.
  std::uint64_t outside_bytes = 0, outside_rows = 0;
  bool outside_output = false;
  /// Per layer: the routed experts in host memory of a layer that runs on a GPU (simulated
  /// in that GPU's graph, not in `bytes`).
  std::vector<HostExperts> experts;
  /// Per layer left on the host: its weights, as op offload copies them (cuda_alloc_size).
  std::vector<HostLayer> layers;
  /// Host weights an x86 CPU with AVX2 repacks (ggml-cpu repack.cpp ggml_repack_get_optimal_repack_type:
  /// Q4_0, Q4_K, IQ4_NL and MXFP4 matrices of a multiple of 8 rows; not the token embeddings, read by
  /// get_rows): bytes.
  std::uint64_t repackable = 0;
  /// Q2_K matrices of a multiple of 8 rows, which ggml-cpu repacks where the CPU has AVX-512 (q2_K_8x8_q8_K).
  std::uint64_t repackable_avx512 = 0;
  /// The widest f16/bf16 block matrix (ne[0] + ne[1]) on each GPU, and on the host: cuBLAS's
  /// temporaries in ggml-cuda's pool (attention_pool_bytes' neighbour in compute_buffers).
  std::vector<std::uint64_t> half_width;
  std::uint64_t host_half_width = 0;
};

/// An f16 or bf16 matrix of a block, run through cuBLAS for a prompt's ubatch (ggml-cuda's
/// ggml_cuda_op_mul_mat_cublas): its ne[0] + ne[1], else 0.
bool half_type(const GgmlType& t) { return t.id == kGgmlF16 || t.id == kGgmlBf16; }

std::uint64_t half_matrix_width(const GgufTensor& t) {
  if (!half_type(*t.type) || t.ne.size() != 2 || !block_of(t.name)) return 0;
  return checked_add(t.ne[0], t.ne[1]);
}

/// The model buffers (load_tensors): each tensor on its layer's device, or where -ot,
/// --n-cpu-moe or a row split puts it: r.gpus[].model and r.host.model.
HostWeight model_buffers(const std::vector<GgufTensor>& tensors, const Settings& s, const Settings& eff,
                         const Placement& p, const std::vector<double>& fs, const std::vector<bool>& rope_layer,
                         Result& r) {
  const std::uint64_t n_layer = rope_layer.size();
  // Each file's mapped range of host tensors (a split GGUF's files are mapped one by one: one
  // CPU_Mapped buffer a file).
  std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> mapped;
  std::vector<std::uint64_t> gpu_model(r.gpus.size(), 0);
  std::uint64_t host_read = 0;
  HostWeight largest;  // the largest weight left on the host
  largest.experts.resize(static_cast<std::size_t>(n_layer));
  largest.layers.resize(static_cast<std::size_t>(n_layer));
  largest.half_width.assign(r.gpus.size(), 0);
  std::uint64_t repacked = 0;  // with no GPU backend: CPU_REPACK's tensors, out of the mapped range
  // A host matrix op offload may copy in for its product: the largest of all, and the largest
  // outside the blocks (the output layer's).
  const auto copy_candidate = [&](std::uint64_t bytes, std::uint64_t rows, bool output, bool in_block) {
    if (bytes > largest.bytes) {
      largest.bytes = bytes;
      largest.rows = rows;
      largest.output = output;
    }
    if (!in_block && bytes > largest.outside_bytes) {
      largest.outside_bytes = bytes;
      largest.outside_rows = rows;
      largest.outside_output = output;
    }
  };
  const auto on_host = [&](const GgufTensor& t) {
    const auto blk = block_of(t.name);
    largest.host_half_width = std::max(largest.host_half_width, half_matrix_width(t));
    bool repack = false;
    if (!input_tensor(t.name) && t.ne.size() >= 2 && t.ne[1] % 8 == 0 &&
        (t.type->name == "Q4_0" || t.type->name == "Q4_K" || t.type->name == "IQ4_NL" || t.type->name == "MXFP4")) {
      largest.repackable = checked_add(largest.repackable, t.bytes);
      repack = s.no_gpu;
    }
    if (!input_tensor(t.name) && t.ne.size() >= 2 && t.ne[1] % 8 == 0 && t.type->name == "Q2_K")
      largest.repackable_avx512 = checked_add(largest.repackable_avx512, t.bytes);
    if (blk && *blk < n_layer && p.layer_dev[static_cast<std::size_t>(*blk)] == kCpu) {
      HostLayer& l = largest.layers[static_cast<std::size_t>(*blk)];
      const std::string_view name = t.name;
      const std::string_view role = name.substr(std::min(name.size(), name.find('.', 4) + 1));
      for (const auto& [suffix, slot] : {std::pair{"attn_norm.weight", &l.attn_norm}, std::pair{"attn_q.weight", &l.q},
                                         std::pair{"attn_k.weight", &l.k}, std::pair{"attn_v.weight", &l.v},
                                         std::pair{"attn_qkv.weight", &l.qkv}, std::pair{"attn_output.weight", &l.o},
                                         std::pair{"ffn_norm.weight", &l.ffn_norm}, std::pair{"ffn_gate.weight", &l.gate},
                                         std::pair{"ffn_up.weight", &l.up}, std::pair{"ffn_down.weight", &l.down},
                                         std::pair{"ffn_gate_inp.weight", &l.router},
                                         // openai-moe.cpp's FFN norm (attn_post_norm)
                                         std::pair{"post_attention_norm.weight", &l.ffn_norm},
                                         std::pair{"attn_sinks.weight", &l.sinks},
                                         std::pair{"attn_q.bias", &l.q_b}, std::pair{"attn_k.bias", &l.k_b},
                                         std::pair{"attn_v.bias", &l.v_b}, std::pair{"attn_qkv.bias", &l.qkv_b},
                                         std::pair{"attn_output.bias", &l.o_b},
                                         std::pair{"ffn_gate_inp.bias", &l.router_b},
                                         std::pair{"attn_q_norm.weight", &l.q_norm},
                                         std::pair{"attn_k_norm.weight", &l.k_norm},
                                         std::pair{"ffn_gate_shexp.weight", &l.gate_shexp},
                                         std::pair{"ffn_up_shexp.weight", &l.up_shexp},
                                         std::pair{"ffn_down_shexp.weight", &l.down_shexp},
                                         std::pair{"ffn_gate_exps.weight", &l.experts.gate},
                                         std::pair{"ffn_up_exps.weight", &l.experts.up},
                                         std::pair{"ffn_down_exps.weight", &l.experts.down},
                                         std::pair{"ffn_gate_exps.bias", &l.experts.gate_b},
                                         std::pair{"ffn_up_exps.bias", &l.experts.up_b},
                                         std::pair{"ffn_down_exps.bias", &l.experts.down_b}})
        if (role == suffix) *slot = cuda_alloc_size(t);
    }
    if (blk && *blk < n_layer && expert_tensor(t.name) && p.layer_dev[static_cast<std::size_t>(*blk)] != kCpu) {
      HostExperts& e = largest.experts[static_cast<std::size_t>(*blk)];
      const bool bias = t.name.find(".bias") != std::string::npos;
      const std::uint64_t b = checked_add(t.bytes, 0);
      if (t.name.find("ffn_gate_exps") != std::string::npos) (bias ? e.gate_b : e.gate) += b;
      else if (t.name.find("ffn_up_exps") != std::string::npos) (bias ? e.up_b : e.up) += b;
      else if (t.name.find("ffn_down_exps") != std::string::npos) (bias ? e.down_b : e.down) += b;
    } else if (t.ne.size() >= 2 && !input_tensor(t.name)) {
      copy_candidate(t.bytes, t.ne[1] * (t.ne.size() > 2 ? t.ne[2] : 1), t.name == "output.weight", blk.has_value());
    }
    if (repack) {
      // ggml-cpu's repack buffer type (make_cpu_buft_list lists the CPU's extra types first when
      // no GPU's host type precedes them): its own buffer, one allocation of every tensor
      // (ggml_backend_cpu_buffer_type's alignment), outside the mapping (get_mapping_range spans
      // the tensors of the mapped context only).
      repacked = checked_add(repacked, pad(t.bytes, kCpuAlignment));
      return;
    }
    auto [it, fresh] = mapped.try_emplace(t.file, t.offset, checked_add(t.offset, t.bytes));
    if (!fresh) {
      it->second.first = std::min(it->second.first, t.offset);
      it->second.second = std::max(it->second.second, checked_add(t.offset, t.bytes));
    }
    host_read = checked_add(host_read, pad(t.bytes, kCpuAlignment));
  };
  const auto on_gpu = [&](std::size_t d, std::uint64_t alloc) {
    gpu_model[d] = checked_add(gpu_model[d], pad(alloc, kCudaAlignment));
  };
  // -ot: compiled once; a bad pattern or a device past the GPUs is the flag's error.
  std::vector<std::regex> overrides;
  for (const auto& o : s.override_tensor) {
    if (o.device >= static_cast<int>(r.gpus.size()))
      throw InputError("--override-tensor", fmt::format("{}=CUDA{}: there are {} GPUs (CUDA0 to CUDA{})", o.pattern,
                                                        o.device, r.gpus.size(), r.gpus.size() - 1),
                       "name CPU or one of the GPUs given with --gpu");
    try {
      overrides.emplace_back(o.pattern);
    } catch (const std::regex_error& e) {
      throw InputError("--override-tensor", fmt::format("'{}' is not a regular expression ({})", o.pattern, e.what()),
                       "e.g. --override-tensor 'blk\\.(1[0-9])\\.ffn_.*_exps=CPU'");
    }
  }
  const auto overridden = [&](const std::string& name) -> std::optional<int> {
    for (std::size_t i = 0; i < overrides.size(); ++i)
      if (std::regex_search(name, overrides[i])) return s.override_tensor[i].device;
    return std::nullopt;
  };
  const GgufTensor* token_embd = nullptr;
  bool has_output = false;
  for (const GgufTensor& t : tensors) {
    if (t.name == "token_embd.weight") token_embd = &t;
    if (t.name == "output.weight") has_output = true;
    int dev = kCpu;
    if (input_tensor(t.name)) {
      dev = kCpu;
    } else if (starts_with(t.name, "per_layer_model_proj.") || starts_with(t.name, "per_layer_proj_norm.")) {
      // gemma4's per-layer-input projection: LLM_TENSOR_LAYER_REPEATING, created with bid 0
      // (tn(..., "weight", 0)): on layer 0's device.
      dev = n_layer > 0 ? p.layer_dev.front() : kCpu;
    } else if (const auto blk = block_of(t.name)) {
      dev = *blk < n_layer ? p.layer_dev[static_cast<std::size_t>(*blk)] : kCpu;
      if (dev != kCpu && *blk < s.n_cpu_moe && expert_tensor(t.name)) dev = kCpu;
    } else if (starts_with(t.name, "rope_freqs.") || starts_with(t.name, "rope_factors_long.") ||
               starts_with(t.name, "rope_factors_short.")) {
      // Created per layer with TENSOR_DUPLICATED (phi3's and minicpm3's longrope factors,
      // layer.rope_long / rope_short, as well): load_tensors' create_tensor returns the tensor
      // already in the layer's buffer-type context, so one copy on every device holding a layer.
      std::vector<bool> seen(r.gpus.size(), false);
      bool cpu = false;
      for (std::uint64_t il = 0; il < n_layer; ++il) {
        if (starts_with(t.name, "rope_freqs.") && !rope_layer[static_cast<std::size_t>(il)]) continue;
        const int d = p.layer_dev[static_cast<std::size_t>(il)];
        if (d == kCpu) {
          cpu = true;
        } else if (!seen[static_cast<std::size_t>(d)]) {
          seen[static_cast<std::size_t>(d)] = true;
          on_gpu(static_cast<std::size_t>(d), cuda_alloc_size(t));
        }
      }
      if (cpu) on_host(t);
      continue;
    } else {
      dev = p.layer_dev.back();  // output, output_norm and the other non-repeating tensors
    }
    if (const auto o = overridden(t.name)) dev = *o;
    if (dev == kCpu) {
      on_host(t);
      continue;
    }
    const bool matrix = t.ne.size() >= 2 && block_of(t.name).has_value();
    if (eff.split_mode == SplitMode::row && matrix) {
      // ggml_backend_cuda_split_buffer_type: rows split in the tensor_split proportions.
      const std::uint64_t rows = t.ne.size() >= 2 ? t.bytes / std::max<std::uint64_t>(1, row_size(*t.type, t.ne[0])) : 1;
      std::uint64_t lo = 0;
      for (std::size_t d = 0; d < r.gpus.size(); ++d) {
        const std::uint64_t hi = d + 1 == r.gpus.size()
                                     ? rows
                                     : std::min<std::uint64_t>(rows, static_cast<std::uint64_t>(std::llround(
                                                                         static_cast<double>(rows) * fs[d])));
        if (hi > lo) {
          GgufTensor part = t;
          part.bytes = checked_mul(row_size(*t.type, t.ne[0]), hi - lo);
          on_gpu(d, cuda_alloc_size(part));
        }
        lo = std::max(lo, hi);
      }
      continue;
    }
    on_gpu(static_cast<std::size_t>(dev), cuda_alloc_size(t));
    std::uint64_t& w = largest.half_width[static_cast<std::size_t>(dev)];
    w = std::max(w, half_matrix_width(t));
  }
  // Tied embeddings: the output layer reads token_embd again as its own tensor
  // (TENSOR_DUPLICATED), on the output layer's device.
  if (!has_output && token_embd != nullptr) {
    const int d = p.layer_dev.back();
    if (d != kCpu) {
      on_gpu(static_cast<std::size_t>(d), cuda_alloc_size(*token_embd));
    } else {
      if (!s.mmap) host_read = checked_add(host_read, pad(token_embd->bytes, kCpuAlignment));
      // On the host, it is the output layer's weight op offload copies for the logits, as an
      // output.weight would be: Gemma 3 12B's shapes at -ngl 0 without flash attention, an H100,
      // 1539.87 MiB logged (374.94 without the copy: its 262144 x 3840 Q8_0, 1020 MiB, and the logits).
      copy_candidate(token_embd->bytes, token_embd->ne.size() >= 2 ? token_embd->ne[1] : 1, true, false);
    }
  }
  for (std::size_t d = 0; d < r.gpus.size(); ++d) r.gpus[d].model = Bytes{gpu_model[d]};
  if (s.mmap) {
    std::uint64_t range = 0;
    for (const auto& [file, lohi] : mapped) range = checked_add(range, lohi.second - lohi.first);
    r.host.model = Bytes{range};
  }
  else r.host.model = Bytes{host_read};
  r.host.repack = Bytes{repacked};
  return largest;
}

/// What the compute buffers need of the cache: the ubatch and the cells each device's attention sees.
struct KvView {
  std::uint64_t ub = 0;
  bool any_swa = false;
  std::vector<std::uint64_t> gpu_cells;
  std::uint64_t host_cells = 0;
};

/// The KV cache (llama-kv-cache.cpp, llama-kv-cache-iswa.cpp): n_ctx and its streams, the SWA
/// cells, each layer's K and V on its device: r.n_ctx*, r.kv_cells_swa, r.gpus[].kv, r.host.kv.
KvView kv_buffers(const spec::ModelSpec& m, const std::vector<LayerAttn>& la, const Settings& s,
                  const CacheTypes& types, const Placement& p, Result& r) {
  const std::uint64_t n_layer = m.num_layers;
  const std::uint64_t n_seq = s.parallel;
  r.n_ctx = pad(s.ctx_size, kCtxPad);
  if (s.kv_unified || n_seq == 1) {
    r.n_ctx_seq = r.n_ctx;
    r.n_stream = 1;
  } else {
    // llama-context.cpp throws "n_ctx_seq == 0" when the sequences leave a stream no cells.
    if (r.n_ctx / n_seq == 0)
      throw InputError("--parallel", fmt::format("{} sequences share {} cells: each gets none", n_seq, r.n_ctx),
                       fmt::format("give --ctx-size at least --parallel x 256, or fewer sequences"));
    r.n_ctx_seq = pad(r.n_ctx / n_seq, kCtxPad);
    r.n_ctx = checked_mul(r.n_ctx_seq, n_seq);
    r.n_stream = n_seq;
  }
  KvView v;
  v.any_swa = std::any_of(la.begin(), la.end(), [](const LayerAttn& a) { return a.swa; });
  // llama_context: n_batch = min(n_ctx, n_batch) with n_ctx as given (-c, before its padding to
  // 256), n_ubatch = min(n_batch, n_ubatch): -c 100 runs ubatches of 100 tokens.
  v.ub = std::min({s.ubatch_size, s.batch_size, s.ctx_size});
  if (v.any_swa) {
    const std::uint64_t want = checked_add(checked_mul(m.sliding_window, s.kv_unified ? n_seq : 1), v.ub);
    r.kv_cells_swa = s.swa_full ? r.n_ctx_seq : pad(std::min(r.n_ctx_seq, want), kCtxPad);
  }
  std::vector<std::uint64_t> gpu_kv(r.gpus.size(), 0);
  v.gpu_cells.assign(r.gpus.size(), 0);
  std::uint64_t host_kv = 0;
  // Without flash attention the V cache is transposed, and every layer's V rows are padded to the
  // widest layer's ([TAG_V_CACHE_VARIABLE] in llama-kv-cache.cpp: n_embd_v_gqa_max(), over all layers,
  // "padding V cache to ..."): gemma4's sliding layers then hold V rows of the full layers' width.
  std::uint64_t v_max = 0;
  for (const LayerAttn& a : la) v_max = std::max(v_max, a.v);
  for (std::uint64_t il = 0; il < n_layer; ++il) {
    const LayerAttn& a = la[static_cast<std::size_t>(il)];
    const std::uint64_t cells = a.swa ? r.kv_cells_swa : r.n_ctx_seq;
    const int cd = p.layer_dev[static_cast<std::size_t>(il)];
    // A layer without a cache of its own (gemma4's KV-shared) attends over another layer's cells.
    if (cd == kCpu) v.host_cells = std::max(v.host_cells, cells);
    else v.gpu_cells[static_cast<std::size_t>(cd)] = std::max(v.gpu_cells[static_cast<std::size_t>(cd)], cells);
    if (!a.has_kv) continue;
    ++(a.swa ? r.kv_layers_swa : r.kv_layers);
    const int d = s.kv_offload ? cd : kCpu;
    for (const auto& [t, n] : {std::pair{&types.k, a.k}, std::pair{&types.v, s.flash_attn ? a.v : v_max}}) {
      if (n == 0) continue;
      if (n % t->block_size != 0)
        throw InputError(t == &types.k ? "--cache-type-k" : "--cache-type-v",
                         fmt::format("rows of {} values do not fill {} blocks of {}", n, t->name, t->block_size),
                         "use --cache-type f16 or q8_0");
      GgufTensor kv;
      kv.type = t;
      kv.ne = {n, cells, r.n_stream};
      kv.bytes = checked_mul(checked_mul(row_size(*t, n), cells), r.n_stream);
      Bytes& size = a.swa ? r.kv_size_swa : r.kv_size;  // size_k_bytes() + size_v_bytes(): ggml_nbytes
      size = size + Bytes{kv.bytes};
      if (d == kCpu) {
        host_kv = checked_add(host_kv, pad(kv.bytes, kCpuAlignment));
      } else {
        gpu_kv[static_cast<std::size_t>(d)] = checked_add(gpu_kv[static_cast<std::size_t>(d)], pad(cuda_alloc_size(kv), kCudaAlignment));
      }
    }
  }
  for (std::size_t d = 0; d < r.gpus.size(); ++d) r.gpus[d].kv = Bytes{gpu_kv[d]};
  r.host.kv = Bytes{host_kv};
  return v;
}

/// ggml-cuda's memory pool for one layer's attention without flash attention: the most its
/// temporaries hold at once (ggml_cuda_pool_vmm in ggml-cuda.cu is a stack: an op takes its
/// temporaries and gives them back; the pool keeps the physical memory it ever mapped). A prompt's
/// ubatch of more than 16 rows (mul_mat_f and the vector kernels take up to 16) runs KQ and KQV
/// through ggml_cuda_mul_mat_batched_cublas_impl. KQ (K f16, q f32): q converted to f16
/// [head_k, ub, n_head], the f32 scores written directly (llama-graph.cpp sets GGML_PREC_F32 on
/// kq). KQV (V f16, the soft-maxed scores f32): the scores converted to f16 [cells, ub, n_head]
/// and the product written in f16 [head_v, ub, n_head] (GGML_PREC_DEFAULT) before its f32 copy.
/// Each allocation is 128-byte aligned; cublasGemmBatchedEx's pointer arrays (two per matrix of
/// the batch for the sources, one for the products) come after. A bf16 cache takes the same
/// sizes in bf16 (Ampere and later); an f32 cache converts nothing. A quantized K runs KQ through
/// MMQ (its q8_1 copy of q is below KQV's scores from 256 cells on): KQV's is counted.
/// The pool grows as the ops run, so this is what a full cache's attention maps: cells is every
/// cell of a stream (llama-kv-cache.cpp get_n_kv at a full cache). llama.cpp#5993 (a server out of
/// memory at a long context): its maintainer names this buffer, kq's f16 copy, as the pool's
/// largest once the context is long.
std::uint64_t attention_pool_bytes(const LayerAttn& a, std::uint64_t n_head, std::uint64_t cells, std::uint64_t ub,
                                   std::uint64_t n_stream, const CacheTypes& types) {
  const auto a128 = [](std::uint64_t b) { return pad(b, kPoolAlignment); };
  const std::uint64_t matrices = checked_mul(n_head, n_stream);
  const std::uint64_t pointers = checked_add(a128(checked_mul(matrices, 16)), a128(checked_mul(matrices, 8)));
  const std::uint64_t rows = checked_mul(ub, n_head);  // every stream's tokens, each head
  std::uint64_t kq = 0, kqv = 0;
  if (half_type(types.k)) kq = checked_add(a128(checked_mul(checked_mul(a.head_k, rows), 2)), pointers);
  else if (types.k.id == kGgmlF32) kq = pointers;
  if (half_type(types.v))
    kqv = checked_add(checked_add(a128(checked_mul(checked_mul(cells, rows), 2)), a128(checked_mul(checked_mul(a.head_v, rows), 2))),
                      pointers);
  else if (types.v.id == kGgmlF32) kqv = pointers;
  return std::max(kq, kqv);
}

/// The compute buffers (llama-context.cpp graph_reserve, ggml-backend's scheduler): each GPU's
/// and the host's, r.gpus[].compute and r.host.compute; true with pipeline parallelism.
bool compute_buffers(const spec::ModelSpec& m, const Hparams& h, const std::vector<LayerAttn>& la, const CacheTypes& types, const Settings& s,
                     const Settings& eff, const Placement& p, const HostWeight& host, const KvView& kv, Result& r) {
  const std::uint64_t n_layer = m.num_layers;
  const std::uint64_t n_gpu = r.gpus.size();
  const std::uint64_t ub = kv.ub;
  // Pipeline parallelism (llama-context.cpp: several devices, every layer and the output
  // offloaded, layer split, KV offloaded, no tensor overrides such as --n-cpu-moe's): the
  // scheduler is built with n_copies = GGML_SCHED_MAX_COPIES, and ggml-backend.c's
  // ggml_backend_sched_split_graph adds every copy of every split input as a leaf of the graph
  // ("add input copies as leafs so that they are allocated first"), so all n_copies stay
  // allocated through the graph beside the split's own tensors: the hidden state coming in
  // [n_embd, ub] f32, the positions and output ids (i32), and the KQ mask (f32, its current copy
  // already in the graph's peak). Command-R 35B over two GPUs (llama.cpp PR #6122's log, 12
  // layers on CUDA0, n_ctx 4096, ub 512, no flash attention): 584 MiB graph + 4 x 16 MiB hidden
  // + 3 x 8 MiB mask + 4 x 4 KiB = 672.01 MiB, as logged.
  const bool pipeline_parallel = n_gpu > 1 && s.split_mode == SplitMode::layer && s.kv_offload &&
                                 r.host.layers == 0 && r.output_on_gpu && s.n_cpu_moe == 0 &&
                                 s.override_tensor.empty();
  // A decoder (dense or MoE, one cache or interleaved SWA) with attention on its layers' GPUs:
  // each GPU's buffer is ggml-alloc's high-water mark over its part of the graph
  // (simulated_compute), the scheduler's n_copies of its split inputs and the copies of expert
  // weights left in host memory included; MLA's absorbed attention too. A deepseek2 file without
  // MLA and row splits keep the estimate of the largest set of tensors alive at once
  // (compute_bytes).
  const bool simulate = (m.kv_lora_rank == 0 || h.mla) && s.kv_offload && eff.split_mode != SplitMode::row;
  std::vector<bool> swa(la.size());
  for (std::size_t il = 0; il < la.size(); ++il) swa[il] = la[il].swa;
  // Partial offload (-ngl below the layer count): the first layers' weights and cache stay in host
  // memory, but ggml's op offload has the main GPU run their ops of a batch of >= 32 rows
  // (ggml-cuda's offload_op, GGML_OP_OFFLOAD_MIN_BATCH; ggml-backend.cpp's scheduler assigns an op
  // whose weight is in host memory to the first backend that offloads it, and the ops between follow):
  // each weight is copied into the main GPU's compute buffer at the split its op starts, and each
  // layer's attention copies in the host cache's K and V views (their whole cells, every stream) while
  // the K and V stores run on the host. Llama 3.1 8B's shapes Q8_0 on an H100 without flash attention,
  // -ngl 20 and -ngl 8: 593.00 MiB logged, 564.01 before (the GPU's own layers only); 1153.00 at 16384
  // cells; 313.00 at ub 256. Simulated for dense and MoE decoders (a MoE layer's router, routed
  // experts and shared expert copied in one weight at a time, as --n-cpu-moe's); MLA layers keep
  // the largest weight's copy (compute_bytes' offload_weight).
  // The attention rotation (Settings::attn_rot; llama-kv-cache.cpp: attn_rot_k where the K cache is
  // quantized and every layer's K head is one width, a multiple of 64; the matrix the largest power
  // of two dividing it; V's 64 x 64). Llama 3.1 8B's shapes with q8_0 K and V and flash attention on
  // the CPU: 274.50 MiB, 8 MiB above f16's; with q8_0 K alone, no flash attention, 564.07 (8 MiB
  // below f16's 572.01); the host's inputs 64 and 16 KiB more.
  std::uint64_t rot_k = 0, rot_v = 0;
  {
    bool uniform = true;
    for (const spec::LayerGroup& gr : m.layers)
      if (gr.head_dim != 0 && gr.head_dim != m.head_dim) uniform = false;
    const std::uint64_t hk = h.head_dim, hv = h.n_head_kv == 0 ? h.head_dim : h.n_embd_v / h.n_head_kv;
    if (s.attn_rot && uniform && !h.mla && m.kv_lora_rank == 0) {
      if (types.k.block_size > 1 && hk > 0 && hk % 64 == 0) {
        std::uint64_t nrot = 64;
        while (hk % (nrot * 2) == 0) nrot *= 2;
        rot_k = checked_mul(checked_mul(nrot, nrot), 4);
      }
      if (types.v.block_size > 1 && hv > 0 && hv % 64 == 0) rot_v = 64 * 64 * 4;
    }
  }
  std::uint64_t host_prefix = 0;
  while (host_prefix < n_layer && p.layer_dev[static_cast<std::size_t>(host_prefix)] == kCpu) ++host_prefix;
  std::vector<HostLayer> host_layers;  // host.layers with their K/V views, where they are simulated
  // ggml's op offload needs a GPU backend in the scheduler, not a GPU layer: llama.cpp starts every
  // GPU's backend whatever -ngl says (llama_prepare_model_devices), so with -ngl 0 or 1 the main GPU
  // still runs the host's layers. Llama 3.1 8B's shapes on an H100 without flash attention: -ngl 1
  // (the output layer alone on the GPU) 593.00 MiB, as -ngl 20 or 8 (258.50 before); -ngl 0, a Q4_K
  // file with flash attention: 669.48 (0 before), the host's 24.01, its inputs (266.50 before).
  const bool offload = s.op_offload && !s.no_gpu && n_gpu > 0;
  bool offload_layers = offload && ub >= 32 && host_prefix > 0 && host_prefix == r.host.layers && !h.mla;
  if (offload_layers) {
    host_layers = host.layers;
    for (std::uint64_t il = 0; il < host_prefix; ++il) {
      const LayerAttn& a = la[static_cast<std::size_t>(il)];
      HostLayer& l = host_layers[static_cast<std::size_t>(il)];
      const std::uint64_t cells = checked_mul(a.swa ? r.kv_cells_swa : r.n_ctx_seq, r.n_stream);
      if (!a.has_kv) offload_layers = false;  // a KV-shared layer attends over another's cache: not simulated
      l.k_view = checked_mul(row_size(types.k, a.k), cells);
      l.v_view = checked_mul(row_size(types.v, a.v), cells);
      // attn_sinks: the file's tensor, or (a layout from a config) one f32 logit a head, padded
      if (h.sinks && l.sinks == 0) l.sinks = pad(checked_mul(h.n_head, 4), 128);
    }
  }
  bool attention_before = r.host.layers > 0 && !offload_layers;  // the host runs the first layers (partial offload)
  // Experts of GPU layers left in host memory with no op offload: the CPU runs their matmuls in its
  // own compute buffer, whichever way the GPUs' buffers are estimated; not laid out, so refused.
  if (!s.op_offload && std::any_of(host.experts.begin(), host.experts.end(), [](const HostExperts& e) { return e.any(); }))
    throw InputError("--no-op-offload",
                     "with experts in host memory (--n-cpu-moe, --override-tensor) and no op offload, the CPU runs "
                     "their matmuls in its own compute buffer, which vramfit does not lay out",
                     "drop --no-op-offload (llama.cpp's default offloads them), or keep the experts on the GPUs");
  // What every simulated part of the graph shares: the ubatch, the SWA cells, the build's graph.
  const auto graph_of = [&](std::uint64_t n_kv, std::uint64_t layers, bool output) {
    DeviceGraph dg;
    dg.ub = ub;
    dg.n_kv = n_kv;  // the cells one sequence's attention sees (per stream)
    dg.n_kv_swa = r.kv_cells_swa;
    dg.layers = layers;
    dg.output = output;
    dg.swa = &swa;
    dg.kv_idxs = s.set_rows;
    dg.flash_attn = s.flash_attn;
    dg.kq_mask = s.kq_mask;
    dg.glu_op = s.glu_op;
    dg.fused_qkv = s.fused_qkv;
    dg.rot_k = rot_k;
    dg.rot_v = rot_v;
    return dg;
  };
  for (std::size_t d = 0; d < r.gpus.size(); ++d) {
    ComputeShape c;
    c.ub = ub;
    c.n_kv = kv.gpu_cells[d];
    c.flash_attn = s.flash_attn;
    c.has_layers = r.gpus[d].layers > 0;
    c.has_output = p.layer_dev.back() == static_cast<int>(d);
    c.current_build = s.layer_rule == LayerRule::current;
    c.kq_mask = s.kq_mask;
    if (d == 0 && offload) {  // the main GPU runs the host's large matmuls
      // Where the host's layers are simulated (their weights copied one at a time, a MoE layer's
      // experts with their [n_ff_exp, n_expert_used, ub] products), the largest weight outside
      // them: a host layer's expert tensor taken as a dense matmul of all its rows put Qwen3-30B-A3B's
      // shapes at -ngl 30 with flash attention at 400.00 MiB, 312.00 logged.
      c.offload_weight = offload_layers ? host.outside_bytes : host.bytes;
      c.offload_rows = offload_layers ? host.outside_rows : host.rows;
      c.offload_output = offload_layers ? host.outside_output : host.output;
    }
    if (simulate) {
      // The cells its attention sees: its own layers', or the host's it runs (-ngl 0 or 1: none of its own).
      DeviceGraph dg = graph_of(std::max(kv.gpu_cells[d], d == 0 && offload_layers ? kv.host_cells : 0),
                                r.gpus[d].layers, c.has_output);
      dg.first_layer = n_layer;  // none of its own: the host's layers alone (-ngl 0 or 1)
      for (std::uint64_t il = 0; il < n_layer; ++il)
        if (p.layer_dev[static_cast<std::size_t>(il)] == static_cast<int>(d)) {
          dg.first_layer = il;
          break;
        }
      // Below 32 rows (GGML_OP_OFFLOAD_MIN_BATCH) ggml-cuda does not take the host experts' ops:
      // they run on the CPU, and no weight is copied here.
      dg.host = ub >= 32 && offload ? &host.experts : nullptr;
      if (d == 0 && offload_layers) {
        dg.host_layers = host_prefix;
        dg.host_layer = &host_layers;
      }
      // -ngl 0 (the host holds every layer and the output, the GPU runs them all): the output's tail
      // simulated here, its weight copied in. A Q4_K file of Llama 3.1 8B's shapes with flash
      // attention: 669.48 MiB logged, the weight's copy (410.98), the logits (250.50) and one
      // [n_embd, ub] f32 (693.48 before, from compute_bytes' four of an output left alone on the host).
      if (d == 0 && offload_layers && host_prefix == n_layer && r.gpus[d].layers == 0 && host.outside_output &&
          p.layer_dev.back() == kCpu) {
        dg.output = true;
        dg.output_copy = host.outside_bytes;
        c.offload_weight = c.offload_rows = 0;
        c.offload_output = false;
      }
      dg.last_layer = p.layer_dev[static_cast<std::size_t>(n_layer - 1)] == static_cast<int>(d);
      dg.casts_mask = !attention_before;
      dg.copies = pipeline_parallel ? kSchedMaxCopies : 1;
      const std::uint64_t graph = dg.layers > 0 || dg.output || dg.host_layers > 0 ? simulated_compute(h, dg) : 0;
      if (dg.layers > 0) attention_before = true;
      c.has_layers = c.has_output = false;  // what is left: the op offload of host weights
      r.gpus[d].compute = Bytes{std::max(graph, compute_bytes(h, c))};
      continue;
    }
    std::uint64_t bytes = compute_bytes(h, c);
    if (pipeline_parallel && (c.has_layers || c.has_output)) {
      const std::uint64_t small = checked_mul(ub, c.has_output ? 8 : 4);  // positions (+ output ids), i32
      const std::uint64_t each = checked_add(checked_mul(checked_mul(ub, h.n_embd), 4), small);
      bytes = checked_add(bytes, checked_mul(each, kSchedMaxCopies));
      if (c.has_layers) {
        bytes = checked_add(bytes, checked_mul(mask_input_bytes(c.n_kv, ub, s.kq_mask, s.flash_attn), kSchedMaxCopies - 1));
        if (kv.any_swa)  // the second mask of an interleaved-SWA model, all of its copies
          bytes = checked_add(bytes, checked_mul(mask_input_bytes(r.kv_cells_swa, ub, s.kq_mask, s.flash_attn),
                                                 kSchedMaxCopies));
      }
    }
    r.gpus[d].compute = Bytes{bytes};
  }
  // ggml-cuda's pool (attention_pool_bytes): without flash attention, each GPU's largest attention
  // at a full cache, the host's layers' on the main GPU where op offload runs them there; mapped in
  // the VMM granularity, 2 MiB (CU_MEM_ALLOC_GRANULARITY_RECOMMENDED). With flash attention the
  // temporaries (a quantized cache's f16 K and V) are in the compute buffer (ggml-cuda's
  // get_alloc_size for FLASH_ATTN_EXT); what every run's pool holds besides (MMQ's q8_1 copies of
  // the activations, a few MiB) is in the reserve. An MLA cache's attention is not laid out here.
  std::vector<std::uint64_t> pool(r.gpus.size(), 0);
  if (!s.flash_attn && s.kv_offload && !h.mla && m.kv_lora_rank == 0 && ub > 16) {
    for (std::uint64_t il = 0; il < n_layer; ++il) {
      int d = p.layer_dev[static_cast<std::size_t>(il)];
      if (d == kCpu && offload && ub >= 32) d = 0;
      if (d == kCpu) continue;
      const LayerAttn& a = la[static_cast<std::size_t>(il)];
      const std::uint64_t cells = a.swa ? r.kv_cells_swa : r.n_ctx_seq;
      std::uint64_t& g = pool[static_cast<std::size_t>(d)];
      g = std::max(g, attention_pool_bytes(a, h.n_head, cells, ub, r.n_stream, types));
    }
  }
  // An f16 or bf16 weight's matmul for a prompt's ubatch (more than 16 rows, else mul_mat_f) runs
  // through cuBLAS (ggml_cuda_op_mul_mat_cublas): the activations converted to f16 (bf16)
  // [ne[0], ub] and the product written in f16 (bf16) [ne[1], ub] before its f32 copy, both in
  // the pool. The widest such matrix of each GPU's layers; the host's on the main GPU under op
  // offload. The output layer is left out: it multiplies only the rows that give logits.
  if (ub > 16) {
    for (std::size_t d = 0; d < r.gpus.size(); ++d) {
      std::uint64_t w = host.half_width.size() > d ? host.half_width[d] : 0;
      if (d == 0 && offload && ub >= 32) w = std::max(w, host.host_half_width);
      if (w == 0) continue;
      // Each of the two is 128-byte aligned: bounded by the sum's bytes plus 256.
      pool[d] = std::max(pool[d], checked_add(pad(checked_mul(checked_mul(w, ub), 2), kPoolAlignment), kPoolAlignment));
    }
  }
  for (std::size_t d = 0; d < r.gpus.size(); ++d) {
    r.gpus[d].pool = Bytes{pad(pool[d], kVmmGranularity)};
    // The kernels (and cuBLAS where the pool shows it runs) of a GPU that runs part of the graph.
    if (r.gpus[d].compute.value() > 0 || r.gpus[d].model.value() > 0)
      r.gpus[d].runtime = s.gpu_kernels + (pool[d] > 0 ? s.gpu_cublas : Bytes{0});
  }
  // The host: the graph inputs (token ids, positions, output ids, one mask per cache kind)
  // and the token embeddings' get_rows, plus the graph of whatever runs on the CPU.
  {
    ComputeShape c;
    c.ub = ub;
    c.n_kv = kv.host_cells;
    c.flash_attn = s.flash_attn;
    c.has_layers = r.host.layers > 0;
    c.has_output = p.layer_dev.back() == kCpu;
    c.current_build = s.layer_rule == LayerRule::current;
    c.kq_mask = s.kq_mask;
    // ggml's op offload: with a GPU holding layers and a ubatch of >= 32 rows
    // (GGML_OP_OFFLOAD_MIN_BATCH), the GPU backend runs the host weights' matmuls, and the
    // scheduler's expand passes put the ops between them on that GPU too: the host's layers and
    // output stage run on the main GPU (their share is in its buffer, compute_bytes'
    // offload_weight), the host keeps the graph inputs. Qwen3-235B-A22B -ngl 93 (legacy: layer 0
    // and the output on the host), ub 512: the host compute buffer 16.01 MiB, the inputs alone.
    const bool offloaded_by_gpu = offload && ub >= 32;
    if (offloaded_by_gpu) c.has_layers = c.has_output = false;
    // The KQ masks, one per cache kind, and the token ids, positions and output ids (i32 each).
    // With several streams (--parallel without --kv-unified) the mask is [cells of one stream,
    // ub / n_stream, 1, n_stream]: a stream's cells by the ubatch, not the whole cache's. Llama 3.1
    // 8B's shapes, -np 4 -c 16384, ub 512 on an H100: 20.01 MiB with flash attention (the f16 mask
    // 4 MiB), 28.01 without (f32, 8 MiB); 32.01 and 52.01 here before.
    std::uint64_t graph_inputs =
        checked_add(checked_mul(ub, 12), mask_input_bytes(r.n_ctx_seq, ub, s.kq_mask, s.flash_attn));
    if (kv.any_swa)
      graph_inputs =
          checked_add(graph_inputs, mask_input_bytes(r.kv_cells_swa, ub, s.kq_mask, s.flash_attn));
    // The attention rotation's matrices, one pair per cache kind.
    graph_inputs = checked_add(graph_inputs, checked_mul(rot_k + rot_v, kv.any_swa ? 2 : 1));
    // The token embeddings' get_rows [n_embd, ub] f32; with the host's layers run on a GPU by op
    // offload, their K and V stores stay on the host, whose split copies K and V [n_embd_k|v, ub]
    // f32 back in, both at once, into the space the embeddings left. Gemma 3 12B's shapes with 18
    // blocks on the host, flash attention (n_embd 3840, K and V 2048 wide): 49.02 MiB logged, 0.5
    // above the embeddings' 7.5 MiB (48.52 before).
    std::uint64_t embeddings = checked_mul(checked_mul(ub, h.n_embd), 4);
    if (offloaded_by_gpu && r.host.layers > 0 && s.kv_offload)
      for (std::uint64_t il = 0; il < n_layer; ++il)
        if (p.layer_dev[static_cast<std::size_t>(il)] == kCpu && la[static_cast<std::size_t>(il)].has_kv)
          embeddings = std::max(embeddings, checked_mul(checked_mul(ub, la[static_cast<std::size_t>(il)].k + la[static_cast<std::size_t>(il)].v), 4));
    std::uint64_t inputs = checked_add(embeddings, graph_inputs);
    // The embeddings input made beside the token ids (Settings::embd_input).
    if (s.embd_input) inputs = checked_add(inputs, checked_mul(checked_mul(ub, h.n_embd), 4));
    // ggml_set_rows' cell indices (Settings::set_rows): K's and V's per cache.
    if (s.set_rows)
      inputs = checked_add(inputs, checked_mul(checked_add(checked_mul(ub, 8), v_idxs_bytes(h, ub, s.flash_attn)),
                                               kv.any_swa ? 2 : 1));
    // With pipeline parallelism the host's graph inputs are kept n_copies times as well.
    if (pipeline_parallel) inputs = checked_add(inputs, checked_mul(graph_inputs, kSchedMaxCopies - 1));
    r.host.compute = Bytes{checked_add(inputs, compute_bytes(h, c))};
    // The host running layers itself (no GPU layer, --no-op-offload, or a ubatch under 32): its
    // graph simulated as a GPU's is, its inputs leaves allocated first. Llama 3.1 8B's shapes on the
    // CPU, 8192 cells: 572.01 MiB without flash attention, 266.50 with (596.01 and 306.51 before,
    // from the largest set of tensors alive at once).
    if (simulate && c.has_layers && host_prefix == r.host.layers) {
      DeviceGraph dg = graph_of(kv.host_cells, r.host.layers, c.has_output);
      dg.last_layer = p.layer_dev.back() == kCpu;
      dg.host_graph = true;
      dg.embd_input = s.embd_input;
      r.host.compute = Bytes{simulated_compute(h, dg)};
    }
  }
  return pipeline_parallel;
}

}  // namespace

Result estimate(const spec::ModelSpec& m, const std::vector<GgufTensor>& tensors, const Settings& settings) {
  // No GPU backend (--device none): no layer can go to a GPU, whatever -ngl asks.
  Settings s = settings;
  if (s.no_gpu) s.gpu_layers = 0;
  const std::uint64_t n_gpu = std::max<std::size_t>(1, s.gpu_memory.size());
  check_settings(m, s, n_gpu);
  const ArchRow& row = arch_row(m.model_type);
  // gemma4's layers of their own widths are laid out per layer (layer_attn); any other model whose
  // layers differ is refused.
  if (!row.per_layer) require_uniform_layers(m, "llama.cpp");
  if (m.kv_lora_rank > 0 && !row.mla && !row.heads_cache)
    throw InputError("--engine",
                     fmt::format("llama.cpp: model_type '{}' has latent attention (kv_lora_rank {}) outside llama.cpp's "
                                 "deepseek2 architecture (deepseek_v2, deepseek_v3, glm4_moe_lite) and its minicpm3; "
                                 "its cache is not laid out by vramfit",
                                 m.model_type, m.kv_lora_rank),
                     "estimate it with the default engine (--engine transformers)");
  // minicpm3's converter writes no value_length: llama.cpp's V head is n_embd / n_head, and a
  // checkpoint whose kv_b_proj has another V width fails to load (wkv_b's shape).
  if (row.heads_cache && m.num_heads != 0 && m.v_head_dim != m.hidden_size / m.num_heads)
    throw InputError("--engine",
                     fmt::format("llama.cpp: model_type '{}' with v_head_dim {}: llama.cpp takes the V head as "
                                 "hidden_size / num_attention_heads = {} and cannot load its attn_kv_b",
                                 m.model_type, m.v_head_dim, m.hidden_size / m.num_heads),
                     "estimate it with the default engine (--engine transformers)");
  const CacheTypes types = cache_types(s);

  const bool mla = absorbed_mla(m, tensors);
  const Hparams h = hparams_of(m, mla);
  const std::vector<LayerAttn> la = layer_attn(m, h);
  const std::uint64_t n_layer = m.num_layers;
  // llama_init_from_model: with flash attention not disabled (on, or auto before it is resolved),
  // a quantized cache's block must divide every layer's head ("K cache type q8_0 with block size
  // 32 does not divide n_embd_head_k=80").
  if (s.flash_attn || s.flash_attn_auto)
    for (const auto& [t, name, head] : {std::tuple{&types.k, "K", &LayerAttn::head_k},
                                        std::tuple{&types.v, "V", &LayerAttn::head_v}})
      for (const LayerAttn& l : la)
        if (t->block_size > 1 && l.has_kv && l.*head % t->block_size != 0)
          throw InputError(name[0] == 'K' ? "--cache-type-k" : "--cache-type-v",
                           fmt::format("{} cache type {} has blocks of {} values, which do not divide the {} head of "
                                       "{}: llama.cpp refuses it with flash attention {}",
                                       name, t->name, t->block_size, name, l.*head, s.flash_attn_auto ? "auto" : "on"),
                           "use f16 for that cache, or --flash-attn off (then a quantized V cache is refused too)");
  Result r;
  r.offloadable = n_layer + 1;

  Settings eff = s;
  if (n_gpu == 1 && s.split_mode == SplitMode::row) eff.split_mode = SplitMode::none;
  const std::vector<double> fs = split_points(s, n_gpu);
  const Placement p = place_layers(n_layer, eff, fs);
  r.offloaded = p.offloaded;
  r.output_on_gpu = p.layer_dev.back() != kCpu;
  r.output_gpu = p.layer_dev.back();

  r.gpus.resize(static_cast<std::size_t>(n_gpu));
  for (std::size_t i = 0; i < r.gpus.size(); ++i) r.gpus[i].name = fmt::format("CUDA{}", i);
  r.host.name = "CPU";
  for (std::uint64_t il = 0; il < n_layer; ++il) {
    const int d = p.layer_dev[static_cast<std::size_t>(il)];
    if (d == kCpu) ++r.host.layers;
    else ++r.gpus[static_cast<std::size_t>(d)].layers;
  }

  // The layers that create rope_freqs (TENSOR_DUPLICATED): gemma4's full-attention layers only
  // (their proportional rope), every layer elsewhere.
  std::vector<bool> rope_layer(static_cast<std::size_t>(n_layer), true);
  if (row.per_layer)
    for (std::size_t il = 0; il < rope_layer.size(); ++il) rope_layer[il] = !la[il].swa;
  const HostWeight host = model_buffers(tensors, s, eff, p, fs, rope_layer, r);
  const KvView kv = kv_buffers(m, la, s, types, p, r);
  const bool pipeline_parallel = compute_buffers(m, h, la, types, s, eff, p, host, kv, r);

  const std::uint64_t n_seq = s.parallel;
  // llama_context::output_reserve: logits for n_seq_max outputs, in host memory.
  r.output_buffer = Bytes{checked_mul(checked_mul(h.n_vocab, 4), n_seq)};
  // mtmd's clip model: one buffer of the projector's tensors on the first GPU (its backend is
  // ggml_backend_init_by_type(GPU), device 0), or the host without a GPU.
  if (s.mmproj.value() > 0) {
    if (r.gpus.empty()) r.host.mmproj = s.mmproj;
    else r.gpus.front().mmproj = s.mmproj;
  }
  r.host_bytes = r.host.total() + r.output_buffer;

  if (pipeline_parallel)
    r.notes.push_back(fmt::format(
        "pipeline parallelism (several GPUs, every layer offloaded): each compute buffer holds the scheduler's {} "
        "copies of its inputs (the hidden state coming in, the KQ mask, the positions)",
        kSchedMaxCopies));
  if (s.mmap)
    r.notes.push_back(fmt::format(
        "the CPU model buffer is the memory-mapped file range ({} MiB): its pages sit in the page cache and "
        "can be evicted, so the RAM it needs is soft; --no-mmap reads it into RAM",
        r.host.model.value() / (1024 * 1024)));
  // ggml-cpu's repack buffer (CPU_REPACK) is one of the CPU's extra buffer types, which
  // make_cpu_buft_list (llama-model.cpp) lists after the first GPU's host buffer type (CUDA_Host):
  // with a GPU in the process the host's weights take CUDA_Host, which llama-model-loader.cpp
  // replaces with the CPU's own buffer type under mmap, and none is repacked. A CPU-only build (or
  // --device none, or --no-host) reaches the extra types: model_buffers counts them then.
  if (s.no_gpu && r.host.repack.value() > 0)
    r.notes.push_back(fmt::format(
        "with no GPU backend (--device none, or a CPU-only build) llama.cpp repacks {:.2f} MiB of the host's "
        "Q4_0/Q4_K/IQ4_NL/MXFP4 matrices into a CPU_REPACK buffer, as an x86 CPU with AVX2 does: resident RAM, in "
        "the host figure beside the mapped range of the rest ({}an ARM CPU repacks other types, Q8_0 among them)",
        static_cast<double>(r.host.repack.value()) / (1024.0 * 1024.0),
        host.repackable_avx512 == 0 ? std::string()
                                    : fmt::format("with AVX-512 {:.2f} MiB of Q2_K matrices too, not counted; ",
                                                  static_cast<double>(host.repackable_avx512) / (1024.0 * 1024.0))));
  else if (!s.no_gpu && (host.repackable > 0 || host.repackable_avx512 > 0))
    r.notes.push_back(fmt::format(
        "a CPU-only run (--device none, or a build without a GPU backend) would repack {:.2f} MiB of the host's "
        "Q4_0/Q4_K/IQ4_NL/MXFP4 matrices into a CPU_REPACK buffer (an x86 CPU with AVX2); with a GPU, as here, the "
        "host's weights stay in the mapped file (or CUDA_Host with --no-mmap) and none is repacked",
        static_cast<double>(host.repackable) / (1024.0 * 1024.0)));
  return r;
}

FitCtx fit_ctx(const spec::ModelSpec& m, const std::vector<GgufTensor>& tensors, Settings s, std::uint64_t n_ctx_train,
               Bytes margin, std::uint64_t n_ctx_min) {
  FitCtx f;
  f.n_ctx_train = n_ctx_train;
  f.n_ctx = n_ctx_train;
  s.ctx_size = n_ctx_train;
  const Result full = estimate(m, tensors, s);
  const std::size_t nd = full.gpus.size();
  if (s.gpu_memory.size() != nd || nd == 0) return f;
  // Signed sums, as llama.cpp keeps them (int64_t: deficits are negative surpluses).
  const auto sig = [](Bytes b) {
    if (b.value() > (std::uint64_t{1} << 58))
      throw InputError("--ctx-size", "the model's buffers at its trained context are past what --fit's arithmetic holds",
                       "give the context, e.g. --ctx-size 8192");
    return static_cast<std::int64_t>(b.value());
  };
  const auto used = [](const DeviceBuffers& d) { return d.model + d.kv + d.compute; };
  std::int64_t sum_free = 0, sum_used = 0, sum_model = 0, sum_margin = 0;
  bool all_keep = true;
  for (std::size_t i = 0; i < nd; ++i) {
    // The projector is loaded after the fit (mtmd): llama-server adds it to the first GPU's margin.
    const std::int64_t mar = sig(margin) + (i == 0 ? sig(s.mmproj) : 0);
    const std::int64_t free = sig(Bytes::saturating_sub(s.gpu_memory[i], s.gpu_reserve));
    const std::int64_t use = sig(used(full.gpus[i]));
    if (free - use < mar) all_keep = false;
    sum_free += free;
    sum_used += use;
    sum_model += sig(full.gpus[i].model);
    sum_margin += mar;
  }
  if (all_keep) return f;
  if (sum_free - sum_used - sum_margin >= 0) {
    f.uneven = true;
    return f;
  }
  std::int64_t target = sum_free - sum_margin;
  if (n_ctx_train <= n_ctx_min) {
    f.short_by = Bytes{static_cast<std::uint64_t>(sum_used - target)};
    return f;
  }
  if (nd > 1) {
    // Whole layers (a third of a MoE layer) go to a device: about half of one is wasted each.
    const std::uint64_t n_layer = full.offloadable - 1;
    const std::uint64_t ngl = std::max<std::uint64_t>(1, std::min(s.gpu_layers, n_layer));
    const std::int64_t per_layer = sum_model / static_cast<std::int64_t>(ngl);
    target -= static_cast<std::int64_t>(nd + 1) * per_layer / (m.moe.num_experts == 0 ? 2 : 6);
  }
  s.ctx_size = n_ctx_min;
  const Result low = estimate(m, tensors, s);
  std::int64_t used_min = 0;
  for (const DeviceBuffers& d : low.gpus) used_min += sig(used(d));
  if (target > used_min && sum_used > used_min) {
    // Linear between the two projections, rounded down to 256 for CUDA.
    __extension__ typedef __int128 i128;  // __extension__: no -Wpedantic warning
    std::uint64_t n = n_ctx_min + static_cast<std::uint64_t>(static_cast<i128>(n_ctx_train - n_ctx_min) *
                                                             (target - used_min) / (sum_used - used_min));
    n = std::max(n - n % 256, n_ctx_min);
    f.n_ctx = n;
    return f;
  }
  f.n_ctx = n_ctx_min;
  f.short_by = Bytes{static_cast<std::uint64_t>(std::max<std::int64_t>(0, used_min - target))};
  return f;
}

std::size_t binding_gpu(const Result& r, const Settings& s) {
  std::size_t best = 0;
  if (s.gpu_memory.size() != r.gpus.size()) return best;
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    const auto left = static_cast<std::int64_t>(s.gpu_memory[i].value()) -
                      static_cast<std::int64_t>((r.gpus[i].total() + s.gpu_reserve).value());
    if (left < least) {
      least = left;
      best = i;
    }
  }
  return best;
}

Breakdown breakdown_of(const Result& r, const Settings& s) {
  const std::size_t i = binding_gpu(r, s);
  const DeviceBuffers& g = r.gpus.at(i);
  Breakdown b;
  b.components.push_back({ComponentId::weights, g.model,
                          fmt::format("{} model buffer: {} of {} layers' weights", g.name, g.layers, r.offloadable - 1) +
                              (r.output_gpu == static_cast<int>(i) ? " and the output layer" : ""),
                          true});
  if (g.mmproj.value() > 0)
    b.components.push_back({ComponentId::mmproj, g.mmproj, fmt::format("{} multimodal projector (--mmproj, mtmd's clip buffer)", g.name),
                            true});
  b.components.push_back({ComponentId::kv_cache, g.kv, fmt::format("{} KV buffer: {} cells", g.name, r.n_ctx), true});
  b.components.push_back({ComponentId::compute_buffer, g.compute, fmt::format("{} compute buffer (graph allocator)", g.name), true});
  if (g.runtime.value() > 0)
    b.components.push_back({ComponentId::cublas_workspace, g.runtime,
                            fmt::format("{} llama.cpp's kernels and MMQ's pool{} beyond the bare CUDA context (measured "
                                        "on an H100)",
                                        g.name, g.runtime > s.gpu_kernels ? ", cuBLAS's handle and workspace" : ""),
                            true});
  if (g.pool.value() > 0)
    b.components.push_back({ComponentId::temporaries, g.pool,
                            fmt::format("{} ggml-cuda pool: cuBLAS's f16 temporaries (the attention scores without "
                                        "flash attention at a full cache, an f16 file's activations), outside the "
                                        "logged buffers",
                                        g.name),
                            true});
  b.components.push_back({ComponentId::cuda_context, s.gpu_reserve, "CUDA context, cuBLAS and kernels outside the buffers", false});
  b.peak_allocated = g.total();
  b.cuda_context = s.gpu_reserve;
  b.device_total = b.peak_allocated + s.gpu_reserve;
  b.phases = {{PhaseId::load, g.model + g.mmproj}, {PhaseId::decode, g.total()}};
  b.peak_phase = PhaseId::decode;
  for (std::size_t k = 0; k < r.gpus.size(); ++k)
    if (k != i)
      b.notes.push_back(fmt::format("{}: model {} + KV {} + compute {} bytes", r.gpus[k].name,
                                    r.gpus[k].model.value(), r.gpus[k].kv.value(), r.gpus[k].compute.value()));
  b.notes.push_back(fmt::format("host memory: {} bytes (model {}, KV {}, compute {}, output {}{})", r.host_bytes.value(),
                                r.host.model.value(), r.host.kv.value(), r.host.compute.value(),
                                r.output_buffer.value(),
                                r.host.repack.value() > 0 ? fmt::format(", CPU_REPACK {}", r.host.repack.value())
                                                          : std::string()));
  b.notes.insert(b.notes.end(), r.notes.begin(), r.notes.end());
  return b;
}

}  // namespace vramfit::engine::llamacpp
