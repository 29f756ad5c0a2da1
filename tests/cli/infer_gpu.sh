#!/usr/bin/env bash
# --device cuda-emu (the inference GPU backend's kernels on the CPU, models/sl_infer_gpu.h) through
# the commands, on the tests/ref fixtures (vocabulary 256, no tokenizer):
#  - run: the same tokens as --device cpu for the same seed (speculative and autoregressive). The
#    logits agree to ~1e-6 relative (tests/test_infer_gpu.c); a token could differ only if a
#    uniform draw fell within ~1e-6 of a CDF boundary, which these fixed seeds do not;
#  - verify --target --draft: the exact rule is consistent with lossless, and the samples equal
#    those of --device cpu;
#  - generate --autoregressive and eval run on the device (eval's mean log-loss equals the CPU's to 1e-5);
#  - bad input: an unknown device, or cuda without its library -> exit 2, one line on stderr.
set -u
S=${SPECLAB:-build/speclab}
D=$(mktemp -d /tmp/sl_infer_gpu.XXXXXX)
trap 'rm -rf "$D"' EXIT
fail=0
R=tests/ref
printf '1 2 3 4 5\n9 8 7\n100 200 50 25\n' > "$D/p.ids"
# 40 ids as a token file (models/TOKFILE.md): magic, vocab 256, 2 bytes per id, count, ids.
/usr/bin/python3 -c "
import struct, sys
ids = [(i * 37 + 11) % 256 for i in range(40)]
open(sys.argv[1], 'wb').write(b'SLTOK\0\0\1' + struct.pack('<IIQ', 256, 2, len(ids)) + struct.pack('<%dH' % len(ids), *ids))
" "$D/e.tok"

for dev in cpu cuda-emu; do
  "$S" run --target $R/gpt2_f32.safetensors --draft $R/llama_f16.safetensors --prompt-ids "$D/p.ids" --tokens 12 \
    --gamma 3 --cost-reps 1 --boot 0 --out "$D/r-$dev.h5" --tokens-out "$D/t-$dev" --quiet --device $dev >/dev/null \
    || { echo "FAIL: run --device $dev"; fail=1; }
  "$S" verify --target $R/llama_f32.safetensors --draft $R/gpt2_f16.safetensors --prompt-ids 5,6,7 --samples 150 \
    --tokens 3 --gamma 2 --seed 3 --quiet --device $dev --samples-out "$D/v-$dev" --format json > "$D/v-$dev.json" \
    || { echo "FAIL: verify --device $dev: exit $?"; fail=1; }
  "$S" eval --model $R/llama_f16.safetensors --tokens "$D/e.tok" --context 16 --device $dev --format csv > "$D/e-$dev.csv" 2>/dev/null \
    || { echo "FAIL: eval --device $dev"; fail=1; }
  "$S" generate --autoregressive --target $R/gpt2_f16.safetensors --prompt-ids 1,2,3 --tokens 10 --seed 2 --device $dev \
    --tokens-out "$D/g-$dev" >/dev/null || { echo "FAIL: generate --device $dev"; fail=1; }
done
cmp -s "$D/t-cpu" "$D/t-cuda-emu" || { echo "FAIL: run: cuda-emu tokens differ from cpu"; fail=1; }
cmp -s "$D/v-cpu" "$D/v-cuda-emu" || { echo "FAIL: verify: cuda-emu samples differ from cpu"; fail=1; }
cmp -s "$D/g-cpu" "$D/g-cuda-emu" || { echo "FAIL: generate: cuda-emu tokens differ from cpu"; fail=1; }
/usr/bin/python3 - "$D" <<'PY' || { echo "FAIL: verify verdict or eval numbers on cuda-emu"; fail=1; }
import csv, json, sys
d = sys.argv[1]
v = json.load(open(f"{d}/v-cuda-emu.json"))["verdict"][0]
assert v["rule"] == "exact" and v["verdict"] == "consistent-with-lossless", v
rows = {dev: list(csv.reader(l for l in open(f"{d}/e-{dev}.csv") if not l.startswith("#"))) for dev in ("cpu", "cuda-emu")}
a, b = rows["cpu"], rows["cuda-emu"]
assert a[0] == b[0] and len(a) == len(b) > 1, (a, b)
for ra, rb in zip(a[1:], b[1:]):
    for x, y in zip(ra, rb):
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            assert x == y, (x, y)
            continue
        assert abs(fx - fy) <= 1e-5 * max(1.0, abs(fx)), (ra, rb)
print("infer_gpu: run, verify, eval, generate on cuda-emu: ok")
PY

check_bad() { # NAME CMD...: exit 2, one line on stderr, nothing on stdout
  local name=$1; shift
  "$@" > "$D/out" 2> "$D/err"; local rc=$?
  [ $rc -eq 2 ] && [ ! -s "$D/out" ] && [ "$(wc -l < "$D/err")" -eq 1 ] \
    || { echo "FAIL: $name: exit $rc, stderr: $(cat "$D/err")"; fail=1; }
}
check_bad "unknown device" "$S" eval --model $R/gpt2_f32.safetensors --tokens "$D/e.tok" --device tpu
SL_INFER_CUDA_LIB=/nonexistent/libsl_infer_cuda.so check_bad "cuda without its library" \
  "$S" run --target $R/gpt2_f32.safetensors --draft $R/gpt2_f16.safetensors --prompt-ids "$D/p.ids" --tokens 4 \
  --gamma 2 --out "$D/bad.h5" --device cuda
exit $fail
