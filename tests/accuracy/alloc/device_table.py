#!/usr/bin/env python3
"""Device-total accuracy per mode, from the hidden dump test's JSON lines:
  ./build/tests/vramfit_tests "[.dump]" | grep '^{' | python3 tests/accuracy/alloc/device_table.py
Error = estimated device total / (peak_reserved + non_torch) - 1 over the cases that ran ("ok")."""
import json, statistics, sys

rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
rows = [r for r in rows if r["status"] == "ok"]
names = {"public": "shared/truth public", "expandable": "shared/truth expandable", "snap": "snapshots default",
         "snapx": "snapshots expandable",
         "held": "held-out default", "heldx": "held-out expandable"}

def mode(r):
    p = r["id"].split("/")
    return p[1] + ("/ckpt" if p[-1] == "ckpt" else "")

def line(label, rs):
    e = [r["e_total"] / (r["m_res"] + r["m_ctx"]) - 1 for r in rs]
    a = sorted(abs(x) for x in e)
    n = len(a)
    p90 = a[-(-9 * n // 10) - 1]
    under = sum(x < -0.05 for x in e)
    print(f"| {label} | {n} | {100 * statistics.median(a):.2f} % | {100 * p90:.2f} % | {100 * max(a):.2f} % | "
          f"{under} ({100 * under / n:.1f} %) |")

print("| cases | n | median abs | p90 abs | max abs | under by > 5 % |")
print("| --- | --- | --- | --- | --- | --- |")
for src in ("public", "expandable", "snap", "snapx", "held", "heldx"):
    rs = [r for r in rows if r["src"] == src]
    if not rs:
        continue
    for m in sorted({mode(r) for r in rs}):
        line(f"{names[src]}: {m}", [r for r in rs if mode(r) == m])
    line(f"**{names[src]}: all**", rs)
