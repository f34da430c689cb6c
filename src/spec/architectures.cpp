// The table of model types (see architectures.hpp). Defaults and layouts are those of
// transformers 5.17, the version tests/unit/spec/data/arch/transformers_counts.json was made with.
#include "vramfit/spec/architectures.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace vramfit::spec {

namespace {

using L = Layout;
using A = Activation;
using N = NormKind;
using Q = QkNorm;
using W = MlpWidth;
using S = Sliding;

// Rows name only what differs from Llama (the Architecture defaults, LlamaConfig's). Each
// comment gives the transformers source that decides the fields of the row.

/// Gemma3TextConfig's defaults of the size keys (gemma-3 config.json files leave most of
/// text_config to them).
constexpr std::pair<std::string_view, std::uint64_t> kGemma3TextDefaults[] = {
    {"hidden_size", 2304},      {"intermediate_size", 9216},         {"num_hidden_layers", 26},
    {"num_attention_heads", 8}, {"num_key_value_heads", 4},          {"head_dim", 256},
    {"vocab_size", 262208},     {"max_position_embeddings", 131072}, {"sliding_window", 4096},
};

/// Gemma4TextConfig's defaults of the size keys (a gemma4 config.json's text_config may leave them).
constexpr std::pair<std::string_view, std::uint64_t> kGemma4TextDefaults[] = {
    {"hidden_size", 2304},      {"intermediate_size", 9216},         {"num_hidden_layers", 30},
    {"num_attention_heads", 8}, {"num_key_value_heads", 4},          {"head_dim", 256},
    {"vocab_size", 262144},     {"max_position_embeddings", 131072}, {"sliding_window", 512},
};

/// GPT-2's three dropouts (GPT2Config attn_pdrop, resid_pdrop, embd_pdrop = 0.1).
constexpr Dropouts kGpt2Dropouts{.attention = "attn_pdrop", .attention_dflt = 0.1, .hidden = "resid_pdrop",
                                 .hidden_dflt = 0.1, .embedding = "embd_pdrop", .embedding_dflt = 0.1};

/// Qwen3_5TextConfig's defaults of the size keys (configuration_qwen3_5.py; the linear_* keys'
/// defaults are spec/hybrid.cpp's, the same as Qwen3NextConfig's).
constexpr std::pair<std::string_view, std::uint64_t> kQwen3_5TextDefaults[] = {
    {"hidden_size", 4096},       {"intermediate_size", 12288}, {"num_hidden_layers", 32},
    {"num_attention_heads", 16}, {"num_key_value_heads", 4},   {"head_dim", 256},
    {"vocab_size", 248320},      {"max_position_embeddings", 32768},
};

/// Qwen3_5MoeTextConfig's defaults of the size keys (configuration_qwen3_5_moe.py; it has no
/// intermediate_size: every layer is sparse).
constexpr std::pair<std::string_view, std::uint64_t> kQwen3_5MoeTextDefaults[] = {
    {"hidden_size", 2048},           {"num_hidden_layers", 40},
    {"num_attention_heads", 16},     {"num_key_value_heads", 2},
    {"head_dim", 256},               {"vocab_size", 248320},
    {"max_position_embeddings", 32768}, {"moe_intermediate_size", 512},
    {"shared_expert_intermediate_size", 512}, {"num_experts", 256},
    {"num_experts_per_tok", 8},
};

constexpr ConfigFlag kAlways{{}, true};

constexpr Architecture kArchitectures[] = {
    // LlamaConfig: tie_word_embeddings=False, attention_bias=False, mlp_bias=False.
    {.model_type = "llama", .source = "llama/modeling_llama.py"},
    // MistralConfig: sliding_window applies to every layer when set.
    {.model_type = "mistral", .source = "mistral/modeling_mistral.py", .sliding = S::every},
    // MixtralConfig: num_local_experts routed experts of intermediate_size in every layer.
    // The MoE rows below marked grouped_experts run their fused experts through
    // integrations/moe.py (measured: tests/accuracy/arch, generate prefill).
    {.model_type = "mixtral", .source = "mixtral/modeling_mixtral.py", .sliding = S::every,
     .experts = Experts::num_local_experts, .grouped_experts = true},
    // Qwen2Attention: q_proj, k_proj, v_proj always have biases; o_proj never. Qwen2Config:
    // sliding_window only with use_sliding_window, from layer max_window_layers on.
    {.model_type = "qwen2", .source = "qwen2/modeling_qwen2.py", .qkv_bias = kAlways, .o_bias = {},
     .sliding = S::from_max_window},
    // Qwen2MoeConfig: num_experts of moe_intermediate_size where decoder_sparse_step and
    // mlp_only_layers say (dense layers of intermediate_size), shared_expert (+ gate).
    {.model_type = "qwen2_moe", .source = "qwen2_moe/modeling_qwen2_moe.py", .qkv_bias = kAlways, .o_bias = {},
     .sliding = S::from_max_window, .mlp_width = W::intermediate_size_if_dense,
     .experts = Experts::num_experts_or_dense, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::step, .shared_expert = SharedExpert::gated, .grouped_experts = true},
    // Qwen3Attention: q_norm/k_norm over head_dim; Qwen3Config: head_dim=128 (not
    // hidden / heads; checked with transformers 5.17), attention_bias=False.
    {.model_type = "qwen3", .source = "qwen3/modeling_qwen3.py", .head_dim = 128, .qk_norm = Q::head_dim,
     .sliding = S::from_max_window},
    {.model_type = "qwen3_moe", .source = "qwen3_moe/modeling_qwen3_moe.py", .qk_norm = Q::head_dim,
     .sliding = S::from_max_window, .mlp_width = W::intermediate_size_if_dense,
     .experts = Experts::num_experts_or_dense, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::step, .grouped_experts = true},
    // The language models of Qwen2-VL / Qwen2.5-VL (Qwen2VLTextModel: qwen2's layers, q/k/v
    // biases) and Qwen3-VL (Qwen3VLTextModel: qwen3's, q/k norms, head_dim 128).
    {.model_type = "qwen2_vl_text", .source = "qwen2_vl/modeling_qwen2_vl.py", .qkv_bias = kAlways, .o_bias = {},
     .sliding = S::from_max_window},
    {.model_type = "qwen2_5_vl_text", .source = "qwen2_5_vl/modeling_qwen2_5_vl.py", .qkv_bias = kAlways,
     .o_bias = {}, .sliding = S::from_max_window},
    {.model_type = "qwen3_vl_text", .source = "qwen3_vl/modeling_qwen3_vl.py", .head_dim = 128,
     .qk_norm = Q::head_dim, .sliding = S::from_max_window},
    // OlmoeAttention: q_norm over hidden_size, k_norm over kv_heads*head_dim; OlmoeConfig:
    // num_experts of intermediate_size in every layer.
    {.model_type = "olmoe", .source = "olmoe/modeling_olmoe.py", .qk_norm = Q::projection,
     .experts = Experts::num_experts, .grouped_experts = true},
    // Phi3: fused qkv_proj and gate_up_proj, no biases; sliding_window on every layer.
    {.model_type = "phi3", .layout = L::phi3, .family = "phi3", .source = "phi3/modeling_phi3.py",
     .sliding = S::every},
    // Gemma*Config: tie_word_embeddings=True, head_dim=256 (whatever hidden / heads is),
    // hidden_activation gelu_pytorch_tanh; GemmaRMSNorm scales by (1 + weight) in fp32;
    // embeddings scaled by sqrt(hidden). Gemma2/Gemma3: sandwich norms (pre and post
    // attention and feedforward), soft-capping (Gemma2Config: final 30.0, attention 50.0),
    // sliding layers: gemma2 alternate, gemma3 all but every sliding_window_pattern-th (6),
    // with a second rotary table (rope_local_base_freq).
    {.model_type = "gemma", .layout = L::gemma, .family = "gemma", .source = "gemma/modeling_gemma.py",
     .tied_default = true, .head_dim = 256, .softcaps = true, .activation = A::gelu_pytorch_tanh,
     .activation_key = "hidden_activation", .norm = N::rms_fp32, .scaled_embeddings = true},
    {.model_type = "gemma2", .layout = L::gemma, .family = "gemma", .source = "gemma2/modeling_gemma2.py",
     .tied_default = true, .head_dim = 256, .sliding = S::alternate, .softcaps = true,
     .final_softcap_default = 30.0, .attn_softcap_default = 50.0, .activation = A::gelu_pytorch_tanh,
     .activation_key = "hidden_activation", .norm = N::rms_fp32, .layer_norms = 4, .scaled_embeddings = true},
    {.model_type = "gemma3_text", .layout = L::gemma, .family = "gemma", .source = "gemma3/modeling_gemma3.py",
     .tied_default = true, .head_dim = 256, .nested_defaults = {"Gemma3TextConfig", kGemma3TextDefaults},
     .qk_norm = Q::head_dim, .rotary_tables = 2, .sliding = S::pattern, .sliding_pattern = 6, .softcaps = true,
     .activation = A::gelu_pytorch_tanh, .activation_key = "hidden_activation", .norm = N::rms_fp32,
     .layer_norms = 4, .scaled_embeddings = true},
    // GPT2Config: attribute_map (n_embd, ...), n_positions 1024, activation_function gelu_new;
    // does not pass tie_word_embeddings (PretrainedConfig's default True). GPT2Block: LayerNorms,
    // Conv1D c_attn/c_proj and c_fc/c_proj with biases, learned positions (wpe).
    {.model_type = "gpt2", .layout = L::gpt2, .family = "gpt2", .source = "gpt2/modeling_gpt2.py",
     .keys = ConfigKeys::gpt2, .tied_default = true, .max_positions_default = 1024, .positions = Positions::learned,
     .mlp_width = W::n_inner, .activation = A::gelu_tanh_python, .activation_key = "activation_function",
     .norm = N::layer, .dropout = kGpt2Dropouts},
    // GPTNeoXConfig: tie_word_embeddings=False, attention_bias=True, rotary_pct=0.25,
    // use_parallel_residual=True, hidden_act gelu, hidden_dropout; LayerNorms.
    {.model_type = "gpt_neox", .layout = L::gpt_neox, .family = "gpt_neox", .source = "gpt_neox/modeling_gpt_neox.py",
     .qkv_bias = {"attention_bias", true}, .o_bias = {"attention_bias", true}, .rotary_fraction = 0.25,
     .activation = A::gelu, .norm = N::layer, .parallel_residual = {"use_parallel_residual", true},
     .dropout = {.hidden = "hidden_dropout"}},
    // DeepseekV2/V3Config: multi-head latent attention, n_shared_experts + n_routed_experts of
    // moe_intermediate_size after first_k_dense_replace dense layers (every moe_layer_freq-th).
    // DeepseekV3TopkRouter hands the experts fp32 weights (measured, probe_s7.py), DeepseekV2Moe too
    // (softmax(dtype=float32), top-k, times routed_scaling_factor, not cast back); the experts run
    // through integrations/moe.py (@use_experts_implementation). The attention caches the compressed
    // latent and the rotary key (transformers 5.17: past_key_values.update(kv_nope, k_rot) before
    // expand_kv; printed on the H200, tests/accuracy/arch/run_s10.sh). Until session 10 these rows
    // counted a per-head cache with the generic expert rule, two errors that offset on the measured
    // minis (4-6 layers) but not on real models (DeepSeek-V3's per-head cache is 71 times its
    // latent); with the source's rules the generates of deepseek-v2-mini, deepseek-v3-mini,
    // glm47flash-mini and glm47flash-4l are -0.09%, +0.09%, +0.11% and -0.07% (were up to -3.49%).
    {.model_type = "deepseek_v2", .layout = L::deepseek, .family = "deepseek",
     .source = "deepseek_v2/modeling_deepseek_v2.py", .experts = Experts::n_routed_experts, .default_experts = 64,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::first_k_dense,
     .shared_expert = SharedExpert::n_shared, .fp32_routing_weights = true, .grouped_experts = true,
     .mla_latent_cache = true},
    {.model_type = "deepseek_v3", .layout = L::deepseek, .family = "deepseek",
     .source = "deepseek_v3/modeling_deepseek_v3.py", .experts = Experts::n_routed_experts, .default_experts = 256,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::first_k_dense,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .grouped_experts = true, .mla_latent_cache = true},
    // PhiConfig (phi-2): parallel attention and MLP after one input_layernorm, LayerNorm,
    // partial_rotary_factor=0.5, gelu_new, resid_pdrop/embd_pdrop, lm_head with a bias;
    // qk_layernorm adds LayerNorm(head_dim) on q and k.
    {.model_type = "phi", .layout = L::phi, .family = "phi", .source = "phi/modeling_phi.py",
     .qk_norm = Q::head_dim_layer, .qk_norm_on = {"qk_layernorm"}, .rotary_fraction = 0.5,
     .activation = A::gelu_tanh_python, .norm = N::layer, .parallel_residual = kAlways, .parallel_one_norm = true,
     .dropout = {.hidden = "resid_pdrop", .embedding = "embd_pdrop"}, .lm_head_bias = kAlways},
    // Starcoder2Config: use_bias=True (every projection), LayerNorm, plain (ungated) MLP,
    // gelu_pytorch_tanh, residual_dropout/embedding_dropout, sliding_window on every layer.
    {.model_type = "starcoder2", .layout = L::starcoder2, .family = "starcoder2",
     .source = "starcoder2/modeling_starcoder2.py", .tied_default = true, .qkv_bias = {"use_bias", true},
     .o_bias = {"use_bias", true}, .sliding = S::every, .mlp_bias = {"use_bias", true},
     .activation = A::gelu_pytorch_tanh, .norm = N::layer,
     .dropout = {.hidden = "residual_dropout", .embedding = "embedding_dropout"}},
    // GptOssConfig: attention_bias=True, head_dim=64, attention sinks (one learned logit per
    // head), router with a bias, experts as fused 3-D parameters gate_up_proj [E, H, 2I] and
    // down_proj [E, I, H] with biases; alternating sliding layers. attention_sinks: eager
    // attention (5.17 refuses SDPA) over [scores | sink], softmax in the compute dtype.
    {.model_type = "gpt_oss", .source = "gpt_oss/modeling_gpt_oss.py", .head_dim = 64,
     .qkv_bias = {"attention_bias", true}, .o_bias = {"attention_bias", true}, .sliding = S::alternate,
     .experts = Experts::num_local_experts, .expert_linears = ExpertLinears::fused_gate_up_biased,
     .attention_sinks = true},
    // FalconConfig: fused query_key_value (multi-query: one k/v head; new_decoder_architecture:
    // num_kv_heads), ungated MLP of ffn_hidden_size (4 * hidden when null), LayerNorm with
    // bias, parallel attention, tie_word_embeddings=True, bias=False, activation gelu,
    // max_position_embeddings 2048. cache_all_heads: FalconAttention.forward reshapes k/v to
    // num_heads (new_decoder_architecture) before the cache.
    {.model_type = "falcon", .layout = L::falcon, .family = "falcon", .source = "falcon/modeling_falcon.py",
     .tied_default = true, .max_positions_default = 2048, .qkv_bias = {"bias"}, .o_bias = {"bias"},
     .mlp_width = W::ffn_hidden_size, .mlp_bias = {"bias"}, .activation = A::gelu, .activation_key = "activation",
     .norm = N::layer, .dropout = {.hidden = "hidden_dropout"}, .cache_all_heads = true,
     .multi_query_math_sdpa = true},
    // OPTConfig: q/k/v/out_proj and fc1/fc2 with biases (enable_bias), ffn_dim, relu, learned
    // positions offset by 2, project_in/out when word_embed_proj_dim != hidden_size, dropout 0.1
    // (OPTDecoderLayer: after attention and fc2), max_position_embeddings 2048.
    {.model_type = "opt", .layout = L::opt, .family = "opt", .source = "opt/modeling_opt.py", .tied_default = true,
     .max_positions_default = 2048, .qkv_bias = {"enable_bias", true}, .o_bias = {"enable_bias", true},
     .positions = Positions::learned, .mlp_width = W::ffn_dim, .mlp_bias = {"enable_bias", true},
     .activation = A::relu, .activation_key = "activation_function", .norm = N::layer,
     .dropout = {.hidden = "dropout", .hidden_dflt = 0.1}},
    // Llama's modules, with their own defaults. GraniteConfig: multipliers only (no extra
    // parameters); GraniteForCausalLM divides the logits by logits_scaling: scaled_logits.
    // HeliumConfig: head_dim=128. SmolLM3Config: tie_word_embeddings=True, no rotary on some
    // layers (no parameters). SeedOssConfig: head_dim=128, attention_bias=True (q, k, v),
    // attention_out_bias=False (o). Ernie4_5Config: head_dim=128, tied, use_bias on every
    // projection.
    {.model_type = "granite", .source = "granite/modeling_granite.py", .scaled_logits = true},
    {.model_type = "helium", .source = "helium/modeling_helium.py", .head_dim = 128},
    {.model_type = "smollm3", .source = "smollm3/modeling_smollm3.py", .tied_default = true},
    {.model_type = "seed_oss", .source = "seed_oss/modeling_seed_oss.py", .head_dim = 128,
     .qkv_bias = {"attention_bias", true}, .o_bias = {"attention_out_bias"}},
    {.model_type = "ernie4_5", .source = "ernie4_5/modeling_ernie4_5.py", .tied_default = true, .head_dim = 128,
     .qkv_bias = {"use_bias"}, .o_bias = {"use_bias"}, .mlp_bias = {"use_bias"}},
    // OlmoLayerNorm has no parameters. Olmo2/Olmo3: norms after attention and MLP (not before;
    // the same count), q_norm/k_norm over the whole projection; Olmo3 has sliding layers
    // (layer_types) with their own rotary.
    {.model_type = "olmo", .source = "olmo/modeling_olmo.py", .norm = N::layer_no_params},
    {.model_type = "olmo2", .source = "olmo2/modeling_olmo2.py", .qk_norm = Q::projection},
    {.model_type = "olmo3", .source = "olmo3/modeling_olmo3.py", .qk_norm = Q::projection, .rotary_tables = 2},
    // rotary_cat (glm, glm4): apply_rotary_pos_emb rotates q[..., :rotary_dim] and concatenates
    // the rest back (torch.cat), so o_proj saves a contiguous copy in training (measured: glm's
    // training was 0.62% under without it, exact with it). phi and stablelm concatenate too, but
    // their measured training does not show the copy (phi +1.19%, stablelm qk_layernorm +3.55%
    // with it): left without it.
    // GlmConfig / Glm4Config: fused gate_up_proj, attention_bias=True (q, k, v; not o),
    // head_dim=128, partial_rotary_factor=0.5; Glm4 adds post_self_attn and post_mlp norms.
    {.model_type = "glm", .source = "glm/modeling_glm.py", .head_dim = 128, .qkv_bias = {"attention_bias", true},
     .o_bias = {}, .rotary_fraction = 0.5, .fused_gate_up = true, .rotary_cat = true},
    {.model_type = "glm4", .source = "glm4/modeling_glm4.py", .head_dim = 128, .qkv_bias = {"attention_bias", true},
     .o_bias = {}, .rotary_fraction = 0.5, .fused_gate_up = true, .layer_norms = 4, .rotary_cat = true},
    // GraniteMoeConfig / PhimoeConfig: num_local_experts experts of intermediate_size in every
    // layer, like mixtral; Phimoe's norms are LayerNorms with biases, its lm_head has a bias
    // with lm_head_bias (False), its sliding_window covers every layer.
    // GraniteMoeForCausalLM divides the logits by logits_scaling, as granite does.
    {.model_type = "granitemoe", .source = "granitemoe/modeling_granitemoe.py",
     .experts = Experts::num_local_experts, .scaled_logits = true, .grouped_experts = true},
    {.model_type = "phimoe", .source = "phimoe/modeling_phimoe.py", .sliding = S::every, .norm = N::layer,
     .lm_head_bias = {"lm_head_bias"}, .experts = Experts::num_local_experts, .grouped_experts = true},
    // CohereConfig / Cohere2Config: one LayerNorm without bias per layer, attention and MLP in
    // parallel, tied embeddings; cohere's optional q/k norms over (heads, head_dim)
    // (use_qk_norm); cohere2's sliding layers (3 of every 4: sliding_window_pattern 4).
    // Both multiply the logits by logit_scale in CohereForCausalLM.forward: scaled_logits.
    {.model_type = "cohere", .source = "cohere/modeling_cohere.py", .tied_default = true, .qk_norm = Q::per_head,
     .qk_norm_on = {"use_qk_norm"}, .norm = N::layer_no_bias, .parallel_residual = kAlways,
     .parallel_one_norm = true, .scaled_logits = true},
    {.model_type = "cohere2", .source = "cohere2/modeling_cohere2.py", .tied_default = true, .sliding = S::pattern,
     .sliding_pattern = 4, .norm = N::layer_no_bias, .parallel_residual = kAlways, .parallel_one_norm = true,
     .scaled_logits = true},
    // Exaone4Config: norms after attention and MLP only (the same count), q/k norms over head_dim.
    {.model_type = "exaone4", .source = "exaone4/modeling_exaone4.py", .qk_norm = Q::head_dim},
    // StableLmConfig: LayerNorms with biases, partial_rotary_factor=0.25, q/k/v biases with
    // use_qkv_bias, per-head LayerNorms (no bias) with qk_layernorm, one norm and parallel
    // attention and MLP with use_parallel_residual.
    {.model_type = "stablelm", .source = "stablelm/modeling_stablelm.py", .qkv_bias = {"use_qkv_bias"},
     .o_bias = {}, .qk_norm = Q::per_head, .qk_norm_on = {"qk_layernorm"}, .rotary_fraction = 0.25,
     .norm = N::layer, .parallel_residual = {"use_parallel_residual"}, .parallel_one_norm = true},
    // HunYuanDenseV1Attention: query_layernorm / key_layernorm (RMSNorm over head_dim) always.
    {.model_type = "hunyuan_v1_dense", .source = "hunyuan_v1_dense/modeling_hunyuan_v1_dense.py",
     .qk_norm = Q::head_dim},
    // GPTJConfig: n_embd/n_layer/n_head, n_positions 2048, one ln_1 (LayerNorm with bias)
    // feeding attention and MLP in parallel, q/k/v/out_proj without biases, fc_in/fc_out with
    // biases (n_inner or 4 * n_embd), gelu_new, lm_head with a bias, untied; embed_positions
    // (n_positions x rotary_dim, fp32) per layer, a buffer. Eager attention only.
    // fp32_qk: GPTJAttention._attn casts q and k to fp32 for the scores.
    {.model_type = "gptj", .layout = L::gptj, .family = "gptj", .source = "gptj/modeling_gptj.py",
     .keys = ConfigKeys::gpt2, .max_positions_default = 2048, .positions = Positions::sincos_table,
     .mlp_width = W::n_inner, .activation = A::gelu_tanh_python, .activation_key = "activation_function",
     .norm = N::layer, .parallel_residual = kAlways, .parallel_one_norm = true, .lm_head_bias = kAlways,
     .eager_only = true, .fp32_qk = true},
    // BloomConfig: word_embeddings_layernorm after the embeddings, fused query_key_value and
    // dense (biases), MLP of 4 * hidden (biases), ALiBi (no position parameters), tied. Eager only.
    // BloomGelu: the tanh approximation written out, under a custom autograd Function in
    // training that saves only its input (as a native activation does): counted as gelu.
    // BloomAttention keeps the baddbmm scores (alibi + q k^T) and the masked copy while
    // softmax(dtype=float32) makes its fp32 copy and output: 6 buffers by the source; measured
    // 14.3 bytes a score on a 4096-token prefill (2 configs), so 7 (one more, the ALiBi add).
    {.model_type = "bloom", .layout = L::bloom, .family = "bloom", .source = "bloom/modeling_bloom.py",
     .tied_default = true, .positions = Positions::alibi, .mlp_width = W::four_hidden, .activation = A::gelu,
     .norm = N::layer, .eager_only = true, .eager_scores = 7},
    // MptConfig: d_model/n_layers/n_heads, Wqkv and out_proj, up_proj/down_proj of
    // expansion_ratio * d_model, LayerNorms; no_bias (default True) drops every bias, norms
    // included; ALiBi; tied; MptMLP: nn.GELU(approximate="none"). Eager only. MptAttention:
    // scores, + position_bias, masked_fill, softmax(scores.float()): llama's 5 buffers by the
    // source; measured 12.3-12.4 bytes a score on 1024- and 4096-token forwards (2 configs), so 6
    // (one more, the ALiBi add).
    {.model_type = "mpt", .layout = L::mpt, .family = "mpt", .source = "mpt/modeling_mpt.py", .tied_default = true,
     .qkv_bias = {"no_bias", false, true}, .o_bias = {"no_bias", false, true}, .positions = Positions::alibi,
     .mlp_width = W::expansion_ratio, .mlp_bias = {"no_bias", false, true}, .activation = A::gelu,
     .norm = N::layer, .eager_only = true, .eager_scores = 6},
    // Glm4MoeConfig (GLM-4.5, 4.5-Air, 4.6, 4.7): Llama's attention with q/k/v biases
    // (attention_bias; o_proj never), partial_rotary_factor 0.5 (rotary_cat as glm4), q/k norms over
    // head_dim with use_qk_norm; after first_k_dense_replace dense layers (intermediate_size),
    // n_routed_experts fused experts of moe_intermediate_size, a router `gate` without bias, its
    // e_score_correction_bias buffer (fp32), and one shared MLP of moe_intermediate_size *
    // n_shared_experts. The MTP layer (num_nextn_predict_layers) is not built by transformers.
    // Glm4MoeTopkRouter computes its logits in fp32 and returns `scores.gather(1, topk_indices)`
    // (fp32) to the experts: fp32_routing_weights (the generates were 3.58% and 7.29% under).
    {.model_type = "glm4_moe", .source = "glm4_moe/modeling_glm4_moe.py", .qkv_bias = {"attention_bias"},
     .o_bias = {}, .qk_norm = Q::head_dim, .qk_norm_on = {"use_qk_norm"}, .rotary_fraction = 0.5,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::n_routed_experts, .default_experts = 128,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::first_k_dense,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .grouped_experts = true, .rotary_cat = true},
    // Dots1Config (dots.llm1): qwen3's attention (q/k norms over head_dim, attention_bias) and
    // deepseek_v3's MoE (first_k_dense_replace, n_routed_experts of moe_intermediate_size,
    // e_score_correction_bias buffer, n_shared_experts); sliding layers from layer_types (the
    // config builds them from sliding_window and max_window_layers, 62: none by default).
    {.model_type = "dots1", .source = "dots1/modeling_dots1.py", .qk_norm = Q::head_dim,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::n_routed_experts,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::first_k_dense,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .grouped_experts = true},
    // Ernie4_5_MoeConfig (ERNIE-4.5-21B-A3B, 300B-A47B): head_dim = hidden / heads, tied;
    // sparse layers from moe_layer_start_index to moe_layer_end_index every moe_layer_interval,
    // moe_num_experts fused experts of moe_intermediate_size (moe_k per token), an fp32 router
    // `gate` without bias, Ernie4_5_MoeStatics' e_score_correction_bias parameter, and a shared
    // MLP of moe_intermediate_size * moe_num_shared_experts. use_bias (every projection) is
    // refused: the published checkpoints have it false. The MTP layers are not built.
    {.model_type = "ernie4_5_moe", .source = "ernie4_5_moe/modeling_ernie4_5_moe.py", .tied_default = true,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::moe_num_experts,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::start_end_interval,
     .shared_expert = SharedExpert::n_shared, .router_score_bias_parameter = true, .top_k_key = "moe_k",
     .n_shared_key = "moe_num_shared_experts", .refused_if_true = "use_bias", .grouped_experts = true},
    // HunYuanMoEV1Config (Hunyuan-A13B): every layer sparse, num_experts experts as wide as
    // intermediate_size (5.17 reads no moe_intermediate_size) chosen moe_topk a token (an int or
    // one per layer), an fp32 router `gate.wg`, and a shared_mlp of intermediate_size (always:
    // 5.17 reads no use_mixed_mlp_moe); query_layernorm / key_layernorm over head_dim.
    {.model_type = "hunyuan_v1_moe", .source = "hunyuan_v1_moe/modeling_hunyuan_v1_moe.py", .qk_norm = Q::head_dim,
     .experts = Experts::num_experts, .shared_expert = SharedExpert::dense_width, .fp32_routing_weights = true,
     .top_k_key = "moe_topk",
     .grouped_experts = true},
    // Llama4TextConfig / Llama4TextModel (Llama 4 Scout, Maverick): head_dim=128; q/k/v/o
    // without biases (attention_bias); Llama4TextL2Norm on q and k with use_qk_norm (True),
    // only on the layers that rotate; MoE layers (moe_layers, else every
    // interleave_moe_layer_step-th) of num_local_experts fused experts of intermediate_size, a
    // router without bias and a shared expert as wide, run densely (dense_experts); dense layers
    // of intermediate_size_mlp; chunked attention (attention_chunk_size) on the rotary layers;
    // attn_temperature_tuning scales q on the others (no parameters).
    {.model_type = "llama4_text", .source = "llama4/modeling_llama4.py", .head_dim = 128, .qk_norm = Q::l2,
     .qk_norm_on = {"use_qk_norm", true}, .sliding = S::chunked, .mlp_width = W::intermediate_size_mlp,
     .experts = Experts::num_local_experts, .sparse_layers = SparseLayers::moe_layers,
     .shared_expert = SharedExpert::expert_width, .expert_linears = ExpertLinears::fused_gate_up,
     .dense_experts = true},
    // MiniMaxM2Config (MiniMax-M2): head_dim=128, q/k/v/o without biases; q_norm over the whole
    // q projection, k_norm over the k projection (RMSNorm); every layer sparse: num_local_experts
    // fused experts of intermediate_size, a router `gate` without bias and
    // MiniMaxM2SparseMoeBlock's e_score_correction_bias buffer (the model's dtype in a 16-bit
    // model; counted fp32 as deepseek_v3's). MiniMaxM2TopKRouter returns sigmoid(logits.float())
    // gathered: fp32 routing weights. apply_rotary_pos_emb slices and concatenates (rotary_cat).
    // 5.17 reads neither rotary_dim (the Hub config's 64: the whole head rotates, inv_freq of
    // head_dim / 2) nor the MTP keys (use_mtp, num_mtp_modules: not built) nor attn_type_list.
    {.model_type = "minimax_m2", .source = "minimax_m2/modeling_minimax_m2.py", .head_dim = 128, .qkv_bias = {},
     .o_bias = {}, .qk_norm = Q::projection, .experts = Experts::num_local_experts, .router_score_bias = true,
     .fp32_routing_weights = true, .grouped_experts = true, .rotary_cat = true},
    // ArceeConfig (AFM-4.5B): Llama's attention (attention_bias on q, k, v, o), an MLP without a
    // gate (ArceeMLP: up_proj, down_proj with mlp_bias) and hidden_act relu2
    // (ReLUSquaredActivation: relu, then torch.square).
    {.model_type = "arcee", .source = "arcee/modeling_arcee.py", .ungated_mlp = true, .activation = A::relu2},
    // ApertusConfig (Apertus-8B, 70B): Llama's attention with q_norm / k_norm over head_dim
    // (always), attention_layernorm / feedforward_layernorm (two RMSNorms, as Llama's), ApertusMLP
    // without a gate (up_proj, down_proj, no biases) and hidden_act xielu: XIELUActivation with
    // parameters alpha_p, alpha_n and buffers beta, eps; without the `xielu` CUDA package (not in
    // the measured environment) it runs _xielu_python, a chain of elementwise ops (engine).
    {.model_type = "apertus", .source = "apertus/modeling_apertus.py", .qk_norm = Q::head_dim, .ungated_mlp = true,
     .activation = A::xielu},
    // Session 8 (models of late 2025 / early 2026). Ministral3Config (Ministral 3 3B/8B/14B, the
    // language model of their mistral3 configs): MistralModel's layers, head_dim=128, sliding_window
    // on every layer when set (None by default); Ministral3Attention multiplies q by the Llama 4
    // position scale (llama_4_scaling_beta: no parameters).
    {.model_type = "ministral3", .source = "ministral3/modeling_ministral3.py", .head_dim = 128, .sliding = S::every},
    // Glm4MoeLiteConfig (GLM-4.7-Flash): DeepseekV3Attention (MLA: q_lora_rank default 768) and
    // glm4_moe's MoE (Glm4MoeTopkRouter: fp32 routing weights, e_score_correction_bias buffer;
    // n_routed_experts fused experts of moe_intermediate_size, one shared MLP of moe_intermediate_size
    // * n_shared_experts); sparse layers from mlp_layer_types (default: all but the first). The MTP
    // layer (model.layers.47) is not built. Latent cache and grouped experts, as deepseek_v3's.
    {.model_type = "glm4_moe_lite", .layout = L::deepseek, .family = "deepseek",
     .source = "glm4_moe_lite/modeling_glm4_moe_lite.py", .experts = Experts::n_routed_experts, .default_experts = 64,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::mlp_layer_types,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .grouped_experts = true, .q_lora_default = 768, .mla_latent_cache = true},
    // ExaoneMoeConfig (K-EXAONE-236B-A23B): Exaone4Attention (q/k norms over head_dim, sliding
    // layers: layer_types, else all but every sliding_window_pattern-th, 4) in OlmoeDecoderLayer's
    // pre-norm layout; sparse layers from mlp_layer_types (else after first_k_dense_replace, 1):
    // DeepseekV3TopkRouter (fp32 routing weights, e_score_correction_bias buffer), num_experts fused
    // experts of moe_intermediate_size, a shared MLP of moe_intermediate_size * num_shared_experts.
    {.model_type = "exaone_moe", .source = "exaone_moe/modeling_exaone_moe.py", .qk_norm = Q::head_dim,
     .sliding = S::pattern, .sliding_pattern = 4, .mlp_width = W::intermediate_size_if_dense,
     .experts = Experts::num_experts, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::mlp_layer_types_or_first_k, .shared_expert = SharedExpert::n_shared,
     .router_score_bias = true, .fp32_routing_weights = true, .n_shared_key = "num_shared_experts",
     .grouped_experts = true},
    // FlexOlmoConfig (FlexOlmo-7x7B): olmo2's layers (norms after attention and MLP, q/k norms over
    // the projections) with olmoe's MoE: num_experts fused experts of intermediate_size in every layer.
    {.model_type = "flex_olmo", .source = "flex_olmo/modeling_flex_olmo.py", .qk_norm = Q::projection,
     .experts = Experts::num_experts, .grouped_experts = true},
    // GraniteMoeSharedConfig: granitemoe plus GraniteMoeSharedMLP, a shared_mlp of
    // shared_intermediate_size (0 by default: none) with gate and up fused in input_linear.
    {.model_type = "granitemoeshared", .source = "granitemoeshared/modeling_granitemoeshared.py",
     .experts = Experts::num_local_experts, .shared_expert = SharedExpert::shared_intermediate_size,
     .scaled_logits = true, .grouped_experts = true},
    // NemotronConfig (Nemotron-4, Minitron): NemotronLayerNorm1P (weight and bias, applied as
    // weight + 1), an ungated MLP (up_proj, down_proj, mlp_bias) of relu2, partial_rotary_factor 0.5
    // (apply_rotary_pos_emb slices and concatenates: rotary_cat), q/k/v/o biases with attention_bias.
    {.model_type = "nemotron", .source = "nemotron/modeling_nemotron.py", .rotary_fraction = 0.5,
     .ungated_mlp = true, .activation = A::relu2, .norm = N::layer, .rotary_cat = true},
    // Jais2Config (JAIS 2): nn.LayerNorm (weight and bias) before attention and MLP and at the end,
    // an ungated MLP (up_proj, down_proj with mlp_bias) of relu2, q/k/v/o biases with attention_bias,
    // head_dim (hidden / heads when null), full rotary; lm_head untied by default.
    // Jais2Config's attention_bias and mlp_bias default to true (a config without them has the biases).
    {.model_type = "jais2", .source = "jais2/modeling_jais2.py", .qkv_bias = {"attention_bias", true},
     .o_bias = {"attention_bias", true}, .ungated_mlp = true, .mlp_bias = {"mlp_bias", true},
     .activation = A::relu2, .norm = N::layer},
    // MinistralConfig (Ministral-8B-2410): Mistral's layers with head_dim (hidden / heads when
    // null); layer_types (sliding_attention on every layer when sliding_window is set, 4096).
    {.model_type = "ministral", .source = "ministral/modeling_ministral.py", .sliding = S::every},
    // SolarOpenConfig (Solar-Open-100B; Glm4MoeConfig's keys): LlamaAttention with q/k/v biases
    // (attention_bias; o_proj never), head_dim=128, every layer glm4_moe's MoE (n_routed_experts,
    // 128, fused experts of moe_intermediate_size, fp32 routing weights, e_score_correction_bias
    // buffer, a shared MLP of moe_intermediate_size * n_shared_experts); partial_rotary_factor 1.
    {.model_type = "solar_open", .source = "solar_open/modeling_solar_open.py", .head_dim = 128,
     .qkv_bias = {"attention_bias"}, .o_bias = {}, .mlp_width = W::intermediate_size_if_dense,
     .experts = Experts::n_routed_experts, .default_experts = 128, .expert_width = ExpertWidth::moe_intermediate_size,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .grouped_experts = true},
    // VaultGemmaConfig (VaultGemma-1B; Gemma2Config's defaults): gemma2's layers without the
    // post-attention and post-feedforward norms (2 a layer), soft-capping, alternate sliding layers.
    {.model_type = "vaultgemma", .layout = L::gemma, .family = "gemma", .source = "vaultgemma/modeling_vaultgemma.py",
     .tied_default = true, .head_dim = 256, .sliding = S::alternate, .softcaps = true, .final_softcap_default = 30.0,
     .attn_softcap_default = 50.0, .activation = A::gelu_pytorch_tanh, .activation_key = "hidden_activation",
     .norm = N::rms_fp32, .scaled_embeddings = true},
    // GraniteSWAConfig (granite-swash): granite's layers (logits / logits_scaling) with a learned
    // sink per head (GraniteSWAAttention.sinks) and sliding layers (layer_types; default full at
    // i % 4 == 0); no SDPA path (_supports_sdpa = False): eager, llama's fp32 softmax plus the
    // logsumexp of the scores for the sink's sigmoid scale. Per-theta rotary modules beside the
    // unused rotary_emb: 2 tables with one layer_rope_theta.
    {.model_type = "granite_swa", .source = "granite_swa/modeling_granite_swa.py", .tied_default = true,
     .rotary_tables = 2, .sliding = S::pattern_first_full, .sliding_pattern = 4, .scaled_logits = true,
     .eager_only = true, .sink_logits = true},
    // GraniteMoeSWAConfig: granite_swa's attention (per-head sinks, eager only, the logsumexp of the
    // scores, every 4th layer full from i % 4 == 0, per-theta rotary modules) with granitemoe's
    // fused experts (num_local_experts, router without bias) and granitemoeshared's optional
    // shared_mlp (shared_intermediate_size, 0: none); logits / logits_scaling; untied by default.
    {.model_type = "granitemoe_swa", .source = "granitemoe_swa/modeling_granitemoe_swa.py", .rotary_tables = 2,
     .sliding = S::pattern_first_full, .sliding_pattern = 4, .experts = Experts::num_local_experts,
     .shared_expert = SharedExpert::shared_intermediate_size, .scaled_logits = true, .grouped_experts = true,
     .eager_only = true, .sink_logits = true},
    // Cohere2MoeConfig (Command A+ 05-2026): cohere2's parallel layer (one norm: Cohere2MoeLayerNorm,
    // weight only, or an RMSNorm of the same size when rms_norm_eps is set), head_dim=128, tied,
    // sliding layers from layer_types (else 3 of every 4), logits * logit_scale; sparse layers from
    // mlp_layer_types (else after first_k_dense_replace, popped with 0): num_experts fused experts of
    // intermediate_size through integrations/moe.py (Cohere2MoeTopKRouter casts its scores back to the
    // hidden states' dtype), a shared MLP of intermediate_size * num_shared_experts (0: none); dense
    // layers of prefix_dense_intermediate_size (intermediate_size when null).
    {.model_type = "cohere2_moe", .source = "cohere2_moe/modeling_cohere2_moe.py", .tied_default = true,
     .head_dim = 128, .sliding = S::pattern, .sliding_pattern = 4, .mlp_width = W::prefix_dense_intermediate_size,
     .norm = N::layer_no_bias, .parallel_residual = kAlways, .parallel_one_norm = true,
     .experts = Experts::num_experts, .sparse_layers = SparseLayers::mlp_layer_types_or_first_k,
     .shared_expert = SharedExpert::n_shared, .n_shared_key = "num_shared_experts", .scaled_logits = true,
     .grouped_experts = true, .first_k_dense_default = 0},
    // Not measured on the device yet (session 8 had no run left); their modules are those of measured
    // rows, their default configs count what transformers 5.17 builds (transformers_counts.json).
    // CwmConfig (facebook/cwm): LlamaConfig's keys, head_dim=128, q/k/v/o without biases, sliding
    // layers from layer_types (default: full at i % 4 == 0, sliding_window 8192).
    {.model_type = "cwm", .source = "cwm/modeling_cwm.py", .head_dim = 128, .qkv_bias = {}, .o_bias = {},
     .sliding = S::pattern_first_full, .sliding_pattern = 4},
    // MellumConfig (Mellum2-12B-A2.5B; Qwen3MoeConfig's keys): qwen3_moe's attention (q/k norms over
    // head_dim, 128) and sparse block (num_experts fused experts of moe_intermediate_size, routing
    // weights cast back), sliding layers only where layer_types says (default all full), sparse
    // layers from mlp_layer_types (default all; dense ones of intermediate_size). A rotary table per
    // layer type present (one by default).
    {.model_type = "mellum", .source = "mellum/modeling_mellum.py", .head_dim = 128, .qk_norm = Q::head_dim,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::num_experts,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::mlp_layer_types_or_first_k,
     .grouped_experts = true, .first_k_dense_default = 0},
    // Session 10 (arch3). Gemma4TextConfig (Gemma 4: E2B/E4B with per-layer inputs and KV-shared
    // layers, 31B dense, 26B-A4B with the MoE block): Layout::gemma4 lays out each layer from the
    // config (config.cpp lay_out_gemma4); Gemma4RMSNorm computes in fp32 and multiplies the weight in
    // fp32 (as gemma's, without the + 1); q_norm / k_norm over head_dim; sliding layers from layer_types
    // (default all but every 6th, the last forced full); embeddings scaled by sqrt(hidden); the experts
    // through integrations/moe.py (@use_experts_implementation) with fp32 routing weights
    // (softmax(dtype=float32), top-k, times per_expert_scale).
    {.model_type = "gemma4_text", .layout = L::gemma4, .family = "gemma", .source = "gemma4/modeling_gemma4.py",
     .tied_default = true, .head_dim = 256, .nested_defaults = {"Gemma4TextConfig", kGemma4TextDefaults},
     .qk_norm = Q::head_dim, .rotary_tables = 2, .sliding = S::pattern, .sliding_pattern = 6,
     .activation = A::gelu_pytorch_tanh, .activation_key = "hidden_activation", .norm = N::rms_fp32,
     .layer_norms = 4, .scaled_embeddings = true, .fp32_routing_weights = true, .grouped_experts = true},
    // MiniCPM3Config (openbmb/MiniCPM3-4B): DeepseekV2Attention's modules (MLA, q_lora_rank 768) with a
    // dense Llama MLP in every layer, tied, MiniCPM3ScaledWordEmbedding (x * scale_emb), residual
    // branches scaled by scale_depth / sqrt(L) and the final hidden states divided before lm_head (no
    // parameters). v_head_dim null: hidden / heads. The cache keeps the compressed latent and the rotary
    // key (past_key_values.update(k_pass, k_rot)); each layer expands them with kv_b_proj.
    {.model_type = "minicpm3", .layout = L::deepseek, .family = "deepseek", .source = "minicpm3/modeling_minicpm3.py",
     .tied_default = true, .scaled_embeddings = true, .q_lora_default = 768, .mla_v_head_dim_from_heads = true,
     .mla_latent_cache = true},
    // YoutuConfig (Youtu-LLM): DeepseekV3Attention's MLA (q_lora_rank 1536, rope_interleave) with a dense
    // Llama MLP in every layer, tied; the cache keeps the latent as minicpm3's.
    {.model_type = "youtu", .layout = L::deepseek, .family = "deepseek", .source = "youtu/modeling_youtu.py",
     .tied_default = true, .mla_latent_cache = true},
    // HYV3Config (Hunyuan 3): qwen3's attention (q/k norms over head_dim, 128); sparse layers from
    // mlp_layer_types (default all but the first): HYV3TopKRouter `gate` (fp32 logits, sigmoid, the gathered
    // fp32 weights to the experts), the e_score_correction_bias buffer (fp32), num_experts fused experts of
    // moe_intermediate_size and a shared MLP of moe_intermediate_size * num_shared_experts.
    {.model_type = "hy_v3", .source = "hy_v3/modeling_hy_v3.py", .head_dim = 128, .qk_norm = Q::head_dim,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::num_experts,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::mlp_layer_types,
     .shared_expert = SharedExpert::n_shared, .router_score_bias = true, .fp32_routing_weights = true,
     .n_shared_key = "num_shared_experts", .grouped_experts = true},
    // HyperCLOVAXConfig (HyperCLOVA X SEED): Llama's modules with post_norm1 / post_norm2 after attention and
    // MLP (use_post_norm, true), granite-like multipliers (no parameters) and logits * logits_scaling.
    {.model_type = "hyperclovax", .source = "hyperclovax/modeling_hyperclovax.py", .scaled_logits = true,
     .post_norms = {"use_post_norm", true}},
    // AXK1Config (A.X K1): deepseek_v3's layers (MLA, DeepseekV3TopkRouter's fp32 weights and score-bias
    // buffer, 192 routed experts and n_shared_experts after first_k_dense_replace dense layers) with
    // AXK1MoE.post_mlp_layernorm on each sparse block's output; the cache keeps the latent
    // (past_key_values.update(kv_nope, k_rot)) and the experts run through integrations/moe.py
    // (@use_experts_implementation): measured, axk1-mini's generate was 8.16% under with the generic
    // expert rule (deepseek_v3's row then), +0.11% with this one.
    {.model_type = "axk1", .layout = L::deepseek, .family = "deepseek", .source = "axk1/modeling_axk1.py",
     .experts = Experts::n_routed_experts, .default_experts = 192, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::first_k_dense, .shared_expert = SharedExpert::n_shared, .router_score_bias = true,
     .fp32_routing_weights = true, .grouped_experts = true, .mla_latent_cache = true, .moe_post_norm = true},
    // AfmoeConfig (Arcee Trinity): q/k norms over head_dim (128), an output gate `output * sigmoid(gate_proj(x))`
    // of heads x head_dim, sliding layers (layer_types; default all but every 4th), pre/post norms around
    // attention and MLP (4); after num_dense_layers (1) dense layers: a router `router.gate` (fp32 sigmoid
    // weights to the experts), the expert_bias parameter, num_experts fused experts of moe_intermediate_size
    // and a shared MLP of moe_intermediate_size * num_shared_experts.
    {.model_type = "afmoe", .source = "afmoe/modeling_afmoe.py", .head_dim = 128, .qk_norm = Q::head_dim,
     .sliding = S::pattern, .sliding_pattern = 4, .mlp_width = W::intermediate_size_if_dense, .layer_norms = 4,
     .experts = Experts::num_experts, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::mlp_layer_types_or_first_k, .shared_expert = SharedExpert::n_shared,
     .router_score_bias_parameter = true, .fp32_routing_weights = true, .n_shared_key = "num_shared_experts",
     .grouped_experts = true, .attn_gate = "gate_proj", .first_k_dense_key = "num_dense_layers"},
    // LagunaConfig (poolside Laguna): q/k norms over head_dim (128), an output gate g_proj (softplus of its fp32
    // copy; one value a head with gating true or "per-head", else heads x head_dim), sliding layers only where
    // layer_types says; sparse layers from mlp_layer_types (default all but the first): LagunaTopKRouter
    // `gate` with its e_score_correction_bias parameter (weights cast back to the hidden states' dtype),
    // num_experts fused experts of moe_intermediate_size and shared_experts of shared_expert_intermediate_size.
    // num_attention_heads_per_layer other than num_attention_heads is refused.
    {.model_type = "laguna", .source = "laguna/modeling_laguna.py", .head_dim = 128, .qk_norm = Q::head_dim,
     .mlp_width = W::intermediate_size_if_dense, .experts = Experts::num_experts,
     .expert_width = ExpertWidth::moe_intermediate_size, .sparse_layers = SparseLayers::mlp_layer_types,
     .shared_expert = SharedExpert::shared_expert_intermediate_size, .router_score_bias_parameter = true,
     .grouped_experts = true, .attn_gate = "g_proj", .attn_gate_per_head_key = "gating",
     .heads_per_layer_key = "num_attention_heads_per_layer"},
    // Remote-code types (trust_remote_code; not in transformers 5.17, so counted by hand from
    // their modeling files, tests/unit/spec/config_test.cpp, not built on the device).
    // ExaoneConfig / modeling_exaone.py (LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct, EXAONE 3.5):
    // num_layers, activation_function, intermediate_size (4 * hidden when null),
    // tie_word_embeddings=True; ExaoneModel: wte, h.N.ln_1 / ln_2 (RMSNorm), attn.attention.
    // q_proj, k_proj, v_proj, out_proj and mlp.c_fc_0 (gate), c_fc_1 (up), c_proj (down), all
    // without biases; ln_f; lm_head.
    {.model_type = "exaone", .source = "remote code: LGAI-EXAONE modeling_exaone.py", .tied_default = true,
     .mlp_width = W::intermediate_size_or_4h,
     .names = {.o = "out_proj", .gate = "c_fc_0", .up = "c_fc_1", .down = "c_proj"},
     .activation_key = "activation_function"},
    // InternLM2Config / modeling_internlm2.py (internlm/internlm2_5-7b-chat): bias=True by
    // default on wqkv and wo (every real config sets false); attention.wqkv, one projection of
    // (heads + 2 kv_heads) x head_dim (head_dim = hidden / heads), attention.wo;
    // feed_forward.w1 (gate), w3 (up), w2 (down) without biases; attention_norm, ffn_norm
    // (RMSNorm); tok_embeddings and output untied.
    {.model_type = "internlm2", .source = "remote code: internlm modeling_internlm2.py", .qkv_bias = {"bias", true},
     .o_bias = {"bias", true}, .names = {.o = "wo", .qkv = "wqkv", .gate = "w1", .up = "w3", .down = "w2"}},
    // GPTBigCodeConfig: GPT-2's modules and keys, activation_function gelu_pytorch_tanh;
    // multi_query (default) shrinks c_attn to one k/v head; a causal-mask buffer.
    {.model_type = "gpt_bigcode", .layout = L::gpt2, .family = "gpt2", .source = "gpt_bigcode/modeling_gpt_bigcode.py",
     .keys = ConfigKeys::gpt2, .tied_default = true, .max_positions_default = 1024, .kv_heads = KvHeads::multi_query,
     .positions = Positions::learned, .mlp_width = W::n_inner, .activation = A::gelu_pytorch_tanh,
     .activation_key = "activation_function", .norm = N::layer, .dropout = kGpt2Dropouts,
     .causal_mask_buffer = true},
    // Qwen3NextConfig (Qwen3-Next-80B-A3B): a hybrid (linear_mixer: spec/hybrid.cpp lays out its
    // Qwen3NextGatedDeltaNet layers, the "linear_attention" entries of layer_types, by default all but
    // every full_attention_interval-th); Qwen3NextAttention on the others: head_dim=256, q_norm/k_norm over
    // head_dim, a gated q_proj, partial_rotary_factor 0.25, attention_bias=False. Qwen3NextRMSNorm scales
    // by (1 + weight) in fp32. qwen2_moe's sparse block (num_experts fused experts of
    // moe_intermediate_size, decoder_sparse_step and mlp_only_layers; num_experts 0: dense layers of
    // intermediate_size) with its sigmoid-gated shared expert (shared_expert_intermediate_size).
    // Qwen3NextTopKRouter casts its fp32 top-k weights back to the logits' dtype (not fp32_routing_weights).
    {.model_type = "qwen3_next", .source = "qwen3_next/modeling_qwen3_next.py", .head_dim = 256,
     .qk_norm = Q::head_dim, .rotary_fraction = 0.25, .mlp_width = W::intermediate_size_if_dense, .norm = N::rms_fp32,
     .experts = Experts::num_experts_or_dense, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::step, .shared_expert = SharedExpert::gated, .grouped_experts = true,
     .linear_mixer = LinearMixer::gated_delta_net},
    // Qwen3_5TextConfig (the language model of Qwen3.5's Qwen3_5ForConditionalGeneration, text_config
    // model_type qwen3_5_text; spec/vision.cpp has the tower): qwen3_next's hybrid (Qwen3_5Attention is
    // Qwen3NextAttention, Qwen3_5RMSNorm Qwen3NextRMSNorm: (1 + weight) in fp32, Qwen3_5RMSNormGated over
    // head_v_dim) with Qwen3_5GatedDeltaNet's split projections (in_proj_qkv, in_proj_z, in_proj_b,
    // in_proj_a) and a dense Qwen3_5MLP of intermediate_size in every layer (the config class deletes the
    // MoE keys). partial_rotary_factor 0.25 (__post_init__'s default), head_dim 256, attention_bias False,
    // tie_word_embeddings False (the outer config's decides, config.cpp). The checkpoint's MTP layer
    // (mtp.*) is not built.
    {.model_type = "qwen3_5_text", .source = "qwen3_5/modeling_qwen3_5.py", .head_dim = 256,
     .nested_defaults = {"Qwen3_5TextConfig", kQwen3_5TextDefaults}, .qk_norm = Q::head_dim, .rotary_fraction = 0.25,
     .norm = N::rms_fp32, .linear_mixer = LinearMixer::gated_delta_net_split},
    // Qwen3_5MoeTextConfig (Qwen3.5's MoE language models, text_config model_type qwen3_5_moe_text): as
    // qwen3_5_text, with Qwen3_5MoeSparseMoeBlock in every layer (Qwen3_5MoeDecoderLayer ignores
    // decoder_sparse_step and mlp_only_layers): num_experts fused experts (Qwen3_5MoeExperts: gate_up_proj
    // [E, 2I, H], down_proj [E, H, I], run through integrations/moe.py) of moe_intermediate_size, the router
    // `gate` (Qwen3_5MoeTopKRouter: E x H, no bias; it casts its top-k weights back to the logits' dtype,
    // not fp32_routing_weights) and qwen2_moe's sigmoid-gated shared expert (shared_expert_intermediate_size,
    // shared_expert_gate H -> 1).
    {.model_type = "qwen3_5_moe_text", .source = "qwen3_5_moe/modeling_qwen3_5_moe.py", .head_dim = 256,
     .nested_defaults = {"Qwen3_5MoeTextConfig", kQwen3_5MoeTextDefaults}, .qk_norm = Q::head_dim,
     .rotary_fraction = 0.25, .mlp_width = W::intermediate_size_if_dense, .norm = N::rms_fp32,
     .experts = Experts::num_experts, .expert_width = ExpertWidth::moe_intermediate_size,
     .sparse_layers = SparseLayers::every, .shared_expert = SharedExpert::gated, .grouped_experts = true,
     .linear_mixer = LinearMixer::gated_delta_net_split},
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
    "audio_config",      "is_encoder_decoder", "encoder_layers",
    // Multi-head latent attention and DeepSeek-V3.2's sparse-attention indexer (DeepseekV32Config);
    // Gemma3nTextConfig's AltUp streams and per-layer embeddings.
    "kv_lora_rank", "index_topk", "altup_num_inputs", "hidden_size_per_layer_input",
    // transformers 5.17's newest: Gemma4TextConfig's shared KV layers and MoE block, sparse-attention
    // indexers (MiniMaxM3VLTextConfig index_n_heads), per-layer head counts (LagunaConfig),
    // hyper-connections (DeepseekV4Config, HYV4Config hc_mult).
    "num_kv_shared_layers", "enable_moe_block", "index_n_heads", "num_attention_heads_per_layer", "hc_mult"};

/// Keys of attention whose cache is not a Llama-like decoder's keys and values of every layer: a
/// compressed latent (kv_lora_rank: DeepSeek-V2/V3's MLA, vLLM's is_deepseek_mla types kimi_k2 and
/// longcat_flash), a sparse-attention indexer's own cache (index_topk, index_n_heads), layers that
/// reuse another layer's cache (num_kv_shared_layers), per-layer head counts, per-layer inputs
/// (gemma3n's hidden_size_per_layer_input, altup_num_inputs) and hyper-connections (hc_mult).
constexpr std::string_view kCacheLayoutKeys[] = {"kv_lora_rank",         "index_topk",
                                                 "index_n_heads",        "num_kv_shared_layers",
                                                 "altup_num_inputs",     "hidden_size_per_layer_input",
                                                 "num_attention_heads_per_layer", "hc_mult"};

/// Keys of layers that are not attention, from the transformers 5.17 config classes (and the
/// remote-code ones named): MambaConfig / Mamba2Config / FalconMambaConfig state_size;
/// JambaConfig, BambaConfig, FalconH1Config, Zamba2Config, GraniteMoeHybridConfig mamba_d_state
/// (and mamba_d_conv, attn_layer_indices, attn_layer_period, layers_block_type, hybrid_layer_ids);
/// NemotronHConfig hybrid_override_pattern, ssm_state_size, mamba_num_heads; Qwen3NextConfig
/// linear_num_key_heads, linear_conv_kernel_dim; Lfm2Config / Lfm2MoeConfig conv_L_cache,
/// full_attn_idxs; MiniMaxConfig attn_type_list; KimiLinearConfig linear_attn_config;
/// RecurrentGemmaConfig block_types, lru_width; the remote ssm_cfg and d_state.
constexpr std::string_view kLayerKindKeys[] = {
    "state_size",        "ssm_cfg",          "d_state",           "mamba_d_state",     "mamba_d_conv",
    "mamba_d_ssm",       "ssm_state_size",   "mamba_num_heads",   "hybrid_override_pattern",
    "attn_layer_indices", "attn_layer_period", "layers_block_type", "hybrid_layer_ids",
    "linear_num_key_heads", "linear_conv_kernel_dim", "conv_L_cache", "full_attn_idxs", "linear_attn_config",
    "attn_type_list",    "block_types",      "lru_width",
    // Recurrences and short convolutions of transformers 5.17's newest: HrmTextConfig's H/L cycles
    // (layers run several times a token), InklingConfig's conv_kernel_size.
    "H_cycles", "L_cycles", "conv_kernel_size"};

}  // namespace

