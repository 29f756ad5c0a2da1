#!/usr/bin/env bash
# make demo: the main job on the shipped pair (the 27.4M-parameter target and its distilled draft,
# the best draft for this CPU): measure alpha on held-out prompts, decode for real against the
# autoregressive baseline, analyse, recommend gamma, verify the sampler, draw the figures, write
# the notebook, and end with a one-screen summary. Logs go to a temporary folder; the figures go
# to plots/demo/ and the notebook to notebooks_export/demo.ipynb (both regenerated, git-ignored).
# Numbers are read from `--format json` with python's json module, never scraped from tables.
set -euo pipefail
S=${SPECLAB:-build/speclab}
PY=/usr/bin/python3
TARGET=models/family/target.safetensors
DRAFT=models/family/draft-s-distilled.safetensors
FIG=plots/demo
NB=notebooks_export/demo.ipynb
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$FIG"
t0=$(date +%s)

# jq-like reads: j FILE EXPR prints EXPR evaluated with d = the file's JSON.
j() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
section() { printf '\n== %s (%ss) ==\n' "$1" "$(($(date +%s) - t0))"; }

# Held-out prompts, disjoint: lines 1-16 of the prose set for measure, 17-20 for run.
sed -n 1,16p data/prompts/prose.txt > "$W/measure_prompts.txt"
sed -n 17,20p data/prompts/prose.txt > "$W/run_prompts.txt"

section "theory: optimal gamma and its walltime factor for a few alpha and c (Leviathan et al., Theorem 3.8)"
"$S" theory --alpha 0.5:0.9:0.1 --optimal --c 0.02,0.05,0.1 --format json > "$W/theory.json"
"$PY" - "$W/theory.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d if isinstance(d, list) else next(iter(d.values()))
print(f"{'alpha':>6} {'c':>6} {'gamma_opt':>10} {'walltime_factor':>16}")
for r in rows:
    print(f"{r['alpha']:>6.2f} {r['c']:>6.2f} {r['gamma_opt']:>10} {r['walltime_factor_opt']:>16.3f}")
PY

section "mc: Monte Carlo of Algorithm 1 on a synthetic noisy pair next to the theory (CIs at 95%)"
"$S" mc --family noisy --vocab 1000 --gamma 4 --iterations 200000 --c 0.05 --c-hat 0.02 > "$W/mc.txt"
awk '$0 == "# summary" { on = 1 } on && /^$/ { exit } on' "$W/mc.txt"

section "the pair"
"$S" model info "$TARGET" | sed -n 1,3p
"$S" model info "$DRAFT" | sed -n 1,3p

section "measure: the target writes 64 tokens after each of 16 prose prompts; p and q logged at every position"
"$S" measure --target "$TARGET" --draft "$DRAFT" --prompts "$W/measure_prompts.txt" --tokens 64 --seed 1 \
  --out "$W/m.h5"

section "run: real speculative decoding (gamma 2) vs the autoregressive baseline on 4 other prompts, c and v(n) measured"
"$S" run --target "$TARGET" --draft "$DRAFT" --prompts "$W/run_prompts.txt" --tokens 64 --gamma 2 --seed 1 \
  --out "$W/run.h5" --format json > "$W/run.json"
# The run's report as a short table: metric, value, CI.
"$PY" - "$W/run.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keep = ["alpha_hat", "tokens_per_iteration", "c", "v_gamma_plus_1", "speedup", "predicted_thm38",
        "predicted_general", "ar_time_per_token_s", "spec_time_per_token_s"]
f = lambda x: "" if x is None else f"{x:.4g}"
print(f"{'metric':<24} {'value':>10} {'ci_lo':>10} {'ci_hi':>10}")
for r in d["run"]:
    if r["metric"] in keep:
        print(f"{r['metric']:<24} {f(r['value']):>10} {f(r['ci_lo']):>10} {f(r['ci_hi']):>10}")
