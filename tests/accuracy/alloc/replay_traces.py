# Measures PyTorch's caching allocator on synthetic malloc/free traces and the CUDA context.
# Run on the device: python replay_traces.py OUTDIR   (each config in its own process, since
# PYTORCH_CUDA_ALLOC_CONF is read once at CUDA init). Writes OUTDIR/traces.json.
import json, os, random, subprocess, sys

def traces():
    out = []
    MiB = 1 << 20
    for seed in range(6):
        rng = random.Random(seed)
        ev, live = [], []
        for i in range(400):
            if live and rng.random() < 0.45:
                ev.append(["f", live.pop(rng.randrange(len(live)))])
            else:
                kind = rng.random()
                if kind < 0.3: n = rng.randint(1, MiB)
                elif kind < 0.7: n = rng.randint(MiB + 1, 10 * MiB)
                else: n = rng.randint(10 * MiB, 300 * MiB)
                ev.append(["m", i, n]); live.append(i)
        out.append({"name": f"random{seed}", "events": ev})
    return out

def child(conf, out):
    import torch
    res = {"conf": conf, "cases": []}
    for t in traces():
        torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        h = {}
        for e in t["events"]:
            if e[0] == "m": h[e[1]] = torch.empty(e[2], dtype=torch.uint8, device="cuda")
            else: del h[e[1]]
        torch.cuda.synchronize()
        res["cases"].append({"name": t["name"], "peak_allocated": torch.cuda.max_memory_allocated(),
                             "peak_reserved": torch.cuda.max_memory_reserved(),
                             "reserved": torch.cuda.memory_reserved(), "allocated": torch.cuda.memory_allocated()})
        h.clear()
    json.dump(res, open(out, "w"))

def context(out):
    import torch
    free0, total = torch.cuda.mem_get_info()
    def used(): f, t = torch.cuda.mem_get_info(); return t - f - torch.cuda.memory_reserved()
    r = {"after_init": used()}
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item()
    r["after_first_matmul"] = used()
    r["torch"] = torch.__version__; r["cuda"] = torch.version.cuda; r["device"] = torch.cuda.get_device_name()
    r["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    json.dump(r, open(out, "w"))

if __name__ == "__main__":
    if len(sys.argv) == 4:
        child(sys.argv[2], sys.argv[3]) if sys.argv[1] == "child" else context(sys.argv[3])
        sys.exit(0)
    outdir = sys.argv[1]
    runs = {}
    for conf in ["", "expandable_segments:True", "max_split_size_mb:64", "roundup_power2_divisions:4"]:
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
        p = os.path.join(outdir, "tmp.json")
        subprocess.run([sys.executable, __file__, "child", conf, p], env=env, check=True)
        runs[conf or "default"] = json.load(open(p)); os.remove(p)
    env = dict(os.environ); env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    p = os.path.join(outdir, "ctx.json")
    subprocess.run([sys.executable, __file__, "ctx", "-", p], env=env, check=True)
    ctx = json.load(open(p)); os.remove(p)
    json.dump({"traces": traces(), "runs": runs, "cuda_context": ctx}, open(os.path.join(outdir, "traces.json"), "w"))
