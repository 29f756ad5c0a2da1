#!/usr/bin/python3
"""Writes tests/fixtures/stats_fixtures.h: reference values for analysis/sl_stats.c computed
independently with scipy (Debian's python3-scipy). Run: /usr/bin/python3 tests/gen_stats_fixtures.py
The pooling rule is re-implemented here from its description in sl_stats.h; the statistics and
p-values themselves come from scipy.stats."""
import itertools
import math
import os

import numpy as np
from scipy import stats, optimize

MIN_EXP = 5.0
out = []


def arr(name, vals, ctype="double"):
    if ctype == "double":
        body = ", ".join(repr(float(v)) for v in vals)
    else:
        body = ", ".join(str(int(v)) for v in vals)
    out.append(f"static const {ctype} {name}[] = {{{body}}};")


def pool(counts, pmf):
    """sl_stats.h's rule: drop zero-probability categories, sort by expected count (stable),
    pool every category below 5, then grow the pooled cell until it reaches 5."""
    n = sum(counts)
    cats = [(n * p, j) for j, p in enumerate(pmf) if p > 0]
    cats.sort(key=lambda t: (t[0], t[1]))
    ns = 0
    pooled = 0.0
    while ns < len(cats) and cats[ns][0] < MIN_EXP:
        pooled += cats[ns][0]
        ns += 1
    while ns > 0 and pooled < MIN_EXP and ns < len(cats):
        pooled += cats[ns][0]
        ns += 1
    if ns == 1:
        ns = 0
    obs, exp = [], []
    if ns:
        obs.append(sum(counts[j] for _, j in cats[:ns]))
        exp.append(sum(e for e, _ in cats[:ns]))
    for e, j in cats[ns:]:
        obs.append(counts[j])
        exp.append(e)
    return np.array(obs, float), np.array(exp, float)


rng = np.random.default_rng(20261126)

# ---- goodness of fit cases ----
gof_cases = []
for case in range(6):
    k = [3, 8, 20, 50, 5, 12][case]
    n = [100, 200, 150, 1000, 40, 5000][case]
    pmf = rng.dirichlet(np.full(k, [1.0, 0.5, 0.3, 1.0, 2.0, 0.2][case]))
    # Data from a perturbed pmf so that p-values are spread, not all near 1.
    alt = 0.97 * pmf + 0.03 * rng.dirichlet(np.ones(k))
    counts = rng.multinomial(n, alt)
    gof_cases.append((counts, pmf))

lines = []
for i, (counts, pmf) in enumerate(gof_cases):
    arr(f"gof{i}_counts", counts, "uint64_t")
    arr(f"gof{i}_pmf", pmf)
    obs, exp = pool(list(counts), list(pmf))
    # scipy needs sum(obs) == sum(exp) to relative 1e-8; pooling keeps it exactly up to rounding.
    if len(obs) > 1:
        x2, px = stats.chisquare(obs, exp)
        g, pg = stats.power_divergence(obs, exp, lambda_="log-likelihood")
    else:
        x2, px, g, pg = 0.0, 1.0, 0.0, 1.0
    lines.append(f"    {{gof{i}_counts, gof{i}_pmf, {len(pmf)}, {x2!r}, {px!r}, {g!r}, {pg!r}, {len(obs) - 1}}},")
out.append("typedef struct { const uint64_t *counts; const double *pmf; size_t k; double x2, p_x2, g, p_g; int df; } gof_fixture;")
out.append("static const gof_fixture gof_fixtures[] = {\n" + "\n".join(lines) + "\n};")

# ---- exact multinomial: enumerate with itertools, probabilities from scipy.stats.multinomial ----
exact_cases = [([3, 1, 0], [0.5, 0.3, 0.2]), ([0, 0, 6, 1], [0.4, 0.3, 0.2, 0.1]),
               ([2, 2, 2, 2, 2], [0.2] * 5), ([9, 1], [0.5, 0.5]), ([1, 4, 3, 0, 2], [0.1, 0.3, 0.3, 0.2, 0.1])]
