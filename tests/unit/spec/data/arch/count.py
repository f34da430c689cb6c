# Builds each model type from a config on the meta device with transformers and counts
# parameters exactly; dumps config dicts, parameter shapes (layer indices folded) and buffers.
import json, os, re, sys, time, traceback
import torch, transformers
from transformers import AutoConfig, AutoModelForCausalLM, CONFIG_MAPPING
out = os.environ.get("OUT", ".")
here = os.path.dirname(os.path.abspath(__file__))
t0 = time.time()
jobs = []
# (id, model_type, overrides, text_of)  text_of: take .text_config of that type's default
TYPES = ["llama","mistral","mixtral","qwen2","qwen2_moe","qwen3","qwen3_moe","gemma","gemma2","gemma3_text",
 "phi","phi3","phimoe","gpt2","gpt_neox","gptj","gpt_bigcode","falcon","opt","bloom","mpt","starcoder2",
 "olmo","olmo2","olmo3","olmoe","stablelm","granite","granitemoe","cohere","cohere2","glm","glm4","exaone4",
 "internlm2","deepseek_v2","deepseek_v3","gpt_oss","smollm3","llama4_text","ministral","ernie4_5","ernie4_5_moe",
 "seed_oss","hunyuan_v1_dense","hunyuan_v1_moe","glm4_moe","qwen3_next","nemotron","arcee","apertus","dots1",
 "qwen3_5_text","qwen3_5_moe_text",
 "granitemoeshared","jetmoe","dbrx","persimmon","codegen","gpt_neo","xglm","biogpt","helium","bitnet","falcon_mamba",
 "mamba","jamba","zamba2","falcon_h1","lfm2","minimax","exaone_moe","mistral3","bailing_moe","minimax_m2","glm4_moe_lite","flex_olmo"]
for t in TYPES: jobs.append((t + ":default", t, None))
# real configs from files in real/
rd = os.path.join(here, "real")
if os.path.isdir(rd):
    for f in sorted(os.listdir(rd)):
        jobs.append(("real:" + f[:-5], None, json.load(open(os.path.join(rd, f)))))
res = []
def fold(n): return re.sub(r"\.\d+\.", ".*.", n)
for jid, mt, raw in jobs:
    if time.time() - t0 > float(os.environ.get("DEADLINE", "150")): break
    r = {"id": jid}
    try:
        if raw is None:
            cfg = CONFIG_MAPPING[mt]()
        else:
            d = dict(raw); m = d.pop("model_type"); cfg = CONFIG_MAPPING[m](**d)
        if hasattr(cfg, "text_config") and cfg.text_config is not None and not hasattr(cfg, "hidden_size") or (cfg.model_type in ("mistral3","llama4")):
            r["outer"] = cfg.model_type; cfg = cfg.text_config
        r["model_type"] = cfg.model_type
        r["config"] = json.loads(cfg.to_json_string(use_diff=False))
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(cfg)
        r["class"] = type(m).__name__
        r["params"] = sum(p.numel() for p in m.parameters())
        shapes = {}
        for n, p in m.named_parameters():
            k = fold(n); e = shapes.setdefault(k, [list(p.shape), 0]); e[1] += 1
        r["shapes"] = shapes
        r["buffers"] = {n: [list(b.shape), str(b.dtype)] for n, b in m.named_buffers() if ".0." in n or not re.search(r"\.\d+\.", n)}
        del m
    except Exception as e:
        r["error"] = repr(e)[:400]
    r["t"] = round(time.time() - t0, 1)
    res.append(r); print(jid, r.get("params"), r.get("error", "")[:100], r["t"], flush=True)
json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "results": res},
          open(os.path.join(out, "counts.json"), "w"), indent=1)
