#!/usr/bin/env python3
"""Checks measure_levers.py's loss stand-ins (FusedLinearCE, CutCE) against the plain loss on
small random shapes: the loss and the gradients of the hidden states and the lm_head weight
must match F.cross_entropy(x @ w.t()) on the shifted labels. Prints one line per check and
exits 1 on a mismatch.

  python3 check_loss_standins.py
"""
import sys

import torch
import torch.nn.functional as F

import measure_levers as ML


def reference(x, w, ids):
    logits = (x @ w.t()).float()
    labels = ML.shifted_labels(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def main():
    torch.manual_seed(0)
    bad = 0
    for (b, s, h, v, dtype) in [(2, 64, 32, 1000, torch.float32), (2, 128, 64, 3001, torch.bfloat16)]:
        x0 = torch.randn(b, s, h, device="cuda", dtype=dtype)
        w0 = torch.randn(v, h, device="cuda", dtype=dtype) * 0.1
        ids = torch.randint(0, v, (b, s), device="cuda")
        ids[0, 5] = -100
        got = {}
        for kind in ("ref", "fused-linear", "cce"):
            x = x0.clone().requires_grad_(True)
            w = w0.clone().requires_grad_(True)
            if kind == "ref":
                loss = reference(x, w, ids)
            elif kind == "fused-linear":
                lab = ML.shifted_labels(ids)
                loss = ML.FusedLinearCE.apply(x.reshape(-1, h), w, lab.reshape(-1))
            else:
                valids = ML.build_flat_valids(ids, 1)
                loss = ML.CutCE.apply(x.contiguous().flatten(0, -2), w, ids.flatten(), valids)
            (loss * 2).backward()  # grad_output != 1
            got[kind] = (loss.float().item(), x.grad.float(), w.grad.float())
        tol = 1e-3 if dtype == torch.float32 else 3e-2
        for kind in ("fused-linear", "cce"):
            dl = abs(got[kind][0] - got["ref"][0])
            dx = (got[kind][1] - got["ref"][1]).abs().max().item() / max(got["ref"][1].abs().max().item(), 1e-12)
            dw = (got[kind][2] - got["ref"][2]).abs().max().item() / max(got["ref"][2].abs().max().item(), 1e-12)
            ok = dl < tol * max(1.0, abs(got["ref"][0])) and dx < tol * 5 and dw < tol * 5
            bad += not ok
            print(f"{kind:13s} {str(dtype):15s} loss {got[kind][0]:.5f} vs {got['ref'][0]:.5f}  "
                  f"grad x rel {dx:.2e}  grad w rel {dw:.2e}  {'ok' if ok else 'MISMATCH'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
