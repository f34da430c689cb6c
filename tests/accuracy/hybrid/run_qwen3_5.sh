#!/bin/sh
# Session 12's device run (lead): 62 s on the H200 (torch 2.11, transformers 5.17, no fla, no
# causal-conv1d: transformers' torch path, as for qwen3_next). From a folder holding this one's
# cases_qwen3_5.json, models/, count35.py and measure.py (../shared/truth/measure.py):
#   OUT=... sh run_qwen3_5.sh
# count35.py counts qwen3_5 / qwen3_5_moe on the meta device (defaults, the Qwen3.5-397B-A17B Hub
# config from tests/unit/spec/data/arch/hybrid copied into models/, the small configs): counts35.json.
python3 -c "import importlib.util as u; print('fla', u.find_spec('fla') is not None, 'causal_conv1d', u.find_spec('causal_conv1d') is not None)"
timeout 120 python3 count35.py
python3 measure.py cases_qwen3_5.json "$OUT/results_qwen3_5.jsonl" --deadline 200
