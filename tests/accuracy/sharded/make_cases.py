#!/usr/bin/env python3
"""Writes cases.json: the sharded-training workloads measured by measure_sharded.py.

Sized so that every rank of a world size fits one H200 together (ranks share cuda:0 when
fewer GPUs are visible). `priority` orders the cases inside a world size: 0 first.
"""
import json
import os

SEQ = 1024
STRATS = ("ddp", "fsdp", "fsdp-grad-op")


def case(model, strat, gpus, batch, ckpt, wdt="bf16", autocast=None, priority=0):
    prec = wdt if autocast is None else f"{wdt}-amp{autocast}"
    cid = f"{model}/train/{prec}/adamw/b{batch}s{SEQ}{'/ckpt' if ckpt else ''}/{strat}/g{gpus}"
    return {
        "id": cid, "model": model, "config": f"models/{model}.json", "mode": "train",
        "weights_dtype": wdt, "autocast": autocast, "optimizer": "adamw", "batch": batch, "seq": SEQ,
        "new_tokens": 0, "checkpointing": ckpt, "attn": "sdpa", "lora": None,
        "gpus": gpus, "sharding": strat, "priority": priority,
    }


cases = []
# qwen2.5-0.5b: the full grid (cheap to communicate).
for g in (1, 2, 4):
    for st in STRATS:
        for ck in (False, True):
            for b in (2, 4):
                cases.append(case("qwen2.5-0.5b", st, g, b, ck, priority=0 if b == 2 else (2 if not ck else 3)))
# llama-3.2-1b: batch 2 with and without checkpointing, batch 1 without.
for g in (1, 2, 4):
    for st in STRATS:
        for ck in (False, True):
            cases.append(case("llama-3.2-1b", st, g, 2, ck, priority=0))
        cases.append(case("llama-3.2-1b", st, g, 1, False, priority=2))
# qwen2.5-3b: the largest; DDP only where 2 or 1 replicas fit.
for g, st, b, ck, pr in [
    (1, "ddp", 2, True, 0), (1, "ddp", 1, False, 0), (1, "fsdp", 1, False, 1),
    (2, "ddp", 1, True, 3), (2, "fsdp", 1, False, 1), (2, "fsdp", 2, True, 1), (2, "fsdp-grad-op", 1, False, 1),
    (4, "fsdp", 2, True, 1), (4, "fsdp-grad-op", 2, True, 3), (4, "fsdp", 1, False, 1),
    (4, "fsdp-grad-op", 1, False, 2),
]:
    cases.append(case("qwen2.5-3b", st, g, b, ck, priority=pr))
# fp32 weights and AdamW state, bf16 autocast.
for g in (1, 2, 4):
    for st in STRATS:
        cases.append(case("qwen2.5-0.5b", st, g, 2, True, "fp32", "bf16", priority=0))
for g, st in [(1, "ddp"), (2, "ddp"), (2, "fsdp"), (4, "fsdp"), (4, "fsdp-grad-op")]:
    cases.append(case("llama-3.2-1b", st, g, 2, True, "fp32", "bf16", priority=3))

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "cases.json"), "w") as f:
    json.dump(cases, f, indent=1)
    f.write("\n")
from collections import Counter
print(len(cases), Counter((c["gpus"], c["priority"]) for c in cases))
