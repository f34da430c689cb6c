#!/usr/bin/env python3
"""Measure torch.compile of the training step on one GPU, beside the same step in eager
(issue #18's `--compile`). The loop of measure_levers.py, with the forward written out so
that each piece can be compiled the way the training stacks compile it:

  compile: null      eager: hidden = model.model(ids); logits = lm_head(hidden); loss_fn(logits)
           "all"     torchtune (training.compile_model + compile_loss): torch.compile(layer)
                     for each decoder layer, registered back into the ModuleList after
                     checkpointing is set (so a checkpointed layer is traced with its
                     checkpoint), and the loss function compiled; lm_head stays eager
           "layers"  torchtitan (apply_compile): the decoder layers only, the loss eager
           "model"   Hugging Face Trainer's torch_compile: torch.compile(model), the loss
                     computed inside the model's forward (labels=...)
  loss:    "hf"      transformers ForCausalLMLoss: logits.float(), cross_entropy (mean)
           "chunked" torchtune CEWithChunkedOutputLoss: lm_head per 8 chunks of the hidden
                     states, each chunk's compute_cross_entropy (upcast + cross_entropy, sum)
                     the compiled function

  python3 measure_compile.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR] [--max-priority P]

Writes measure.py's fields; peak_allocated_bytes is the largest of steps 2 and 3 (step 1
compiles); steps[0] keeps the first step's figures. Also records seconds_first_step and the
graph breaks dynamo counted.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure as M  # noqa: E402
import measure_levers as L  # noqa: E402


def loss_hf(logits, labels):
    logits = logits.float()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)


def loss_chunk(logits, labels):
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100,
                           reduction="sum")


def prepare(model, case):
    kind = case.get("compile")
    fns = {"hf": loss_hf, "chunk": loss_chunk}
    if kind in ("all", "layers"):
        layers = L.base_causal_lm(model).model.layers
        for i in range(len(layers)):
            layers[i] = torch.compile(layers[i])
        if kind == "all":
            fns = {k: torch.compile(f) for k, f in fns.items()}
    elif kind == "model":
        model = torch.compile(model)
    elif kind is not None:
        raise ValueError(f"unknown compile {kind}")
    return model, fns


def forward_loss(model, lm, ids, case, fns):
    if case.get("compile") == "model":
        return model(input_ids=ids, labels=ids).loss
    labels = L.shifted_labels(ids)
    hidden = lm.model(input_ids=ids).last_hidden_state
    if case.get("loss", "hf") == "chunked":
        chunks = [lm.lm_head(c) for c in hidden.chunk(8, dim=1)]
        total = None
        for lc, lb in zip(chunks, labels.chunk(8, dim=1)):
            part = fns["chunk"](lc, lb)
            total = part if total is None else total + part
        del chunks
        return total / (labels != -100).sum()
    return fns["hf"](lm.lm_head(hidden), labels)


def run_train(model, case, steps=3):
    b, s = case["batch"], case["seq"]
    ids = torch.randint(0, model.config.vocab_size, (b, s), device="cuda")
    model.train()
    model.config.use_cache = False
    L.set_checkpointing(model, case)
    lm = L.base_causal_lm(model)
    lm.config.use_cache = False
    params = [p for p in model.parameters() if p.requires_grad]
    opt = M.make_optimizer(case["optimizer"], params)
    model, fns = prepare(model, case)
    per_step = []
    for i in range(steps):
        t = time.time()
        torch.cuda.reset_peak_memory_stats()
        loss = forward_loss(model, lm, ids, case, fns)
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
            "reserved_peak": torch.cuda.max_memory_reserved(), "seconds": round(time.time() - t, 2),
        })
    state_bytes = sum(t.numel() * t.element_size() for st in opt.state.values()
                      for t in st.values() if torch.is_tensor(t) and t.is_cuda)
    del opt
    steady = per_step[1:]
    breaks = 0
    try:
        from torch._dynamo.utils import counters
        breaks = sum(counters["graph_break"].values())
    except Exception:  # noqa: BLE001
        pass
    return {
        "steps": per_step,
        "optimizer_state_bytes": state_bytes,
        "peak_allocated_bytes": max(st["opt_peak"] for st in steady),
        "peak_reserved_bytes": max(st["reserved_peak"] for st in steady),
        "seconds_first_step": per_step[0]["seconds"],
        "graph_breaks": breaks,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--max-priority", type=int, default=99)
    args = ap.parse_args()
    t0 = time.time()
    base = os.path.dirname(os.path.abspath(args.cases))
    cases = [c for c in json.load(open(args.cases))
             if args.only in c["id"] and c.get("priority", 0) <= args.max_priority]
    done = set()
    if os.path.exists(args.out):
        for line in open(args.out):
            if line.strip() and "id" in json.loads(line):
                done.add(json.loads(line)["id"])
    out = open(args.out, "a")
    torch.cuda.init()
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a
    M.sync_reset()
    if not done:
        import peft
        import transformers
        out.write(json.dumps({
            "env": True, "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "gpu": torch.cuda.get_device_name(0),
            "total_bytes": torch.cuda.get_device_properties(0).total_memory,
            "non_torch_bytes_after_init": M.non_torch_bytes(),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        }) + "\n")
        out.flush()
    todo = sorted((c for c in cases if c["id"] not in done), key=lambda c: (c.get("priority", 0), c["id"]))
    for case in todo:
        if time.time() - t0 > args.deadline:
            print(f"deadline reached after {time.time() - t0:.0f}s", flush=True)
            break
        rec = dict(case)
        started = time.time()
        model = None
        try:
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
            M.sync_reset()
            model = M.build_model(os.path.join(base, case["config"]), M.DTYPES[case["weights_dtype"]],
                                  case.get("attn", "sdpa"))
            if case.get("lora"):
                model = M.wrap_lora(model, case["lora"])
            M.sync_reset()
            total, trainable, buffers = M.count_params(model)
            rec.update(params=total, trainable_params=trainable, buffer_bytes=buffers,
                       resident_bytes=torch.cuda.memory_allocated())
            rec.update(run_train(model, case))
            rec["status"] = "ok"
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"
            rec["error"] = str(e)[:2000]
        except Exception as e:  # noqa: BLE001
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        model = None
        torch._dynamo.reset()
        M.sync_reset()
        rec["non_torch_bytes"] = M.non_torch_bytes()
        rec["seconds"] = round(time.time() - started, 2)
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(f"{rec['status']:5} {rec.get('peak_allocated_bytes', 0) / 2**30:8.3f} GiB "
              f"fwd_end {rec.get('steps', [{}])[-1].get('after_fwd', 0) / 2**30:8.3f} GiB {rec['seconds']:6.1f}s  "
              f"{case['id']} {rec.get('error', '')[:300]}", flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
