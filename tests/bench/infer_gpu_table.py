#!/usr/bin/env python3
"""infer_gpu_table.py: the tables of models/GPU_INFERENCE.md from the committed device results.

usage: python3 tests/bench/infer_gpu_table.py [RESULTS_DIR...]
(default: tests/bench/results/infer_gpu_h200_run7/t1 and .../t0, the backend as it is now; older
runs' folders can be named). Prints, per results folder, each draft's best gamma with its
acceptance, measured speedup [95% CI], the prediction E[N]/(gamma c + v(gamma+1)), c and
v(gamma+1), and the target's step time; then the timing lines of the check files and the
PyTorch anchor's, every run."""
import csv, glob, os, sys

B = "tests/bench/results"
dirs = sys.argv[1:] or [f"{B}/infer_gpu_h200_run7/t1", f"{B}/infer_gpu_h200_run7/t0"]
for d in dirs:
    f = f"{d}/summary.csv"
    lines = open(f).read().splitlines()
    print(f"{lines[0][2:]}  ({f})\n")
    print("| draft | best gamma | alpha | speedup [95% CI] | predicted | c | v(gamma+1) | target step ms |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [r for r in csv.DictReader(lines[1:]) if r["best"] == "1"]
    for r in sorted(rows, key=lambda r: -float(r["speedup"])):
        print(f"| {r['draft']} | {r['gamma']} | {float(r['alpha_hat']):.3f} | {float(r['speedup']):.3f} "
              f"[{float(r['speedup_ci_lo']):.3f}, {float(r['speedup_ci_hi']):.3f}] | {float(r['predicted_general']):.3f} "
              f"| {float(r['c_in_run']):.3f} | {float(r['v_gamma_plus_1']):.3f} | {float(r['target_step_ms']):.3f} |")
    print()
for f in sorted(glob.glob(f"{B}/infer_gpu_h200_run*/*check*.txt") + glob.glob(f"{B}/infer_gpu_h200_run*/*anchor*.txt")):
    for l in open(f):
        if "safetensors on" in l or "graphs+pdl" in l or "plain" in l or "anchor decode" in l:
            print(f"{os.path.basename(os.path.dirname(f))}/{os.path.basename(f)}: {l.rstrip()[:150]}")
