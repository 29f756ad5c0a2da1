/*
 * sl_kern_wide.c: the multi-token matmul compiled with AVX-512 (the Makefile adds the flag for
 * this file only; sl_kern.c runs it only where the CPU has it): sl_kern_mm.h's block16, 16-lane
 * loads and multiply-adds giving the bits of the AVX2 build, passes of up to 8 tokens, four rows
 * at a time in passes of 2 to 4.
 */
#define SL_KERN_BLOCK block16
#define SL_KERN_TMAX 8
/* Rows per pass of T tokens (see block16). */
#define SL_KERN_ROWS(T) ((T) >= 2 && (T) <= 4 ? 4 : 1)
#define SL_KERN_NAME(f) f##_wide
#include "sl_kern_mm.h"
