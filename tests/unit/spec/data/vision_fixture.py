#!/usr/bin/env python3
"""Makes vision.json (the fixture of tests/unit/spec/vision_test.cpp) from what vision_count.py
printed on the device (transformers 5.17, models built on the meta device):

  python3 vision_count.py OUT                                   # on the H200 (device tool)
  python3 vision_fixture.py OUT/vlm_counts.json > vision.json   # here

Per case: the full config (transformers' to_dict, noise keys dropped), and the parameters of the
vision tower and of the projector (connector, merger, adapter, image_newline), the vision part's
buffer bytes, and the whole model's parameter total."""
import json
import sys

NOISE = {"id2label", "label2id", "_name_or_path", "architectures", "transformers_version", "return_dict",
         "output_hidden_states", "output_attentions", "chunk_size_feed_forward", "problem_type",
         "is_encoder_decoder", "dtype"}
PROJECTOR = ("multi_modal_projector", "connector.", ".merger.", "deepstack_merger", "image_newline", "vision_adapter")
TEXT = ("language_model", "text_model", "lm_head")
DSIZE = {"torch.int64": 8, "torch.float32": 4, "torch.complex64": 8, "torch.bfloat16": 2}


def prune(v):
    if isinstance(v, dict):
        return {k: prune(x) for k, x in v.items() if k not in NOISE}
    return v


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


src = json.load(open(sys.argv[1]))
cases = []
for m in src["models"]:
    if "error" in m:
        continue
    # The vision part's total comes from the groups (exact); the tower from its patterns, whose
    # repeated layers all have one shape (a pattern keeps the first shape it saw: the merger's
    # mlp.0 and mlp.2 differ, so the projector is the rest).
    vision = sum(n for g, n in m["groups"].items() if not any(t in g for t in TEXT))
    tower = 0
    for name, (shape, count) in m["patterns"].items():
        if any(t in name for t in TEXT) or any(p in name for p in PROJECTOR):
            continue
        tower += numel(shape) * count
    projector = vision - tower
    buf = sum(numel(s) * DSIZE[d] * c for name, (s, d, c) in m["buffers"].items() if not any(t in name for t in TEXT))
    cases.append({"name": m["name"], "class": m["cls"], "vision_tower": tower, "projector": projector,
                  "vision_buffer_bytes": buf, "total": m["total"], "config": prune(m["config"])})
print(json.dumps({"env": src["env"], "cases": cases}, indent=1))
