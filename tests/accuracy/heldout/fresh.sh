#!/bin/bash
# Each case in a process of its own (measure.py --only), the cases under by >5 % in heldout-arch.
cd "$(dirname "$0")"
for id in pythia-410m/generate/bf16/b8s200n100 pythia-410m/forward/bf16/b3s1536 qwen3-0.6b/generate/bf16/b5s700n32 qwen3-0.6b/forward/bf16/b1s1536 gpt2-large/generate/bf16/b3s700n32 pythia-410m/forward/fp32/b3s768 pythia-410m/lora/bf16/adamw/r8-all-linear/b1s2048-ckpt gemma-2-2b/train/bf16/adamw/b3s1024 qwen3-0.6b/train/fp32/adamw-forloop/b6s1536-ckpt; do
  python3 -c "
import json,sys;c=json.load(open('cases-arch.json'));json.dump([x for x in c if x['id']==sys.argv[1]],open('one.json','w'))" "$id"
  python3 measure.py one.json "$OUT/heldout-arch-fresh.jsonl" --deadline 100 2>&1 | tail -1
done
