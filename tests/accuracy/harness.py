#!/usr/bin/env python3
"""What every device script of tests/accuracy shares, once: the loop of shared/truth/measure.py.

  python3 harness.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]

runs that loop as it is (measure_main); the scripts beside import the pieces:

- the model: build_model (a config.json with random weights, nothing downloaded), load_model
  (a case's config, dtype, attention and LoRA), wrap_lora, count_params / describe_model;
- the measurement: sync_reset, non_torch_bytes, warm_up, make_optimizer, run_steps (a training
  step's forward / backward / optimizer peaks and what stays allocated after each),
  train_result, optimizer_state_bytes, run_forward / run_generate / run_train / run_case;
- the run: arg_parser, load_cases, done_ids (resuming OUT.jsonl), write_env, write_jsonl and
  measure_cases (the deadline, one record per case, OOM and errors kept as records).

Config paths are relative to the cases file. A case's peak is torch.cuda.max_memory_allocated()
over the whole case, with the model's weights already resident, the figure a training script
would print at its end. Cases already present in OUT.jsonl are skipped, so a run can resume.

The scripts run on the device from a copied folder: each looks for this file beside itself,
then one and two folders up (the layout of tests/accuracy), so copy harness.py beside a script
or keep the tree.
"""
import argparse
import gc
import json
import os
import sys
import time

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# --- the device ------------------------------------------------------------------------------------

def sync_reset():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def non_torch_bytes():
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def warm_up(device="cuda"):
    """CUDA's context and cuBLAS's workspace before anything is measured."""
    a = torch.randn(1024, 1024, device=device, dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a


# --- the model -------------------------------------------------------------------------------------

def load_config(config_path):
    """(model_type, the other keys) of a config.json, as AutoConfig.for_model takes them."""
    raw = dict(json.load(open(config_path)))
    model_type = raw.pop("model_type")
    raw.pop("architectures", None)
    return model_type, raw


def build_model(config_path, dtype, attn, eager_fallback=False, device="cuda"):
    """AutoModelForCausalLM from `config_path` with random weights, on `device`. With
    `eager_fallback`, a type that refuses `attn` is built with eager attention (say so in the
    record: describe_model(..., record_attn=True))."""
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, raw = load_config(config_path)
    config = AutoConfig.for_model(model_type, **raw)
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn)
        except TypeError:
            model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype, attn_implementation=attn)
        except ValueError as e:
            if not eager_fallback or attn == "eager":
                raise
            print(f"{model_type}: {attn} refused ({str(e)[:120]}), eager", flush=True)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager")
    if next(model.parameters()).dtype != dtype:
        model.to(dtype)
    return model


def wrap_lora(model, lora):
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=lora["r"], lora_alpha=lora.get("alpha", 2 * lora["r"]),
        target_modules=lora["targets"], lora_dropout=lora.get("dropout", 0.0),
        bias="none", task_type="CAUSAL_LM",
    )
    # lora "dtype" bf16/fp16 (vramfit --lora-dtype): peft's autocast_adapter_dtype=False keeps
    # the adapters in the base weights' dtype; by default peft upcasts them to fp32.
    if lora.get("dtype") in ("bf16", "fp16"):
        return get_peft_model(model, cfg, autocast_adapter_dtype=False)
    return get_peft_model(model, cfg)


def load_model(base, case, eager_fallback=False, device="cuda"):
    """The case's model: its config (relative to `base`), weights_dtype, attn, and LoRA if any."""
    model = build_model(os.path.join(base, case["config"]), DTYPES[case["weights_dtype"]],
                        case.get("attn", "sdpa"), eager_fallback, device)
    if case.get("lora"):
        model = wrap_lora(model, case["lora"])
    return model


def count_params(model):
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return total, trainable, buffers


