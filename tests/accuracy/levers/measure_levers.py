#!/usr/bin/env python3
"""Measure the training levers of issue #18 on one GPU: the loop of shared/truth/measure.py
(../harness.py) with each lever written in plain PyTorch.

  python3 measure_levers.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]

Levers, per case key (absent = the plain loop of harness.py):
  loss: "hf"            model(input_ids, labels).loss (transformers ForCausalLMLoss)
        "chunked"       torchtune CEWithChunkedOutputLoss: lm_head per 8 chunks of the hidden
                        states, each chunk upcast and cross-entropied on its own, logits
                        deleted before backward (as torchtune's recipes do)
        "fused-linear"  Liger's fused linear cross-entropy in torch ops allocating what Liger's
                        code allocates (FusedLinearCE: liger_kernel/ops/fused_linear_cross_entropy.py
                        v0.8.2; the CE kernel's in-place gradient written block by block)
        "unsloth"       Unsloth's own fused cross-entropy (UnslothCE: unsloth_zoo 2026.8.13
                        fused_losses/cross_entropy_loss.py UnslothFusedLoss, compiled per chunk)
        "cce"           Apple's Cut Cross-Entropy in torch ops allocating what its kernels
                        allocate (CutCE: cut_cross_entropy/cce.py; logits recomputed block by
                        block in backward)
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
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
import harness as H  # noqa: E402


# Elements of one fp32 tile: where Liger's and CCE's Triton kernels keep a block of logits in
# registers / shared memory, these stand-ins make it in global memory, at most this big (1 MiB),
# so that what they allocate beyond the kernels' own buffers stays under 1 % of every peak.
TILE = 1 << 18
IGNORE = -100


def next_power_of_2(n):
    p = 1
    while p < n:
        p *= 2
    return p


def ce_chunk_in_place(logits, target, loss_out, n):
    """liger_cross_entropy_kernel (liger_kernel/ops/cross_entropy.py) on one chunk of logits:
    per row an online max / sum of exp over column blocks (fp32), the loss (lse - x_y) / n into
    loss_out, then the gradient (softmax - onehot(y)) / n written over the logits in place, in
    their dtype; rows whose target is ignore_index get zeros. The kernel's blocks live in
    registers; here one block of rows x cols <= TILE elements in fp32."""
    rows, v = logits.shape
    cols = max(1, TILE // max(rows, 1))
    valid = target != IGNORE
    safe = torch.where(valid, target, torch.zeros_like(target))
    x_y = logits.gather(1, safe[:, None]).squeeze(1).float()
    m = torch.full((rows,), float("-inf"), dtype=torch.float32, device=logits.device)
    d = torch.zeros(rows, dtype=torch.float32, device=logits.device)
    for a in range(0, v, cols):
        blk = logits[:, a:a + cols].to(torch.float32, copy=True)  # a copy even of fp32 logits
        m_new = torch.maximum(m, blk.amax(1))
        d = d * torch.exp(m - m_new) + blk.sub_(m_new[:, None]).exp_().sum(1)
        m = m_new
        del blk
    lse = m + torch.log(d)
    loss_out.copy_(torch.where(valid, (lse - x_y) / n, torch.zeros_like(lse)))
    scale = valid.float() / n
    for a in range(0, v, cols):
        b = min(a + cols, v)
        blk = logits[:, a:b].float()
        blk.sub_(lse[:, None]).exp_()
        hit = (valid & (safe >= a) & (safe < b)).float()
        blk.scatter_add_(1, (safe - a).clamp(0, b - a - 1)[:, None], -hit[:, None])
        blk.mul_(scale[:, None])
        logits[:, a:b].copy_(blk)
        del blk


class FusedLinearCE(torch.autograd.Function):
    """LigerFusedLinearCrossEntropyFunction (liger_kernel/ops/fused_linear_cross_entropy.py,
    v0.8.2; reduction "mean", accum_dtype None) allocating what it allocates: grad_input =
    zeros_like(_input), grad_weight = zeros_like(weight) when the weight trains, loss_1d (fp32)
    and target_mask (bool) per token; per chunk of next_power_of_2(ceil(BT / ceil(V / H))) rows
    the logits in the input's dtype, the loss gradient written over them in place
    (ce_chunk_in_place), grad_input's slice (a chunk x H product copied in), and grad_weight
    += torch.mm(grad_logits.t(), _input_chunk).float() (a V x H product and its fp32 copy), or
    on torch >= 2.8 with an fp32 grad_weight and 16-bit logits torch.addmm(..., out_dtype=
    float32, out=grad_weight). The gradients are computed in forward and saved for backward."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, x, w, target):
        bt, h = x.shape
        v = w.shape[0]
        chunk = next_power_of_2(-(-bt // -(-v // h)))
        grad_input = torch.zeros_like(x)
        grad_weight = torch.zeros_like(w) if w.requires_grad else None
        loss_1d = torch.zeros(bt, dtype=torch.float32, device=x.device)
        target_mask = target != IGNORE
        n = target_mask.sum().item()
        addmm_out_dtype = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 8) \
            and torch.cuda.get_device_capability(x.device)[0] >= 8
        for s in range(0, bt, chunk):
            e = min(s + chunk, bt)
            xc = x[s:e]
            logits = xc @ w.t()
            ce_chunk_in_place(logits, target[s:e], loss_1d[s:e], n)
            grad_input[s:e] = logits @ w
            if grad_weight is not None:
                if addmm_out_dtype and grad_weight.dtype == torch.float32 and logits.dtype in (torch.float16,
                                                                                               torch.bfloat16):
                    xi = xc if xc.dtype == logits.dtype else xc.to(logits.dtype)
                    torch.addmm(grad_weight, logits.t(), xi, out_dtype=torch.float32, out=grad_weight)
                else:
                    grad_weight += torch.mm(logits.t(), xc).float()
            del logits
        loss = torch.sum(loss_1d)
        grad_weight = grad_weight.to(w.dtype) if grad_weight is not None else None
        ctx.save_for_backward(grad_input.detach(), grad_weight.detach() if grad_weight is not None else None)
        return loss

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, go):
        grad_x, grad_w = ctx.saved_tensors
        if not torch.equal(go, torch.tensor(1.0, device=go.device)):
            grad_x.mul_(go)  # Liger's element_mul_kernel, in place
            if grad_w is not None:
                grad_w.mul_(go)
        return grad_x, grad_w, None


