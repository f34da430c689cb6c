#!/bin/bash
# On the device: copy shared/truth/measure.py beside this file first (the device gets the checkout only).
# Writes $OUT/heldout.jsonl (default allocator) and $OUT/heldout-exp.jsonl (expandable segments, the
# training, LoRA and generation cases).
cd "$(dirname "$0")"
python3 measure.py cases.json "$OUT/heldout.jsonl" --deadline 320 2>&1 | tail -3
python3 -c "
import json;c=json.load(open('cases.json'));json.dump([x for x in c if x['mode'] in ('train','generate','lora')],open('cases_exp.json','w'))"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 measure.py cases_exp.json "$OUT/heldout-exp.jsonl" --deadline 150 2>&1 | tail -3
