#!/bin/bash
# How results.jsonl's families (cohere2 ... starcoder2, falcon's extra generates, gptj, bloom, mpt,
# stablelm, hunyuan_v1_dense) were measured: one H200 run (device tool, 223 s), from a copy of this
# folder's gen_families.py output (models/, cases.json = the families, cases_extra.json = falcon's
# two generates and the types without a row). measure.py is ../shared/truth/measure.py with
# one change: a type that refuses SDPA is built with eager attention and the record says so
# (gptj, bloom, mpt); gpt_oss is asked for eager in its cases.
#   python3 gen_families.py DIR (falcon: cases_falcon.json, measured with cases_extra.json); copy
#   measure.py, ../harness.py and this script into DIR; D1=330 D2=470 OUT=... bash DIR/run_families.sh
cd "$(dirname "$0")"
T0=$(date +%s)
python3 measure.py cases.json "$OUT/results.jsonl" --deadline "${D1:-330}"
left=$(( ${D2:-470} - ($(date +%s) - T0) ))
python3 measure.py cases_extra.json "$OUT/extra.jsonl" --deadline "$left"
