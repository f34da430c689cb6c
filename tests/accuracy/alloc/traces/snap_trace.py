#!/usr/bin/env python3
"""snap.py's summary plus the whole allocation trace of each case, written compact (gzip JSON) for
replaying through vramfit's allocator model and comparing with the trace the engine synthesizes.
Training steps are marked: a marker is a small allocation of a unique size made and freed at once
(before forward, after forward, after backward, after the step). Usage like measure.py, plus
--traces DIR (one DIR/<id with / as __>.json.gz per case)."""
import gzip, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure, torch
import snap  # its import wraps measure.run_case in its own recording: undo that
from snap import summarize
measure.run_case = snap._orig

MARK_BASE = 1537  # marker k allocates (MARK_BASE + k) * 512 bytes in the small pool
MARKS = ["step_start", "fwd_end", "bwd_end", "step_end"]
TRACE_DIR = None

def mark(k):
    t = torch.empty((MARK_BASE + k) * 512, dtype=torch.uint8, device="cuda")
    del t

def run_train(model, case, steps=3):
    # measure.run_train with markers between the phases (same calls, same order).
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
    opt = measure.make_optimizer(case["optimizer"], params)
    autocast = case.get("autocast")
    per_step = []
    for _ in range(steps):
        torch.cuda.reset_peak_memory_stats()
        mark(0)
        with torch.autocast("cuda", dtype=measure.DTYPES[autocast or "bf16"], enabled=autocast is not None):
            loss = model(input_ids=ids, labels=ids).loss
        fwd_peak = torch.cuda.max_memory_allocated(); after_fwd = torch.cuda.memory_allocated()
        mark(1)
        loss.backward()
        bwd_peak = torch.cuda.max_memory_allocated(); after_bwd = torch.cuda.memory_allocated()
        mark(2)
        opt.step()
        opt_peak = torch.cuda.max_memory_allocated()
        opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        mark(3)
        per_step.append({"fwd_peak": fwd_peak, "after_fwd": after_fwd, "bwd_peak": bwd_peak, "after_bwd": after_bwd,
                         "opt_peak": opt_peak, "after_step": torch.cuda.memory_allocated(),
                         "reserved_peak": torch.cuda.max_memory_reserved()})
    state_bytes = sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values()
                      if torch.is_tensor(t) and t.is_cuda)
    del opt
    return {"steps": per_step, "optimizer_state_bytes": state_bytes,
            "peak_allocated_bytes": max(st["opt_peak"] for st in per_step),
            "peak_reserved_bytes": max(st["reserved_peak"] for st in per_step)}

def compact(snap):
    """[[code, size, addr], ...]: a alloc, f free_completed, S segment alloc/map, U segment free/unmap, m marker k."""
    out = []
    sizes = {(MARK_BASE + k) * 512: k for k in range(len(MARKS))}
    ev = [e for t in snap.get("device_traces", []) for e in t]
    skip = set()
    for i, e in enumerate(ev):
        a = e["action"]
        if a == "alloc" and e["size"] in sizes and i + 2 < len(ev) and ev[i + 1]["addr"] == e["addr"] \
                and ev[i + 1]["action"] == "free_requested":
            out.append(["m", sizes[e["size"]], 0]); skip.add(e["addr"]); continue
        if a == "alloc": out.append(["a", e["size"], e["addr"]])
        elif a == "free_completed":
            if e["addr"] in skip: skip.discard(e["addr"]); continue
            out.append(["f", e["size"], e["addr"]])
        elif a in ("segment_alloc", "segment_map"): out.append(["S", e["size"], e["addr"]])
        elif a in ("segment_free", "segment_unmap"): out.append(["U", e["size"], e["addr"]])
    return out

_orig = measure.run_case
def run_case(model, case):
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=3000000)
    try:
        start_reserved = torch.cuda.memory_reserved(); start_alloc = torch.cuda.memory_allocated()
        r = run_train(model, case) if case["mode"] in ("train", "lora") else _orig(model, case)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        r["snapshot"] = summarize(snap)
        r["snapshot"]["start_reserved"] = start_reserved
        r["snapshot"]["start_allocated"] = start_alloc
        r.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
        r.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
        if TRACE_DIR:
            with gzip.open(os.path.join(TRACE_DIR, case["id"].replace("/", "__") + ".json.gz"), "wt") as f:
                json.dump({"id": case["id"], "start_reserved": start_reserved, "start_allocated": start_alloc,
                           "events": compact(snap)}, f, separators=(",", ":"))
        return r
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)

measure.run_case = run_case
if __name__ == "__main__":
    if "--traces" in sys.argv:
        i = sys.argv.index("--traces"); TRACE_DIR = sys.argv[i + 1]; del sys.argv[i:i + 2]
        os.makedirs(TRACE_DIR, exist_ok=True)
    sys.exit(measure.main())
