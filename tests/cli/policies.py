#!/usr/bin/env python3
"""Dynamic-gamma replay of speclab analyze against an independent numpy/Python replay of the same
model (analysis/DYNAMIC_GAMMA.md) on the same log, with its own random numbers: best fixed gamma,
the oracle (dynamic programme), llama.cpp's p_min and transformers' +2/-1 schedule. Each side
replays 40 sequences x 100 positions x 20 replications (80000 positions); a factor moves by about
0.4% (sd) from one seed to another, so they must agree within 2% (with 200 replications both sides
agree within 0.15%)."""
import json, os, subprocess, sys, tempfile
import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
G, C, REPS = 8, 0.05, 20
fail = 0

def check(ok, what):
    global fail
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fail = 1

def step(acc, t, g, steps, tot):
    k = 0
    while k < g and acc[t + k]:
        k += 1
    tot[0] += k + 1; tot[1] += steps; tot[2] += 1.0  # tokens, draft steps, verify cost (v == 1)
    return k + 1

def fixed(acc, n, g, tot):
    t = 0
    while t < n:
        t += step(acc, t, min(g, n - 1 - t), min(g, n - 1 - t), tot)

def oracle(acc, n, tot):
    Cc = np.zeros(n + 1)
    run = np.zeros(n + 1, dtype=int)
    for t in range(n - 1, -1, -1):
        run[t] = run[t + 1] + 1 if acc[t] else 0
        gm = min(run[t], G, n - 1 - t)
        Cc[t] = min(g * C + 1 + Cc[t + g + 1] for g in range(gm + 1))
    t = 0
    while t < n:
        gm = min(run[t], G, n - 1 - t)
        g = min(range(gm + 1), key=lambda g: (g * C + 1 + Cc[t + g + 1], g))
        t += step(acc, t, g, g, tot)

def pmin(acc, qm, n, th, tot):
    t = 0
    while t < n:
        cap, g = min(G, n - 1 - t), 0
        while g < cap and qm[t + g] >= th:
            g += 1
        t += step(acc, t, g, g + (1 if g < cap else 0), tot)

def hf(acc, n, tot):
    na, t = 5, 0
    while t < n:
        g = min(na, G, n - 1 - t)
        e = step(acc, t, g, g, tot)
        na = na + 2 if (g > 0 and e == g + 1) else max(1, na - 1)
        na = min(na, G)
        t += e

with tempfile.TemporaryDirectory() as d:
    m = os.path.join(d, "m.h5")
    subprocess.run([S, "measure", "--synthetic", "tempered", "--draft-temperature", "1.2", "--vocab", "64",
                    "--temperature", "0.7", "--sequences", "40", "--tokens", "100", "--dist", "none", "--out", m],
                   check=True, stdout=subprocess.DEVNULL)
    rep = json.loads(subprocess.run([S, "analyze", m, "--gamma-max", str(G), "--reps", str(REPS), "--c", str(C),
                                     "--p-min", "0.3", "--format", "json"], check=True, capture_output=True, text=True).stdout)
    ours = {(r["policy"], r["param"]): r["walltime_factor"] for r in rep["dynamic_gamma"] if r["c"] == C}
    f = h5py.File(m, "r")
    beta, qmax, n_rows = f["positions/beta"][:], f["positions/q_max"][:], f["sequences/n_rows"][:]
    rng = np.random.default_rng(12345)
    tots = {k: [0.0, 0.0, 0.0] for k in ["oracle", "pmin", "hf"] + [f"fixed{g}" for g in range(1, G + 1)]}
    start = 0
    for n in n_rows:
        b, q = beta[start:start + n], qmax[start:start + n]
        start += n
        for _ in range(REPS):
            acc = rng.random(n) < b
            for g in range(1, G + 1):
                fixed(acc, n, g, tots[f"fixed{g}"])
            oracle(acc, n, tots["oracle"])
            pmin(acc, q, n, 0.3, tots["pmin"])
            hf(acc, n, tots["hf"])
    fac = {k: v[0] / (v[1] * C + v[2]) for k, v in tots.items()}
    best_g = max(range(1, G + 1), key=lambda g: fac[f"fixed{g}"])
    ours_best = [v for (p, _), v in ours.items() if p == "fixed_best"][0]
    for name, mine, theirs in [("best fixed gamma", ours_best, fac[f"fixed{best_g}"]),
                               ("oracle", ours[("oracle", None)], fac["oracle"]),
                               ("p_min 0.3", ours[("p_min", 0.3)], fac["pmin"]),
                               ("hf +2/-1", ours[("hf_schedule", 5)], fac["hf"])]:
        check(abs(mine / theirs - 1) < 0.02, f"{name}: speclab {mine:.4f}, numpy {theirs:.4f}")
    check(ours[("oracle", None)] >= ours_best, "the oracle bounds the best fixed gamma")
sys.exit(fail)
