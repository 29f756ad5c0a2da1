#!/usr/bin/env python3
"""check_order.py [EVAL_CSV] [RECIPE]: the quality order issue 5 asks of the shipped family, checked
on validation bits per byte per domain (models/family/eval.csv from eval_family.sh): the target
best, then the data-only drafts from larger to smaller (by parameters), then the bigram, then the
unigram; and the distilled draft better than its data-only twin (same shape) where distillation
aims: in α against the target, the paired 95% CI of the difference above 0 in every domain and
temperature of models/family/distill_gain.csv (distill_gain.sh; bits per byte of the two are printed
for information only, since the total-variation objective trades likelihood of the data for
acceptance). Prints one line per comparison and exits 1 if any fails; an unreadable or malformed
table or recipe: one line, exit 2."""
import csv
import os
import sys

ev = sys.argv[1] if len(sys.argv) > 1 else "models/family/eval.csv"
recipe = sys.argv[2] if len(sys.argv) > 2 else "models/family/recipe.tsv"
try:
    rows = list(csv.DictReader(open(ev)))
    bpb = {(r["model"], r["domain"]): float(r["bits_per_byte"]) for r in rows}
    params = {r["model"]: int(r["params"] or 0) for r in rows}
    open(recipe).close()
except (OSError, KeyError, TypeError, ValueError) as e:
    print("check_order: cannot read %s or %s: %s" % (ev, recipe, e), file=sys.stderr)
    sys.exit(2)
stage, shape = {}, {}
for line in open(recipe):
    f = line.split()
    if not f or f[0].startswith("#"):
        continue
    stage[f[0]] = f[1]
    shape[f[0]] = tuple(f[2:6])
models = {m for m, _ in bpb}
data_only = sorted((m for m in stage if m in models and stage[m] in ("target", "base", "small")),
                   key=lambda m: (stage[m] != "target", -params[m]))
chain = data_only + [m for m in ("bigram", "unigram") if m in models]
bad = 0
for d in ("prose", "code"):
    for a, b in zip(chain, chain[1:]):
        ok = bpb[(a, d)] < bpb[(b, d)]
        bad += not ok
        print("%-5s %-6s %-18s %.3f < %-18s %.3f" % ("ok" if ok else "FAIL", d, a, bpb[(a, d)], b, bpb[(b, d)]))
    for m in stage:
        if stage[m] == "finetune" and m in models:
            twin = next((t for t in data_only if shape[t] == shape[m]), None)
            if twin:
                print("info  %-6s %-18s %.3f vs %-18s %.3f bits/byte (distilled vs data-only twin; not a criterion)"
                      % (d, m, bpb[(m, d)], twin, bpb[(twin, d)]))
gain = os.path.join(os.path.dirname(ev), "distill_gain.csv")
fin = [m for m in stage if stage[m] == "finetune" and m in models]
if fin and not os.path.exists(gain):
    bad += 1
    print("FAIL  %s absent (models/family/distill_gain.sh)" % gain)
elif fin:
    try:
        gain_rows = list(csv.DictReader(open(gain)))
        for r in gain_rows:
            float(r["alpha"]), float(r["diff"]), float(r["diff_lo"]), float(r["diff_hi"])
    except (OSError, KeyError, TypeError, ValueError) as e:
        print("check_order: cannot read %s: %s" % (gain, e), file=sys.stderr)
        sys.exit(2)
    for m in fin:
        if not any(r["model"] == m for r in gain_rows):
            bad += 1
            print("FAIL  %s has no row in %s" % (m, gain))
    for r in gain_rows:
        if r["model"] in fin:
            ok = float(r["diff_lo"]) > 0
            bad += not ok
            print("%-5s %-6s %-18s alpha %.3f - %s %.3f = %+.3f [%+.3f, %+.3f] > 0 (T=%s, paired)"
                  % ("ok" if ok else "FAIL", r["domain"], r["model"], float(r["alpha"]), r["twin"],
                     float(r["alpha"]) - float(r["diff"]), float(r["diff"]), float(r["diff_lo"]),
                     float(r["diff_hi"]), r["temperature"]))
spans = [params[m] for m in data_only if stage[m] != "target"]
if spans:
    print("drafts span %.0fx in parameters (%d to %d)" % (max(spans) / min(spans), min(spans), max(spans)))
sys.exit(1 if bad else 0)
