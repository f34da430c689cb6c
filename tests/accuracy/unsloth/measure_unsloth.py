#!/usr/bin/env python3
"""A plain-PyTorch stand-in of Unsloth's LoRA training step (issue #18, `--lora-kernels unsloth`),
measured on the H200. No Unsloth, no Triton: each of Unsloth's autograd functions is written
again with torch ops, saving for backward exactly the tensors Unsloth saves (unsloth 2024.12 and
today alike, unsloth/kernels/fast_lora.py, rms_layernorm.py, rope_embedding.py), so the peak
reflects what Unsloth keeps alive:

  Fast_RMS_Layernorm   saves X (its 16-bit input), the weight and r (one fp32 inverse RMS a row);
                       backward writes dX into dY in place
  LoRA_QKV             saves X (the norm's output) and the adapters; dX = matmul(dQ, Wq, out=X)
  Fast_RoPE_Embedding_QK  clones the strided q / k views, rotates the clones in place; saves
                       cos and sin only
  LoRA_W (o_proj)      saves X (attention's output, a view of what SDPA saved) and the adapters
  LoRA_MLP             saves X, e = X @ gate, g = X @ up; h = silu(e) * g is made in forward and
                       freed, and recomputed in backward, where h, df and de are written into
                       DW, e and g in place; dX = matmul(df, Wup, out=X)
  checkpointing "unsloth" (Unsloth_Offloaded_Gradient_Checkpointer, unsloth 2024.12): each
                       decoder layer's input is copied to host memory in forward (no_grad) and
                       back to the GPU for the layer's recompute in backward

Where Unsloth's Triton kernels compute in fp32 registers, the stand-in computes in fp32 over
blocks of 256 rows, so its temporaries stay a few MiB. A block whose projections are not all
adapted or have a bias (Qwen2's q/k/v) runs peft's forward, as Unsloth's patch_peft_model
leaves it. The base weights are bf16 (Unsloth's 4-bit base changes the weights and one
dequantized weight, which vramfit counts as for any QLoRA, not what the layers save); the
adapters are fp32, as peft creates them and Unsloth keeps them; AdamW; the loss is
transformers' (lm_head, logits.float(), cross_entropy: vramfit's --loss hf).

  python3 measure_unsloth.py cases.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
for d in (HERE, os.path.join(HERE, ".."), os.path.join(HERE, "..", "..")):
    if os.path.exists(os.path.join(d, "harness.py")):
        sys.path.insert(0, d)
        break
import harness as H  # noqa: E402

ROWS = 256  # rows per block of the fp32 math the Triton kernels do in registers


def blocks(n):
    for i in range(0, n, ROWS):
        yield slice(i, min(i + ROWS, n))


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, eps):
        shape = X.shape
        X2 = X.view(-1, shape[-1])
        Y = torch.empty_like(X2)
        r = torch.empty(X2.shape[0], 1, dtype=torch.float32, device=X.device)
        for b in blocks(X2.shape[0]):
            xf = X2[b].float()
            r[b] = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
            Y[b] = ((xf * r[b]).to(X.dtype) * W)
        ctx.save_for_backward(X, W, r)
        return Y.view(shape)

    @staticmethod
    def backward(ctx, dY):
        X, W, r = ctx.saved_tensors
        shape = dY.shape
        dY = dY.contiguous()
        X2, dY2 = X.view(-1, shape[-1]), dY.view(-1, shape[-1])
        Wf = W.float()
        for b in blocks(X2.shape[0]):
            n = X2[b].float() * r[b]
            dyw = dY2[b].float() * Wf
            dY2[b] = (r[b] * (dyw - n * (dyw * n).mean(-1, keepdim=True))).to(dY.dtype)
        return dY, None, None


def lora_params(mod):
    """(W, A, B, s) of a peft lora.Linear, or None when Unsloth would not patch it."""
    if not hasattr(mod, "lora_A") or "default" not in mod.lora_A or mod.base_layer.bias is not None:
        return None
    return (mod.base_layer.weight, mod.lora_A["default"].weight, mod.lora_B["default"].weight,
            mod.scaling["default"])


def matmul_lora(X, W, A, B, s):
    out = X @ W.t()
    out.addmm_(X @ A.to(X.dtype).t(), B.to(X.dtype).t(), alpha=s)
    return out


def grads_AB(X, dY, A, B, s):
    """(dA, dB) of out = s * (X @ A^T) @ B^T, as Unsloth's addmm_ pairs compute them."""
    dA = (X.t() @ (dY @ B)).t().mul_(s)
    dB = ((A @ X.t()) @ dY).t().mul_(s)
    return dA, dB


