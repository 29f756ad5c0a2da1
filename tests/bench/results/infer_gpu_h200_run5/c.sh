#!/bin/bash
# Device call C (run 5): fewer phases. On a random model of the target's shape, alternated twice:
# HEAD~ (1d9f2f4, before this run), prev (8d31793: the phase list, 67 phases per step), m0 (norms
# computed inside the products that read them: 50 phases) and the default build (also the
# attention's scores inside its output phase: 42 phases); the PyTorch anchor; fixtures' checks
# with the default build; an Nsight Compute duration of each phase of the default build (graphs
# and PDL off). Outputs: $OUT/run5c.tgz.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-p/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256,"tied_embeddings":true}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null || exit 1
SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so $H/infer_gpu_check --device cuda 2>&1 | grep -v "decode" | tee $R/c_check_fixtures.txt
for r in 1 2; do
  for lib in libsl_infer_cuda_old.so libsl_infer_cuda_prev.so libsl_infer_cuda_m0.so libsl_infer_cuda.so; do
    echo "== $lib (round $r)"; SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda /tmp/t.st 2>&1
  done
  echo "== anchor (round $r)"; python3 tests/bench/torch_anchor.py /tmp/t.st 2>&1
done | tee $R/c_ab_target_shape.txt
gen="$H/speclab generate --autoregressive --target /tmp/t.st --prompt-ids 1,2,3,4,5,6,7,8 --tokens 40 --device cuda"
SL_INFER_GRAPHS=0 SL_INFER_PDL=0 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so timeout 240 ncu --csv --cache-control none \
  --metrics gpu__time_duration.sum --launch-skip 800 --launch-count 90 $gen > $R/c_ncu_phases.csv 2> $R/c_ncu_phases.err
tar czf $OUT/run5c.tgz -C $R .
