#!/usr/bin/env bash
# replay_check.sh: does the sequential replay of a measure log predict what a real run observes?
# For the shipped target with draft-s-distilled and with the lookup draft, prose and code prompts,
# T = 0 and T = 1: a measure log and a `run --gamma 1,2,4` sweep on the same prompts (K prompts x N
# tokens). Per gamma: tokens per iteration by the sequential replay (CI: bootstrap over sequences),
# observed by the run (CI: bootstrap over prompts), and, for comparison, Equation 1 at the log's
# alpha and the window replay (analyze's "iid" and "replay" columns). At T = 0 the replay follows
# the greedy text the run emits, so it must equal the observation; at T = 1 the measure log and the
# run sample different texts from the same law, so they must agree within their CIs
# (z = difference / combined standard error, the standard errors read off the 95% CIs).
# Writes analysis/replay_check.csv (or --out FILE); --doc puts it into analysis/CHOOSING_GAMMA.md. About 15
# minutes on 2 cores.
set -u
cd "$(dirname "$0")/.."
S=${SPECLAB:-build/speclab}
OUT=analysis/replay_check.csv K=24 N=128 DOC=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --prompts) K=$2; shift 2 ;;
    --tokens) N=$2; shift 2 ;;
    --doc) DOC=1; shift ;;
    *) echo "usage: $0 [--out FILE.csv] [--prompts K] [--tokens N] [--doc]" >&2; exit 2 ;;
  esac
done
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
F=models/family
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive  # one thread: the counts do not depend on it, and the machine is shared
for pair in "distilled $F/draft-s-distilled.safetensors" "lookup models/drafts/lookup.safetensors"; do
  set -- $pair
  name=$1 draft=$2
  for kind in prose code; do
    head -n "$K" data/prompts/$kind.txt > "$T/p.txt"
    for temp in 0 1; do
      tag=$name-$kind-$temp
      common=(--target $F/target.safetensors --draft "$draft" --prompts "$T/p.txt" --tokens "$N" --temperature "$temp" --quiet)
      "$S" measure "${common[@]}" --dist none --out "$T/$tag-m.h5" > /dev/null || { echo "measure $tag failed"; exit 1; }
      "$S" run "${common[@]}" --gamma 1,2,4 --cost-reps 1 --v-max 5 --out "$T/$tag-r.h5" --format json > "$T/$tag-r.json" ||
        { echo "run $tag failed"; exit 1; }
      "$S" analyze "$T/$tag-m.h5" --gamma-max 4 --c 0 --format json > "$T/$tag-a.json" || exit 1
      echo "$tag done" >&2
    done
  done
done
/usr/bin/python3 - "$T" "$OUT" <<'PY'
import csv, json, math, sys
T, out = sys.argv[1], sys.argv[2]
rows = []
for name in ("distilled", "lookup"):
    for kind in ("prose", "code"):
        for temp in (0, 1):
            tag = f"{name}-{kind}-{temp}"
            an = {x["gamma"]: x for x in json.load(open(f"{T}/{tag}-a.json"))["expected_tokens"]}
            sw = {x["gamma"]: x for x in json.load(open(f"{T}/{tag}-r.json"))["sweep"]}
            for g in (1, 2, 4):
                a, r = an[g], sw[g]
                se_a = (a["sequential_ci_hi"] - a["sequential_ci_lo"]) / (2 * 1.96)
                se_r = (r["tokens_per_iteration_ci_hi"] - r["tokens_per_iteration_ci_lo"]) / (2 * 1.96)
                d = a["sequential"] - r["tokens_per_iteration"]
                se = math.hypot(se_a, se_r)
                z = d / se if se > 0 else (0.0 if abs(d) < 1e-9 else math.inf)
                rows.append({"pair": name, "prompts": kind, "temperature": temp, "gamma": g,
                             "replay": a["sequential"], "replay_ci_lo": a["sequential_ci_lo"], "replay_ci_hi": a["sequential_ci_hi"],
                             "observed": r["tokens_per_iteration"], "observed_ci_lo": r["tokens_per_iteration_ci_lo"],
                             "observed_ci_hi": r["tokens_per_iteration_ci_hi"], "z": z,
                             "agree": int(abs(z) < 1.96), "iid_eq1": a["iid"], "window_replay": a["replay"]})
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
n_ok = sum(r["agree"] for r in rows)
print(f"replay_check: {n_ok} of {len(rows)} cells agree (|z| < 1.96); {out}")
for t in (0, 1):
    sub = [r for r in rows if r["temperature"] == t]
    print(f"  T = {t}: max |replay - observed| = {max(abs(r['replay'] - r['observed']) for r in sub):.4f}; "
          f"window replay max |diff| = {max(abs(r['window_replay'] - r['observed']) for r in sub):.4f}; "
          f"Eq. 1 max |diff| = {max(abs(r['iid_eq1'] - r['observed']) for r in sub):.4f}")
PY
[ "$DOC" = 0 ] || /usr/bin/python3 analysis/doc_table.py analysis/CHOOSING_GAMMA.md "$OUT" replay_check.csv
