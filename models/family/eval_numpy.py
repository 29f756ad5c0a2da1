#!/usr/bin/env python3
"""eval_numpy.py [MODEL ...]: validation bits per token (and per byte) of shipped models recomputed by
an independent implementation, tests/ref/make_ref_logits.py's forward pass (the whole window at once
in numpy float32, full causal attention, no KV cache), on the windows that `speclab eval --windows 64
--context 256` scores (eval_family.sh), next to `speclab eval` run now at full precision (SPECLAB,
default build/speclab; models/family/eval.csv rounds to 4 decimals). Default model: the target.
One line per model and domain; exit 1 if any differs by more than 1e-5 bits per token: both are
means of 16 384 log-probabilities from float32 passes in different orders (incremental KV-cache
decode with f16 weights widened in the kernel vs whole-window numpy matmuls), whose per-token
differences are ~1e-6 relative."""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
from make_ref_logits import NumpyNS, forward, read_safetensors  # noqa: E402

K, C, TOL = 64, 256, 1e-5


def fail(msg):
    print("eval_numpy: " + msg, file=sys.stderr)
    sys.exit(2)


def read_tok(path):
    try:
        b = open(path, "rb").read()
    except OSError as e:
        fail("%s: %s (data/fetch.sh and data/tokenize.sh make it)" % (path, e.strerror))
    if b[:8] != b"SLTOK\0\0\1":
        fail("%s is not a token file" % path)
    _, bpi, n = struct.unpack("<IIQ", b[8:24])
    return np.frombuffer(b[24:24 + n * bpi], dtype="<u2" if bpi == 2 else "<u4").astype(np.int64)


def bits_per_token(meta, w, toks):
    cfg = json.loads(meta["config"])
    n, total = len(toks), 0.0
    for k in range(K):
        o = k * (n - C - 1) // (K - 1)
        x, y = toks[o:o + C], toks[o + 1:o + C + 1]
        z = forward(NumpyNS, lambda t: t.astype(np.float32), meta["arch"], cfg, w, x).astype(np.float64)
        z -= z.max(1, keepdims=True)
        total -= (z[np.arange(C), y] - np.log(np.exp(z).sum(1))).sum()
    return total / (K * C) / math.log(2)


def main():
    S = os.environ.get("SPECLAB", os.path.join(ROOT, "build", "speclab"))
    bad = 0
    for m in sys.argv[1:] or ["target"]:
        path = os.path.join(HERE, m + ".safetensors")
        if not os.path.isfile(path):
            fail("no shipped model %s (%s)" % (m, path))
        meta, w = read_safetensors(path)
        for d in ("prose", "code"):
            tok = os.path.join(ROOT, "data", "corpus", d + ".valid.tok")
            txt = os.path.join(ROOT, "data", "corpus", d + ".valid.txt")
            toks = read_tok(tok)
            bpt = bits_per_token(meta, w, toks)
            bpb = bpt * len(toks) / os.path.getsize(txt)
            r = json.loads(subprocess.run([S, "eval", "--model", path, "--tokens", tok, "--text", txt, "--context", str(C),
                                           "--windows", str(K), "--format", "json"], check=True, capture_output=True,
                                          env=dict(os.environ, OMP_NUM_THREADS="1")).stdout)[0]
            diff = abs(bpt - r["bits_per_token"])
            ok = diff <= TOL
            bad += not ok
            print("%-4s %-10s %-6s numpy %.6f bits/token (%.6f bits/byte); speclab eval %.6f (%.6f); |diff| %.1e"
                  % ("ok" if ok else "FAIL", m, d, bpt, bpb, r["bits_per_token"], r["bits_per_byte"], diff))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
