# Small configs (0.2-0.8B) of the families in tests/accuracy/arch, written with real checkpoints' key names.
#   python3 gen_families.py OUTDIR   (writes OUTDIR/models/*.json, cases.json, cases_extra.json,
#   cases_falcon.json; never this folder, whose cases.json holds every case)
import json, os, sys
M = {}
M["gemma3-mini"] = dict(model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_attention_heads=4,
    num_key_value_heads=1, head_dim=256, num_hidden_layers=12, vocab_size=262144, sliding_window=512,
    query_pre_attn_scalar=256, max_position_embeddings=32768, rope_theta=1000000.0)
M["gemma2-mini"] = dict(model_type="gemma2", hidden_size=1024, intermediate_size=4096, num_attention_heads=8,
    num_key_value_heads=4, head_dim=128, num_hidden_layers=12, vocab_size=256000, sliding_window=4096,
    attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=128, max_position_embeddings=8192)
M["qwen3moe-mini"] = dict(model_type="qwen3_moe", hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
    num_experts=16, num_experts_per_tok=4, num_attention_heads=8, num_key_value_heads=4, head_dim=128,
    num_hidden_layers=8, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=False)
M["qwen2moe-mini"] = dict(model_type="qwen2_moe", hidden_size=1024, intermediate_size=2816, moe_intermediate_size=704,
    shared_expert_intermediate_size=2816, num_experts=16, num_experts_per_tok=4, num_attention_heads=16,
    num_key_value_heads=16, num_hidden_layers=8, vocab_size=151936, max_position_embeddings=32768)
M["mixtral-mini"] = dict(model_type="mixtral", hidden_size=1024, intermediate_size=3584, num_local_experts=8,
    num_experts_per_tok=2, num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=8, vocab_size=32000,
    max_position_embeddings=32768)
M["phi3-mini"] = dict(model_type="phi3", hidden_size=1536, intermediate_size=4096, num_attention_heads=24,
    num_key_value_heads=8, num_hidden_layers=12, vocab_size=32064, max_position_embeddings=8192,
    original_max_position_embeddings=8192)
M["phi-mini"] = dict(model_type="phi", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_hidden_layers=12, vocab_size=51200, partial_rotary_factor=0.5, max_position_embeddings=8192)
M["starcoder2-mini"] = dict(model_type="starcoder2", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=4, num_hidden_layers=12, vocab_size=49152, max_position_embeddings=16384)
M["gpt-neox-mini"] = dict(model_type="gpt_neox", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_hidden_layers=12, vocab_size=50304, rotary_pct=0.25, max_position_embeddings=8192)
M["granite-mini"] = dict(model_type="granite", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=8, num_hidden_layers=12, vocab_size=49155, embedding_multiplier=12.0, logits_scaling=8.0,
    residual_multiplier=0.22, attention_multiplier=0.015625, tie_word_embeddings=True, max_position_embeddings=8192)
M["granitemoe-mini"] = dict(model_type="granitemoe", hidden_size=1024, intermediate_size=512, num_local_experts=16,
    num_experts_per_tok=4, num_attention_heads=16, num_key_value_heads=8, num_hidden_layers=12, vocab_size=49155,
    embedding_multiplier=12.0, logits_scaling=6.0, residual_multiplier=0.22, attention_multiplier=0.015625,
    tie_word_embeddings=True, max_position_embeddings=8192)
M["olmoe-mini"] = dict(model_type="olmoe", hidden_size=1024, intermediate_size=512, num_experts=16,
    num_experts_per_tok=4, num_attention_heads=16, num_key_value_heads=16, num_hidden_layers=8, vocab_size=50304,
    max_position_embeddings=8192)
M["smollm3-mini"] = dict(model_type="smollm3", hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
    num_key_value_heads=4, num_hidden_layers=12, vocab_size=128256, no_rope_layer_interval=4,
    max_position_embeddings=65536, tie_word_embeddings=True)
M["exaone4-mini"] = dict(model_type="exaone4", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=4, head_dim=64, num_hidden_layers=12, vocab_size=102400, sliding_window=1024,
    sliding_window_pattern=4, max_position_embeddings=16384, tie_word_embeddings=False)
M["ernie45-mini"] = dict(model_type="ernie4_5", hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
    num_key_value_heads=4, head_dim=64, num_hidden_layers=12, vocab_size=103424, tie_word_embeddings=True,
    use_bias=False, max_position_embeddings=131072)
M["seed-oss-mini"] = dict(model_type="seed_oss", hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
    num_key_value_heads=4, head_dim=64, num_hidden_layers=12, vocab_size=155136, attention_bias=True,
    attention_out_bias=False, max_position_embeddings=65536, tie_word_embeddings=False)
M["deepseek-v3-mini"] = dict(model_type="deepseek_v3", hidden_size=1024, intermediate_size=2816,
    moe_intermediate_size=512, n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=4,
    topk_group=2, first_k_dense_replace=1, num_attention_heads=16, num_key_value_heads=16, q_lora_rank=384,
    kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64, num_hidden_layers=8,
    vocab_size=129280, max_position_embeddings=16384, tie_word_embeddings=False)
