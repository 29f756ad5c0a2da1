#!/bin/bash
# old (37a14d8) vs new speclab, alternated: lookup:3, T = 0, gamma 3, 16 prose prompts x 96 tokens, 2 threads active
cd /work/main
head -16 data/prompts/prose.txt > /tmp/dr/p16.txt
for r in 1 2 3; do
  for v in old new; do
    S=$([ $v = old ] && echo /tmp/old/build/speclab || echo build/speclab)
    rm -rf /tmp/dr/ab_$v.h5*
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active $S run --target models/family/target.safetensors --draft lookup:3 --prompts /tmp/dr/p16.txt \
      --tokens 96 --gamma 3 --temperature 0 --seed 1 --cost-reps 7 --out /tmp/dr/ab_$v.h5 --format json --quiet > /tmp/dr/ab_$v.json
    /usr/bin/python3 -c "
import json; r={m['metric']: m['value'] for m in json.load(open('/tmp/dr/ab_$v.json'))['run']}
print('round $r $v: AR %.3f ms/token, spec %.3f ms/token, speedup %.3f, v_in_run %.3f' % (r['ar_time_per_token_s']*1e3, r['spec_time_per_token_s']*1e3, r['speedup'], r['v_in_run']))"
  done
done
