#!/usr/bin/python3
"""speclab verify --samples: tokens from a sampler written elsewhere (tests/external_sampler.py, an
independent Python implementation of Algorithm 1) against the known pair given with --p/--q @FILE.
- the correct sampler passes (exit 0) and each planted bug is rejected (exit 1) by the test that
  its mistake touches, at fixed seeds and N = 20000 iterations (V = 4, gamma = 3);
- the Pearson statistics of `first` and `all` recomputed with numpy from the CSV match speclab's;
- the same samples as HDF5 written by h5py (integer codes, fixed (gzip-compressed) and variable-length strings), as
  CSV with CRLF / without a final newline, and with --samples-format given, give byte-identical JSON;
- ids (one token per line) runs only the stream tests, whose statistics equal the CSV run's;
- every bad-file class exits 2 with one line naming FILE:LINE (or FILE: row R for HDF5);
- --p @FILE equals the inline list, a bad @FILE exits 2; option conflicts exit 2."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLER = os.path.join(HERE, "..", "external_sampler.py")
N, V, GAMMA, SEED = "20000", 4, 3, "1"
failures = []
tmp = tempfile.mkdtemp(prefix="sl_verify_samples.")


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def path(name):
    return os.path.join(tmp, name)


def verify(*args):
    p = subprocess.run([S, "verify", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def sampler(bug, out, seed=SEED, n=N):
    subprocess.run([sys.executable, SAMPLER, "--vocab", str(V), "--gamma", str(GAMMA), "--iterations", n,
                    "--seed", seed, "--bug", bug, "--out", out, "--p-out", path("p.txt"), "--q-out", path("q.txt")],
                   check=True)


PAIR = ["--p", "@" + path("p.txt"), "--q", "@" + path("q.txt"), "--gamma", str(GAMMA)]


def verify_file(f, *extra):
    return verify("--samples", f, *PAIR, "--format", "json", *extra)


# ---- the external sampler: correct passes, each bug is rejected by the test it touches ----
# A correct sampler is rejected with probability <= 0.01 (the family-wise level) over seeds; at the
# fixed seed 1 it passes. Each bug is rejected with a Holm-adjusted p far below the level at this
# N (each is already rejected at N = 500 on this pair, checked below), so the check is not near a threshold.
sampler("none", path("good.csv"))
rc, good_json, err = verify_file(path("good.csv"))
check(rc == 0, f"correct sampler: exit {rc} {err.strip()}")
good = json.loads(good_json) if rc in (0, 1) else None
if good:
    v = good["verdict"][0]
    check(v["verdict"] == "consistent-with-lossless" and v["iterations"] == int(N), f"correct sampler verdict {v}")
    names = [t["test"] for t in good["tests"]]
    check(names == ["first", "token_2", "token_3", "bonus", "after_rejection", "all", "pair", "triple"],
          f"tests of a CSV run: {names}")
    print("correct sampler:", v["verdict"], "min Holm p", v["min_p_holm"])

# The mistake each bug makes shows in these tests (tests/external_sampler.py explains why).
touched = {"shared-uniform": "token_2", "unnormalised-residual": "after_rejection", "bonus-from-draft": "bonus"}
for bug, test in touched.items():
    f = path(f"bug-{bug}.csv")
    sampler(bug, f)
    rc, out, err = verify_file(f)
    check(rc == 1, f"--bug {bug}: exit {rc}, expected 1 (rejected) {err.strip()}")
    if rc == 1:
        r = json.loads(out)
        rej = [t["test"] for t in r["tests"] if t["reject"] == 1]
        check(test in rej, f"--bug {bug}: {test} not among the rejected tests {rej}")
        check(len(err.strip().splitlines()) == 1 and "not lossless" in err, f"--bug {bug}: stderr {err!r}")
        print(f"--bug {bug}: rejected by {rej}")

for bug in touched:
    sampler(bug, path("small.csv"), n="500")
    rc, _, err = verify_file(path("small.csv"))
    check(rc == 1, f"--bug {bug} at N = 500: exit {rc}, expected 1")

# ---- Pearson statistics recomputed with numpy from the CSV ----
# V = 4 and p >= 0.1 with N = 20000: every expected count is >= 2000, so nothing is pooled and
# Pearson's X^2 = sum (O - E)^2 / E over the 4 cells. Tolerance 1e-9 relative: the same sums of a
# few doubles in another order.
rows = np.genfromtxt(path("good.csv"), delimiter=",", skip_header=1, dtype=None, encoding="ascii")
it = np.array([r[0] for r in rows]); pos = np.array([r[1] for r in rows]); tok = np.array([r[2] for r in rows])
kind = np.array([r[3] for r in rows])
p = np.loadtxt(path("p.txt"))


def pearson(obs, pmf):
    o = np.bincount(obs, minlength=len(pmf)).astype(float)
    e = o.sum() * pmf
    return float(((o - e) ** 2 / e).sum())


if good:
    got = {t["test"]: t for t in good["tests"]}
    for name, obs in (("first", tok[pos == 1]), ("all", tok)):
        ref = pearson(obs, p)
        check(got[name]["cells"] == V, f"{name}: {got[name]['cells']} cells, expected {V} (no pooling)")
        check(abs(got[name]["pearson"] - ref) <= 1e-9 * ref, f"{name}: pearson {got[name]['pearson']} vs numpy {ref}")
        check(got[name]["n"] == len(obs), f"{name}: n {got[name]['n']} vs {len(obs)}")
        print(f"{name}: pearson speclab {got[name]['pearson']:.12g} numpy {ref:.12g}")
    check(len(np.unique(it)) == int(N), "the CSV has N iterations")

# ---- the same samples in other files: byte-identical JSON ----
codes = np.array([{"accepted": 0, "resampled": 1, "bonus": 2}[k] for k in kind], dtype=np.int8)
with h5py.File(path("codes.h5"), "w") as h:
    h["iteration"] = it.astype(np.int64)
    h["position"] = pos.astype(np.int32)
    h["token"] = tok.astype(np.uint16)
    h["kind"] = codes
    h.attrs["samples_version"] = 1
with h5py.File(path("vlen.h5"), "w") as h:
    h["iteration"], h["position"], h["token"] = it, pos, tok
    h.create_dataset("kind", data=[str(k) for k in kind], dtype=h5py.string_dtype())
with h5py.File(path("fixed.h5"), "w") as h:
    h["iteration"], h["position"], h["token"] = it, pos, tok
    h.create_dataset("kind", data=np.array([k.encode() for k in kind], dtype="S9"), chunks=(1000,), compression="gzip")
text = open(path("good.csv")).read()
open(path("crlf.csv"), "w", newline="").write(text.replace("\n", "\r\n"))
open(path("nofinal.csv"), "w").write(text.rstrip("\n"))
open(path("blank.csv"), "w").write(text.replace("\n0,", "\n\n0,", 1) + "\n\n")
for f, extra in ((path("codes.h5"), []), (path("vlen.h5"), []), (path("fixed.h5"), ["--samples-format", "hdf5"]),
                 (path("crlf.csv"), []), (path("nofinal.csv"), ["--samples-format", "csv"]), (path("blank.csv"), [])):
    rc, out, err = verify_file(f, *extra)
    check(rc == 0 and out == good_json, f"{os.path.basename(f)} {extra}: exit {rc}, JSON identical {out == good_json} {err.strip()}")
# From a pipe: the format must be named (detection needs a regular file).
pp = subprocess.run([S, "verify", "--samples", "/dev/stdin", "--samples-format", "csv", *PAIR, "--format", "json"],
                    input=text, capture_output=True, text=True)
check(pp.returncode == 0 and pp.stdout == good_json, f"CSV from a pipe: exit {pp.returncode} {pp.stderr.strip()}")
pp = subprocess.run([S, "verify", "--samples", "/dev/stdin", *PAIR], input=text, capture_output=True, text=True)
check(pp.returncode == 2 and "give --samples-format" in pp.stderr, f"auto from a pipe: exit {pp.returncode} {pp.stderr.strip()}")
print("HDF5 (codes, vlen and fixed strings), CRLF, no final newline, blank lines: JSON identical to the CSV")

# ids: the concatenated stream, one token per line; only the stream tests, same statistics.
open(path("ids.txt"), "w").write("".join(f"{t}\n" for t in tok))
rc, out, err = verify_file(path("ids.txt"))
check(rc == 0, f"ids: exit {rc} {err.strip()}")
if rc == 0 and good:
    r = json.loads(out)
    names = [t["test"] for t in r["tests"]]
    check(names == ["all", "pair", "triple"], f"ids tests {names}")
    check(r["verdict"][0]["iterations"] == 0 and r["verdict"][0]["tokens"] == len(tok), f"ids verdict {r['verdict'][0]}")
    check("only the stream tests" in err, f"ids: no note on stderr: {err!r}")
    g = {t["test"]: t for t in good["tests"]}
    for t in r["tests"]:
        check(t["pearson"] == g[t["test"]]["pearson"] and t["n"] == g[t["test"]]["n"], f"ids {t['test']} differs from the CSV run")
    rc2, _, err2 = verify_file(path("ids.txt"), "--quiet")
    check(rc2 == 0 and err2 == "", f"ids --quiet: stderr {err2!r}")

# ---- bad files: exit 2, nothing on stdout, one line naming FILE:LINE ----
H = "iteration,position,token,kind\n"
bad = {  # name: (content, line in the message, words in the message)
    "empty": ("", 1, "empty file"),
    "header-only": (H, 1, "no samples"),
    "no-header": ("0,1,2,resampled\n", 1, "a CSV file starts with the header"),  # auto: read as ids, with a hint
    "no-header-csv": ("0,1,2,resampled\n", 1, "expected the header", ["--samples-format", "csv"]),
    "unknown-kind": (H + "0,1,2,rejected\n", 2, "kind 'rejected'"),
    "token-ge-V": (H + "0,1,3,accepted\n0,2,4,resampled\n", 3, "token 4 outside [0, 4)"),
    "token-negative": (H + "0,1,-1,resampled\n", 2, "token -1"),
    "positions-out-of-order": (H + "0,2,1,accepted\n0,1,2,resampled\n", 2, "position 2, expected 1"),
    "position-gap": (H + "0,1,1,accepted\n0,3,2,resampled\n", 3, "position 3, expected 2"),
    "accepted-past-gamma": (H + "".join(f"0,{i},1,accepted\n" for i in range(1, 5)) + "0,5,1,bonus\n", 5, "gamma = 3"),
    "bonus-too-early": (H + "0,1,1,accepted\n0,2,1,bonus\n", 3, "bonus at position 2"),
    "resampled-at-gamma+1": (H + "".join(f"0,{i},1,accepted\n" for i in range(1, 4)) + "0,4,1,resampled\n", 5, "resampled at position 4"),
    "ids-decrease": (H + "5,1,1,resampled\n4,1,1,resampled\n", 3, "ids must increase"),
    "iteration-split": (H + "0,1,1,resampled\n0,1,1,resampled\n", 3, "after its resampled row"),
    "cut-off-at-eof": (H + "0,1,1,resampled\n1,1,1,accepted\n", 3, "ends with the file"),
    "cut-off-by-next": (H + "0,1,1,accepted\n1,1,1,resampled\n", 3, "has no resampled or bonus row"),
    "three-fields": (H + "0,1,resampled\n", 2, "3 fields, expected 4"),
    "not-an-integer": (H + "0,1,2.5,resampled\n", 2, "token '2.5' is not an integer"),
    "huge-number": (H + "99999999999999999999999,1,1,resampled\n", 2, "too large"),
    "negative-iteration": (H + "-1,1,1,resampled\n", 2, "negative"),
    "overlong-line": (H + "0,1,1," + "x" * 5000 + "\n", 2, "longer than"),
    "binary": (H + "0,1,\x00\x01,resampled\n", 2, "not an integer"),
    "ids-bad": ("1\n2\nthree\n", 3, "'three' is not a token id"),
    "ids-too-big": ("1\n\n4\n", 3, "token 4 outside"),
    "ids-blank-only": ("\n \n", 2, "no token ids"),
}
for name, (content, line, words, *extra) in bad.items():
    f = path(name + ".txt")
    open(f, "w", newline="").write(content)
    rc, out, err = verify_file(f, *(extra[0] if extra else []))
    lines = err.strip().splitlines()
    ok = rc == 2 and out == "" and len(lines) == 1 and f"{f}:{line}:" in err and words in err
    check(ok, f"bad file {name}: exit {rc}, stderr {err.strip()!r} (wanted exit 2 and '{f}:{line}:' and '{words}')")
# HDF5: the row (0-based) or the dataset is named.
with h5py.File(path("bad-kind.h5"), "w") as h:
    h["iteration"], h["position"], h["token"], h["kind"] = [0, 0], [1, 2], [1, 1], np.array([0, 7], dtype=np.int8)
with h5py.File(path("bad-lengths.h5"), "w") as h:
    h["iteration"], h["position"], h["token"], h["kind"] = [0], [1, 2], [1], [1]
with h5py.File(path("bad-float.h5"), "w") as h:
    h["iteration"], h["position"], h["token"], h["kind"] = [0], [1], [1.0], [1]
with h5py.File(path("bad-missing.h5"), "w") as h:
    h["iteration"], h["position"], h["token"] = [0], [1], [1]
with h5py.File(path("bad-string.h5"), "w") as h:
    h["iteration"], h["position"], h["token"] = [0, 1], [1, 1], [1, 1]
    h.create_dataset("kind", data=["resampled", "Bonus"], dtype=h5py.string_dtype())
with h5py.File(path("bad-version.h5"), "w") as h:
    h["iteration"], h["position"], h["token"], h["kind"] = [0], [1], [1], [1]
    h.attrs["samples_version"] = 2
open(path("truncated.h5"), "wb").write(open(path("codes.h5"), "rb").read()[:3000])
for name, words in (("bad-kind.h5", ": row 1: kind code 7"), ("bad-lengths.h5", "lengths must match"),
                    ("bad-float.h5", "'token' holds float values"), ("bad-missing.h5", "no dataset 'kind'"),
                    ("bad-string.h5", ": row 1: kind 'Bonus'"), ("truncated.h5", "truncated"),
                    ("bad-version.h5", "samples_version is 2")):
    rc, out, err = verify_file(path(name))
    check(rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and words in err,
          f"bad HDF5 {name}: exit {rc} {err.strip()!r} (wanted '{words}')")
print(f"bad files: {len(bad) + 7} classes checked")

# ---- --p/--q @FILE ----
rc1, o1, _ = verify("--p", "@" + path("p.txt"), "--q", "@" + path("q.txt"), "--iterations", "3000", "--format", "json")
rc2, o2, _ = verify("--p", "0.1,0.2,0.3,0.4", "--q", "0.4,0.3,0.2,0.1", "--iterations", "3000", "--format", "json")
check(rc1 == rc2 == 0 and o1 == o2, "--p @FILE differs from the inline list")
open(path("nan.txt"), "w").write("0.5 zero\n")
for args, words in ((["--p", "@" + path("missing.txt")], "cannot open"), (["--p", "@" + path("nan.txt")], "'zero' is not a finite number"),
                    (["--p", "@" + path("empty.txt")], "holds no numbers"), (["--p", "1"], "expected at least 2")):
    rc, out, err = verify(*args, "--q", "0.5,0.5")
    check(rc == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1, f"{args}: exit {rc} {err.strip()!r}")

# ---- option conflicts ----
for args, words in ((["--samples", path("good.csv"), *PAIR, "--iterations", "10"], "--iterations does not apply"),
                    (["--samples", path("good.csv"), *PAIR, "--replications", "3"], "--replications does not apply"),
                    ([*PAIR, "--samples-format", "csv"], "only with --samples"),
                    (["--samples", path("good.csv"), *PAIR, "--samples-format", "xml"], "expected csv, hdf5, ids or auto"),
                    (["--samples", path("ids.txt"), "--family", "positional", "--vocab", "4"], "plain token stream"),
                    (["--samples", path("nonexistent.csv"), *PAIR], "cannot open")):
    rc, out, err = verify(*args)
    check(rc == 2 and out == "" and words in err, f"{args[-3:]}: exit {rc} {err.strip()!r} (wanted '{words}')")

shutil.rmtree(tmp)
print("verify --samples:", "ok" if not failures else f"{len(failures)} FAILED")
sys.exit(1 if failures else 0)
