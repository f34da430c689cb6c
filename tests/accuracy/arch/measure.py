#!/usr/bin/env python3
"""Measure the real peak GPU memory of transformer workloads with PyTorch.

Ground truth for vramfit: every case in a cases file (see cases.json) is run on
the GPU and what torch.cuda reports is written as one JSON line per case.

  python3 measure.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]

Config paths are relative to the cases file. Models are built from them with random weights (nothing is downloaded).
A case's peak is torch.cuda.max_memory_allocated() over the whole case, with the
model's weights already resident, the figure a training script would print at
its end. Cases already present in OUT.jsonl are skipped, so a run can resume.
"""
import argparse
import gc
import json
import os
import sys
import time

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def sync_reset():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def non_torch_bytes():
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def build_model(config_path, dtype, attn):
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = dict(json.load(open(config_path)))
    model_type = raw.pop("model_type")
    raw.pop("architectures", None)
    config = AutoConfig.for_model(model_type, **raw)
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)
        except TypeError:
            model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype, attn_implementation=attn)
        except ValueError as e:
            # a type without SDPA support: eager, and the record says so (rec["attn"])
            if attn == "eager":
                raise
            print(f"{model_type}: {attn} refused ({str(e)[:120]}), eager", flush=True)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager")
    if next(model.parameters()).dtype != dtype:
        model.to(dtype)
    return model


def make_optimizer(name, params):
    o = torch.optim
    table = {
        "adamw": lambda: o.AdamW(params, lr=1e-5),
        "adamw-fused": lambda: o.AdamW(params, lr=1e-5, fused=True),
        "adamw-forloop": lambda: o.AdamW(params, lr=1e-5, foreach=False),
        "adam": lambda: o.Adam(params, lr=1e-5),
        "sgd": lambda: o.SGD(params, lr=1e-4),
        "sgd-momentum": lambda: o.SGD(params, lr=1e-4, momentum=0.9),
        "adafactor": lambda: o.Adafactor(params, lr=1e-3),
        "rmsprop": lambda: o.RMSprop(params, lr=1e-5),
        "adagrad": lambda: o.Adagrad(params, lr=1e-5),
    }
    return table[name]()


def count_params(model):
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return total, trainable, buffers


def run_forward(model, case):
    b, s = case["batch"], case["seq"]
    ids = torch.randint(0, model.config.vocab_size, (b, s), device="cuda")
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=False)
        del out
    torch.cuda.synchronize()
    return {}


def run_generate(model, case):
    b, s, n = case["batch"], case["seq"], case["new_tokens"]
    ids = torch.randint(3, model.config.vocab_size, (b, s), device="cuda")
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
            use_cache=True,
        )
        generated = out.shape[1] - s
        del out
    torch.cuda.synchronize()
    return {"generated_tokens": int(generated)}


def run_train(model, case, steps=3):
    b, s = case["batch"], case["seq"]
    ids = torch.randint(0, model.config.vocab_size, (b, s), device="cuda")
    model.train()
    model.config.use_cache = False
    if case.get("checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if case.get("lora"):
            model.enable_input_require_grads()
    elif getattr(model, "is_gradient_checkpointing", False):
        model.gradient_checkpointing_disable()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(case["optimizer"], params)
    autocast = case.get("autocast")
    per_step = []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=DTYPES[autocast or "bf16"], enabled=autocast is not None):
            loss = model(input_ids=ids, labels=ids).loss
        fwd_peak = torch.cuda.max_memory_allocated()
        after_fwd = torch.cuda.memory_allocated()
        loss.backward()
        bwd_peak = torch.cuda.max_memory_allocated()
        after_bwd = torch.cuda.memory_allocated()
        opt.step()
        opt_peak = torch.cuda.max_memory_allocated()
        opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        per_step.append({
            "fwd_peak": fwd_peak, "after_fwd": after_fwd,
            "bwd_peak": bwd_peak, "after_bwd": after_bwd,
            "opt_peak": opt_peak, "after_step": torch.cuda.memory_allocated(),
            "reserved_peak": torch.cuda.max_memory_reserved(),
        })
    state_bytes = sum(
        t.numel() * t.element_size()
        for st in opt.state.values() for t in st.values() if torch.is_tensor(t) and t.is_cuda
    )
    del opt
    return {
        "steps": per_step,
        "optimizer_state_bytes": state_bytes,
        # The run's peak is the largest step peak (the first steps' resets split it).
        "peak_allocated_bytes": max(st["opt_peak"] for st in per_step),
        "peak_reserved_bytes": max(st["reserved_peak"] for st in per_step),
    }


