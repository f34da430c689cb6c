#!/usr/bin/env python3
"""Writes loss_cases.json (2026-12-04, session 8): the fused losses on 3 models x 2 sizes x
{LoRA, full training}, bf16 weights: `loss: fused-linear` (measure_levers.FusedLinearCE, written
to allocate what Liger's code allocates; replaces the 12 fused-linear cases of levers.jsonl and
more.jsonl) and `loss: cce` (measure_levers.CutCE, Apple's Cut Cross-Entropy); and
loss_unsloth_cases.json (session 9)."""
import json

MODELS = ["qwen2.5-0.5b", "llama-3.2-1b", "smollm2-360m"]
LORA = {"r": 16, "targets": "all-linear"}
SIZES = [(2, 1024), (4, 2048)]


def case(model, mode, b, s, loss):
    return {"id": f"{model}/{mode}/bf16/b{b}s{s}/loss-{loss}", "model": model, "config": f"models/{model}.json",
            "mode": mode, "weights_dtype": "bf16", "autocast": None, "optimizer": "adamw", "batch": b, "seq": s,
            "new_tokens": 0, "checkpointing": False, "attn": "sdpa", "lora": LORA if mode == "lora" else None,
            "gpus": 1, "priority": SIZES.index((b, s)) if (b, s) in SIZES else 2, "loss": loss}


cases = [case(m, mode, b, s, loss) for loss in ("cce", "fused-linear") for m in MODELS for mode in ("lora", "train")
         for b, s in SIZES]
json.dump(cases, open("loss_cases.json", "w"), indent=1)
print(len(cases), "cases")

# Session 9: `loss: unsloth` (measure_levers.UnslothCE, Unsloth's own fused cross-entropy, which
# --recipe unsloth sets): 3 models x 2 sizes x {LoRA, full training}, and LoRA at b8 s2048, where
# llama's and qwen's fp32 logits pass 4 GiB (4 chunks).
unsloth = [case(m, mode, b, s, "unsloth") for m in MODELS for mode in ("lora", "train") for b, s in SIZES]
unsloth += [case(m, "lora", 8, 2048, "unsloth") for m in MODELS]
json.dump(unsloth, open("loss_unsloth_cases.json", "w"), indent=1)
print(len(unsloth), "unsloth cases")