lines = []
for i, (counts, pmf) in enumerate(exact_cases):
    n, k = sum(counts), len(counts)
    pmf = np.array(pmf)
    x2obs = np.sum((np.array(counts) - n * pmf) ** 2 / (n * pmf))
    pv = 0.0
    for y in itertools.product(range(n + 1), repeat=k):
        if sum(y) != n:
            continue
        x2 = np.sum((np.array(y) - n * pmf) ** 2 / (n * pmf))
        if x2 >= x2obs - 1e-9 * x2obs:
            pv += stats.multinomial.pmf(y, n, pmf)
    arr(f"ex{i}_counts", counts, "uint64_t")
    arr(f"ex{i}_pmf", pmf)
    lines.append(f"    {{ex{i}_counts, ex{i}_pmf, {k}, {pv!r}}},")
out.append("typedef struct { const uint64_t *counts; const double *pmf; size_t k; double p; } exact_fixture;")
out.append("static const exact_fixture exact_fixtures[] = {\n" + "\n".join(lines) + "\n};")

# ---- two-sample homogeneity (pooling re-implemented; statistic from chi2_contingency) ----
def pool2(a, b):
    na, nb = sum(a), sum(b)
    N = na + nb
    small = min(na, nb)
    cats = [(small * (a[j] + b[j]) / N, j) for j in range(len(a)) if a[j] + b[j] > 0]
    cats.sort(key=lambda t: (t[0], t[1]))
    ns, pooled = 0, 0.0
    while ns < len(cats) and cats[ns][0] < MIN_EXP:
        pooled += cats[ns][0]
        ns += 1
    while ns > 0 and pooled < MIN_EXP and ns < len(cats):
        pooled += cats[ns][0]
        ns += 1
    if ns == 1:
        ns = 0
    ra, rb = [], []
    if ns:
        ra.append(sum(a[j] for _, j in cats[:ns]))
        rb.append(sum(b[j] for _, j in cats[:ns]))
    for _, j in cats[ns:]:
        ra.append(a[j])
        rb.append(b[j])
    return np.array([ra, rb], float)


lines = []
for i in range(4):
    k = [4, 10, 30, 6][i]
    pmf = rng.dirichlet(np.ones(k) * 0.7)
    pmf2 = 0.9 * pmf + 0.1 * rng.dirichlet(np.ones(k))
    a = rng.multinomial([100, 400, 300, 2000][i], pmf)
    b = rng.multinomial([120, 300, 500, 1500][i], pmf2)
    t = pool2(list(a), list(b))
    x2, px, dfx, _ = stats.chi2_contingency(t, correction=False)
    g, pg, _, _ = stats.chi2_contingency(t, correction=False, lambda_="log-likelihood")
    arr(f"hom{i}_a", a, "uint64_t")
    arr(f"hom{i}_b", b, "uint64_t")
    lines.append(f"    {{hom{i}_a, hom{i}_b, {k}, {x2!r}, {px!r}, {g!r}, {pg!r}, {dfx}}},")
out.append("typedef struct { const uint64_t *a, *b; size_t k; double x2, p_x2, g, p_g; int df; } hom_fixture;")
out.append("static const hom_fixture hom_fixtures[] = {\n" + "\n".join(lines) + "\n};")

# ---- Holm: from its definition (statsmodels is not packaged here) ----
holm_p = [0.01, 0.04, 0.03, 0.005, 0.5, 0.04]
m = len(holm_p)
order = sorted(range(m), key=lambda i: (holm_p[i], i))
adj = [0.0] * m
run = 0.0
for r, i in enumerate(order):
    run = max(run, min(1.0, (m - r) * holm_p[i]))
    adj[i] = run
arr("holm_p", holm_p)
arr("holm_adj", adj)

