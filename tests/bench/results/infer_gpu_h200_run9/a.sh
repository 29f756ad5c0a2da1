#!/bin/bash
# Run 9 (at 5460d6a's backend): the product kernel's block shape. On a random model of the target's
# shape, alternated twice: the committed build (256 threads, at most 128 registers: two blocks per
# multiprocessor, 48 bytes spilled), 192 threads at 168 registers (two blocks, the same spill) and
# 128 threads at 128 registers (four blocks); decode ms/token and t(n). Outputs: $OUT/run9.tgz.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-p/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256,"tied_embeddings":true}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null || exit 1
for r in 1 2; do
  for lib in libsl_infer_cuda.so libsl_infer_cuda_mv192_2.so libsl_infer_cuda_mv128_4.so; do
    echo "== $lib (round $r)"; SL_INFER_CUDA_LIB=$H/$lib $H/infer_gpu_check --device cuda /tmp/t.st 2>&1 | grep -v "graphs \|plain"
  done
done | tee $R/ab_block_shape.txt
tar czf $OUT/run9.tgz -C $R .
