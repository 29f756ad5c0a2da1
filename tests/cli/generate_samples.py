#!/usr/bin/env python3
"""generate_samples.py: `speclab generate --samples K` and `--autoregressive` on the shipped target.

- Plumbing: K continuations print K lines (`INDEX<TAB>TEXT`, escaped) then the summary; the json
  `samples` table, the table lines and --tokens-out agree; sample 0 equals the single generation
  with the same seed (speculative with a model draft and with a lookup draft, and autoregressive);
  sample i does not depend on K nor on the thread count (OpenMP threads of the models, or the
  --threads workers); the same seed gives the same tokens,
  another seed other ones; ids lie in the vocabulary; a target without a tokenizer prints ids.
- Distribution: 2000 autoregressive samples of one token follow p(. | prompt), the pmf that
  `speclab measure` logs (another code path: sl_log_measure scores the text prompt itself),
  chi^2 goodness of fit with pooled cells (expected >= 5 each); fixed seed, so the p-value is a
  fixed number; we require p > 0.001 (a correct sampler fails this at one seed in a thousand).
- Bad input: exit 2, one line on stderr, nothing on stdout, no file touched.
Run from the repository root; exit 0 = pass."""
import json, math, os, shutil, subprocess, sys, tempfile

import h5py
import numpy as np

S = os.environ.get("SPECLAB", "build/speclab")
T = "models/family/target.safetensors"
D = "models/family/draft-s-distilled.safetensors"
NOTOK = "tests/ref/gpt2_f32.safetensors"  # a fixture without a tokenizer
V = 4096
W = tempfile.mkdtemp()
fails = 0
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def check(name, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)))
    fails += not cond


def sl(*a, env=None):
    r = subprocess.run([S, *a], capture_output=True, text=True, env=env or ENV)
    if r.returncode:
        raise SystemExit("FAIL speclab %s: rc %d %s" % (" ".join(a), r.returncode, r.stderr))
    return r.stdout


def gen_json(*a, env=None):
    return json.loads(sl("generate", *a, "--format", "json", env=env))


def ids(row):
    return [int(x) for x in row["token_ids"].split(",")]


SPEC = ["--target", T, "--draft", D, "--gamma", "4", "--tokens", "24"]
AR = ["--autoregressive", "--target", T, "--tokens", "24"]
PROMPT = ["--prompt", "Once upon a time"]

# ---- plumbing ----
escaped = 0  # samples whose text holds a newline (so that the escaping is exercised)
for name, base in (("speculative", SPEC), ("lookup draft", ["--target", T, "--draft", "lookup:2", "--gamma", "3",
                                                             "--tokens", "24"]), ("autoregressive", AR)):
    single = gen_json(*base, *PROMPT, "--seed", "7")
    three = gen_json(*base, *PROMPT, "--seed", "7", "--samples", "3")
    five = gen_json(*base, *PROMPT, "--seed", "7", "--samples", "5", env=dict(ENV, OMP_NUM_THREADS="2"))
    s3, s5 = three["samples"], five["samples"]
    check(name + ": 3 samples, indices 0..2", [r["sample"] for r in s3] == [0, 1, 2], s3)
    check(name + ": sample 0 == single generation (same seed)",
          ids(s3[0]) == ids(single["generation"][0]) and s3[0]["text"] == single["generation"][0]["text"])
    check(name + ": sample i independent of K and of the thread count",
          [ids(r) for r in s3] == [ids(r) for r in s5[:3]])
    check(name + ": samples differ from each other", len({tuple(ids(r)) for r in s5}) == 5)
    check(name + ": ids in [0, V), n_new = 24",
          all(0 <= t < V for r in s5 for t in ids(r)) and all(r["n_new"] == len(ids(r)) == 24 for r in s5))
    other = gen_json(*base, *PROMPT, "--seed", "8", "--samples", "3")["samples"]
    check(name + ": another seed, other samples", all(ids(a) != ids(b) for a, b in zip(s3, other)))
    mode = "autoregressive" if base is AR else "speculative"
    summary = three["decoding" if base is AR else "acceptance"][0]
    check(name + ": summary counts every sample's tokens", summary["tokens_emitted"] == 72, summary)
    if base is AR:
        check("autoregressive: the report says so, no acceptance table",
              summary["mode"] == "autoregressive" and "acceptance" not in three and "drafted" not in summary)

    # Table format: K lines `i<TAB>escaped text`, a blank line, the summary; the lines unescape to
    # the json texts. --tokens-out: `i MODE ids`, the json ids; same seed, same file bytes.
    tok = f"{W}/{mode}.tok"
    out = sl("generate", *base, *PROMPT, "--seed", "7", "--samples", "3", "--tokens-out", tok)
    lines = out.split("\n")
    unesc = lambda s: s.replace("\\\\", "\0").replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t").replace("\0", "\\")
    check(name + ": table prints 3 escaped lines then the summary",
          lines[3] == "" and [unesc(l.split("\t", 1)[1]) for l in lines[:3]] == [r["text"] for r in s3]
          and [l.split("\t", 1)[0] for l in lines[:3]] == ["0", "1", "2"], lines[:4])
    escaped += any("\n" in r["text"] for r in s3)
    want = "".join("%d %s %s\n" % (r["sample"], mode, r["token_ids"]) for r in s3)
    got = open(tok).read()
    check(name + ": --tokens-out holds `SAMPLE MODE ids`", got == want, got[:200])
    sl("generate", *base, *PROMPT, "--seed", "7", "--samples", "3", "--tokens-out", tok)  # replaces a token file
    check(name + ": same seed, same --tokens-out bytes", open(tok).read() == want)

