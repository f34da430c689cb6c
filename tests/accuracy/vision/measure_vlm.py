#!/usr/bin/env python3
"""Measure the GPU memory of vision-language forwards with N images (transformers 5.17, bf16, sdpa).

  python3 measure_vlm.py OUT.jsonl [--deadline SECONDS]

Each model is built from a small config with random weights (AutoModelForImageTextToText, as
../shared/truth/measure.py builds text models). Per case: the full forward with N images
(peak_allocated_bytes, inference_mode, use_cache=False, logits for every position), the same
sequence length as text only (text_peak_allocated_bytes), and the vision tower + projector alone
(get_image_features: vision_peak_allocated_bytes); all peaks include the resident weights
(resident_bytes). The inputs have the processor's shapes: llava 3x336x336 and 576 <image> tokens
per image; gemma3 3x896x896 and 256 tokens; qwen2_vl pixel rows of 3*2*14*14 per patch,
image_grid_thw [1, h/14, w/14] and (h/28)*(w/28) tokens between <|vision_start|> and <|vision_end|>.
"""
import json, os, sys, time, traceback
import torch
import transformers
from transformers import AutoConfig, AutoModelForImageTextToText

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness.py, unless beside
from harness import sync_reset as reset, warm_up  # noqa: E402

TEXT = 64  # text tokens around the images

