#!/bin/bash
# Device run: 16 more cases with _snapshot() summaries, default allocator then expandable_segments:True.
cd "$(dirname "$0")"
python3 snap.py cases_more.json $OUT/snap_more_default.jsonl --deadline ${D1:-150} 2>&1 | grep -v Warning
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 snap.py cases_more.json $OUT/snap_more_expandable.jsonl --deadline ${D2:-150} 2>&1 | grep -v Warning