def describe_model(rec, model, record_attn=False):
    """The model's counts and what is allocated now (its weights) into `rec`."""
    total, trainable, buffers = count_params(model)
    if record_attn:
        rec["attn"] = getattr(model.config, "_attn_implementation", rec.get("attn"))
    rec.update(params=total, trainable_params=trainable, buffer_bytes=buffers,
               resident_bytes=torch.cuda.memory_allocated())


# --- training --------------------------------------------------------------------------------------

def make_optimizer(name, params):
    o = torch.optim
    table = {
        "adamw": lambda: o.AdamW(params, lr=1e-5),
        "adamw-fused": lambda: o.AdamW(params, lr=1e-5, fused=True),
        "adamw-forloop": lambda: o.AdamW(params, lr=1e-5, foreach=False),
        "adam": lambda: o.Adam(params, lr=1e-5),
        "sgd": lambda: o.SGD(params, lr=1e-4),
        "sgd-momentum": lambda: o.SGD(params, lr=1e-4, momentum=0.9),
        "adafactor": lambda: o.Adafactor(params, lr=1e-3),
        "rmsprop": lambda: o.RMSprop(params, lr=1e-5),
        "adagrad": lambda: o.Adagrad(params, lr=1e-5),
    }
    return table[name]()


class MasterWeights:
    """16-bit parameters stepped through fp32 master copies (vramfit --master-weights; DeepSpeed's
    bf16 optimizer, Megatron's, Apex O2 in plain PyTorch): the optimizer `name` holds an fp32
    copy of each parameter (a DTensor shard under FSDP2) and its moments; at the step each
    16-bit gradient is copied to fp32, all at once, the masters stepped and copied back into
    the parameters, the fp32 gradients freed."""

    def __init__(self, name, params):
        self.params = list(params)
        self.masters = [p.detach().to(torch.float32) for p in self.params]
        self.inner = make_optimizer(name, self.masters)

    @property
    def state(self):
        """The inner optimizer's state and the masters (what optimizer_state_bytes counts)."""
        out = dict(self.inner.state)
        out.update({("master", i): {"master": m} for i, m in enumerate(self.masters)})
        return out

    @torch.no_grad()
    def step(self):
        for p, m in zip(self.params, self.masters):
            m.grad = None if p.grad is None else p.grad.to(torch.float32)
        self.inner.step()
        for p, m in zip(self.params, self.masters):
            p.copy_(m)
            m.grad = None

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None


def local_bytes(t):
    """A state tensor's bytes on this GPU (a DTensor's local shard under FSDP2); 0 off the GPU."""
    if hasattr(t, "to_local"):
        t = t.to_local()
    return t.numel() * t.element_size() if t.is_cuda else 0


def optimizer_state_bytes(opts):
    return sum(local_bytes(t) for o in opts for st in getattr(o, "state", {}).values()
               for t in st.values() if torch.is_tensor(t))


def run_steps(forward, opt=None, steps=3, backward=None, step=None, mark=None, timed=False):
    """`steps` training steps; per step the peak of forward (`forward()` returns the loss),
    backward and the optimizer step, what is allocated after each, and the reserved peak.
    The optimizer step is `step()` when given, else `opt.step()` then `opt.zero_grad()`; none
    when both are None (stepped inside backward). `backward(loss)` replaces loss.backward().
    `mark(k)` is called at the step's start (0), after forward (1), after backward (2) and at
    its end (3); `timed` adds each step's seconds."""
    per_step = []
    for _ in range(steps):
        t = time.time()
        torch.cuda.reset_peak_memory_stats()
        if mark:
            mark(0)
        loss = forward()
        fwd_peak = torch.cuda.max_memory_allocated()
        after_fwd = torch.cuda.memory_allocated()
        if mark:
            mark(1)
        if backward is not None:
            backward(loss)
        else:
            loss.backward()
        bwd_peak = torch.cuda.max_memory_allocated()
        after_bwd = torch.cuda.memory_allocated()
        if mark:
            mark(2)
        if step is not None:
            step()
        elif opt is not None:
            opt.step()
        opt_peak = torch.cuda.max_memory_allocated()
        if step is None and opt is not None:
            opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        if mark:
            mark(3)
        figures = {
            "fwd_peak": fwd_peak, "after_fwd": after_fwd,
            "bwd_peak": bwd_peak, "after_bwd": after_bwd,
            "opt_peak": opt_peak, "after_step": torch.cuda.memory_allocated(),
            "reserved_peak": torch.cuda.max_memory_reserved(),
        }
        if timed:
            figures["seconds"] = round(time.time() - t, 2)
        per_step.append(figures)
    return per_step


