#!/usr/bin/env python3
"""Writes cases.json for measure_unsloth.py: 3 models x 2 sizes, LoRA r 16 on every linear, bf16
base weights, fp32 adapters, AdamW, transformers' loss; each without checkpointing (every
layer's saved tensors alive at once: the sharpest check of what the kernels save) and with
Unsloth's offloaded checkpointing. `args` are the vramfit flags of the same run."""
import json

MODELS = ["llama-3.2-1b", "qwen2.5-0.5b", "smollm2-360m"]
SIZES = [(2, 1024), (4, 2048)]

cases = []
for m in MODELS:
    for b, s in SIZES:
        for offload in (False, True):
            args = ["--config", f"tests/accuracy/unsloth/models/{m}.json", "--mode", "lora", "--dtype", "bf16",
                    "--lora-rank", "16", "--batch", str(b), "--seq", str(s), "--optimizer", "adamw",
                    "--lora-kernels", "unsloth"]
            if offload:
                args += ["--checkpointing", "--activation-offload"]
            cases.append({
                "id": f"{m}/lora/bf16/b{b}s{s}/unsloth{'-offload' if offload else ''}",
                "model": m, "config": f"models/{m}.json", "mode": "lora", "weights_dtype": "bf16",
                "optimizer": "adamw", "batch": b, "seq": s, "attn": "sdpa",
                "lora": {"r": 16, "targets": "all-linear"}, "offload": offload, "args": args,
            })
json.dump(cases, open("cases.json", "w"), indent=1)
print(len(cases), "cases")
