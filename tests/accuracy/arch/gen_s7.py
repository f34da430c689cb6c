# Session 7's batch: the types added then (apertus: xIELU, no gate; arcee: relu2, no gate;
# minimax_m2: fused experts, q/k norms over the projections, sigmoid router with a score bias) and a
# held-out glm4_moe shape for the fp32 routing-weight rule; five cases each (forward, generate of
# 4096 tokens, training, checkpointed training, LoRA r16 all-linear checkpointed).
#   python3 gen_s7.py OUTDIR   (writes OUTDIR/models/*.json and OUTDIR/cases_s7.json)
#   then on the device: python3 measure.py cases_s7.json results_s7.jsonl --deadline 200
import json, os, sys

from gen_families import cases as family_cases

M = {}
# Apertus-8B's proportions (hidden 4096, 32 heads, 8 kv heads, q/k norms, xIELU MLP of 21504), narrowed.
M["apertus-mini"] = dict(model_type="apertus", hidden_size=1024, intermediate_size=4096, num_attention_heads=8,
    num_key_value_heads=2, num_hidden_layers=8, vocab_size=131072, max_position_embeddings=65536,
    hidden_act="xielu", rope_theta=12000000.0, tie_word_embeddings=False)
# Arcee AFM-4.5B's proportions (hidden 2560, 20 heads of 128, 4 kv heads, relu2 MLP of 18432), narrowed.
M["arcee-mini"] = dict(model_type="arcee", hidden_size=1024, intermediate_size=4096, num_attention_heads=8,
    num_key_value_heads=2, head_dim=128, num_hidden_layers=8, vocab_size=128004, max_position_embeddings=65536,
    hidden_act="relu2", tie_word_embeddings=False)
# MiniMax-M2's proportions (hidden 3072, 48 heads of 128, 8 kv heads, rotary_dim 64, 256 experts of 1536,
# top 8, q/k norms), narrowed: 16 experts of 512, top 4.
M["minimax-m2-mini"] = dict(model_type="minimax_m2", hidden_size=1024, intermediate_size=512, num_local_experts=16,
    num_experts_per_tok=4, num_attention_heads=8, num_key_value_heads=2, head_dim=128, rotary_dim=64,
    num_hidden_layers=8, vocab_size=200064, max_position_embeddings=196608, rope_theta=5000000.0,
    use_qk_norm=True, qk_norm_type="per_layer", scoring_func="sigmoid", use_routing_bias=True,
    tie_word_embeddings=False)
# Held out for glm4_moe's routing rule: another shape (8 of 32 experts, wider hidden, no q/k norm).
M["glm4moe-k8"] = dict(model_type="glm4_moe", hidden_size=1536, intermediate_size=4096, moe_intermediate_size=256,
    n_routed_experts=32, n_shared_experts=1, num_experts_per_tok=8, n_group=1, topk_group=1,
    first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=1.0, num_attention_heads=12,
    num_key_value_heads=4, head_dim=128, partial_rotary_factor=0.5, attention_bias=True, use_qk_norm=False,
    num_hidden_layers=6, vocab_size=151552, max_position_embeddings=32768, rope_theta=1000000,
    tie_word_embeddings=False)


def cases(names):
    # gen_families' four cases (forward, generate, training, checkpointed training), then LoRA r16
    # all-linear on the checkpointed training case's shape.
    out = []
    for n in names:
        four = family_cases([n], {})
        lora = dict(four[-1])
        lora.update(id=f"{n}/lora/bf16/adamw/r16-all-linear/b4s1024/ckpt", mode="lora",
                    lora={"r": 16, "targets": "all-linear"})
        out += four + [lora]
    return out


if __name__ == "__main__":
    os.makedirs(os.path.join(sys.argv[1], "models"), exist_ok=True)
    os.chdir(sys.argv[1])
    for n, cfg in M.items():
        json.dump(cfg, open(f"models/{n}.json", "w"), indent=1)
    json.dump(cases(list(M)), open("cases_s7.json", "w"), indent=1)
    print(len(M))
