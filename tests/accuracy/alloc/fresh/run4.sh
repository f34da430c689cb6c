#!/bin/bash
# alloc3 (session 10), second run: shared/truth public's first process, its first backward and cases after it.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
timeout 150 python3 history.py cases.json $OUT/history-public.jsonl --deadline 120 \
  --ids gpt2-medium/train/bf16/adamw/b4s1024,gpt2/forward/bf16/b8s1024,gpt2/forward/bf16/b1s1024,gpt2/generate/bf16/b1s512n256,gpt2/forward/fp16/b2s1024,smollm2-135m/forward/bf16/b4s1024/eager,smollm2-135m/generate/bf16/b1s512n256 \
  --traces $OUT/traces/history-public 2>&1 | grep -v -i -e warn -e loss_type
cd $OUT && tar czf traces4.tgz traces && rm -rf traces && ls -la
