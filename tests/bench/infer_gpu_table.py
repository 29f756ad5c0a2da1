#!/usr/bin/env python3
"""infer_gpu_table.py: the tables of models/GPU_INFERENCE.md from the committed device results.

usage: python3 tests/bench/infer_gpu_table.py [RESULTS_DIR...]
(default: the sweeps of tests/bench/results/infer_gpu_h200_run12/ to run16/, the backend as it is
now, with products' rows in pairs and without, the other small shipped drafts, draft-m and draft-l, and draft-s-long (run17); older runs' folders can be named: a folder holds one
summary.csv, or one folder per draft each with its own). Prints, per results folder, each
draft's best gamma with its acceptance, measured speedup [95% CI], the prediction
E[N]/(gamma c + v(gamma+1)) (E[N] from alpha as if acceptances were independent), the measured
tokens per iteration and the same cost model fed with them, c and v(gamma+1), and the target's
step time; then the timing lines of the check files and the PyTorch anchor's, every run."""
import csv, glob, os, sys

B = "tests/bench/results"
R12 = f"{B}/infer_gpu_h200_run12"


def from_n(r):
    """The cost model alone: the measured tokens per iteration over gamma c + v(gamma + 1)."""
    g = int(r["gamma"])
    return float(r["tokens_per_iteration"]) / (g * float(r["c_in_run"]) + float(r["v_gamma_plus_1"]))


R13 = f"{B}/infer_gpu_h200_run13"
dirs = sys.argv[1:] or ([f"{R12}/{r}_pairs_{p}" for r in ("r1_t1", "r1_t0", "r2_t0") for p in ("on", "off")] +
                        [f"{R13}/{r}_pairs_{p}" for r in ("r3_t1", "r3_t0", "r4_t1", "r4_t0") for p in ("on", "off")] +
                        [f"{B}/infer_gpu_h200_run14/t{t}" for t in (1, 0)] + [f"{B}/infer_gpu_h200_run15/b/t0"] +
                        [f"{B}/infer_gpu_h200_run16/b/t{t}" for t in (1, 0)] +
                        [f"{B}/infer_gpu_h200_run17/t{t}" for t in (1, 0)])
for d in dirs:
    files = [f"{d}/summary.csv"] if os.path.exists(f"{d}/summary.csv") else sorted(glob.glob(f"{d}/*/summary.csv"))
    head, rows = None, []
    for f in files:
        lines = open(f).read().splitlines()
        head = head or lines[0][2:]
        rows += [r for r in csv.DictReader(lines[1:]) if r["best"] == "1"]
    print(f"{head}  ({d})\n")
    print("| draft | best gamma | alpha | speedup [95% CI] | predicted | tokens / iteration | from them | c | v(gamma+1) | target step ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -float(r["speedup"])):
        print(f"| {r['draft']} | {r['gamma']} | {float(r['alpha_hat']):.3f} | {float(r['speedup']):.3f} "
              f"[{float(r['speedup_ci_lo']):.3f}, {float(r['speedup_ci_hi']):.3f}] | {float(r['predicted_general']):.3f} "
              f"| {float(r['tokens_per_iteration']):.3f} | {from_n(r):.3f} | {float(r['c_in_run']):.3f} | {float(r['v_gamma_plus_1']):.3f} | {float(r['target_step_ms']):.3f} |")
    print()
checks = glob.glob(f"{B}/infer_gpu_h200_run*/*check*.txt") + glob.glob(f"{B}/infer_gpu_h200_run*/*anchor*.txt")
for f in sorted(checks + glob.glob(f"{R12}/b_target.txt") + glob.glob(f"{R13}/b_gpu_anchor.txt")):
    for l in open(f):
        if any(k in l for k in ("safetensors on", "graphs+pdl", "plain", "no pairs", "anchor decode", "dists on the")):
            print(f"{os.path.basename(os.path.dirname(f))}/{os.path.basename(f)}: {l.rstrip()[:150]}")
