# Dumps transformers 5.17's modeling and configuration sources of session 8's types into $OUT/src/.
import importlib, inspect, os
out = os.path.join(os.environ.get("OUT", "."), "src")
os.makedirs(out, exist_ok=True)
for t in ["ministral3", "ministral", "glm4_moe_lite", "exaone_moe", "flex_olmo", "granitemoeshared", "nemotron",
          "vaultgemma", "afmoe", "jais2", "nanochat", "cwm"]:
    for kind in ["modeling", "configuration"]:
        try:
            m = importlib.import_module(f"transformers.models.{t}.{kind}_{t}")
            open(os.path.join(out, f"{kind}_{t}.py"), "w").write(inspect.getsource(m))
        except Exception as e:
            print(t, kind, repr(e)[:200], flush=True)
import transformers.integrations.moe as moe
open(os.path.join(out, "integrations_moe.py"), "w").write(inspect.getsource(moe))
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as C
open(os.path.join(out, "causal_lm_types.txt"), "w").write("\n".join(sorted(C)))
print("probe done", flush=True)
