#!/bin/bash
# Device call D (run 5): one kernel per kind of phase (registers per kind instead of the largest
# kind's for all). On a random model of the target's shape, alternated twice: prev (8d31793: one
# kernel for every kind, 206 registers), t1 (a kernel per kind, the product's 193 registers: one
# block of 256 threads per multiprocessor) and t2 (the product held to 128 registers, two blocks
# per multiprocessor, a few spills); the PyTorch anchor. Outputs: $OUT/run5d.tgz.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-p/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256,"tied_embeddings":true}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null || exit 1
for lib in libsl_infer_cuda_t1.so libsl_infer_cuda.so; do
  SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda 2>&1 | grep -v "decode"
done | tee $R/d_check_fixtures.txt
for r in 1 2; do
  for lib in libsl_infer_cuda_prev.so libsl_infer_cuda_t1.so libsl_infer_cuda.so; do
    echo "== $lib (round $r)"; SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda /tmp/t.st 2>&1
  done
  echo "== anchor (round $r)"; python3 tests/bench/torch_anchor.py /tmp/t.st 2>&1
done | tee $R/d_ab_target_shape.txt
tar czf $OUT/run5d.tgz -C $R .
