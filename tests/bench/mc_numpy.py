#!/usr/bin/python3
"""The experiment of tests/bench/bench_mc.c, vectorised in numpy: speculative steps per second of
Algorithm 1 on the Zipf pair (s = 1.1, temperatures 1 and 1.3), gamma = 4, V = 256, 4096, 50257,
single thread. Draws are inverse-CDF lookups (np.searchsorted on precomputed CDFs: O(log V) each
after the O(V) set-up), batched over iterations. Usage: mc_numpy.py [--tsv | --info] [--vocab V] [iterations]"""
import ctypes
import os
import sys
import time

import numpy as np

tsv = "--tsv" in sys.argv
info_only = "--info" in sys.argv
argv = sys.argv[1:]
only_v = None
if "--vocab" in argv:
    i = argv.index("--vocab")
    only_v = int(argv[i + 1])
    del argv[i:i + 2]
args = [a for a in argv if a not in ("--tsv", "--info")]
iterations = int(args[0]) if args else 1000000
GAMMA, BATCH = 4, 100000


def blas_info():
    """Which BLAS numpy loaded and, for OpenBLAS, its build config and kernel (core)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "blas" in line or "lapack" in line:
                libs.add(line.split()[-1])
    out = []
    for lib in sorted(libs):
        try:
            h = ctypes.CDLL(lib)
            h.openblas_get_config.restype = ctypes.c_char_p
            h.openblas_get_corename.restype = ctypes.c_char_p
            out.append(f"{lib}: {h.openblas_get_config().decode()}, kernel {h.openblas_get_corename().decode()}")
        except (OSError, AttributeError):
            out.append(lib)
    return "; ".join(out) or "no BLAS library mapped"


def zipf(V, s, temp):
    p = (np.arange(V, dtype=np.float64) + 1) ** (-s / temp)
    return p / p.sum()


def cdf(p):
    c = np.cumsum(p)
    c[-1] = 1.0
    return c


def run(V, rng):
    t0 = time.perf_counter()
    p, q = zipf(V, 1.1, 1.0), zipf(V, 1.1, 1.3)
    res = np.maximum(p - q, 0)
    res /= res.sum()
    cp, cq, cr = cdf(p), cdf(q), cdf(res)
    setup = time.perf_counter() - t0
    tokens = 0
    t1 = time.perf_counter()
    done = 0
    while done < iterations:
        B = min(BATCH, iterations - done)
        x = np.minimum(np.searchsorted(cq, rng.random((B, GAMMA)), side="right"), V - 1)  # drafts
        accept = rng.random((B, GAMMA)) < p[x] / q[x]
        rejected = ~accept
        has_rej = rejected.any(axis=1)
        n_acc = np.where(has_rej, rejected.argmax(axis=1), GAMMA)
        n_rej = int(has_rej.sum())
        last = np.empty(B, dtype=np.int64)
        last[has_rej] = np.minimum(np.searchsorted(cr, rng.random(n_rej), side="right"), V - 1)
        last[~has_rej] = np.minimum(np.searchsorted(cp, rng.random(B - n_rej), side="right"), V - 1)
        tokens += int(n_acc.sum()) + B
        done += B
    run_s = time.perf_counter() - t1
    beta = np.minimum(p, q).sum()
    theory = (1 - beta ** (GAMMA + 1)) / (1 - beta)
    return setup, iterations / run_s, tokens / iterations, theory


if not tsv:
    print(f"numpy {np.__version__}; BLAS: {blas_info()}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}")
    if info_only:
        sys.exit(0)
    print(f"{'V':>8} {'setup_s':>12} {'steps_per_s':>14} {'tokens/it':>12} {'theory':>12}")
rng = np.random.default_rng(42)
for V in (256, 4096, 50257):
    if only_v is not None and V != only_v:
        continue
    setup, steps, mean, theory = run(V, rng)
    if tsv:
        print(f"{V}\t{setup:.6f}\t{steps:.1f}\t{mean:.6f}\t{theory:.6f}")
    else:
        print(f"{V:>8} {setup:>12.4f} {steps:>14.0f} {mean:>12.4f} {theory:>12.4f}")