class LoRA_QKV(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, QW, QA, QB, QS, KW, KA, KB, KS, VW, VA, VB, VS):
        shape = X.shape
        X2 = X.view(-1, shape[-1])
        Q = matmul_lora(X2, QW, QA, QB, QS)
        K = matmul_lora(X2, KW, KA, KB, KS)
        V = matmul_lora(X2, VW, VA, VB, VS)
        ctx.s = (QS, KS, VS)
        ctx.w = (QW, KW, VW)
        ctx.save_for_backward(X, QA, QB, KA, KB, VA, VB)
        return Q.view(*shape[:-1], -1), K.view(*shape[:-1], -1), V.view(*shape[:-1], -1)

    @staticmethod
    def backward(ctx, dQ, dK, dV):
        X, QA, QB, KA, KB, VA, VB = ctx.saved_tensors
        QS, KS, VS = ctx.s
        QW, KW, VW = ctx.w
        shape = X.shape
        X2 = X.view(-1, shape[-1])
        dt = X.dtype
        dQ, dK, dV = (d.reshape(-1, d.shape[-1]) for d in (dQ, dK, dV))
        QA_, QB_, KA_, KB_, VA_, VB_ = (t.to(dt) for t in (QA, QB, KA, KB, VA, VB))
        dQA, dQB = grads_AB(X2, dQ, QA_, QB_, QS)
        dKA, dKB = grads_AB(X2, dK, KA_, KB_, KS)
        dVA, dVB = grads_AB(X2, dV, VA_, VB_, VS)
        dX = torch.matmul(dQ, QW, out=X2)
        dX.addmm_(dQ @ QB_, QA_, alpha=QS)
        dX.addmm_(dK, KW)
        dX.addmm_(dK @ KB_, KA_, alpha=KS)
        dX.addmm_(dV, VW)
        dX.addmm_(dV @ VB_, VA_, alpha=VS)
        return (dX.view(shape), None, dQA, dQB, None, None, dKA, dKB, None, None, dVA, dVB, None)


class LoRA_W(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, A, B, S):
        shape = X.shape
        out = matmul_lora(X.reshape(-1, shape[-1]), W, A, B, S)
        ctx.s, ctx.w = S, W
        ctx.save_for_backward(A, B, X)
        return out.view(*shape[:-1], -1)

    @staticmethod
    def backward(ctx, dY):
        A, B, X = ctx.saved_tensors
        S, W = ctx.s, ctx.w
        shape = X.shape
        X2 = X.reshape(-1, shape[-1])
        dY = dY.reshape(-1, dY.shape[-1])
        A_, B_ = A.to(X.dtype), B.to(X.dtype)
        dA, dB = grads_AB(X2, dY, A_, B_, S)
        dX = dY @ W
        dX.addmm_(dY @ B_, A_, alpha=S)
        return dX.view(shape), None, dA, dB, None


class LoRA_MLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, gW, gA, gB, gS, uW, uA, uB, uS, dW, dA, dB, dS):
        shape = X.shape
        X2 = X.view(-1, shape[-1])
        e = matmul_lora(X2, gW, gA, gB, gS)
        g = matmul_lora(X2, uW, uA, uB, uS)
        h = torch.empty_like(e)
        for b in blocks(e.shape[0]):
            h[b] = (F.silu(e[b].float()) * g[b].float()).to(e.dtype)
        i = matmul_lora(h, dW, dA, dB, dS)
        del h
        ctx.s = (gS, uS, dS)
        ctx.w = (gW, uW, dW)
        ctx.save_for_backward(gA, gB, uA, uB, dA, dB, X, e, g)
        return i.view(*shape[:-1], -1)

    @staticmethod
    def backward(ctx, dY):
        gA, gB, uA, uB, dA, dB, X, e, g = ctx.saved_tensors
        gS, uS, dS = ctx.s
        gW, uW, dW = ctx.w
        shape = X.shape
        dt = X.dtype
        X2 = X.view(-1, shape[-1])
        dY = dY.reshape(-1, dY.shape[-1])
        gA_, gB_, uA_, uB_, dA_, dB_ = (t.to(dt) for t in (gA, gB, uA, uB, dA, dB))
        DW = matmul_lora(dY, dW.t(), dB_.t(), dA_.t(), dS)  # dY @ down + s (dY @ B) @ A
        for b in blocks(DW.shape[0]):  # swiglu_DWf_DW_dfg_kernel: h, df, de into DW, e, g
            ef, gf, dw = e[b].float(), g[b].float(), DW[b].float()
            se = torch.sigmoid(ef)
            f = ef * se
            DW[b] = (f * gf).to(dt)
            e[b] = (dw * f).to(dt)
            g[b] = (dw * gf * se * (1.0 + ef * (1.0 - se))).to(dt)
        h, df, de = DW, e, g
        d_dA, d_dB = grads_AB(h, dY, dA_, dB_, dS)
        d_uA, d_uB = grads_AB(X2, df, uA_, uB_, uS)
        d_gA, d_gB = grads_AB(X2, de, gA_, gB_, gS)
        dX = torch.matmul(df, uW, out=X2)
        dX.addmm_(df @ uB_, uA_, alpha=uS)
        dX.addmm_(de, gW)
        dX.addmm_(de @ gB_, gA_, alpha=gS)
        return (dX.view(shape), None, d_gA, d_gB, None, None, d_uA, d_uB, None, None, d_dA, d_dB, None)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_half_t(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, -x1), dim=-1)


