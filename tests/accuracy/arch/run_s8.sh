#!/bin/bash
# Session 8, one device run: the sources of the new types, then their cases. D: seconds in all.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
timeout 40 python3 probe_s8.py > "$OUT/probe.log" 2>&1
echo "probe rc=$? $(( $(date +%s) - T0 )) s" | tee -a "$OUT/probe.log"
left=$(( ${D:-240} - 15 - ($(date +%s) - T0) ))
python3 measure.py cases_s8.json "$OUT/results_s8.jsonl" --deadline "$left" 2>&1 | grep -v Warning | tail -40
echo "all done $(( $(date +%s) - T0 )) s"
