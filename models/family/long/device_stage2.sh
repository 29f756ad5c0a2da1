#!/usr/bin/env bash
# device_stage2.sh: the longer distillation's second stage, on the lent GPU machine, from the
# repository root with build/gpu-t/ carried (bundle.sh builds it, init.safetensors = stage 1's
# output, models/family/long/draft-s-long-tv1.safetensors): a longer TV (1 - beta) fine-tune.
# Steps from a 100-step probe to fill the call (END seconds); TV_STEPS pins them (the shipped run:
# 28040). Its output is models/family/draft-s-long.safetensors.
set -eu
T0=$(date +%s)
END=${END:-550}
W=/tmp/w; rm -rf $W; mkdir -p $W
tar xJf build/gpu-t/mini.tar.xz -C $W
xz -dc build/gpu-t/mix.train.tok.xz > $W/mix.train.tok
xz -dc build/gpu-t/mix.valid.tok.xz > $W/mix.valid.tok
sha256sum $W/mix.train.tok $W/mix.valid.tok models/family/target.safetensors build/gpu-t/init.safetensors | tee $OUT/log.txt
nvidia-smi -L | tee -a $OUT/log.txt
nvcc -O3 -arch=sm_90 -x cu -Imodels/train -Xcompiler -fPIC,-fvisibility=hidden -shared -o $W/libsl_train_cuda.so models/train/sl_train_gpu.c -lcublas
export LD_LIBRARY_PATH=$W/lib SL_CUDA_LIB=$W/libsl_train_cuda.so OMP_NUM_THREADS=2
S=$W/speclab
common="--teacher models/family/target.safetensors --train $W/mix.train.tok --valid $W/mix.valid.tok --batch 16 --seq 256 --seed 4 --backend cuda --objective tv --init build/gpu-t/init.safetensors --lr 1e-3"
$S distill $common --steps 100 --warmup 5 --eval-every 100 --log $OUT/probe.csv --out $W/probe.safetensors > $W/probe.out 2>&1 || { tail -5 $W/probe.out; exit 1; }
now=$(( $(date +%s) - T0 ))
tps=$(tail -1 $OUT/probe.csv | cut -d, -f11)
left=$(( END - now ))
tv=${TV_STEPS:-$(awk -v t="$tps" -v l="$left" 'BEGIN { print int(0.92 * l * t / 4096 / 10) * 10 }')}
echo "probe at $now s: $tps tokens/s; $left s left: TV $tv steps" | tee -a $OUT/log.txt
$S distill $common --steps $tv --warmup $(( tv / 20 )) --eval-every $(( tv / 10 )) \
  --checkpoint $W/ck-tv --log $OUT/draft-s-long.csv --dtype f16 --out $OUT/draft-s-long.safetensors > $W/tv.out 2>&1 || { tail -5 $W/tv.out; exit 1; }
echo "TV done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/log.txt