def build_flat_valids(targets, shift):
    """cut_cross_entropy/utils.py _build_flat_valids (shift != 0): int64 flat indices of the
    positions whose shifted target is not ignore_index."""
    targets = targets[..., shift:]
    valids = (targets != IGNORE).nonzero().to(torch.int32)
    for i in range(targets.ndim - 1):
        valids[:, i] *= targets.stride(i)
    return valids.sum(1)


class CutCE(torch.autograd.Function):
    """Apple's Cut Cross-Entropy (ml-cross-entropy, cut_cross_entropy/cce.py
    LinearCrossEntropyFunction; linear_cross_entropy's defaults: impl "cce", filter_eps "auto",
    accum_e_fp32 = accum_c_fp32 = False; shift=1 as its transformers patch calls it) allocating
    what it allocates in global memory. Forward (cce_lse_forward.py, indexed_dot.py): lse (fp32
    per valid token), logit_avg (fp32 per vocabulary entry), the negated target logit (fp32),
    nll = neg_dot + lse, the mean; saves e, c, lse, targets, valids, logit_avg. Under autocast e
    and c are cast first. Backward (cce_backward.py): vocab_ordering = argsort(logit_avg) as
    int32, de = zeros_like(e), dc = zeros_like(c), the logits recomputed block by block and
    their gradient accumulated into de and dc, then .to() the inputs' dtypes. The kernels keep
    each logits block on chip; here one block of <= TILE elements in global memory."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, e, c, targets, valids):
        e_info = (e.dtype, e.requires_grad)
        c_info = (c.dtype, c.requires_grad)
        if torch.is_autocast_enabled():
            e = e.to(dtype=torch.get_autocast_gpu_dtype())
            c = c.to(dtype=torch.get_autocast_gpu_dtype())
        n, v = e.shape[0], c.shape[0]
        b = valids.numel()
        lse = e.new_full((b,), float("-inf"), dtype=torch.float32)
        logit_avg = e.new_zeros((v,), dtype=torch.float32)
        tgt, valid = CutCE.row_targets(targets, valids, n)
        m = torch.full((n,), float("-inf"), dtype=torch.float32, device=e.device)
        d = torch.zeros(n, dtype=torch.float32, device=e.device)
        x_y = torch.zeros(n, dtype=torch.float32, device=e.device)
        cols = max(1, TILE // n)
        for a in range(0, v, cols):
            z = min(a + cols, v)
            blk = (e @ c[a:z].t()).float()
            logit_avg[a:z] = torch.mv(blk.t(), valid) / b
            hit = (tgt >= a) & (tgt < z)
            x_y = torch.where(hit, blk.gather(1, (tgt - a).clamp(0, z - a - 1)[:, None]).squeeze(1), x_y)
            m_new = torch.maximum(m, blk.amax(1))
            d = d * torch.exp(m - m_new) + blk.sub_(m_new[:, None]).exp_().sum(1)
            m = m_new
            del blk
        lse.copy_((m + torch.log(d))[valids])
        neg_dot = (-x_y)[valids]
        del m, d, x_y
        nll = neg_dot.add_(lse)
        ctx.save_for_backward(e, c, lse, targets, valids, logit_avg)
        ctx.e_info, ctx.c_info = e_info, c_info
        return nll.mean()

    @staticmethod
    def row_targets(targets, valids, n):
        """The target of each row of e (the next token, shift=1) and a 0/1 mask of the rows in valids."""
        tgt = torch.zeros(n, dtype=torch.long, device=targets.device)
        tgt[:-1] = targets[1:n]
        valid = torch.zeros(n, dtype=torch.float32, device=targets.device)
        valid[valids] = 1.0
        return tgt, valid

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_out):
        e, c, lse, targets, valids, logit_avg = ctx.saved_tensors
        vocab_ordering = torch.argsort(logit_avg).to(torch.int32)  # noqa: F841 (the kernel's block order)
        n, v = e.shape[0], c.shape[0]
        de = torch.zeros_like(e) if ctx.e_info[1] else None
        dc = torch.zeros_like(c) if ctx.c_info[1] else None
        tgt, valid = CutCE.row_targets(targets, valids, n)
        lse_rows = torch.zeros(n, dtype=torch.float32, device=e.device)
        lse_rows[valids] = lse
        scale = valid * (grad_out.float() / lse.numel())
        cols = max(1, TILE // n)
        for a in range(0, v, cols):
            z = min(a + cols, v)
            blk = (e @ c[a:z].t()).float()
            blk.sub_(lse_rows[:, None]).exp_()
            hit = ((tgt >= a) & (tgt < z)).float()
            blk.scatter_add_(1, (tgt - a).clamp(0, z - a - 1)[:, None], -hit[:, None])
            blk.mul_(scale[:, None])
            g = blk.to(e.dtype)
            del blk
            if de is not None:
                de.addmm_(g, c[a:z])
            if dc is not None:
                torch.mm(g.t(), e, out=dc[a:z])
            del g
        if dc is not None:
            dc = dc.to(dtype=ctx.c_info[0])
        if de is not None:
            de = de.to(dtype=ctx.e_info[0])
        return de, dc, None, None


def unsloth_chunks(tokens, vocab):
    """unsloth_zoo fused_losses/cross_entropy_loss.py get_chunk_size with target_gb None: the
    target is min(half the free memory, 4) GiB of fp32 logits a chunk; one chunk when they fit,
    else the next multiple of 4 chunks that keeps each under it."""
    free, _ = torch.cuda.mem_get_info()
    target = min(free / 2**30 * 0.5, 4.0)
    exact = tokens * vocab * 4 / 2**30 / target
    return 1 if exact <= 1.0 + 1e-9 else math.ceil(exact / 4 - 1e-9) * 4


def unsloth_chunk_loss(x, w, labels, divisor):
    """compute_fused_ce_loss with shift_labels False: linear, .float(), cross_entropy (sum) / n."""
    logits = F.linear(x.to(w.dtype), w)
    loss = F.cross_entropy(logits.float().contiguous(), labels.contiguous(), reduction="sum", ignore_index=IGNORE)
    loss = loss / divisor
    return loss, (loss.detach(),)


def unsloth_accumulate(grad_inputs_j, grad_w, x_j, w, labels_j, divisor, acc):
    """UnslothFusedLoss's accumulate_chunk: torch.func.grad_and_value of the chunk's loss in x
    (and w when it trains), grad_lm_head.add_, the chunk's grad_input copied into grad_inputs."""
    if grad_w is not None:
        (gx, gw), (_, (unscaled,)) = torch.func.grad_and_value(unsloth_chunk_loss, argnums=(0, 1), has_aux=True)(
            x_j, w, labels_j, divisor)
        grad_w.add_(gw)
    else:
        (gx,), (_, (unscaled,)) = torch.func.grad_and_value(unsloth_chunk_loss, argnums=(0,), has_aux=True)(
            x_j, w, labels_j, divisor)
    acc.add_(unscaled)
    grad_inputs_j[:] = gx


