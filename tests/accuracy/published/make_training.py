#!/usr/bin/env python3
"""Writes training.jsonl: published peak-memory figures of real fine-tuning / training runs,
each with its source, what the figure measures and the vramfit flags that express the setup
(issue #18). With a vramfit binary it also records what vramfit estimates for each, which
tests/accuracy/published_test.cpp re-runs through cli::run and asserts exactly.

    python3 tests/accuracy/published/make_training.py ./build/vramfit > tests/accuracy/published/training.jsonl

`measures` says what the figure is and so what it is compared with:
  active     torch.cuda.memory_stats()["active_bytes.all.peak"] (torchtune's "peak memory active")
             -> peak_allocated_bytes (active and allocated differ by block rounding only)
  allocated  torch.cuda.max_memory_allocated()                  -> peak_allocated_bytes
  reserved   torch.cuda.max_memory_reserved() (torchtitan's "memory:")
             -> device_total_bytes - the cuda_context component (what PyTorch reserved)
  device     nvidia-smi / "memory consumed per GPU"             -> device_total_bytes
  fit        the longest context that fit a GPU of `published` memory: the GPU's capacity
             -> device_total_bytes at that context (about the capacity, never far above it)

`missing` names the levers of the run that vramfit cannot express; the estimate leaves them out.
"""
import json
import subprocess
import sys

TT_3B = ("torchtune README, 'Optimization flags' (Llama 3.2 3B, A100, batch 2, max seq len 4096, "
         "bf16, packed, each row adds to the one before)")
TT_3B_URL = "https://github.com/pytorch/torchtune/blob/1814feb17a9038e1a8053ce93111bd26774a8db6/README.md"
TT_8B = ("torchtune README, 'Memory and training speed' (Llama 3.1 8B, batch 2, dataset packed to "
         "2048, torch compile, the llama3_1 single-device configs of that commit)")
TT_8B_URL = "https://github.com/pytorch/torchtune/blob/30b8519e86d2094879576e16ab1f8d21a6f6f9f7/README.md"
TITAN = ("torchtitan benchmarks/llama3_h100_202412_torchtitan.md (Llama 3.1 8B, H100 96GB, FSDP2, "
         "local batch 2, seq_len 8192, selective op AC; torchtitan 9dec370)")
TITAN_URL = ("https://github.com/pytorch/torchtitan/blob/820504e20d1149fbf0b98c567af24c4b0433b22d/"
             "benchmarks/llama3_h100_202412_torchtitan.md")
UNSLOTH = ("Unsloth benchmarks, 'Context length benchmarks' (4-bit QLoRA, rank 32 on q,k,v,o,gate,up,down, "
           "batch 1, sequences padded to the length, A100 80GB)")
UNSLOTH_URL = "https://docs.unsloth.ai/basics/unsloth-benchmarks"
PEFT = ("PEFT docs, 'Use PEFT QLoRA and FSDP' (Llama-2-70b, 2 GPUs, FSDP FULL_SHARD, nf4 double quant "
        "stored in bf16, LoRA r 8 all-linear, batch 2 x 2048 packed, grad accum 2, checkpointing, flash attention)")
PEFT_URL = "https://github.com/huggingface/peft/blob/main/docs/source/accelerate/fsdp.md"

# Unsloth's fused LoRA autograd functions are `--lora-kernels unsloth` (set by `--recipe unsloth`,
# measured with a stand-in in tests/accuracy/unsloth); its loss then was Apple's Cut Cross-Entropy
# (`--loss cce`, below). Nothing is left out.
UNSLOTH_MISSING = []
TT3 = ["--model", "llama-3.2-3b", "--batch", "2", "--seq", "4096"]
TT3_LORA = TT3 + ["--lora-rank", "64", "--lora-targets", "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
                  "--optimizer", "adamw-fused", "--loss", "chunked", "--checkpointing", "--activation-offload",
                  "--lora-dtype", "bf16"]
