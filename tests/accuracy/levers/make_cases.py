#!/usr/bin/env python3
"""Writes cases.json: the levers of issue #18 on 3 models x 2 sizes (priority 0 = the first
size of every lever on every model, 1 = the second size, 2 = more)."""
import json

MODELS = ["qwen2.5-0.5b", "llama-3.2-1b", "smollm2-360m"]
LORA = {"r": 16, "targets": "all-linear"}
SIZES = [(2, 1024), (4, 2048)]


def case(model, mode, dtype, b, s, priority, tag, **kw):
    c = {"id": f"{model}/{mode}/{dtype}{'-ampbf16' if kw.get('autocast') else ''}/b{b}s{s}/{tag}",
         "model": model, "config": f"models/{model}.json", "mode": mode, "weights_dtype": dtype,
         "autocast": None, "optimizer": "adamw", "batch": b, "seq": s, "new_tokens": 0,
         "checkpointing": False, "attn": "sdpa", "lora": LORA if mode == "lora" else None,
         "gpus": 1, "priority": priority}
    c.update(kw)
    return c


cases = []
for m in MODELS:
    for i, (b, s) in enumerate(SIZES):
        p = i
        # autocast over fp32 weights: LoRA (no cached casts of the frozen base) and full training
        cases.append(case(m, "lora", "fp32", b, s, p, "plain", autocast="bf16"))
        cases.append(case(m, "lora", "fp32", b, s, p, "ckpt", autocast="bf16", checkpointing=True))
        if i == 0:
            cases.append(case(m, "train", "fp32", b, s, p, "ckpt", autocast="bf16", checkpointing=True))
            cases.append(case(m, "train", "fp32", b, s, p + 1, "plain", autocast="bf16"))
        # losses
        for mode in ("lora", "train"):
            for loss in ("chunked", "fused-linear"):
                if mode == "train" and i == 1:
                    continue
                cases.append(case(m, mode, "bf16", b, s, p, f"loss-{loss}", loss=loss))
        # activation memory levers
        cases.append(case(m, "lora", "bf16", b, s, p, "offload", activation_offload=True))
        cases.append(case(m, "train", "bf16", b, s, p, "every-2", checkpointing="every-2"))
        cases.append(case(m, "train", "bf16", b, s, p, "selective", checkpointing="selective"))
        # optimizer levers
        cases.append(case(m, "train", "bf16", b, s, p, "opt-in-bwd", optimizer_in_backward=True))

# FSDP2 on 2 ranks sharing the GPU (gloo), fp32 masters with a bf16 MixedPrecisionPolicy,
# and LoRA on fp32 weights under autocast over plain FSDP.
for m in ["qwen2.5-0.5b", "llama-3.2-1b"]:
    b, s = 2, 1024
    base = {"gpus": 2, "sharding": "fsdp"}
    cases.append(case(m, "train", "fp32", b, s, 0, "fsdp-mp/g2", fsdp_mixed_precision="bf16", **base))
    cases.append(case(m, "lora", "fp32", b, s, 0, "fsdp-mp/g2", fsdp_mixed_precision="bf16", **base))
    cases.append(case(m, "lora", "fp32", b, s, 1, "fsdp/g2", autocast="bf16", **base))
    cases.append(case(m, "train", "fp32", b, s, 1, "fsdp-mp-ckpt/g2", fsdp_mixed_precision="bf16",
                      checkpointing=True, **base))

json.dump(cases, open("cases.json", "w"), indent=1)
print(len(cases), "cases;", sum(c["gpus"] == 1 for c in cases), "on one GPU")
