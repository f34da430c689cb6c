#!/bin/bash
# Session 8, second device run: sources and meta counts (probe_s8b.py), then the second batch's cases.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
timeout 60 python3 probe_s8b.py > "$OUT/probe_s8b.log" 2>&1
echo "probe rc=$? $(( $(date +%s) - T0 )) s" | tee -a "$OUT/probe_s8b.log"
left=$(( ${D:-200} - 10 - ($(date +%s) - T0) ))
python3 measure.py cases_s8b.json "$OUT/results_s8b.jsonl" --deadline "$left" 2>&1 | grep -v -i warn | tail -30
echo "all done $(( $(date +%s) - T0 )) s"
