#!/usr/bin/env python3
"""Each case in a process of its own, as a user's job runs it: CUDA initialised, the warm-up
matmul, the model built (harness.load_model: from_config under torch.device("cuda"), LoRA
wrapped), sync_reset, the case (harness.run_case's calls; training steps marked as
traces/snap_trace.py marks them). Nothing an earlier case allocated can pin a segment.

  python3 fresh.py CASES.json OUT.jsonl [--ids A,B | --modes forward,generate] [--only SUB]
                   [--deadline S] [--traces DIR] [--trace-ids A,B | --trace-modes train,lora]

The parent imports torch, transformers and peft but never touches CUDA (PYTORCH_NVML_BASED_CUDA_CHECK);
each case runs in a child made by os.fork(), which initialises CUDA itself. Should the first child
fail to initialise CUDA, every case runs in a new interpreter (`--one ID`) instead. Per case:
measure.py's record (harness.describe_model, run_case's figures, non_torch_bytes) plus
  start_reserved / start_allocated: after the build and sync_reset;
  end_allocated: what is still allocated after the case (the autograd thread's cuBLAS workspace);
  build: the built model's segments (free bytes per pool, segment counts) and its alloc/free counts;
  snapshot: traces/../snapshots/snap.py's summary of the case's _snapshot();
  workspace: for training, where the backward's first 32 MiB block landed (workspace_of);
  process: "fork" or "spawn".
With --traces, the case's compact trace (snap_trace.compact: [code, size, addr]) in
DIR/<id with / as __>.json.gz for the cases --trace-ids or --trace-modes name."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # the parent must not initialise CUDA
_here = os.path.dirname(os.path.abspath(__file__))
sys.path += [_here, os.path.join(_here, ".."), os.path.join(_here, "..", ".."),
             os.path.join(_here, "..", "traces"), os.path.join(_here, "..", "snapshots")]
import harness  # noqa: E402
import torch  # noqa: E402
from snap import summarize  # noqa: E402
from snap_trace import MARK_BASE, MARKS, compact, mark  # noqa: E402

WORKSPACE = 32 << 20  # cuBLAS's workspace on sm90 (CublasHandlePool.cpp: 4096 KiB x 8)


def record_on():
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=4000000)


def record_off():
    torch.cuda.memory._record_memory_history(enabled=None)


def segments_of(snap):
    """Each segment: [address, total_size, pool, [[offset, size, active], ...]]."""
    out = []
    for seg in sorted(snap["segments"], key=lambda x: x["address"]):
        blocks, off = [], 0
        for b in seg["blocks"]:
            blocks.append([off, b["size"], 1 if b["state"].startswith("active") else 0])
            off += b["size"]
        out.append([seg["address"], seg["total_size"], seg.get("segment_type", ""), blocks])
    return out


# --addresses (session 10's fresh3 runs): record from the warm-up on (its cuBLAS workspace), so that
# the build's addresses are known, and keep the build's events and the segments at the step's start
# and end in the trace.
ADDRESSES = False


def build_summary(snap):
    """The built model's segments: free bytes per pool, segment counts, and its alloc/free counts."""
    segs = snap["segments"]
    out = {}
    for pool in ("large", "small"):
        out[pool + "_free_bytes"] = sum(b["size"] for s in segs if s.get("segment_type") == pool
                                        for b in s["blocks"] if not b["state"].startswith("active"))
        out[pool + "_segments"] = sum(1 for s in segs if s.get("segment_type") == pool)
    ev = [e for t in snap.get("device_traces", []) for e in t]
    out["allocs"] = sum(e["action"] == "alloc" for e in ev)
    out["frees"] = sum(e["action"] == "free_completed" for e in ev)
    return out


