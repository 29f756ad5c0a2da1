#!/usr/bin/python3
"""speclab verify checks itself at the sample sizes README.md recommends:
- the lossless rules are not rejected (exit 0);
- every deliberately wrong variant is rejected at Holm-adjusted p < 1e-6 (exit 1) on a pair where
  that bug matters (the pairs are documented in README.md, "speclab verify");
- lenience l < 1 is detected and its per-token frequencies stay within p(x)/l;
- --power, --two-sample, --replications; same bytes for any thread count; bad input exits 2."""
import json
import math
import os
import struct
import subprocess
import sys

S = os.environ.get("SPECLAB", "build/speclab")
failures = []


def run(*args):
    p = subprocess.run([S, "verify", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def bf16(x):
    """Round to bfloat16 as sim/sl_spec.c's low-precision draft does (nearest, ties to even)."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def bf16_pair():
    """p = q with 56 tokens whose log q sits 0.49 ulp off bf16's grid in [-8, -4) (ulp 1/32),
    alternately above and below, plus one filler token: rounding log q to bf16 moves each of them
    by ~1.5%, a TV of 0.007 between the draft actually sampled and the q in the ratio."""
    ulp = 1 / 32
    logs = [-(4.0 + (j % 4 + 2) * ulp) + (0.49 if j % 2 == 0 else -0.49) * ulp for j in range(56)]
    q = [math.exp(v) for v in logs]
    q = [1 - sum(q)] + q
    return ",".join(repr(v) for v in q)


def verdict(out):
    d = json.loads(out)
    return d["verdict"][0], d


RECOMMENDED = "200000"  # README.md: the default --iterations
BF16 = bf16_pair()
T0_P, T0_Q = "0.4,0.3,0.3", "0.2,0.6,0.2"

# Lossless rules: consistent with lossless (exit 0) at the recommended size.
for args in (["--rule", "exact"], ["--rule", "sampler-match"], ["--rule", "lenient", "--lenience", "1"],
             ["--rule", "exact", "--family", "dirichlet"], ["--rule", "exact", "--family", "positional"],
             ["--rule", "exact", "--p", BF16, "--q", BF16, "--gamma", "7"],
             ["--rule", "lenient-t0", "--lenience", "1", "--p", T0_P, "--q", T0_Q]):
    rc, out, err = run(*args, "--iterations", RECOMMENDED, "--format", "json")
    check(rc == 0, f"{args[:4]}: exit {rc} {err.strip()}")
    if rc == 0:
        v, _ = verdict(out)
        check(v["verdict"] == "consistent-with-lossless", f"{args[:4]}: {v}")

# Every wrong variant, on its pair, rejected at Holm p < 1e-6.
cases = [
    ("bug-draft-argmax", []),
    ("bug-draft-topk", ["--bug-k", "2"]),
    ("bug-residual-paired", []),
    ("bug-resample-from-p", []),
    ("bug-lowprec-draft", ["--p", BF16, "--q", BF16, "--gamma", "7"]),
    ("bug-p-inplace", []),
    ("bug-shared-uniform", []),
    ("lenient-t0", ["--lenience", "0.5", "--p", T0_P, "--q", T0_Q]),
]
for rule, extra in cases:
    rc, out, err = run("--rule", rule, *extra, "--iterations", RECOMMENDED, "--format", "json")
    ok = rc == 1 and err.startswith("speclab verify: not lossless")
    if ok:
        v, _ = verdict(out)
        ok = v["min_p_holm"] < 1e-6
        print(f"{rule}: min Holm p = {v['min_p_holm']:.3g}, {v['rejected_tests']} of {v['tests']} tests rejected")
    check(ok, f"{rule}: exit {rc}, {err.strip()}")

# Lenience l = 0.9: detected, and every token's frequency within its p(x)/l bound.
rc, out, err = run("--rule", "lenient", "--lenience", "0.9", "--iterations", RECOMMENDED, "--format", "json")
v, d = verdict(out)
check(rc == 1 and v["min_p_holm"] < 1e-6, f"lenience 0.9 not detected: {v}")
check(v["lenience_excess"] <= 0, f"lenience 0.9: frequency above p/l: {v['lenience_excess']}")
check(1 < v["max_freq_ratio"] <= 1 / 0.9 + 0.02, f"lenience 0.9: max freq/p {v['max_freq_ratio']}")
check(all(r["within"] == 1 for r in d["lenience_bound"]), "lenience bound table")

# --power: n = ceil(lambda / (4 delta^2)); lambda(df 1, 0.01, 0.9) = 14.8794 (scipy, see tests/fixtures).
rc, out, err = run("--power", "--tv", "0.05", "--df", "1", "--level", "0.01", "--format", "json")
r = json.loads(out)[0]
check(rc == 0 and abs(r["lambda"] - 14.879387166502486) < 1e-5 and r["n"] == math.ceil(14.879387166502486 / 0.01),
      f"--power: {r}")

# Two-sample mode.
rc, out, err = run("--two-sample", "--iterations", "100000", "--format", "json")
check(rc == 0, f"two-sample exact: exit {rc} {err}")
rc, out, err = run("--two-sample", "--rule", "bug-resample-from-p", "--iterations", "100000", "--format", "json")
check(rc == 1, f"two-sample bug: exit {rc}")

# Self-check through the CLI: KS of p-values over 100 replications.
rc, out, err = run("--replications", "100", "--iterations", "2000", "--vocab", "4", "--gamma", "2", "--format", "json")
rows = json.loads(out)
check(rc == 0 and all(r["ks_p"] > 1e-3 for r in rows), f"replications: {rows}")

# Thread count does not change the output bytes: the default pair (pair/triple tests, counts
# summed over per-thread tables), two-sample mode (target draws per block), and a vocabulary
# large enough for Monte Carlo p-values (their draws in blocks shared by the threads).
for extra in ([], ["--two-sample"], ["--vocab", "300", "--iterations", "1500", "--mc-sims", "600"]):
    args = ["--iterations", "50001", *extra] if "--iterations" not in extra else extra
    outs = [run(*args, "--threads", t, "--format", "csv")[1] for t in ("1", "2", "3")]
    check(outs[0] and outs[0] == outs[1] == outs[2], f"threads 1, 2, 3 differ: {extra}")
    if "--mc-sims" in extra:
        check("monte-carlo" in outs[0], "no Monte Carlo p-value in the V = 300 run")

# Bad input.
bad = [
    (["--p", "0.5,0.6", "--q", "0.5,0.5"], "--p"),
    (["--p", "0.5,0.5", "--q", "0.3,0.3,0.4"], "--q"),
    (["--p", "0.5,0.5"], "--q"),
    (["--p", "0.5,nan", "--q", "0.5,0.5"], "--p"),
    (["--p", "1.5,-0.5", "--q", "0.5,0.5"], "--p"),
    (["--p", "1", "--q", "1"], "--p"),
    (["--family", "noisy", "--p", "0.5,0.5", "--q", "0.5,0.5"], "--family"),
    (["--tv", "0"], "--tv"),
    (["--level", "1"], "--level"),
    (["--rule", "bug-nonsense"], "--rule"),
    (["--two-sample", "--family", "positional"], "--two-sample"),
    (["--replications", "1"], "--replications"),
    (["--iterations", "-5"], "--iterations"),
    (["--format", "yaml"], "yaml"),
    (["--power", "--tv", "2"], "--tv"),
]
for args, word in bad:
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and lines[0].startswith("speclab verify: ") and word in lines[0] and out == "",
          f"bad input {args}: exit {rc}, stderr {err!r}")

print("test_verify_cli:", "FAILED" if failures else "ok", f"({len(failures)} failures)")
sys.exit(1 if failures else 0)
