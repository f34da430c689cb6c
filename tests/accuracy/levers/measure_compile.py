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

Writes harness.py's fields; peak_allocated_bytes is the largest of steps 2 and 3 (step 1
compiles); steps[0] keeps the first step's figures. Also records seconds_first_step and the
graph breaks dynamo counted. A case with `probe_saved` records the tensors one more forward
saves (saved_tensors); one with `probe_backward` the allocator's events over one more backward
(backward_probe).
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
import harness as H  # noqa: E402
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


def saved_tensors(fn):
    """Runs fn() (one forward and its loss) with a saved-tensors hook that records every tensor
    autograd saves (eager ops and the compiled graphs' save_for_backward alike): the bytes of
    the distinct storages, and how many tensors of each shape and dtype. The hook returns each
    tensor unchanged, so memory is what it is without it."""
    seen = {}
    kinds = {}

    def pack(t):
        try:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        except Exception:  # noqa: BLE001
            pass
        key = f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
        kinds[key] = kinds.get(key, 0) + 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn()
    return loss, {"saved_bytes": sum(seen.values()), "saved_kinds": kinds}


def replay(events, min_bytes):
    """The allocator's alloc / free_requested events replayed from backward's start: the peak
    above it, the blocks allocated since and alive at the peak (bytes -> count), the blocks
    alive at the start and freed before the peak, and the sequence of events of at least
    `min_bytes` ([+ or -, bytes, allocated above the start after it])."""
    from collections import Counter

    cur = peak = 0
    live, freed_old, seq = {}, [], []
    at_peak = (Counter(), Counter())
    n = 0
    for e in events:
        a, size = e["action"], e["size"]
        if a == "alloc":
            cur += size
            live[e["addr"]] = size
            sign = "+"
        elif a == "free_requested":
            cur -= size
            if live.pop(e["addr"], None) is None:
                freed_old.append(size)
            sign = "-"
        else:
            continue
        n += 1
        if size >= min_bytes:
            seq.append([sign, size, cur])
        if cur > peak:
            peak = cur
            at_peak = (Counter(live.values()), Counter(freed_old))
    return {
        "events": n, "replayed_end": cur, "peak_above_start": peak,
        "alive_at_peak": {str(k): v for k, v in sorted(at_peak[0].items(), reverse=True) if k >= min_bytes},
        "alive_at_peak_small_bytes": sum(k * v for k, v in at_peak[0].items() if k < min_bytes),
        "freed_before_peak": {str(k): v for k, v in sorted(at_peak[1].items(), reverse=True) if k >= min_bytes},
        "freed_before_peak_small_bytes": sum(k * v for k, v in at_peak[1].items() if k < min_bytes),
        "large_events": seq[:3000],
    }


