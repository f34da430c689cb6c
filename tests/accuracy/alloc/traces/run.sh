#!/bin/bash
# Device run: each case in a fresh process (no cached segments carried over from an earlier case),
# default allocator; the first two training cases and the generate again with expandable_segments:True.
# OUT=dir ./run.sh   (needs harness.py, snap.py and models/ beside it)
cd "$(dirname "$0")"
for id in $(python3 -c "import json; print(' '.join(c['id'] for c in json.load(open('cases.json'))))"); do
  python3 snap_trace.py cases.json $OUT/trace_default.jsonl --only "$id" --traces $OUT/default 2>&1 | grep -v Warning | tail -2
done
for id in qwen2.5-1.5b/train/bf16/adamw/b8s2048/ckpt gpt2-medium/train/fp32-ampbf16/adamw/b16s1024/ckpt gpt2-medium/generate/bf16/b32s256n256; do
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 snap_trace.py cases.json $OUT/trace_expandable.jsonl --only "$id" --traces $OUT/expandable 2>&1 | grep -v Warning | tail -2
done
