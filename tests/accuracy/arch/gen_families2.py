# Second batch: held-out shapes for the rules added after the first run, types not measured yet.
#   python3 gen_families2.py OUTDIR  (after gen_families.py OUTDIR; writes OUTDIR/models, cases2.json)
#   then on the device: python3 measure.py cases2.json results2.jsonl --deadline 220  (121 s)
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
M = {}
M["qwen3moe-k8"] = dict(model_type="qwen3_moe", hidden_size=1536, intermediate_size=4096, moe_intermediate_size=384,
    num_experts=32, num_experts_per_tok=8, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
    num_hidden_layers=8, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=False)
M["mixtral-h2048"] = dict(model_type="mixtral", hidden_size=2048, intermediate_size=2048, num_local_experts=4,
    num_experts_per_tok=2, num_attention_heads=16, num_key_value_heads=4, num_hidden_layers=6, vocab_size=32000,
    max_position_embeddings=32768)
M["phimoe-mini"] = dict(model_type="phimoe", hidden_size=1024, intermediate_size=1536, num_local_experts=8,
    num_experts_per_tok=2, num_attention_heads=16, num_key_value_heads=4, num_hidden_layers=8, vocab_size=32064,
    max_position_embeddings=16384, lm_head_bias=True)
M["gpt-oss-h32"] = dict(model_type="gpt_oss", attention_bias=True, num_experts_per_tok=2, head_dim=64,
    hidden_size=1536, intermediate_size=768, layer_types=["sliding_attention", "full_attention"] * 4,
    max_position_embeddings=131072, num_attention_heads=32, num_hidden_layers=8, num_key_value_heads=8,
    num_local_experts=4, sliding_window=128, tie_word_embeddings=False, vocab_size=201088)
M["falcon-new-kv2"] = dict(model_type="falcon", hidden_size=2048, num_attention_heads=16, num_kv_heads=2,
    num_hidden_layers=8, new_decoder_architecture=True, parallel_attn=True, bias=False, alibi=False,
    vocab_size=65024, max_position_embeddings=8192)
M["granite-ls16"] = dict(model_type="granite", hidden_size=1536, intermediate_size=4096, num_attention_heads=12,
    num_key_value_heads=4, num_hidden_layers=8, vocab_size=49155, embedding_multiplier=12.0, logits_scaling=16.0,
    residual_multiplier=0.22, attention_multiplier=0.0078125, tie_word_embeddings=False, max_position_embeddings=8192)
M["stablelm2-mini"] = dict(model_type="stablelm", hidden_size=1536, intermediate_size=4096, num_attention_heads=24,
    num_key_value_heads=24, num_hidden_layers=8, vocab_size=100352, partial_rotary_factor=0.25, use_qkv_bias=True,
    qk_layernorm=True, use_parallel_residual=True, max_position_embeddings=8192, tie_word_embeddings=False)
M["olmo-mini"] = dict(model_type="olmo", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=16, num_hidden_layers=12, vocab_size=50304, max_position_embeddings=8192)
M["olmo3-mini"] = dict(model_type="olmo3", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=16, num_hidden_layers=12, vocab_size=100278, sliding_window=1024,
    max_position_embeddings=16384)
M["deepseek-v2-mini"] = dict(model_type="deepseek_v2", hidden_size=1024, intermediate_size=2816,
    moe_intermediate_size=512, n_routed_experts=16, n_shared_experts=2, num_experts_per_tok=4, first_k_dense_replace=1,
    num_attention_heads=16, num_key_value_heads=16, q_lora_rank=None, kv_lora_rank=256, qk_nope_head_dim=64,
    qk_rope_head_dim=32, v_head_dim=64, num_hidden_layers=8, vocab_size=102400, max_position_embeddings=16384,
    topk_method="greedy", n_group=1, topk_group=1)
M["helium-mini"] = dict(model_type="helium", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=8, head_dim=64, num_hidden_layers=12, vocab_size=48000, max_position_embeddings=8192)
M["gpt-bigcode-mini"] = dict(model_type="gpt_bigcode", n_embd=1024, n_head=16, n_layer=12, n_positions=8192,
    vocab_size=49152, multi_query=True)
M["gemma-mini"] = dict(model_type="gemma", hidden_size=1024, intermediate_size=4096, num_attention_heads=8,
    num_key_value_heads=1, head_dim=256, num_hidden_layers=12, vocab_size=256000, max_position_embeddings=8192)
X = {}
X["gptj-h1536"] = dict(model_type="gptj", n_embd=1536, n_head=24, n_layer=8, rotary_dim=32, vocab_size=50400,
    n_positions=8192, tie_word_embeddings=False)
X["bloom-h1536"] = dict(model_type="bloom", hidden_size=1536, n_head=12, n_layer=8, vocab_size=250880)
X["mpt-h1536"] = dict(model_type="mpt", d_model=1536, n_heads=12, n_layers=8, expansion_ratio=4, max_seq_len=8192,
    vocab_size=50368, no_bias=True, attn_config={"alibi": True})
from gen_families import cases
os.chdir(sys.argv[1])
attn = {"gpt-oss-h32": "eager", "gptj-h1536": "eager", "bloom-h1536": "eager", "mpt-h1536": "eager"}
for d in (M, X):
    for n, cfg in d.items():
        json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
json.dump(cases(list(M), attn) + cases(list(X), attn), open("cases2.json", "w"), indent=1)
print(len(M) + len(X))