TT8 = ["--model", "llama-3.1-8b", "--batch", "2", "--seq", "2048", "--checkpointing", "--loss", "chunked"]
TITAN8 = ["--model", "llama-3.1-8b", "--dtype", "fp32", "--mode", "train", "--batch", "2", "--seq", "8192",
          "--sharding", "fsdp", "--fsdp-mixed-precision", "bf16", "--checkpointing", "selective"]
US8 = ["--model", "llama-3.1-8b", "--mode", "qlora", "--lora-rank", "32", "--batch", "1"]
US70 = ["--model", "llama-3.3-70b", "--mode", "qlora", "--lora-rank", "32", "--batch", "1"]
# Unsloth's column: --recipe unsloth (unsloth 2024.12, the release of the benchmark: its offloaded
# checkpointing "unsloth", its fused LoRA_QKV / LoRA_W / LoRA_MLP with fp32 adapters and its RMSNorm
# and RoPE kernels), --loss cce: unsloth 2024.12.12's LlamaForCausalLM forward (models/llama.py)
# called unsloth_zoo's fused_linear_cross_entropy, i.e. cut_cross_entropy's linear_cross_entropy,
# whenever the package imported and the batch held more than 1024 tokens (the recipe sets today's
# loss, `--loss unsloth`: Cut Cross-Entropy is off on torch >= 2.8), and --double-quant:
# FastLlamaModel.from_pretrained's BitsAndBytesConfig sets bnb_4bit_use_double_quant=True.
US_RECIPE = ["--recipe", "unsloth", "--loss", "cce", "--double-quant"]
PEFT70 = ["--config", "tests/accuracy/published/models/llama-2-70b.json", "--mode", "qlora", "--double-quant",
          "--lora-rank", "8", "--lora-dropout", "0.1", "--batch", "2", "--seq", "2048", "--grad-accum", "2",
          "--checkpointing", "--gpus", "2", "--sharding", "fsdp"]

