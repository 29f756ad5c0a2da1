# The inference engine's GPU backend (models/sl_infer_gpu.h): the same source as the cuda-emu build
# in libspeclab, compiled by nvcc into a library that `--device cuda` loads from beside the binary.
# Only where CUDA exists; nothing else depends on it. The Makefile includes this file after its own
# `cuda:` rule (so that `all` stays the default goal); the last line adds this library to `make
# cuda`. --fmad=false: only the source's explicit fmaf calls fuse, as in the C build (the
# emulation then adds and rounds in the same order).
NVCC ?= nvcc
NVCC_ARCH ?= native
$(BUILD)/libsl_infer_cuda.so: models/sl_infer_gpu.c models/sl_infer_gpu.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -arch=$(NVCC_ARCH) --fmad=false -x cu -Imodels -Xcompiler -fPIC,-fvisibility=hidden -shared -o $@ $<
cuda: $(BUILD)/libsl_infer_cuda.so
