#!/bin/bash
# The device call (carry .dev/unsloth, a copy of this folder plus ../harness.py):
#   bash .dev/unsloth/run.sh
cd "$(dirname "$0")"
python3 measure_unsloth.py cases.json "$OUT/unsloth.jsonl" --deadline 150 2>&1 | tail -40
