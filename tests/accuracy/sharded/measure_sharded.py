#!/usr/bin/env python3
"""Measure the per-GPU peak memory of sharded training (DDP, FSDP2, DeepSpeed ZeRO).

The multi-GPU sibling of shared/truth/measure.py (same loop, same field names; the shared
pieces come from ../harness.py, found beside this file or one folder up):

  python3 measure_sharded.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]
                             [--budget 1:60,2:200,4:250] [--backend auto|nccl|gloo]

For every world size in the cases file one group of worker processes is started on
this host (torch.multiprocessing, TCP rendezvous on 127.0.0.1) and runs all the cases
of that world size, one after the other: each case builds the Hugging Face model from
its config.json (random weights) on every rank, wraps it (ddp, fsdp, fsdp-grad-op,
zero2, zero3), trains 3 steps of AdamW on `loss = model(input_ids=ids, labels=ids).loss`
and records each rank's torch.cuda.max_memory_allocated() and the rest. Rank 0 gathers
the ranks' figures and writes one JSON line per case: the largest rank's figures at the
top level, every rank's under `per_rank`.

Backend: with a GPU per rank (torch.cuda.device_count() >= world size) NCCL, one rank per
GPU: the real thing. With fewer GPUs every rank runs on cuda:0 and the ranks talk through
gloo (CUDA tensors are staged through host memory). torch.cuda.max_memory_allocated() is
per process, so each rank's allocator peak is its own figure either way; what sharing a
GPU changes is the memory outside PyTorch's allocator (NCCL's buffers are absent, and
mem_get_info sees every rank: non_torch_bytes is then (used - sum of the ranks'
reserved) / ranks). Every line says its `backend` and `shared_gpu`.

Two case keys of issue #18 (tests/accuracy/levers/measure_levers_sharded.py runs this file):
  fsdp_mixed_precision: "bf16"  fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=bf16,
                                reduce_dtype=fp32)) on every decoder layer and the root
  lora: {r, targets, ...}       peft LoRA wrapped before sharding (frozen base in weights_dtype)
  lora: {..., dtype: "bf16"}    the adapters in 16 bits (peft autocast_adapter_dtype=False)
  master_weights: true          harness.MasterWeights: fp32 masters of the 16-bit shards

Config paths are relative to the cases file. Cases already in OUT.jsonl are skipped.
NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 are set before any process group exists.
"""
import argparse
import datetime
import gc
import json
import os
import socket
import sys
import time
import traceback

# Multicast off before torch / NCCL are loaded (inherited by the spawned workers).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
for _k, _v in MULTICAST_OFF.items():
    os.environ[_k] = _v

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
from harness import DTYPES, count_params, make_optimizer, sync_reset  # noqa: E402
import harness  # noqa: E402

STRATEGIES = ("ddp", "fsdp", "fsdp-grad-op", "zero2", "zero3")


# --- gloo on CUDA tensors -------------------------------------------------------------------------

