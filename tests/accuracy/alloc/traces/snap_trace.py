#!/usr/bin/env python3
"""snap.py's summary plus the whole allocation trace of each case, written compact (gzip JSON) for
replaying through vramfit's allocator model and comparing with the trace the engine synthesizes.
Training steps are marked: a marker is a small allocation of a unique size made and freed at once
(before forward, after forward, after backward, after the step). Usage like measure.py, plus
--traces DIR (one DIR/<id with / as __>.json.gz per case). harness.py and snap.py are found
beside this file, else in ../.. and ../snapshots."""
import gzip, json, os, sys
_here = os.path.dirname(os.path.abspath(__file__))
sys.path += [os.path.join(_here, "..", ".."), os.path.join(_here, "..", "snapshots")]
import harness, torch
from snap import summarize

MARK_BASE = 1537  # marker k allocates (MARK_BASE + k) * 512 bytes in the small pool
MARKS = ["step_start", "fwd_end", "bwd_end", "step_end"]
TRACE_DIR = None

def mark(k):
    t = torch.empty((MARK_BASE + k) * 512, dtype=torch.uint8, device="cuda")
    del t

def run_train(model, case, steps=3):
    # harness.run_train with markers between the phases (same calls, same order).
    return harness.run_train(model, case, steps, mark=mark)

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

def run_case(model, case):
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=3000000)
    try:
        start_reserved = torch.cuda.memory_reserved(); start_alloc = torch.cuda.memory_allocated()
        r = run_train(model, case) if case["mode"] in ("train", "lora") else harness.run_case(model, case)
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

if __name__ == "__main__":
    if "--traces" in sys.argv:
        i = sys.argv.index("--traces"); TRACE_DIR = sys.argv[i + 1]; del sys.argv[i:i + 2]
        os.makedirs(TRACE_DIR, exist_ok=True)
    sys.exit(harness.measure_main(run_case=run_case))
