#!/usr/bin/env bash
# analysis/evidence.sh: the evidence table of issue 6 item 5 for one target and a list of drafts.
#
# For every draft x domain (prompt set) x temperature: `speclab measure` (the target generates, beta
# logged per token; alpha with a bootstrap CI over prompts from `speclab analyze`) and `speclab run`
# (real speculative decoding next to the autoregressive baseline, c and v(n) measured in the same
# run). Collects one markdown table: alpha with its CI; the run's empirical acceptance (alpha_hat =
# accepted / tested) against the measured CI; tokens per iteration; the measured walltime speedup
# with its CI next to Theorem 3.8, the generalised E[N]/(g c + v(g+1)) and the same formula with the
# decode's own costs. Every log is resumable, so a rerun after a kill continues where it stopped.
#
# usage: analysis/evidence.sh --target T --drafts "D1 D2 ..." [options]
#   --target T          target model file
#   --drafts LIST       drafts, space-separated; each is what `speclab run/measure --draft` accepts
#                       (a model file, or an n-gram / prompt-lookup spec once the opener knows them);
#                       NAME=SPEC sets the label shown in the table (default: the file's basename)
#   --prompts-dir DIR   where DOMAIN.txt live (default data/prompts)
#   --domains LIST      prompt sets (default "prose code")
#   --temperatures LIST (default "1 0")
#   --prompts K         first K prompts of each set (default 12)
#   --tokens N          tokens per prompt (default 96)
#   --gamma G           drafts per iteration of the run (default 4)
#   --threads T         OMP_NUM_THREADS for measure and run (default 1; see analysis/README.md)
#   --cost-reps R       timed repetitions of each cost point (default 15)
#   --boot B            bootstrap resamples (default 1000)
#   --seed S            (default 1)
#   --out DIR           logs and the table (default evidence-out); the table is DIR/evidence.md
#   --speclab BIN       (default build/speclab)
# Default budget: 12 prompts x 96 tokens per cell, about 16 s per cell with a 12 M-parameter target
# (6 layers, d 384) and drafts of 0.16-2.8 M parameters on 2 loaded cores: 8 drafts x 2 domains x
# 2 temperatures in about 10 minutes (analysis/README.md); scale --prompts and --tokens to taste.
set -euo pipefail
S=build/speclab
TARGET=""
DRAFTS=""
PDIR=data/prompts
DOMAINS="prose code"
TEMPS="1 0"
K=12
N=96
G=4
THREADS=1
REPS=15
BOOT=1000
SEED=1
OUT=evidence-out
die() { echo "evidence.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || [ "$1" = --help ] || die "$1 needs a value"
  case "$1" in
    --target) TARGET=$2 ;;
    --drafts) DRAFTS=$2 ;;
    --prompts-dir) PDIR=$2 ;;
    --domains) DOMAINS=$2 ;;
    --temperatures) TEMPS=$2 ;;
    --prompts) K=$2 ;;
    --tokens) N=$2 ;;
    --gamma) G=$2 ;;
    --threads) THREADS=$2 ;;
    --cost-reps) REPS=$2 ;;
    --boot) BOOT=$2 ;;
    --seed) SEED=$2 ;;
    --out) OUT=$2 ;;
    --speclab) S=$2 ;;
    --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
[ -n "$TARGET" ] || die "--target is required"
[ -n "$DRAFTS" ] || die "--drafts is required"
[ -f "$TARGET" ] || die "--target $TARGET: no such file"
[ -x "$S" ] || die "--speclab $S is not executable (run make)"
for v in "$K" "$N" "$G" "$THREADS" "$REPS" "$BOOT"; do [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ] || die "'$v' is not a positive integer"; done
mkdir -p "$OUT" || die "--out $OUT: cannot create"
[ -w "$OUT" ] || die "--out $OUT is not writable"
for d in $DOMAINS; do
  [ -f "$PDIR/$d.txt" ] || die "$PDIR/$d.txt: no such prompt set"
  head -n "$K" "$PDIR/$d.txt" > "$OUT/prompts-$d.txt"
done
export OMP_NUM_THREADS=$THREADS
# Threads that sleep between parallel regions instead of spinning: on a shared machine spinning
# workers steal the cores the other model needs (models/TRAINING.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