def workspace_of(events, snap):
    """Training: the first 32 MiB allocation after the first step's forward (the autograd device
    thread's cuBLAS handle asks for its workspace at its first matmul, CublasHandlePool.cpp), whether
    a segment was made for it, and the size of the segment that holds it at the end."""
    fwd_end = next((i for i, e in enumerate(events) if e[0] == "m" and e[1] == 1), None)
    if fwd_end is None:
        return None
    for i in range(fwd_end, len(events)):
        e = events[i]
        if e[0] == "a" and e[1] == WORKSPACE:
            new_segment = i > 0 and events[i - 1][0] == "S" and events[i - 1][2] == e[2]
            freed = any(f[0] == "f" and f[2] == e[2] and f[1] == WORKSPACE for f in events[i + 1:])
            seg = next((s for s in snap["segments"] if s["address"] <= e[2] < s["address"] + s["total_size"]), None)
            return {"event": i - fwd_end, "new_segment": new_segment, "freed": freed,
                    "segment_size": seg["total_size"] if seg else None,
                    "offset": e[2] - seg["address"] if seg else None}
    return {"event": None}


def run_one(base, case, trace_dir):
    """One case, in this process, from CUDA's initialisation on: its record."""
    rec = dict(case)
    started = time.time()
    try:
        torch.cuda.init()
        if ADDRESSES:
            record_on()
        harness.warm_up()
        harness.sync_reset()
        rec["non_torch_bytes_after_init"] = harness.non_torch_bytes()
        rec["reserved_after_init"] = torch.cuda.memory_reserved()
        if not ADDRESSES:
            record_on()
        model = harness.load_model(base, case)
        torch.cuda.synchronize()
        snap0 = torch.cuda.memory._snapshot()
        build = build_summary(snap0)
        build_events = compact(snap0) if ADDRESSES else None
        del snap0
        record_off()
        model.zero_grad(set_to_none=True)
        harness.sync_reset()
        snap = torch.cuda.memory._snapshot()
        start_segments = segments_of(snap) if ADDRESSES else None
        build.update({k: v for k, v in build_summary(snap).items() if k not in ("allocs", "frees")})
        rec.update(build=build, start_reserved=torch.cuda.memory_reserved(),
                   start_allocated=torch.cuda.memory_allocated())
        harness.describe_model(rec, model)
        record_on()
        if case["mode"] in ("train", "lora"):
            r = harness.run_train(model, case, mark=mark)
        else:
            r = harness.run_case(model, case)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        record_off()
        rec.update(r)
        rec.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
        rec.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())
        rec["end_allocated"] = torch.cuda.memory_allocated()
        rec["snapshot"] = summarize(snap)
        events = compact(snap)
        rec["case_events"] = len(events)
        if case["mode"] in ("train", "lora"):
            rec["workspace"] = workspace_of(events, snap)
        if trace_dir:
            os.makedirs(trace_dir, exist_ok=True)
            trace = {"id": case["id"], "start_reserved": rec["start_reserved"],
                     "start_allocated": rec["start_allocated"], "marks": MARKS, "mark_base": MARK_BASE,
                     "events": events}
            if ADDRESSES:
                trace.update(build_events=build_events, start_segments=start_segments,
                             end_segments=segments_of(snap), peak_reserved_bytes=rec["peak_reserved_bytes"],
                             peak_allocated_bytes=rec["peak_allocated_bytes"])
            with gzip.open(os.path.join(trace_dir, case["id"].replace("/", "__") + ".json.gz"), "wt") as f:
                json.dump(trace, f, separators=(",", ":"))
        rec["status"] = "ok"
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["error"] = str(e)[:2000]
    except Exception as e:  # noqa: BLE001  one broken case must not lose the rest
        rec["status"] = "error"
        rec["error"] = f"{type(e).__name__}: {e}"[:2000]
    finally:
        try:
            record_off()
        except Exception:  # noqa: BLE001
            pass
    try:
        rec["non_torch_bytes"] = harness.non_torch_bytes()
    except Exception:  # noqa: BLE001
        pass
    rec["seconds"] = round(time.time() - started, 2)
    return rec


