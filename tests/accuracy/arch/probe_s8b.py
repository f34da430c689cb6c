# Session 8, second run: transformers 5.17's sources of the types added and of the newest types not
# in the table, in one archive ($OUT/src_s8b.tgz), and the parameter shapes of their default configs
# built on the meta device ($OUT/counts_s8b.json), for the rows still to write.
import importlib, inspect, io, json, os, re, tarfile, time
import torch, transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM
out = os.environ.get("OUT", ".")
T = ["ministral3", "ministral", "glm4_moe_lite", "exaone_moe", "flex_olmo", "granitemoeshared", "nemotron",
     "solar_open", "vaultgemma", "granite_swa", "cohere2_moe", "gemma4", "qwen4_exp", "deepseek_v4", "hy_v3",
     "hy_v4", "laguna", "mellum", "mimo_v2_flash", "youtu", "jais2", "cwm", "afmoe", "granitemoe_swa",
     "minicpm3", "inkling", "zaya", "olmo_hybrid", "qwen3_5", "qwen3_5_moe", "hyperclovax", "axk1", "axk2",
     "hrm", "minimax_m3_vl", "cohere_compass", "gemma3n", "deepseek_v32", "glm_moe_dsa", "longcat_flash",
     "lfm2", "nanochat", "bitnet", "dbrx", "jetmoe", "doge", "diffllama"]
tf = tarfile.open(os.path.join(out, "src_s8b.tgz"), "w:gz")
def add(name, text):
    b = text.encode(); ti = tarfile.TarInfo(name); ti.size = len(b); tf.addfile(ti, io.BytesIO(b))
base = os.path.dirname(transformers.__file__)
for t in T:
    d = os.path.join(base, "models", t)
    if not os.path.isdir(d):
        print("no dir", t); continue
    for f in sorted(os.listdir(d)):
        if f.startswith(("modeling_", "configuration_", "modular_")) and f.endswith(".py"):
            add(f"{t}/{f}", open(os.path.join(d, f)).read())
for f in ["configuration_utils.py", "integrations/moe.py", "masking_utils.py", "cache_utils.py"]:
    add(f"_core/{f}", open(os.path.join(base, f)).read())
tf.close()
print("sources", round(time.time()), flush=True)
types = sorted(set(CONFIG_MAPPING.keys()))
res = []
t0 = time.time()
def fold(n): return re.sub(r"\.\d+\.", ".*.", n)
for mt in ["gemma4_text", "qwen4_exp_text", "deepseek_v4", "hy_v3", "hy_v4", "laguna", "mellum", "mimo_v2_flash",
           "youtu", "jais2", "cwm", "afmoe", "granitemoe_swa", "minicpm3", "inkling_text", "hyperclovax", "axk1",
           "axk2", "hrm_text", "cohere_compass_text", "minimax_m3_vl_text", "vaultgemma", "granite_swa",
           "cohere2_moe", "solar_open", "ministral3", "nanochat", "bitnet", "dbrx", "jetmoe"]:
    if time.time() - t0 > 25: break
    r = {"id": mt + ":default"}
    try:
        cfg = CONFIG_MAPPING[mt]()
        r["config"] = json.loads(cfg.to_json_string(use_diff=False))
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(cfg)
        r["class"] = type(m).__name__
        r["params"] = sum(p.numel() for p in m.parameters())
        sh = {}
        for n, p in m.named_parameters():
            e = sh.setdefault(fold(n), [list(p.shape), 0]); e[1] += 1
        r["shapes"] = sh
        r["buffers"] = {n: [list(b.shape), str(b.dtype)] for n, b in m.named_buffers() if ".0." in n or not re.search(r"\.\d+\.", n)}
        del m
    except Exception as e:
        r["error"] = repr(e)[:300]
    res.append(r); print(mt, r.get("params"), r.get("error", "")[:80], flush=True)
json.dump({"transformers": transformers.__version__, "results": res}, open(os.path.join(out, "counts_s8b.json"), "w"), indent=1)
