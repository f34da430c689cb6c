#!/usr/bin/env python3
"""shared/truth/measure.py's process, recorded: the cases named by --ids, run in ONE process in
measure.py's order (sorted by group_key, the model rebuilt per group, sync_reset = gc + empty_cache
before each case), with measure.py's own functions. Per case, the segments left after the pre-case
sync_reset (what earlier cases pinned), the case's compact trace and the segments at its end, in
DIR/<id>.json.gz; the JSONL records are measure.py's.

  python3 history.py CASES.json OUT.jsonl --ids A,B,... --traces DIR"""
import argparse, gzip, json, os, sys, time
_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
import torch
import measure as m
from snap_trace import compact
from fresh import segments_of, WORKSPACE


def rec_on():
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=4000000)


def rec_off():
    torch.cuda.memory._record_memory_history(enabled=None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases"); ap.add_argument("out")
    ap.add_argument("--ids", required=True); ap.add_argument("--traces", required=True)
    ap.add_argument("--deadline", type=float, default=200)
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.traces, exist_ok=True)
    base = os.path.dirname(os.path.abspath(a.cases))
    want = set(a.ids.split(","))
    todo = [c for c in json.load(open(a.cases)) if c["id"] in want]
    todo.sort(key=m.group_key)
    out = open(a.out, "a")
    torch.cuda.init()
    rec_on()
    x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (x @ x).sum().item()
    del x
    m.sync_reset()
    out.write(json.dumps({"env": True, "torch": torch.__version__, "history": True,
                          "total_bytes": torch.cuda.get_device_properties(0).total_memory,
                          "non_torch_bytes_after_init": m.non_torch_bytes(),
                          "init_segments": segments_of(torch.cuda.memory._snapshot())}) + "\n")
    rec_off()
    model, key = None, None
    for case in todo:
        if time.time() - t0 > a.deadline:
            print("deadline", flush=True); break
        rec = dict(case); started = time.time()
        try:
            if m.group_key(case) != key:
                model = None
                m.sync_reset()
                model = m.build_model(os.path.join(base, case["config"]), m.DTYPES[case["weights_dtype"]],
                                      case.get("attn", "sdpa"))
                if case.get("lora"):
                    model = m.wrap_lora(model, case["lora"])
                key = m.group_key(case)
            model.zero_grad(set_to_none=True)
            m.sync_reset()
            start = segments_of(torch.cuda.memory._snapshot())
            rec["start_reserved"] = torch.cuda.memory_reserved()
            rec["resident_bytes"] = torch.cuda.memory_allocated()
            rec_on()
            rec.update(m.run_case(model, case))
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            rec_off()
            rec.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
            rec.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
            rec["end_allocated"] = torch.cuda.memory_allocated()
            ev = compact(snap)
            ws = None
            if case["mode"] in ("train", "lora"):
                for i, e in enumerate(ev):
                    if e[0] == "a" and e[1] == WORKSPACE:
                        seg = next((s for s in snap["segments"] if s["address"] <= e[2] < s["address"] + s["total_size"]), None)
                        ws = {"event": i, "new_segment": i > 0 and ev[i - 1][0] == "S" and ev[i - 1][2] == e[2],
                              "segment_size": seg["total_size"] if seg else None,
                              "offset": e[2] - seg["address"] if seg else None}
                        break
            rec["workspace"] = ws
            with gzip.open(os.path.join(a.traces, case["id"].replace("/", "__") + ".json.gz"), "wt") as f:
                json.dump({"id": case["id"], "start_reserved": rec["start_reserved"],
                           "start_allocated": rec["resident_bytes"], "start_segments": start,
                           "end_segments": segments_of(snap), "events": ev,
                           "peak_reserved_bytes": rec["peak_reserved_bytes"],
                           "peak_allocated_bytes": rec["peak_allocated_bytes"]}, f, separators=(",", ":"))
            del snap, ev
            rec["status"] = "ok"
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"; rec["error"] = str(e)[:500]
        except Exception as e:  # noqa: BLE001
            rec["status"] = "error"; rec["error"] = f"{type(e).__name__}: {e}"[:500]
        finally:
            try: rec_off()
            except Exception: pass
        rec["non_torch_bytes"] = m.non_torch_bytes()
        rec["seconds"] = round(time.time() - started, 2)
        if rec["status"] != "ok":
            model, key = None, None
            m.sync_reset()
        out.write(json.dumps(rec) + "\n"); out.flush()
        M = 2 ** 20
        print(f"{rec['status']:5} start {rec.get('start_reserved', 0) / M:8.0f} pk {rec.get('peak_allocated_bytes', 0) / M:8.0f} "
              f"rsv {rec.get('peak_reserved_bytes', 0) / M:8.0f} ctx {rec['non_torch_bytes'] / M:6.0f} ws {rec.get('workspace')} "
              f"{rec['seconds']:5.1f}s {case['id']} {rec.get('error', '')[:200]}", flush=True)
    model = None
    m.sync_reset()
    out.write(json.dumps({"final": True, "segments": segments_of(torch.cuda.memory._snapshot()),
                          "reserved": torch.cuda.memory_reserved()}) + "\n")
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