PY
c=$(j "$W/run.json" '[r["value"] for r in d["run"] if r["metric"] == "c"][0]')
vtab=$(j "$W/run.json" '",".join("%d:%.4f" % (r["n"], r["v"]) for r in d["costs"] if 2 <= r["n"] <= 9)')

section "analyze the measure log: alpha with a bootstrap CI over prompts, acceptance per position, optimal gamma at the run's c"
"$S" analyze "$W/m.h5" --c "$c" --gamma-max 8 --format json > "$W/analyze.json"
"$S" analyze "$W/m.h5" --c "$c" --gamma-max 8 > "$W/analyze.txt"
for sec in summary acceptance_by_position optimal_gamma; do
  awk -v s="# $sec" '$0 == s { on = 1 } on && /^$/ { exit } on' "$W/analyze.txt"; echo
done

section "recommend: the gamma to deploy, from the run log (its measured costs)"
"$S" recommend "$W/run.h5" --format json > "$W/rec_run.json"
"$S" recommend "$W/run.h5" > "$W/rec_run.txt"
awk '$0 == "# recommendation" { on = 1 } on && /^$/ { exit } on' "$W/rec_run.txt"
section "recommend: from the measure log (16 prompts) with the run's c and v(n)"
"$S" recommend "$W/m.h5" --c "$c" --v-table "$vtab" --format json > "$W/rec_m.json"
"$S" recommend "$W/m.h5" --c "$c" --v-table "$vtab" > "$W/rec_m.txt"
awk '$0 == "# recommendation" { on = 1 } on && /^$/ { exit } on' "$W/rec_m.txt"

section "choose gamma: a sweep (each prompt at gamma 1, 2, 3 and plain, back to back) and one answer"
"$S" run --target "$TARGET" --draft "$DRAFT" --prompts "$W/run_prompts.txt" --tokens 64 --gamma 1:3 --seed 1 \
  --out "$W/sweep.h5" --format json > "$W/sweep.json"
"$S" recommend "$W/m.h5" "$W/sweep.h5" --gamma-max 8 --format json > "$W/rec_sweep.json"
"$PY" - "$W/rec_sweep.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda x: "-" if x is None else f"{x:.3f}"
print(f"{'gamma':>5} {'replay tok/iter':>15} {'cost/iter':>10} {'predicted':>10} {'measured':>10} {'error':>8}  cost source")
for r in d["per_gamma"]:
    print(f"{r['gamma']:>5} {f(r['tokens_per_iteration']):>15} {f(r['cost_per_iteration']):>10} {f(r['predicted_speedup']):>10} "
          f"{f(r['measured_speedup']):>10} {f(r['prediction_error']):>8}  {r['cost_source']}")
r = d["recommendation"][0]
print(f"recommended gamma {r['gamma']} ({r['basis']}): {r['expected_speedup']:.3f} [{r['speedup_ci_lo']:.3f}, {r['speedup_ci_hi']:.3f}]")
PY

section "verify"
echo "The real pair in one process: 1000 speculative and 1000 autoregressive 4-token continuations."
rc=0; "$S" verify --target "$TARGET" --draft "$DRAFT" --prompt "$(head -n 1 "$W/run_prompts.txt")" --samples 1000 \
  --tokens 4 --seed 1 --quiet --format json > "$W/verify_real.json" 2>/dev/null || rc=$?
j "$W/verify_real.json" '"real   rule %-22s %s: %d of %d tests rejected, min Holm p %.3g" % (d["verdict"][0]["rule"], d["verdict"][0]["verdict"], d["verdict"][0]["rejected_tests"], d["verdict"][0]["tests"], d["verdict"][0]["min_p_holm"])'
echo "Then the built-in sampler on a synthetic pair (V = 8, gamma = 3, 200000 iterations)."
"$S" verify --format json > "$W/verify_exact.json"
rc=0; "$S" verify --rule bug-resample-from-p --format json > "$W/verify_bug.json" 2> "$W/verify_bug.err" || rc=$?
for k in exact bug; do
  j "$W/verify_$k.json" '"%-6s rule %-22s %s: %d of %d tests rejected, min Holm p %.3g" % ("'$k'", d["verdict"][0]["rule"], d["verdict"][0]["verdict"], d["verdict"][0]["rejected_tests"], d["verdict"][0]["tests"], d["verdict"][0]["min_p_holm"])'