def train_result(per_step, opts, first=0):
    """The record of a training run: its steps, the optimizers' state and the run's peaks, the
    largest of the steps from `first` on (the resets split the run's peak among the steps)."""
    counted = per_step[first:]
    return {
        "steps": per_step,
        "optimizer_state_bytes": optimizer_state_bytes(opts),
        "peak_allocated_bytes": max(st["opt_peak"] for st in counted),
        "peak_reserved_bytes": max(st["reserved_peak"] for st in counted),
    }


def train_inputs(model, case):
    """Random token ids of the case's batch x seq on the GPU."""
    return torch.randint(0, model.config.vocab_size, (case["batch"], case["seq"]), device="cuda")


def run_forward(model, case):
    ids = train_inputs(model, case)
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=False)
        del out
    torch.cuda.synchronize()
    return {}


def run_generate(model, case):
    b, s, n = case["batch"], case["seq"], case["new_tokens"]
    ids = torch.randint(3, model.config.vocab_size, (b, s), device="cuda")
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
            use_cache=True,
        )
        generated = out.shape[1] - s
        del out
    torch.cuda.synchronize()
    return {"generated_tokens": int(generated)}


def set_checkpointing(model, case):
    """Hugging Face gradient checkpointing (non-reentrant) when the case asks, else off."""
    if case.get("checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if case.get("lora"):
            model.enable_input_require_grads()
    elif getattr(model, "is_gradient_checkpointing", False):
        model.gradient_checkpointing_disable()


def autocast_forward(fn, case):
    """`fn()` under torch.autocast to the case's autocast dtype (off when it has none)."""
    autocast = case.get("autocast")

    def forward():
        with torch.autocast("cuda", dtype=DTYPES[autocast or "bf16"], enabled=autocast is not None):
            return fn()

    return forward


def run_train(model, case, steps=3, mark=None):
    ids = train_inputs(model, case)
    model.train()
    model.config.use_cache = False
    set_checkpointing(model, case)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(case["optimizer"], params)
    forward = autocast_forward(lambda: model(input_ids=ids, labels=ids).loss, case)
    per_step = run_steps(forward, opt, steps, mark=mark)
    result = train_result(per_step, [opt])
    del opt
    return result


def run_case(model, case):
    mode = case["mode"]
    if mode == "forward":
        return run_forward(model, case)
    if mode == "generate":
        return run_generate(model, case)
    if mode in ("train", "lora"):
        return run_train(model, case)
    raise ValueError(f"unknown mode {mode}")


def group_key(case):
    # LoRA wraps the model in place, so each LoRA case gets a model of its own.
    lora = case["id"] if case.get("lora") else ""
    return (case["config"], case["weights_dtype"], case.get("attn", "sdpa"), lora)


# --- the run ---------------------------------------------------------------------------------------

def arg_parser(description=None):
    """CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]; scripts add their own flags."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--only", default="")
    return ap


def load_cases(path, only="", keep=None):
    """(the folder config paths are relative to, the cases whose id holds `only` and that `keep`
    accepts)."""
    base = os.path.dirname(os.path.abspath(path))
    cases = [c for c in json.load(open(path)) if only in c["id"] and (keep is None or keep(c))]
    return base, cases


def done_ids(out_path):
    """The ids already measured in `out_path` (a run resumes its file); blank lines skipped."""
    done = set()
    if os.path.exists(out_path):
        for line in open(out_path):
            if not line.strip():
                continue
            rec = json.loads(line)
            if "id" in rec:
                done.add(rec["id"])
    return done


def write_jsonl(out, rec):
    out.write(json.dumps(rec) + "\n")
    out.flush()


def write_env(out):
    """The environment line: versions, the GPU, its memory and what CUDA holds outside torch."""
    import transformers
    try:
        import peft
        peft_version = peft.__version__
    except ImportError:
        peft_version = None
    write_jsonl(out, {
        "env": True, "torch": torch.__version__, "transformers": transformers.__version__,
        "peft": peft_version, "gpu": torch.cuda.get_device_name(0),
        "total_bytes": torch.cuda.get_device_properties(0).total_memory,
        "non_torch_bytes_after_init": non_torch_bytes(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    })


def start(out_path, done):
    """Opens OUT.jsonl for appending, initialises CUDA, and writes the environment line when the
    file has no case yet."""
    out = open(out_path, "a")
    torch.cuda.init()
    warm_up()
    sync_reset()
    if not done:
        write_env(out)
    return out


def status_line(rec):
    return (f"{rec['status']:5} {rec.get('peak_allocated_bytes', 0) / 2**30:8.2f} GiB {rec['seconds']:6.1f}s  "
            f"{rec['id']} {rec.get('error', '')[:300]}")


def measure_cases(todo, out, t0, deadline, measure, cleanup=None, after=None, line=status_line):
    """For each case until `deadline` seconds after `t0`: `measure(case, rec)` fills the record
    (a copy of the case); an out-of-memory or any other error becomes the record's status and
    error. `cleanup(rec)` runs before what is outside torch is read, `after(rec)` after; then
    the record is written and `line(rec)` printed."""
    for case in todo:
        if time.time() - t0 > deadline:
            print(f"deadline reached after {time.time() - t0:.0f}s, {len(todo)} cases listed, stopping", flush=True)
            break
        rec = dict(case)
        started = time.time()
        try:
            measure(case, rec)
            rec["status"] = "ok"
        except torch.OutOfMemoryError as e:
            rec["status"] = "oom"
            rec["error"] = str(e)[:2000]
        except Exception as e:  # noqa: BLE001  keep going: one broken case must not lose the rest
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        if cleanup is not None:
            cleanup(rec)
        rec["non_torch_bytes"] = non_torch_bytes()
        rec["seconds"] = round(time.time() - started, 2)
        if after is not None:
            after(rec)
        write_jsonl(out, rec)
        print(line(rec), flush=True)
    print(f"elapsed {time.time() - t0:.0f}s", flush=True)


def measure_main(argv=None, run_case=run_case, eager_fallback=False):
    """shared/truth/measure.py: each case on a model built once per group_key (LoRA cases each
    their own), weights resident, then `run_case(model, case)`'s figures. With
    `eager_fallback`, a type that refuses SDPA runs eager and the record's attn says so."""
    args = arg_parser().parse_args(argv)
    t0 = time.time()
    base, cases = load_cases(args.cases, args.only)
    done = done_ids(args.out)
    out = start(args.out, done)
    todo = sorted((c for c in cases if c["id"] not in done), key=group_key)
    held = {"model": None, "key": None}

    def measure(case, rec):
        if group_key(case) != held["key"]:
            held["model"] = None
            sync_reset()
            held["model"] = load_model(base, case, eager_fallback)
            held["key"] = group_key(case)
        model = held["model"]
        model.zero_grad(set_to_none=True)
        sync_reset()
        describe_model(rec, model, record_attn=eager_fallback)
        rec.update(run_case(model, case))
        rec.setdefault("peak_allocated_bytes", torch.cuda.max_memory_allocated())
        rec.setdefault("peak_reserved_bytes", torch.cuda.max_memory_reserved())

    def after(rec):
        if rec["status"] != "ok":
            held["model"], held["key"] = None, None
            sync_reset()

    measure_cases(todo, out, t0, args.deadline, measure, after=after)


if __name__ == "__main__":
    sys.exit(measure_main())
