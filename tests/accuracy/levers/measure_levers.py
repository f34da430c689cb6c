#!/usr/bin/env python3
"""Measure the training levers of issue #18 on one GPU: the loop of shared/truth/measure.py
(../harness.py) with each lever written in plain PyTorch.

  python3 measure_levers.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]

Levers, per case key (absent = the plain loop of harness.py):
  loss: "hf"            model(input_ids, labels).loss (transformers ForCausalLMLoss)
        "chunked"       torchtune CEWithChunkedOutputLoss: lm_head per 8 chunks of the hidden
                        states, each chunk upcast and cross-entropied on its own, logits
                        deleted before backward (as torchtune's recipes do)
        "fused-linear"  Liger's fused linear cross-entropy algorithm in torch ops: per chunk of
                        next_power_of_2(ceil(BT / ceil(V / H))) rows the logits, the loss and
                        its gradient are computed in forward; grad_input and grad_weight are
                        kept for backward (liger_kernel/ops/fused_linear_cross_entropy.py)
  checkpointing: true / "full"  Hugging Face gradient checkpointing, non-reentrant
        "every-N"       only layers i with i % N == 0 checkpointed (torchtune/torchtitan
                        selective layer checkpointing)
        "selective"     torchtitan's op-level selective checkpointing policy: save mm (every
                        other one), SDPA and max outputs, recompute the rest
  activation_offload: torch.autograd.graph.save_on_cpu(pin_memory=True) around forward + loss
  optimizer_in_backward: one optimizer per parameter stepped in a post-accumulate-grad hook
                        (PyTorch's "optimizer step in backward" recipe, torchtune's
                        optimizer_in_bwd), the gradient freed right after
  sequence_packing: true  padding-free packed rows as transformers' DataCollatorWithFlattening
                        writes them: each of `batch` rows holds `seq` tokens made of several
                        sequences (lengths from packed_lengths), position_ids restart at 0 at
                        each sequence, labels -100 at each sequence's first token, no
                        attention_mask (masking_utils finds the sequences from position_ids)
Each packed case also records the first SDPA call's mask (dtype, shape) and is_causal.
Writes harness.py's fields. Models are built from config.json with random weights.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
import harness as H  # noqa: E402


class FusedLinearCE(torch.autograd.Function):
    """Liger's algorithm: no full logits; gradients computed chunk by chunk in forward."""

    @staticmethod
    def forward(ctx, x, w, labels):
        bt, h = x.shape
        v = w.shape[0]
        inc = -(-v // h)
        want = -(-bt // inc)
        chunk = 1
        while chunk < want:
            chunk *= 2
        grad_w = torch.zeros_like(w) if w.requires_grad else None
        grad_x = torch.zeros_like(x)
        loss_1d = torch.zeros(bt, dtype=torch.float32, device=x.device)
        n = max(int((labels != -100).sum().item()), 1)
        for s in range(0, bt, chunk):
            e = min(s + chunk, bt)
            xc = x[s:e]
            lab = labels[s:e]
            logits = xc @ w.t()
            lf = logits.float()
            del logits
            lse = torch.logsumexp(lf, dim=-1)
            valid = lab != -100
            safe = torch.where(valid, lab, torch.zeros_like(lab))
            picked = lf.gather(1, safe[:, None]).squeeze(1)
            loss_1d[s:e] = torch.where(valid, lse - picked, torch.zeros_like(lse))
            lf.sub_(lse[:, None]).exp_()
            lf[torch.arange(e - s, device=x.device), safe] -= 1.0
            lf.mul_((valid.float() / n)[:, None])
            g = lf.to(x.dtype)
            del lf
            grad_x[s:e] = g @ w
            if grad_w is not None:
                grad_w.addmm_(g.t(), xc)
            del g
        ctx.save_for_backward(grad_x, grad_w)
        return loss_1d.sum() / n

    @staticmethod
    def backward(ctx, go):
        grad_x, grad_w = ctx.saved_tensors
        if go.item() != 1.0:
            grad_x = grad_x * go
            grad_w = grad_w * go if grad_w is not None else None
        return grad_x, grad_w, None


def base_causal_lm(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def shifted_labels(ids):
    # transformers ForCausalLMLoss: pad with -100, then shift left by one.
    return F.pad(ids, (0, 1), value=-100)[..., 1:].contiguous()


def forward_loss(model, ids, kind, pos=None, labels=None):
    if pos is not None:
        if kind not in (None, "hf"):
            raise ValueError("sequence_packing is measured with the hf loss only")
        return model(input_ids=ids, labels=labels, position_ids=pos).loss
    if kind in (None, "hf"):
        return model(input_ids=ids, labels=ids).loss
    lm = base_causal_lm(model)
    hidden = lm.model(input_ids=ids).last_hidden_state
    labels = shifted_labels(ids)
    if kind == "chunked":
        chunks = [lm.lm_head(c) for c in hidden.chunk(8, dim=1)]
        total = None
        for lc, lb in zip(chunks, labels.chunk(8, dim=1)):
            part = F.cross_entropy(lc.float().reshape(-1, lc.shape[-1]), lb.reshape(-1), ignore_index=-100,
                                   reduction="sum")
            total = part if total is None else total + part
        del chunks
        return total / (labels != -100).sum()
    if kind == "fused-linear":
        return FusedLinearCE.apply(hidden.reshape(-1, hidden.shape[-1]), lm.lm_head.weight, labels.reshape(-1))
    raise ValueError(f"unknown loss {kind}")


def torchtitan_policy():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = {torch.ops.aten.mm.default, torch.ops.aten.max.default}
    for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_cudnn_attention"):
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            save.add(op.default)

    def context_fn():
        meta = {"forward": 0, "recompute": 0}

        def policy(ctx, func, *args, **kwargs):
            mode = "recompute" if ctx.is_recompute else "forward"
            if func == torch.ops.aten.mm.default:
                meta[mode] += 1
            keep = func in save and not (func == torch.ops.aten.mm.default and meta[mode] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    return context_fn


def decoder_layers(model):
    return list(base_causal_lm(model).model.layers)


def set_checkpointing(model, case):
    ck = case.get("checkpointing")
    if not ck:
        if getattr(model, "is_gradient_checkpointing", False):
            model.gradient_checkpointing_disable()
        return
    kwargs = {"use_reentrant": False}
    if ck == "selective":
        kwargs["context_fn"] = torchtitan_policy()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if case.get("lora"):
        model.enable_input_require_grads()
    if isinstance(ck, str) and ck.startswith("every-"):
        n = int(ck.split("-")[1])
        for i, layer in enumerate(decoder_layers(model)):
            layer.gradient_checkpointing = i % n == 0


def packed_lengths(seq):
    """Sequence lengths filling one packed row of `seq` tokens (a fixed, uneven pattern)."""
    out, left, i = [], seq, 0
    pattern = (0.34, 0.15, 0.25, 0.26)
    while left > 0:
        n = min(left, max(1, int(seq * pattern[i % len(pattern)])))
        out.append(n)
        left -= n
        i += 1
    return out


def packed_inputs(ids):
    """position_ids and labels of DataCollatorWithFlattening for rows of packed sequences."""
    lengths = packed_lengths(ids.shape[1])
    pos = torch.cat([torch.arange(n, device=ids.device) for n in lengths])[None].expand(ids.shape[0], -1)
    labels = ids.clone()
    start = 0
    for n in lengths:
        labels[:, start] = -100
        start += n
    return pos.contiguous(), labels


SDPA_SEEN = {}


def watch_sdpa():
    real = F.scaled_dot_product_attention

    def wrapped(*args, **kwargs):
        if "mask" not in SDPA_SEEN:
            m = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            SDPA_SEEN["mask"] = None if m is None else {"dtype": str(m.dtype), "shape": list(m.shape),
                                                        "contiguous": m.is_contiguous()}
            SDPA_SEEN["is_causal"] = bool(kwargs.get("is_causal", False))
            SDPA_SEEN["enable_gqa"] = bool(kwargs.get("enable_gqa", False))
            try:  # the backend SDPA dispatches to (torch.nn.attention.SDPBackend's numbering)
                SDPA_SEEN["backend"] = int(torch._fused_sdp_choice(
                    args[0], args[1], args[2], attn_mask=m, dropout_p=kwargs.get("dropout_p", 0.0),
                    is_causal=SDPA_SEEN["is_causal"], scale=kwargs.get("scale"),
                    enable_gqa=SDPA_SEEN["enable_gqa"]))
            except Exception as e:  # noqa: BLE001
                SDPA_SEEN["backend"] = f"{type(e).__name__}: {e}"[:200]
        return real(*args, **kwargs)

    F.scaled_dot_product_attention = wrapped
    torch.nn.functional.scaled_dot_product_attention = wrapped


def run_train(model, case, steps=3):
    ids = H.train_inputs(model, case)
    pos = labels = None
    if case.get("sequence_packing"):
        pos, labels = packed_inputs(ids)
    model.train()
    model.config.use_cache = False
    set_checkpointing(model, case)
    params = [p for p in model.parameters() if p.requires_grad]
    in_bwd = case.get("optimizer_in_backward", False)
    opt = None
    per_param = {}
    if in_bwd:
        per_param = {p: H.make_optimizer(case["optimizer"], [p]) for p in params}

        def hook(p):
            per_param[p].step()
            per_param[p].zero_grad(set_to_none=True)

        handles = [p.register_post_accumulate_grad_hook(hook) for p in params]
    else:
        opt = H.make_optimizer(case["optimizer"], params)
    offload = case.get("activation_offload", False)

    def forward():
        if offload:
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                return forward_loss(model, ids, case.get("loss"), pos, labels)
        return forward_loss(model, ids, case.get("loss"), pos, labels)

    per_step = H.run_steps(H.autocast_forward(forward, case), opt, steps)
    result = H.train_result(per_step, list(per_param.values()) if in_bwd else [opt])
    if in_bwd:
        for h in handles:
            h.remove()
    del opt, per_param
    extra = {"sdpa_first_call": dict(SDPA_SEEN)}
    if case.get("sequence_packing"):
        extra["packed_lengths"] = packed_lengths(case["seq"])
    return {**extra, **result}


def main():
    args = H.arg_parser().parse_args()
    t0 = time.time()
    base, cases = H.load_cases(args.cases, args.only, keep=lambda c: c.get("gpus", 1) == 1)
    done = H.done_ids(args.out)
    watch_sdpa()
    out = H.start(args.out, done)
    todo = sorted((c for c in cases if c["id"] not in done), key=lambda c: (c.get("priority", 0), c["id"]))

    def measure(case, rec):
        H.sync_reset()
        model = H.load_model(base, case)
        H.sync_reset()
        H.describe_model(rec, model)
        SDPA_SEEN.clear()
        rec.update(run_train(model, case))

    H.measure_cases(todo, out, t0, args.deadline, measure, cleanup=lambda rec: H.sync_reset())


if __name__ == "__main__":
    sys.exit(main())
