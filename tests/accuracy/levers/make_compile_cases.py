#!/usr/bin/env python3
"""Writes compile_cases.json: torch.compile of the training step beside the same step in eager
(issue #18's `--compile`), for measure_compile.py. bf16 weights, AdamW, hf loss (fp32 logits).

Priority 0: 3 models x (full training, LoRA) x (plain, checkpointing) at b2 s1024, eager and
compiled (each decoder layer and the loss: "all"); 1: the same at b1 s4096; 2: torchtune's
chunked loss compiled, and the layers compiled with the loss eager ("layers", torchtitan);
3: the whole model compiled (Hugging Face Trainer's torch_compile: "model")."""
import json

MODELS = ["qwen2.5-0.5b", "llama-3.2-1b", "smollm2-360m"]
LORA = {"r": 16, "targets": "all-linear"}


def case(model, mode, b, s, priority, compile_kind, ckpt=False, loss="hf"):
    tag = ("ckpt" if ckpt else "plain") + ("" if loss == "hf" else f"-loss-{loss}")
    return {"id": f"{model}/{mode}/bf16/b{b}s{s}/{tag}/{compile_kind or 'eager'}",
            "model": model, "config": f"models/{model}.json", "mode": mode, "weights_dtype": "bf16",
            "autocast": None, "optimizer": "adamw", "batch": b, "seq": s, "new_tokens": 0,
            "checkpointing": ckpt, "attn": "sdpa", "lora": LORA if mode == "lora" else None,
            "gpus": 1, "priority": priority, "loss": loss, "compile": compile_kind}


cases = []
for p, (b, s) in enumerate([(2, 1024), (1, 4096)]):
    for m in MODELS:
        for mode in ("train", "lora"):
            for ckpt in (False, True):
                for kind in (None, "all"):
                    cases.append(case(m, mode, b, s, p, kind, ckpt))
for m in MODELS:
    for kind in (None, "all"):
        cases.append(case(m, "train", 2, 1024, 2, kind, loss="chunked"))
    cases.append(case(m, "train", 2, 1024, 2, "layers"))
for m in MODELS[:2]:
    cases.append(case(m, "train", 2, 1024, 3, "model"))

json.dump(cases, open("compile_cases.json", "w"), indent=1)
print(len(cases), "cases")

# Session 9: the saved tensors of eager and compiled layers (measure_compile.py's probe_saved):
# 3 models x (full training, LoRA) x (eager, "all") at b2 s1024, plain (no checkpointing).
probe = [dict(case(m, mode, 2, 1024, 0, kind), probe_saved=True) for m in MODELS for mode in ("train", "lora")
         for kind in (None, "all")]
for c in probe:
    c["id"] += "/probe"
json.dump(probe, open("compile_probe_cases.json", "w"), indent=1)
print(len(probe), "probe cases")

# Session 10: the chunked loss's backward (measure_compile.py's probe_backward: the allocator's
# events over one more backward). chunked_probe_cases.json: full training, b2 s1024, eager and
# "all" on the 3 models (the compile.jsonl cases again), and llama-3.2-1b's hf loss (full
# training) and chunked loss (LoRA) in eager. chunked_cases.json: a second size (b1 s4096, full
# training) and LoRA (b2 s1024), eager and "all", each probed too.
chunked_probe = [dict(case(m, "train", 2, 1024, 0, kind, loss="chunked"), probe_backward=True)
                 for m in MODELS for kind in (None, "all")]
chunked_probe += [dict(case("llama-3.2-1b", "train", 2, 1024, 1, None), probe_backward=True),
                  dict(case("llama-3.2-1b", "lora", 2, 1024, 1, None, loss="chunked"), probe_backward=True)]
for c in chunked_probe:
    c["id"] += "/probe"
json.dump(chunked_probe, open("chunked_probe_cases.json", "w"), indent=1)
print(len(chunked_probe), "chunked probe cases")
chunked = [dict(case(m, mode, b, s, p, kind, loss="chunked"), probe_backward=True)
           for p, (mode, b, s) in enumerate([("train", 1, 4096), ("lora", 2, 1024)])
           for m in MODELS for kind in (None, "all")]
json.dump(chunked, open("chunked_cases.json", "w"), indent=1)
print(len(chunked), "chunked cases")

# Session 10: what forward leaves alive (measure_compile.py's probe_forward: the allocator's
# history with Python stacks over one more forward): full training with the hf loss at b2 s1024,
# eager on the 3 models and "all" on qwen2.5-0.5b, and smollm2-360m's LoRA; qwen2.5-0.5b and
# smollm2-360m are 40-120 MB above the estimate at forward's end, llama-3.2-1b within 3 MB.
forward_probe = [dict(case(m, "train", 2, 1024, 0, None), probe_forward=True) for m in MODELS]
forward_probe += [dict(case("qwen2.5-0.5b", "train", 2, 1024, 1, "all"), probe_forward=True),
                  dict(case("smollm2-360m", "lora", 2, 1024, 1, None), probe_forward=True)]
for c in forward_probe:
    c["id"] += "/fwdprobe"
json.dump(forward_probe, open("forward_probe_cases.json", "w"), indent=1)
print(len(forward_probe), "forward probe cases")

# Session 10: the shape of torchtune's published "+ Chunked Cross Entropy" row
# (tests/accuracy/published: Llama 3.2 3B, full training, batch 2 x 4096, bf16, compiled, 8
# chunks), compiled and eager, each with probe_backward; models/llama-3.2-3b.json is
# data/models/llama-3.2-3b.json's config.
published = [dict(case("llama-3.2-3b", "train", 2, 4096, 0, kind, loss="chunked"), probe_backward=True)
             for kind in ("all", None)]
json.dump(published, open("published_cases.json", "w"), indent=1)
print(len(published), "published-shape cases")
