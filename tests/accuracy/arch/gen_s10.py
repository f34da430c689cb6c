# Session 10's batch (arch3): the rows landed in session 9 and never measured (jais2, granitemoe_swa) and the
# rows written in session 10 (gemma4_text, minicpm3, youtu), each at a small random-weight config with a released
# model's proportions, narrowed; five cases each (gen_s7's: forward b4s1024, generate of 4096 + 64 tokens,
# training b4s512, checkpointed training b4s1024, LoRA r16 all-linear checkpointed).
#   python3 gen_s10.py OUTDIR   (writes OUTDIR/models/*.json and OUTDIR/cases_s10.json)
#   then on the device: python3 measure.py cases_s10.json results_s10.jsonl --deadline 200
import json, os, sys

from gen_s7 import cases

M = {}
# JAIS-2's default config (Jais2Config: hidden 3328, 26 heads, MLP 26624 of relu2, LayerNorms with biases,
# q/k/v/o and MLP biases), narrowed.
M["jais2-mini"] = dict(model_type="jais2", hidden_size=1024, intermediate_size=8192, num_attention_heads=8,
    num_key_value_heads=8, num_hidden_layers=8, vocab_size=150272, max_position_embeddings=8192,
    tie_word_embeddings=False)
# granitemoe_swa: granite_swa's sink attention (window 512, full every 4th layer from the first) with 16
# fused experts of 512 (top 4) and a shared MLP of 1024; granite's multipliers.
M["granitemoe-swa-mini"] = dict(model_type="granitemoe_swa", hidden_size=1024, intermediate_size=512,
    shared_intermediate_size=1024, num_local_experts=16, num_experts_per_tok=4, num_attention_heads=16,
    num_key_value_heads=4, num_hidden_layers=8, vocab_size=100352, sliding_window=512, embedding_multiplier=12.0,
    logits_scaling=8.0, residual_multiplier=0.22, attention_multiplier=0.015625, max_position_embeddings=8192)
# MiniCPM3-4B's proportions (hidden 2560, 40 heads, MLA q_lora 768 / kv_lora 256, nope 64, rope 32, v_head_dim
# null: hidden / heads = 64, MLP 6400, vocab 73448, tied, scale_emb 12), narrowed; v_head_dim left null.
M["minicpm3-mini"] = dict(model_type="minicpm3", hidden_size=1024, intermediate_size=2560, num_attention_heads=16,
    num_key_value_heads=16, q_lora_rank=768, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
    num_hidden_layers=8, vocab_size=73448, max_position_embeddings=32768, scale_emb=12, scale_depth=1.4,
    dim_model_base=256, tie_word_embeddings=True)
# Youtu-LLM-2B's proportions (hidden 2048, 16 heads, MLA q_lora 1536 / kv_lora 512, nope 128, rope 64, v 128,
# MLP 6144, vocab 128256, tied), narrowed.
M["youtu-mini"] = dict(model_type="youtu", hidden_size=1024, intermediate_size=3072, num_attention_heads=8,
    num_key_value_heads=8, q_lora_rank=768, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128, num_hidden_layers=8, vocab_size=128256, max_position_embeddings=131072,
    tie_word_embeddings=True)
# Gemma-4-E2B's layout (per-layer inputs of 256, one kv head of 256, full layers of global_head_dim 512, the
# last layers reading shared KV with a double-wide MLP, window 512), narrowed: 10 layers (5 and 9 full), the
# last 4 KV-shared (layer 9 reads layer 5's keys and values, 6-8 layer 4's).
M["gemma4-e2b-mini"] = dict(model_type="gemma4_text", hidden_size=1024, intermediate_size=2048,
    num_attention_heads=8, num_key_value_heads=1, head_dim=256, global_head_dim=512, num_hidden_layers=10,
    num_kv_shared_layers=4, use_double_wide_mlp=True, hidden_size_per_layer_input=256,
    vocab_size=262144, vocab_size_per_layer_input=262144, sliding_window=512, max_position_embeddings=131072,
    final_logit_softcapping=30.0, tie_word_embeddings=True)
