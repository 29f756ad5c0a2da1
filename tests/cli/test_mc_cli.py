#!/usr/bin/python3
"""speclab mc: agreement with theory on every family, output formats, thread invariance, bad input."""
import json
import os
import subprocess
import sys

S = os.environ.get("SPECLAB", "build/speclab")
failures = []


def run(*args):
    p = subprocess.run([S, "mc", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


# Every family: the measured acceptance and tokens per iteration lie inside their 99.9% CIs around
# the theory (fixed seed: deterministic; 12 intervals at 99.9% would all cover a correct simulation
# with probability ~0.99), and the histogram's goodness of fit against the predicted pmf is not
# rejected at 1e-3.
for fam, extra in [("identical", []), ("noisy", ["--noise", "0.7"]), ("dirichlet", ["--concentration", "0.5"]),
                   ("zipf", ["--zipf-s", "1.2", "--temp-p", "1", "--temp-q", "1.5"]), ("disjoint", []),
                   ("positional", ["--noise", "0.3"])]:
    rc, out, err = run("--family", fam, "--vocab", "512", "--gamma", "4", "--iterations", "100000", "--seed", "7",
                       "--c", "0.05", "--c-hat", "0.1", "--v-slope", "0.02", "--confidence", "0.999",
                       "--format", "json", *extra)
    check(rc == 0, f"{fam}: exit {rc} {err}")
    if rc:
        continue
    d = json.loads(out)
    summ = {r["quantity"]: r for r in d["summary"]}
    for q in ("acceptance", "tokens_per_iteration", "walltime_factor", "ops_factor"):
        r = summ[q]
        check(r["ci_lo"] - 1e-12 <= r["theory"] <= r["ci_hi"] + 1e-12,
              f"{fam}: {q} theory {r['theory']} outside [{r['ci_lo']}, {r['ci_hi']}]")
    for r in d["goodness_of_fit"]:
        if r["against"] == "pmf":
            check(r["p_value"] > 1e-3, f"{fam}: goodness of fit p = {r['p_value']}")
    check(summ["draft_calls"]["measured"] == 400000 and summ["target_calls"]["measured"] == 100000,
          f"{fam}: call counts")
    # walltime factor = E[N] / (gamma c + v(gamma+1)) with v(5) = 1 + 0.02 * 4
    wf = summ["tokens_per_iteration"]["measured"] / (4 * 0.05 + 1.08)
    check(abs(summ["walltime_factor"]["measured"] - wf) < 1e-12, f"{fam}: walltime factor {wf}")
    if fam == "positional":
        iid = [r for r in d["goodness_of_fit"] if r["against"] == "pmf_iid"][0]
        check(iid["p_value"] < 1e-10, f"positional: the i.i.d. formula should be rejected, p = {iid['p_value']}")
    if fam == "identical":
        check(summ["tokens_per_iteration"]["measured"] == 5.0, "identical: every iteration emits gamma + 1")
    if fam == "disjoint":
        check(summ["tokens_per_iteration"]["measured"] == 1.0, "disjoint: every iteration emits 1")

# Same seed, 1 and 2 threads, every format: identical bytes.
for fmt in ("table", "csv", "json"):
    outs = [run("--family", "noisy", "--iterations", "30001", "--threads", t, "--format", fmt)[1] for t in ("1", "2")]
    check(outs[0] == outs[1] and outs[0], f"threads 1 vs 2 differ ({fmt})")
# The fused loop and the reference path through sl_spec_verify: same bytes (exact and lenient).
for rule in (["--rule", "exact"], ["--rule", "lenient", "--lenience", "0.8"]):
    a = run("--family", "dirichlet", "--iterations", "20000", "--format", "json", *rule)[1]
    b = run("--family", "dirichlet", "--iterations", "20000", "--format", "json", "--reference", *rule)[1]
    check(a == b and a, f"--reference differs ({rule})")
csv = run("--family", "zipf", "--iterations", "1000", "--format", "csv")[1]
check(csv.startswith("# run\n") and "# tokens_per_iteration" in csv, "csv sections")

# Bad input: exit 2, one line on stderr naming the argument.
bad = [
    ([], "--family"),
    (["--family", "gauss"], "--family"),
    (["--family", "noisy", "--vocab", "1"], "--vocab"),
    (["--family", "noisy", "--gamma", "0"], "--gamma"),
    (["--family", "noisy", "--gamma", "65"], "--gamma"),
    (["--family", "noisy", "--iterations", "0"], "--iterations"),
    (["--family", "noisy", "--noise", "-1"], "--noise"),
    (["--family", "noisy", "--noise", "nan"], "--noise"),
    (["--family", "dirichlet", "--concentration", "0"], "--concentration"),
    (["--family", "zipf", "--temp-q", "0"], "--temp-q"),
    (["--family", "noisy", "--c", "-0.1"], "--c"),
    (["--family", "noisy", "--rule", "fast"], "--rule"),
    (["--family", "noisy", "--rule", "lenient", "--lenience", "0"], "--lenience"),
    (["--family", "noisy", "--lenience", "1.5"], "--lenience"),
    (["--family", "noisy", "--format", "xml"], "xml"),
    (["--family", "noisy", "--v-const", "2", "--v-slope", "1"], "--v-const"),
    (["--family", "noisy", "--threads", "-1"], "--threads"),
    (["--family", "noisy", "--bogus"], "--bogus"),
    (["--family", "noisy", "extra"], "extra"),
    (["--family", "noisy", "--seed", "-3"], "--seed"),
]
for args, word in bad:
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and lines[0].startswith("speclab mc: ") and word in lines[0] and out == "",
          f"bad input {args}: exit {rc}, stderr {err!r}")
rc, out, _ = run("--help")
check(rc == 0 and "--family" in out, "--help")

print("test_mc_cli:", "FAILED" if failures else "ok", f"({len(failures)} failures)")
sys.exit(1 if failures else 0)
