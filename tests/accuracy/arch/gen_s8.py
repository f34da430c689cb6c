# Session 8's batch: the types added then (ministral3, ministral, glm4_moe_lite, exaone_moe, flex_olmo,
# granitemoeshared, nemotron), each at a small random-weight config with a released model's proportions,
# narrowed; five cases each (gen_s7's: forward, generate of 4096 tokens, training, checkpointed
# training, LoRA r16 all-linear checkpointed).
#   python3 gen_s8.py OUTDIR   (writes OUTDIR/models/*.json and OUTDIR/cases_s8.json)
#   then on the device: python3 measure.py cases_s8.json results_s8.jsonl --deadline 200
#   python3 gen_s8.py OUTDIR --second   (the second run's: OUTDIR/cases_s8b.json)
import json, os, sys

from gen_s7 import cases

M = {}
# Ministral-3-8B's proportions (hidden 4096, 32 heads of 128, 8 kv heads, MLP 14336, vocab 131072;
# Ministral3Config's default rope_parameters: yarn with llama_4_scaling_beta 0.1), narrowed.
M["ministral3-mini"] = dict(model_type="ministral3", hidden_size=1024, intermediate_size=3584, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=131072, max_position_embeddings=262144,
    tie_word_embeddings=False)
# Ministral-8B-2410's proportions (hidden 4096, 32 heads, 8 kv heads, MLP 12288), narrowed; a sliding
# window shorter than the generate's prompt.
M["ministral-mini"] = dict(model_type="ministral", hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
    num_key_value_heads=4, num_hidden_layers=8, vocab_size=131072, max_position_embeddings=32768,
    sliding_window=1024, tie_word_embeddings=False)
# GLM-4.7-Flash's proportions (hidden 2048, 20 heads, MLA q_lora 768 / kv_lora 512, nope 192, rope 64,
# v 256, 64 experts of 1536, top 4, 1 shared, first layer dense), narrowed.
M["glm47flash-mini"] = dict(model_type="glm4_moe_lite", hidden_size=1024, intermediate_size=2816,
    moe_intermediate_size=512, n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=1,
    topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.8, num_attention_heads=8, num_key_value_heads=8,
    q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=96, qk_rope_head_dim=32, v_head_dim=128,
    num_hidden_layers=6, vocab_size=154880, max_position_embeddings=202752, tie_word_embeddings=False)
# K-EXAONE's proportions (sliding 3 of 4 layers, q/k norms, first layer dense, 1 shared expert,
# sigmoid router with a score bias), narrowed: 16 experts of 512, top 4.
M["kexaone-mini"] = dict(model_type="exaone_moe", hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
    num_experts=16, num_experts_per_tok=4, num_shared_experts=1, first_k_dense_replace=1, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=102400, sliding_window=1024,
    sliding_window_pattern=4, max_position_embeddings=32768, tie_word_embeddings=False)
# FlexOlmo-7x7B's proportions (7 experts, 5 a token, olmo2 norms), narrowed.
M["flexolmo-mini"] = dict(model_type="flex_olmo", hidden_size=1024, intermediate_size=1536, num_experts=7,
    num_experts_per_tok=5, num_attention_heads=16, num_key_value_heads=16, num_hidden_layers=8, vocab_size=100352,
    max_position_embeddings=8192, tie_word_embeddings=False)
# granitemoeshared with a shared MLP (shared_intermediate_size) beside 16 experts of 512.
M["granitemoeshared-mini"] = dict(model_type="granitemoeshared", hidden_size=1024, intermediate_size=512,
    shared_intermediate_size=1024, num_local_experts=16, num_experts_per_tok=4, num_attention_heads=16,
    num_key_value_heads=8, num_hidden_layers=8, vocab_size=49155, embedding_multiplier=12.0, logits_scaling=6.0,
    residual_multiplier=0.22, attention_multiplier=0.015625, tie_word_embeddings=True, max_position_embeddings=8192)
# Minitron-4B's proportions (hidden 3072, 24 heads of 128, 8 kv heads, relu2 MLP of 9216, vocab 256000,
# partial rotary 0.5), narrowed.
M["nemotron-mini"] = dict(model_type="nemotron", hidden_size=1024, intermediate_size=3072, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=256000, partial_rotary_factor=0.5,
    max_position_embeddings=8192, tie_word_embeddings=False)

