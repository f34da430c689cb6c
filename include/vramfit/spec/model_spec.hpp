#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramfit/core/dtype.hpp"
#include "vramfit/spec/quant.hpp"
#include "vramfit/spec/vision.hpp"

namespace vramfit::spec {

/// One linear (or GPT-2 Conv1D) module of a decoder layer, named as in Hugging Face
/// (`q_proj`, `c_attn`, `gate_up_proj`, ...) so LoRA targets can match it.
/// What a linear layer reads and feeds, set by the builder that adds it: the engine decides
/// from the role (never from the module's name) which activation a layer saves for backward.
enum class Role : std::uint8_t {
  other,       ///< not in a decoder layer's main path (vision towers, projectors)
  attn_in,     ///< reads the attention norm's output: q/k/v projections, fused qkv, MLA's q_a/kv_a
  attn_inner,  ///< inside attention, reading another projection's output: MLA's q_b_proj, kv_b_proj
  attn_out,    ///< reads the attention's output: o_proj, dense, out_proj, GPT-2's first c_proj
  mlp_in,      ///< reads the MLP norm's output: gate/up projections, c_fc, fc1 (experts included)
  mlp_out,     ///< reads the activation's output: down_proj, fc2, GPT-2's second c_proj
  router,      ///< a MoE router or gate reading the MLP norm's output (gate, router, shared_expert_gate)
};

struct Linear {
  std::string name;                 ///< module name as Hugging Face spells it
  Role role = Role::other;
  std::uint64_t in_features = 0;
  std::uint64_t out_features = 0;
  bool bias = false;
  std::uint64_t copies = 1;         ///< >1 for MoE experts: one per expert
  /// Part of a routed expert (runs on top_k of tokens). transformers 5 stores routed experts
  /// as fused 3-D parameters (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`) rather
  /// than nn.Linear modules; the parameter counts are the same.
  bool expert = false;
  bool shared_expert = false;       ///< part of an always-on shared expert

  [[nodiscard]] std::uint64_t params() const;  ///< (in*out + bias) * copies, checked
};

/// One rotary scaling of a config (`rope_scaling`, or transformers 5's `rope_parameters`, which
/// may hold one per layer type), as written: serving engines derive the longest context from it
/// (vLLM's _get_and_verify_max_len).
struct RopeScaling {
  std::string type;                          ///< `rope_type` (or the legacy `type`): yarn, linear, dynamic, llama3, longrope, ...
  std::optional<double> factor;              ///< `factor`; absent for "default"
  std::uint64_t original_max_positions = 0;  ///< its `original_max_position_embeddings` (yarn), 0 when absent
};

/// Layer-norm flavour.
enum class Norm { rms, layer };

/// MLP activation, as far as memory is concerned (what autograd saves differs).
/// relu2: ReLUSquaredActivation (relu, then torch.square). xielu: XIELUActivation's Python path
/// (transformers 5.17 without the `xielu` CUDA package), a chain of elementwise ops.
enum class Activation { silu, gelu, gelu_tanh_python, gelu_pytorch_tanh, relu, relu2, xielu };

/// Mixture-of-experts shape of the sparse layers.
struct MoE {
  std::uint64_t num_experts = 0;          ///< routed experts; 0 = dense model
  std::uint64_t experts_per_token = 0;    ///< top-k
  std::uint64_t expert_intermediate = 0;  ///< intermediate size of one routed expert
  std::uint64_t shared_intermediate = 0;  ///< intermediate size of the shared expert(s), 0 = none
  bool shared_expert_gate = false;        ///< qwen2_moe: sigmoid gate on the shared expert
};

/// A run of identical decoder layers.
struct LayerGroup {
  std::uint64_t count = 0;
  bool moe = false;                       ///< uses the MoE MLP
  std::vector<Linear> linears;            ///< in forward order
  std::uint64_t norm_params = 0;          ///< weights (+ biases) of the layer's norms
  std::uint64_t other_params = 0;         ///< anything else (router weights are linears)
  // --- session 10 (arch3): layers whose attention differs from the model's (gemma4_text) ---
  /// This group's attention head_dim and key/value heads when they differ from the model's
  /// (Gemma4TextAttention: full-attention layers of global_head_dim, num_global_key_value_heads);
  /// 0: ModelSpec::head_dim / num_kv_heads.
  std::uint64_t head_dim = 0;
  std::uint64_t kv_heads = 0;
  /// The layer caches nothing: it attends over another layer's keys and values (Gemma4's
  /// num_kv_shared_layers, shared_kv_states).
  bool kv_shared = false;
  /// This group's dense MLP width when it differs from ModelSpec::intermediate_size (Gemma4TextMLP's
  /// double-wide MLP on KV-shared layers); 0: the model's.
  std::uint64_t intermediate = 0;
  /// The layer's token mixer is linear attention (a Gated DeltaNet: ModelSpec::linear_attention),
  /// not attention: it caches states, not keys and values.
  bool linear_attention = false;
};

/// The linear-attention layers of a hybrid model (qwen3_next's Qwen3NextGatedDeltaNet), from
/// the config's linear_* keys; `layers` 0: every layer is attention. The engine sizes their
/// conv and recurrent states and their chunked forward from these (src/engine/state_cache.cpp).
struct LinearAttention {
  std::uint64_t layers = 0;          ///< decoder layers that are linear attention
  std::uint64_t key_heads = 0;       ///< linear_num_key_heads
  std::uint64_t value_heads = 0;     ///< linear_num_value_heads (q and k are repeated to these)
  std::uint64_t key_head_dim = 0;    ///< linear_key_head_dim
  std::uint64_t value_head_dim = 0;  ///< linear_value_head_dim
  std::uint64_t conv_kernel = 0;     ///< linear_conv_kernel_dim
  /// Channels of the depthwise causal conv: q, k and v (2 key_heads x key_head_dim + value_heads x value_head_dim).
  [[nodiscard]] std::uint64_t conv_dim() const noexcept {
    return 2 * key_heads * key_head_dim + value_heads * value_head_dim;
  }
};

/// Everything the engine needs to know about a model: its shapes, derived from a config,
/// a preset or a bare parameter count. Parameter counts are exact for configs.
struct ModelSpec {
  std::string name;          ///< preset id, config path, or "--params 7e9"
  std::string source;        ///< "preset", "config", "params"
  std::string model_type;    ///< the config's model_type ("llama", "gpt2", ...)
  /// The builder used: llama (llama, mistral, mixtral, qwen2*, qwen3*, olmoe), phi3, gemma
  /// (gemma, gemma2, gemma3_text), gpt2, gpt_neox, deepseek (v2, v3), phi, starcoder2, or
  /// generic (an unknown model_type, laid out like llama).
  std::string family;

