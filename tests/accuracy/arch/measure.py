#!/usr/bin/env python3
"""shared/truth/measure.py's loop (../harness.py: measure_main) with one change: a type that
refuses SDPA is built with eager attention and the record's attn says so (gptj, bloom, mpt).

  python3 measure.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
import harness  # noqa: E402

if __name__ == "__main__":
    sys.exit(harness.measure_main(eager_fallback=True))
