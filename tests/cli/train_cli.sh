#!/usr/bin/env bash
# train_cli.sh: `speclab train` / `speclab distill` from the outside: bad input gives exit 2 and one
# line on stderr; a run interrupted by SIGTERM or killed with SIGKILL resumes, when rerun, to the same
# weights (bit for bit) as a run never interrupted; distillation lowers the TV distance to the teacher.
set -u
. "$(dirname "$0")/lib/cli_common.sh"

/usr/bin/python3 "$(dirname "$0")/lib/pattern_tok.py" "$T" 4 29 300 7 3
PYTHONPATH="$(dirname "$0")/lib" /usr/bin/python3 - "$T" <<'PY'
import sys
from pattern_tok import write_tok
write_tok(sys.argv[1] + "/v32.tok", [i % 32 for i in range(500)], 32)
open(sys.argv[1] + "/empty.tok", "wb").close()
PY
CFG='{"n_layer":2,"n_head":2,"d_model":32,"d_ff":64,"max_seq_len":16,"vocab_size":64}'
BASE=(--train "$T/train.tok" --valid "$T/valid.tok" --batch 8 --seq 16 --lr 3e-3 --warmup 5 --seed 9 --eval-batches 2)


expect_2 "empty token file" "empty" train --train "$T/empty.tok" --valid "$T/valid.tok" --config "$CFG" --seq 16 --steps 5 --out "$T/x.st"
expect_2 "vocab mismatch token file vs config" "vocabulary mismatch" train --train "$T/v32.tok" --valid "$T/valid.tok" --config "$CFG" --seq 16 --steps 5 --out "$T/x.st"
expect_2 "unwritable output" "cannot write" train "${BASE[@]}" --config "$CFG" --steps 5 --out /nonexistent/dir/x.st
expect_2 "missing --steps" "steps" train "${BASE[@]}" --config "$CFG" --out "$T/x.st"
expect_2 "bad config" "n_head" train "${BASE[@]}" --config '{"n_layer":2,"d_model":32,"d_ff":64,"max_seq_len":16,"vocab_size":64}' --steps 5 --out "$T/x.st"
expect_2 "seq beyond max_seq_len" "max_seq_len" train "${BASE[@]}" --seq 32 --config "$CFG" --steps 5 --out "$T/x.st"
expect_2 "bad dtype" "dtype" train "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --dtype f8
expect_2 "negative lr" "lr" train "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --lr -1
expect_2 "distill needs a teacher" "teacher" distill "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --objective kl
expect_2 "unknown objective" "objective" distill "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --teacher "$T/x.st" --objective js
expect_2 "teacher file missing" "cannot read model" distill "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --teacher "$T/none.st" --objective kl
[ ! -e "$T/x.st" ] && ok "nothing written on bad input" || bad "an output appeared on bad input"

# A teacher (used below), then a teacher/student vocabulary mismatch and a corrupt teacher.
"$S" train "${BASE[@]}" --config "$CFG" --steps 150 --eval-every 150 --out "$T/teacher.st" >/dev/null 2>"$T/err" \
  && ok "teacher trained" || bad "teacher training: $(cat "$T/err")"
CFG32='{"n_layer":1,"n_head":2,"d_model":16,"d_ff":32,"max_seq_len":16,"vocab_size":32}'
expect_2 "vocab mismatch teacher vs student" "vocabulary mismatch" distill --train "$T/v32.tok" --valid "$T/v32.tok" --config "$CFG32" --steps 5 --seq 8 --out "$T/x.st" --teacher "$T/teacher.st" --objective tv
head -c 3000 "$T/teacher.st" >"$T/trunc.st"
expect_2 "truncated teacher" "trunc\|short\|offsets\|fit" distill "${BASE[@]}" --config "$CFG" --steps 5 --out "$T/x.st" --teacher "$T/trunc.st" --objective kl