# unsloth_zoo's torch_compile_options (temporary_patches/common.py): no CUDA graphs.
UNSLOTH_COMPILED = None


class UnslothCE(torch.autograd.Function):
    """Unsloth's UnslothFusedLoss (unsloth_zoo 2026.8.13 fused_losses/cross_entropy_loss.py, what
    unsloth 2026.8.19's CausalLM forward calls): the shifted labels, grad_inputs =
    empty_like(hidden_states), grad_lm_head = zeros_like(weight) when it trains; per chunk
    (unsloth_chunks) the compiled (dynamic, fullgraph) grad_and_value of the chunk's loss; saves
    grad_inputs and grad_lm_head; backward returns each times the scale (out of place)."""

    @staticmethod
    def forward(ctx, hidden, w, labels):
        global UNSLOTH_COMPILED
        if UNSLOTH_COMPILED is None:
            UNSLOTH_COMPILED = torch.compile(unsloth_accumulate, dynamic=True, fullgraph=True,
                                             options={"epilogue_fusion": True, "max_autotune": False,
                                                      "shape_padding": True, "triton.cudagraphs": False})
        shifted = torch.empty_like(labels)
        shifted[..., :-1] = labels[..., 1:]
        shifted[..., -1] = IGNORE
        shifted = shifted.view(-1)
        divisor = (shifted != IGNORE).sum().to(torch.float32)
        grad_inputs = torch.empty_like(hidden)
        grad_w = torch.zeros_like(w) if w.requires_grad else None
        bsz, qlen, hd = hidden.shape
        acc = torch.zeros(1, device=hidden.device)[0]
        n = unsloth_chunks(bsz * qlen, w.shape[0])
        for gi, xs, ls in zip(torch.chunk(grad_inputs.view(-1, hd), n), torch.chunk(hidden.reshape(-1, hd), n),
                              torch.chunk(shifted, n)):
            UNSLOTH_COMPILED(gi, grad_w, xs, w, ls, divisor, acc)
        ctx.save_for_backward(grad_inputs, grad_w)
        return acc

    @staticmethod
    def backward(ctx, go):
        grad_inputs, grad_w = ctx.saved_tensors
        scale = go.detach().float().mean()
        grad_inputs = grad_inputs * scale
        if grad_w is not None:
            grad_w = grad_w * scale
        return grad_inputs, grad_w, None


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
    if kind == "unsloth":
        # unsloth/models/llama.py (2026.8.19): unsloth_fused_ce_loss(hidden_states, lm_head.weight,
        # labels) on the model's output; the labels are the input ids (shifted inside).
        return UnslothCE.apply(hidden, lm.lm_head.weight, ids)
    if kind == "cce":
        # cut_cross_entropy/transformers/utils.py apply_lce -> linear_cross_entropy(e, c, labels,
        # shift=True) -> cce.py cce_linear_cross_entropy: contiguous e, valids, flattened targets.
        del labels
        e = hidden.contiguous()
        valids = build_flat_valids(ids, 1)
        targets = ids.flatten()
        if targets.data_ptr() % 16 != 0:
            targets = F.pad(targets, (0, 1))[:-1]
        return CutCE.apply(e.flatten(0, -2), lm.lm_head.weight, targets, valids)
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
