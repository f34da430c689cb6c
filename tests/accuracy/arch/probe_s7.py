# Session 7's probe (H200, torch 2.11, transformers 5.17), run before measure.py:
#  1. src_s7.txt: the transformers sources that decide the memory of the MoE blocks compared here
#     (integrations/moe.py, glm4_moe, dots1, qwen3_moe, deepseek_v3, ernie4_5_moe, hunyuan_v1_moe) and
#     of the types added (minimax_m2, apertus, arcee, activations.py's xIELU and relu2).
#  2. counts_s7.json: parameter counts on the meta device (shapes, buffers) of the models/ configs.
#  3. moe_bench.json: one MoE block's forward peak per token (no_grad, 4096 tokens, bf16), as built
#     and with the routing weights cast to the hidden states' dtype before the experts, and the
#     dtype of the routing weights the experts receive; parameters that stay fp32 in a bf16 model.
#   OUT=dir python3 probe_s7.py models/a.json models/b.json ...
import importlib, inspect, json, os, re, sys, time
import torch, transformers
from transformers import AutoConfig, AutoModelForCausalLM
out = os.environ.get("OUT", ".")
t0 = time.time()
MODS = ["transformers.integrations.moe", "transformers.models.glm4_moe.modeling_glm4_moe",
        "transformers.models.dots1.modeling_dots1", "transformers.models.minimax_m2.modeling_minimax_m2",
        "transformers.models.minimax_m2.configuration_minimax_m2", "transformers.models.apertus.modeling_apertus",
        "transformers.models.apertus.configuration_apertus", "transformers.models.arcee.modeling_arcee",
        "transformers.models.arcee.configuration_arcee"]
PART = {"transformers.models.qwen3_moe.modeling_qwen3_moe": r"Moe|Router|Experts",
        "transformers.models.deepseek_v3.modeling_deepseek_v3": r"MoE|Router|Experts",
        "transformers.models.ernie4_5_moe.modeling_ernie4_5_moe": r"Moe|Router|Experts|Statics|PreTrained",
        "transformers.models.hunyuan_v1_moe.modeling_hunyuan_v1_moe": r"Moe|Gate|Experts|PreTrained",
        "transformers.activations": r"XIELU|ReLUSquared|ACT2CLS"}
with open(os.path.join(out, "src_s7.txt"), "w") as f:
    f.write(f"transformers {transformers.__version__} torch {torch.__version__}\n")
    for name in MODS:
        try:
            f.write(f"##### {name}\n{inspect.getsource(importlib.import_module(name))}\n")
        except Exception as e:
            f.write(f"##### {name} ERROR {e!r}\n")
    for name, pat in PART.items():
        try:
            mod = importlib.import_module(name)
            for k, v in vars(mod).items():
                if re.search(pat, k) and (inspect.isclass(v) or inspect.isfunction(v)) and v.__module__ == name:
                    f.write(f"##### {name}.{k}\n{inspect.getsource(v)}\n")
                elif re.search(pat, k) and k == "ACT2CLS":
                    f.write(f"##### {name}.ACT2CLS keys {sorted(v)}\n")
        except Exception as e:
            f.write(f"##### {name} ERROR {e!r}\n")
    try:
        import xielu  # noqa: F401  the CUDA-fused xIELU the activation tries first
        f.write("##### xielu importable\n")
    except Exception as e:
        f.write(f"##### xielu not importable: {e!r}\n")
print("sources", round(time.time() - t0, 1), flush=True)


def config_of(path):
    raw = dict(json.load(open(path)))
    mt = raw.pop("model_type")
    return AutoConfig.for_model(mt, **raw)


def fold(n):
    return re.sub(r"\.\d+\.", ".*.", n)


counts = []
for path in sys.argv[1:]:
    r = {"id": os.path.basename(path)[:-5]}
    try:
        cfg = config_of(path)
        r["config"] = json.loads(cfg.to_json_string(use_diff=False))
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(cfg)
        r["class"] = type(m).__name__
        r["params"] = sum(p.numel() for p in m.parameters())
        shapes = {}
        for n, p in m.named_parameters():
            e = shapes.setdefault(fold(n), [list(p.shape), 0]); e[1] += 1
        r["shapes"] = shapes
        r["buffers"] = {n: [list(b.shape), str(b.dtype)] for n, b in m.named_buffers()
                        if ".0." in n or not re.search(r"\.\d+\.", n)}
        del m
    except Exception as e:
        r["error"] = repr(e)[:600]
    counts.append(r)
    print(r["id"], r.get("params"), r.get("error", "")[:200], flush=True)
json.dump({"transformers": transformers.__version__, "results": counts}, open(os.path.join(out, "counts_s7.json"), "w"),
          indent=1)
print("counts", round(time.time() - t0, 1), flush=True)

bench = []
T = 4096
for path in sys.argv[1:]:
    if "-dims" in path:  # full-size configs: counted on the meta device only
        continue
    cfg = config_of(path)
    if not any(hasattr(cfg, k) and getattr(cfg, k) for k in ("n_routed_experts", "num_experts", "num_local_experts",
                                                              "moe_num_experts")):
        continue
    r = {"id": os.path.basename(path)[:-5], "experts_implementation": getattr(cfg, "_experts_implementation", None)}
    try:
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        m.eval()
        r["not_bf16_params"] = {fold(n): str(p.dtype) for n, p in m.named_parameters() if p.dtype != torch.bfloat16}
        r["not_bf16_buffers"] = {fold(n): str(b.dtype) for n, b in m.named_buffers() if b.dtype != torch.bfloat16}
        mlp = next(l.mlp for l in m.model.layers if hasattr(l.mlp, "experts"))
        r["mlp_class"] = type(mlp).__name__
        r["experts_class"] = type(mlp.experts).__name__
        seen = {}
        cast = {"on": False}

        def pre(mod, args, kwargs):
            args = list(args)
            if len(args) >= 3:
                w = args[2]
            else:
                w = kwargs.get("top_k_weights", kwargs.get("routing_weights"))
            if torch.is_tensor(w):
                seen["weights"] = [str(w.dtype), list(w.shape)]
                if cast["on"]:
                    w = w.to(args[0].dtype)
                    if len(args) >= 3:
                        args[2] = w
                    else:
                        kwargs["top_k_weights" if "top_k_weights" in kwargs else "routing_weights"] = w
            return tuple(args), kwargs

        h = mlp.experts.register_forward_pre_hook(pre, with_kwargs=True)
        x = torch.randn(1, T, cfg.hidden_size, dtype=torch.bfloat16, device="cuda")
        for variant in ("as_built", "weights_cast", "as_built"):
            cast["on"] = variant == "weights_cast"
            torch.cuda.synchronize(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            with torch.no_grad():
                y = mlp(x)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del y
            r[variant] = {"peak_bytes": peak, "per_token_bf16_elems": peak / T / 2,
                          "per_token_in_h": round(peak / T / 2 / cfg.hidden_size, 3)}
        r["weights_seen"] = seen.get("weights")
        h.remove()
        del m, mlp, x
    except Exception as e:
        r["error"] = repr(e)[:600]
    bench.append(r)
    print(json.dumps(r)[:600], flush=True)
    torch.cuda.empty_cache()
json.dump(bench, open(os.path.join(out, "moe_bench.json"), "w"), indent=1)
print("bench", round(time.time() - t0, 1), flush=True)
