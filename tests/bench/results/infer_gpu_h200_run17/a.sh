#!/usr/bin/env bash
set -u
W=/tmp/g; rm -rf $W; mkdir -p $W
tar xJf build/gpu-h2/bundle.tar.xz -C $W
nvidia-smi -L | tee $OUT/log.txt
sha256sum models/family/target.safetensors models/family/draft-s-long.safetensors | tee -a $OUT/log.txt
nvcc -O3 -arch=sm_90 --fmad=false -x cu -Imodels -Xcompiler -fPIC,-fvisibility=hidden -shared -o $W/libsl_infer_cuda.so models/sl_infer_gpu.c 2>&1 | tail -3
export LD_LIBRARY_PATH=$W/lib SL_INFER_CUDA_LIB=$W/libsl_infer_cuda.so
SPECLAB=$W/speclab bash tests/bench/infer_gpu_family.sh $OUT/t1 models/family/draft-s-long.safetensors 2>&1 | tee -a $OUT/log.txt
TEMPERATURE=0 SPECLAB=$W/speclab bash tests/bench/infer_gpu_family.sh $OUT/t0 models/family/draft-s-long.safetensors 2>&1 | tee -a $OUT/log.txt
rm -f $OUT/t1/prompts.txt $OUT/t0/prompts.txt
