#!/usr/bin/env python3
"""drafts_ref.py: speclab's n-gram and prompt-lookup drafts against an independent numpy
computation: counts read from the safetensors file against a naive count of the token files,
the smoothed distributions (formulas of models/README.md recomputed here from the counts), and
`speclab eval` nats per token against a direct Python loop over the validation tokens.
Also `speclab eval` against the trainer's own val_ce on a small trained model.
Run from the repository root; exit 0 = pass."""
import json, math, os, shutil, struct, subprocess, sys, tempfile

import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
fails = 0


def check(name, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + detail))
    fails += not cond


def write_tok(path, ids, V):
    with open(path, "wb") as f:
        f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", V, 2, len(ids)) + np.asarray(ids, "<u2").tobytes())


def read_st(path):
    """safetensors by hand: u64 header length, JSON header, data."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "I32", v
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[base + s:base + e], "<i4").reshape(v["shape"])
    return h["__metadata__"], out


def run(*args):
    r = subprocess.run([S, *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("speclab %s failed: %s" % (" ".join(args), r.stderr))
    return r.stdout


def evaluate(spec, tok, ctx=None):
    a = ["eval", "--model", spec, "--tokens", tok, "--format", "json"]
    if ctx:
        a += ["--context", str(ctx)]
    return json.loads(run(*a))[0]


rng = np.random.default_rng(7)
V = 300
T = tempfile.mkdtemp()
# Zipf-ish ids in [0, 60): most of the 300 ids never occur, so smoothing matters.
def corpus(n):
    return list(np.minimum(rng.zipf(1.5, n) - 1, 59) + rng.integers(0, 2, n) * 60 // 2)
a, b, va = corpus(3000), corpus(1500), corpus(800)
write_tok(T + "/a.tok", a, V)
write_tok(T + "/b.tok", b, V)
write_tok(T + "/va.tok", va, V)

# ---- naive counts ----
uni = np.zeros(V, np.int64)
big = np.zeros((V, V), np.int64)
for seq in (a, b):
    for x in seq:
        uni[x] += 1
    for x, y in zip(seq[:-1], seq[1:]):  # bigrams stay inside one file
        big[x, y] += 1
N = uni.sum()

for order, sm in ((1, "addk"), (2, "kn"), (2, "absdisc")):
    out = "%s/m%d%s.st" % (T, order, sm)
    run("model", "ngram", "--train", T + "/a.tok", T + "/b.tok", "--order", str(order), "--smoothing", sm,
        "--vocab", str(V), "--add-k", "0.5", "--out", out)
    meta, t = read_st(out)
    cfg = json.loads(meta["config"])
    check("%s arch ngram, order %d" % (sm, order), meta["arch"] == "ngram" and cfg["order"] == order)
    check("%s unigram counts = naive count" % sm, np.array_equal(t["unigram.count"], uni))
    k = cfg["add_k"]
    p1 = (uni + k) / (N + k * V)
    if order == 1:
        P = np.tile(p1, (V, 1))
    else:
        rp, col, cnt = t["bigram.row_ptr"], t["bigram.col"], t["bigram.count"]
        dense = np.zeros((V, V), np.int64)
        for v in range(V):
            cs = col[rp[v]:rp[v + 1]]
            check_sorted = np.all(np.diff(cs) > 0)
            if not check_sorted:
                check("columns ascending in row %d" % v, False)
            dense[v, cs] = cnt[rp[v]:rp[v + 1]]
        check("%s bigram counts = naive count (CSR)" % sm, np.array_equal(dense, big))
        n1, n2 = (big == 1).sum(), (big == 2).sum()
        D = n1 / (n1 + 2 * n2)
        check("%s discount n1/(n1+2n2) = %.6f" % (sm, D), abs(cfg["discount"] - D) < 1e-15, str(cfg["discount"]))
        if sm == "kn":
            cont = (big > 0).sum(axis=0)
            plow = (cont + k) / ((big > 0).sum() + k * V)
        else:
            plow = p1
        c = big.sum(axis=1)
        P = np.empty((V, V))
        for v in range(V):
            if c[v] == 0:
                P[v] = plow
            else:
                P[v] = np.maximum(big[v] - D, 0) / c[v] + D * (big[v] > 0).sum() / c[v] * plow
    check("%s reference rows sum to 1" % sm, np.allclose(P.sum(axis=1), 1, atol=1e-12))
    # nats per token over the validation file: every token after the first, given its predecessor.
    ref = -np.mean([math.log(P[x, y]) for x, y in zip(va[:-1], va[1:])])
    got = evaluate(out, T + "/va.tok")
    # 1e-12 relative: the same doubles summed in a different order.
    check("%s eval nats/token %.12f = python %.12f" % (sm, got["nats_per_token"], ref),
          abs(got["nats_per_token"] - ref) < 1e-12 * ref and got["tokens_scored"] == len(va) - 1)
    if order == 1:
        P1 = p1


# ---- prompt lookup, windows of 50 tokens, unigram fallback ----
def lookup_q(h, n_max, eps, f):
    q = f.copy()
    for m in range(min(n_max, len(h) - 1), 0, -1):
        suf = h[len(h) - m:]
        for j in range(len(h) - m - 1, -1, -1):
            if h[j:j + m] == suf:
                q = eps * f
                q[h[j + m]] += 1 - eps
                return q
    return q


uni_file = T + "/m1addk.st"
for spec, f in (("lookup:3:0.25:" + uni_file, P1), ("lookup:2", np.full(V, 1 / V))):
    C = 50
    nll, scored = 0.0, 0
    for s in range(0, len(va) - 1, C):
        w = va[s:min(s + C, len(va) - 1) + 1]
        for j in range(1, len(w)):
            nll -= math.log(lookup_q(w[:j], int(spec.split(":")[1]), 0.25 if "0.25" in spec else 0.1, f)[w[j]])
            scored += 1
    # lookup:2 has no file: its vocabulary comes from the token file.
    got = evaluate(spec, T + "/va.tok", C)
    check("%s eval (windows of %d) %.12f = python %.12f" % (spec, C, got["nats_per_token"], nll / scored),
          abs(got["nats_per_token"] - nll / scored) < 1e-12 * nll / scored and got["tokens_scored"] == scored)

# ---- the same lookup draft as a file (speclab model lookup) gives the same numbers ----
run("model", "lookup", "--n", "3", "--epsilon", "0.25", "--fallback", T + "/m2kn.st", "--out", T + "/lk.st")
a = evaluate(T + "/lk.st", T + "/va.tok", 50)
b = evaluate("lookup:3:0.25:" + uni_file, T + "/va.tok", 50)
check("lookup file = lookup spec (%.15f)" % a["nats_per_token"], a["nats_per_token"] == b["nats_per_token"] and a["kind"] == "lookup")
info = json.loads(run("model", "info", T + "/lk.st", "--format", "json"))[0]
check("model info of a lookup file", info["arch"] == "lookup" and info["lookup_n"] == 3 and info["lookup_epsilon"] == 0.25)

# ---- eval against the trainer's val_ce ----
pat = [int(x) for x in rng.integers(0, 64, 29)]
ids = pat * 300
for i in range(0, len(ids), 7):
    ids[i] = int(rng.integers(0, 64))
write_tok(T + "/tr.tok", ids, 64)
write_tok(T + "/tv.tok", (pat * 20)[3:], 64)
cfg = '{"n_layer":2,"n_head":2,"d_model":32,"d_ff":64,"max_seq_len":16,"vocab_size":64}'
run("train", "--train", T + "/tr.tok", "--valid", T + "/tv.tok", "--batch", "8", "--seq", "16", "--lr", "3e-3",
    "--warmup", "5", "--seed", "9", "--eval-batches", "2", "--config", cfg, "--steps", "30", "--eval-every", "30",
    "--out", T + "/m.st")
b = open(T + "/m.st", "rb").read()
hdr = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
val_ce = json.loads(hdr["__metadata__"]["training"])["val_ce"]
got = json.loads(run("eval", "--model", T + "/m.st", "--tokens", T + "/tv.tok", "--windows", "16", "--context", "16",
                     "--format", "json"))[0]
# 1e-6: the trainer and the engine are different float32 code paths (sums in other orders).
check("eval %.9f = trainer val_ce %.9f (16 windows of 16)" % (got["nats_per_token"], val_ce),
      abs(got["nats_per_token"] - val_ce) < 1e-6 and got["tokens_scored"] == 256)
shutil.rmtree(T)
sys.exit(1 if fails else 0)