# Corrupt checkpoint: exit 2, file left alone.
"$S" train "${BASE[@]}" --config "$CFG" --steps 20 --eval-every 5 --checkpoint "$T/ck0" --stop-at 5 --out "$T/x.st" >/dev/null 2>&1
printf 'garbage' | dd of="$T/ck0/checkpoint.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
sum_before=$(md5sum <"$T/ck0/checkpoint.bin")
expect_2 "corrupt checkpoint" "corrupt" train "${BASE[@]}" --config "$CFG" --steps 20 --eval-every 5 --checkpoint "$T/ck0" --out "$T/x.st"
[ "$sum_before" = "$(md5sum <"$T/ck0/checkpoint.bin")" ] && ok "corrupt checkpoint left in place" || bad "checkpoint modified"
"$S" train "${BASE[@]}" --config "$CFG" --steps 20 --eval-every 5 --checkpoint "$T/ck1" --stop-at 5 --out "$T/x.st" >/dev/null 2>&1
expect_2 "checkpoint of another run" "another run (seed was 9, now 10)" train "${BASE[@]}" --config "$CFG" --steps 20 --eval-every 5 --checkpoint "$T/ck1" --out "$T/x.st" --seed 10

# Interruptions. The reference: one uninterrupted run.
LONG=(train "${BASE[@]}" --config "$CFG" --steps 400 --eval-every 50 --ckpt-every 10)
"$S" "${LONG[@]}" --out "$T/ref.st" >"$T/ref.csv" 2>/dev/null || bad "reference run"
tensors() { /usr/bin/python3 -c 'import sys,struct; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; sys.stdout.buffer.write(b[8+n:])' "$1" | md5sum; }
for sig in TERM KILL; do
  d="$T/ck_$sig"
  "$S" "${LONG[@]}" --checkpoint "$d" --out "$T/$sig.st" >/dev/null 2>"$T/err_$sig" &
  pid=$!
  for _ in $(seq 1 400); do [ -e "$d/checkpoint.bin" ] && break; sleep 0.01; done
  sleep 0.05
  kill -s "$sig" $pid
  { wait $pid; } 2>/dev/null; rc=$?
  if [ -e "$T/$sig.st" ]; then echo "note: run finished before SIG$sig arrived"; fi
  [ "$sig" = TERM ] && { [ $rc -eq 1 ] && grep -q "interrupted after step" "$T/err_$sig" && ok "SIGTERM: checkpoint and exit 1" || bad "SIGTERM rc=$rc $(cat "$T/err_$sig")"; }
  "$S" "${LONG[@]}" --checkpoint "$d" --out "$T/$sig.st" >"$T/$sig.csv" 2>"$T/err2" || bad "resume after SIG$sig: $(cat "$T/err2")"
  [ "$(tensors "$T/ref.st")" = "$(tensors "$T/$sig.st")" ] && ok "SIG$sig then rerun equals the uninterrupted run bit for bit" || bad "SIG$sig resume differs"
  # The log (wall-clock columns aside) is the same too.
  [ "$(cut -d, -f1-9 "$T/ref.csv")" = "$(cut -d, -f1-9 "$T/$sig.csv")" ] && ok "SIG$sig log equals the reference" || bad "SIG$sig log differs"
done

