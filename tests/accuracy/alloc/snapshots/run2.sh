#!/bin/bash
# Device run 2: 18 held-out cases (measured after the reserve model was fitted), default then expandable_segments:True.
cd "$(dirname "$0")"
python3 snap.py cases_heldout.json $OUT/snap_heldout_default.jsonl --deadline ${D1:-100} 2>&1 | grep -v Warning
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 snap.py cases_heldout.json $OUT/snap_heldout_expandable.jsonl --deadline ${D2:-100} 2>&1 | grep -v Warning