done
echo "(the bug variant exits $rc: 1 = not lossless)"

section "figures: plots/demo/"
"$S" plot beta-hist "distilled draft=$W/m.h5" -o "$FIG/beta-hist.png"
"$S" plot lenience "$W/m.h5" -o "$FIG/lenience.png"
"$S" plot acceptance-position "$W/m.h5" --run "$W/run.h5" --gamma-max 8 -o "$FIG/acceptance-position.png"
"$S" plot alpha-ci "distilled draft=$W/m.h5" -o "$FIG/alpha-ci.png"
"$S" plot theory-speedup --c "$(printf '%.3f' "$c")" -o "$FIG/theory-speedup.png"
ls "$FIG"/*.png

section "notebook: notebooks_export/demo.ipynb (reloads both logs with h5py, recomputes with numpy)"
"$S" export-notebook "$W/m.h5" "$W/run.h5" -o "$NB" --force

section "summary"
"$PY" - "$W" "$FIG" "$NB" "$(($(date +%s) - t0))" <<'PY'
import json, os, sys
W, FIG, NB, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
L = lambda n: json.load(open(os.path.join(W, n)))
an, run, rr, rm, rs = L("analyze.json"), L("run.json"), L("rec_run.json"), L("rec_m.json"), L("rec_sweep.json")
ve, vb = L("verify_exact.json"), L("verify_bug.json")
s = an["summary"][0]
R = {r["metric"]: r for r in run["run"]}
ci = lambda r: f"{r['value']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]"
print(f"pair             {os.path.basename(s['target'])} <- {os.path.basename(s['draft'])}, T = {s['temperature']:g}")
print(f"alpha (measure)  {s['alpha']:.3f}, 95% CI [{s['alpha_ci_lo']:.3f}, {s['alpha_ci_hi']:.3f}] "
      f"({s['sequences']} prompts, {s['rows']} positions)")
print(f"alpha (run)      {ci(R['alpha_hat'])}  at gamma {R['gamma']['value']:.0f}")
print(f"costs (run)      c = {R['c']['value']:.3f}, v(gamma+1) = {R['v_gamma_plus_1']['value']:.2f} target steps")
for name, rec in (("run log:    ", rr), ("measure log:", rm), ("m + sweep:  ", rs)):
    r = rec["recommendation"][0]
    print(f"gamma, {name} {r['gamma']}: expected speedup {r['expected_speedup']:.3f} "
          f"[{r['speedup_ci_lo']:.3f}, {r['speedup_ci_hi']:.3f}]" + ("  (0 = do not speculate)" if r["gamma"] == 0 else ""))
print(f"speedup, gamma {R['gamma']['value']:.0f}  measured {ci(R['speedup'])}")
for k, name in (("predicted_general", "E[N]/(gamma c + v(gamma+1))"), ("predicted_thm38", "Theorem 3.8 (v = 1)")):
    inside = R["speedup"]["ci_lo"] <= R[k]["value"] <= R["speedup"]["ci_hi"]
    print(f"  predicted      {R[k]['value']:.3f} by {name}: {'inside' if inside else 'outside'} the measured CI")
for lab, v in (("exact rule", ve), ("bug variant", vb)):
    d = v["verdict"][0]
    powers = [t["power"] for t in v["tests"] if t.get("power") is not None]
    print(f"verify, {lab + ':':<12} {d['verdict']}: {d['rejected_tests']}/{d['tests']} tests rejected at level "
          f"{d['level']:g}; power >= {min(powers):.3f} against TV {d['tv_delta']:g} (synthetic pair; real pair: issue 15)")
print(f"wrote            {FIG}/{{beta-hist,lenience,acceptance-position,alpha-ci,theory-speedup}}.png (+ .dat, .gp)")
print(f"                 {NB}")
print(f"demo time        {secs} s")
PY