CELLS="$OUT/cells.tsv"
: > "$CELLS"
t_start=$(date +%s)
for spec in $DRAFTS; do
  label=${spec%%=*}; draft=${spec#*=}
  if [ "$label" = "$spec" ]; then label=$(basename "$draft"); label=${label%.*}; fi
  for d in $DOMAINS; do
    for t in $TEMPS; do
      tag="${label}_${d}_t${t}"
      m="$OUT/m_$tag.h5"; r="$OUT/r_$tag.h5"
      echo "evidence: $tag" >&2
      status=ok
      if ! "$S" measure --target "$TARGET" --draft "$draft" --prompts "$OUT/prompts-$d.txt" --tokens "$N" \
           --temperature "$t" --seed "$SEED" --dist none --shard-sequences 2 --out "$m" > /dev/null 2> "$OUT/err_m_$tag.txt" ||
         ! "$S" analyze "$m" --no-dists --gamma-max "$G" --boot "$BOOT" --seed "$SEED" --format json \
           > "$OUT/a_$tag.json" 2>> "$OUT/err_m_$tag.txt"; then
        status="measure failed: $(tail -1 "$OUT/err_m_$tag.txt")"
      elif ! "$S" run --target "$TARGET" --draft "$draft" --prompts "$OUT/prompts-$d.txt" --tokens "$N" --gamma "$G" \
           --temperature "$t" --seed "$SEED" --cost-reps "$REPS" --boot "$BOOT" --shard-prompts 1 --out "$r" \
           --format json > "$OUT/r_$tag.json" 2> "$OUT/err_r_$tag.txt"; then
        status="run failed: $(tail -1 "$OUT/err_r_$tag.txt")"
      fi
      printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$d" "$t" "$tag" "$status" >> "$CELLS"
    done
  done
done
elapsed=$(( $(date +%s) - t_start ))

/usr/bin/python3 - "$OUT" "$TARGET" "$G" "$K" "$N" "$THREADS" "$elapsed" <<'PY'
import json, sys
out, target, G, K, N, threads, elapsed = sys.argv[1:8]
def f(x, d=3):
    return "–" if x is None else f"{x:.{d}f}"
rows = []
def paired(r):
    d = r.get("alpha_minus_beta_tested")
    if d is None:
        return "–"
    ok = d["ci_lo"] is not None and d["ci_lo"] <= 1e-6 and -1e-6 <= d["ci_hi"]  # float rounding of beta
    return f"{d['value']:+.3f} [{d['ci_lo']:+.3f}, {d['ci_hi']:+.3f}] {'yes' if ok else 'no'}"
hdr = ("| draft | domain | T | α measured [95% CI] | α̂ run [95% CI] | run in CI | β̄ tested (run) | α̂ − β̄ tested [95% CI], 0 inside "
       "| tokens/iter | c | v(γ+1) "
       "| speedup measured [95% CI] | Thm 3.8 | generalised | gen. within 10% | with in-run costs |")
rows.append(hdr)
rows.append("|" + "---|" * (hdr.count("|") - 1))
notes = []
for line in open(f"{out}/cells.tsv"):
    label, dom, t, tag, status = line.rstrip("\n").split("\t")
    if status != "ok":
        rows.append(f"| {label} | {dom} | {t} | {status} |" + " |" * 12)
        continue
    a = json.load(open(f"{out}/a_{tag}.json"))["summary"][0]
    r = {m["metric"]: m for m in json.load(open(f"{out}/r_{tag}.json"))["run"]}
    al, lo, hi = a["alpha"], a["alpha_ci_lo"], a["alpha_ci_hi"]
    ah = r["alpha_hat"]
    inside = lo - 1e-9 <= ah["value"] <= hi + 1e-9  # float noise at alpha = 1
    sp, gen = r["speedup"], r["predicted_general"]["value"]
    within = abs(gen / sp["value"] - 1) <= 0.10 if gen and sp["value"] else None
    rows.append(
        f"| {label} | {dom} | {t} | {f(al)} [{f(lo)}, {f(hi)}] | {f(ah['value'])} [{f(ah['ci_lo'])}, {f(ah['ci_hi'])}] "
        f"| {'yes' if inside else 'no'} | {f(r['beta_tested']['value'])} | {paired(r)} | {f(r['tokens_per_iteration']['value'], 2)} | {f(r['c']['value'])} "
        f"| {f(r['v_gamma_plus_1']['value'], 2)} | {f(sp['value'])} [{f(sp['ci_lo'])}, {f(sp['ci_hi'])}] "
        f"| {f(r['predicted_thm38']['value'])} | {f(gen)} | {'–' if within is None else 'yes' if within else 'no'} "
        f"| {f(r['predicted_in_run_costs']['value'])} |")
text = "\n".join([
    f"Target `{target}`; γ = {G}; {K} prompts × {N} tokens per cell; OMP_NUM_THREADS = {threads}; {elapsed} s in all.",
    "α measured: mean β over target-generated text (`speclab measure` + `analyze`, bootstrap over prompts).",
    "α̂ run: accepted / tested drafts in `speclab run` (CI over prompts); 'run in CI': α̂ inside the measured α's CI.",
    "β̄ tested: mean logged β at the run's tested positions, which α̂ must match whatever selects the positions",
    "(the measure log weighs all positions alike; the run tests positions after an acceptance more often);",
    "α̂ − β̄ tested: the paired difference over the same tested drafts with its bootstrap CI over prompts, which",
    "must contain 0 (given its context a draft is accepted with probability β).",
    "Speedup: autoregressive / speculative time per token (CI over prompts); predictions at α̂ with c and v(n)",
    "measured in the same run; 'with in-run costs' uses the decode's own draft and verification times.",
    "",
] + rows) + "\n"
open(f"{out}/evidence.md", "w").write(text)
sys.stdout.write(text)
PY