M["gpt-oss-mini"] = dict(model_type="gpt_oss", attention_bias=True, experts_per_token=4, num_experts_per_tok=4,
    head_dim=64, hidden_act="silu", hidden_size=1024, intermediate_size=1024,
    layer_types=["sliding_attention", "full_attention"] * 6, max_position_embeddings=131072,
    num_attention_heads=16, num_hidden_layers=12, num_key_value_heads=4, num_local_experts=8, rms_norm_eps=1e-05,
    sliding_window=128, tie_word_embeddings=False, vocab_size=201088)
M["cohere2-mini"] = dict(model_type="cohere2", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=4, head_dim=64, num_hidden_layers=12, vocab_size=256000, sliding_window=1024,
    sliding_window_pattern=4, logit_scale=0.25, max_position_embeddings=8192)
M["glm-mini"] = dict(model_type="glm", hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
    num_key_value_heads=2, head_dim=64, num_hidden_layers=12, vocab_size=151552, partial_rotary_factor=0.5,
    attention_bias=True, max_position_embeddings=32768, tie_word_embeddings=False)
# Not in the table yet: measured so that rows can be added from the numbers.
X = {}
X["gptj-mini"] = dict(model_type="gptj", n_embd=1024, n_head=16, n_layer=12, rotary_dim=32, vocab_size=50400,
    n_positions=8192, tie_word_embeddings=False)
X["bloom-mini"] = dict(model_type="bloom", hidden_size=1024, n_head=16, n_layer=12, vocab_size=250880)
X["mpt-mini"] = dict(model_type="mpt", d_model=1024, n_heads=16, n_layers=12, expansion_ratio=4, max_seq_len=8192,
    vocab_size=50368, no_bias=True, attn_config={"alibi": True})
X["stablelm-mini"] = dict(model_type="stablelm", hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
    num_key_value_heads=16, num_hidden_layers=12, vocab_size=50304, partial_rotary_factor=0.25,
    max_position_embeddings=8192, use_qkv_bias=True)
X["hunyuan-mini"] = dict(model_type="hunyuan_v1_dense", hidden_size=1024, intermediate_size=3584,
    num_attention_heads=16, num_key_value_heads=4, head_dim=64, num_hidden_layers=12, vocab_size=120818,
    max_position_embeddings=32768, tie_word_embeddings=True)

def cases(names, attn_of):
    out = []
    for n in names:
        attn = attn_of.get(n, "sdpa")
        base = dict(model=n, config=f"models/{n}.json", weights_dtype="bf16", autocast=None, attn=attn, lora=None)
        def c(cid, **kw):
            d = dict(id=f"{n}/{cid}"); d.update(base); d.update(kw)
            d.setdefault("optimizer", None); d.setdefault("new_tokens", 0); d.setdefault("checkpointing", False)
            out.append({k: d[k] for k in ["id", "model", "config", "mode", "weights_dtype", "autocast", "optimizer",
                        "batch", "seq", "new_tokens", "checkpointing", "attn", "lora"]})
        c("forward/bf16/b4s1024", mode="forward", batch=4, seq=1024)
        c("generate/bf16/b1s4096n64", mode="generate", batch=1, seq=4096, new_tokens=64)
        c("train/bf16/b4s512/adamw", mode="train", batch=4, seq=512, optimizer="adamw")
        c("train/bf16/b4s1024/ckpt/adamw", mode="train", batch=4, seq=1024, optimizer="adamw", checkpointing=True)
    return out
attn = {"gpt-oss-mini": "eager", "gptj-mini": "eager", "bloom-mini": "eager", "mpt-mini": "eager"}
if __name__ == "__main__":
    os.makedirs(os.path.join(sys.argv[1], "models"), exist_ok=True)
    os.chdir(sys.argv[1])
    for d in (M, X):
        for n, cfg in d.items():
            json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
    json.dump(cases(list(M), attn), open("cases.json", "w"), indent=1)
    json.dump(cases(list(X), attn), open("cases_extra.json", "w"), indent=1)
    # falcon new_decoder_architecture: generate at two prompt lengths (the KV cache's heads), forward b1 s4096
    fal = [dict(id="falcon-new-mini/generate/bf16/b1s2048n64", model="falcon-new-mini", config="models/falcon-new-mini.json",
                mode="generate", weights_dtype="bf16", autocast=None, optimizer=None, batch=1, seq=2048, new_tokens=64,
                checkpointing=False, attn="sdpa", lora=None),
           dict(id="falcon-new-mini/generate/bf16/b4s1024n64", model="falcon-new-mini", config="models/falcon-new-mini.json",
                mode="generate", weights_dtype="bf16", autocast=None, optimizer=None, batch=4, seq=1024, new_tokens=64,
                checkpointing=False, attn="sdpa", lora=None)]
    json.dump(fal, open("cases_falcon.json", "w"), indent=1)
    print(len(M), len(X))
