#!/bin/bash
# Session 10 (arch3), one device run: the MLA cache of the installed deepseek_v2/v3 (a probe: which tensors
# past_key_values.update receives), then gen_s10.py's cases. Files beside this script: measure.py (this
# folder's), ../harness.py, models/, cases_s10.json.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
python3 - > "$OUT/probe_s10.log" 2>&1 <<'PY'
import inspect, transformers
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as d3
from transformers.models.deepseek_v2 import modeling_deepseek_v2 as d2
for mod in (d3, d2):
    src = inspect.getsource(mod)
    for i, line in enumerate(src.splitlines()):
        if "past_key_values.update" in line or "def expand_kv" in line:
            print(mod.__name__, i, line.strip())
print(transformers.__version__)
PY
echo "probe rc=$? $(( $(date +%s) - T0 )) s" | tee -a "$OUT/probe_s10.log"
# The brief's order first (measure.py sorts a run's cases by config path): gemma4_text, minicpm3, youtu, then
# the rest (one more CUDA start each, a few seconds).
for only in gemma4 minicpm3 youtu ""; do
  left=$(( ${D:-200} - 5 - ($(date +%s) - T0) ))
  [ "$left" -gt 10 ] || break
  python3 measure.py cases_s10.json "$OUT/results_s10.jsonl" --deadline "$left" --only "$only" 2>&1 | grep -v -i warn | tail -60
done
echo "all done $(( $(date +%s) - T0 )) s"