check("some text held a newline (escaping exercised)", escaped > 0)

# --threads N: N workers with their own models; the samples and --tokens-out are the same bytes
# for N = 1, 2, 3 (7 samples: uneven shares), in both modes.
for name, base in (("speculative", SPEC), ("autoregressive", AR)):
    got = []
    for n in ("1", "2", "3"):
        tok = f"{W}/thr{n}.tok"
        js = gen_json(*base, *PROMPT, "--seed", "5", "--samples", "7", "--threads", n, "--tokens-out", tok)
        got.append((js["samples"], open(tok).read()))
    check(name + ": --threads 1, 2, 3 give the same samples and token file", got[0] == got[1] == got[2])

# A target without a tokenizer: ids on each line.
out = sl("generate", "--target", NOTOK, "--draft", NOTOK, "--gamma", "2", "--prompt-ids", "1,2,3", "--tokens", "5",
         "--samples", "2", "--seed", "3")
js = gen_json("--target", NOTOK, "--draft", NOTOK, "--gamma", "2", "--prompt-ids", "1,2,3", "--tokens", "5",
              "--samples", "2", "--seed", "3")["samples"]
check("no tokenizer: `i<TAB>id id ...` lines",
      out.split("\n")[:2] == ["%d\t%s" % (r["sample"], " ".join(map(str, ids(r)))) for r in js], out)

# ---- distribution of the first token: chi^2 against the pmf measure logs ----


def chi2_sf(x, k):
    """P(X > x) for X ~ chi^2(k): the regularized upper incomplete gamma Q(k/2, x/2), by its series
    (x < a + 1) or its continued fraction (Numerical Recipes 6.2)."""
    a, x = k / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    lg = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        s = term = 1.0 / a
        n = a
        while abs(term) > 1e-16 * abs(s):
            n += 1
            term *= x / n
            s += term
        return 1.0 - s * math.exp(lg)
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return math.exp(lg) * h


# The routine against textbook quantiles: chi^2(10) upper 5% point 18.307, chi^2(1) 3.841, chi^2(100) 124.342.
check("chi2_sf matches the table", all(abs(chi2_sf(x, k) - 0.05) < 1e-4 for x, k in ((18.307, 10), (3.841, 1), (124.342, 100))))

K = 2000
SAMP = ["--temperature", "0.8", "--top-p", "0.95"]
with open(f"{W}/p.txt", "w") as f:
    f.write("The king said unto\n")
sl("measure", "--target", T, "--draft", D, "--prompts", f"{W}/p.txt", "--tokens", "1", *SAMP, "--out", f"{W}/m.h5")
p = h5py.File(f"{W}/m.h5", "r")["distributions/p"][0].astype(np.float64)
p /= p.sum()  # the log stores float32: renormalised in double
js = gen_json("--autoregressive", "--target", T, "--prompt", "The king said unto", "--tokens", "1", *SAMP,
              "--samples", str(K), "--seed", "1")
