#!/bin/bash
# Lead, session 12 (#17): heldout's and heldout-arch's processes again, as measure.py ran them, with
# the allocator's history recorded per case (snap_trace.py: compact traces of every alloc, free and
# segment event), to find why the 8 one-process reserve misses reserve more than the replay.
# Ran from .dev/res12 (this folder's cases and models, ../../../shared/truth/measure.py, and the
# snap_trace.py / snap.py of session 7's .dev/reserve: measure.py's own training loop with markers,
# which tests/accuracy/alloc/traces/snap_trace.py now runs through harness.py), 334 s on the H200.
# The traces (8 MB gzipped) are not kept in the repository.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
python3 snap_trace.py cases.json "$OUT/heldout_trace.jsonl" --deadline 290 --traces /tmp/tr_heldout 2>&1 | grep -v -i warn | tail -3
left=$(( 520 - ($(date +%s) - T0) ))
python3 snap_trace.py cases-arch.json "$OUT/arch_trace.jsonl" --deadline $left --traces /tmp/tr_arch 2>&1 | grep -v -i warn | tail -3
cd /tmp && tar czf "$OUT/traces.tgz" tr_heldout tr_arch
ls -la "$OUT"; echo "all $(( $(date +%s) - T0 )) s"
