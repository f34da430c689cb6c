#!/usr/bin/env python3
"""Counts the parameters of vision-language models built on the meta device (transformers 5.17),
grouped by submodule, with every vision/projector parameter pattern; dumps each full config.
  python3 vlm_count.py OUT_DIR
"""
import json, re, sys, time, traceback
import torch
import transformers
from transformers import AutoConfig

out = sys.argv[1]
t0 = time.time()

# (name, model_type, overrides). Overrides change sub-config sizes so formulas are tested, not defaults.
CASES = [
    ("llava", "llava", {}),
    ("llava-proj-multi", "llava", {"vision_feature_layer": [-2, -5], "projector_hidden_act": "gelu",
        "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "image_size": 224, "patch_size": 16},
        "text_config": {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
                        "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 4}}),
    ("llava-siglip", "llava", {"vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
        "intermediate_size": 4304, "num_hidden_layers": 26, "num_attention_heads": 16, "image_size": 384, "patch_size": 14},
        "text_config": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 2,
                        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936}}),
    ("llava_next", "llava_next", {}),
    ("qwen2_vl", "qwen2_vl", {}),
    ("qwen2_vl-small", "qwen2_vl", {"vision_config": {"depth": 4, "embed_dim": 640, "num_heads": 10, "hidden_size": 1536, "mlp_ratio": 3},
        "text_config": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 2, "num_attention_heads": 12, "num_key_value_heads": 2}}),
    ("qwen2_5_vl", "qwen2_5_vl", {}),
    ("qwen2_5_vl-small", "qwen2_5_vl", {"vision_config": {"depth": 4, "hidden_size": 640, "intermediate_size": 1710, "num_heads": 10, "out_hidden_size": 2048},
        "text_config": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 2}}),
    ("qwen3_vl", "qwen3_vl", {}),
    ("qwen3_vl-small", "qwen3_vl", {"vision_config": {"depth": 6, "hidden_size": 768, "intermediate_size": 3072, "num_heads": 12,
        "out_hidden_size": 2048, "deepstack_visual_indexes": [1, 3], "num_position_embeddings": 1024},
        "text_config": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128}}),
    ("gemma3", "gemma3", {}),
    ("gemma3-small", "gemma3", {"mm_tokens_per_image": 64, "vision_config": {"num_hidden_layers": 3, "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12},
        "text_config": {"hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1}}),
    ("mllama", "mllama", {}),
    ("mllama-small", "mllama", {"vision_config": {"num_hidden_layers": 4, "num_global_layers": 2, "hidden_size": 640, "intermediate_size": 2560,
        "num_attention_heads": 10, "intermediate_layers_indices": [1, 3], "vision_output_dim": 1920},
        "text_config": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
                        "cross_attention_layers": [1, 3]}}),
    ("idefics3", "idefics3", {}),
    ("idefics3-smol", "idefics3", {"scale_factor": 4, "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
        "num_attention_heads": 12, "image_size": 512, "patch_size": 16},
        "text_config": {"model_type": "llama", "hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 2, "num_attention_heads": 15, "num_key_value_heads": 5, "vocab_size": 49280}}),
    ("paligemma", "paligemma", {}),
    ("paligemma2-small", "paligemma", {"projection_dim": 2304, "vision_config": {"num_hidden_layers": 3, "projection_dim": 2304, "image_size": 448},
        "text_config": {"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 257216}}),
    ("internvl", "internvl", {}),
    ("internvl-small", "internvl", {"vision_config": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 3, "num_attention_heads": 16,
        "use_qk_norm": True, "use_mean_pooling": False},
        "text_config": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 2, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151674}}),
    ("mistral3", "mistral3", {}),
    ("mistral3-small", "mistral3", {"multimodal_projector_bias": True, "spatial_merge_size": 2, "vision_config": {"num_hidden_layers": 3, "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12, "head_dim": 64},
        "text_config": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128}}),
    ("llava-pixtral", "llava", {"vision_config": {"model_type": "pixtral", "num_hidden_layers": 3},
        "text_config": {"model_type": "mistral", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64}}),
    ("llama4", "llama4", {"text_config": {"num_hidden_layers": 4}}),
    ("llama4-small", "llama4", {"vision_config": {"num_hidden_layers": 3, "hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8,
        "vision_output_dim": 2048, "projector_input_dim": 2048, "projector_output_dim": 2048},
        "text_config": {"num_hidden_layers": 2, "hidden_size": 1024, "intermediate_size": 2048, "intermediate_size_mlp": 4096, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "num_local_experts": 4}}),
]

def collapse(n):
    return re.sub(r"\.\d+\.", ".#.", n)

def model_class():
    from transformers import AutoModelForImageTextToText
    return AutoModelForImageTextToText

results = []
env = {"torch": torch.__version__, "transformers": transformers.__version__}
for name, mt, over in CASES:
    r = {"name": name, "model_type": mt, "overrides": over}
    try:
        cfg = AutoConfig.for_model(mt, **json.loads(json.dumps(over)))
        with torch.device("meta"):
            m = model_class().from_config(cfg)
        groups, patterns, buffers = {}, {}, {}
        total = 0
        for n, p in m.named_parameters():
            total += p.numel()
            parts = n.split(".")
            g = ".".join(parts[:2]) if parts[0] == "model" else parts[0]
            groups[g] = groups.get(g, 0) + p.numel()
            if "language_model" not in n and not n.startswith("lm_head"):
                k = collapse(n)
                e = patterns.setdefault(k, [list(p.shape), 0])
                e[1] += 1
        for n, b in m.named_buffers():
            if "language_model" in n: continue
            k = collapse(n)
            e = buffers.setdefault(k, [list(b.shape), str(b.dtype), 0])
            e[2] += 1
        r.update(total=total, groups=groups, patterns=patterns, buffers=buffers,
                 buffer_bytes=sum(b.numel() * b.element_size() for b in m.buffers()),
                 cls=type(m).__name__, config=json.loads(cfg.to_json_string(use_diff=False)))
        del m
    except Exception as e:
        r["error"] = traceback.format_exc()[-2000:]
    print(name, r.get("total"), r.get("groups"), (r.get("error") or "")[-300:], flush=True)
    results.append(r)

json.dump({"env": env, "models": results}, open(f"{out}/vlm_models_only.json", "w"), indent=1)
print("models done", time.time() - t0, flush=True)

# The vision sub-config classes' own defaults (used when a config.json's vision_config omits a key).
subdefaults = {}
for mt in ["clip_vision_model", "siglip_vision_model", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "mllama", "idefics3", "internvl", "pixtral", "llama4", "gemma3", "paligemma", "llava", "llava_next", "mistral3"]:
    try:
        c = AutoConfig.for_model(mt)
        v = getattr(c, "vision_config", None) if mt not in ("clip_vision_model", "siglip_vision_model", "pixtral") else c
        subdefaults[mt] = {"top": json.loads(c.to_json_string(use_diff=False)) if v is not c else None,
                           "vision_class": type(v).__name__, "vision_class_defaults": type(v)().to_dict()}
    except Exception:
        subdefaults[mt] = {"error": traceback.format_exc()[-800:]}

# Image processors: token grids for a few image sizes (no tokenizer needed).
import numpy as np
procs = {}
def tryproc(key, fn):
    try:
        procs[key] = fn()
    except Exception:
        procs[key] = {"error": traceback.format_exc()[-800:]}
sizes = [(336, 336), (768, 1024), (1080, 1920), (200, 3000), (4000, 3000)]
def grid(cls, **kw):
    ip = cls(**kw)
    o = {}
    for h, w in sizes:
        x = np.zeros((h, w, 3), dtype=np.uint8)
        out = ip(images=[x], return_tensors="pt")
        o[f"{h}x{w}"] = {k: (v.tolist() if k.endswith("thw") or k.endswith("sizes") or k.startswith("aspect") or k.endswith("tiles") or k.startswith("num_") else list(v.shape)) for k, v in out.items() if hasattr(v, "shape")}
    return o
T = transformers
tryproc("qwen2_vl", lambda: grid(T.Qwen2VLImageProcessor))
tryproc("qwen3_vl", lambda: grid(T.Qwen2VLImageProcessor, patch_size=16, merge_size=2))
tryproc("pixtral", lambda: grid(T.PixtralImageProcessor))
tryproc("idefics3", lambda: grid(T.Idefics3ImageProcessor))
tryproc("mllama", lambda: grid(T.MllamaImageProcessor))
tryproc("llava_next", lambda: grid(T.LlavaNextImageProcessor))
tryproc("gemma3", lambda: grid(T.Gemma3ImageProcessor))
tryproc("internvl", lambda: grid(T.GotOcr2ImageProcessor, crop_to_patches=True))
tryproc("llama4", lambda: grid(T.Llama4ImageProcessorFast))
json.dump({"env": env, "seconds": time.time() - t0, "models": results, "processors": procs, "subdefaults": subdefaults}, open(f"{out}/vlm_counts.json", "w"), indent=1)
print("done", time.time() - t0)

# Vision towers alone on the GPU (bf16, sdpa, inference): peak allocated above the resident weights.
def vis_measure():
    res = []
    if not torch.cuda.is_available():
        return res
    from transformers import AutoModel
    def peak(fn):
        torch.cuda.synchronize(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        with torch.inference_mode():
            fn()
        torch.cuda.synchronize()
        return base, torch.cuda.max_memory_allocated() - base
    # CLIP ViT-L/14-336 (llava): images x 3 x 336 x 336
    vc = AutoConfig.for_model("llava").vision_config
    with torch.device("cuda"):
        tower = AutoModel.from_config(vc, dtype=torch.bfloat16, attn_implementation="sdpa")
    for n in (1, 8):
        px = torch.zeros(n, 3, 336, 336, dtype=torch.bfloat16, device="cuda")
        base, pk = peak(lambda: tower(pixel_values=px, output_hidden_states=True))
        res.append({"tower": "clip-vit-l-336", "images": n, "resident": base, "peak_above": pk})
        if time.time() - t0 > 95: return res
    del tower
    # Qwen2-VL ViT (675M): grid t=1, h, w patches of 14px
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel
    vc = AutoConfig.for_model("qwen2_vl").vision_config
    vc._attn_implementation = "sdpa"
    with torch.device("cuda"):
        tower = Qwen2VisionTransformerPretrainedModel._from_config(vc, dtype=torch.bfloat16)
    for h, w in ((32, 32), (74, 100)):
        n = h * w
        px = torch.zeros(n, 3 * 2 * 14 * 14, dtype=torch.bfloat16, device="cuda")
        thw = torch.tensor([[1, h, w]], device="cuda")
        base, pk = peak(lambda: tower(px, grid_thw=thw))
        res.append({"tower": "qwen2_vl", "grid": [1, h, w], "resident": base, "peak_above": pk})
        if time.time() - t0 > 100: return res
    return res
try:
    vis = vis_measure()
except Exception:
    vis = [{"error": traceback.format_exc()[-1500:]}]
d = json.load(open(f"{out}/vlm_counts.json")); d["vision_forward"] = vis; d["seconds"] = time.time() - t0
json.dump(d, open(f"{out}/vlm_counts.json", "w"), indent=1)
print("vision", vis, time.time() - t0)
