#!/usr/bin/env python3
"""Each public forward case (and a few generate cases) on a model built for it alone, as a one-case
process of measure.py sees it: the warm-up, the model built, sync_reset, the case. No case before it
trains, so no autograd-thread cuBLAS workspace pins a segment; every case's start is a freshly built
model (the model is rebuilt per case). Per case: measure.py's record plus
  build: the allocations of build_model (compact [code, size, addr]) and the segments with their blocks
         after sync_reset ([[segment_size, [[block_size, active?], ...]], ...])
  start_reserved/start_allocated, and the case's own trace (compact).
  python3 fresh.py CASES.json OUT.jsonl --deadline S [--modes forward,generate] [--only SUB]"""
import argparse, gzip, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure, torch

def compact(snap):
    out = []
    for t in snap.get("device_traces", []):
        for e in t:
            a = e["action"]
            if a == "alloc": out.append(["a", e["size"], e["addr"]])
            elif a == "free_completed": out.append(["f", e["size"], e["addr"]])
            elif a in ("segment_alloc", "segment_map"): out.append(["S", e["size"], e["addr"]])
            elif a in ("segment_free", "segment_unmap"): out.append(["U", e["size"], e["addr"]])
    return out

def layout(snap):
    segs = sorted(snap["segments"], key=lambda s: s["address"])
    return [[s["total_size"], s.get("segment_type", ""), [[b["size"], b["state"].startswith("active")] for b in s["blocks"]]]
            for s in segs]

def rec_on():
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=3000000)

def rec_off():
    torch.cuda.memory._record_memory_history(enabled=None)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases"); ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=250)
    ap.add_argument("--modes", default="forward")
    ap.add_argument("--only", default="")
    ap.add_argument("--traces", default="")
    ap.add_argument("--ids", default="", help="comma-separated case ids (instead of --modes/--only)")
    a = ap.parse_args()
    t0 = time.time()
    base = os.path.dirname(os.path.abspath(a.cases))
    modes = a.modes.split(",")
    cases = [c for c in json.load(open(a.cases)) if c["mode"] in modes and a.only in c["id"] and not c.get("lora")]
    if a.ids:
        want = a.ids.split(",")
        cases = [c for c in json.load(open(a.cases)) if c["id"] in want]
    cases.sort(key=lambda c: (c["mode"] != "forward", c["config"], c["weights_dtype"]))
    out = open(a.out, "a")
    torch.cuda.init()
    x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (x @ x).sum().item()
    del x
    measure.sync_reset()
    out.write(json.dumps({"env": True, "torch": torch.__version__, "non_torch_bytes_after_init": measure.non_torch_bytes(),
                          "reserved_after_init": torch.cuda.memory_reserved(), "allocated_after_init": torch.cuda.memory_allocated(),
                          "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}) + "\n")
    for case in cases:
        if time.time() - t0 > a.deadline:
            print("deadline", flush=True); break
        rec = dict(case); started = time.time()
        try:
            model = None
            measure.sync_reset()
            rec_on()
            model = measure.build_model(os.path.join(base, case["config"]), measure.DTYPES[case["weights_dtype"]], case.get("attn", "sdpa"))
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            rec_off()
            build_events = compact(snap)
            model.zero_grad(set_to_none=True)
            measure.sync_reset()
            snap = torch.cuda.memory._snapshot()
            rec.update(build={"events": build_events, "segments": layout(snap)},
                       start_reserved=torch.cuda.memory_reserved(), start_allocated=torch.cuda.memory_allocated())
            total, trainable, buffers = measure.count_params(model)
            rec.update(params=total, resident_bytes=torch.cuda.memory_allocated())
            rec_on()
            r = measure.run_case(model, case)
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            rec_off()
            rec.update(r)
            rec.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
            rec.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
            rec["status"] = "ok"
            ev = compact(snap)
            if a.traces:
                os.makedirs(a.traces, exist_ok=True)
                with gzip.open(os.path.join(a.traces, case["id"].replace("/", "__") + ".json.gz"), "wt") as f:
                    json.dump({"id": case["id"], "events": ev}, f, separators=(",", ":"))
            rec["case_events"] = len(ev)
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"; rec["error"] = str(e)[:500]
        except Exception as e:
            rec["status"] = "error"; rec["error"] = f"{type(e).__name__}: {e}"[:1000]
        finally:
            rec_off()
        rec["non_torch_bytes"] = measure.non_torch_bytes()
        rec["seconds"] = round(time.time() - started, 2)
        model = None
        out.write(json.dumps(rec) + "\n"); out.flush()
        M = 2**20
        print(f"{rec['status']:5} res {rec.get('start_reserved',0)/M:8.1f} alloc {rec.get('start_allocated',0)/M:8.1f} "
              f"pk {rec.get('peak_allocated_bytes',0)/M:9.1f} rsv {rec.get('peak_reserved_bytes',0)/M:9.1f} {rec['seconds']:5.1f}s {case['id']}", flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)

if __name__ == "__main__":
    main()