# ---- KS against U(0,1): scipy.stats.kstest with the exact distribution ----
lines = []
for i, (n, shift) in enumerate([(10, 0.0), (50, 0.05), (200, 0.0), (200, 0.6), (1000, 0.15), (30, 0.8)]):
    x = np.clip(rng.uniform(size=n) ** (1 + shift), 0, 1)
    r = stats.kstest(x, "uniform", method="exact")
    arr(f"ks{i}_x", x)
    lines.append(f"    {{ks{i}_x, {n}, {r.statistic!r}, {r.pvalue!r}}},")
out.append("typedef struct { const double *x; size_t n; double D, p; } ks_fixture;")
out.append("static const ks_fixture ks_fixtures[] = {\n" + "\n".join(lines) + "\n};")
lines = []
# The last three leave the exact matrix method (n D > 150): MTW's tail formula and Kolmogorov's
# limit with Stephens' correction.
for n, d in [(5, 0.3), (100, 0.05), (100, 0.2), (500, 0.02), (500, 0.09), (2000, 0.05),
             (5000, 0.04), (100000, 0.004), (50000, 0.0075)]:
    lines.append(f"    {{{n}, {d!r}, {stats.kstwo.sf(d, n)!r}}},")
out.append("typedef struct { size_t n; double d, sf; } kssf_fixture;")
out.append("static const kssf_fixture kssf_fixtures[] = {\n" + "\n".join(lines) + "\n};")

# ---- proportion CIs: scipy.stats.binomtest(...).proportion_ci ----
lines = []
for x, n, conf in [(7, 20, 0.95), (0, 50, 0.95), (50, 50, 0.99), (523, 1000, 0.95), (3, 100000, 0.999)]:
    bt = stats.binomtest(x, n)
    w = bt.proportion_ci(conf, "wilson")
    cp = bt.proportion_ci(conf, "exact")
    lines.append(f"    {{{x}, {n}, {1 - conf!r}, {w.low!r}, {w.high!r}, {cp.low!r}, {cp.high!r}}},")
out.append("typedef struct { uint64_t x, n; double a, w_lo, w_hi, cp_lo, cp_hi; } ci_fixture;")
out.append("static const ci_fixture ci_fixtures[] = {\n" + "\n".join(lines) + "\n};")

# ---- non-central chi^2 CDF and the power non-centrality ----
lines = []
for x, df, lam in [(3.0, 1, 2.0), (10.0, 4, 7.5), (30.0, 10, 20.0), (0.5, 2, 0.1), (200.0, 50, 150.0), (6.63, 1, 14.88)]:
    lines.append(f"    {{{x!r}, {df}, {lam!r}, {stats.ncx2.cdf(x, df, lam)!r}}},")
out.append("typedef struct { double x, df, lambda, cdf; } ncx2_fixture;")
out.append("static const ncx2_fixture ncx2_fixtures[] = {\n" + "\n".join(lines) + "\n};")
lines = []
for df, a, pw in [(1, 0.01, 0.9), (1, 0.05, 0.8), (5, 0.01, 0.9), (20, 1e-6, 0.9), (1, 1e-6, 0.9)]:
    crit = stats.chi2.isf(a, df)
    lam = optimize.brentq(lambda L: stats.ncx2.sf(crit, df, L) - pw, 1e-6, 1e4, xtol=1e-12)
    lines.append(f"    {{{df}, {a!r}, {pw!r}, {lam!r}}},")
out.append("typedef struct { double df, a, power, lambda; } lambda_fixture;")
out.append("static const lambda_fixture lambda_fixtures[] = {\n" + "\n".join(lines) + "\n};")

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "stats_fixtures.h")
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write("/* Generated by tests/gen_stats_fixtures.py with scipy %s; do not edit. */\n" % __import__("scipy").__version__)
    f.write("#include <stddef.h>\n#include <stdint.h>\n")
    f.write("\n".join(out) + "\n")
print("wrote", path)
