#!/usr/bin/env bash
# train_backend.sh: `speclab train|distill --backend` from the outside, on the cuda-emu build (the
# GPU backend's code run on the CPU; CI has no GPU). A run stopped and resumed gives the same file,
# byte for byte, as a run never stopped; the emulated run's log agrees with the CPU backend's to the
# printed digits; a checkpoint of one backend is refused by the other; a missing CUDA library or an
# unknown backend is exit 2 with one line.
set -u
. "$(dirname "$0")/lib/cli_common.sh"

/usr/bin/python3 "$(dirname "$0")/lib/pattern_tok.py" "$T" 5 31 200 5 2
CFG='{"n_layer":2,"n_head":2,"d_model":32,"d_ff":64,"max_seq_len":16,"vocab_size":64}'
RUN=(train --train "$T/train.tok" --valid "$T/valid.tok" --config "$CFG" --batch 8 --seq 16 --lr 3e-3 --warmup 4
     --seed 9 --eval-batches 2 --steps 24 --eval-every 6)

# same_tensors A B: the two safetensors files hold the same tensors, byte for byte (their metadata,
# which records the wall time, may differ).
same_tensors() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return b[8 + n:], {k: v for k, v in json.loads(b[8:8 + n]).items() if k != "__metadata__"}
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY
}

expect_2 "unknown backend" "is not cpu, cuda or cuda-emu" "${RUN[@]}" --backend tpu --out "$T/x.st"
SL_CUDA_LIB=$T/none.so expect_2 "cuda library missing" "cannot load" "${RUN[@]}" --backend cuda --out "$T/x.st"

"$S" "${RUN[@]}" --backend cuda-emu --out "$T/full.st" > "$T/full.log" 2>/dev/null || bad "uninterrupted cuda-emu run"
"$S" "${RUN[@]}" --backend cuda-emu --checkpoint "$T/ck" --stop-at 10 --out "$T/res.st" > /dev/null 2>&1
[ -f "$T/ck/checkpoint.bin" ] && [ ! -f "$T/res.st" ] && ok "stop-at leaves a checkpoint, no model" || bad "stop-at"
"$S" "${RUN[@]}" --backend cuda-emu --checkpoint "$T/ck" --out "$T/res.st" > "$T/res.log" 2>/dev/null || bad "resume"
same_tensors "$T/full.st" "$T/res.st" && ok "resumed cuda-emu run equals the uninterrupted one (tensor bytes)" || bad "resume differs"
grep -qF 'backend\":\"cuda-emu' "$T/full.st" && ok "the exported training record names the backend" || bad "backend not recorded"

# Same recipe on the CPU backend: the logged losses agree to the printed digits (the emulation sums
# in other orders; differences are ~1e-7 relative, far below the 6 printed digits' 1e-6).
"$S" "${RUN[@]}" --out "$T/cpu.st" > "$T/cpu.log" 2>/dev/null || bad "cpu run"
/usr/bin/python3 - "$T/cpu.log" "$T/full.log" <<'PY' && ok "cpu and cuda-emu logs agree (val_ce within 2e-5)" || bad "cpu vs cuda-emu logs differ"
import csv, sys
rows = [list(csv.DictReader(open(p))) for p in sys.argv[1:]]
assert len(rows[0]) == len(rows[1]) == 4
for a, b in zip(*rows):
    assert abs(float(a["val_ce"]) - float(b["val_ce"])) <= 2e-5, (a["val_ce"], b["val_ce"])
PY

# The dlopen path of --backend cuda end to end, without a GPU: the emulation built as a shared
# library under the CUDA entry point gives the same tensor bytes as --backend cuda-emu.
if cc -std=c11 -D_GNU_SOURCE -O2 -march=x86-64-v3 -fopenmp -fPIC -shared -fvisibility=hidden -DSLG_EMU_AS_LIBRARY \
     -Imodels/train $(pkg-config --cflags openblas) models/train/sl_train_gpu.c -o "$T/libemu.so" $(pkg-config --libs openblas) -lm 2>"$T/cc.err"; then
  SL_CUDA_LIB=$T/libemu.so "$S" "${RUN[@]}" --backend cuda --out "$T/dl.st" > /dev/null 2>&1 || bad "--backend cuda through dlopen"
  same_tensors "$T/full.st" "$T/dl.st" && ok "--backend cuda through dlopen (emulation library) equals cuda-emu" || bad "dlopen run differs"
else
  bad "building the emulation library: $(head -n 3 "$T/cc.err")"
fi

# A CPU checkpoint is not resumed on another backend (its bits would not continue the same run).
"$S" "${RUN[@]}" --checkpoint "$T/ck2" --stop-at 6 --out "$T/y.st" > /dev/null 2>&1
expect_2 "cpu checkpoint refused by cuda-emu" "backend" "${RUN[@]}" --backend cuda-emu --checkpoint "$T/ck2" --out "$T/y.st"

exit $fail