first = np.array([ids(r)[0] for r in js["samples"]])
counts = np.bincount(first, minlength=V)
check("every sampled token has p > 0 (top-p support)", bool(np.all(p[first] > 0)), first[p[first] == 0][:5])
# Cells: tokens with expected count >= 5 alone, the rest pooled (merged into the smallest kept cell
# when the pool itself expects < 5).
order = np.argsort(-p, kind="stable")
big = [t for t in order if K * p[t] >= 5]
rest = np.setdiff1d(np.arange(V), big)
exp_c = [K * p[t] for t in big] + [K * p[rest].sum()]
obs_c = [counts[t] for t in big] + [counts[rest].sum()]
if exp_c[-1] < 5:
    exp_c[-2] += exp_c.pop()
    obs_c[-2] += obs_c.pop()
exp_c, obs_c = np.array(exp_c), np.array(obs_c, dtype=float)
stat = float(((obs_c - exp_c) ** 2 / exp_c).sum())
pval = chi2_sf(stat, len(exp_c) - 1)
print("     chi^2 = %.2f, %d cells (df %d), p = %.4f" % (stat, len(exp_c), len(exp_c) - 1, pval))
check("first-token frequencies fit p(. | prompt): chi^2 p > 0.001", len(exp_c) >= 5 and pval > 0.001,
      "chi2 %.2f cells %d p %.3g" % (stat, len(exp_c), pval))
# Power control: the same test on samples drawn at temperature 1.2 (another pmf) must reject.
js = gen_json("--autoregressive", "--target", T, "--prompt", "The king said unto", "--tokens", "1", "--temperature",
              "1.2", "--top-p", "0.95", "--samples", str(K), "--seed", "1")
c2 = np.bincount([ids(r)[0] for r in js["samples"]], minlength=V)
obs2 = np.array([c2[t] for t in big] + [c2[rest].sum()], dtype=float)
if len(obs2) > len(exp_c):
    obs2[-2] += obs2[-1]
    obs2 = obs2[:-1]
stat2 = float(((obs2 - exp_c) ** 2 / exp_c).sum())
pval2 = chi2_sf(stat2, len(exp_c) - 1)
print("     control: chi^2 = %.2f, p = %.3g" % (stat2, pval2))
check("power control: temperature 1.2 samples rejected (p < 0.001)", pval2 < 0.001, "p %.3g" % pval2)

# ---- bad input ----
open(f"{W}/notes.txt", "w").write("my notes\n")


def refused(name, want, *a):
    r = subprocess.run([S, "generate", *a], capture_output=True, text=True, env=ENV)
    ok = r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and want in r.stderr
    check("refused: " + name, ok, "rc %d out %r err %r" % (r.returncode, r.stdout[:80], r.stderr))


refused("--autoregressive with --draft", "--draft", *AR, *PROMPT, "--draft", D)
refused("--autoregressive with --gamma", "--gamma", *AR, *PROMPT, "--gamma", "4")
refused("--autoregressive with --rule", "--rule", *AR, *PROMPT, "--rule", "lenient")
refused("--samples 0", "--samples", *SPEC, *PROMPT, "--samples", "0")
refused("--threads without --samples", "--threads", *SPEC, *PROMPT, "--threads", "2")
refused("--tokens-out onto a file that is not a token file", "not a token line", *SPEC, *PROMPT, "--samples", "2",
        "--tokens-out", f"{W}/notes.txt")
check("the non-token file is untouched", open(f"{W}/notes.txt").read() == "my notes\n")
refused("--tokens-out onto a directory", "not a regular file", *AR, *PROMPT, "--tokens-out", W)
refused("speculative without --gamma", "--gamma", "--target", T, "--draft", D, "--tokens", "3", *PROMPT)
refused("--autoregressive: prompt + tokens beyond the context", "context", *AR[:-1], "100000", *PROMPT)

shutil.rmtree(W)
sys.exit(1 if fails else 0)
