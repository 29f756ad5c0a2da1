#!/usr/bin/env bash
# alternate two speclab binaries: speclab run, shipped target + distilled draft, T=1, gamma 4
cd /work/main; F=models/family; T=/tmp/exp/abb; mkdir -p $T; head -n ${P:-12} data/prompts/prose.txt > $T/p.txt
for r in $(seq ${ROUNDS:-3}); do for b in "$@"; do
  rm -rf $T/r.h5 $T/r.h5.d
  OMP_NUM_THREADS=${TH:-1} OMP_WAIT_POLICY=${WP:-passive} $b run --target $F/target.safetensors --draft ${DRAFT:-$F/draft-s-distilled.safetensors} \
    --prompts $T/p.txt --tokens ${N:-96} --gamma ${G:-4} --temperature ${TEMP:-1} --seed 1 --cost-reps 5 --out $T/r.h5 --format json > $T/r.json 2>$T/err || { tail -1 $T/err; exit 1; }
  /usr/bin/python3 - $T/r.json $b $(( ${P:-12} * ${N:-96} )) <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = {x["metric"]: x for x in r["run"]}; t = {x["component"]: x["seconds"] for x in r["time_split"]}; n=int(sys.argv[3])
print("%-28s AR %.3f spec %.3f ms/tok speedup %.3f [%.3f, %.3f] v %.3f c %.3f v_in_run %.3f c_in_run %.3f" % (sys.argv[2], t["autoregressive_total"]/n*1e3, t["speculative_total"]/n*1e3, m["speedup"]["value"], m["speedup"]["ci_lo"], m["speedup"]["ci_hi"], m["v_gamma_plus_1"]["value"], m["c"]["value"], m["v_in_run"]["value"], m["c_in_run"]["value"]))
PY
done; done
