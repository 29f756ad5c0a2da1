"""train_export_numpy.py: the trainer's exported model, read by an independent reader.

Trains two tiny models with `speclab train` (tied and untied embeddings, f32 and f16), parses the
safetensors file with plain json + numpy (no speclab code), checks the tensor names and shapes
against models/FORMAT.md, runs a numpy GPT-2 forward written from FORMAT.md's semantics on the
validation windows the trainer uses, and compares the cross-entropy with the trainer's logged
val_ce. A wrong tensor name, a transposed weight, a q/k/v mix-up or a semantic difference (norm
eps, GELU form, attention scale) would change the loss well beyond the tolerance.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

SPECLAB = os.environ.get("SPECLAB", "build/speclab")


def write_tok(path, ids, vocab):
    with open(path, "wb") as f:
        f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", vocab, 2, len(ids)))
        f.write(np.asarray(ids, dtype="<u2").tobytes())


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    meta = header.pop("__metadata__")
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        dt = {"F32": "<f4", "F16": "<f2"}[t["dtype"]]
        tensors[name] = np.frombuffer(data[a:b], dtype=dt).astype(np.float64).reshape(t["shape"])
    return meta, tensors


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def forward(cfg, W, ids):
    T = len(ids)
    C, H = cfg["d_model"], cfg["n_head"]
    hs = C // H
    eps = cfg["norm_eps"]
    x = W["tok_emb.weight"][ids] + W["pos_emb.weight"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(cfg["n_layer"]):
        p = f"layers.{l}."
        h = layernorm(x, W[p + "attn_norm.weight"], W[p + "attn_norm.bias"], eps)
        q = h @ W[p + "attn.q.weight"].T + W[p + "attn.q.bias"]
        k = h @ W[p + "attn.k.weight"].T + W[p + "attn.k.bias"]
        v = h @ W[p + "attn.v.weight"].T + W[p + "attn.v.bias"]
        y = np.zeros_like(q)
        for hd in range(H):
            sl = slice(hd * hs, (hd + 1) * hs)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(hs)
            s[mask] = -np.inf
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            y[:, sl] = s @ v[:, sl]
        x = x + y @ W[p + "attn.o.weight"].T + W[p + "attn.o.bias"]
        h = layernorm(x, W[p + "mlp_norm.weight"], W[p + "mlp_norm.bias"], eps)
        u = gelu(h @ W[p + "mlp.up.weight"].T + W[p + "mlp.up.bias"])
        x = x + u @ W[p + "mlp.down.weight"].T + W[p + "mlp.down.bias"]
    h = layernorm(x, W["final_norm.weight"], W["final_norm.bias"], eps)
    U = W["tok_emb.weight"] if cfg["tied_embeddings"] else W["lm_head.weight"]
    return h @ U.T


def expected_shapes(cfg):
    V, C, F, L = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["n_layer"]
    s = {"tok_emb.weight": [V, C], "pos_emb.weight": [cfg["max_seq_len"], C],
         "final_norm.weight": [C], "final_norm.bias": [C]}
    for l in range(L):
        p = f"layers.{l}."
        for n in ("attn_norm", "mlp_norm"):
            s[p + n + ".weight"] = [C]
            s[p + n + ".bias"] = [C]
        for n in "qkvo":
            s[p + f"attn.{n}.weight"] = [C, C]
            s[p + f"attn.{n}.bias"] = [C]
        s[p + "mlp.up.weight"], s[p + "mlp.up.bias"] = [F, C], [F]
        s[p + "mlp.down.weight"], s[p + "mlp.down.bias"] = [C, F], [C]
    if not cfg["tied_embeddings"]:
        s["lm_head.weight"] = [V, C]
    return s


def check(tmp, tied, dtype):
    rng = np.random.default_rng(7)
    V, T, B, NB = 48, 12, 4, 3
    pattern = rng.integers(0, V, 31)
    ids = np.concatenate([pattern] * 60)
    ids[rng.integers(0, len(ids), 200)] = rng.integers(0, V, 200)  # noise, so the loss stays O(1)
    write_tok(f"{tmp}/train.tok", ids, V)
    valid = np.concatenate([pattern] * 6)
    write_tok(f"{tmp}/valid.tok", valid, V)
    cfg = {"n_layer": 2, "n_head": 2, "d_model": 24, "d_ff": 40, "max_seq_len": 16, "vocab_size": V,
           "norm_eps": 1e-4, "tied_embeddings": tied}
    out = f"{tmp}/m_{tied}_{dtype}.safetensors"
    r = subprocess.run([SPECLAB, "train", "--train", f"{tmp}/train.tok", "--valid", f"{tmp}/valid.tok",
                        "--config", json.dumps(cfg), "--steps", "40", "--batch", str(B), "--seq", str(T),
                        "--lr", "3e-3", "--warmup", "5", "--seed", "3", "--eval-every", "40",
                        "--eval-batches", str(NB), "--out", out, "--dtype", dtype],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    row = r.stdout.strip().splitlines()[-1].split(",")
    logged_ce = float(row[5])

    meta, W = read_safetensors(out)
    assert meta["format"] == "speclab-model" and meta["format_version"] == "1" and meta["arch"] == "gpt2", meta
    mcfg = json.loads(meta["config"])
    for k, v in cfg.items():
        assert mcfg[k] == v or abs(mcfg[k] - v) < 1e-9 * abs(v), (k, mcfg[k], v)
    assert mcfg["n_kv_head"] == cfg["n_head"]
    training = json.loads(meta["training"])
    assert training["seed"] == 3 and training["tokens_seen"] == 40 * B * T, training
    shapes = expected_shapes(cfg)
    assert {k: list(v.shape) for k, v in W.items()} == shapes, "tensor names/shapes differ from FORMAT.md"

    # The trainer's validation windows: evenly spaced offsets floor(last * w / (n - 1)).
    last = len(valid) - T - 1
    nw = NB * B
    total = 0.0
    for w in range(nw):
        off = int(math.floor(last * w / (nw - 1)))
        z = forward(mcfg, W, valid[off : off + T])
        z = z - z.max(-1, keepdims=True)
        lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        total += -lp[np.arange(T), valid[off + 1 : off + T + 1]].mean()
    ce = total / nw
    # f32: the trainer's float32 forward vs this float64 one, plus the log's 6 decimals: 1e-4.
    # f16: the exported weights are rounded (relative 2^-11) while the log was computed in f32; the
    # loss moves by ~1e-5 here, 1e-3 leaves room and still catches any layout mistake (O(1) changes).
    tol = 1e-4 if dtype == "f32" else 1e-3
    print(f"tied={tied} {dtype}: logged val_ce {logged_ce:.6f}, numpy {ce:.6f}, |diff| {abs(ce - logged_ce):.2e}")
    assert abs(ce - logged_ce) <= tol, (ce, logged_ce)
    assert 0.05 < ce < math.log(V), ce  # trained, not degenerate


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check(tmp, True, "f32")
        check(tmp, False, "f32")
        check(tmp, True, "f16")
    print("train_export_numpy: ok")


if __name__ == "__main__":
    sys.exit(main())
