#!/usr/bin/env bash
# alternate SL_STEAL_FROM=4 (static at 2 threads) and the default (steal) in speclab run, 2 threads active
cd /work/main; F=models/family; T=/tmp/exp/e2e; mkdir -p $T; head -n ${P:-12} data/prompts/prose.txt > $T/p.txt
DRAFT=${DRAFT:-$F/draft-s-distilled.safetensors}; G=${G:-4}; TEMP=${TEMP:-1}
for r in $(seq ${ROUNDS:-3}); do for s in 4 2; do
  rm -rf $T/r.h5 $T/r.h5.d
  SL_STEAL_FROM=$s OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active build/speclab run --target $F/target.safetensors --draft $DRAFT \
    --prompts $T/p.txt --tokens ${N:-96} --gamma $G --temperature $TEMP --seed 1 --cost-reps 5 --out $T/r.h5 --format json > $T/r.json 2>$T/err || { tail -1 $T/err; exit 1; }
  python3 - $T/r.json $s $(( ${P:-12} * ${N:-96} )) <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = {x["metric"]: x for x in r["run"]}; t = {x["component"]: x["seconds"] for x in r["time_split"]}; n=int(sys.argv[3])
print("steal_from %s: AR %.3f spec %.3f ms/tok speedup %.3f [%.3f, %.3f] v %.3f c %.3f" % (sys.argv[2], t["autoregressive_total"]/n*1e3, t["speculative_total"]/n*1e3, m["speedup"]["value"], m["speedup"]["ci_lo"], m["speedup"]["ci_hi"], m["v_gamma_plus_1"]["value"], m["c"]["value"]))
PY
done; done
