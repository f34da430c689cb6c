#!/bin/bash
# Second device run of session 8 (the first lost its traces to the transfer's file-count limit): the three
# expandable_segments:True training traces again, two LoRA traces, the rest of the sample (ids_s8b.txt; no
# generate: recording makes them slow); the traces come back in one traces.tgz.
cd "$(dirname "$0")"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 fresh.py cases.json $OUT/fresh_expandable_s8.jsonl --deadline ${DX:-30} \
  --ids qwen2.5-1.5b/train/fp32-ampbf16/adamw/b4s1024,qwen2.5-1.5b/train/bf16/adamw/b4s1024,qwen2.5-0.5b/train/fp32-ampbf16/adamw/b8s2048 \
  --traces $OUT/traces_expandable --trace-modes train 2>&1 | grep -v -i warn
python3 fresh.py cases.json $OUT/fresh_s8b.jsonl --deadline ${D:-70} --ids $(cat ids_s8b.txt) \
  --traces $OUT/traces --trace-ids qwen2.5-0.5b/lora/bf16/adamw/r16-q+v/b4s1024,qwen2.5-1.5b/lora/bf16/adamw/r64-all-linear/b8s4096/ckpt 2>&1 | grep -v -i -e warn -e loss_type
cd $OUT && tar czf traces.tgz traces traces_expandable && rm -rf traces traces_expandable && ls -la