def in_child(base, case, trace_dir):
    """run_one in a forked child; (the record, or None when the child wrote nothing)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            rec = run_one(base, case, trace_dir)
            rec["process"] = "fork"
            with open(path, "w") as f:
                json.dump(rec, f)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.waitpid(pid, 0)
    try:
        with open(path) as f:
            text = f.read()
        return json.loads(text) if text else None
    finally:
        os.unlink(path)


def in_interpreter(args, case, trace_dir):
    """run_one in a new interpreter (`--one ID`)."""
    cmd = [sys.executable, os.path.abspath(__file__), args.cases, "-", "--one", case["id"]]
    if trace_dir:
        cmd += ["--traces", trace_dir]
    if ADDRESSES:
        cmd += ["--addresses"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {**case, "status": "error", "error": out.stderr[-2000:], "process": "spawn"}
    rec = json.loads(lines[-1])
    rec["process"] = "spawn"
    return rec


def main():
    ap = harness.arg_parser(__doc__)
    ap.add_argument("--ids", default="", help="comma-separated case ids, run in this order")
    ap.add_argument("--modes", default="forward,generate,train,lora")
    ap.add_argument("--traces", default="")
    ap.add_argument("--trace-ids", default="")
    ap.add_argument("--trace-modes", default="")
    ap.add_argument("--one", default="", help="run this case id here and print its record")
    ap.add_argument("--addresses", action="store_true",
                    help="record from the warm-up on; the trace keeps the build's events and the segments")
    args = ap.parse_args()
    global ADDRESSES
    ADDRESSES = args.addresses
    t0 = time.time()
    base, cases = harness.load_cases(args.cases, args.only)
    by_id = {c["id"]: c for c in cases}
    if args.one:
        print(json.dumps(run_one(base, by_id[args.one], args.traces or None)), flush=True)
        return 0
    if args.ids:
        todo = [by_id[i] for i in args.ids.split(",") if i]
    else:
        modes = args.modes.split(",")
        todo = [c for c in cases if c["mode"] in modes]
    done = harness.done_ids(args.out)
    todo = [c for c in todo if c["id"] not in done]
    trace_ids = set(filter(None, args.trace_ids.split(",")))
    trace_modes = set(filter(None, args.trace_modes.split(",")))
    out = open(args.out, "a")
    if not done:
        import transformers
        import peft
        harness.write_jsonl(out, {"env": True, "torch": torch.__version__, "transformers": transformers.__version__,
                                  "peft": peft.__version__, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                                  "one_process_per_case": True})
    # What each child would import again: transformers, peft and the models' modules (none of them
    # initialises CUDA under PYTORCH_NVML_BASED_CUDA_CHECK; checked below).
    try:
        import peft  # noqa: F401
        from transformers import AutoConfig
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING
        for cfg in sorted({c["config"] for c in todo}):
            model_type, raw = harness.load_config(os.path.join(base, cfg))
            MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.for_model(model_type, **raw))]
    except Exception as e:  # noqa: BLE001  only a head start
        print(f"pre-import: {type(e).__name__}: {e}"[:300], flush=True)
    spawn = torch.cuda.is_initialized()
    if spawn:
        print("CUDA was initialised by an import: one interpreter per case", flush=True)
    for case in todo:
        if time.time() - t0 > args.deadline:
            print(f"deadline reached after {time.time() - t0:.0f}s", flush=True)
            break
        trace_dir = args.traces if args.traces and (case["id"] in trace_ids or case["mode"] in trace_modes) else None
        rec = in_interpreter(args, case, trace_dir) if spawn else in_child(base, case, trace_dir)
        err = (rec or {}).get("error", "")
        if not spawn and (rec is None or (rec.get("status") == "error" and ("CUDA" in err or "fork" in err))):
            print(f"fork failed ({err[:200] or 'no record'}): one interpreter per case", flush=True)
            spawn = True
            rec = in_interpreter(args, case, trace_dir)
        harness.write_jsonl(out, rec)
        M = 2 ** 20
        print(f"{rec['status']:5} start {rec.get('start_reserved', 0) / M:8.1f}/{rec.get('start_allocated', 0) / M:8.1f} "
              f"pk {rec.get('peak_allocated_bytes', 0) / M:9.1f} rsv {rec.get('peak_reserved_bytes', 0) / M:9.1f} "
              f"ctx {rec.get('non_torch_bytes', 0) / M:7.1f} end+{(rec.get('end_allocated', 0) - rec.get('start_allocated', 0)) / M:5.1f} "
              f"{rec['seconds']:5.1f}s {case['id']} {rec.get('error', '')[:200]}", flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
