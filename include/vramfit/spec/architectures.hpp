#pragma once
// The model types vramfit lays out, as data: one row per config.json `model_type`, with the
// transformers modeling file its layout follows. src/spec/config.cpp builds a ModelSpec from a
// row and the config's keys; tests/unit/spec/architectures_test.cpp checks that every row's
// default config (the config class's own defaults) counts what transformers builds.
//
// Adding a type: one row in src/spec/architectures.cpp, written with designated initializers
// and naming only the fields where the type differs from Llama (each field below says which
// transformers source decides it; read the type's configuration_<type>.py for the defaults and
// modeling_<type>.py for the modules). config.cpp has no per-type code: when a type's modules
// differ from every existing layout, add a Layout and its modules there. Then add the type to
// TYPES in tests/unit/spec/data/arch/count.py and its count to transformers_counts.json,
// measure it (tests/accuracy/arch), and name it in the README's list of model types.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "vramfit/spec/model_spec.hpp"

namespace vramfit::spec {

/// How a type's decoder layer is built: which modules, with which names, in which order
/// (src/spec/config.cpp lays each one out). Most types are `llama` with row fields saying how
/// they differ; a new layout is for modules no row can describe (fused q/k/v of another shape,
/// another MLP).
enum class Layout { llama, phi3, gemma, gpt2, gpt_neox, deepseek, phi, starcoder2, falcon, opt, gptj, bloom, mpt,
                    /// Gemma4TextModel: gemma's sandwich norms with per-layer inputs, full-attention layers of
                    /// their own head_dim, KV-shared layers and an optional MoE block beside the MLP
                    gemma4 };

/// A boolean config key with the config class's default; an empty key: always `dflt`.
struct ConfigFlag {
  std::string_view key = {};
  bool dflt = false;
  bool negated = false;  ///< the key says the opposite (MptConfig `no_bias`)
};

/// The layer norm a type uses, and its parameters.
enum class NormKind {
  rms,              ///< LlamaRMSNorm: weight
  rms_fp32,         ///< GemmaRMSNorm: weight, scaled by (1 + weight) in fp32
  layer,            ///< nn.LayerNorm: weight and bias
  layer_no_bias,    ///< CohereLayerNorm: mean-subtracting, weight only
  layer_no_params,  ///< OlmoLayerNorm: no weight, no bias
};

/// Norms on q and k inside attention, and their parameters.
enum class QkNorm {
  none,
  head_dim,        ///< q_norm, k_norm: RMSNorm(head_dim) shared by the heads (qwen3)
  per_head,        ///< one weight per head and dim, over q and k heads (CohereLayerNorm((heads, head_dim)))
  projection,      ///< q_norm(heads * head_dim), k_norm(kv_heads * head_dim) over the whole projections (olmo2)
  head_dim_layer,  ///< q_layernorm, k_layernorm: nn.LayerNorm(head_dim) with biases (phi's qk_layernorm)
  l2,              ///< Llama4TextL2Norm on q and k: no parameters (on the layers that rotate)
};

/// The config keys of the common dimensions.
enum class ConfigKeys {
  hf,    ///< hidden_size, num_hidden_layers, num_attention_heads, max_position_embeddings (and the
         ///< attribute_map aliases n_embd/d_model/n_embed, n_layer/num_layers/n_layers, n_head/n_heads,
         ///< n_positions/max_seq_len)
  gpt2,  ///< GPT2Config's attribute_map first: n_embd, n_layer, n_head, n_positions, n_inner
};

/// Where the dense MLP's width comes from.
enum class MlpWidth {
  intermediate_size,          ///< intermediate_size, required
  intermediate_size_if_dense, ///< intermediate_size, required only when some layer is dense (qwen2_moe)
  n_inner,                    ///< n_inner (or intermediate_size), 4 * hidden when null (GPT2Block)
  ffn_dim,                    ///< OPTConfig ffn_dim, required
  ffn_hidden_size,            ///< FalconConfig ffn_hidden_size, 4 * hidden when null
  four_hidden,                ///< 4 * hidden, no key (BloomMLP)
  expansion_ratio,            ///< MptConfig expansion_ratio (4) * d_model
  /// Llama4TextConfig intermediate_size_mlp, required when some layer is dense (the experts
  /// and the shared expert are intermediate_size wide)
  intermediate_size_mlp,
  intermediate_size_or_4h,  ///< intermediate_size, 4 * hidden when null or absent (ExaoneConfig)
  /// Cohere2MoeConfig prefix_dense_intermediate_size for the dense layers, intermediate_size when
  /// null (intermediate_size, required, is the experts' width)
  prefix_dense_intermediate_size,
};

/// How a MoE type's config gives its number of routed experts (none: a dense type).
enum class Experts {
  none,
  num_local_experts,     ///< num_local_experts, required and positive (MixtralConfig)
  num_experts,           ///< num_experts (or num_local_experts), required and positive (OlmoeConfig)
  num_experts_or_dense,  ///< num_experts (or num_local_experts, as Qwen3MoeConfig writes it); 0: dense
  n_routed_experts,      ///< n_routed_experts (absent: the row's default_experts; null or 0: dense; DeepseekV2Config)
  moe_num_experts,       ///< moe_num_experts, required and positive (Ernie4_5_MoeConfig)
};

/// The width of one routed expert.
enum class ExpertWidth {
  intermediate_size,      ///< the config's intermediate_size (mixtral)
  moe_intermediate_size,  ///< moe_intermediate_size, required when there are experts (qwen2_moe)
};

/// Which layers of a MoE type are sparse.
enum class SparseLayers {
  every,          ///< all of them (mixtral)
  step,           ///< Qwen2MoeDecoderLayer: not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
  first_k_dense,  ///< DeepseekV2DecoderLayer: i >= first_k_dense_replace and i % moe_layer_freq == 0
  /// Ernie4_5_MoeDecoderLayer: (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i
  /// <= moe_layer_end_index (Ernie4_5_MoeConfig: 1, -1 meaning the last layer, 1)
  start_end_interval,
  /// Llama4TextDecoderLayer: i in moe_layers; Llama4TextConfig's default: every
  /// interleave_moe_layer_step-th layer, range(step - 1, L, step)
  moe_layers,
  /// Glm4MoeLiteDecoderLayer: mlp_layer_types[i] == "sparse"; Glm4MoeLiteConfig's default
  /// ["dense"] + ["sparse"] * (L - 1) (it reads no first_k_dense_replace)
  mlp_layer_types,
  /// ExaoneMoeDecoderLayer: mlp_layer_types[i] == "sparse"; ExaoneMoeConfig's default: the first
  /// first_k_dense_replace (1) layers dense
  mlp_layer_types_or_first_k,
};

/// The shared expert beside the routed ones.
enum class SharedExpert {
  none,
  gated,     ///< Qwen2MoeSparseMoeBlock: shared_expert of shared_expert_intermediate_size, sigmoid shared_expert_gate
  n_shared,  ///< DeepseekV2MoE: one MLP of moe_intermediate_size * n_shared_experts (the row's n_shared_key)
  dense_width,  ///< HunYuanMoE: shared_mlp, an MLP of intermediate_size (as wide as the experts), no gate
  expert_width,  ///< Llama4TextMoe: shared_expert, an MLP (gate, up, down) as wide as an expert, no gate
  /// GraniteMoeSharedMoE: shared_mlp of shared_intermediate_size (0: none), input_linear (H ->
  /// 2 x width, gate and up fused) and output_linear, no gate
  shared_intermediate_size,
  /// LagunaSparseMoeBlock: shared_experts (gate, up, down) of shared_expert_intermediate_size, no gate
  shared_expert_intermediate_size,
};

/// How the MoE experts' linears are built.
enum class ExpertLinears {
  gate_up_down,         ///< router `gate`; per expert gate_proj, up_proj, down_proj, no biases
  fused_gate_up_biased, ///< GptOssTopKRouter `router` and GptOssExperts gate_up_proj, down_proj, all with biases
  fused_gate_up,        ///< Llama4Router `router` and Llama4TextExperts gate_up_proj [E, H, 2I], down_proj [E, I, H], no biases
};

/// Which layers attend through the sliding window when the config sets `sliding_window`.
enum class Sliding {
  none,            ///< never (the window key is ignored)
  every,           ///< all layers (MistralConfig)
  alternate,       ///< layer_types default "sliding_attention" when (i + 1) % 2 (Gemma2Config, GptOssConfig)
  pattern,         ///< sliding unless (i + 1) % sliding_window_pattern == 0 (`sliding_pattern` when absent)
  from_max_window, ///< with use_sliding_window only, from layer max_window_layers on (Qwen2Config)
  /// Llama4's chunked attention: the "chunked_attention" layers (layer_types; by default the
  /// layers that rotate: no_rope_layers, or all but every no_rope_layer_interval-th, 4) keep
  /// attention_chunk_size (8192) tokens of cache (get_layer_types_and_kwargs gives them a
  /// DynamicSlidingWindowLayer of that size) and attend through a chunked mask beyond it.
  chunked,
  /// Full attention on every sliding_window_pattern-th layer counting from the first (i % 4 == 0:
  /// GraniteSWAConfig's default layer_types), sliding elsewhere.
  pattern_first_full,
};

/// Position information.
enum class Positions {
  rotary,        ///< rotary embeddings: inv_freq buffers
  learned,       ///< a learned position table (GPT-2 wpe, OPT's offset table)
  alibi,         ///< ALiBi: no parameters, no buffers (bloom, mpt)
  sincos_table,  ///< GPTJAttention.embed_positions: an fp32 sin/cos table per layer, a buffer
};

/// Key/value heads, when they are not num_key_value_heads.
enum class KvHeads {
  num_key_value_heads,  ///< num_key_value_heads, num_attention_heads when absent
  multi_query,          ///< GPTBigCodeConfig multi_query (default true): one k/v head, else all heads
};

/// The names of a Llama-like layer's linears, as the modeling file calls them (LoRA targets and
/// quantization skip lists name them).
struct ModuleNames {
  std::string_view q = "q_proj", k = "k_proj", v = "v_proj", o = "o_proj";
  /// One fused q/k/v projection of (heads + 2 kv_heads) x head_dim outputs (InternLM2Attention's
  /// wqkv); empty: q, k and v apart.
  std::string_view qkv = {};
  std::string_view gate = "gate_proj", up = "up_proj", down = "down_proj";
};

/// Dropout probability keys (the engine counts dropout masks in training).
struct Dropouts {
  std::string_view attention = "attention_dropout";
  double attention_dflt = 0;
  std::string_view hidden = {};  ///< after attention and MLP (residual dropout); empty: none
  double hidden_dflt = 0;
  std::string_view embedding = {};  ///< on the embeddings; empty: none
  double embedding_dflt = 0;
};

/// Size keys a multimodal config's text_config may leave to its config class.
struct NestedDefaults {
  std::string_view config_class = {};  ///< named in the note that says they were used
  std::span<const std::pair<std::string_view, std::uint64_t>> values = {};
};

/// Token mixers other than attention that a row lays out (src/spec/hybrid.cpp).
enum class LinearMixer {
  none,             ///< every layer is attention
  /// Qwen3NextGatedDeltaNet on the "linear_attention" entries of layer_types (default: all but every
  /// full_attention_interval-th, 4), Qwen3NextAttention (a gated q_proj of twice the heads) on the others.
  gated_delta_net,
  /// Qwen3_5GatedDeltaNet: the same layer with its input projections split (in_proj_qkv, in_proj_z,
  /// in_proj_b, in_proj_a: the same parameters), so its forward makes no reordering copies
  /// (fix_query_key_value_ordering, the q/k/v torch.cat); the same attention on the other layers.
  gated_delta_net_split,
};

/// One model type: how a config of that `model_type` is laid out, and the defaults of its
/// config class (configuration_<type>.py) that decide its size. Fields left out take the
/// Llama values (LlamaConfig / modeling_llama.py), so a row names only where a type differs.
struct Architecture {
  std::string_view model_type = {};
  Layout layout = Layout::llama;
  std::string_view family = "llama";  ///< ModelSpec::family
  std::string_view source = {};       ///< the transformers modeling file the layout follows

