#!/usr/bin/env python3
"""Writes packing_cases.json: padding-free packed batches (`--packing`, issue #18) on 3 models,
full training and LoRA (bf16, sdpa), packed rows of T = 2048 and 8192 tokens, each beside the
unpacked batch of the same tokens (priority 0 = packed, 1 = packed with checkpointing or 2 rows,
2 = the unpacked baselines)."""
import json

MODELS = ["qwen2.5-0.5b", "llama-3.2-1b", "smollm2-360m"]
LORA = {"r": 16, "targets": "all-linear"}
# packed rows x T  beside  unpacked batch x seq of the same tokens
SIZES = [((1, 2048), (4, 512)), ((1, 8192), (8, 1024))]


def case(model, mode, b, s, priority, tag, **kw):
    c = {"id": f"{model}/{mode}/bf16/b{b}s{s}/{tag}", "model": model, "config": f"models/{model}.json",
         "mode": mode, "weights_dtype": "bf16", "autocast": None, "optimizer": "adamw", "batch": b, "seq": s,
         "new_tokens": 0, "checkpointing": False, "attn": "sdpa", "lora": LORA if mode == "lora" else None,
         "gpus": 1, "priority": priority}
    c.update(kw)
    return c


cases = []
for m in MODELS:
    for (pb, ps), (ub, us) in SIZES:
        for mode in ("train", "lora"):
            cases.append(case(m, mode, pb, ps, 0, "packed", sequence_packing=True))
            cases.append(case(m, mode, ub, us, 2, "unpacked"))
    cases.append(case(m, "train", 1, 8192, 1, "packed-ckpt", sequence_packing=True, checkpointing=True))
    cases.append(case(m, "lora", 2, 4096, 1, "packed", sequence_packing=True))

json.dump(cases, open("packing_cases.json", "w"), indent=1)
print(len(cases), "cases")
