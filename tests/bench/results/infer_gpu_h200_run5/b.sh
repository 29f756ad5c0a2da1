#!/bin/bash
# Device call B (run 5): where a step's time goes. A random model of the shipped target's shape
# (timings do not depend on the weights); the library of HEAD (1d9f2f4: one kernel per step phase
# list, before the persistent kernel) against this tree's (persistent kernel, norms and attention
# reading their operands before using them); an Nsight Compute duration of every kernel of a few
# decode steps with one launch per phase (graphs and PDL off, so that each launch is one phase),
# and of the persistent kernel (SL_INFER_FUSED=1). The files here came from the tree in which the
# persistent kernel was still the default (the "persistent" rows of b_ab_target_shape.txt are it,
# the "graphs+pdl" rows the per-phase launches, the default since). Outputs: $OUT/run5b.tgz.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-p/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256,"tied_embeddings":true}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null || exit 1
SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so $H/infer_gpu_check --device cuda 2>&1 | grep -v "decode" | tee $R/b_check_fixtures.txt
for r in 1 2; do
  for lib in libsl_infer_cuda_old.so libsl_infer_cuda.so; do
    echo "== $lib (round $r)"; SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda /tmp/t.st 2>&1
  done
  echo "== anchor (round $r)"; python3 tests/bench/torch_anchor.py /tmp/t.st 2>&1
done | tee $R/b_ab_target_shape.txt
gen="$H/speclab generate --autoregressive --target /tmp/t.st --prompt-ids 1,2,3,4,5,6,7,8 --tokens 40 --device cuda"
for lib in libsl_infer_cuda_old.so libsl_infer_cuda.so; do
  SL_INFER_FUSED=0 SL_INFER_GRAPHS=0 SL_INFER_PDL=0 SL_INFER_CUDA_LIB=$H/$lib timeout 240 ncu --csv --cache-control none --metrics gpu__time_duration.sum \
    --launch-skip 1200 --launch-count 140 $gen > $R/b_ncu_phases_$lib.csv 2> $R/b_ncu_phases_$lib.err
done
SL_INFER_FUSED=1 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so timeout 120 ncu --csv --cache-control none --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  --launch-skip 20 --launch-count 4 $gen > $R/b_ncu_fused.csv 2> $R/b_ncu_fused.err
tail -3 $R/*.err
tar czf $OUT/run5b.tgz -C $R .