  // --- config keys and the config class's defaults ---------------------------------------
  ConfigKeys keys = ConfigKeys::hf;
  bool tied_default = false;          ///< tie_word_embeddings default of the config class
  std::uint64_t head_dim = 0;         ///< head_dim default of the config class; 0: hidden / heads
  /// max_position_embeddings when the config has none of its keys (GPT2Config n_positions
  /// 1024, OPTConfig 2048); 0: left unknown.
  std::uint64_t max_positions_default = 0;
  KvHeads kv_heads = KvHeads::num_key_value_heads;
  /// Defaults filled in when the type's config comes as a multimodal text_config that leaves
  /// them out (Gemma3TextConfig: gemma-3 config.json files give only a few keys).
  NestedDefaults nested_defaults = {};

  // --- attention ------------------------------------------------------------------------
  /// Biases of the q, k, v projections (or the fused one) and of the output projection,
  /// where the layout takes them from the config (llama, gemma, deepseek, gpt_neox,
  /// starcoder2, falcon, opt, mpt; gpt2, phi, gptj and bloom have theirs fixed).
  ConfigFlag qkv_bias = {"attention_bias"};
  ConfigFlag o_bias = {"attention_bias"};
  QkNorm qk_norm = QkNorm::none;
  ConfigFlag qk_norm_on = {{}, true};  ///< when the q/k norms exist (StableLmConfig qk_layernorm)
  /// partial_rotary_factor (or rotary_pct) default: the share of each head that is rotated.
  double rotary_fraction = 1.0;
  Positions positions = Positions::rotary;
  /// Rotary modules, each with its inv_freq pair: 2 where sliding layers rotate with their
  /// own base (Gemma3RotaryEmbedding per layer type, olmo3).
  unsigned rotary_tables = 1;
  Sliding sliding = Sliding::none;
  std::uint64_t sliding_pattern = 6;  ///< sliding_window_pattern default (Sliding::pattern)
  /// Soft-capping of logits and attention scores (final_logit_softcapping,
  /// attn_logit_softcapping), with the config class's defaults (Gemma2Config: 30, 50).
  bool softcaps = false;
  double final_softcap_default = 0;
  double attn_softcap_default = 0;

