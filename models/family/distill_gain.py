#!/usr/bin/env python3
"""distill_gain.py DIR TWIN "NAME=PATH ..."  -> CSV on stdout
   distill_gain.py --table CSV               -> markdown table

α of each draft against the target (mean β over the target-generated text of DIR/NAME.DOMAIN.tT.h5,
`speclab measure` logs) and its paired difference from TWIN's α: the logs share seed and prompts, so
the target generated the same tokens for every draft (checked: exit 2 otherwise) and the difference
is taken per prompt (mean β per prompt), with a percentile bootstrap CI over prompts (10 000
resamples, seed 1, 95%). Bad input (a missing or foreign file, unpaired logs): one line, exit 2."""
import csv
import sys

import numpy as np

B, LEVEL = 10000, 0.95


def fail(msg):
    print("distill_gain: " + msg, file=sys.stderr)
    sys.exit(2)


def per_prompt(path):
    import h5py
    try:
        with h5py.File(path, "r") as f:
            seq = f["positions/sequence"][:]
            beta = f["positions/beta"][:]
            tok = f["positions/token"][:]
    except (OSError, KeyError) as e:
        fail("%s: not a speclab measure log (%s)" % (path, e))
    if len(seq) == 0 or not np.all(np.isfinite(beta)) or beta.min() < 0 or beta.max() > 1 + 1e-9:
        fail("%s: no rows, or a beta outside [0, 1]" % path)
    n = int(seq.max()) + 1
    cnt = np.bincount(seq, None, n)
    if np.any(cnt == 0):
        fail("%s: a sequence without rows" % path)
    return np.bincount(seq, beta, n) / cnt, tok


def ci(x, rng):
    idx = rng.integers(0, len(x), (B, len(x)))
    m = x[idx].mean(axis=1)
    return np.quantile(m, (1 - LEVEL) / 2), np.quantile(m, (1 + LEVEL) / 2)


def table(path):
    rows = list(csv.DictReader(open(path)))
    print("| draft | domain | T | α [95% CI] | α − α(twin) [95% CI, paired] |")
    print("|---|---|---|---|---|")
    for r in rows:
        diff = "–" if r["model"] == r["twin"] else "%+.3f [%+.3f, %+.3f]" % (
            float(r["diff"]), float(r["diff_lo"]), float(r["diff_hi"]))
        print("| %s | %s | %s | %.3f [%.3f, %.3f] | %s |" % (r["model"], r["domain"], r["temperature"],
              float(r["alpha"]), float(r["alpha_lo"]), float(r["alpha_hi"]), diff))


def main():
    if sys.argv[1] == "--table":
        table(sys.argv[2])
        return
    d, twin, specs = sys.argv[1], sys.argv[2], sys.argv[3].split()
    names = [s.split("=", 1)[0] for s in specs]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["model", "twin", "domain", "temperature", "prompts", "alpha", "alpha_lo", "alpha_hi",
                "diff", "diff_lo", "diff_hi"])
    for dom in ("prose", "code"):
        for t in ("1", "0"):
            base, btok = per_prompt("%s/%s.%s.t%s.h5" % (d, twin, dom, t))
            for n in names:
                a, tok = per_prompt("%s/%s.%s.t%s.h5" % (d, n, dom, t))
                if not np.array_equal(tok, btok):
                    fail("%s and %s logs hold different target text (%s, T=%s): not paired" % (n, twin, dom, t))
                rng = np.random.default_rng(1)
                lo, hi = ci(a, rng)
                dlo, dhi = ci(a - base, rng)
                w.writerow([n, twin, dom, t, len(a), "%.4f" % a.mean(), "%.4f" % lo, "%.4f" % hi,
                            "%.4f" % (a - base).mean(), "%.4f" % dlo, "%.4f" % dhi])


if __name__ == "__main__":
    main()