# Second run (gen_s8.py --second): ministral with its head_dim written out (MinistralConfig's null
# head_dim does not build in transformers 5.17), and the types written after the first run.
M2 = {}
M2["ministral-mini"] = dict(M["ministral-mini"], head_dim=64)
# Solar-Open-100B's proportions (64 heads of 128, 8 kv heads, 128 experts of 1280, top 8, 1 shared,
# every layer MoE), narrowed.
M2["solar-open-mini"] = dict(model_type="solar_open", hidden_size=1024, moe_intermediate_size=512,
    n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=1, topk_group=1, norm_topk_prob=True,
    routed_scaling_factor=1.0, num_attention_heads=8, num_key_value_heads=2, head_dim=128, num_hidden_layers=8,
    vocab_size=196608, max_position_embeddings=131072, tie_word_embeddings=False)
# VaultGemma-1B's proportions (hidden 1152, MLP 6912, 4 heads of 256, 26 layers), narrowed.
M2["vaultgemma-mini"] = dict(model_type="vaultgemma", hidden_size=1024, intermediate_size=4096,
    num_attention_heads=4, num_key_value_heads=4, head_dim=256, num_hidden_layers=8, vocab_size=256000,
    sliding_window=512, query_pre_attn_scalar=256, final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
    max_position_embeddings=8192)
# granite-swash-2b's proportions (hidden 2560, 20 heads, 4 kv heads, MLP 8192, window 128, full every
# 4th layer from the first), narrowed; granite's multipliers.
M2["granite-swa-mini"] = dict(model_type="granite_swa", hidden_size=1024, intermediate_size=3072,
    num_attention_heads=16, num_key_value_heads=4, num_hidden_layers=8, vocab_size=100352, sliding_window=512,
    embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22, attention_multiplier=0.015625,
    max_position_embeddings=8192)
# Command A+'s layout (parallel layer, sliding 3 of 4, a dense first layer, a shared expert), narrowed.
M2["cohere2moe-mini"] = dict(model_type="cohere2_moe", hidden_size=1024, intermediate_size=512,
    prefix_dense_intermediate_size=2048, num_experts=16, num_experts_per_tok=4, num_shared_experts=1,
    first_k_dense_replace=1, num_attention_heads=8, num_key_value_heads=2, head_dim=128, num_hidden_layers=8,
    vocab_size=256000, sliding_window=1024,
    layer_types=["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3,
    logit_scale=0.0625, max_position_embeddings=8192)
# Held out, at full width with 4 layers: Ministral-3-8B's and GLM-4.7-Flash's published dimensions.
M2["ministral3-8b-4l"] = dict(model_type="ministral3", hidden_size=4096, intermediate_size=14336,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, num_hidden_layers=4, vocab_size=131072,
    max_position_embeddings=262144, tie_word_embeddings=False)
M2["glm47flash-4l"] = dict(model_type="glm4_moe_lite", hidden_size=2048, intermediate_size=10240,
    moe_intermediate_size=1536, n_routed_experts=64, n_shared_experts=1, num_experts_per_tok=4, n_group=1,
    topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.8, num_attention_heads=20, num_key_value_heads=20,
    q_lora_rank=768, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
    num_hidden_layers=4, vocab_size=154880, max_position_embeddings=202752, tie_word_embeddings=False)

if __name__ == "__main__" and sys.argv[2:] == ["--second"]:
    os.makedirs(os.path.join(sys.argv[1], "models"), exist_ok=True)
    os.chdir(sys.argv[1])
    for n, cfg in M2.items():
        json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
    json.dump(cases(list(M2)), open("cases_s8b.json", "w"), indent=1)
    print(len(M2))
elif __name__ == "__main__":
    os.makedirs(os.path.join(sys.argv[1], "models"), exist_ok=True)
    os.chdir(sys.argv[1])
    for n, cfg in M.items():
        json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
    json.dump(cases(list(M)), open("cases_s8.json", "w"), indent=1)
    print(len(M))