  // --- MLP, norms, residual -------------------------------------------------------------
  MlpWidth mlp_width = MlpWidth::intermediate_size;
  bool fused_gate_up = false;  ///< gate_up_proj as one linear (GlmMLP; phi3's layout has its own)
  /// The llama layout's MLP without a gate: up_proj and down_proj around the activation
  /// (ArceeMLP, ApertusMLP; the row's names.up / names.down).
  bool ungated_mlp = false;
  /// The linears' names in the llama and gemma layouts (and a fused q/k/v projection).
  ModuleNames names = {};
  ConfigFlag mlp_bias = {"mlp_bias"};
  Activation activation = Activation::silu;  ///< the config class's default
  std::string_view activation_key = "hidden_act";
  NormKind norm = NormKind::rms;
  /// Norms in a decoder layer: input + post-attention (2); gemma2's sandwich of pre/post
  /// attention and feedforward norms (4); one shared input norm (phi, gptj, cohere: 1).
  unsigned layer_norms = 2;
  /// Attention and MLP read the same input and add to one residual (GPTNeoX
  /// use_parallel_residual, phi, cohere).
  ConfigFlag parallel_residual = {};
  /// A parallel layer keeps only its input norm (StableLmDecoderLayer drops
  /// post_attention_layernorm with use_parallel_residual).
  bool parallel_one_norm = false;
  Dropouts dropout = {};

