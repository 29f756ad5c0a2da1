#!/usr/bin/env bash
# Issue 17, defects 1-6 (found by fuzzing): each input below once crashed speclab, hung it, made it
# allocate gigabytes, replaced a file it did not write, or passed as good. Each must now give exit 2
# and one line on stderr naming the problem (no signal: every exit code is checked to be < 128),
# and leave every existing file as it was.
set -u
. tests/cli/lib/cli_common.sh
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1
# expect_2 plus: no signal, and (checked by expect_2) exactly one line.
bad2() { local name=$1 pat=$2; shift 2; expect_2 "$name" "$pat" "$@"; }
mut() { # SRC DST PYTHON: copy SRC to DST and change it with h5py (f is the open file)
  cp "$1" "$2"; $PY -c "import h5py,sys,numpy as np; f=h5py.File(sys.argv[1],'r+'); $3" "$2"
}

# ---- logs to damage ----
TOK=models/tokenizer.json
cfg() { echo "{\"vocab_size\":$1,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":$2}"; }
"$S" model init --arch gpt2 --config "$(cfg 4096 128)" --init-std 0.2 --out "$T/t.st" --seed 1 --tokenizer-json "$TOK" >/dev/null || { bad "model init"; exit 1; }
"$S" model init --arch gpt2 --config "$(cfg 4096 128)" --init-std 0.2 --out "$T/d.st" --seed 2 >/dev/null || { bad "model init"; exit 1; }
head -2 data/prompts/prose.txt > "$T/p.txt"
"$S" run --target "$T/t.st" --draft "$T/d.st" --prompts "$T/p.txt" --tokens 12 --gamma 3 --cost-reps 3 --boot 50 \
  --out "$T/run.h5" --quiet >/dev/null || { bad "making run.h5"; exit 1; }
for d in float32 float16; do
  "$S" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --dist $d --out "$T/$d.h5" >/dev/null || { bad "making $d.h5"; exit 1; }
done
"$S" analyze --validate "$T/run.h5" >/dev/null && "$S" analyze --validate "$T/float16.h5" >/dev/null && ok "the undamaged logs validate" || bad "undamaged logs"

# ---- defect 1: a /drafts/beta outside [0, 1] made --validate free an uninitialised pointer ----
mut "$T/run.h5" "$T/beta.h5" "f['drafts/beta'][0]=1.5"
bad2 "defect 1: validate, /drafts/beta 1.5" "/drafts/beta row 0 is 1.5" analyze --validate "$T/beta.h5"
if command -v valgrind >/dev/null; then
  valgrind -q --error-exitcode=99 "$S" analyze --validate "$T/beta.h5" >/dev/null 2>"$T/vg"; rc=$?
  [ $rc -eq 2 ] && ok "defect 1 under valgrind: exit 2, no memory error" || bad "defect 1 under valgrind: rc=$rc $(head -5 "$T/vg")"
fi

# ---- defect 3: counts and values analyze relies on ----
N62=$((1 << 62))
mut "$T/float32.h5" "$T/ovf.h5" "v=f['sequences/n_rows'][:]; v[:]=$N62+20; f['sequences/n_rows'][:]=v; f['sequences/n_generated'][:]=v"
mut "$T/float32.h5" "$T/negrows.h5" "v=f['sequences/n_rows'][:]; v[0]-=25; v[1]+=25; f['sequences/n_rows'][:]=v"
mut "$T/float32.h5" "$T/seqid.h5" "v=f['positions/sequence'][:]; v[3]=99; f['positions/sequence'][:]=v"
mut "$T/float32.h5" "$T/negpos.h5" "v=f['positions/position'][:]; v[3]=-1; f['positions/position'][:]=v"
mut "$T/float32.h5" "$T/sum0.h5" "v=f['distributions/p'][5]; v[:]=0; f['distributions/p'][5]=v"
mut "$T/float32.h5" "$T/sum2.h5" "v=f['distributions/q'][6]; v*=2; f['distributions/q'][6]=v"
mut "$T/float16.h5" "$T/sum2h.h5" "v=f['distributions/q'][6]; v*=2; f['distributions/q'][6]=v"
mut "$T/run.h5" "$T/mode7.h5" "v=f['sequences/mode'][:]; v[1]=7; f['sequences/mode'][:]=v"
mut "$T/run.h5" "$T/drafted.h5" "v=f['iterations/drafted'][:]; v[2]=-1; f['iterations/drafted'][:]=v"
mut "$T/run.h5" "$T/dseq.h5" "v=f['drafts/sequence'][:]; v[0]=1000; f['drafts/sequence'][:]=v"
for a in "analyze --validate" "analyze" "recommend --c 0.1"; do
  # shellcheck disable=SC2086
  bad2 "defect 3: $a, n_rows near 2^62 (overflowing sum)" "sums to more than the 80 rows" $a "$T/ovf.h5"
  # shellcheck disable=SC2086
  bad2 "defect 3: $a, negative n_rows" "/sequences/n_rows row 0 is -5; expected >= 0" $a "$T/negrows.h5"
