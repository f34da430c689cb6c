#!/bin/bash
# alloc3 (session 10): one device run. Fresh processes (fresh.py --addresses: the trace from the warm-up on, with the build's
# events and the segments at the case's start and end) for #17's replay gaps, then shared/truth's process history
# (history.py: measure.py's order and functions in one process, recorded) over a heldout-arch prefix.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T=$OUT/traces
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 130 python3 fresh.py cases-arch.json $OUT/fresh3-arch.jsonl --deadline 90 --addresses \
  --ids gemma-2-2b/train/bf16/adamw/b3s1024,qwen3-0.6b/train/fp32/adamw-forloop/b6s1536-ckpt \
  --traces $T/fresh --trace-modes train,lora 2>&1 | grep -v -i -e warn -e loss_type
timeout 130 python3 fresh.py cases.json $OUT/fresh3-public.jsonl --deadline 90 --addresses \
  --ids qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048,smollm2-135m/lora/bf16/adamw/r16-q+k+v+o-drop0.05/b4s1024,qwen2.5-1.5b/train/fp32-ampbf16/adamw/b4s1024 \
  --traces $T/fresh --trace-modes train,lora 2>&1 | grep -v -i -e warn -e loss_type
timeout 110 python3 history.py cases-arch.json $OUT/history-arch.jsonl --deadline 90 \
  --ids gemma-2-2b/forward/bf16/b1s1536,gemma-2-2b/train/bf16/adamw/b3s1024,gpt2-large/generate/bf16/b3s700n32,pythia-410m/forward/bf16/b3s1536,pythia-410m/generate/bf16/b8s200n100,qwen3-0.6b/forward/bf16/b1s1536 \
  --traces $T/history 2>&1 | grep -v -i -e warn -e loss_type
cd $OUT && tar czf traces.tgz traces && rm -rf traces && ls -la
