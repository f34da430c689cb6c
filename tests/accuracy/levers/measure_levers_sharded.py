#!/usr/bin/env python3
"""Issue #18's sharded cases: tests/accuracy/sharded/measure_sharded.py, which reads the two case
keys the levers add (fsdp_mixed_precision: FSDP2's MixedPrecisionPolicy(param_dtype, reduce_dtype
fp32) on every decoder layer and the root; lora: peft LoRA wrapped before sharding).

  python3 measure_levers_sharded.py CASES.json OUT.jsonl [--deadline SECONDS] [--only SUBSTR]
                                    [--budget 1:60,2:200,4:250] [--world-sizes 2] [--backend auto|nccl|gloo]

measure_sharded.py and harness.py are found beside this file, else in ../sharded and ...
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path += [os.path.join(_here, "..", "sharded"), os.path.join(_here, "..")]
import measure_sharded  # noqa: E402  (turns NVLink multicast off before torch is loaded)

if __name__ == "__main__":
    sys.exit(measure_sharded.main())