std::span<const Architecture> architectures() noexcept { return kArchitectures; }

const Architecture* find_architecture(std::string_view model_type) noexcept {
  const auto it = std::find_if(std::begin(kArchitectures), std::end(kArchitectures),
                               [&](const Architecture& a) { return a.model_type == model_type; });
  return it == std::end(kArchitectures) ? nullptr : &*it;
}

const Architecture* find_architecture_by_class(std::string_view hf_class) noexcept {
  constexpr std::string_view kCausalLm = "ForCausalLM", kText = "_text";
  if (hf_class.size() <= kCausalLm.size() || !hf_class.ends_with(kCausalLm)) return nullptr;
  const std::string_view name = hf_class.substr(0, hf_class.size() - kCausalLm.size());
  const auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  for (const Architecture& a : kArchitectures) {
    std::string_view type = a.model_type;
    if (type.ends_with(kText)) type.remove_suffix(kText.size());
    std::size_t i = 0;  // walks `name` while both are read without their underscores
    bool same = true;
    for (const char ch : type) {
      if (ch == '_') continue;
      while (i < name.size() && name[i] == '_') ++i;
      if (i == name.size() || lower(name[i]) != ch) {
        same = false;
        break;
      }
      ++i;
    }
    while (same && i < name.size() && name[i] == '_') ++i;
    if (same && i == name.size()) return &a;
  }
  return nullptr;
}

std::optional<NotDecoder> not_decoder(std::string_view model_type) noexcept {
  for (const auto& [type, kind] : kNotDecoders)
    if (type == model_type) return kind;
  return std::nullopt;
}

std::span<const std::string_view> structure_keys() noexcept { return kStructureKeys; }

std::span<const std::string_view> layer_kind_keys() noexcept { return kLayerKindKeys; }

std::span<const std::string_view> cache_layout_keys() noexcept { return kCacheLayoutKeys; }

bool attention_layer_kind(std::string_view kind) noexcept {
  // configuration_utils.py remaps the legacy "attention" to "full_attention" (and "mamba" to
  // "linear_attention").
  return kind == "full_attention" || kind == "sliding_attention" || kind == "chunked_attention" ||
         kind == "attention";
}

const Architecture& generic_architecture() noexcept {
  // An unknown model_type estimated from its checkpoint's headers: laid out as Llama, its
  // sliding_window (if any) on every layer.
  static constexpr Architecture kGeneric{.model_type = "", .family = "generic", .sliding = S::every};
  return kGeneric;
}

}  // namespace vramfit::spec
