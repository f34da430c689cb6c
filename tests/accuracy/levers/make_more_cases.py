#!/usr/bin/env python3
"""Writes the cases of the second levers call (issue #18, 2026-12-04):

  more_cases.json      one GPU: --lora-dtype bf16 (peft autocast_adapter_dtype=False) on
                       3 models x 2 sizes, and the sizes / models the first call's deadline cut
                       (fp32 + autocast training, the losses in full training, smollm2's
                       every-2 / selective / optimizer-in-backward at the second size)
  more_sharded_a.json  FSDP2 on 2 ranks: --lora-dtype bf16 (3 x 2), LoRA on fp32 + autocast
                       (the missing model and size)
  more_sharded_b.json  FSDP2 on 2 ranks: --master-weights (bf16 weights, fp32 masters in the
                       optimizer, harness.MasterWeights; 3 x 2), --fsdp-mixed-precision bf16
                       (the missing model and size)

Priority: the cheap models first (the sharded cases talk through gloo; llama-3.2-1b's take
30-45 s each)."""
import json

SIZES = [(2, 1024), (4, 2048)]  # make_cases.py's


def case(model, mode, dtype, b, s, priority, tag, **kw):  # make_cases.py's
    c = {"id": f"{model}/{mode}/{dtype}{'-ampbf16' if kw.get('autocast') else ''}/b{b}s{s}/{tag}",
         "model": model, "config": f"models/{model}.json", "mode": mode, "weights_dtype": dtype,
         "autocast": None, "optimizer": "adamw", "batch": b, "seq": s, "new_tokens": 0,
         "checkpointing": False, "attn": "sdpa", "lora": {"r": 16, "targets": "all-linear"} if mode == "lora" else None,
         "gpus": 1, "priority": priority}
    c.update(kw)
    return c

MODELS = ["smollm2-360m", "qwen2.5-0.5b", "llama-3.2-1b"]
LORA16 = {"r": 16, "targets": "all-linear", "dtype": "bf16"}
FSDP = {"gpus": 2, "sharding": "fsdp"}


def prio(model, base):
    return base + (1 if model == "llama-3.2-1b" else 0)


one, a, b = [], [], []
for m in MODELS:
    for i, (bt, s) in enumerate(SIZES):
        one.append(case(m, "lora", "bf16", bt, s, prio(m, 0), "lora-bf16", lora=LORA16))
        a.append(case(m, "lora", "bf16", bt, s, prio(m, 0), "lora-bf16/fsdp/g2", lora=LORA16, **FSDP))
        b.append(case(m, "train", "bf16", bt, s, prio(m, 0), "master/fsdp/g2", master_weights=True, **FSDP))
        if i == 1:
            one.append(case(m, "train", "fp32", bt, s, prio(m, 2), "plain", autocast="bf16"))
            one.append(case(m, "train", "fp32", bt, s, prio(m, 2), "ckpt", autocast="bf16", checkpointing=True))
            for loss in ("chunked", "fused-linear"):
                one.append(case(m, "train", "bf16", bt, s, prio(m, 4), f"loss-{loss}", loss=loss))
        if m != "llama-3.2-1b" and (m == "smollm2-360m" or i == 1):
            a.append(case(m, "lora", "fp32", bt, s, 2, "fsdp/g2", autocast="bf16", **FSDP))
            b.append(case(m, "train", "fp32", bt, s, 2, "fsdp-mp/g2", fsdp_mixed_precision="bf16", **FSDP))
# What the first call's deadline cut (ids as in cases.json).
first = {c["id"]: c for c in json.load(open("cases.json"))}
for cid in ("smollm2-360m/train/fp32-ampbf16/b2s1024/plain", "smollm2-360m/lora/fp32-ampbf16/b4s2048/plain",
            "smollm2-360m/train/bf16/b4s2048/every-2", "smollm2-360m/train/bf16/b4s2048/selective",
            "smollm2-360m/train/bf16/b4s2048/opt-in-bwd"):
    one.append(dict(first[cid], priority=1))

for name, cs in (("more_cases.json", one), ("more_sharded_a.json", a), ("more_sharded_b.json", b)):
    assert len({c["id"] for c in cs}) == len(cs)
    json.dump(cs, open(name, "w"), indent=1)
    print(name, len(cs), "cases")
