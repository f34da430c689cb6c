#!/bin/bash
# Device run of session 8 (OUT=dir ./run_s8.sh; harness.py, snap.py, snap_trace.py, cases.json and models/ beside it):
# 1. expandable_segments:True, three fp32/bf16 training cases without checkpointing, traced (the replay's 2592 vs 1276 MiB);
# 2. the default allocator: the 8 public cases under by > 5 %, three LoRA cases traced, then a stratified sample of
#    public train / lora / generate cases (ids_s8.txt order), each case in a process of its own.
cd "$(dirname "$0")"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 fresh.py cases.json $OUT/fresh_expandable_s8.jsonl --deadline ${DX:-45} \
  --ids qwen2.5-1.5b/train/fp32-ampbf16/adamw/b4s1024,qwen2.5-1.5b/train/bf16/adamw/b4s1024,qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048 \
  --traces $OUT/traces_expandable --trace-modes train 2>&1 | grep -v -i warn
python3 fresh.py cases.json $OUT/fresh_s8.jsonl --deadline ${D:-270} --ids $(cat ids_s8.txt) \
  --traces $OUT/traces --trace-modes train,lora 2>&1 | grep -v -i warn
ls -la $OUT $OUT/traces | tail -3; du -sh $OUT
