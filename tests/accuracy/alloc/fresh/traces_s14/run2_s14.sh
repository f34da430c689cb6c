#!/bin/bash
# session 14, run 2: llama-family bf16 AdamW training (not checkpointed) in a process of its own on an H100,
# the README's first example among them (llama-3.1-8b b1 x 2048), with traces.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 280 python3 fresh.py pub/cases-s14b.json $OUT/fresh-s14b.jsonl --deadline 230 --addresses \
  --traces $OUT/traces/fresh2 --trace-modes train 2>&1 | grep -v -i -e warn -e loss_type
cd $OUT && tar czf traces2.tgz traces && rm -rf traces && ls -la
