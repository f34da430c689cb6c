#pragma once
// The model types vramfit lays out, as data: one row per config.json `model_type`, with the
// transformers modeling file its layout follows. src/spec/config.cpp builds a ModelSpec from a
// row and the config's keys; tests/unit/spec/architectures_test.cpp checks that every row's
// default config (the config class's own defaults) counts what transformers builds.
//
// Adding a type: a row here (and, when its modules differ from every existing layout, a
// layout in config.cpp), its transformers count in tests/unit/spec/data/arch/, and its name in
// the README's list of model types.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace vramfit::spec {

/// How a type's decoder layer is built (which modules, in which order).
enum class Layout { llama, phi3, gemma, gpt2, gpt_neox, deepseek, phi, starcoder2, falcon, opt, gptj, bloom, mpt };

/// One model type: how a config of that `model_type` is laid out, and the defaults of its
/// config class (configuration_<type>.py) that decide its size.
struct Architecture {
  std::string_view model_type;
  Layout layout;
  std::string_view family;  ///< ModelSpec::family
  bool tied_default;        ///< tie_word_embeddings default of the config class
  bool qkv_bias;            ///< q, k, v biases regardless of attention_bias (qwen2)
  bool moe;                 ///< sparse MoE layers
  std::uint64_t head_dim;   ///< head_dim default of the config class; 0: hidden / heads
  std::string_view source;  ///< the transformers modeling file the layout follows
  /// The head's logits are multiplied by a scale in the forward (`logits * logit_scale`,
  /// cohere): one more logits-sized tensor alive with them.
  bool scaled_logits = false;
  /// MoE experts stored as fused 3-D parameters and run through transformers' experts
  /// interface (integrations/moe.py, grouped_mm_experts_forward): each token's top-k slots
  /// gather their hidden state, are sorted by expert and projected together, so in inference
  /// the copies of every slot are alive at once (engine/activations.cpp).
  bool grouped_experts = false;
  /// Attention sinks (gpt_oss): eager attention appends one learned logit per head to the
  /// scores and takes the softmax in the compute dtype (no fp32 copy).
  bool attention_sinks = false;
  /// The KV cache keeps keys and values expanded to every query head when the config has
  /// fewer k/v heads (FalconAttention with new_decoder_architecture broadcasts num_kv_heads to
  /// num_heads before DynamicCache.update).
  bool cache_all_heads = false;
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
};

/// Every supported model type, in the README's order.
std::span<const Architecture> architectures() noexcept;

/// The row of `model_type`, or nullptr when vramfit has none.
const Architecture* find_architecture(std::string_view model_type) noexcept;

/// Model types that are not decoder-only language models: refused, never laid out as decoders.
enum class NotDecoder { encoder, encoder_decoder };

/// What `model_type` is when it is an encoder or an encoder-decoder; nullopt otherwise.
std::optional<NotDecoder> not_decoder(std::string_view model_type) noexcept;

/// Config keys that announce a structure a Llama-like decoder lacks (experts, a vision tower,
/// an encoder, state-space layers): named when an unknown model_type is refused.
std::span<const std::string_view> structure_keys() noexcept;

}  // namespace vramfit::spec