  // --- embeddings and head --------------------------------------------------------------
  bool scaled_embeddings = false;  ///< Gemma*ScaledWordEmbedding: x * sqrt(hidden), an fp32 embed_scale buffer
  /// lm_head has a bias (its own even when the weight is tied).
  ConfigFlag lm_head_bias = {};
  /// GPTBigCodeModel registers `bias`, a causal mask of max_positions^2 booleans (not cast by
  /// .to(dtype)): 1 MiB for 1024 positions, 64 MiB for starcoder's 8192.
  bool causal_mask_buffer = false;

  // --- mixture of experts ---------------------------------------------------------------
  Experts experts = Experts::none;
  /// Experts::n_routed_experts: the count when the config has no such key, the config class's
  /// default (DeepseekV2Config 64, DeepseekV3Config 256, Glm4MoeConfig 128; Dots1Config None:
  /// dense). A config that omits the key is built by transformers with that many experts.
  std::uint64_t default_experts = 0;
  ExpertWidth expert_width = ExpertWidth::intermediate_size;
  SparseLayers sparse_layers = SparseLayers::every;
  SharedExpert shared_expert = SharedExpert::none;
  ExpertLinears expert_linears = ExpertLinears::gate_up_down;
  /// DeepseekV3TopkRouter registers e_score_correction_bias (n_routed_experts fp32), a buffer.
  bool router_score_bias = false;
  /// Ernie4_5_MoeStatics: e_score_correction_bias is a parameter ([1, experts], fp32,
  /// requires_grad=False): counted in the parameters, not trained.
  bool router_score_bias_parameter = false;
  /// The router hands the experts fp32 routing weights: its scores come from fp32 logits
  /// (Glm4MoeTopkRouter: `F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))`,
  /// then sigmoid and `scores.gather`) and are not cast back to the hidden states' dtype, so in
  /// integrations/moe.py `weighted_out = proj_out * sample_weights_g` and its reordered copy
  /// `weighted_out[inv_perm]` are fp32 (engine/activations.cpp). Measured on the H200 (one MoE
  /// block, 4096 tokens, bf16; tests/accuracy/arch/probe_s7.py): glm4_moe, dots1, deepseek_v3,
  /// minimax_m2 and hunyuan_v1_moe receive fp32 weights; qwen3_moe and ernie4_5_moe cast theirs.
  bool fp32_routing_weights = false;
  /// The key of the experts per token; empty: num_experts_per_tok (or experts_per_token).
  /// Ernie4_5_MoeConfig moe_k; HunYuanMoEV1Config moe_topk (an int, or one per layer).
  std::string_view top_k_key = {};
  /// The key of SharedExpert::n_shared's count (Ernie4_5_MoeConfig moe_num_shared_experts).
  std::string_view n_shared_key = "n_shared_experts";
  /// A boolean key whose true value the row does not lay out (the experts' layout then is not
  /// read from the source): refused with exit 2 naming it. Ernie4_5_MoeConfig use_bias.
  std::string_view refused_if_true = {};
  /// Every expert runs on every token (Llama4TextMoe.forward: hidden_states.repeat(E) weighted by
  /// the router's sigmoid scores, 0 off the top-k, then bmm through all experts): the experts'
  /// activations are those of E slots a token, not top-k (engine/activations.cpp).
  bool dense_experts = false;

