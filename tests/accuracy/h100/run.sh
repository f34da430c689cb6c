#!/bin/bash
# H100 cross-check (lead, s13): shared/truth's public cases but smollm2, on an H100; continues OUT/prev.jsonl if carried.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
[ -f prev.jsonl ] && cp prev.jsonl $OUT/h100.jsonl
timeout ${T:-560} python3 measure.py cases.json $OUT/h100.jsonl --deadline ${D:-470} 2>&1 | grep -v -i warn | tail -5
wc -l $OUT/h100.jsonl; head -1 $OUT/h100.jsonl
