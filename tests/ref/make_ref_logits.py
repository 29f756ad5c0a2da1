#!/usr/bin/env python3
"""Reference logits for the engine's fixture checkpoints, from an independent implementation.

Reads a speclab model (safetensors, models/FORMAT.md) by hand with struct + numpy (and, when the
`safetensors` package is importable, also with it, to check that the file is standard), runs the
whole sequence at once through plain PyTorch ops (full causal attention, no KV cache: a
different computation order from the C engine's incremental decode) in float32, and writes the
logits (n_tokens, vocab) as a safetensors file with one F32 tensor "logits" and the token ids in
the metadata ("tokens": "1,2,3").

    python3 make_ref_logits.py MODEL.safetensors OUT.safetensors [--tokens 1,2,3,...]
    python3 make_ref_logits.py --numpy ...   # the same maths in numpy when torch is missing
"""
import argparse
import json
import math
import struct
import sys

import numpy as np

DEFAULT_TOKENS = [3, 141, 59, 26, 5, 35, 89, 79, 32, 38, 46, 2, 64, 33, 83, 27, 95, 0, 28, 84, 197, 169, 39, 93]


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + hlen])
    meta = header.pop("__metadata__", {})
    base = 8 + hlen
    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": None}
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        buf = raw[base + b : base + end]
        if e["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=dtypes[e["dtype"]])
        tensors[name] = arr.reshape(e["shape"]).astype(np.float32)
    return meta, tensors


def forward(xp, T, arch, cfg, w, tokens):
    """xp: torch or numpy-like namespace wrapper; returns logits (n, vocab)."""
    d, H = cfg["d_model"], cfg["n_head"]
    Hkv = cfg.get("n_kv_head", H)
    hd = d // H
    eps = cfg.get("norm_eps", 1e-5)
    n = len(tokens)
    W = lambda k: T(w[k])

    def layernorm(x, g, b):
        mu = xp.rowmean(x)
        var = xp.rowmean((x - mu) ** 2)
        return (x - mu) / xp.sqrt(var + eps) * g + b

    def rmsnorm(x, g):
        return x / xp.sqrt(xp.rowmean(x * x) + eps) * g

    def rope(x, nh):  # x (n, nh*hd); adjacent pairs (2j, 2j+1)
        theta = cfg.get("rope_theta", 10000.0)
        j = np.arange(hd // 2, dtype=np.float64)
        ang = np.arange(n, dtype=np.float64)[:, None] * theta ** (-2.0 * j / hd)[None, :]
        c, s = T(np.cos(ang).astype(np.float32)), T(np.sin(ang).astype(np.float32))
        x = x.reshape(n, nh, hd // 2, 2)
        a, b = x[..., 0], x[..., 1]
        c, s = c[:, None, :], s[:, None, :]
        return xp.stack([a * c - b * s, a * s + b * c], -1).reshape(n, nh * hd)

    x = W("tok_emb.weight")[list(tokens)]
    if arch == "gpt2":
        x = x + W("pos_emb.weight")[:n]
    mask = T(np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1))
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}."
        lin = lambda h, k: h @ W(p + k + ".weight").T + (W(p + k + ".bias") if arch == "gpt2" else 0)
        h = (layernorm(x, W(p + "attn_norm.weight"), W(p + "attn_norm.bias")) if arch == "gpt2"
             else rmsnorm(x, W(p + "attn_norm.weight")))
        q, k, v = lin(h, "attn.q"), lin(h, "attn.k"), lin(h, "attn.v")
        if arch == "llama":
            q, k = rope(q, H), rope(k, Hkv)
        outs = []
        for hh in range(H):
            kh = hh // (H // Hkv)
            qh, kk, vv = q[:, hh * hd:(hh + 1) * hd], k[:, kh * hd:(kh + 1) * hd], v[:, kh * hd:(kh + 1) * hd]
            s = qh @ kk.T / math.sqrt(hd) + mask
            s = s - xp.rowmax(s)
            e = xp.exp(s)
            outs.append((e / xp.rowsum(e)) @ vv)
        x = x + lin(xp.cat(outs, 1), "attn.o")
        h = (layernorm(x, W(p + "mlp_norm.weight"), W(p + "mlp_norm.bias")) if arch == "gpt2"
             else rmsnorm(x, W(p + "mlp_norm.weight")))
        if arch == "gpt2":
            u = lin(h, "mlp.up")
            u = 0.5 * u * (1 + xp.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        else:
            g = lin(h, "mlp.gate")
            u = g / (1 + xp.exp(-g)) * lin(h, "mlp.up")
        x = x + lin(u, "mlp.down")
    x = (layernorm(x, W("final_norm.weight"), W("final_norm.bias")) if arch == "gpt2"
         else rmsnorm(x, W("final_norm.weight")))
    head = W("tok_emb.weight") if cfg.get("tied_embeddings", True) else W("lm_head.weight")
    return x @ head.T


class NumpyNS:
    sqrt, exp, tanh = staticmethod(np.sqrt), staticmethod(np.exp), staticmethod(np.tanh)
    stack = staticmethod(np.stack)
    cat = staticmethod(lambda xs, axis: np.concatenate(xs, axis))
    rowmean = staticmethod(lambda x: x.mean(-1, keepdims=True))
    rowsum = staticmethod(lambda x: x.sum(-1, keepdims=True))
    rowmax = staticmethod(lambda x: x.max(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    ap.add_argument("--numpy", action="store_true")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    meta, w = read_safetensors(a.model)
    try:  # the file must also be readable by the reference reader
        from safetensors.numpy import load_file
        ref = load_file(a.model)
        assert set(ref) == set(w), "safetensors package sees different tensors"
        print("safetensors package: read", len(ref), "tensors", file=sys.stderr)
    except ImportError:
        print("safetensors package: not installed, hand reader only", file=sys.stderr)
    arch, cfg = meta["arch"], json.loads(meta["config"])
    if a.numpy:
        logits = forward(NumpyNS, lambda t: t.astype(np.float32), arch, cfg, w, tokens)
        impl = "numpy float32"
    else:
        import torch

        class TorchNS:
            sqrt, exp, tanh, stack = torch.sqrt, torch.exp, torch.tanh, torch.stack
            cat = staticmethod(lambda xs, axis: torch.cat(xs, axis))
            rowmean = staticmethod(lambda x: x.mean(-1, keepdim=True))
            rowsum = staticmethod(lambda x: x.sum(-1, keepdim=True))
            rowmax = staticmethod(lambda x: x.amax(-1, keepdim=True))

        def T(t):
            return torch.from_numpy(np.ascontiguousarray(t, dtype=np.float32))

        torch.set_num_threads(1)
        with torch.no_grad():
            logits = forward(TorchNS, T, arch, cfg, w, tokens).numpy()
        impl = "torch %s float32 cpu" % torch.__version__
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    hdr = {"__metadata__": {"tokens": ",".join(map(str, tokens)), "implementation": impl, "model": a.model},
           "logits": {"dtype": "F32", "shape": list(logits.shape), "data_offsets": [0, logits.nbytes]}}
    hj = json.dumps(hdr).encode()
    hj += b" " * ((-len(hj) - 8) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + logits.tobytes())
    print(a.out, impl, logits.shape, "max |logit| %.4f" % float(np.abs(logits).max()), file=sys.stderr)


if __name__ == "__main__":
    main()
