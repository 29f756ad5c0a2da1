#!/usr/bin/env bash
# device_stage1.sh: the longer distillation's first stage, on the lent GPU machine, from the
# repository root with build/gpu-t/ carried (bundle.sh builds it): KL from scratch, then a TV
# (1 - beta) fine-tune, the shape and settings of recipe.tsv's draft-s-kl / draft-s-distilled rows
# with more steps. Steps come from a 100-step probe to fill the call (END seconds); KL_STEPS and
# TV_STEPS pin them (the shipped run: 22990 and 2550, models/family/long/README.md).
set -eu
T0=$(date +%s)
END=${END:-545}
W=/tmp/w; rm -rf $W; mkdir -p $W
tar xJf build/gpu-t/mini.tar.xz -C $W
xz -dc build/gpu-t/mix.train.tok.xz > $W/mix.train.tok
xz -dc build/gpu-t/mix.valid.tok.xz > $W/mix.valid.tok
sha256sum $W/mix.train.tok $W/mix.valid.tok models/family/target.safetensors | tee $OUT/log.txt
nvidia-smi -L | tee -a $OUT/log.txt
nvcc --version | tail -2 | tee -a $OUT/log.txt
nvcc -O3 -arch=sm_90 -x cu -Imodels/train -Xcompiler -fPIC,-fvisibility=hidden -shared -o $W/libsl_train_cuda.so models/train/sl_train_gpu.c -lcublas
export LD_LIBRARY_PATH=$W/lib SL_CUDA_LIB=$W/libsl_train_cuda.so OMP_NUM_THREADS=2
S=$W/speclab
cfg='{"n_layer":2,"n_head":4,"d_model":128,"d_ff":512,"max_seq_len":256,"vocab_size":4096}'
common="--teacher models/family/target.safetensors --train $W/mix.train.tok --valid $W/mix.valid.tok --batch 16 --seq 256 --seed 4 --backend cuda"
echo "built at $(( $(date +%s) - T0 )) s" | tee -a $OUT/log.txt
$S distill $common --objective kl --config "$cfg" --steps 100 --lr 3e-3 --warmup 5 --eval-every 100 --log $OUT/probe.csv --out $W/probe.safetensors > $W/probe.out 2>&1 || { tail -5 $W/probe.out; exit 1; }
now=$(( $(date +%s) - T0 ))
tps=$(tail -1 $OUT/probe.csv | cut -d, -f11)
left=$(( END - now ))
total=$(awk -v t="$tps" -v l="$left" 'BEGIN { print int(0.88 * l * t / 4096) }')
kl=${KL_STEPS:-$(( total * 9 / 10 / 10 * 10 ))}; tv=${TV_STEPS:-$(( total / 10 / 10 * 10 ))}
echo "probe at $now s: $tps tokens/s; $left s left: KL $kl steps, TV $tv steps" | tee -a $OUT/log.txt
$S distill $common --objective kl --config "$cfg" --steps $kl --lr 3e-3 --warmup $(( kl / 20 )) --eval-every $(( kl / 10 )) \
  --checkpoint $W/ck-kl --log $OUT/draft-s-long-kl.csv --dtype f32 --out $W/draft-s-long-kl.safetensors > $W/kl.out 2>&1 || { tail -5 $W/kl.out; exit 1; }
echo "KL done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/log.txt
$S distill $common --objective tv --init $W/draft-s-long-kl.safetensors --steps $tv --lr 1e-3 --warmup $(( tv / 20 )) --eval-every $(( tv / 10 )) \
  --checkpoint $W/ck-tv --log $OUT/draft-s-long-tv1.csv --dtype f16 --out $OUT/draft-s-long-tv1.safetensors > $W/tv.out 2>&1 || { tail -5 $W/tv.out; exit 1; }
echo "TV done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/log.txt
tail -n 2 $OUT/draft-s-long-kl.csv $OUT/draft-s-long-tv1.csv
