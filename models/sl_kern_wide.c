/*
 * sl_kern_wide.c: the multi-token matmul compiled with AVX-512 (the Makefile adds the flag for
 * this file only; sl_kern.c runs it only where the CPU has it): sl_kern_mm.h's block16, 16-lane
 * loads and multiply-adds giving the bits of the AVX2 build, passes of up to 8 tokens.
 */
#define SL_KERN_BLOCK block16
#define SL_KERN_TMAX 8
#define SL_KERN_NAME(f) f##_wide
#include "sl_kern_mm.h"
