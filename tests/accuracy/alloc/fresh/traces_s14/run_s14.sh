#!/bin/bash
# session 14: #17's three under-cases and qwen2.5-7b b1 s1024's reserve, recorded.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T=$OUT/traces
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
F="grep -v -i -e warn -e loss_type"
timeout 120 python3 fresh.py ho/cases-arch.json $OUT/fresh-arch.jsonl --deadline 90 --addresses \
  --ids pythia-410m/train/bf16/adamw/b2s1024,pythia-410m/train/bf16/adamw-forloop/b3s1536,pythia-410m/train/fp32-ampbf16/sgd-momentum/b1s1536 \
  --traces $T/fresh --trace-modes train,lora 2>&1 | $F
timeout 100 python3 fresh.py ho/cases.json $OUT/fresh-heldout.jsonl --deadline 70 --addresses \
  --ids qwen2.5-1.5b/train/fp32/adafactor/b1s640-ckpt,smollm2-135m/train/fp32/adafactor/b1s640-ckpt \
  --traces $T/fresh --trace-modes train 2>&1 | $F
timeout 150 python3 fresh.py pub/cases.json $OUT/fresh-public.jsonl --deadline 100 --addresses \
  --ids qwen2.5-7b/train/bf16/adamw/b1s1024,llama-3.1-8b/train/bf16/adamw-fused/b2s2048/ckpt \
  --traces $T/fresh --trace-modes train 2>&1 | $F
cp history.py measure.py snap_trace.py fresh.py harness.py snap.py ho/ 2>/dev/null
timeout 120 python3 ho/history.py ho/cases-arch.json $OUT/history-arch.jsonl --deadline 100 \
  --ids gemma-2-2b/forward/bf16/b1s1536,gemma-2-2b/train/bf16/adamw/b3s1024,pythia-410m/forward/bf16/b3s1536,pythia-410m/generate/bf16/b8s200n100,pythia-410m/train/bf16/adamw/b2s1024,pythia-410m/train/bf16/adamw-forloop/b3s1536 \
  --traces $T/history 2>&1 | $F
cd $OUT && tar czf traces.tgz traces && rm -rf traces && ls -la
