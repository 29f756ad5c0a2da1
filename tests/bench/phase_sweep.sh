#!/usr/bin/env bash
# phase_sweep.sh [OUT.csv] [ROUNDS]: how issue 18's two CPU targets move with the state of a shared
# machine. Each round runs, back to back: bench_engine on the shipped target only (one STREAM-like
# reading; t(1), t(5)/t(1) and the least t(5)/t(1) the packed kernel's inner loop allows, on one and two
# threads, packed weights) and a short cpu_options
# (prompt lookup at T = 0 on the f16 target, one and two threads: speedup at the best gamma, its
# 95% CI; make bench's short cpu_options, lookup only). One CSV row per round (default
# analysis/phase_sweep.csv, 12 rounds of ~22 s on the Zen 5 VM), so that "met" reads as "met in k of n rounds",
# with the machine's memory speed beside each. Not run by make bench (run_all.sh skips it).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-analysis/phase_sweep.csv}
ROUNDS=${2:-12}
case "$ROUNDS" in ""|*[!0-9]*|0) echo "phase_sweep: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2 ;; esac
B=${BUILD:-build}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo "round,utc,stream_gbs,t1_ms_1thr,t5_over_t1_1thr,least_1thr,t1_ms_2thr,t5_over_t1_2thr,least_2thr,lookup_gamma_1thr,lookup_speedup_1thr,lookup_ci_lo_1thr,lookup_ci_hi_1thr,lookup_gamma_2thr,lookup_speedup_2thr,lookup_ci_lo_2thr,lookup_ci_hi_2thr" > "$T/out.csv"
for r in $(seq 1 "$ROUNDS"); do
  utc=$(date -u +%H:%M:%S)
  BENCH_ENGINE_PARTS=family "$B/bench/bench_engine" > "$T/be.txt" 2>&1 || { echo "phase_sweep: bench_engine failed" >&2; tail -3 "$T/be.txt" >&2; exit 1; }
  DRAFTS=lookup:3 PROMPTS=${PROMPTS:-16} TOKENS=${TOKENS:-96} THREADS="1 2" bash tests/bench/cpu_options.sh "$T/co.csv" > /dev/null 2> "$T/co.err" \
    || { echo "phase_sweep: cpu_options failed" >&2; tail -3 "$T/co.err" >&2; exit 1; }
  /usr/bin/python3 - "$T/be.txt" "$T/co.csv" "$r" "$utc" >> "$T/out.csv" <<'PY'
import csv, re, sys
be = open(sys.argv[1]).read()
bw = float(re.search(r"STREAM-like read bandwidth .*?: ([0-9.]+) GB/s", be).group(1))
fam = {}
for m in re.finditer(r"at (\d) thread\(s\): t\(1\) = ([0-9.]+) ms; t\(n\)/t\(1\) for n = 2\.\.8: (\S+) (\S+) (\S+) (\S+)", be):
    fam[int(m.group(1))] = [float(m.group(2)), float(m.group(6))]
# the least t(5)/t(1) with the matmuls at the packed kernel's inner-loop ceiling, one per thread count in order
least = [float(x) for x in re.findall(r"inner loop at five tokens .*least t\(5\)/t\(1\) then: .* = ([0-9.]+)", be)]
for th, v in zip((1, 2), least):
    fam[th].append(v)
co = {int(r["threads"]): r for r in csv.DictReader(open(sys.argv[2]))}
row = [sys.argv[3], sys.argv[4], "%.2f" % bw]
for th in (1, 2):
    row += ["%.3f" % fam[th][0], "%.3f" % fam[th][1], "%.3f" % fam[th][2] if len(fam[th]) > 2 else ""]
for th in (1, 2):
    c = co[th]
    row += [c["best_gamma"], "%.3f" % float(c["speedup"]), "%.3f" % float(c["speedup_ci_lo"]), "%.3f" % float(c["speedup_ci_hi"])]
print(",".join(row))
PY
  tail -1 "$T/out.csv"
done
cp "$T/out.csv" "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = len(rows)
def k(f): return sum(1 for r in rows if f(r))
def out_of_reach(r, th): return r["least_" + th] != "" and float(r["least_" + th]) > 1.3
print(f"{n} rounds: t(5)/t(1) <= 1.3 in {k(lambda r: float(r['t5_over_t1_1thr']) <= 1.3)} (one thread), "
      f"{k(lambda r: float(r['t5_over_t1_2thr']) <= 1.3)} (two); out of reach even at the kernel's inner-loop ceiling in "
      f"{k(lambda r: out_of_reach(r, '1thr'))} (one), {k(lambda r: out_of_reach(r, '2thr'))} (two); lookup speedup >= 1.5 in "
      f"{k(lambda r: float(r['lookup_speedup_1thr']) >= 1.5)} (one thread), {k(lambda r: float(r['lookup_speedup_2thr']) >= 1.5)} (two)")
PY
