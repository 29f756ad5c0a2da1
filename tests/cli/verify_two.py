#!/usr/bin/python3
"""speclab verify --two-sample A B (analysis/sl_verify_two.h, analysis/VERIFY_TWO.md):
- the statistics against scipy.stats.chi2_contingency (Pearson and G), TV, Holm and the power
  recomputed independently in numpy/scipy;
- calibration: pairs of files from the same Markov chain give uniform p-values for every test
  (KS) and a rejection rate within its binomial range, while the naive chi^2 reference of the
  every-token test, which ignores the dependence inside a sequence, does not;
- chains that differ only in the dependence between positions 1 and 2 (same marginals at every
  position) are rejected by block2 and not by the per-position tests;
- a real `speclab run --tokens-out` file passes with the exact rule;
- one FILE = its speculative against its autoregressive lines; same bytes twice; --help;
- bad input exits 2 with one line naming the file and the line."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from scipy import stats

S = os.environ.get("SPECLAB", "build/speclab")
failures = []
TMP = tempfile.mkdtemp(prefix="sl_verify_two_")


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(*args):
    p = subprocess.run([S, "verify", "--two-sample", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(name, seqs, mode=None):
    """Plain (one sequence a line, ids joined by commas) or, with mode, run --tokens-out lines."""
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        for i, s in enumerate(seqs):
            ids = ",".join(str(int(x)) for x in s)
            f.write(f"{i} {mode} {ids}\n" if mode else ids + "\n")
    return path


def rows(d):
    return {r["test"]: r for r in d["tests"]}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


# ---- 1. statistics against scipy ----
# Small vocabulary and many sequences: every expected count is far above 5, so nothing is pooled
# and the table speclab tests is the full 2 x k table scipy sees. Both compute the same sums in
# double precision (order differs: ~1e-15 relative) and the chi^2 tail with different codes (GSL
# vs cephes, both ~1e-14 relative at moderate p): 1e-9 relative leaves a wide margin for those
# and still catches any wrong cell, df or formula.
rng = np.random.default_rng(1)
A = rng.choice(3, size=(3000, 3), p=[0.5, 0.3, 0.2])
B = rng.choice(3, size=(2500, 3), p=[0.48, 0.31, 0.21])
pa, pb = write("sa.txt", A), write("sb.txt", B)
rc, out, err = run(pa, pb, "--format", "json")
check(rc in (0, 1), f"scipy case: exit {rc}: {err}")
d = json.loads(out)
R = rows(d)
for name, ka, kb in (("position_1", A[:, 0], B[:, 0]), ("position_3", A[:, 2], B[:, 2]),
                     ("block2", A[:, 0] * 3 + A[:, 1], B[:, 0] * 3 + B[:, 1])):
    k = 9 if name == "block2" else 3
    table = np.array([np.bincount(ka, minlength=k), np.bincount(kb, minlength=k)])
    x2, p, dof, exp = stats.chi2_contingency(table, correction=False)
    g, pg, _, _ = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    r = R[name]
    check(exp.min() >= 5 and r["cells"] == k, f"{name}: expected no pooling ({r['cells']} cells)")
    check(r["df"] == dof, f"{name}: df {r['df']} vs scipy {dof}")
    check(rel(r["pearson"], x2) < 1e-9, f"{name}: pearson {r['pearson']} vs scipy {x2}")
    check(rel(r["p_pearson"], p) < 1e-9, f"{name}: p {r['p_pearson']} vs scipy {p}")
    check(rel(r["g"], g) < 1e-9, f"{name}: G {r['g']} vs scipy {g}")
    check(rel(r["p_g"], pg) < 1e-9, f"{name}: p_g {r['p_g']} vs scipy {pg}")
    fa, fb = table[0] / table[0].sum(), table[1] / table[1].sum()
    check(abs(r["tv"] - 0.5 * np.abs(fa - fb).sum()) < 1e-12, f"{name}: tv")
    # Power against TV = 0.05 at Holm's first threshold with n_eff = n_a n_b / (n_a + n_b):
    # scipy's noncentral chi^2 (speclab sums the Poisson series to 1e-15; 1e-6 is scipy's accuracy).
    m = d["verdict"][0]["tests"]
    neff = table[0].sum() * table[1].sum() / table.sum()
    crit = stats.chi2.isf(0.01 / m, dof)
    power = stats.ncx2.sf(crit, dof, 4 * neff * 0.05 ** 2)
    check(abs(r["power"] - power) < 1e-6, f"{name}: power {r['power']} vs scipy {power}")
# Holm by hand over the counted tests (those with a reject flag).
counted = [r for r in d["tests"] if r["reject"] is not None]
p = np.array([r["p_value"] for r in counted])
order = np.argsort(p, kind="stable")
adj = np.empty_like(p)
run_max = 0.0
for i, j in enumerate(order):
    run_max = max(run_max, min(1.0, (len(p) - i) * p[j]))
    adj[j] = run_max
check(np.allclose([r["p_holm"] for r in counted], adj, rtol=1e-12, atol=0), "Holm adjusted p-values")
check(d["verdict"][0]["tests"] == len(counted), "tests counted")
check(d["verdict"][0]["verdict"] == ("different" if adj.min() <= 0.01 else "consistent"), "verdict from Holm")
check((rc == 1) == (adj.min() <= 0.01), "exit status follows the verdict")

# Same inputs, same bytes; table and csv render.
check(run(pa, pb, "--format", "json")[1] == out, "same inputs, same bytes")
for fmt in ("table", "csv"):
    r2 = run(pa, pb, "--format", fmt)
    check(r2[0] == rc and "position_1" in r2[1], f"--format {fmt}")


# ---- 2. calibration under the null: the same Markov chain on both sides ----
def chain(rng, n, L, V, stay):
    """n sequences of length L: x1 uniform, then keep the previous token with probability stay,
    else draw uniformly (so every position is uniform, and tokens of one sequence are dependent)."""
    x = np.empty((n, L), dtype=np.int64)
    x[:, 0] = rng.integers(0, V, n)
    for j in range(1, L):
        keep = rng.random(n) < stay
        x[:, j] = np.where(keep, x[:, j - 1], rng.integers(0, V, n))
    return x


REPS, LEVEL = 200, 0.01
rng = np.random.default_rng(20261127)
pv, naive_all, verdicts = {}, [], 0
for rep in range(REPS):
    a = write("ca.txt", chain(rng, 300, 6, 4, 0.7))
    b = write("cb.txt", chain(rng, 300, 6, 4, 0.7))
    rc, out, err = run(a, b, "--format", "json", "--permutations", "999", "--seed", str(rep + 1))
    check(rc in (0, 1), f"calibration rep {rep}: exit {rc}: {err}")
    d = json.loads(out)
    verdicts += d["verdict"][0]["verdict"] == "different"
    for r in d["tests"]:
        if r["p_value"] is not None:
            pv.setdefault(r["test"], []).append(r["p_value"])
    naive_all.append(rows(d)["all"]["p_pearson"])
expected = {"position_%d" % j for j in range(1, 7)} | {"block2", "block3", "block2_all", "block3_all", "all"}
check(set(pv) == expected, f"calibration tests: {sorted(pv)}")
for name, ps in sorted(pv.items()):
    ks = stats.kstest(ps, "uniform").pvalue
    k = sum(x <= LEVEL for x in ps)
    bt = stats.binomtest(k, len(ps), LEVEL).pvalue
    print(f"calibration {name:11s} reps {len(ps)}  KS p {ks:.3f}  rejected at {LEVEL}: {k}  binomial p {bt:.3f}")
    check(len(ps) == REPS, f"{name}: {len(ps)} replications with a p-value")
    check(ks > 0.001, f"{name}: p-values not uniform under the null (KS p = {ks:.2g})")
    check(bt > 0.001, f"{name}: {k} of {len(ps)} rejected at {LEVEL} (binomial p = {bt:.2g})")
# Holm controls the family-wise rate at LEVEL: the verdict count is at most Binomial(REPS, LEVEL)'s
# 0.999 quantile.
check(verdicts <= stats.binom.ppf(0.999, REPS, LEVEL), f"family-wise rejections {verdicts} of {REPS}")
# The chi^2 reference on pooled tokens treats 1800 dependent tokens as independent: far too many
# small p-values. This is why "all" uses a permutation p-value.
ks_naive = stats.kstest(naive_all, "uniform").pvalue
print(f"naive chi^2 p of 'all' (tokens as independent): KS p {ks_naive:.2g}, "
      f"{sum(x <= LEVEL for x in naive_all)} of {REPS} below {LEVEL}")
check(ks_naive < 0.001, f"the naive chi^2 reference of 'all' should be miscalibrated here (KS p {ks_naive:.2g})")


# ---- 3. a difference only in the dependence between positions 1 and 2 ----
def indep(rng, n, L, V):
    return rng.integers(0, V, (n, L))


def coupled(rng, n, L, V):
    """x2 = x1 with probability 1/2, else uniform: x2 is still uniform, as every position is."""
    x = rng.integers(0, V, (n, L))
    same = rng.random(n) < 0.5
    x[same, 1] = x[same, 0]
    return x


REPS3 = 50
block2_rej, pos_rej, all_rej = 0, 0, 0
for rep in range(REPS3):
    a = write("da.txt", indep(rng, 300, 6, 4))
    b = write("db.txt", coupled(rng, 300, 6, 4))
    rc, out, err = run(a, b, "--format", "json", "--permutations", "999")
    R = rows(json.loads(out))
    block2_rej += R["block2"]["reject"] == 1
    pos_rej += sum(R[f"position_{j}"]["reject"] == 1 for j in range(1, 7))
    all_rej += R["all"]["reject"] == 1
    check(rc == 1, f"dependence rep {rep}: exit {rc}, expected 1 (rejected)")
print(f"dependence only: block2 rejected {block2_rej}/{REPS3}, position tests {pos_rej}/{6 * REPS3}, all {all_rej}/{REPS3}")
check(block2_rej == REPS3, f"block2 rejected the coupled chain in {block2_rej} of {REPS3}")
# Per-position nulls are true: each Holm rejection has probability <= 0.01; 300 of them, at most
# Binomial(300, 0.01)'s 0.999 quantile (7).
check(pos_rej <= stats.binom.ppf(0.999, 6 * REPS3, LEVEL), f"position tests rejected {pos_rej} times")
check(all_rej <= stats.binom.ppf(0.999, REPS3, LEVEL), f"all rejected {all_rej} times")

# ---- 4. one FILE: speculative lines against autoregressive lines ----
spec = write("both.txt", A[:400], mode="speculative")
with open(spec, "a") as f:
    for i, s in enumerate(B[:400]):
        f.write(f"{i} autoregressive {','.join(map(str, s))}\n")
one = run(spec, "--format", "json")
two = run(spec, spec, "--mode-a", "speculative", "--mode-b", "autoregressive", "--format", "json")
check(one[0] in (0, 1) and one[1] == two[1], "one FILE == A B with --mode-a speculative --mode-b autoregressive")
check(json.loads(one[1])["verdict"][0]["sequences_a"] == 400, "one FILE: 400 speculative sequences")

# ---- 5. real files: speclab run --tokens-out, exact rule ----
prompts = os.path.join(TMP, "prompts.txt")
with open(prompts, "w") as f:
    f.write("The old man said\n" * 200)
tok = os.path.join(TMP, "tokens.txt")
p = subprocess.run([S, "run", "--target", "models/family/target.safetensors", "--draft",
                    "models/family/draft-s-distilled.safetensors", "--prompts", prompts, "--tokens", "4",
                    "--gamma", "2", "--tokens-out", tok, "--out", os.path.join(TMP, "run.h5"),
                    "--cost-reps", "1", "--boot", "100", "--quiet"], capture_output=True, text=True)
check(p.returncode == 0, f"speclab run: exit {p.returncode}: {p.stderr.strip()}")
if p.returncode == 0:
    rc, out, err = run(tok, "--format", "json")
    d = json.loads(out) if out else {"verdict": [{}]}
    v = d["verdict"][0]
    print(f"real run (exact rule, 200 x 4 tokens): exit {rc}, min Holm p {v.get('min_p_holm')}, "
          f"{v.get('tests')} tests")
    check(rc == 0, f"exact rule on the shipped pair rejected: {err.strip()}")
    check(v.get("sequences_a") == 200 and v.get("sequences_b") == 200, "200 sequences of each mode")

# ---- 6. --help and bad input ----
h = run(pa, pb, "--help")
check(h[0] == 0 and "--mode-a" in h[1] and "--permutations" in h[1], "--help lists the two-sample options")
good = write("good.txt", [[1, 2, 3]] * 20)
bad_cases = [
    ("1,2\n3,x\n", [], "line 2"),
    ("1,2\n-4,2\n", [], "line 2: token id -4 is negative"),
    ("1,2\n1,99999999\n", [], "line 2: token id 99999999 is too large"),
    ("0 speculative 1,2\n1 sideways 3\n", [], "line 2: mode 'sideways'"),
    ("0 speculative 1,2\n", ["--mode-a", "autoregressive"], "no autoregressive sequences"),
    ("1,2\n", ["--mode-a", "speculative"], "line 1: a plain token file has no modes"),
    ("", [], "has no token sequences"),
    ("\x00\x01\x02garbage\n", [], "line 1: a NUL byte"),
]
for i, (text, extra, want) in enumerate(bad_cases):
    path = os.path.join(TMP, f"bad{i}.txt")
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run(path, good, *extra)
    lines = err.strip().splitlines()
    check(rc == 2, f"bad case {i}: exit {rc}, expected 2 ({err.strip()})")
    check(len(lines) == 1 and want in err and path in err, f"bad case {i}: stderr {err!r} lacks {want!r}")
    check(out == "", f"bad case {i}: something on stdout")
for args in (["/nonexistent/x.txt", good], [good, "--mode-a", "speculative"], [good, good, good],
             [good, good, "--level", "2"]):
    rc, out, err = run(*args)
    check(rc == 2 and len(err.strip().splitlines()) == 1, f"{args}: exit {rc}, stderr {err!r}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("verify_two: all checks passed")
