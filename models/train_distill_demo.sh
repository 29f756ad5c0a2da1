#!/usr/bin/env bash
# train_distill_demo.sh: a small, reproducible distillation experiment on byte-level King James
# Bible text (Debian's bible-kjv-text; no tokenizer needed, V = 256). Trains a teacher, then three
# drafts of one size: from data alone (cross-entropy), distilled with KL and distilled with TV, and
# prints each draft's validation loss and its mean TV distance to the teacher (1 - mean beta, on
# teacher-forced validation text), and a fourth draft: KL then TV. Usage: models/train_distill_demo.sh [WORKDIR] (default /tmp/sl_distill_demo)
# Cost on the 2-core machine: about 6 minutes (under load). Results are quoted in models/TRAINING.md.
set -eu
W=${1:-/tmp/sl_distill_demo}
S=${SPECLAB:-build/speclab}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$W"
if [ ! -s "$W/train.tok" ]; then
  command -v bible >/dev/null || { echo "needs Debian's bible-kjv (apt-get install bible-kjv)"; exit 2; }
  bible -f "gen1:1-rev22:21" >"$W/kjv.txt"
  /usr/bin/python3 - "$W" <<'PY'
import re, struct, sys
w = sys.argv[1]
text = re.sub(r"^\S+ ", "", open(w + "/kjv.txt", encoding="latin-1").read(), flags=re.M).encode("latin-1")
cut = int(len(text) * 0.95)
for name, part in (("train", text[:cut]), ("valid", text[cut:])):
    with open(f"{w}/{name}.tok", "wb") as f:
        f.write(b"SLTOK\0\0\x01" + struct.pack("<IIQ", 256, 2, len(part)) + struct.pack("<%dH" % len(part), *part))
PY
fi
COMMON=(--train "$W/train.tok" --valid "$W/valid.tok" --batch 16 --seq 64 --seed 1 --eval-batches 16)
TEACHER='{"n_layer":4,"n_head":4,"d_model":128,"d_ff":512,"max_seq_len":64,"vocab_size":256}'
DRAFT='{"n_layer":1,"n_head":2,"d_model":32,"d_ff":128,"max_seq_len":64,"vocab_size":256}'
"$S" train "${COMMON[@]}" --config "$TEACHER" --steps 1500 --lr 2e-3 --warmup 100 --eval-every 500 \
  --checkpoint "$W/ck_teacher" --out "$W/teacher.safetensors" >"$W/teacher.csv"
"$S" distill "${COMMON[@]}" --config "$DRAFT" --steps 1000 --lr 3e-3 --warmup 50 --eval-every 1000 \
  --checkpoint "$W/ck_kl" --teacher "$W/teacher.safetensors" --objective kl --out "$W/draft_kl.safetensors" >"$W/draft_kl.csv"
# TV's subgradient is small (it vanishes wherever q >= p), so it wants a larger step than KL.
"$S" distill "${COMMON[@]}" --config "$DRAFT" --steps 1000 --lr 3e-2 --warmup 50 --eval-every 1000 \
  --checkpoint "$W/ck_tv" --teacher "$W/teacher.safetensors" --objective tv --out "$W/draft_tv.safetensors" >"$W/draft_tv.csv"
# KL first, then TV from the KL draft's weights.
"$S" distill "${COMMON[@]}" --init "$W/draft_kl.safetensors" --steps 500 --lr 1e-3 --warmup 20 --eval-every 500 \
  --checkpoint "$W/ck_kl_tv" --teacher "$W/teacher.safetensors" --objective tv --out "$W/draft_kl_tv.safetensors" >"$W/draft_kl_tv.csv"
"$S" train "${COMMON[@]}" --config "$DRAFT" --steps 1000 --lr 3e-3 --warmup 50 --eval-every 1000 \
  --checkpoint "$W/ck_ce" --out "$W/draft_ce.safetensors" >"$W/draft_ce.csv"
# The data-only draft's distance to the teacher: an evaluation-only run (--init, --steps 0).
"$S" distill "${COMMON[@]}" --init "$W/draft_ce.safetensors" --steps 0 --teacher "$W/teacher.safetensors" \
  --objective kl --out "$W/draft_ce_eval.safetensors" >"$W/draft_ce_eval.csv"
echo "teacher: $(tail -1 "$W/teacher.csv" | cut -d, -f6,7)  (val_ce, bits per byte)"
echo "columns: $(head -1 "$W/draft_kl.csv")"
echo "draft_ce (scored vs teacher): $(tail -1 "$W/draft_ce_eval.csv")"
for d in kl tv kl_tv; do echo "draft_$d: $(tail -1 "$W/draft_$d.csv")"; done
