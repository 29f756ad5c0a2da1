#!/usr/bin/env bash
# speclab dist: values against an independent numpy computation, and every bad input -> exit 2
# with a one-line message on stderr and nothing on stdout.
set -u
S=${SPECLAB:-build/speclab}
fail=0
check_bad() { # expected-substring args...
  local want=$1; shift
  local out err rc
  out=$("$S" "$@" 2>/tmp/sl_err.$$); rc=$?; err=$(cat /tmp/sl_err.$$)
  if [ $rc -ne 2 ] || [ -n "$out" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || ! grep -q -- "$want" <<<"$err"; then
    echo "FAIL: speclab $* -> rc=$rc stderr='$err' (wanted exit 2, one line containing '$want')"; fail=1
  fi
}
check_bad "not a finite number" dist --p 0.5,nan --q 0.5,0.5
check_bad "not a finite number" dist --p 0.5,inf --q 0.5,0.5
check_bad "negative" dist --p 1.5,-0.5 --q 0.5,0.5
check_bad "sums to" dist --p 0.5,0.4 --q 0.5,0.5
check_bad "vocabulary mismatch" dist --p 0.5,0.5 --q 0.2,0.3,0.5
check_bad "lenience" dist --p 0.5,0.5 --q 0.5,0.5 --lenience 0
check_bad "lenience" dist --p 0.5,0.5 --q 0.5,0.5 --lenience 1.5
check_bad "top-p" dist --logits 1,2 --top-p 0
check_bad "temperature" dist --logits 1,2 --temperature -1
check_bad "cannot open" dist --p @/nonexistent --q 0.5,0.5
check_bad "format" dist --p 0.5,0.5 --q 0.5,0.5 --format xml
check_bad "unknown" dist --bogus

# Values: beta, D_LK, KL and the residual against numpy (tolerance 1e-12: same doubles, few terms).
"$S" dist --p 0.5,0.3,0.2,0 --q 0.1,0.3,0.4,0.2 --format json > /tmp/sl_dist.$$.json || fail=1
/usr/bin/python3 - /tmp/sl_dist.$$.json <<'PY' || fail=1
import json, sys
import numpy as np
r = json.load(open(sys.argv[1]))
s = r["summary"][0]
p = np.array([0.5, 0.3, 0.2, 0]); q = np.array([0.1, 0.3, 0.4, 0.2])
beta = np.minimum(p, q).sum()
kl = sum(pi * np.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)
res = np.maximum(p - q, 0); res /= res.sum()
ok = abs(s["beta"] - beta) < 1e-12 and abs(s["d_lk"] - (1 - beta)) < 1e-12 and abs(s["kl_p_q"] - kl) < 1e-12
ok &= s["kl_q_p"] is None  # +inf: q has mass where p has none; JSON has no infinity
ok &= abs(s["alpha_sampler_match"] - (p * q).sum()) < 1e-12
ok &= abs(s["alpha_nonit_rejection"] - min(q[i] / p[i] for i in range(4) if p[i] > 0)) < 1e-12
ok &= all(abs(t["residual"] - res[i]) < 1e-12 for i, t in enumerate(r["per_token"]))
print("dist values vs numpy:", "ok" if ok else "MISMATCH", s)
sys.exit(0 if ok else 1)
PY
rm -f /tmp/sl_err.$$ /tmp/sl_dist.$$.json
exit $fail
