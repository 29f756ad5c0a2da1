#!/bin/bash
# Run 8 (at 7a899d0's backend): where t(5) - t(1) goes. Nsight Compute durations of every phase of
# one call of 1 token and one of 5 tokens at context 128, on a random model of the target's shape,
# one launch per phase, graphs and PDL off (each launch one phase). The driver (tn, built on the
# Debian machine from a few lines linking libspeclab) prefills 128 tokens as 8 calls of 16, then
# makes 10 calls of 1 token and 10 of 5, truncating back to 128 after each: 67 launches a call.
set -u
H=/tmp/h; R=$H/out; mkdir -p $H $R
tar xJf build/gpu-p/bundle.tar.xz -C $H || exit 1
export LD_LIBRARY_PATH=$H/lib OMP_NUM_THREADS=16 SL_INFER_CUDA_LIB=$H/libsl_infer_cuda.so SL_INFER_GRAPHS=0 SL_INFER_PDL=0
cfg='{"vocab_size":4096,"n_layer":8,"n_head":8,"d_model":512,"d_ff":2048,"max_seq_len":256,"tied_embeddings":true}'
$H/speclab model init --arch gpt2 --config "$cfg" --dtype f16 --seed 1 --out /tmp/t.st >/dev/null || exit 1
ncu --csv --cache-control none --metrics gpu__time_duration.sum --launch-skip $((536 + 9 * 67)) --launch-count 67 $H/tn /tmp/t.st > $R/n1.csv 2> $R/n1.err
ncu --csv --cache-control none --metrics gpu__time_duration.sum --launch-skip $((536 + 19 * 67)) --launch-count 67 $H/tn /tmp/t.st > $R/n5.csv 2> $R/n5.err
tail -2 $R/*.err
tar czf $OUT/run8.tgz -C $R .
