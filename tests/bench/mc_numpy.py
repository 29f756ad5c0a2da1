#!/usr/bin/python3
"""The experiment of tests/bench/bench_mc.c, vectorised in numpy: speculative steps per second of
Algorithm 1 on the Zipf pair (s = 1.1, temperatures 1 and 1.3), gamma = 4, V = 256, 4096, 50257,
single thread, batched over iterations. The timed loop runs three times in the process and the
fastest run counts (bench_mc.c does the same).

Two ways to draw a token, both after an O(V) set-up that is not timed:
  --method alias (default): Walker/Vose alias tables, the C loop's algorithm: O(1) per draw (one
      uniform, a floor, two gathers and a select), so the comparison is of implementations, not of
      algorithms. Acceptance thresholds p/q are a precomputed table, as in C.
  --method cdf: inverse-CDF lookups (np.searchsorted on cumulative sums, what Generator.choice does):
      O(log V) per draw with cache-unfriendly binary searches, about 3x slower than alias here.
Batches of 4096 iterations keep the working arrays in cache (faster than larger batches for alias,
no slower for cdf). Time is the process's CPU time (time.process_time), as in bench_mc.c: on a
shared machine wall-clock time also counts time the scheduler gave to other processes.
Usage: mc_numpy.py [--tsv | --info] [--method alias|cdf] [--vocab V] [iterations]"""
import ctypes
import os
import sys
import time

import numpy as np

tsv = "--tsv" in sys.argv
info_only = "--info" in sys.argv
argv = sys.argv[1:]
only_v = None
method = "alias"
for opt in ("--vocab", "--method"):
    if opt in argv:
        i = argv.index(opt)
        if opt == "--vocab":
            only_v = int(argv[i + 1])
        else:
            method = argv[i + 1]
        del argv[i:i + 2]
if method not in ("alias", "cdf"):
    sys.exit(f"mc_numpy.py: --method {method}, expected alias or cdf")
args = [a for a in argv if a not in ("--tsv", "--info")]
iterations = int(args[0]) if args else 1000000
GAMMA, BATCH = 4, 4096
REPEAT = 3  # timed runs per process, the fastest counts (see run)


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


class Cdf:
    def __init__(self, p):
        self.c = np.cumsum(p)
        self.c[-1] = 1.0
        self.V = len(p)

    def draw(self, u):
        return np.minimum(np.searchsorted(self.c, u, side="right"), self.V - 1)


class Alias:
    """Vose's method, as sl_alias_build: columns of scaled mass < 1 are topped up by large ones."""

    def __init__(self, p):
        V = len(p)
        prob = p / p.sum() * V
        alias = np.arange(V)
        small = [int(i) for i in np.flatnonzero(prob < 1)]
        large = [int(i) for i in np.flatnonzero(prob >= 1)]
        prob = prob.tolist()
        while small and large:
            s, l = small.pop(), large[-1]
            alias[s] = l
            prob[l] = (prob[l] + prob[s]) - 1.0
            if prob[l] < 1:
                large.pop()
                small.append(l)
        prob = np.array(prob)
        prob[large] = 1.0
        prob[[s for s in small if p[s] > 0]] = 1.0
        self.prob, self.alias, self.V = prob, alias, V

    def draw(self, u):
        x = u * self.V
        col = x.astype(np.intp)
        np.minimum(col, self.V - 1, out=col)
        return np.where(x - col < self.prob[col], col, self.alias[col])


def run(V, rng):
    t0 = time.process_time()
    p, q = zipf(V, 1.1, 1.0), zipf(V, 1.1, 1.3)
    T = Alias if method == "alias" else Cdf
    tq = T(q)  # p's and the residual's tables would serve the emitted token, which is not drawn
    thr = p / q  # acceptance threshold of every token (q > 0 everywhere for this pair)
    setup = time.process_time() - t0
    # The timed loop runs REPEAT times (the streams go on), and the fastest counts, as in bench_mc.c:
    # this VM's speed moves between phases ~25% apart that last seconds, and a single short run is as
    # likely to land in a slow one as not. tokens/it is the first run's.
    run_s, first_tokens = float("inf"), None
    for _ in range(REPEAT):
        tokens = 0
        t1 = time.process_time()
        done = 0
        while done < iterations:
            B = min(BATCH, iterations - done)
            x = tq.draw(rng.random((B, GAMMA)))  # drafts
            rejected = rng.random((B, GAMMA)) >= thr[x]
            has_rej = rejected.any(axis=1)
            n_acc = np.where(has_rej, rejected.argmax(axis=1), GAMMA)
            # The residual (after the first rejection) or bonus token is not drawn: the count of
            # emitted tokens does not depend on it, and the C loop (`speclab mc`) skips it too.
            tokens += int(n_acc.sum()) + B
            done += B
        run_s = min(run_s, time.process_time() - t1)
        first_tokens = tokens if first_tokens is None else first_tokens
    tokens = first_tokens
    beta = np.minimum(p, q).sum()
    theory = (1 - beta ** (GAMMA + 1)) / (1 - beta)
    return setup, iterations / run_s, tokens / iterations, theory


if not tsv:
    print(f"numpy {np.__version__}; BLAS: {blas_info()}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}")
    if info_only:
        sys.exit(0)
    print(f"method {method}")
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
