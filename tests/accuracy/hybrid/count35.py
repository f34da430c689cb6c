# Meta-device parameter counts of qwen3_5 / qwen3_5_moe, text-only (AutoModelForCausalLM on the
# text config) and whole (the outer config's model class), to check vramfit's hand counts.
import json, os, sys, time, traceback
import torch, transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM
import transformers as T
out = os.environ.get("OUT", ".")
res = {"transformers": transformers.__version__, "torch": torch.__version__, "rows": []}
def count(m):
    return sum(p.numel() for p in m.parameters())
def outer_model(cfg):
    for name in ("AutoModelForImageTextToText", "AutoModelForVision2Seq", "AutoModel"):
        cls = getattr(T, name, None)
        if cls is None: continue
        try:
            return name, cls.from_config(cfg)
        except Exception as e:
            last = e
    raise last
jobs = [("qwen3_5_text:default", "qwen3_5_text", None), ("qwen3_5_moe_text:default", "qwen3_5_moe_text", None),
        ("qwen3_5:default", "qwen3_5", None), ("qwen3_5_moe:default", "qwen3_5_moe", None)]
for f in sorted(os.listdir("models")):
    if not f.startswith(("qwen35", "qwen3.5")): continue
    jobs.append(("file:" + f, None, json.load(open(os.path.join("models", f)))))
for jid, mt, raw in jobs:
    r = {"id": jid}
    try:
        if raw is None:
            cfg = CONFIG_MAPPING[mt]()
        else:
            d = dict(raw); m = d.pop("model_type"); cfg = CONFIG_MAPPING[m](**d)
        with torch.device("meta"):
            if getattr(cfg, "text_config", None) is not None and cfg.model_type in ("qwen3_5", "qwen3_5_moe"):
                name, whole = outer_model(cfg)
                r["whole_class"] = type(whole).__name__; r["whole"] = count(whole)
                r["whole_vision"] = sum(p.numel() for n, p in whole.named_parameters() if "visual" in n)
                del whole
                tc = cfg.text_config
                r["text"] = count(AutoModelForCausalLM.from_config(tc))
            else:
                mdl = AutoModelForCausalLM.from_config(cfg)
                r["class"] = type(mdl).__name__; r["text"] = count(mdl)
    except Exception as e:
        r["error"] = traceback.format_exc()[-600:]
    print(json.dumps(r), flush=True)
    res["rows"].append(r)
json.dump(res, open(os.path.join(out, "counts35.json"), "w"), indent=1)