  // --- what the engine reads --------------------------------------------------------------
  /// The head's logits are multiplied by a scale in the forward (`logits * logit_scale`,
  /// cohere): one more logits-sized tensor alive with them.
  bool scaled_logits = false;
  /// MoE experts stored as fused 3-D parameters and run through transformers' experts
  /// interface (integrations/moe.py, grouped_mm_experts_forward): each token's top-k slots
  /// gather their hidden state, are sorted by expert and projected together, so in inference
  /// the copies of every slot are alive at once (engine/activations.cpp).
  bool grouped_experts = false;
  /// Attention sinks (gpt_oss): one learned logit per head (parameters); eager attention
  /// appends it to the scores and takes the softmax in the compute dtype (no fp32 copy).
  bool attention_sinks = false;
  /// The KV cache keeps keys and values expanded to every query head when the config has
  /// fewer k/v heads (FalconAttention with new_decoder_architecture broadcasts num_kv_heads to
  /// num_heads before DynamicCache.update).
  bool cache_all_heads = false;
  /// A single k/v head beside several query heads makes SDPA fall back to its math backend,
  /// which materialises the scores as eager attention does (FalconAttention with multi_query and
  /// no new_decoder_architecture: one k/v head and a mask; engine/activations.cpp).
  bool multi_query_math_sdpa = false;
  /// transformers has no SDPA path for the type (GPT-J, BLOOM, MPT: from_config refuses
  /// attn_implementation="sdpa"; a default load runs eager): attention is eager whatever the
  /// workload asks.
  bool eager_only = false;
  /// 16-bit score-sized buffers alive at the peak of an eager attention forward, per head and
  /// key position, where the type's attention differs from llama's eager_attention_forward
  /// (0: llama's rule, 5 in bf16: scores, their fp32 copy and the fp32 softmax).
  unsigned eager_scores = 0;
  /// The eager scores are computed from fp32 copies of q and k (GPTJAttention._attn:
  /// query.to(torch.float32), key.to(torch.float32)), which matmul saves for backward.
  bool fp32_qk = false;
  /// Rotary embeddings applied to a slice of each head and joined back with torch.cat (every
  /// call, whatever partial_rotary_factor says): q comes out contiguous in (batch, heads, seq,
  /// dim), so does SDPA's output, and `transpose(1, 2).contiguous()` copies it for o_proj,
  /// which saves the copy when it trains.
  bool rotary_cat = false;

