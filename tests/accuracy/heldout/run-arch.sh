#!/bin/bash
# On the device, as run.sh (measure.py copied beside): the second set, cases-arch.json, default allocator.
cd "$(dirname "$0")"
python3 measure.py cases-arch.json "$OUT/heldout-arch.jsonl" --deadline 420 2>&1 | tail -4