CASES = [
    # torchtune, Llama 3.2 3B: the baseline row (25.5 GiB) is unpacked alpaca, whose lengths the
    # data decide: not expressible as a fixed shape, left out. Packed rows use flex attention's
    # block mask (no dense mask), so they are rows of 4096 tokens without --packing. torchtune's
    # TransformerDecoder upcasts the logits (`self.output(h).float()`) like transformers.
    dict(id="torchtune/llama3.2-3b/packed", source=TT_3B, url=TT_3B_URL, measures="active", published=60.0, unit="GiB",
         quote="| [+ Packed Dataset](...) | 60.0 | +135.16% | 7075 | +238.40% |",
         setup="full_finetune_single_device, torch.optim.AdamW, nn.CrossEntropyLoss on fp32 logits, no checkpointing",
         args=TT3 + ["--mode", "train"], missing=[]),
    dict(id="torchtune/llama3.2-3b/compile", source=TT_3B, url=TT_3B_URL, measures="active", published=51.0, unit="GiB",
         quote="| [+ Compile](...) | 51.0 | -14.93% | 8998 | +27.18% |",
         setup="+ compile=True (each layer and the loss compiled)",
         args=TT3 + ["--mode", "train", "--compile"],
         missing=["the logits' fp32 upcast in the model, outside the compiled loss (TransformerDecoder "
                  "`self.output(h).float()`): the compiled loss saves fp32 logits, not 16-bit ones"]),
    dict(id="torchtune/llama3.2-3b/chunked-ce", source=TT_3B, url=TT_3B_URL, measures="active", published=42.9, unit="GiB",
         quote="| [+ Chunked Cross Entropy](...) | 42.9 | -15.83% | 9174 | +1.96% |",
         setup="+ CEWithChunkedOutputLoss",
         args=TT3 + ["--mode", "train", "--loss", "chunked", "--compile"], missing=[]),
    dict(id="torchtune/llama3.2-3b/ac", source=TT_3B, url=TT_3B_URL, measures="active", published=24.9, unit="GiB",
         quote="| [+ Activation Checkpointing](...) | 24.9 | -41.93% | 7210 | -21.41% |",
         setup="+ enable_activation_checkpointing (every layer)",
         args=TT3 + ["--mode", "train", "--loss", "chunked", "--checkpointing", "--compile"], missing=[]),
    dict(id="torchtune/llama3.2-3b/optim-in-bwd", source=TT_3B, url=TT_3B_URL, measures="active", published=23.1, unit="GiB",
         quote="| [+ Fuse optimizer step into backward](...) | 23.1 | -7.29% | 7309 | +1.38% |",
         setup="+ optimizer_in_bwd=True",
         args=TT3 + ["--mode", "train", "--loss", "chunked", "--checkpointing", "--optimizer-in-backward", "--compile"],
         missing=[]),
    dict(id="torchtune/llama3.2-3b/act-offload", source=TT_3B, url=TT_3B_URL, measures="active", published=21.8, unit="GiB",
         quote="| [+ Activation Offloading](...) | 21.8 | -5.48% | 7301 | -0.11% |",
         setup="+ enable_activation_offloading=True",
         args=TT3 + ["--mode", "train", "--loss", "chunked", "--checkpointing", "--optimizer-in-backward",
                     "--activation-offload", "--compile"], missing=[]),
    dict(id="torchtune/llama3.2-3b/8bit-adamw", source=TT_3B, url=TT_3B_URL, measures="active", published=17.6, unit="GiB",
         quote="| [+ 8-bit AdamW](...) | 17.6 | -19.63% | 6960 | -4.67% |",
         setup="+ an 8-bit AdamW (bitsandbytes). Not the paged one: its state would leave PyTorch's "
               "allocator (about 12 GiB less active); the row drops 4.2 GiB, an 8-bit state in the allocator",
         args=TT3 + ["--mode", "train", "--loss", "chunked", "--checkpointing", "--optimizer-in-backward",
                     "--activation-offload", "--optimizer", "adamw-8bit", "--compile"], missing=[]),
    dict(id="torchtune/llama3.2-3b/lora", source=TT_3B, url=TT_3B_URL, measures="active", published=8.5, unit="GiB",
         quote="| [LoRA](...) | 8.5 | -51.61% | 8210 | +17.96% |",
         setup="3B_lora_single_device: rank 64 on q,v,output_proj and the MLP, AdamW fused, chunked CE, "
               "checkpointing, offloading, compile",
         args=TT3_LORA + ["--mode", "lora", "--compile"],
         missing=[]),
    # torchtune's QLoRA (torchtune/modules/peft/lora.py LoRALinear and FrozenNF4Linear over
    # torchao's NF4Tensor, torchao/dtypes/nf4tensor.py): every decoder linear is NF4 in blocks of
    # 64 (quantized_data n/2 bytes), its absmax scalers double-quantized to int8 (n/64 bytes) with
    # one bf16 factor per 256 scalers and a bf16 mean; the embeddings, norms and the (tied) output
    # stay bf16, nothing is upcast to fp32 (no peft prepare_model_for_kbit_training), and
    # linear_nf4 dequantizes one weight to bf16 per matmul in forward and backward. That is what
    # vramfit's qlora with --double-quant counts (bitsandbytes: the same n/2 + n/64 bytes, an fp32
    # factor per 256 scalers and 1 KiB of code tables per linear: 0.5 MiB more for the 3B), with
    # 16-bit non-quantized layers and one dequantized weight: the QLoRA rows lack no lever; their
    # error is the LoRA rows' (the compiled chunked loss at backward's start).
    dict(id="torchtune/llama3.2-3b/qlora", source=TT_3B, url=TT_3B_URL, measures="active", published=4.6, unit="GiB",
         quote="| [QLoRA](...) | 4.6 | -45.71% | 8035 | -2.13% |",
         setup="3B_qlora_single_device (torchao NF4, blocks of 64, scalers quantized): as the LoRA row",
         args=TT3_LORA + ["--mode", "qlora", "--double-quant", "--compile"],
         missing=[]),
    # torchtune, Llama 3.1 8B on a 24 GB 4090 (the A6000 rows set levers the README does not
    # name: left out). The README does not say which of torchtune's three peaks it prints
    # (active, allocated, reserved); compared with the allocated peak.
    dict(id="torchtune/llama3.1-8b/full-4090", source=TT_8B, url=TT_8B_URL, measures="allocated", published=18.9, unit="GiB",
         quote="| Llama 3.1 8B | Full finetune | 1x 4090 | 18.9 GiB | 1650 |",
         setup="8B_full_single_device: PagedAdamW8bit, optimizer_in_bwd, checkpointing, CEWithChunkedOutputLoss",
         args=TT8 + ["--mode", "train", "--optimizer", "paged-adamw-8bit", "--optimizer-in-backward", "--compile"],
         missing=[]),
    dict(id="torchtune/llama3.1-8b/lora-4090", source=TT_8B, url=TT_8B_URL, measures="allocated", published=16.2, unit="GiB",
         quote="| Llama 3.1 8B | LoRA | 1x 4090 |  16.2 GiB | 3083 |",
         setup="8B_lora_single_device: rank 8 on q,v, AdamW fused, checkpointing, CEWithChunkedOutputLoss",
         args=TT8 + ["--mode", "lora", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj", "--optimizer", "adamw-fused",
                     "--compile", "--lora-dtype", "bf16"],
         missing=[]),
    dict(id="torchtune/llama3.1-8b/qlora-4090", source=TT_8B, url=TT_8B_URL, measures="allocated", published=7.4, unit="GiB",
         quote="| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB | 2413  |",
         setup="8B_qlora_single_device: torchao NF4, rank 8 on q,k,v,output_proj and the MLP, AdamW fused, checkpointing",
         args=TT8 + ["--mode", "qlora", "--double-quant", "--lora-rank", "8", "--lora-targets",
                     "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", "--optimizer", "adamw-fused",
                     "--compile", "--lora-dtype", "bf16"],
         missing=[]),
    # torchtitan: fp32 sharded parameters, MixedPrecisionPolicy(bf16, reduce fp32), AdamW,
    # cross_entropy(pred.flatten(0, 1).float()) (train.py), "memory:" is max_reserved_gib.
    dict(id="torchtitan/llama3.1-8b/fsdp8", source=TITAN, url=TITAN_URL, measures="reserved", published=82.4, unit="GiB",
         quote="Table 1 ... 8 GPUs ... | FSDP | 5,762 | 82.4 |",
         setup="FSDP over 8 GPUs, eager", args=TITAN8 + ["--gpus", "8"], missing=[]),
    dict(id="torchtitan/llama3.1-8b/fsdp8-compile", source=TITAN, url=TITAN_URL, measures="reserved", published=77.0, unit="GiB",
         quote="Table 1 ... 8 GPUs ... | FSDP + torch.compile | 6,667 | 77.0 |",
         setup="FSDP over 8 GPUs, each TransformerBlock compiled (the loss eager)",
         args=TITAN8 + ["--gpus", "8", "--compile", "layers"], missing=[]),
    dict(id="torchtitan/llama3.1-8b/fsdp128", source=TITAN, url=TITAN_URL, measures="reserved", published=67.0, unit="GiB",
         quote="Table 3 ... 128 GPUs ... | FSDP | 5,605 | 67.0 |",
         setup="FSDP over 128 GPUs (16 hosts of 8), eager", args=TITAN8 + ["--gpus", "8", "--nodes", "16"], missing=[]),
    dict(id="torchtitan/llama3.1-8b/fsdp128-compile", source=TITAN, url=TITAN_URL, measures="reserved", published=62.0, unit="GiB",
         quote="Table 3 ... 128 GPUs ... | FSDP + torch.compile | 6,514 | 62.0 |",
         setup="FSDP over 128 GPUs, each TransformerBlock compiled (the loss eager)",
         args=TITAN8 + ["--gpus", "8", "--nodes", "16", "--compile", "layers"], missing=[]),
    # Unsloth's table: the longest padded context that fits each GPU. "Hugging Face + FA2" is
    # transformers + peft with flash attention and gradient checkpointing (the QLoRA default of
    # prepare_model_for_kbit_training), the model's own loss; Unsloth's column adds its offloaded
    # checkpointing and Apple's Cut Cross-Entropy. Capacities: an "80 GB" A100 has 80 GiB.
    dict(id="unsloth/llama3.1-8b/hf-fa2-80gb", source=UNSLOTH, url=UNSLOTH_URL, measures="fit", published=80, unit="GiB",
         quote="| 80 GB | 342,733 | 28,454 |  (GPU VRAM | Unsloth context length | Hugging Face + FA2)",
         setup="Hugging Face + FA2: 28,454 tokens on 80 GB",
         args=US8 + ["--seq", "28454", "--checkpointing"], missing=[]),
    dict(id="unsloth/llama3.1-8b/unsloth-80gb", source=UNSLOTH, url=UNSLOTH_URL, measures="fit", published=80, unit="GiB",
         quote="| 80 GB | 342,733 | 28,454 |",
         setup="Unsloth: 342,733 tokens on 80 GB",
         args=US8 + ["--seq", "342733"] + US_RECIPE, missing=UNSLOTH_MISSING),
    dict(id="unsloth/llama3.3-70b/hf-fa2-80gb", source=UNSLOTH, url=UNSLOTH_URL, measures="fit", published=80, unit="GiB",
         quote="| 80 GB | 89,389 | 6,916 |  (Llama 3.3 (70B) max. context length)",
         setup="Hugging Face + FA2: 6,916 tokens on 80 GB",
         args=US70 + ["--seq", "6916", "--checkpointing"], missing=[]),
    dict(id="unsloth/llama3.3-70b/unsloth-80gb", source=UNSLOTH, url=UNSLOTH_URL, measures="fit", published=80, unit="GiB",
         quote="| 80 GB | 89,389 | 6,916 |",
         setup="Unsloth: 89,389 tokens on 80 GB",
         args=US70 + ["--seq", "89389"] + US_RECIPE, missing=UNSLOTH_MISSING),
    dict(id="unsloth/llama3.3-70b/unsloth-48gb", source=UNSLOTH, url=UNSLOTH_URL, measures="fit", published=48, unit="GiB",
         quote="| 48 GB | 12,106 | OOM |",
         setup="Unsloth: 12,106 tokens on 48 GB",
         args=US70 + ["--seq", "12106"] + US_RECIPE, missing=UNSLOTH_MISSING),
    # PEFT: "memory consumed per GPU" (the device's, as a monitor shows it); GB as written.
    dict(id="peft/llama2-70b/qlora-fsdp-offload", source=PEFT, url=PEFT_URL, measures="device", published=19.6, unit="GB",
         quote="the memory consumed per GPU is **19.6 GB** while CPU RAM usage is around **107 GB**",
         setup="fsdp_offload_params: true", args=PEFT70 + ["--offload", "params"], missing=[]),
    dict(id="peft/llama2-70b/qlora-fsdp", source=PEFT, url=PEFT_URL, measures="device", published=35.6, unit="GB",
         quote="When disabling CPU offloading, the GPU memory usage is  **35.6 GB/ GPU**",
         setup="no CPU offloading", args=PEFT70, missing=[]),
]

UNITS = {"GiB": 1 << 30, "GB": 10**9}


def compared_bytes(d, measures):
    """The estimate's figure that is like the published one (see the docstring)."""
    if measures in ("active", "allocated"):
        return d["peak_allocated_bytes"]
    if measures == "reserved":
        ctx = [c for p in [d] for c in p.get("components", []) if c["id"] == "cuda_context"]
        return d["device_total_bytes"] - (ctx[0]["bytes"] if ctx else 0)
    return d["device_total_bytes"]


def main():
    vramfit = sys.argv[1] if len(sys.argv) > 1 else None
    for c in CASES:
        c = dict(c)
        c["published_bytes"] = round(c["published"] * UNITS[c["unit"]])
        if vramfit:
            out = subprocess.run([vramfit, "estimate", *c["args"], "--json"], capture_output=True, text=True)
            if out.returncode not in (0, 1):
                sys.exit(f"{c['id']}: exit {out.returncode}: {out.stderr}")
            est = compared_bytes(json.loads(out.stdout), c["measures"])
            c["estimate_bytes"] = est
            c["error"] = round(est / c["published_bytes"] - 1, 6)
        print(json.dumps(c))


if __name__ == "__main__":
    main()