done
# recommend reads only the per-row beta, not /distributions: analyze and --validate must catch these.
for a in "analyze --validate" "analyze"; do
  bad2 "defect 3: $a, distribution row summing to 0" "/distributions/p row 5 sums to 0" $a "$T/sum0.h5"
  bad2 "defect 3: $a, distribution row summing to 2" "/distributions/q row 6 sums to 2" $a "$T/sum2.h5"
  bad2 "defect 3: $a, float16 row summing to 2" "/distributions/q row 6 sums to 2" $a "$T/sum2h.h5"
  bad2 "defect 3: $a, run log mode 7" "/sequences/mode row 1 is 7" $a "$T/mode7.h5"
  bad2 "defect 3: $a, drafted < 0" "/iterations row 2: gamma 3, drafted -1" $a "$T/drafted.h5"
done
bad2 "defect 3: validate, sequence id 99" "/positions row 3 is (sequence 99, position 3)" analyze --validate "$T/seqid.h5"
bad2 "defect 3: validate, position -1" "/positions row 3 is (sequence 0, position -1)" analyze --validate "$T/negpos.h5"
bad2 "defect 3: validate, /drafts names sequence 1000" "/drafts row 0 names sequence 1000" analyze --validate "$T/dseq.h5"

# ---- defect 2: damaged HDF5 ----
# Logs are written in the checksummed 1.10 format, per-row columns with Fletcher-32 per chunk.
$PY - "$T/float32.h5" <<'PYEOF' && ok "defect 2: logs carry metadata checksums (superblock >= 2) and Fletcher-32 on per-row columns" || bad "defect 2: log format"
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
assert f.id.get_create_plist().get_version()[0] >= 2, f.id.get_create_plist().get_version()
for g in ('positions', 'sequences', 'prompts'):
    for k in f[g]: assert f[g][k].fletcher32, (g, k)
assert f['distributions/p'][:].shape == (80, 64)
PYEOF
# A damaged byte in a per-row chunk is caught by its checksum.
$PY - "$T/float32.h5" "$T/chunk.h5" <<'PYEOF'
import h5py, sys
with h5py.File(sys.argv[1], 'r') as f:
    ci = f['positions/beta'].id.get_chunk_info(0)
