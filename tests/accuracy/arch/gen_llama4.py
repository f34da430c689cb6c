# Small llama4_text configs (Scout-like: every layer MoE, q/k L2 norms; Maverick-like: MoE every
# second layer, no q/k norm, a 1024-token attention chunk) and their cases.
import json, os, sys
out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(os.path.join(out, "models"), exist_ok=True)
rope = {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
        "rope_type": "llama3"}
M = {}
M["llama4-mini"] = dict(model_type="llama4_text", hidden_size=1024, intermediate_size=1024, intermediate_size_mlp=4096,
    num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=64, vocab_size=202048,
    num_local_experts=8, num_experts_per_tok=1, interleave_moe_layer_step=1, use_qk_norm=True,
    no_rope_layer_interval=4, attention_chunk_size=8192, attn_temperature_tuning=True, floor_scale=8192,
    attn_scale=0.1, max_position_embeddings=262144, rope_theta=500000.0, rope_scaling=rope, tie_word_embeddings=False)
M["llama4-il2"] = dict(model_type="llama4_text", hidden_size=1024, intermediate_size=1536, intermediate_size_mlp=3072,
    num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=8, head_dim=64, vocab_size=202048,
    num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=2, use_qk_norm=False,
    attention_chunk_size=1024, max_position_embeddings=1048576, rope_theta=500000.0, tie_word_embeddings=False)
cases = []
for name, cfg in M.items():
    json.dump(cfg, open(os.path.join(out, "models", name + ".json"), "w"), indent=1)
    base = dict(model=name, config=f"models/{name}.json", weights_dtype="bf16", autocast=None, optimizer=None,
                batch=4, seq=1024, new_tokens=0, checkpointing=False, attn="sdpa", lora=None)
    cases.append(dict(base, id=f"{name}/forward/bf16/b4s1024", mode="forward"))
    cases.append(dict(base, id=f"{name}/generate/bf16/b1s4096n64", mode="generate", batch=1, seq=4096, new_tokens=64))
    cases.append(dict(base, id=f"{name}/train/bf16/b4s512/adamw", mode="train", seq=512, optimizer="adamw"))
    cases.append(dict(base, id=f"{name}/train/bf16/b4s1024/ckpt/adamw", mode="train", optimizer="adamw",
                      checkpointing=True))
    cases.append(dict(base, id=f"{name}/lora/bf16/adamw/r16-attn/b4s1024", mode="lora", optimizer="adamw",
                      lora={"r": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}))
json.dump(cases, open(os.path.join(out, "cases.json"), "w"), indent=1)
