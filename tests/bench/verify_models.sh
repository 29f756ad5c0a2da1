#!/usr/bin/env bash
# verify_models.sh: K continuations of one prompt on the shipped pair, both modes (speculative and
# autoregressive), two ways side by side on the same machine, one after the other:
#   route A  the prompt repeated K times in a prompts file through `speclab run --tokens-out`
#            (every sequence prefills the prompt; the run also calibrates c and v(n) and writes
#            its log: what a user had to do before `verify --target`);
#   route B  `speclab verify --target --draft --prompts` (the prompt scored once per worker,
#            samples spread over --threads workers, the tests included).
# Prints both wall times, the ratio A / B and MET/MISSED against the target ratio of 5.
# Each route's CPU seconds (user + sys, /usr/bin/time) are printed too: on a machine shared with
# other jobs the wall times drift with the load, and the load average is printed before each route.
# Usage: tests/bench/verify_models.sh [K] (default 5000); THREADS (default 2) sets route B's workers.
# The saved results: tests/bench/results/verify_models_<git short rev>.txt (this script's output).
set -u
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
K=${1:-5000}
TH=${THREADS:-2}
F=models/family
TD=$(mktemp -d); trap 'rm -rf "$TD"' EXIT
head -n 1 data/prompts/prose.txt > "$TD/one.txt"
for _ in $(seq "$K"); do cat "$TD/one.txt"; done > "$TD/rep.txt"
now() { date +%s.%N; }
echo "target $F/target.safetensors, draft $F/draft-s-distilled.safetensors; prompt: line 1 of data/prompts/prose.txt"
echo "K = $K continuations x 4 tokens, gamma 3, T = 1, both modes; $(nproc) cores; $(uptime | sed 's/.*load/load/')"
echo "route A starts: $(uptime | sed 's/.*load/load/')"
t0=$(now)
/usr/bin/time -f "%U %S" -o "$TD/a.time" "$S" run --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompts "$TD/rep.txt" \
  --tokens 4 --gamma 3 --seed 1 --tokens-out "$TD/a.txt" --out "$TD/a.h5" --quiet --format csv > "$TD/a.csv" 2> "$TD/a.err" \
  || { echo "route A failed: $(tail -1 "$TD/a.err")"; exit 1; }
ta=$(now)
echo "route B starts: $(uptime | sed 's/.*load/load/')"
t1=$(now)
/usr/bin/time -f "%U %S" -o "$TD/b.time" "$S" verify --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompts "$TD/one.txt" \
  --samples "$K" --tokens 4 --gamma 3 --seed 1 --threads "$TH" --samples-out "$TD/b.txt" --quiet --format csv \
  > "$TD/b.csv" 2> "$TD/b.err"
rc=$?
t2=$(now)
[ $rc -le 1 ] || { echo "route B failed: $(tail -1 "$TD/b.err")"; exit 1; }
na=$(wc -l < "$TD/a.txt"); nb=$(wc -l < "$TD/b.txt")
echo "route B verdict: $(grep -A1 '^rule' "$TD/b.csv" | tail -1 | awk -F, '{print $NF}'), exit $rc"
echo "route B split (s): $(grep -A1 '^samples' "$TD/b.csv" | tail -1 | awk -F, '{printf "speculative %s, autoregressive %s, whole call %s", $10, $11, $12}')"
# (time prefixes a line "Command exited with non-zero status 1" when verify rejects: the last line counts)
ca=$(tail -1 "$TD/a.time" | awk '{print $1 + $2}'); cb=$(tail -1 "$TD/b.time" | awk '{print $1 + $2}')
awk -v a0="$t0" -v a1="$ta" -v b0="$t1" -v b1="$t2" -v na="$na" -v nb="$nb" -v th="$TH" -v ca="$ca" -v cb="$cb" 'BEGIN {
  a = a1 - a0; b = b1 - b0;
  printf "route A  speclab run --tokens-out          %8.1f s wall  %8.1f s CPU  (%d sequences)\n", a, ca, na;
  printf "route B  speclab verify --target (%d thr)   %8.1f s wall  %8.1f s CPU  (%d sequences)\n", th, b, cb, nb;
  printf "CPU-time ratio A / B: %.2fx\n", ca / cb;
  printf "ratio A / B: %.2fx  target >= 5x: %s\n", a / b, (a / b >= 5 ? "MET" : "MISSED");
  printf "TARGET verify_models.route_a_over_b value=%.4f target=>=5 unit=x %s\n", a / b, (a / b >= 5 ? "MET" : "MISSED") }'
