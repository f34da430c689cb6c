#!/usr/bin/env python3
"""Draws the held-out workloads (cases.json) over shared/truth's nine models: random batch, sequence,
dtype, optimizer, checkpointing and LoRA settings (seed 20261204), dropping any id shared/truth has.
GPT-2 models keep prompt + new tokens within their 1024 learned positions.

  python3 gen.py ../../../../shared/truth/cases.json > cases.json
  python3 gen.py ../h200/cases.json --seed 2026120402 --config-dir models-arch \
      --small gemma-2-2b,phi-3-mini-4k,pythia-410m,qwen3-0.6b,olmoe-1b-7b,gpt2-large --big mistral-7b-v0.3 > cases-arch.json
(the second set: the architectures of tests/accuracy/h200/models, LoRA on all-linear)
"""
import argparse
import json
import random
import sys


def case_id(c):
    parts = [c["model"], c["mode"], c["weights_dtype"] + ("-amp" + c["autocast"] if c["autocast"] else "")]
    if c["optimizer"]:
        parts.append(c["optimizer"])
    if c["lora"]:
        t = c["lora"]["targets"]
        parts.append(f"r{c['lora']['r']}-" + ("+".join(t) if isinstance(t, list) else t))
    s = f"b{c['batch']}s{c['seq']}"
    if c["new_tokens"]:
        s += f"n{c['new_tokens']}"
    if c["checkpointing"]:
        s += "-ckpt"
    if c["attn"] != "sdpa":
        s += "-" + c["attn"]
    parts.append(s)
    return "/".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth_cases")
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--config-dir", default="models")
    ap.add_argument("--small", default="gpt2,gpt2-medium,smollm2-135m,smollm2-360m,qwen2.5-0.5b,llama-3.2-1b,qwen2.5-1.5b")
    ap.add_argument("--big", default="qwen2.5-7b,llama-3.1-8b")
    args = ap.parse_args()
    random.seed(args.seed)
    truth = {c["id"] for c in json.load(open(args.truth_cases))}
    small = args.small.split(",")
    big = args.big.split(",")
    named_targets = all(m.startswith(("gpt2", "smollm2", "qwen2.5", "llama")) for m in small + big)
    cases = []

    def add(c):
        if c["model"].startswith("gpt2") and c["mode"] == "generate" and c["seq"] + c["new_tokens"] > 1024:
            c["seq"] = 1024 - c["new_tokens"] - 24
        c["id"] = case_id(c)
        if c["id"] not in truth and c["id"] not in {x["id"] for x in cases}:
            cases.append(c)

    def base(m, mode):
        return dict(model=m, config=f"{args.config_dir}/{m}.json", mode=mode, weights_dtype="bf16", autocast=None,
                    optimizer=None, batch=1, seq=512, new_tokens=0, checkpointing=False, attn="sdpa", lora=None)

    for m in small + big:
        for _ in range(2):
            c = base(m, "forward")
            c["batch"] = random.choice([1, 2, 3, 6, 12])
            c["seq"] = random.choice([384, 768, 1536, 3072])
            if m.startswith("gpt2"):
                c["seq"] = min(c["seq"], 1024)
            c["weights_dtype"] = random.choice(["bf16", "bf16", "fp32"])
            c["attn"] = random.choice(["sdpa", "sdpa", "eager"])
            add(c)
        c = base(m, "generate")
        c["batch"] = random.choice([1, 3, 5, 8])
        c["seq"] = random.choice([200, 700, 1500])
        c["new_tokens"] = random.choice([32, 100, 300])
        add(c)
    for m in small:
        for _ in range(3):
            c = base(m, "train")
            c["batch"] = random.choice([1, 2, 3, 6])
            c["seq"] = random.choice([256, 640, 1024, 1536])
            if m.startswith("gpt2"):
                c["seq"] = min(c["seq"], 1024)
            v = random.choice(["bf16", "fp32", "amp"])
            if v != "bf16":
                c["weights_dtype"] = "fp32"
            if v == "amp":
                c["autocast"] = "bf16"
            c["optimizer"] = random.choice(["adamw", "adamw", "adamw-fused", "sgd-momentum", "adafactor", "adamw-forloop"])
            c["checkpointing"] = random.random() < 0.4
            add(c)
    for m in small + big:
        c = base(m, "lora")
        c["batch"] = random.choice([1, 2, 4])
        c["seq"] = random.choice([512, 1024, 2048])
        if m.startswith("gpt2"):
            c["seq"] = min(c["seq"], 1024)
            tg = random.choice([["c_attn"], "all-linear"])
        else:
            tg = random.choice([["q_proj", "v_proj"], "all-linear"])
        if not named_targets:
            tg = "all-linear"
        c["lora"] = dict(r=random.choice([8, 16, 64]), targets=tg, dropout=0.05)
        c["optimizer"] = "adamw"
        c["checkpointing"] = random.random() < 0.5
        add(c)
    json.dump(cases, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
