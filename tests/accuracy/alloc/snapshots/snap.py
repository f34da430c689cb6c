#!/usr/bin/env python3
"""shared/truth/measure.py's loop (harness.py: measure_main) with
torch.cuda.memory._record_memory_history()/_snapshot() around each case.
Adds a per-case 'snapshot' summary: segment count/bytes at end, alloc/free event counts,
peak allocated replayed from the trace, largest segment, by pool. Usage like measure.py."""
import sys, os, json
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # harness.py, unless beside
import harness, torch

def summarize(snap):
    segs = snap["segments"]
    s = {"segments": len(segs),
         "segment_bytes": sum(x["total_size"] for x in segs),
         "large_segments": sum(1 for x in segs if x.get("segment_type") == "large"),
         "small_segments": sum(1 for x in segs if x.get("segment_type") == "small"),
         "largest_segment": max([x["total_size"] for x in segs] or [0]),
         "active_bytes_end": sum(b["size"] for x in segs for b in x["blocks"] if b["state"].startswith("active"))}
    ev = [e for t in snap.get("device_traces", []) for e in t]
    cur = peak = 0; res = rpk = 0; na = nf = nsa = nsf = 0; res_at_peak = 0
    for e in ev:
        a = e["action"]
        if a == "alloc":
            cur += e["size"]; na += 1
            if cur > peak: peak = cur; res_at_peak = res
        elif a == "free_completed": cur -= e["size"]; nf += 1
        elif a == "segment_alloc" or a == "segment_map": res += e["size"]; rpk = max(rpk, res); nsa += 1
        elif a == "segment_free" or a == "segment_unmap": res -= e["size"]; nsf += 1
    s.update(events=len(ev), allocs=na, frees=nf, segment_allocs=nsa, segment_frees=nsf,
             trace_alloc_delta_peak=peak, trace_reserved_delta_peak=rpk,
             trace_reserved_delta_at_alloc_peak=res_at_peak)
    # Segment sizes at the end (MiB -> count) and the free bytes cached in them, by pool.
    hist = {}
    for x in segs:
        k = str(x["total_size"] >> 20)
        hist[k] = hist.get(k, 0) + 1
    s["segment_sizes_mib"] = dict(sorted(hist.items(), key=lambda kv: -int(kv[0])))
    for pool in ("large", "small"):
        s[pool + "_free_bytes_end"] = sum(b["size"] for x in segs if x.get("segment_type") == pool
                                          for b in x["blocks"] if not b["state"].startswith("active"))
    return s

def run_case(model, case):
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1000000)
    try:
        r = harness.run_case(model, case)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        r["snapshot"] = summarize(snap)
        r.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
        r.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
        return r
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)

if __name__ == "__main__":
    sys.exit(harness.measure_main(run_case=run_case))
