#!/bin/bash
# OUT=dir ./run.sh : the public forward cases, then four qwen2.5 generates, each case in a process of its own
# (fresh.py; harness.py, snap.py, snap_trace.py, cases.json and models/ beside it). fresh_forward.jsonl and
# fresh_generate.jsonl were measured by fresh.py's first version (one process, the model rebuilt per case, no
# training before a case); this reruns them one process per case.
cd "$(dirname "$0")"
python3 fresh.py cases.json $OUT/fresh_forward.jsonl --deadline 160 --modes forward --traces $OUT/traces --trace-modes forward 2>&1 | grep -v -i warn
python3 fresh.py cases.json $OUT/fresh_generate.jsonl --deadline 70 --ids qwen2.5-0.5b/generate/bf16/b32s256n256,qwen2.5-1.5b/generate/bf16/b1s512n256,qwen2.5-1.5b/generate/bf16/b32s256n256,qwen2.5-7b/generate/bf16/b1s512n256 2>&1 | grep -v -i warn
