// The table of model types (see architectures.hpp). Defaults and layouts are those of
// transformers 5.17, the version tests/unit/spec/data/arch/transformers_counts.json was made with.
#include "vramfit/spec/architectures.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace vramfit::spec {

namespace {

using L = Layout;

constexpr Architecture kArchitectures[] = {
    // LlamaConfig: tie_word_embeddings=False, attention_bias=False, mlp_bias=False.
    {"llama", L::llama, "llama", false, false, false, 0, "llama/modeling_llama.py"},
    // MistralConfig: sliding_window applies to every layer when set.
    {"mistral", L::llama, "llama", false, false, false, 0, "mistral/modeling_mistral.py"},
    // MixtralConfig: num_local_experts routed experts of intermediate_size in every layer.
    // The MoE rows below marked grouped_experts run their fused experts through
    // integrations/moe.py (measured: tests/accuracy/arch, generate prefill).
    {"mixtral", L::llama, "llama", false, false, true, 0, "mixtral/modeling_mixtral.py", false, true},
    // Qwen2Attention: q_proj, k_proj, v_proj always have biases; o_proj never.
    {"qwen2", L::llama, "llama", false, true, false, 0, "qwen2/modeling_qwen2.py"},
    // Qwen2MoeConfig: num_experts, moe_intermediate_size, shared_expert (+ gate).
    {"qwen2_moe", L::llama, "llama", false, true, true, 0, "qwen2_moe/modeling_qwen2_moe.py", false, true},
    // Qwen3Attention: q_norm/k_norm over head_dim; Qwen3Config: head_dim=128 (not
    // hidden / heads; checked with transformers 5.17), attention_bias=False.
    {"qwen3", L::llama, "llama", false, false, false, 128, "qwen3/modeling_qwen3.py"},
    {"qwen3_moe", L::llama, "llama", false, false, true, 0, "qwen3_moe/modeling_qwen3_moe.py", false, true},
    // The language models of Qwen2-VL / Qwen2.5-VL (Qwen2VLTextModel: qwen2's layers, q/k/v
    // biases) and Qwen3-VL (Qwen3VLTextModel: qwen3's, q/k norms, head_dim 128).
    {"qwen2_vl_text", L::llama, "llama", false, true, false, 0, "qwen2_vl/modeling_qwen2_vl.py"},
    {"qwen2_5_vl_text", L::llama, "llama", false, true, false, 0, "qwen2_5_vl/modeling_qwen2_5_vl.py"},
    {"qwen3_vl_text", L::llama, "llama", false, false, false, 128, "qwen3_vl/modeling_qwen3_vl.py"},
    // OlmoeAttention: q_norm over hidden_size, k_norm over kv_heads*head_dim.
    {"olmoe", L::llama, "llama", false, false, true, 0, "olmoe/modeling_olmoe.py", false, true},
    // Phi3: fused qkv_proj and gate_up_proj, no biases.
    {"phi3", L::phi3, "phi3", false, false, false, 0, "phi3/modeling_phi3.py"},
    // Gemma*Config: tie_word_embeddings=True, head_dim=256 (whatever hidden / heads is);
    // embeddings scaled by sqrt(hidden).
    {"gemma", L::gemma, "gemma", true, false, false, 256, "gemma/modeling_gemma.py"},
    {"gemma2", L::gemma, "gemma", true, false, false, 256, "gemma2/modeling_gemma2.py"},
    {"gemma3_text", L::gemma, "gemma", true, false, false, 256, "gemma3/modeling_gemma3.py"},
    // GPT2Config does not pass tie_word_embeddings: PretrainedConfig's default True.
    {"gpt2", L::gpt2, "gpt2", true, false, false, 0, "gpt2/modeling_gpt2.py"},
    // GPTNeoXConfig: tie_word_embeddings=False, attention_bias=True.
    {"gpt_neox", L::gpt_neox, "gpt_neox", false, false, false, 0, "gpt_neox/modeling_gpt_neox.py"},
    // DeepseekV2/V3Config: multi-head latent attention, shared + routed experts.
    {"deepseek_v2", L::deepseek, "deepseek", false, false, true, 0, "deepseek_v2/modeling_deepseek_v2.py"},
    {"deepseek_v3", L::deepseek, "deepseek", false, false, true, 0, "deepseek_v3/modeling_deepseek_v3.py"},
    // PhiConfig (phi-2): parallel attention and MLP, LayerNorm, lm_head with a bias.
    {"phi", L::phi, "phi", false, false, false, 0, "phi/modeling_phi.py"},
    // Starcoder2Config: use_bias=True, LayerNorm, plain (ungated) MLP.
    {"starcoder2", L::starcoder2, "starcoder2", true, false, false, 0, "starcoder2/modeling_starcoder2.py"},
    // GptOssConfig: attention_bias=True, head_dim=64, attention sinks (one learned logit per
    // head), router with a bias, experts as fused 3-D parameters gate_up_proj [E, H, 2I] and
    // down_proj [E, I, H] with biases; alternating sliding layers. attention_sinks: eager
    // attention (5.17 refuses SDPA) over [scores | sink], softmax in the compute dtype.
    {"gpt_oss", L::llama, "llama", false, false, true, 64, "gpt_oss/modeling_gpt_oss.py", false, false, true},
    // FalconConfig: fused query_key_value (multi-query: one k/v head; new_decoder_architecture:
    // num_kv_heads), ungated MLP of ffn_hidden_size (4 * hidden when null), LayerNorm with
    // bias, parallel attention, tie_word_embeddings=True, bias=False. cache_all_heads:
    // FalconAttention.forward reshapes k/v to num_heads (new_decoder_architecture) before the cache.
    {"falcon", L::falcon, "falcon", true, false, false, 0, "falcon/modeling_falcon.py", false, false, false, true},
    // OPTConfig: q/k/v/out_proj and fc1/fc2 with biases (enable_bias), ffn_dim, learned
    // positions offset by 2, project_in/out when word_embed_proj_dim != hidden_size.
    {"opt", L::opt, "opt", true, false, false, 0, "opt/modeling_opt.py"},
    // Llama's modules, with their own defaults. GraniteConfig: multipliers only (no extra
    // parameters); GraniteForCausalLM divides the logits by logits_scaling: scaled_logits. HeliumConfig: head_dim=128. SmolLM3Config: tie_word_embeddings=True, no
    // rotary on some layers (no parameters). SeedOssConfig: head_dim=128, attention_bias=True
    // (q, k, v), attention_out_bias=False (o). Ernie4_5Config: head_dim=128, tied, use_bias on
    // every projection.
    {"granite", L::llama, "llama", false, false, false, 0, "granite/modeling_granite.py", true},
    {"helium", L::llama, "llama", false, false, false, 128, "helium/modeling_helium.py"},
    {"smollm3", L::llama, "llama", true, false, false, 0, "smollm3/modeling_smollm3.py"},
    {"seed_oss", L::llama, "llama", false, false, false, 128, "seed_oss/modeling_seed_oss.py"},
    {"ernie4_5", L::llama, "llama", true, false, false, 128, "ernie4_5/modeling_ernie4_5.py"},
    // OlmoLayerNorm has no parameters. Olmo2/Olmo3: norms after attention and MLP (not before),
    // q_norm/k_norm over the whole projection; Olmo3 has sliding layers with their own rotary.
    {"olmo", L::llama, "llama", false, false, false, 0, "olmo/modeling_olmo.py"},
    {"olmo2", L::llama, "llama", false, false, false, 0, "olmo2/modeling_olmo2.py"},
    {"olmo3", L::llama, "llama", false, false, false, 0, "olmo3/modeling_olmo3.py"},
    // rotary_cat (glm, glm4): apply_rotary_pos_emb rotates q[..., :rotary_dim] and concatenates
    // the rest back (torch.cat), so o_proj saves a contiguous copy in training (measured: glm's
    // training was 0.62% under without it, exact with it). phi and stablelm concatenate too, but
    // their measured training does not show the copy (phi +1.19%, stablelm qk_layernorm +3.55%
    // with it): left without it.
    // GlmConfig / Glm4Config: fused gate_up_proj, attention_bias=True (q, k, v; not o),
    // head_dim=128, partial_rotary_factor=0.5; Glm4 adds post_self_attn and post_mlp norms.
    {"glm", L::llama, "llama", false, false, false, 128, "glm/modeling_glm.py", false, false, false, false, false, 0, false, true},
    {"glm4", L::llama, "llama", false, false, false, 128, "glm4/modeling_glm4.py", false, false, false, false, false, 0, false, true},
    // GraniteMoeConfig / PhimoeConfig: num_local_experts experts of intermediate_size in every
    // layer, like mixtral; Phimoe's norms are LayerNorms with biases (lm_head_bias=False).
    // GraniteMoeForCausalLM divides the logits by logits_scaling, as granite does.
    {"granitemoe", L::llama, "llama", false, false, true, 0, "granitemoe/modeling_granitemoe.py", true, true},
    {"phimoe", L::llama, "llama", false, false, true, 0, "phimoe/modeling_phimoe.py", false, true},
    // CohereConfig / Cohere2Config: one LayerNorm without bias per layer, attention and MLP in
    // parallel, tied embeddings; cohere's optional q/k norms over (heads, head_dim); cohere2's
    // sliding layers (3 of every 4).
    // Both multiply the logits by logit_scale in CohereForCausalLM.forward: scaled_logits.
    {"cohere", L::llama, "llama", true, false, false, 0, "cohere/modeling_cohere.py", true},
    {"cohere2", L::llama, "llama", true, false, false, 0, "cohere2/modeling_cohere2.py", true},
    // Exaone4Config: norms after attention and MLP only, q/k norms over head_dim.
    {"exaone4", L::llama, "llama", false, false, false, 0, "exaone4/modeling_exaone4.py"},
    // StableLmConfig: LayerNorms with biases, partial_rotary_factor=0.25, q/k/v biases with
    // use_qkv_bias, per-head LayerNorms (no bias) with qk_layernorm, one norm and parallel
    // attention and MLP with use_parallel_residual.
    {"stablelm", L::llama, "llama", false, false, false, 0, "stablelm/modeling_stablelm.py"},
    // HunYuanDenseV1Attention: query_layernorm / key_layernorm (RMSNorm over head_dim) always.
    {"hunyuan_v1_dense", L::llama, "llama", false, false, false, 0, "hunyuan_v1_dense/modeling_hunyuan_v1_dense.py"},
    // GPTJConfig: n_embd/n_layer/n_head, one ln_1 (LayerNorm with bias) feeding attention and
    // MLP in parallel, q/k/v/out_proj without biases, fc_in/fc_out with biases (n_inner or
    // 4 * n_embd), lm_head with a bias, untied; embed_positions (n_positions x rotary_dim,
    // fp32) per layer, a buffer. Eager attention only.
    // fp32_qk: GPTJAttention._attn casts q and k to fp32 for the scores.
    {"gptj", L::gptj, "gptj", false, false, false, 0, "gptj/modeling_gptj.py", false, false, false, false, true, 0,
     true},
    // BloomConfig: word_embeddings_layernorm after the embeddings, fused query_key_value and
    // dense (biases), MLP of 4 * hidden (biases), ALiBi (no position parameters), tied. Eager only.
    // BloomAttention keeps the baddbmm scores (alibi + q k^T) and the masked copy while
    // softmax(dtype=float32) makes its fp32 copy and output: 6 buffers by the source; measured
    // 14.3 bytes a score on a 4096-token prefill (2 configs), so 7 (one more, the ALiBi add).
    {"bloom", L::bloom, "bloom", true, false, false, 0, "bloom/modeling_bloom.py", false, false, false, false, true, 7},
    // MptConfig: d_model/n_layers/n_heads, Wqkv and out_proj, up_proj/down_proj of
    // expansion_ratio * d_model, LayerNorms; no_bias (default True) drops every bias, norms
    // included; ALiBi; tied. Eager only. MptAttention: scores, + position_bias, masked_fill,
    // softmax(scores.float()): llama's 5 buffers by the source; measured 12.3-12.4 bytes a score
    // on 1024- and 4096-token forwards (2 configs), so 6 (one more, the ALiBi add).
    {"mpt", L::mpt, "mpt", true, false, false, 0, "mpt/modeling_mpt.py", false, false, false, false, true, 6},
    // GPTBigCodeConfig: GPT-2's modules; multi_query (default) shrinks c_attn to one k/v head;
    // a causal-mask buffer of n_positions^2 booleans.
    {"gpt_bigcode", L::gpt2, "gpt2", true, false, false, 0, "gpt_bigcode/modeling_gpt_bigcode.py"},
};

/// Encoders and encoder-decoders: their configs look enough like a decoder's to be laid out as
/// one, with a wrong answer (bert-base came out as a 160M gated decoder for its 110M).
constexpr std::pair<std::string_view, NotDecoder> kNotDecoders[] = {
    {"bert", NotDecoder::encoder},
    {"roberta", NotDecoder::encoder},
    {"xlm-roberta", NotDecoder::encoder},
    {"camembert", NotDecoder::encoder},
    {"deberta", NotDecoder::encoder},
    {"deberta-v2", NotDecoder::encoder},
    {"distilbert", NotDecoder::encoder},
    {"albert", NotDecoder::encoder},
    {"electra", NotDecoder::encoder},
    {"mpnet", NotDecoder::encoder},
    {"modernbert", NotDecoder::encoder},
    {"nomic_bert", NotDecoder::encoder},
    {"xlm", NotDecoder::encoder},
    {"longformer", NotDecoder::encoder},
    {"big_bird", NotDecoder::encoder},
    {"ernie", NotDecoder::encoder},
    {"wav2vec2", NotDecoder::encoder},
    {"hubert", NotDecoder::encoder},
    {"clip", NotDecoder::encoder},
    {"siglip", NotDecoder::encoder},
    {"vit", NotDecoder::encoder},
    {"t5", NotDecoder::encoder_decoder},
    {"mt5", NotDecoder::encoder_decoder},
    {"umt5", NotDecoder::encoder_decoder},
    {"longt5", NotDecoder::encoder_decoder},
    {"bart", NotDecoder::encoder_decoder},
    {"mbart", NotDecoder::encoder_decoder},
    {"pegasus", NotDecoder::encoder_decoder},
    {"pegasus_x", NotDecoder::encoder_decoder},
    {"marian", NotDecoder::encoder_decoder},
    {"blenderbot", NotDecoder::encoder_decoder},
    {"blenderbot-small", NotDecoder::encoder_decoder},
    {"led", NotDecoder::encoder_decoder},
    {"prophetnet", NotDecoder::encoder_decoder},
    {"fsmt", NotDecoder::encoder_decoder},
    {"whisper", NotDecoder::encoder_decoder},
    {"speech_to_text", NotDecoder::encoder_decoder},
    {"encoder-decoder", NotDecoder::encoder_decoder},
    {"vision-encoder-decoder", NotDecoder::encoder_decoder},
    {"switch_transformers", NotDecoder::encoder_decoder},
    {"t5gemma", NotDecoder::encoder_decoder},
    {"nllb-moe", NotDecoder::encoder_decoder},
    {"m2m_100", NotDecoder::encoder_decoder},
    {"plbart", NotDecoder::encoder_decoder},
    {"bigbird_pegasus", NotDecoder::encoder_decoder},
    {"seamless_m4t", NotDecoder::encoder_decoder},
};

constexpr std::string_view kStructureKeys[] = {
    "num_local_experts", "num_experts",        "n_routed_experts", "moe_intermediate_size", "vision_config",
    "audio_config",      "is_encoder_decoder", "encoder_layers",   "state_size",            "ssm_cfg",
    "mamba_d_state",     "d_state",            "linear_num_key_heads", "layers_block_type", "attn_layer_indices"};

}  // namespace

std::span<const Architecture> architectures() noexcept { return kArchitectures; }

const Architecture* find_architecture(std::string_view model_type) noexcept {
  const auto it = std::find_if(std::begin(kArchitectures), std::end(kArchitectures),
                               [&](const Architecture& a) { return a.model_type == model_type; });
  return it == std::end(kArchitectures) ? nullptr : &*it;
}

std::optional<NotDecoder> not_decoder(std::string_view model_type) noexcept {
  for (const auto& [type, kind] : kNotDecoders)
    if (type == model_type) return kind;
  return std::nullopt;
}

std::span<const std::string_view> structure_keys() noexcept { return kStructureKeys; }

}  // namespace vramfit::spec