  std::uint64_t hidden_size = 0;
  std::uint64_t num_layers = 0;
  std::uint64_t num_heads = 0;
  std::uint64_t num_kv_heads = 0;
  std::uint64_t head_dim = 0;
  std::uint64_t intermediate_size = 0;    ///< dense MLP width (0 when every layer is MoE)
  std::uint64_t vocab_size = 0;
  std::uint64_t max_positions = 0;
  /// The config's rotary scalings (empty: `rope_scaling` null or absent), its top-level
  /// `original_max_position_embeddings` (Phi-3's longrope; 0 absent) and `model_max_length`
  /// (Command-R; 0 absent): what a serving engine's longest context is derived from.
  std::vector<RopeScaling> rope_scaling;
  std::uint64_t original_max_positions = 0;
  std::uint64_t model_max_length = 0;
  /// The rotated share of a head (config.json's `partial_rotary_factor`, gpt_neox's `rotary_pct`,
  /// or the model type's default; 1 = the whole head): a serving engine's rotary width.
  double partial_rotary_factor = 1.0;
  /// The dtype the checkpoint declares (config.json's `dtype`, or `torch_dtype` before transformers
  /// 5), when a float type vramfit models: what from_pretrained() loads without a dtype argument.
  std::optional<DType> stored_dtype;
  bool tied_embeddings = false;
  bool gated_mlp = true;                  ///< SwiGLU-style gate*up
  bool learned_positions = false;         ///< GPT-2 style absolute position table
  bool qk_norm = false;                   ///< per-head norms on q and k (qwen3, olmoe)
  bool parallel_residual = false;         ///< gpt_neox, phi-2
  Norm norm = Norm::rms;
  Activation activation = Activation::silu;
  MoE moe;

  /// Multi-head latent attention (deepseek_v2/v3, minicpm3, ...): the projections' ranks and head
  /// widths. What the KV cache holds (the latent, or per-head K and V) is mla_latent_cache's.
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t q_lora_rank = 0;          ///< 0 when q_lora_rank is null (a plain q_proj)
  std::uint64_t qk_rope_head_dim = 0;
  std::uint64_t qk_nope_head_dim = 0;
  std::uint64_t v_head_dim = 0;