MODELS = {
    "llava-small": ("llava", {
        "text_config": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 2,
                        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32064}}),
    "qwen2_vl-small": ("qwen2_vl", {
        "vision_config": {"depth": 8, "embed_dim": 1280, "num_heads": 16, "hidden_size": 1536, "mlp_ratio": 4},
        "text_config": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 2, "num_attention_heads": 12,
                        "num_key_value_heads": 2, "vocab_size": 151936}}),
    "gemma3-small": ("gemma3", {
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                          "num_hidden_layers": 8, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                          "vision_use_head": False},
        "text_config": {"hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 1, "head_dim": 256}}),
}

# (id, model, images, image height, width, mode)
CASES = [
    ("llava-small-1img", "llava-small", 1, 336, 336, "forward"),
    ("llava-small-4img", "llava-small", 4, 336, 336, "forward"),
    ("qwen2_vl-small-1img-448", "qwen2_vl-small", 1, 448, 448, "forward"),
    ("qwen2_vl-small-4img-448", "qwen2_vl-small", 4, 448, 448, "forward"),
    ("qwen2_vl-small-1img-1036", "qwen2_vl-small", 1, 1036, 1036, "forward"),
    ("gemma3-small-1img", "gemma3-small", 1, 896, 896, "forward"),
    ("gemma3-small-4img", "gemma3-small", 4, 896, 896, "forward"),
    ("llava-small-1img-train", "llava-small", 1, 336, 336, "train"),
]


def build(name):
    mt, over = MODELS[name]
    cfg = AutoConfig.for_model(mt, **json.loads(json.dumps(over)))
    with torch.device("cuda"):
        m = AutoModelForImageTextToText.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    return m, cfg


def inputs(model, cfg, mt, n, h, w):
    """input_ids and the vision kwargs the processor would give for n images of h x w."""
    dev = "cuda"
    text = torch.full((TEXT,), 5, dtype=torch.long)
    kw = {}
    if mt == "llava":
        per = (h // 14) * (w // 14)
        img = [torch.full((per,), tok(cfg, 'image_token_id', 'image_token_index'), dtype=torch.long)] * n
        ids = torch.cat([*img, text])
        kw["pixel_values"] = torch.randn(n, 3, h, w, dtype=torch.bfloat16, device=dev)
    elif mt == "gemma3":
        per = cfg.mm_tokens_per_image
        img = []
        for _ in range(n):
            img += [torch.tensor([tok(cfg, 'boi_token_id', 'boi_token_index')]), torch.full((per,), tok(cfg, 'image_token_id', 'image_token_index'), dtype=torch.long),
                    torch.tensor([tok(cfg, 'eoi_token_id', 'eoi_token_index')])]
        ids = torch.cat([torch.tensor([2]), *img, text])
        kw["pixel_values"] = torch.randn(n, 3, h, w, dtype=torch.bfloat16, device=dev)
        kw["token_type_ids"] = (ids == tok(cfg, 'image_token_id', 'image_token_index')).long().unsqueeze(0).to(dev)
    elif mt == "qwen2_vl":
        gh, gw = h // 14, w // 14
        per = gh * gw // 4
        img = []
        for _ in range(n):
            img += [torch.tensor([cfg.vision_start_token_id]), torch.full((per,), tok(cfg, 'image_token_id', 'image_token_index'), dtype=torch.long),
                    torch.tensor([cfg.vision_end_token_id])]
        ids = torch.cat([*img, text])
        kw["pixel_values"] = torch.randn(n * gh * gw, 3 * 2 * 14 * 14, dtype=torch.bfloat16, device=dev)
        kw["image_grid_thw"] = torch.tensor([[1, gh, gw]] * n, device=dev)
        kw["mm_token_type_ids"] = (ids == tok(cfg, 'image_token_id', 'image_token_index')).long().unsqueeze(0).to(dev)
    return ids.unsqueeze(0).to(dev), kw


def tok(cfg, *names):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    raise AttributeError(names[0])


def vision_only(model, kw):
    m = model.model
    args = {k: v for k, v in kw.items() if k in ("pixel_values", "image_grid_thw")}
    return m.get_image_features(**args)


def main():
    out_path = sys.argv[1]
    deadline = float(sys.argv[3]) if len(sys.argv) > 3 else 240
    t0 = time.time()
    out = open(out_path, "a")
    torch.cuda.init()
    warm_up()
    reset()
    out.write(json.dumps({"env": True, "torch": torch.__version__, "transformers": transformers.__version__,
                          "gpu": torch.cuda.get_device_name(0)}) + "\n")
    out.flush()
    model, cur = None, None
    for cid, name, n, h, w, mode in CASES:
        if time.time() - t0 > deadline:
            print("deadline", flush=True); break
        mt = MODELS[name][0]
        rec = {"id": cid, "model": name, "model_type": mt, "overrides": MODELS[name][1], "images": n,
               "image_height": h, "image_width": w, "mode": mode, "text_tokens": TEXT, "weights_dtype": "bf16",
               "attn": "sdpa"}
        started = time.time()
        try:
            if cur != name:
                model = None; reset()
                model, cfg = build(name); cur = name
            model.zero_grad(set_to_none=True)
            reset()
            rec["params"] = sum(p.numel() for p in model.parameters())
            rec["vision_params"] = sum(p.numel() for n_, p in model.named_parameters() if "language_model" not in n_ and "lm_head" not in n_)
            rec["buffer_bytes"] = sum(b.numel() * b.element_size() for b in model.buffers())
            rec["resident_bytes"] = torch.cuda.memory_allocated()
            ids, kw = inputs(model, cfg, mt, n, h, w)
            rec["seq"] = ids.shape[1]
            rec["image_tokens"] = int((ids == tok(cfg, 'image_token_id', 'image_token_index')).sum())
            if mode == "forward":
                model.eval()
                reset()
                with torch.inference_mode():
                    feats = vision_only(model, kw); del feats
                torch.cuda.synchronize()
                rec["vision_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                reset()
                with torch.inference_mode():
                    o = model(input_ids=ids, use_cache=False, **kw); del o
                torch.cuda.synchronize()
                rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                reset()
                tid = torch.full_like(ids, 5)
                with torch.inference_mode():
                    o = model(input_ids=tid, use_cache=False); del o
                torch.cuda.synchronize()
                rec["text_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            else:
                model.train(); model.config.use_cache = False
                opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
                steps = []
                for _ in range(3):
                    reset()
                    loss = model(input_ids=ids, labels=ids, **kw).loss
                    fwd = torch.cuda.max_memory_allocated()
                    loss.backward(); bwd = torch.cuda.max_memory_allocated()
                    opt.step(); st = torch.cuda.max_memory_allocated()
                    opt.zero_grad(set_to_none=True); del loss
                    steps.append({"fwd_peak": fwd, "bwd_peak": bwd, "opt_peak": st})
                rec["steps"] = steps
                rec["optimizer"] = "adamw"
                rec["peak_allocated_bytes"] = max(s["opt_peak"] for s in steps)
                del opt
                model.zero_grad(set_to_none=True)
                model = None; cur = None
            rec["status"] = "ok"
        except Exception as e:
            rec["status"] = "error"; rec["error"] = traceback.format_exc()[-1500:]
            model, cur = None, None
        rec["seconds"] = round(time.time() - started, 2)
        out.write(json.dumps(rec) + "\n"); out.flush()
        print(rec["status"], cid, rec.get("seq"), rec.get("image_tokens"), rec.get("resident_bytes"),
              rec.get("vision_peak_allocated_bytes"), rec.get("peak_allocated_bytes"), rec.get("text_peak_allocated_bytes"),
              (rec.get("error") or "")[-600:], flush=True)
    print("elapsed", time.time() - t0)


if __name__ == "__main__":
    main()
