#!/usr/bin/env python3
"""tests/cli/theory.py: `speclab theory` against an independent computation in exact rational
arithmetic (Python's fractions: every double given on the command line is converted exactly, and
E[N], Var N, the pmf and every factor are computed without rounding), plus output formats and
every bad-input case (exit 2, one line on stderr naming the flag, nothing on stdout).

Tolerance: the C code works in double; its closed forms are accurate to about γ ulp, so values are
compared at 1e-13 relative (1e-13 absolute for values that are exactly 0)."""
import csv
import io
import json
import os
import subprocess
import sys
from fractions import Fraction as F

SPECLAB = os.environ.get("SPECLAB", "build/speclab")
RTOL = 1e-13
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def close(got, want, what, rtol=RTOL):
    want = float(want)
    ok = got is not None and abs(got - want) <= rtol * abs(want) + (1e-13 if want == 0 else 0)
    check(ok, f"{what}: got {got!r}, want {want!r}")


def run(*args):
    p = subprocess.run([SPECLAB, "theory", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def no_nan(s):
    def bad(c):
        raise ValueError(f"non-finite constant {c} in JSON")
    return json.loads(s, parse_constant=bad)


def run_json(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"{args}: exit {rc}, stderr {err!r}")
    return no_nan(out)


# ---- the exact reference ----

def pmf(betas):
    """P(N = k), k = 1..γ+1, for acceptance β_1..β_γ (exact Fractions)."""
    out, s = [], F(1)
    for b in betas:
        out.append(s * (1 - b))
        s *= b
    out.append(s)
    return out


def moments(betas):
    p = pmf(betas)
    mean = sum(F(k + 1) * pk for k, pk in enumerate(p))
    var = sum((k + 1 - mean) ** 2 * pk for k, pk in enumerate(p))
    return mean, var


def v_of(model, n):
    kind, x = model
    if kind is None:
        return F(1)
    if kind == "const":
        return x
    if kind == "linear":
        return 1 + x * (n - 1)
    return x[n]


def reference_row(betas, c, c_hat, model):
    g = len(betas)
    en, var = moments(betas)
    v = v_of(model, g + 1)
    a1 = betas[0]
    return {
        "gamma": g,
        "expected_tokens": en,
        "var_tokens": var,
        "v_verify": v,
        "walltime_factor_v1": en / (g * c + 1),
        "walltime_factor": en / (g * c + v),
        "ops_factor": (g * c_hat + g + 1) / en,
        "alpha_gt_c": int(a1 > c),
        "cor39_bound": (1 + a1) / (1 + c),
    }


def reference_optimum(betas_for, cap, c, model):
    """Brute force over γ = 1..cap in exact arithmetic; ties within 1e-12 relative of the max."""
    fac, s, en = {}, F(1), F(1)
    for g in range(1, cap + 1):  # E[N] for γ = Σ_{k<=γ} Π_{i<=k} β_i, grown one γ at a time
        s *= betas_for(g)[g - 1]
        en += s
        fac[g] = en / (g * c + v_of(model, g + 1))
    fmax = max(fac.values())
    ties = [g for g in range(1, cap + 1) if fac[g] >= fmax * (1 - F(1, 10**12))]
    best = ties[0]
    return {"gamma_opt": best if fmax > 1 else 0, "walltime_factor_opt": fac[best] if fmax > 1 else F(1),
            "gamma": best, "ties": ties, "gamma_cap": cap, "at_cap": int(ties[-1] == cap)}


def compare(obj, ref, what):
    for k, want in ref.items():
        check(k in obj, f"{what}: key {k} missing")
        if k not in obj:
            continue
        if isinstance(want, (int, list)) and not isinstance(want, bool):
            check(obj[k] == want, f"{what}: {k} = {obj[k]!r}, want {want!r}")
        else:
            close(obj[k], want, f"{what}: {k}")


# ---- single point, JSON ----

for a, g, c, ch in [("0.8", 4, "0.05", "0.02"), ("0.5", 1, "0", "0"), ("0.999999999999", 8, "0.01", "0.1"),
                    ("1", 16, "0.1", "0.5"), ("0", 3, "0.2", "0"), ("0.37", 64, "0", "0.003")]:
    obj = run_json("--alpha", a, "--gamma", str(g), "--c", c, "--c-hat", ch)
    check(isinstance(obj, dict), f"single point {a} {g} {c}: one JSON object, not {type(obj).__name__}")
    if not isinstance(obj, dict):
        continue
    for key in ("alpha", "gamma", "c", "c_hat", "expected_tokens", "walltime_factor", "ops_factor",
                "var_tokens", "walltime_factor_v1", "cor39_bound", "alpha_gt_c", "v_verify"):
        check(key in obj, f"key {key} missing for --alpha {a}")
    A, C, CH = F(float(a)), F(float(c)), F(float(ch))
    compare(obj, reference_row([A] * g, C, CH, (None, None)), f"alpha {a} gamma {g} c {c}")

obj = run_json("--alpha", "1", "--gamma", "1000000")
check(obj.get("expected_tokens") == 1000001.0, "alpha 1: expected_tokens is exactly gamma+1")
check(obj.get("var_tokens") == 0.0, "alpha 1: var_tokens is exactly 0")

# defaults c = 0 and c_hat = 0
obj = run_json("--alpha", "0.6", "--gamma", "3")
check(obj.get("c") == 0 and obj.get("c_hat") == 0, "defaults c = 0, c_hat = 0")

# ---- verification cost models ----

A = F(0.75)
obj = run_json("--alpha", "0.75", "--gamma", "3", "--c", "0.05", "--v-const", "1.25")
compare(obj, reference_row([A] * 3, F(0.05), F(0), ("const", F(1.25))), "v-const")
obj = run_json("--alpha", "0.75", "--gamma", "3", "--c", "0.05", "--v-linear", "0.04")
compare(obj, reference_row([A] * 3, F(0.05), F(0), ("linear", F(0.04))), "v-linear")
table = {1: F(1), 2: F(1.02), 3: F(1.05), 4: F(1.09), 5: F(1.14)}
spec = "1:1,2:1.02,3:1.05,4:1.09,5:1.14"
obj = run_json("--alpha", "0.75", "--gamma", "3", "--c", "0.05", "--v-table", spec)
compare(obj, reference_row([A] * 3, F(0.05), F(0), ("table", table)), "v-table")

# ---- --optimal ----

for a, c, cap, model, vargs in [("0.8", "0.05", 64, (None, None), []), ("0.6", "0.3", 64, (None, None), []),
                                ("0.3", "0.5", 64, (None, None), []), ("0.9", "0", 20, (None, None), ["--gamma-cap", "20"]),
                                ("0.95", "0.02", 4, ("table", table), ["--v-table", spec]),
                                ("0.9", "0.01", 64, ("linear", F(0.1)), ["--v-linear", "0.1"]),
                                ("0.7", "0.7", 64, (None, None), []),
                                # c = 0: E[N] flattens to 2 and γ = 39..64 tie within 1e-12
                                ("0.5", "0", 64, (None, None), [])]:
    obj = run_json("--alpha", a, "--optimal", "--c", c, *vargs)
    check(isinstance(obj, dict), "--optimal single point: one object")
    for key in ("gamma_opt", "walltime_factor_opt", "gamma_cap", "ties", "at_cap", "n_ties"):
        check(key in obj, f"--optimal: key {key} missing")
    A, C = F(float(a)), F(float(c))
    ref = reference_optimum(lambda g: [A] * g, cap, C, model)
    compare(obj, ref, f"optimal alpha {a} c {c} cap {cap}")
    check(obj.get("n_ties") == len(ref["ties"]), f"optimal alpha {a}: n_ties")
    compare(obj, reference_row([A] * ref["gamma"], C, F(0), model), f"optimal alpha {a} c {c}: row at best gamma")

obj = run_json("--alpha", "0.3", "--optimal", "--c", "0.5")
check(obj.get("gamma_opt") == 0 and obj.get("walltime_factor_opt") == 1, "alpha <= c: gamma_opt = 0, factor 1")
check(obj.get("gamma") == 1, "alpha <= c: the best gamma >= 1 is still reported")

# ---- --pmf ----

obj = run_json("--alpha", "0.7", "--gamma", "5", "--pmf")
want = pmf([F(0.7)] * 5)
check(len(obj.get("pmf", [])) == 6, "--pmf: gamma+1 values")
for k, (x, w) in enumerate(zip(obj.get("pmf", []), want)):
    close(x, w, f"pmf k={k + 1}")

rc, out, err = run("--alpha", "0.7,0.8", "--gamma", "2", "--c", "0,0.1", "--pmf", "--format", "csv")
check(rc == 0, "--pmf csv runs")
sections = out.split("\n\n")
check(len(sections) == 2 and sections[1].startswith("# pmf"), "--pmf csv: a second section '# pmf'")
if len(sections) == 2:
    rows = list(csv.DictReader(io.StringIO(sections[1].split("\n", 1)[1])))
    check(len(rows) == 2 * 3, f"--pmf csv: one row per (alpha, gamma, k), c does not repeat them ({len(rows)})")
    for r in rows:
        close(float(r["pmf"]), pmf([F(float(r["alpha"]))] * 2)[int(r["k"]) - 1], "pmf csv")

# ---- --beta ----

betas = ["0.9", "0.8", "0.6", "0.95"]
B = [F(float(b)) for b in betas]
obj = run_json("--beta", ",".join(betas), "--c", "0.05", "--c-hat", "0.01", "--pmf")
compare(obj, reference_row(B, F(0.05), F(0.01), (None, None)), "--beta")
check(obj.get("beta") == [float(b) for b in betas], "--beta: the beta array is echoed")
for x, w in zip(obj.get("pmf", []), pmf(B)):
    close(x, w, "beta pmf")
obj = run_json("--beta", ",".join(betas), "--c", "0.3", "--optimal")
compare(obj, reference_optimum(lambda g: B[:g], 4, F(0.3), (None, None)), "--beta --optimal")
# all β equal reproduces the i.i.d. row
o1 = run_json("--beta", "0.8,0.8,0.8", "--c", "0.05")
o2 = run_json("--alpha", "0.8", "--gamma", "3", "--c", "0.05")
for k in ("expected_tokens", "var_tokens", "walltime_factor", "ops_factor"):
    close(o1.get(k), o2.get(k), f"equal betas = iid: {k}", rtol=1e-14)

# ---- sweeps and formats ----

sweep = ["--alpha", "0.5:0.95:0.05", "--gamma", "1:10", "--c", "0,0.01,0.05"]
arr = run_json(*sweep)
check(isinstance(arr, list) and len(arr) == 10 * 10 * 3, f"sweep: 300 rows ({len(arr)})")
alphas_seen = sorted({r["alpha"] for r in arr})
check(alphas_seen == [round(0.5 + 0.05 * i, 10) for i in range(10)], f"sweep alphas {alphas_seen}")
for r in arr[::7]:
    compare(r, reference_row([F(r["alpha"])] * r["gamma"], F(r["c"]), F(0), (None, None)),
            f"sweep row alpha {r['alpha']} gamma {r['gamma']} c {r['c']}")

rc, out, err = run(*sweep, "--format", "csv")
rows = list(csv.DictReader(io.StringIO(out)))
check(rc == 0 and len(rows) == 300, "sweep csv: 300 rows")
for r, j in zip(rows, arr):
    check(float(r["walltime_factor"]) == j["walltime_factor"], "csv and json carry the same value")

rc, out, err = run(*sweep)
lines = [ln for ln in out.splitlines() if ln and not ln.startswith("#")]
head = lines[0].split()
check(rc == 0 and len(lines) == 301, "sweep table: header + 300 rows")
check(all(len(ln.split()) == len(head) for ln in lines), "table rows align with the header")

rc, out, err = run("--alpha", "0.5:0.95:0.05", "--optimal", "--c", "0,0.01,0.05,0.1", "--format", "csv")
rows = list(csv.DictReader(io.StringIO(out)))
check(rc == 0 and len(rows) == 40, "optimal sweep: 40 rows")
for r in rows:
    A, C = F(float(r["alpha"])), F(float(r["c"]))
    ref = reference_optimum(lambda g: [A] * g, 64, C, (None, None))
    check(int(r["gamma_opt"]) == ref["gamma_opt"], f"optimal sweep alpha {r['alpha']} c {r['c']}: gamma_opt")
    close(float(r["walltime_factor_opt"]), ref["walltime_factor_opt"], "optimal sweep factor")

rc, out, err = run("--help")
check(rc == 0 and "usage" in out and "default 0" in out and err == "", "--help: usage on stdout, exit 0")
check("nan" not in run(*sweep)[1].lower(), "no NaN in table output")

# ---- bad input: exit 2, one line naming the flag, nothing on stdout ----

bad = [
    (["--alpha", "1.5", "--gamma", "3"], "--alpha"),
    (["--alpha", "-0.1", "--gamma", "3"], "--alpha"),
    (["--alpha", "nan", "--gamma", "3"], "--alpha"),
    (["--alpha", "inf", "--gamma", "3"], "--alpha"),
    (["--alpha", "0.5:1.2:0.1", "--gamma", "3"], "--alpha"),
    (["--alpha", "abc", "--gamma", "3"], "--alpha"),
    (["--alpha", "0.5", "--gamma", "0"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "-2"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "2.5"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "1e9"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "NaN"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "3", "--c", "-0.01"], "--c"),
    (["--alpha", "0.5", "--gamma", "3", "--c", "inf"], "--c"),
    (["--alpha", "0.5", "--gamma", "3", "--c-hat", "-1"], "--c-hat"),
    (["--alpha", "0.5", "--gamma", "3", "--c-hat", "nan"], "--c-hat"),
    (["--alpha", "0.9:0.5:0.1", "--gamma", "3"], "--alpha"),       # stop < start
    (["--alpha", "0.5:0.9:0", "--gamma", "3"], "--alpha"),         # step 0
    (["--alpha", "0.5:0.9:0.1:3", "--gamma", "3"], "--alpha"),     # too many parts
    (["--alpha", "0.5,,0.6", "--gamma", "3"], "--alpha"),
    (["--alpha", "0.5", "--gamma", "1:"], "--gamma"),
    (["--alpha", "", "--gamma", "3"], "--alpha"),
    (["--beta", "0.9,1.2"], "--beta"),
    (["--beta", "0.9,nan"], "--beta"),
    (["--beta", "0.9", "--alpha", "0.5"], "--alpha"),
    (["--beta", "0.9", "--gamma", "1"], "--gamma"),
    (["--alpha", "0.5", "--gamma", "3", "--v-const", "0"], "--v-const"),
    (["--alpha", "0.5", "--gamma", "3", "--v-const", "-1"], "--v-const"),
    (["--alpha", "0.5", "--gamma", "3", "--v-linear", "-0.5"], "--v-linear"),   # v(4) = -0.5
    (["--alpha", "0.5", "--gamma", "3", "--v-linear", "nan"], "--v-linear"),
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "1:1,2:1.1"], "--v-table"),  # no n = 4
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "1:1,4:0"], "--v-table"),
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "1:1,4:-2"], "--v-table"),
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "1:1.5,4:2"], "--v-table"),  # v(1) != 1
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "4:1,4:2"], "--v-table"),    # duplicate
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "4"], "--v-table"),
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "0:1"], "--v-table"),
    (["--alpha", "0.5", "--optimal", "--v-table", "1:1,3:1.1"], "--v-table"),     # no n = 2
    (["--alpha", "0.5", "--gamma", "3", "--v-const", "1", "--v-linear", "0.1"], "--v-linear"),
    (["--alpha", "0.5", "--gamma", "3", "--optimal"], "--gamma"),
    (["--alpha", "0.5", "--optimal", "--gamma-cap", "0"], "--gamma-cap"),
    (["--alpha", "0.5", "--gamma", "3", "--gamma-cap", "8"], "--gamma-cap"),
    (["--alpha", "0.5"], "--gamma"),
    (["--gamma", "3"], "--alpha"),
    (["--alpha", "0.5", "--gamma", "3", "--format", "xml"], "--format"),
    (["--alpha", "0.5", "--gamma", "3", "--bogus"], "--bogus"),
    (["--alpha", "0.5", "--gamma", "3", "stray"], "stray"),
    (["-xh", "--alpha", "0.5"], "-x"),
    (["--alpha", "0.5", "--gamma", "3", "--v-table", "1:1,4:1.1", "--v-table", "1:1,4:1.2"], "--v-table"),
    (["--alpha"], "--alpha"),
    (["--alpha", "0:1:0.001", "--gamma", "1:1000"], "combinations"),
]
for args, flag in bad:
    rc, out, err = run(*args)
    lines = err.splitlines()
    ok = (rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("speclab theory: ")
          and flag in lines[0] and "nan" not in out.lower())
    check(ok, f"bad input {args}: exit {rc}, stdout {out[:60]!r}, stderr {err!r} (want exit 2 naming {flag})")

if failures:
    print(f"theory.py: {len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("theory.py: all checks passed")
