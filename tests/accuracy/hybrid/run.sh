#!/bin/sh
# The one device run of session 10 (helper "hybrid"): 68 s on the H200 (torch 2.11, transformers 5.17).
# From a folder holding this one's cases.json, models/ and measure.py (../shared/truth/measure.py):
#   OUT=... sh run.sh
# It printed "fla False causal_conv1d False" and transformers' warnings that causal_conv1d_fn,
# chunk_gated_delta_rule, causal_conv1d_update and fused_recurrent_gated_delta_rule fell back to
# their PyTorch reference implementations: the path src/engine/state_cache.cpp models.
python3 -c "import importlib.util as u; print('fla', u.find_spec('fla') is not None, 'causal_conv1d', u.find_spec('causal_conv1d') is not None)"
python3 measure.py cases.json "$OUT/hybrid.jsonl" --deadline 150