def backward_probe(loss, min_bytes):
    """loss.backward() under the caching allocator's history (torch.cuda.memory.
    _record_memory_history, no stacks), replayed (replay) from what is allocated at its start."""
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    rec = torch.cuda.memory._record_memory_history
    try:
        rec(enabled="all", context=None, stacks="python", max_entries=2_000_000, clear_history=True)
    except TypeError:
        rec(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    try:
        loss.backward()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        rec(enabled=None)
    events = [e for dev in snap["device_traces"] for e in dev]
    return {"backward_probe": {"start_bytes": start, "end_bytes": torch.cuda.memory_allocated(),
                               **replay(events, min_bytes)}}


def where(e, n=2):
    """The first `n` frames of an allocation's Python stack outside torch (file:line function)."""
    out = []
    for f in e.get("frames") or []:
        fn = f.get("filename", "")
        if "/torch/" in fn or fn.startswith("<"):
            continue
        out.append(f"{os.path.basename(fn)}:{f.get('line')}:{f.get('name')}")
        if len(out) == n:
            break
    return " < ".join(out) or "?"


def forward_probe(fn, top=80):
    """fn() (a forward and its loss) under the allocator's history with Python stacks: the
    blocks allocated in it and alive at its end, grouped by (bytes, where: the first frames
    outside torch), the largest groups first; and the blocks alive at its start it freed.
    Returns (loss, record)."""
    from collections import Counter

    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    rec = torch.cuda.memory._record_memory_history
    try:
        rec(enabled="all", context="alloc", stacks="python", max_entries=2_000_000, clear_history=True)
    except TypeError:
        rec(enabled="all", context="alloc", stacks="python", max_entries=2_000_000)
    try:
        loss = fn()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        rec(enabled=None)
    live, freed_old = {}, Counter()
    for dev in snap["device_traces"]:
        for e in dev:
            if e["action"] == "alloc":
                live[e["addr"]] = (e["size"], where(e))
            elif e["action"] == "free_requested":
                if live.pop(e["addr"], None) is None:
                    freed_old[e["size"]] += 1
    groups = Counter()
    counts = Counter()
    for size, w in live.values():
        groups[(size, w)] += size
        counts[(size, w)] += 1
    alive = [[k[0], counts[k], k[1]] for k, _ in groups.most_common(top)]
    return loss, {"forward_probe": {
        "start_bytes": start, "end_bytes": torch.cuda.memory_allocated(),
        "alive_bytes": sum(sz for sz, _ in live.values()), "alive_blocks": len(live),
        "alive_at_end": alive, "freed_old": {str(k): v for k, v in sorted(freed_old.items(), reverse=True)[:40]},
    }}


def run_train(model, case, steps=3):
    ids = H.train_inputs(model, case)
    model.train()
    model.config.use_cache = False
    L.set_checkpointing(model, case)
    lm = L.base_causal_lm(model)
    lm.config.use_cache = False
    params = [p for p in model.parameters() if p.requires_grad]
    opt = H.make_optimizer(case["optimizer"], params)
    model, fns = prepare(model, case)
    per_step = H.run_steps(lambda: forward_loss(model, lm, ids, case, fns), opt, steps, timed=True)
    result = H.train_result(per_step, [opt], first=1)
    if case.get("probe_saved"):
        # After the measured steps (the graphs are compiled): one more forward, its saved tensors.
        loss, probe = saved_tensors(lambda: forward_loss(model, lm, ids, case, fns))
        loss.backward()
        opt.zero_grad(set_to_none=True)
        del loss
        result.update(probe)
    if case.get("probe_forward"):
        # After the measured steps: one more forward under the allocator's history with stacks.
        loss, probe = forward_probe(lambda: forward_loss(model, lm, ids, case, fns))
        result.update(probe)
        loss.backward()
        opt.zero_grad(set_to_none=True)
        del loss
    if case.get("probe_backward"):
        # After the measured steps: one more step, its backward under the allocator's history.
        loss = forward_loss(model, lm, ids, case, fns)
        result.update(backward_probe(loss, case.get("probe_min_bytes", 4 << 20)))
        opt.zero_grad(set_to_none=True)
        del loss
    del opt
    breaks = 0
    try:
        from torch._dynamo.utils import counters
        breaks = sum(counters["graph_break"].values())
    except Exception:  # noqa: BLE001
        pass
    return {**result, "seconds_first_step": per_step[0]["seconds"], "graph_breaks": breaks}


def status_line(rec):
    return (f"{rec['status']:5} {rec.get('peak_allocated_bytes', 0) / 2**30:8.3f} GiB "
            f"fwd_end {rec.get('steps', [{}])[-1].get('after_fwd', 0) / 2**30:8.3f} GiB {rec['seconds']:6.1f}s  "
            f"{rec['id']} {rec.get('error', '')[:300]}")


def main():
    ap = H.arg_parser()
    ap.add_argument("--max-priority", type=int, default=99)
    args = ap.parse_args()
    t0 = time.time()
    base, cases = H.load_cases(args.cases, args.only, keep=lambda c: c.get("priority", 0) <= args.max_priority)
    done = H.done_ids(args.out)
    out = H.start(args.out, done)
    todo = sorted((c for c in cases if c["id"] not in done), key=lambda c: (c.get("priority", 0), c["id"]))

    def measure(case, rec):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        H.sync_reset()
        model = H.load_model(base, case)
        H.sync_reset()
        H.describe_model(rec, model)
        rec.update(run_train(model, case))

    def cleanup(rec):
        torch._dynamo.reset()
        H.sync_reset()

    H.measure_cases(todo, out, t0, args.deadline, measure, cleanup=cleanup, line=status_line)


if __name__ == "__main__":
    sys.exit(main())