# --tokenizer stores FORMAT.md's tokenizer JSON in the metadata; distill copies the teacher's.
printf '{"type":"byte-bpe","vocab":["a","b"],"merges":[],"special":{}}' >"$T/tok.json"
printf 'not json' >"$T/bad.json"
meta() { /usr/bin/python3 -c 'import sys,json,struct; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(json.loads(b[8:8+n])["__metadata__"].get(sys.argv[2], "(absent)"))' "$1" "$2"; }
"$S" train "${BASE[@]}" --config "$CFG" --steps 3 --tokenizer "$T/tok.json" --out "$T/tk.st" >/dev/null 2>&1
[ "$(meta "$T/tk.st" tokenizer)" = "$(cat "$T/tok.json")" ] && ok "--tokenizer stored" || bad "--tokenizer: $(meta "$T/tk.st" tokenizer)"
"$S" distill "${BASE[@]}" --config "$CFG" --steps 2 --teacher "$T/tk.st" --objective kl --out "$T/tk2.st" >/dev/null 2>&1
[ "$(meta "$T/tk2.st" tokenizer)" = "$(cat "$T/tok.json")" ] && ok "distill copies the teacher's tokenizer" || bad "distill tokenizer: $(meta "$T/tk2.st" tokenizer)"
"$S" train "${BASE[@]}" --init "$T/tk.st" --steps 2 --out "$T/tk3.st" >/dev/null 2>&1
[ "$(meta "$T/tk3.st" tokenizer)" = "$(cat "$T/tok.json")" ] && ok "--init copies the model's tokenizer" || bad "--init tokenizer: $(meta "$T/tk3.st" tokenizer)"
expect_2 "--tokenizer not JSON" "not a JSON object" train "${BASE[@]}" --config "$CFG" --steps 3 --tokenizer "$T/bad.json" --out "$T/x3.st"

# Same bytes whatever the thread count (fixed matmul blocks, fixed summation orders); batch 24 x 16
# = 384 rows, so the matmuls span several 128-row blocks.
for t in 1 2; do
  "$S" train "${BASE[@]}" --batch 24 --config "$CFG" --steps 30 --eval-every 30 --threads $t --out "$T/thr$t.st" >/dev/null 2>&1 || bad "--threads $t"
done
[ "$(tensors "$T/thr1.st")" = "$(tensors "$T/thr2.st")" ] && ok "--threads 1 and 2 give the same weights" || bad "weights depend on --threads"

# Distillation lowers the TV distance to the teacher (mean 1 - beta on validation text), both objectives.
for obj in kl tv; do
  "$S" distill "${BASE[@]}" --config "$CFG" --steps 150 --eval-every 10 --teacher "$T/teacher.st" --objective $obj \
     --out "$T/d_$obj.st" --dtype f16 >"$T/d_$obj.csv" 2>"$T/err" || bad "distill $obj: $(cat "$T/err")"
  first=$(sed -n 2p "$T/d_$obj.csv" | cut -d, -f9); last=$(tail -1 "$T/d_$obj.csv" | cut -d, -f9)
  # A student at init is near uniform (TV ~0.8 to the teacher); distilled it should fall below 0.25.
  /usr/bin/python3 -c "import sys; f,l=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if l < 0.25 and l < f/2 else 1)" "$first" "$last" \
    && ok "distill $obj: val_tv $first -> $last" || bad "distill $obj: val_tv $first -> $last"
done
# --init with --steps 0 only evaluates: the teacher scored against itself has KL = 0 and TV ~ 0
# (1 - sum p in float: rounding only, < 1e-5), and the written copy keeps its weights.
"$S" distill "${BASE[@]}" --init "$T/teacher.st" --steps 0 --teacher "$T/teacher.st" --objective tv --out "$T/self.st" >"$T/self.csv" 2>"$T/err" \
  || bad "evaluation-only run: $(cat "$T/err")"
row=$(tail -1 "$T/self.csv")
/usr/bin/python3 -c "import sys; r=sys.argv[1].split(','); sys.exit(0 if r[0]=='0' and abs(float(r[7]))<1e-6 and float(r[8])<1e-5 else 1)" "$row" \
  && ok "teacher vs itself: KL 0, TV 0 ($row)" || bad "teacher vs itself: $row"
[ "$(tensors "$T/teacher.st")" = "$(tensors "$T/self.st")" ] && ok "--steps 0 keeps the weights" || bad "--steps 0 changed the weights"
expect_2 "--init with a different --config" "differs" train "${BASE[@]}" --init "$T/teacher.st" --config "$CFG32" --steps 1 --out "$T/x2.st"
"$S" train --help | grep -q "usage: speclab train" && ok "train --help" || bad "train --help"
"$S" distill --help | grep -q "objective kl|tv" && ok "distill --help" || bad "distill --help"
exit $fail