def wrap_lora(model, lora):
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=lora["r"], lora_alpha=lora.get("alpha", 2 * lora["r"]),
        target_modules=lora["targets"], lora_dropout=lora.get("dropout", 0.0),
        bias="none", task_type="CAUSAL_LM",
    )
    return get_peft_model(model, cfg)


def run_case(model, case):
    mode = case["mode"]
    if mode == "forward":
        return run_forward(model, case)
    if mode == "generate":
        return run_generate(model, case)
    if mode in ("train", "lora"):
        return run_train(model, case)
    raise ValueError(f"unknown mode {mode}")


def group_key(case):
    # LoRA wraps the model in place, so each LoRA case gets a model of its own.
    lora = case["id"] if case.get("lora") else ""
    return (case["config"], case["weights_dtype"], case.get("attn", "sdpa"), lora)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    t0 = time.time()

    base = os.path.dirname(os.path.abspath(args.cases))
    cases = [c for c in json.load(open(args.cases)) if args.only in c["id"]]
    done = set()
    if os.path.exists(args.out):
        for line in open(args.out):
            rec = json.loads(line)
            if "id" in rec:
                done.add(rec["id"])
    out = open(args.out, "a")

    torch.cuda.init()
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a
    sync_reset()
    if not done:
        import transformers
        try:
            import peft
            peft_version = peft.__version__
        except ImportError:
            peft_version = None
        env = {
            "env": True, "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft_version, "gpu": torch.cuda.get_device_name(0),
            "total_bytes": torch.cuda.get_device_properties(0).total_memory,
            "non_torch_bytes_after_init": non_torch_bytes(),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        }
        out.write(json.dumps(env) + "\n")
        out.flush()

    todo = [c for c in cases if c["id"] not in done]
    todo.sort(key=group_key)
    model, key = None, None
    for case in todo:
        if time.time() - t0 > args.deadline:
            print(f"deadline reached, {len(todo)} cases listed, stopping", flush=True)
            break
        rec = dict(case)
        started = time.time()
        try:
            if group_key(case) != key:
                model = None
                sync_reset()
                model = build_model(
                    os.path.join(base, case["config"]), DTYPES[case["weights_dtype"]], case.get("attn", "sdpa")
                )
                if case.get("lora"):
                    model = wrap_lora(model, case["lora"])
                key = group_key(case)
            model.zero_grad(set_to_none=True)
            sync_reset()
            total, trainable, buffers = count_params(model)
            rec["attn"] = getattr(model.config, "_attn_implementation", rec.get("attn"))
            rec.update(params=total, trainable_params=trainable, buffer_bytes=buffers,
                       resident_bytes=torch.cuda.memory_allocated())
            result = run_case(model, case)
            rec.update(result)
            rec.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
            rec.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
            rec["status"] = "ok"
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"
            rec["error"] = str(e)[:2000]
        except Exception as e:  # keep going: one broken case must not lose the rest
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        rec["non_torch_bytes"] = non_torch_bytes()
        rec["seconds"] = round(time.time() - started, 2)
        if rec["status"] != "ok":
            model, key = None, None
            sync_reset()
        out.write(json.dumps(rec) + "\n")
        out.flush()
        peak = rec.get("peak_allocated_bytes", 0) / 2**30
        print(f"{rec['status']:5} {peak:8.2f} GiB {rec['seconds']:6.1f}s  {case['id']}", flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