# Gemma-4-26B-A4B's layout (MoE block beside the MLP: 128 experts of 704, top 8; full layers with
# attention_k_eq_v, global_head_dim 512 and num_global_key_value_heads 2; no per-layer inputs), narrowed:
# 16 experts of 512, top 4, 6 layers (the last full).
M["gemma4-moe-mini"] = dict(model_type="gemma4_text", hidden_size=1024, intermediate_size=1024,
    num_attention_heads=8, num_key_value_heads=4, head_dim=256, global_head_dim=512, num_global_key_value_heads=1,
    attention_k_eq_v=True, enable_moe_block=True, num_experts=16, top_k_experts=4, moe_intermediate_size=512,
    hidden_size_per_layer_input=0, num_hidden_layers=6, vocab_size=262144, sliding_window=1024,
    max_position_embeddings=131072, final_logit_softcapping=30.0, tie_word_embeddings=True)
# Hunyuan 3 (hy_v3)'s layout (q/k norms, first layer dense, sigmoid router with a score bias, one shared
# expert, fp32 combine), narrowed: 16 experts of 512, top 4.
M["hyv3-mini"] = dict(model_type="hy_v3", hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
    num_experts=16, num_experts_per_tok=4, num_shared_experts=1, num_attention_heads=8, num_key_value_heads=2,
    head_dim=128, num_hidden_layers=6, vocab_size=120832, max_position_embeddings=32768,
    router_scaling_factor=2.826, enable_moe_fp32_combine=True, tie_word_embeddings=False)
# HyperCLOVA X SEED's layout (Llama with post norms and muP multipliers), narrowed.
M["hyperclovax-mini"] = dict(model_type="hyperclovax", hidden_size=1024, intermediate_size=2816,
    num_attention_heads=8, num_key_value_heads=8, head_dim=128, num_hidden_layers=8, vocab_size=110592,
    max_position_embeddings=8192, embedding_multiplier=10.0, logits_scaling=0.0625, residual_multiplier=0.125,
    attention_multiplier=0.0078125, use_post_norm=True, tie_word_embeddings=False)
# A.X K1's layout (DeepSeek-V3: MLA, first layer dense, 192 experts, a shared one, post_mlp_layernorm),
# narrowed as glm47flash-mini: 16 experts of 512, top 4.
M["axk1-mini"] = dict(model_type="axk1", hidden_size=1024, intermediate_size=2816, moe_intermediate_size=512,
    n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=1, topk_group=1, norm_topk_prob=True,
    routed_scaling_factor=2.5, first_k_dense_replace=1, num_attention_heads=8, num_key_value_heads=8,
    q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=96, qk_rope_head_dim=32, v_head_dim=128,
    num_hidden_layers=6, vocab_size=163840, max_position_embeddings=32768, tie_word_embeddings=False)
# Arcee Trinity (afmoe)'s layout (gated attention, q/k norms, sliding 3 of 4, 4 norms, one dense layer,
# sigmoid router with expert_bias, shared experts), narrowed: 16 experts of 512, top 4.
M["afmoe-mini"] = dict(model_type="afmoe", hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
    num_experts=16, num_experts_per_tok=4, num_shared_experts=1, num_dense_layers=1, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=200192, sliding_window=512,
    global_attn_every_n_layers=4, max_position_embeddings=16384, tie_word_embeddings=False)
# Laguna's layout (per-head softplus output gate, q/k norms, first layer dense, sigmoid router with a score
# bias parameter, an ungated shared expert), narrowed, with sliding layers (3 of 4) over a 512 window.
M["laguna-mini"] = dict(model_type="laguna", hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
    shared_expert_intermediate_size=512, num_experts=16, num_experts_per_tok=4, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=100352, sliding_window=512,
    layer_types=(["sliding_attention"] * 3 + ["full_attention"]) * 2, gating=True, max_position_embeddings=32768,
    tie_word_embeddings=False)

if __name__ == "__main__":
    os.makedirs(os.path.join(sys.argv[1], "models"), exist_ok=True)
    os.chdir(sys.argv[1])
    for n, cfg in M.items():
        json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
    json.dump(cases(list(M)), open("cases_s10.json", "w"), indent=1)
    print(len(M))