class _Done:
    """A finished collective's handle (what async_op=True returns), for the fallbacks."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def probe_and_patch_gloo(dev):
    """Checks the collectives the wrappers use on CUDA tensors under gloo; replaces the
    missing ones with equivalents of the same allocator footprint. Returns what it found."""
    ws, rank = dist.get_world_size(), dist.get_rank()
    found = {}

    def attempt(name, fn):
        try:
            fn()
            torch.cuda.synchronize()
            found[name] = "native"
            return True
        except Exception as e:  # noqa: BLE001
            found[name] = f"missing: {type(e).__name__}: {str(e)[:200]}"
            return False

    def t_allreduce():
        x = torch.full((1024,), float(rank + 1), device=dev, dtype=torch.bfloat16)
        dist.all_reduce(x)
        assert float(x[0]) == ws * (ws + 1) / 2

    def t_allgather():
        x = torch.full((8,), float(rank), device=dev)
        out = torch.empty(8 * ws, device=dev)
        w = dist.all_gather_into_tensor(out, x, async_op=True)
        w.wait()
        torch.cuda.synchronize()
        assert [float(out[8 * r]) for r in range(ws)] == [float(r) for r in range(ws)]

    def t_reducescatter():
        x = torch.arange(8 * ws, device=dev, dtype=torch.float32)
        out = torch.empty(8, device=dev)
        w = dist.reduce_scatter_tensor(out, x, async_op=True)
        w.wait()
        torch.cuda.synchronize()
        assert float(out[0]) == ws * 8 * rank

    def t_broadcast():
        x = torch.full((16,), float(rank), device=dev)
        dist.broadcast(x, 0)
        assert float(x[0]) == 0.0

    attempt("all_reduce", t_allreduce)
    attempt("broadcast", t_broadcast)
    if not attempt("all_gather_into_tensor", t_allgather):
        orig_all_gather = dist.all_gather

        def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
            outs = list(output_tensor.chunk(dist.get_world_size(group)))
            orig_all_gather(outs, input_tensor, group=group)
            return _Done() if async_op else None

        dist.all_gather_into_tensor = all_gather_into_tensor
        found["all_gather_into_tensor"] += " -> patched: all_gather into the output's chunks"
    if not attempt("reduce_scatter_tensor", t_reducescatter):
        orig_all_reduce = dist.all_reduce

        def reduce_scatter_tensor(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
            orig_all_reduce(input, op=op, group=group)
            output.copy_(input.chunk(dist.get_world_size(group))[dist.get_rank(group)])
            return _Done() if async_op else None

        dist.reduce_scatter_tensor = reduce_scatter_tensor
        found["reduce_scatter_tensor"] += " -> patched: all_reduce in place, then copy this rank's chunk"
    return found


# --- wrapping -------------------------------------------------------------------------------------

def decoder_layers(model):
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        return list(obj)
    raise ValueError("no decoder layers found")


def wrap(model, strategy, dev, opt_name, mp_dtype=None):
    """Returns (module to call, optimizer, deepspeed engine or None)."""
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model, device_ids=[dev.index], output_device=dev.index)
        return wrapped, make_optimizer(opt_name, [p for p in wrapped.parameters() if p.requires_grad]), None
    if strategy in ("fsdp", "fsdp-grad-op"):
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import fully_shard
        reshard = strategy == "fsdp"
        kw = {}
        if mp_dtype:
            try:
                from torch.distributed.fsdp import MixedPrecisionPolicy
            except ImportError:
                from torch.distributed._composable.fsdp import MixedPrecisionPolicy
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=DTYPES[mp_dtype], reduce_dtype=torch.float32)
        for layer in decoder_layers(model):
            fully_shard(layer, reshard_after_forward=reshard, **kw)
        fully_shard(model, reshard_after_forward=reshard, **kw)
        return model, make_optimizer(opt_name, [p for p in model.parameters() if p.requires_grad]), None
    if strategy in ("zero2", "zero3"):
        import deepspeed

        cfg = {
            "train_micro_batch_size_per_gpu": 1,
            "zero_optimization": {"stage": 2 if strategy == "zero2" else 3},
            "bf16": {"enabled": next(model.parameters()).dtype == torch.bfloat16},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}},
        }
        engine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)
        return engine, opt, engine
    raise ValueError(f"unknown sharding {strategy}")


# --- one case on one rank -------------------------------------------------------------------------

def run_case(case, base, dev, rank, steps=3):
    rec = {}
    sync_reset()
    model = harness.load_model(base, case, device=torch.device("cuda", torch.cuda.current_device()))
    total, trainable, buffers = count_params(model)
    rec.update(params=total, trainable_params=trainable, buffer_bytes=buffers)
    model.train()
    model.config.use_cache = False
    harness.set_checkpointing(model, case)
    rec["build_peak_bytes"] = torch.cuda.max_memory_allocated()
    wrapped, opt, engine = wrap(model, case["sharding"], dev, case["optimizer"], case.get("fsdp_mixed_precision"))
    if case.get("master_weights"):  # fp32 masters of the (sharded) 16-bit parameters
        opt = harness.MasterWeights(case["optimizer"], [p for p in wrapped.parameters() if p.requires_grad])
    del model
    sync_reset()
    rec["resident_bytes"] = torch.cuda.memory_allocated()
    rec["resident_reserved_bytes"] = torch.cuda.memory_reserved()

    b, s = case["batch"], case["seq"]
    g = torch.Generator(device=dev).manual_seed(1000 + rank)
    vocab = json.load(open(os.path.join(base, case["config"])))["vocab_size"]
    ids = torch.randint(0, vocab, (b, s), device=dev, generator=g)
    forward = harness.autocast_forward(lambda: wrapped(input_ids=ids, labels=ids).loss, case)
    if engine is not None:
        per_step = harness.run_steps(forward, None, steps, backward=engine.backward, step=engine.step)
    else:
        per_step = harness.run_steps(forward, opt, steps)
    rec.update(harness.train_result(per_step, [opt]))
    del opt, wrapped, engine, ids
    return rec


# --- the worker processes ---------------------------------------------------------------------------

def worker(rank, ws, backend, shared, cases, base, out_path, deadline, port, write_env):
    dev = torch.device("cuda", 0 if shared else rank)
    torch.cuda.set_device(dev)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(ws), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    kwargs = {"device_id": dev} if backend == "nccl" else {}
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                            timeout=datetime.timedelta(seconds=180), **kwargs)
    objects = dist.new_group(backend="gloo")  # for the ranks' records, on the CPU
    probe = probe_and_patch_gloo(dev) if backend == "gloo" else {}
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a
    dist.barrier(group=objects)
    sync_reset()
    out = open(out_path, "a") if rank == 0 else None
    if rank == 0:
        import transformers
        try:
            import deepspeed
            ds = deepspeed.__version__
        except Exception:  # noqa: BLE001
            ds = None
        free, total = torch.cuda.mem_get_info(dev)
        env = {
            "env": True, "torch": torch.__version__, "transformers": transformers.__version__,
            "deepspeed": ds, "gpu": torch.cuda.get_device_name(dev),
            "total_bytes": total, "gpus_visible": torch.cuda.device_count(),
            "world_size": ws, "backend": backend, "shared_gpu": shared, "collectives": probe,
            "nccl_version": ".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else None,
            "env_vars": {k: os.environ.get(k) for k in list(MULTICAST_OFF) + ["NCCL_CUMEM_ENABLE"]},
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "write_env": write_env,
        }
        out.write(json.dumps(env) + "\n")
        out.flush()

    for case in cases:
        flag = [time.time() < deadline] if rank == 0 else [None]
        dist.broadcast_object_list(flag, src=0, group=objects)
        if not flag[0]:
            if rank == 0:
                print(f"[ws={ws}] deadline reached, stopping", flush=True)
            break
        started = time.time()
        rec = {"rank": rank}
        try:
            rec.update(run_case(case, base, dev, rank))
            rec["status"] = "ok"
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"
            rec["error"] = str(e)[:2000]
        except Exception as e:  # noqa: BLE001
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
            if rank == 0:
                traceback.print_exc()
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # Everyone's reserve at the same moment, then the device's use: what is outside the
        # allocators of this group's ranks, per rank.
        dist.barrier(group=objects)
        rec["reserved_now"] = torch.cuda.memory_reserved(dev)
        free, total = torch.cuda.mem_get_info(dev)
        rec["device_used_now"] = total - free
        dist.barrier(group=objects)
        recs = [None] * ws
        dist.all_gather_object(recs, rec, group=objects)
        if rank == 0:
            out.write(json.dumps(merge(case, recs, ws, backend, shared, time.time() - started)) + "\n")
            out.flush()
            m = max(r.get("peak_allocated_bytes", 0) for r in recs) / 2**30
            st = "ok" if all(r["status"] == "ok" for r in recs) else recs[0]["status"]
            print(f"[ws={ws} {backend}] {st:5} {m:8.2f} GiB {time.time() - started:6.1f}s  {case['id']}", flush=True)
        sync_reset()
    dist.barrier(group=objects)
    dist.destroy_process_group()


def merge(case, recs, ws, backend, shared, seconds):
    rec = dict(case)
    statuses = [r["status"] for r in recs]
    rec["status"] = "ok" if all(s == "ok" for s in statuses) else ("oom" if "oom" in statuses else "error")
    errs = [r.get("error") for r in recs if r.get("error")]
    if errs:
        rec["error"] = errs[0]
    if shared:
        # Every rank's context sits on the one GPU: split what is outside their allocators.
        used = max(r["device_used_now"] for r in recs)
        non_torch = max(0, used - sum(r["reserved_now"] for r in recs)) // ws
        per_rank_non_torch = [non_torch] * ws
        method = "shared GPU: (device used - sum of the ranks' reserved) / ranks, after the case"
    else:
        per_rank_non_torch = [r["device_used_now"] - r["reserved_now"] for r in recs]
        method = "total - free - reserved on the rank's own GPU, after the case"
    keys = ("peak_allocated_bytes", "peak_reserved_bytes", "resident_bytes", "resident_reserved_bytes",
            "optimizer_state_bytes", "build_peak_bytes")
    per_rank = []
    for r, nt in zip(recs, per_rank_non_torch):
        pr = {"rank": r["rank"], "status": r["status"], "non_torch_bytes": nt}
        for k in keys + ("steps",):
            if k in r:
                pr[k] = r[k]
        per_rank.append(pr)
    ok = [r for r in recs if r["status"] == "ok"]
    src = ok if ok else recs
    for k in ("params", "trainable_params", "buffer_bytes"):
        if k in src[0]:
            rec[k] = src[0][k]
    for k in keys:
        vals = [r[k] for r in src if k in r]
        if vals:
            rec[k] = max(vals)
    if ok:
        busiest = max(ok, key=lambda r: r["peak_allocated_bytes"])
        rec["steps"] = busiest["steps"]
    rec["non_torch_bytes"] = max(per_rank_non_torch)
    rec.update(gpus=ws, backend=backend, shared_gpu=shared, non_torch_method=method,
               per_rank=per_rank, seconds=round(seconds, 2))
    return rec


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole run")
    ap.add_argument("--budget", default="", help="seconds per world size, e.g. 1:60,2:200,4:250")
    ap.add_argument("--only", default="")
    ap.add_argument("--world-sizes", default="", help="comma-separated world sizes to run (default all)")
    ap.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    args = ap.parse_args()
    t0 = time.time()

    base = os.path.dirname(os.path.abspath(args.cases))
    cases = [c for c in json.load(open(args.cases)) if args.only in c["id"]]
    done = set()
    have_lines = False
    if os.path.exists(args.out):
        for line in open(args.out):
            if not line.strip():
                continue
            have_lines = True
            rec = json.loads(line)
            if "id" in rec:
                done.add(rec["id"])
    try:
        import deepspeed  # noqa: F401
        have_ds = True
    except Exception:  # noqa: BLE001
        have_ds = False
    budget = {int(k): float(v) for k, v in (p.split(":") for p in args.budget.split(",") if p)}
    sizes = sorted({c["gpus"] for c in cases})
    if args.world_sizes:
        sizes = [s for s in sizes if str(s) in args.world_sizes.split(",")]
    ngpu = torch.cuda.device_count()  # does not create a CUDA context in this process
    for ws in sizes:
        todo = [c for c in cases if c["gpus"] == ws and c["id"] not in done]
        skipped = [c["id"] for c in todo if c["sharding"] in ("zero2", "zero3") and not have_ds]
        todo = [c for c in todo if c["id"] not in skipped]
        if skipped:
            print(f"[ws={ws}] deepspeed not importable: {len(skipped)} ZeRO cases skipped", flush=True)
        if not todo:
            continue
        todo.sort(key=lambda c: (c.get("priority", 0), c["id"]))
        shared = ngpu < ws
        backend = args.backend if args.backend != "auto" else ("gloo" if shared else "nccl")
        end = t0 + args.deadline
        if ws in budget:
            end = min(end, time.time() + budget[ws])
        if time.time() > end:
            break
        print(f"[ws={ws}] {len(todo)} cases, backend {backend}, shared GPU {shared}", flush=True)
        ctx = mp.start_processes(
            worker, args=(ws, backend, shared, todo, base, args.out, end, free_port(), not have_lines),
            nprocs=ws, join=False, start_method="spawn")
        have_lines = True
        hard = end + 60  # one case past the soft deadline, then the group is stopped
        try:
            while not ctx.join(timeout=2):
                if time.time() > hard:
                    print(f"[ws={ws}] past the hard deadline: stopping the group", flush=True)
                    for p in ctx.processes:
                        if p.is_alive():
                            p.terminate()
                    break
        except Exception as e:  # noqa: BLE001  (a rank died: keep the other world sizes)
            print(f"[ws={ws}] group failed: {type(e).__name__}: {str(e)[:3000]}", flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
