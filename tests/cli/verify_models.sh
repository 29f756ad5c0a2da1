#!/usr/bin/env bash
# speclab verify --target --draft on the shipped pair (small K, so it runs in well under a minute):
#  - the exact rule is consistent with lossless (exit 0), with every documented test present;
#  - a wrong variant (bug-draft-argmax) is rejected (exit 1) at the same K;
#  - speculative sample 0 equals `speclab generate` with the same seed (the sampler on unwrapped
#    models in another process: item 0 is sample 0's stream);
#  - same seed -> the same samples and tests with 1 and 2 threads;
#  - --samples-out writes 2K lines 'SEQ MODE t1,...,tk' and refuses to replace another file;
#  - at temperature 0 every sample is the greedy continuation and the exact rule passes;
#  - bad input -> exit 2, one line on stderr, nothing on stdout.
set -u
S=${SPECLAB:-build/speclab}
D=$(mktemp -d /tmp/sl_verify_models.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail=0
F=models/family
PROMPT=$(head -n 1 data/prompts/prose.txt)
V=("$S" verify --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt "$PROMPT" --quiet)

# 1. Exact rule, 2 threads, samples kept.
"${V[@]}" --samples 200 --seed 3 --threads 2 --samples-out "$D/s2.txt" --format json > "$D/exact.json" 2> "$D/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exact rule: exit $rc ($(tail -1 "$D/err"))"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: exact report or samples file"; fail=1; }
import json, re, sys
d = sys.argv[1]
r = json.load(open(f"{d}/exact.json"))
v = r["verdict"][0]
assert v["verdict"] == "consistent-with-lossless" and v["rule"] == "exact", v
names = [t["test"] for t in r["tests"]]
want = ["first", "ar_first"] + [f"position_{j}" for j in range(1, 5)] + ["pit_ks", "pit_chi2", "ar_pit_ks", "ar_pit_chi2", "support"]
assert names == want, names
t = {x["test"]: x for x in r["tests"]}
assert t["pit_ks"]["n"] == 800 and t["first"]["n"] == 200 and t["position_3"]["n"] == 200, t
assert t["support"]["p_value"] == 1
s = r["sampling"][0]
assert s["samples"] == 200 and s["tokens"] == 4 and s["gamma"] == 3 and s["threads"] == 2, s
lines = open(f"{d}/s2.txt").read().splitlines()
assert len(lines) == 400, len(lines)
for i, l in enumerate(lines):
    m = re.fullmatch(r"(\d+) (speculative|autoregressive) (\d+(,\d+){3})", l)
    assert m and int(m.group(1)) == i and m.group(2) == ("speculative" if i % 2 == 0 else "autoregressive"), l
    assert all(0 <= int(x) < 4096 for x in m.group(3).split(","))
PY

# 2. A wrong variant is rejected.
"${V[@]}" --samples 200 --seed 3 --rule bug-draft-argmax --format csv > "$D/bug.csv" 2> "$D/err"
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: bug-draft-argmax: exit $rc, expected 1"; fail=1; }
grep -q "not lossless" "$D/err" || { echo "FAIL: bug-draft-argmax: no 'not lossless' message"; fail=1; }

# 3. Sample 0 is what speclab generate draws with the same seed.
g=$("$S" generate --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt "$PROMPT" --gamma 3 \
      --tokens 4 --seed 3 --eos -1 --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["generation"][0]["token_ids"])')
s0=$(head -n 1 "$D/s2.txt" | cut -d' ' -f3)
[ "$g" = "$s0" ] || { echo "FAIL: sample 0 '$s0' differs from generate '$g'"; fail=1; }

# 4. One thread: the same samples and tests.
"${V[@]}" --samples 200 --seed 3 --threads 1 --samples-out "$D/s1.txt" --format json > "$D/exact1.json" 2> "$D/err"
cmp -s "$D/s1.txt" "$D/s2.txt" || { echo "FAIL: samples differ between 1 and 2 threads"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: tests differ between 1 and 2 threads"; fail=1; }
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/{n}.json")) for n in ("exact", "exact1"))
assert a["tests"] == b["tests"] and a["verdict"] == b["verdict"]
PY

# 5. Another file is not replaced; a token file is.
echo "precious" > "$D/keep.txt"
"${V[@]}" --samples 20 --samples-out "$D/keep.txt" > "$D/out" 2> "$D/err"
rc=$?
[ $rc -eq 2 ] && [ "$(cat "$D/keep.txt")" = precious ] && [ ! -s "$D/out" ] \
  || { echo "FAIL: --samples-out replaced a non-token file (exit $rc)"; fail=1; }
"${V[@]}" --samples 20 --samples-out "$D/s1.txt" > /dev/null 2> "$D/err"
[ $? -le 1 ] && [ "$(wc -l < "$D/s1.txt")" -eq 40 ] || { echo "FAIL: a token file was not replaced"; fail=1; }

# 6. Temperature 0: every sample is the greedy continuation; the exact rule passes.
"${V[@]}" --samples 50 --temperature 0 --samples-out "$D/t0.txt" --format csv > /dev/null 2> "$D/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: temperature 0: exit $rc ($(tail -1 "$D/err"))"; fail=1; }
[ "$(cut -d' ' -f3 "$D/t0.txt" | sort -u | wc -l)" -eq 1 ] || { echo "FAIL: temperature 0: samples differ"; fail=1; }

# 7. Bad input: exit 2, one line on stderr, nothing on stdout.
bad() {
  "$S" verify "$@" > "$D/out" 2> "$D/err"
  local rc=$?
  if [ $rc -ne 2 ] || [ -s "$D/out" ] || [ "$(wc -l < "$D/err")" -ne 1 ]; then
    echo "FAIL: bad input ($*): exit $rc, stderr: $(head -c 300 "$D/err")"; fail=1
  fi
}
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --samples 10
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt-ids 1,99999 --samples 10
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt "a" --samples 1
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt "a" --gamma 0
bad --target "$D/missing.safetensors" --draft $F/draft-s-distilled.safetensors --prompt "a" --samples 10
bad --target $F/target.safetensors --prompt "a"
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompts "$D/missing.txt"
bad --target $F/target.safetensors --draft $F/draft-s-distilled.safetensors --prompt "a" --tokens 100000

[ $fail -eq 0 ] && echo "verify_models: all checks passed"
exit $fail
