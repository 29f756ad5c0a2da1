#!/usr/bin/env python3
"""speclab measure/analyze against h5py + numpy: the log is readable by h5py with the documented
schema, and alpha, beta from distributions, the lenience curve, sampler-match and the replayed
acceptance per position computed here with numpy equal analyze's JSON (tolerances stated inline)."""
import json, os, subprocess, sys, tempfile
import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
fail = 0

def check(ok, what):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail = 1

with tempfile.TemporaryDirectory() as d:
    for dist in ("float32", "float16"):
        out = os.path.join(d, f"m_{dist}.h5")
        subprocess.run([S, "measure", "--synthetic", "noisy", "--vocab", "2000", "--sequences", "12", "--tokens", "50",
                        "--noise", "0.9", "--shard-sequences", "5", "--dist", dist, "--seed", "3", "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        rep = json.loads(subprocess.run([S, "analyze", out, "--format", "json", "--gamma-max", "6",
                                         "--lenience", "0.5,1"], check=True, capture_output=True, text=True).stdout)
        f = h5py.File(out, "r")
        a = f.attrs
        check(a["schema"] == b"speclab-log" and a["schema_version"] == 1 and a["kind"] == b"measure"
              and a["vocab_size"] == 2000 and a["dist"] == dist.encode() and a["seed"] == 3
              and all(k in a for k in ("target_name", "target_sha256", "draft_name", "draft_sha256", "temperature",
                                       "top_k", "top_p", "min_p", "tool_version", "source_revision", "created_utc")),
              f"{dist}: root attributes")
        beta = f["positions/beta"][:]
        seq = f["positions/sequence"][:]
        n_rows = f["sequences/n_rows"][:]
        check(beta.shape == (600,) and n_rows.sum() == 600 and f["distributions/p"].shape == (600, 2000)
              and f["distributions/p"].dtype == np.dtype(dist) and f["distributions/p"].chunks is not None
              and f["distributions/p"].compression == "gzip", f"{dist}: shapes, dtype, chunked + deflate")
        dp = f["distributions/p"]
        masks = [dp.id.read_direct_chunk((k * dp.chunks[0], 0))[0] for k in range(dp.shape[0] // dp.chunks[0])]
        # float32 probabilities deflate by < 10%: full chunks are stored raw with the deflate filter
        # masked; float16 ones deflate by more and stay compressed (LOG_SCHEMA.md, Storage).
        check(masks and all(m == (1 if dist == "float32" else 0) for m in masks), f"{dist}: chunk filter masks {masks}")
        s = rep["summary"][0]
        # alpha: the mean of the logged float64 betas; 1e-12 covers summation order only.
        check(abs(s["alpha"] - beta.mean()) < 1e-12, f"{dist}: alpha {s['alpha']!r} vs numpy {beta.mean()!r}")
        check(abs(rep["summary"][0]["d_lk_mean"] - f["positions/d_lk"][:].mean()) < 1e-12, f"{dist}: D_LK mean")
        p = f["distributions/p"][:].astype(np.float64)
        q = f["distributions/q"][:].astype(np.float64)
        o = rep["other_rules"][0]
        bd = np.minimum(p, q).sum(1).mean()
        # beta from the stored (rounded) distributions: same inputs in double, 1e-12.
        check(abs(o["beta_from_dists"] - bd) < 1e-12, f"{dist}: beta from distributions {o['beta_from_dists']!r} vs {bd!r}")
        check(abs(o["sampler_match"] - (p * q).sum(1).mean()) < 1e-12, f"{dist}: sampler-match")
        with np.errstate(divide="ignore", invalid="ignore"):
            nonit = np.where(p > 0, q / np.where(p > 0, p, 1), np.inf).min(1).mean()
        check(abs(o["nonit_rejection"] - nonit) < 1e-12, f"{dist}: non-iterative rejection")
        len_ = {r["lenience"]: r for r in rep["lenience"]}
        al = np.minimum(q, p / 0.5).sum(1).mean()
        t0 = (p[np.arange(len(p)), q.argmax(1)] >= 0.5 * p.max(1)).mean()
        check(abs(len_[0.5]["alpha_standard"] - al) < 1e-12 and abs(len_[0.5]["alpha_temperature0"] - t0) < 1e-12,
              f"{dist}: lenience at l = 0.5")
        # window replay per gamma over every window of gamma positions within each sequence
        G = 6
        U, E, W = np.zeros(G), np.zeros(G), np.zeros(G)
        start = 0
        for n in n_rows:
            b = beta[start:start + n]
            for g in range(1, G + 1):
                for t in range(n - g + 1):
                    P = np.cumprod(b[t:t + g])
                    U[g - 1] += P[-1]; E[g - 1] += 1 + P.sum(); W[g - 1] += 1
            start += n
        got = np.array([r["unconditional_replay"] for r in rep["acceptance_by_position"]])
        check(np.abs(got - U / W).max() < 1e-12, f"{dist}: unconditional acceptance per position (replay)")
        check(abs(got[0] - beta.mean()) < 1e-12, f"{dist}: replayed acceptance at position 1 is alpha")
        en = np.array([r["replay"] for r in rep["expected_tokens"]])
        check(np.abs(en - E / W).max() < 1e-12, f"{dist}: expected tokens (window replay per gamma)")
        f.close()
sys.exit(fail)
