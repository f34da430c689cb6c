#!/usr/bin/env python3
"""Writes a GGUF whose tensor data is all zeros (a sparse file): llama.cpp's own buffers for a
model of any shape, no download. Usage: mk_gguf.py OUT.gguf SPEC.json
SPEC: {"arch": "llama", "n_embd":..., "n_layer":..., "n_head":..., "n_head_kv":..., "head_dim":...,
       "n_ff":..., "n_vocab":..., "ctx_train":..., "types": {"default": "Q4_K", "attn_v": "Q6_K", ...},
       "tied": false, "swa": 0, "post_norms": false}
"swa" (tokens) writes <arch>.attention.sliding_window (gemma3: every 6th layer global);
"post_norms" adds gemma's post_attention_norm and post_ffw_norm."""
import json, struct, sys, os

T = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
     "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2), "MXFP4": (39, 32, 17)}

def s(b): b = b.encode(); return struct.pack("<Q", len(b)) + b

def kv(key, typ, val):
    out = s(key) + struct.pack("<I", typ)
    if typ == 4: out += struct.pack("<I", val)
    elif typ == 6: out += struct.pack("<f", val)
    elif typ == 8: out += s(val)
    elif typ == 7: out += struct.pack("<?", val)
    else: raise ValueError(typ)
    return out

def main(path, spec):
    a = spec["arch"]; E = spec["n_embd"]; L = spec["n_layer"]; H = spec["n_head"]; KV = spec["n_head_kv"]
    D = spec.get("head_dim", E // H); F = spec["n_ff"]; V = spec["n_vocab"]; types = spec["types"]
    def ty(role): return types.get(role, types["default"])
    tensors = [("token_embd.weight", [E, V], ty("token_embd"))]
    if a == "gpt-oss":  # openai-moe.cpp: biased Q/K/V/O, sinks, a biased router and biased MXFP4 experts, no ffn_norm
        X = spec["n_expert"]; FE = spec["n_ff_exp"]
        for i in range(L):
            p = f"blk.{i}."
            tensors += [(p + "attn_norm.weight", [E], "F32"), (p + "post_attention_norm.weight", [E], "F32"),
                        (p + "attn_q.weight", [E, H * D], ty("attn_q")), (p + "attn_k.weight", [E, KV * D], ty("attn_k")),
                        (p + "attn_v.weight", [E, KV * D], ty("attn_v")), (p + "attn_q.bias", [H * D], "F32"),
                        (p + "attn_k.bias", [KV * D], "F32"), (p + "attn_v.bias", [KV * D], "F32"),
                        (p + "attn_output.weight", [H * D, E], ty("attn_output")), (p + "attn_output.bias", [E], "F32"),
                        (p + "attn_sinks.weight", [H], "F32"),
                        (p + "ffn_gate_inp.weight", [E, X], "F32"), (p + "ffn_gate_inp.bias", [X], "F32"),
                        (p + "ffn_gate_exps.weight", [E, FE, X], ty("ffn_gate_exps")), (p + "ffn_gate_exps.bias", [FE, X], "F32"),
                        (p + "ffn_up_exps.weight", [E, FE, X], ty("ffn_up_exps")), (p + "ffn_up_exps.bias", [FE, X], "F32"),
                        (p + "ffn_down_exps.weight", [FE, E, X], ty("ffn_down_exps")), (p + "ffn_down_exps.bias", [E, X], "F32")]
        L = 0  # the generic layers below are not written
    for i in range(L):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", [E], "F32"), (p + "attn_q.weight", [E, H * D], ty("attn_q")),
                    (p + "attn_k.weight", [E, KV * D], ty("attn_k")), (p + "attn_v.weight", [E, KV * D], ty("attn_v")),
                    (p + "attn_output.weight", [H * D, E], ty("attn_output"))]
        if spec.get("post_norms"):
            tensors += [(p + "post_attention_norm.weight", [E], "F32"), (p + "post_ffw_norm.weight", [E], "F32")]
        if spec.get("qk_norm"):
            tensors += [(p + "attn_q_norm.weight", [D], "F32"), (p + "attn_k_norm.weight", [D], "F32")]
        if spec.get("n_expert"):
            X = spec["n_expert"]; FE = spec["n_ff_exp"]
            tensors += [(p + "ffn_norm.weight", [E], "F32"), (p + "ffn_gate_inp.weight", [E, X], "F32"),
                        (p + "ffn_gate_exps.weight", [E, FE, X], ty("ffn_gate_exps")),
                        (p + "ffn_up_exps.weight", [E, FE, X], ty("ffn_up_exps")),
                        (p + "ffn_down_exps.weight", [FE, E, X], ty("ffn_down_exps"))]
        else:
            tensors += [(p + "ffn_norm.weight", [E], "F32"), (p + "ffn_gate.weight", [E, F], ty("ffn_gate")),
                        (p + "ffn_up.weight", [E, F], ty("ffn_up")), (p + "ffn_down.weight", [F, E], ty("ffn_down"))]
    tensors.append(("output_norm.weight", [E], "F32"))
    if not spec.get("tied"): tensors.append(("output.weight", [E, V], ty("output")))
    L = spec["n_layer"]
    kvs = [kv("general.architecture", 8, a), kv("general.name", 8, os.path.basename(path)),
           kv("general.file_type", 4, spec.get("file_type", 15)),
           kv(f"{a}.context_length", 4, spec["ctx_train"]), kv(f"{a}.embedding_length", 4, E),
           kv(f"{a}.block_count", 4, L), kv(f"{a}.feed_forward_length", 4, F), kv(f"{a}.attention.head_count", 4, H),
           kv(f"{a}.attention.head_count_kv", 4, KV), kv(f"{a}.rope.freq_base", 6, spec.get("rope_theta", 500000.0)),
           kv(f"{a}.attention.layer_norm_rms_epsilon", 6, 1e-6 if spec.get("post_norms") else 1e-5), kv(f"{a}.vocab_size", 4, V),
           kv(f"{a}.attention.key_length", 4, D), kv(f"{a}.attention.value_length", 4, D),
           kv(f"{a}.rope.dimension_count", 4, D), kv("tokenizer.ggml.model", 8, "no_vocab")]
    if spec.get("swa"):
        kvs.append(kv(f"{a}.attention.sliding_window", 4, spec["swa"]))
    if spec.get("n_expert"):
        kvs += [kv(f"{a}.expert_count", 4, spec["n_expert"]), kv(f"{a}.expert_used_count", 4, spec["n_expert_used"]),
                kv(f"{a}.expert_feed_forward_length", 4, spec["n_ff_exp"])]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off = 0; infos = b""
    for name, ne, t in tensors:
        tid, blk, tsz = T[t]
        assert ne[0] % blk == 0, (name, ne, t)
        n = 1
        for x in ne: n *= x
        nbytes = n // blk * tsz
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", tid, off)
        off += (nbytes + 31) // 32 * 32
    data = head + infos
    data += b"\0" * ((32 - len(data) % 32) % 32)
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(len(data) + off)

if __name__ == "__main__":
    main(sys.argv[1], json.load(open(sys.argv[2])))
