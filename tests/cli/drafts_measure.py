#!/usr/bin/env python3
"""drafts_measure.py: `speclab measure` with an n-gram draft and a prompt-lookup draft (through
sl_lm_open): the logged q rows are the draft's distributions recomputed here from the file's
counts (bigram, Kneser-Ney) and from the generated tokens (lookup), to float32 rounding.
Run from the repository root; exit 0 = pass."""
import json, os, shutil, struct, subprocess, sys, tempfile

import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
T = tempfile.mkdtemp()
fails = 0


def check(name, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + detail))
    fails += not cond


def run(*a):
    r = subprocess.run([S, *a], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("speclab %s: %s" % (" ".join(a), r.stderr))


V = 4096
rng = np.random.default_rng(3)
ids = np.minimum(rng.zipf(1.3, 20000) - 1, V - 1).astype("<u2")
with open(T + "/c.tok", "wb") as f:
    f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", V, 2, len(ids)) + ids.tobytes())
run("model", "ngram", "--train", T + "/c.tok", "--order", "2", "--tokenizer", "models/tokenizer.json", "--out", T + "/bi.st")
run("model", "init", "--arch", "gpt2", "--config",
    '{"vocab_size":4096,"n_layer":1,"n_head":2,"d_model":32,"d_ff":64,"max_seq_len":128}',
    "--tokenizer-json", "models/tokenizer.json", "--seed", "1", "--init-std", "0.5", "--out", T + "/t.st")
with open(T + "/p.txt", "w") as f:
    f.write("The cat sat on the mat. The cat\nint main(void) { return 0; }\n")

# KN bigram from the stored counts (formula of models/README.md).
b = open(T + "/bi.st", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
cfg = json.loads(h["__metadata__"]["config"])
t = {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<i4")
     for k, v in h.items() if k != "__metadata__"}
rp, col, cnt, D, k = t["bigram.row_ptr"], t["bigram.col"], t["bigram.count"], cfg["discount"], cfg["add_k"]
cont = np.bincount(col, minlength=V)
plow = (cont + k) / (len(col) + k * V)


def bigram(v):
    c = cnt[rp[v]:rp[v + 1]]
    if c.sum() == 0:
        return plow
    q = D * len(c) / c.sum() * plow
    q[col[rp[v]:rp[v + 1]]] += (c - D) / c.sum()
    return q


def lookup(hist, N, eps):
    q = np.full(V, eps / V)
    for m in range(min(N, len(hist) - 1), 0, -1):
        for j in range(len(hist) - m - 1, -1, -1):
            if hist[j:j + m] == hist[len(hist) - m:]:
                q[hist[j + m]] += 1 - eps
                return q
    return np.full(V, 1.0 / V)


for spec in (T + "/bi.st", "lookup:2:0.2"):
    out = T + "/m%d.h5" % len(spec)
    run("measure", "--target", T + "/t.st", "--draft", spec, "--prompts", T + "/p.txt", "--tokens", "40", "--out", out)
    f = h5py.File(out, "r")
    q = f["distributions/q"][:].astype(np.float64)
    tok = f["positions/token"][:]
    seq = f["positions/sequence"][:]
    npt = f["sequences/n_prompt_tokens"][:]
    prompts = f["prompts/tokens"][:]
    err, start = 0.0, 0
    for s in range(len(npt)):
        prompt = list(prompts[start:start + npt[s]])
        start += npt[s]
        rows = np.nonzero(seq == s)[0]
        hist = prompt[:]
        for r in rows:
            ref = bigram(hist[-1]) if spec.endswith(".st") else lookup(hist, 2, 0.2)
            err = max(err, np.abs(q[r] - ref).max())
            hist.append(int(tok[r]))
    # float32 storage: relative rounding 2^-24 of values <= 1
    check("measure with draft %s: logged q = recomputed q (max error %.2g)" % (spec, err), err < 2 ** -23)
    check("measure with draft %s: q rows sum to 1" % spec, np.abs(q.sum(1) - 1).max() < V * 2 ** -24)
    f.close()
shutil.rmtree(T)
sys.exit(1 if fails else 0)