b = bytearray(open(sys.argv[1], 'rb').read()); b[ci.byte_offset + ci.size // 2] ^= 0x55
open(sys.argv[2], 'wb').write(b)
PYEOF
bad2 "defect 2: a damaged /positions/beta chunk" "cannot read /positions/beta" analyze --validate "$T/chunk.h5"
# Mutants of the format before checksums that crashed libhdf5 1.10.8 (tests/fixtures/hdf5_mutants/).
n_mut=0
for g in tests/fixtures/hdf5_mutants/*.h5.gz; do
  m="$T/$(basename "$g" .gz)"; gunzip -c "$g" > "$m"; n_mut=$((n_mut + 1))
  bad2 "defect 2: $(basename "$m"): validate" "$(basename "$m")" analyze --validate "$m"
  bad2 "defect 2: $(basename "$m"): analyze" "$(basename "$m")" analyze "$m"
done
[ $n_mut -eq 3 ] && ok "defect 2: the 3 crashing mutants were checked" || bad "defect 2: found $n_mut mutants, expected 3"

# ---- defect 4: a model config claiming more layers than the file holds ----
for n in 4194304 2147483648; do
  $PY - "$T/d.st" "$T/L$n.st" $n <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); hl = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + hl])
cfg = json.loads(h['__metadata__']['config']); cfg['n_layer'] = int(sys.argv[3]); h['__metadata__']['config'] = json.dumps(cfg)
hj = json.dumps(h).encode(); hj += b' ' * (-len(hj) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hj)) + hj + b[8 + hl:])
PYEOF
  bad2 "defect 4: model info, n_layer $n" "config n_layer = $n needs at least 16 tensors per layer" model info "$T/L$n.st"
  bad2 "defect 4: generate, n_layer $n" "n_layer = $n" generate --target "$T/L$n.st" --autoregressive --prompt-ids 1,2 --tokens 2
done

# ---- defect 5: never replace a file speclab did not write, unless --force ----
printf 'precious text\n' > "$T/text.txt"
$PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'w'); f['x']=[1,2,3]" "$T/foreign.h5"
cp "$T/run.h5" "$T/runlog.h5"
for f in text.txt foreign.h5 runlog.h5; do
  before=$(md5sum <"$T/$f")
  bad2 "defect 5: measure --out $f" "$T/$f exists and was not written by speclab measure; give --force" \
    measure --synthetic noisy --vocab 16 --sequences 1 --tokens 2 --out "$T/$f"
  [ "$before" = "$(md5sum <"$T/$f")" ] && ok "defect 5: $f untouched" || bad "defect 5: $f changed"
done
"$S" measure --synthetic noisy --vocab 16 --sequences 1 --tokens 2 --out "$T/text.txt" --force >/dev/null && \
  "$S" analyze --validate "$T/text.txt" >/dev/null && ok "defect 5: measure --force replaces it" || bad "defect 5: measure --force"
"$S" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --dist float32 --out "$T/float32.h5" >/dev/null && \
  ok "defect 5: rerunning measure on its own log" || bad "defect 5: rerun on own log"
rm -rf "$T/float32.h5.d"
"$S" measure --synthetic noisy --vocab 64 --sequences 4 --tokens 20 --dist float32 --out "$T/float32.h5" >/dev/null && \
  ok "defect 5: rerunning measure on its own log without its shards" || bad "defect 5: own log without shards"
bad2 "defect 5: model init --out existing" "text.txt exists; give --force" model init --arch gpt2 --config "$(cfg 64 8)" --out "$T/text.txt"
"$S" model init --arch gpt2 --config "$(cfg 64 8)" --out "$T/d.st" --force >/dev/null && ok "defect 5: model init --force" || bad "defect 5: model init --force"
printf 'hello world\n' > "$T/in.txt"; cp "$T/text.txt" "$T/keep.tok"
bad2 "defect 5: tokenize encode --out existing" "keep.tok exists; give --force" tokenize encode --tokenizer "$TOK" --in "$T/in.txt" --out "$T/keep.tok"
bad2 "defect 5: tokenize decode --out existing" "keep.tok exists; give --force" tokenize decode --tokenizer "$TOK" --in "$T/in.txt" --out "$T/keep.tok"
bad2 "defect 5: tokenize train --out existing" "keep.tok exists; give --force" tokenize train --corpus "$T/in.txt" --vocab-size 260 --out "$T/keep.tok"
"$S" tokenize encode --tokenizer "$TOK" --in "$T/in.txt" --out "$T/a.tok" >/dev/null || bad "tokenize encode"
bad2 "defect 5: train --out existing" "keep.tok exists; give --force" train --train "$T/a.tok" --valid "$T/a.tok" --config "$(cfg 4096 8)" --steps 1 --seq 2 --batch 1 --out "$T/keep.tok"
for c in measure "model init" "tokenize encode" train distill; do
  # shellcheck disable=SC2086
  "$S" $c --help | grep -q -- "--force" && ok "defect 5: $c --help names --force" || bad "defect 5: $c --help lacks --force"
done

# ---- defect 6: a theory grid whose work is quadratic in a gamma range ----
bad2 "defect 6: theory --gamma 1:1000000" "narrow the gamma range" theory --alpha 0.5 --gamma 1:1000000
"$S" theory --alpha 0.5 --gamma 1:2000 --format csv | tail -n +2 | wc -l | grep -qx 2000 && ok "defect 6: 1:2000 still runs" || bad "defect 6: 1:2000"

# ---- fuzzing finding 6 (tests/fuzz/README.md): libhdf5 dies with SIGSEGV in H5Dread on this damaged
# sample file; the read runs in a forked child, so speclab itself says so and exits 2 ----
tail -c +3 tests/fuzz/corpus/samples/regress-segv-H5Dread-contiguous-no-storage > "$T/segv.h5"
P16=$($PY -c "print(','.join(['0.0625'] * 16))")
bad2 "fuzz finding 6: verify --samples, libhdf5 SIGSEGV contained" "libhdf5 crashed" \
  verify --samples "$T/segv.h5" --samples-format hdf5 --p "$P16" --q "$P16" --gamma 2

# ---- deflated distribution chunks replaced by garbage (the direct reader reads each with pread and
# inflates it): one far larger than deflate makes of a chunk (131072 bytes of float16 here) is refused
# before it is read; one of a plausible size does not inflate. ----
mut "$T/float16.h5" "$T/zbig.h5" "f['distributions/p'].id.write_direct_chunk((0, 0), b'\\x07' * 300000, 0)"
mut "$T/float16.h5" "$T/zbad.h5" "f['distributions/p'].id.write_direct_chunk((0, 0), b'\\x07' * 40, 0)"
bad2 "deflated chunk of 300000 bytes" "/distributions chunk at row 0 takes 300000 bytes, more than deflate makes of 131072" \
  analyze "$T/zbig.h5"
bad2 "deflated chunk of garbage" "/distributions chunk at row 0 does not inflate" analyze "$T/zbad.h5"
bad2 "deflated chunk of 300000 bytes, --validate" "/distributions chunk at row 0 is missing or corrupt" \
  analyze --validate "$T/zbig.h5"

[ $fail -eq 0 ] && echo "hardening.sh: all checks passed"
exit $fail