  // --- fields added in session 8 (arch; other helpers' new fields also go at the end) ---------
  /// Layout::deepseek: q_lora_rank when the config has no such key, the config class's default
  /// (DeepseekV2Config / DeepseekV3Config 1536, Glm4MoeLiteConfig 768).
  std::uint64_t q_lora_default = 1536;
  /// One learned sink logit per head (parameters), without gpt_oss's eager softmax: GraniteSWA's
  /// eager path takes llama's fp32 softmax and rescales the output by sigmoid(logsumexp - sink).
  bool sink_logits = false;
  /// SparseLayers::mlp_layer_types_or_first_k: first_k_dense_replace when the config has no such
  /// key (ExaoneMoeConfig 1; Cohere2MoeConfig pops it with 0).
  std::uint64_t first_k_dense_default = 1;

  // --- fields added in session 10 (arch3) ---------------------------------------------------
  /// Layout::deepseek: v_head_dim absent or null is hidden_size / num_attention_heads
  /// (MiniCPM3Config.__post_init__); false: the key is required.
  bool mla_v_head_dim_from_heads = false;
  /// Layout::deepseek: the cache keeps the compressed latent and the rotary key (kv_lora_rank +
  /// qk_rope_head_dim a token and layer), expanded per head by kv_b_proj at each layer's attention
  /// (MiniCPM3Attention / YoutuAttention: past_key_values.update before expand_kv).
  bool mla_latent_cache = false;
  /// Two more norms a layer when the flag is set (HyperCLOVAXDecoderLayer post_norm1 / post_norm2 with
  /// use_post_norm, default true).
  ConfigFlag post_norms = {};
  /// One more norm in each sparse layer (AXK1MoE.post_mlp_layernorm on the block's output).
  bool moe_post_norm = false;
  /// An output gate of attention (`attn_output * act(gate(x))`): its linear's name, empty: none. Its width is
  /// heads x head_dim (AfmoeAttention.gate_proj, sigmoid) or, with attn_gate_per_head_flag set, heads
  /// (LagunaAttention.g_proj with gating true or "per-head", softplus).
  std::string_view attn_gate = {};
  std::string_view attn_gate_per_head_key = {};
  /// The key of the first dense layers' count (SparseLayers::first_k_dense and mlp_layer_types_or_first_k;
  /// AfmoeConfig num_dense_layers).
  std::string_view first_k_dense_key = "first_k_dense_replace";
  /// A list of per-layer query-head counts (LagunaConfig num_attention_heads_per_layer): accepted when every
  /// entry equals num_attention_heads, refused otherwise (per-layer head counts are not laid out).
  std::string_view heads_per_layer_key = {};

