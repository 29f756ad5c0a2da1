#!/usr/bin/env python3
"""shipped_drafts.py: what models/family/long/README.md claims of the shipped draft-s-long, checked
against the files themselves and against numpy:
  - its safetensors header (read here, not by speclab) has draft-s-distilled's shape, tensor for
    tensor (so its step costs the same), and the target's tokenizer, byte for byte;
  - on 8 prose prompts x 32 tokens at T = 1 (seed 1, so the target writes the same text for both
    drafts: checked), the logged beta equals sum min(p, q) of the logged distributions (float32 rows:
    bound 1e-5), and draft-s-long's alpha (mean beta) is above draft-s-distilled's with the paired
    per-prompt difference more than 3 standard errors above 0 (alpha.csv's 96-prompt difference is
    +0.077 with a CI of +-0.003; on 8 prompts its standard error is about 0.005).
Run from the repository root; exit 0 = pass."""
import json, os, shutil, struct, subprocess, sys, tempfile

import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
F = "models/family"
T = tempfile.mkdtemp()
fails = 0


def check(name, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + detail))
    fails += not cond


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


long_h, dist_h, tgt_h = (header(f"{F}/{n}.safetensors") for n in ("draft-s-long", "draft-s-distilled", "target"))
shapes = lambda h: {k: (v["dtype"], v["shape"]) for k, v in h.items() if k != "__metadata__"}
check("draft-s-long has draft-s-distilled's tensors, dtypes and shapes", shapes(long_h) == shapes(dist_h),
      "%d vs %d tensors" % (len(shapes(long_h)), len(shapes(dist_h))))
tok = lambda h: h.get("__metadata__", {}).get("tokenizer")
check("draft-s-long carries the target's tokenizer byte for byte", tok(long_h) is not None and tok(long_h) == tok(tgt_h))

with open(f"{T}/p.txt", "w") as f:
    f.writelines(open("data/prompts/prose.txt").readlines()[:8])
logs = {}
for name in ("draft-s-distilled", "draft-s-long"):
    out = f"{T}/{name}.h5"
    r = subprocess.run([S, "measure", "--target", f"{F}/target.safetensors", "--draft", f"{F}/{name}.safetensors",
                        "--prompts", f"{T}/p.txt", "--tokens", "32", "--temperature", "1", "--seed", "1", "--out", out,
                        "--quiet"], capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
    if r.returncode:
        sys.exit("speclab measure %s: %s" % (name, r.stderr.strip()))
    with h5py.File(out, "r") as h:
        p, q = h["distributions/p"][:].astype(np.float64), h["distributions/q"][:].astype(np.float64)
        beta, seq, token = h["positions/beta"][:], h["positions/sequence"][:], h["positions/token"][:]
    err = np.abs(np.minimum(p, q).sum(axis=1) - beta).max()
    check(f"{name}: logged beta = sum min(p, q) of the logged rows (max |diff| {err:.2e} <= 1e-5)", err <= 1e-5)
    logs[name] = (beta, seq, token)
(b0, s0, t0), (b1, s1, t1) = logs["draft-s-distilled"], logs["draft-s-long"]
check("the target wrote the same text for both drafts", np.array_equal(t0, t1) and np.array_equal(s0, s1))
per = lambda b, s: np.bincount(s, b) / np.bincount(s)
d = per(b1, s1) - per(b0, s0)
se = d.std(ddof=1) / np.sqrt(len(d))
print(f"     alpha draft-s-distilled {b0.mean():.4f}, draft-s-long {b1.mean():.4f}; paired per-prompt difference "
      f"{d.mean():+.4f}, standard error {se:.4f}")
check("draft-s-long's alpha above draft-s-distilled's by more than 3 standard errors (paired over prompts)",
      d.mean() > 3 * se, f"{d.mean():+.4f} vs 3 x {se:.4f}")
shutil.rmtree(T)
sys.exit(1 if fails else 0)