  std::uint64_t sliding_window = 0;       ///< 0 = full attention everywhere
  std::uint64_t sliding_layers = 0;       ///< how many layers use the window
  double final_logit_softcap = 0;         ///< gemma2: tanh soft-capping of the logits
  bool scaled_logits = false;             ///< logits * logit_scale (cohere): one more logits-sized tensor
  double attn_logit_softcap = 0;          ///< gemma2: soft-capping of attention scores
  bool scaled_embeddings = false;         ///< gemma: embeddings multiplied by sqrt(hidden)
  /// gemma's RMSNorm: `x.float()` normalised and scaled by `(1 + weight.float())` in fp32, cast
  /// back at the end (llama's casts before the weight multiply): the fp32 normalised tensor is saved.
  bool norm_fp32_scale = false;
  /// Dropout probabilities active in training (gpt2: attn_pdrop, resid_pdrop, embd_pdrop;
  /// llama-likes: attention_dropout). Dropout keeps a 1-byte mask per element for backward.
  double attention_dropout = 0;
  double hidden_dropout = 0;
  double embedding_dropout = 0;

  std::vector<LayerGroup> layers;         ///< decoder layers, in order of appearance
  /// Linear-attention layers (hybrid models); their number is not in the KV cache's layers.
  LinearAttention linear_attention;
  std::uint64_t embedding_params = 0;     ///< token (+ position) embeddings
  std::uint64_t lm_head_params = 0;       ///< 0 when tied
  std::uint64_t final_norm_params = 0;
  /// Non-parameter buffers: rotary inv_freq + original_inv_freq (fp32 whatever the model's
  /// dtype), gemma's embed_scale, deepseek_v3's e_score_correction_bias. The last two take
  /// the model's dtype in PyTorch; they are counted as fp32 here (a few KiB at most).
  std::uint64_t buffer_bytes = 0;

  /// Exact parameter total; equals count_params() for configs and presets. For
  /// source "params" it is the user's count exactly, and the parts only approximate it.
  /// After apply_checkpoint(), the checkpoint's count.
  std::uint64_t params = 0;
  /// Parameters stored in each dtype, when a safetensors header told us (else empty).
  std::optional<DType> checkpoint_dtype;
  bool exact_from_checkpoint = false;     ///< params came from safetensors headers
  /// The checkpoint's own quantization: config.json's quantization_config, or a GGUF file's
  /// type. The estimate uses it unless --dtype/--quant say otherwise.
  std::optional<Quantization> quantization;
  /// Exact bytes of the stored weights when the checkpoint is quantized and its tensors were
  /// read (GGUF tensor infos, or safetensors headers of a pre-quantized checkpoint): used as
  /// the weights' footprint instead of the format's formula.
  std::optional<std::uint64_t> packed_weight_bytes;

  /// The vision tower and projector of a vision-language config (its `vision_config`);
  /// their parameters are in `params` and count_params(), their buffers in buffer_bytes.
  std::optional<VisionSpec> vision;

  /// Assumptions made while building the spec (shown to the user).
  std::vector<std::string> notes;

  // --- session 10 (arch3) -------------------------------------------------------------------
  /// Keys + values one token adds to the cache over all full-attention (sliding) layers, when the
  /// layers' widths differ (gemma4_text: full layers of global_head_dim, KV-shared layers caching
  /// nothing); both 0: num_kv_heads x head_dim on every layer (the engine's rule).
  std::uint64_t kv_full_per_token = 0;
  std::uint64_t kv_sliding_per_token = 0;
  /// Multi-head latent attention whose cache keeps the compressed latent (kv_lora_rank +
  /// qk_rope_head_dim a token and layer, one "head") rather than the expanded per-head keys and
  /// values: the rows that set it in src/spec/architectures.cpp (transformers 5.17's DeepSeek-V2/V3,
  /// GLM-4 MoE Lite, MiniCPM3, Youtu: past_key_values.update(k_pass, k_rot) before expand_kv).
  bool mla_latent_cache = false;
};

/// Sums the parts of a spec into the parameter total (checked arithmetic).
std::uint64_t count_params(const ModelSpec& spec);

}  // namespace vramfit::spec