  // --- fields added in session 10 (hybrid) ------------------------------------------------------
  /// Linear-attention layers beside attention (src/spec/hybrid.cpp lays them out); the row's
  /// layer_types may then list "linear_attention".
  LinearMixer linear_mixer = LinearMixer::none;

  [[nodiscard]] constexpr bool moe() const noexcept { return experts != Experts::none; }
};

/// Every supported model type, in the README's order.
std::span<const Architecture> architectures() noexcept;

/// The row of `model_type`, or nullptr when vramfit has none.
const Architecture* find_architecture(std::string_view model_type) noexcept;

/// The row whose model is the transformers class `hf_class` of a config's `architectures`
/// ("DeepseekV3ForCausalLM": deepseek_v3), or nullptr. Only `<Name>ForCausalLM` classes, `<Name>`
/// being a row's model_type without its underscores and `_text` suffix, any case. vLLM picks a
/// model's implementation by this class, whatever its model_type (Kimi-K2's kimi_k2).
const Architecture* find_architecture_by_class(std::string_view hf_class) noexcept;

/// The row an unknown model_type is laid out with (Llama's, family "generic"), when the
/// checkpoint's headers give its exact weights.
const Architecture& generic_architecture() noexcept;

/// Model types that are not decoder-only language models: refused, never laid out as decoders.
enum class NotDecoder { encoder, encoder_decoder };

/// What `model_type` is when it is an encoder or an encoder-decoder; nullopt otherwise.
std::optional<NotDecoder> not_decoder(std::string_view model_type) noexcept;

/// Config keys that announce a structure a Llama-like decoder lacks (experts, a vision tower,
/// an encoder, state-space layers): named when an unknown model_type is refused.
std::span<const std::string_view> structure_keys() noexcept;

/// Config keys that announce layers which are not attention: state-space (Mamba), linear
/// attention, short convolutions, recurrences (NemotronHConfig hybrid_override_pattern,
/// Lfm2Config conv_L_cache, Qwen3NextConfig linear_num_key_heads, ...). Their caches (SSM and
/// conv states instead of keys and values) and activations are nothing a row models: an unknown
/// type with one of them is refused even when the checkpoint's headers give its exact weights.
std::span<const std::string_view> layer_kind_keys() noexcept;

/// Config keys of attention whose cache is not every layer's keys and values (a latent, an
/// indexer's cache, layers sharing another's cache, per-layer inputs or head counts): for an
/// unknown type the KV cache, the figure serving and generation turn on, cannot be approximated
/// as a Llama-like decoder's, so it is refused even beside the checkpoint's exact weights.
std::span<const std::string_view> cache_layout_keys() noexcept;

/// The `layer_types` entries a row can lay out: attention layers (full, sliding, chunked; the
/// legacy "attention"). Any other kind ("linear_attention", "mamba", "conv", "hybrid", "moe", ...)
/// is refused, whatever the model_type.
bool attention_layer_kind(std::string_view kind) noexcept;

}  // namespace vramfit::spec
