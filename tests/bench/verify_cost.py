#!/usr/bin/python3
"""verify_cost.py: wall time and core-hours of the largest verification, from the per-rank
throughput measured by tests/bench/verify_throughput.sh.

Usage: python3 tests/bench/verify_cost.py THROUGHPUT.csv [OUT.csv]
Env: SPECLAB (default build/speclab), TV (default 0.001), LEVEL (default 0.01), POWER (0.9: the
only power `speclab verify --power` plans for), NODES (default "1 64"), RANKS_PER_NODE (default 16).

The iterations: those that give the first-token test power 0.9 against any deviation of TV >= TV
at Holm's first threshold LEVEL / m (m: the tests the benchmark's verification counted), as
`speclab verify --tv` plans them without --iterations (sl_verify_iterations_for_tv): one first
token per iteration, so n observations = n iterations, n from `speclab verify --power --tv TV
--vocab V --level LEVEL/m`. The same with the plain LEVEL (m = 1) is a second row, the bound
quoted in issue 19.

The model: every rank runs one thread on one core and draws its share of the blocks at the
measured per-rank rate (the benchmark's fit, which under mpirun -np 16 already includes the
contention of a full node); the fixed cost (start-up, plan, the O(V) tests, the final sum of the
count tables: a few MB) is paid once. wall_s = fixed_s + iterations / (ranks x rate);
core_hours = wall_s x ranks / 3600. Not modelled: start-up of mpirun across nodes, and nodes
slower than the one measured.
"""
import csv
import os
import subprocess
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    fit = None
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            if row["row"] == "fit":
                fit = row
    if fit is None:
        sys.exit("verify_cost: no fit row in " + sys.argv[1])
    speclab = os.environ.get("SPECLAB", "build/speclab")
    tv = float(os.environ.get("TV", "0.001"))
    level = float(os.environ.get("LEVEL", "0.01"))
    nodes = [int(x) for x in os.environ.get("NODES", "1 64").split()]
    rpn = int(os.environ.get("RANKS_PER_NODE", "16"))
    vocab, tests = int(fit["vocab"]), int(fit["tests"])
    rate, fixed = float(fit["per_rank_iterations_per_s"]), float(fit["fixed_s"])
    out = open(sys.argv[2], "w", newline="") if len(sys.argv) > 2 else sys.stdout
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["nodes", "ranks_per_node", "ranks", "vocab", "tv", "level_per_test", "tests", "power", "iterations",
                "per_rank_iterations_per_s", "fixed_s", "wall_s", "wall_h", "core_hours"])
    for m in (tests, 1):
        a = level / m
        p = subprocess.run([speclab, "verify", "--power", "--tv", repr(tv), "--vocab", str(vocab), "--level", repr(a),
                            "--format", "csv"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("verify_cost: speclab verify --power failed: " + p.stderr.strip())
        power_row = list(csv.DictReader(p.stdout.splitlines()))[0]
        n = float(power_row["n"])
        for nn in nodes:
            ranks = nn * rpn
            wall = fixed + n / (ranks * rate)
            w.writerow([nn, rpn, ranks, vocab, tv, "%.6g" % a, m, power_row["power"][:6], "%.0f" % n, "%.0f" % rate,
                        "%.2f" % fixed, "%.0f" % wall, "%.2f" % (wall / 3600), "%.1f" % (wall * ranks / 3600)])
    if out is not sys.stdout:
        out.close()
        print("wrote", sys.argv[2], file=sys.stderr)


if __name__ == "__main__":
    main()