class RoPE_QK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, cos, sin):
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        out = []
        for T in (Q, K):
            To = T.clone()  # the strided view, cloned with its strides
            for h in range(T.shape[1]):  # in place, head by head (the kernel's temporaries)
                To[:, h] = T[:, h] * c[:, 0] + rotate_half(T[:, h]) * s[:, 0]
            out.append(To)
        ctx.cos, ctx.sin = cos, sin
        return tuple(out)

    @staticmethod
    def backward(ctx, dQ, dK):
        c, s = ctx.cos.unsqueeze(1), ctx.sin.unsqueeze(1)
        res = []
        for d in (dQ, dK):
            do = d.clone()
            for h in range(d.shape[1]):
                do[:, h] = d[:, h] * c[:, 0] + rotate_half_t(d[:, h] * s[:, 0])
            res.append(do)
        return res[0], res[1], None, None


def unsloth_layer(x, layer, cos, sin):
    """LlamaDecoderLayer_fast_forward with LlamaAttention_fast_forward."""
    attn, mlp = layer.self_attn, layer.mlp
    cfg = attn.config
    b, s, _ = x.shape
    nh, kvh, hd = cfg.num_attention_heads, cfg.num_key_value_heads, attn.head_dim
    res = x
    y = RMSNorm.apply(x, layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon)
    qkv = [lora_params(m) for m in (attn.q_proj, attn.k_proj, attn.v_proj)]
    if all(p is not None for p in qkv):
        Q, K, V = LoRA_QKV.apply(y, *qkv[0], *qkv[1], *qkv[2])
    else:  # not patched (a bias, or a projection without an adapter): peft's forward
        Q, K, V = attn.q_proj(y), attn.k_proj(y), attn.v_proj(y)
    Q = Q.view(b, s, nh, hd).transpose(1, 2)
    K = K.view(b, s, kvh, hd).transpose(1, 2)
    V = V.view(b, s, kvh, hd).transpose(1, 2)
    Q, K = RoPE_QK.apply(Q, K, cos, sin)
    A = F.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=kvh != nh)
    A = A.transpose(1, 2).reshape(b, s, nh * hd)
    o = lora_params(attn.o_proj)
    O = LoRA_W.apply(A, *o) if o is not None else attn.o_proj(A)
    x = res + O
    res = x
    y = RMSNorm.apply(x, layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon)
    gud = [lora_params(m) for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
    if all(p is not None for p in gud):
        m = LoRA_MLP.apply(y, *gud[0], *gud[1], *gud[2])
    else:
        m = mlp(y)
    return res + m


class OffloadedCheckpoint(torch.autograd.Function):
    """Unsloth_Offloaded_Gradient_Checkpointer (unsloth 2024.12, models/_utils.py)."""

    @staticmethod
    def forward(ctx, fn, x, *args):
        saved = x.to("cpu", non_blocking=True)
        with torch.no_grad():
            out = fn(x, *args)
        ctx.save_for_backward(saved)
        ctx.fn, ctx.args = fn, args
        return out

    @staticmethod
    def backward(ctx, dY):
        (saved,) = ctx.saved_tensors
        x = saved.to("cuda", non_blocking=True).detach()
        x.requires_grad_(True)
        with torch.enable_grad():
            out = ctx.fn(x, *ctx.args)
        torch.autograd.backward(out, dY)
        return (None, x.grad) + (None,) * len(ctx.args)


def forward_loss(lm, ids, labels, offload):
    base = lm.model
    x = base.embed_tokens(ids)
    if offload:
        x.requires_grad_(True)  # enable_input_require_grads: the reentrant checkpoint needs it
    pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
    cos, sin = base.rotary_emb(x, pos)
    for layer in base.layers:
        if offload:
            x = OffloadedCheckpoint.apply(unsloth_layer, x, layer, cos, sin)
        else:
            x = unsloth_layer(x, layer, cos, sin)
    x = RMSNorm.apply(x, base.norm.weight, base.norm.variance_epsilon)
    logits = lm.lm_head(x).float()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def run_train(model, case, steps=3):
    ids = H.train_inputs(model, case)
    labels = F.pad(ids, (0, 1), value=-100)[..., 1:].contiguous()  # ForCausalLMLoss's shift
    model.train()
    model.config.use_cache = False
    lm = model.get_base_model()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = H.make_optimizer(case["optimizer"], params)
    per_step = H.run_steps(lambda: forward_loss(lm, ids, labels, case.get("offload", False)), opt, steps)
    result = H.train_result(per_step, [opt])
    del opt
    return result


def main():
    args = H.arg_parser().parse_args()
    import time
    t0 = time.time()
    base, cases = H.load_cases(args.cases, args.only)
    done = H.done_ids(args.out)
    out = H.start(args.out, done)
    todo = [c for c in cases if c["id"] not in done]

    def measure(case, rec):
        H.sync_reset()
        model = H.load_model(base, case)
        model.zero_grad(set_to_none=True)
        H.sync_reset()
        H.describe_model(rec, model)
        rec.update(run_train(model, case))
        del model

    H.measure_cases(todo, out, t0, args.deadline, measure, cleanup=lambda rec: H.sync_reset())


if __name__ == "__main__":
    main()
