#!/bin/bash
# Lead, session 12 (#18): compile layers at b1 x 4096, the FSDP2 lever cases missing a model or a
# size, and torchtune's published chunked-CE shape.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 measure_levers_sharded.py sharded_more.json "$OUT/sharded_more.jsonl" --deadline 330 --world-sizes 2 --backend gloo > "$OUT/sharded.log" 2>&1 &
python3 measure_compile.py compile_more.json "$OUT/compile_more.jsonl" --deadline 150 > "$OUT/compile.log" 2>&1
python3 measure_compile.py published_cases.json "$OUT/published_shape.jsonl" --deadline 150 > "$OUT/published.log" 2>&1
wait
for f in "$OUT"/*.log; do echo "== $f"; grep -v -i warn "$f" | tail -n 12; done
