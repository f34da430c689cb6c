#!/bin/bash
# OUT=dir ./run.sh : public forward cases, each on a freshly built model (fresh.py), then four qwen2.5 generates.
cd "$(dirname "$0")"
python3 fresh.py cases.json $OUT/fresh_forward.jsonl --deadline 160 --modes forward --traces $OUT/traces 2>&1 | grep -v -i warn
python3 fresh.py cases.json $OUT/fresh_generate.jsonl --deadline 70 --ids qwen2.5-0.5b/generate/bf16/b32s256n256,qwen2.5-1.5b/generate/bf16/b1s512n256,qwen2.5-1.5b/generate/bf16/b32s256n256,qwen2.5-7b/generate/bf16/b1s512n256 2>&1 | grep -v -i warn
