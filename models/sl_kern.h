/*
 * sl_kern.h: the compute kernels of the inference engine.
 *
 * The one that matters is sl_kern_matmul, y(n, out) = x(n, in) · W(out, in)^T (+ bias): decoding
 * one token (n = 1) and verifying gamma+1 tokens (n <= 16) are both bound by reading W from memory,
 * so the kernel reads each weight row from memory once for all n tokens: each row is streamed
 * sequentially with four 8-lane accumulators per token, the tokens in passes over the row while it
 * sits in L1. Two builds (sl_kern_mm.h), chosen at run time (sl_kern_select): AVX2, at most 3
 * tokens per pass (16 ymm registers); AVX-512 where the CPU has it, the same accumulators held in
 * 16-lane registers, at most 8 tokens per pass (half the loads and multiply-add instructions of
 * AVX2 for the same work). Rows longer than fit L1 with the pass's inputs are taken in chunks
 * across four rows at a time. f16 and bf16 weights are converted to float32 in registers as they
 * are loaded (F16C / shift), at half the bytes of f32. A matrix is read row-major (used in place
 * from the file's mapping) or in the packed layout below (sl_kern_pack: what models keep unless
 * SL_PACK=0), whose passes hold 32 rows' outputs across the register lanes instead and need no
 * horizontal sums: at five tokens, 0.70-0.76 of the row-major passes' time on the shipped target
 * (AVX-512, Zen 5), 0.73-0.87 (AVX2, a Zen 3 VM; ad hoc, in alternation).
 * Inputs should be 64-byte aligned (sl_malloc_aligned) for speed; any alignment is correct.
 *
 * Determinism: each output y[t][o] is computed by one thread, in one fixed order (8-lane partial
 * sums over k, a fixed horizontal sum, then the scalar tail, then the bias), whatever n, the token
 * pass it falls in, the chunking, the layout, the thread count and the build. So results do not depend on OMP_NUM_THREADS, and a token
 * scored in a block of n gets bit-identical matmul outputs to the same token scored alone.
 */
#ifndef SL_KERN_H
#define SL_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "sl_half.h"
#include "sl_st.h"

#define SL_KERN_NMAX 16 /* tokens per sl_kern_matmul call */

/* y (n, out) = x (n, in) · W (out, in)^T + bias (out). W has dtype dt, row-major, and may be
 * unaligned; bias may be NULL. 1 <= n <= SL_KERN_NMAX. Threaded across output rows (OpenMP). */
void sl_kern_matmul(float *y, const float *x, const void *W, sl_dtype dt, const float *bias, size_t n, size_t in,
                    size_t out);

/* Several matrices applied to the same input x (n, in) in one parallel region, e.g. the q, k, v
 * projections: y_i (n, out_i) = x · W_i^T + bias_i. Saves a fork/join per matrix, which matters
 * when a token takes a few milliseconds on many cores. */
#define SL_KERN_MAX_MULTI 4
/* Work sharing with stealing for the matmul calls of one OpenMP team (sl_kern_mm.team): each
 * thread starts on its static share of the call's units, front to back, and a thread done with
 * its own takes what is left of the others' from their backs (a 64-bit word per thread holds the
 * call's number and the bounds of what is left; threads claim with compare-and-swap). A unit is
 * computed by one thread whichever, with the same operations: the same bits as the static split
 * (tests/test_engine.c). Why: with static shares the threads wait at the barrier after each
 * matmul for the slowest, which varies call by call (perf on the 2-core Zen 5 VM: 12-18% of each
 * thread's samples in that wait), and the more threads the longer the slowest takes: on the
 * accelerator machine's 16-core Xeon, GPT-2-774M f16 decoded in 13.9-16.6 ms with stealing
 * against 17.5-20.4 at 16 threads. */
#define SL_KERN_TEAM_MAX 64 /* larger teams share statically */
/* Smaller teams share statically on AMD CPUs: every claim is a locked compare-and-swap, which
 * waits for the weight loads in flight, and with two threads the wait it saves is smaller. On the
 * 2-core Zen 5 VM, the shipped target with prompt lookup (`speclab run`, two threads, three
 * alternated rounds) decoded 8-10% slower with stealing (autoregressive 0.91-0.99 against
 * 0.81-0.89 ms per token; tests/bench/results/steal_two_threads_zen5.txt); on the 16-core Xeon,
 * GPT-2-774M f16 was as fast at 2 threads and faster from 4
 * (tests/bench/results/engine_device_steal_745099a/). On Intel CPUs teams steal from two threads:
 * on a 2-vCPU Emerald Rapids VM, whose 27% of a two-thread t(5) of the shipped target was spent
 * waiting at the matmuls' barriers (perf), stealing took the shipped target's t(1), t(3), t(5) and
 * t(8) to 0.88-0.98x and GPT-2-124M f16's t(1) and t(5) to 0.95x of static shares (medians of pair
 * ratios, alternated call by call in one process; tests/bench/results/steal_two_threads_emr/). */
#define SL_KERN_STEAL_FROM_AMD 4
#define SL_KERN_STEAL_FROM_OTHER 2
/* The least team that steals on this CPU: SL_KERN_STEAL_FROM_AMD on AMD, SL_KERN_STEAL_FROM_OTHER on
 * other CPUs, or $SL_STEAL_FROM (a whole number >= 2; larger than SL_KERN_TEAM_MAX: never). */
int sl_kern_steal_from(void);
typedef struct {
    int threads; /* the team the state is for (0: none: static shares) */
    struct {
        uint64_t word;   /* call number (16 bits), first and end of the units left (24 bits each) */
        unsigned epoch;  /* calls this thread has made since sl_kern_team_reset, modulo 0xffff */
        char pad[52];
    } th[SL_KERN_TEAM_MAX];
} sl_kern_team;
/* Readies t for a team of `threads` (from one thread, while no matmul of the team runs): a team of
 * fewer than sl_kern_steal_from() threads shares statically (t->threads = 0). */
void sl_kern_team_reset(sl_kern_team *t, int threads);

typedef struct {
    float *y;          /* (n, out) */
    const void *w;     /* (out, in) */
    sl_dtype dt;
    const float *bias; /* (out) or NULL */
    size_t out;
    int add;           /* 0: y = x W^T + b; 1: y += (x W^T + b), a residual connection in the epilogue
                          (the same bits as computing the product and adding it afterwards) */
    int packed;        /* 0: w row-major; 1: w in sl_kern_pack's layout (same bits, faster from 2 tokens) */
    sl_kern_team *team; /* NULL: static shares; else the calling team's state (mm[0]'s counts), used when the call
                           runs in a parallel region of team->threads threads */
} sl_kern_mm;

/* The packed layout of a weight matrix (out, in), in % 32 == 0 (sl_kern_pack): column-major by
 * groups of 32 rows, so that a pass holds 32 rows' outputs in two 16-lane registers (four 8-lane
 * ones with AVX2) and multiplies each converted weight vector by a broadcast input, with no
 * horizontal sums. The kernel sums every output over lane j = k % 32 of its blocks apart (the
 * 32 partial sums of the row-major order, see sl_kern_mm.h), so a group stores, for each of the
 * 32 lanes in turn (slot jj holds lane SL_KERN_COL_LANE(jj)) and each 32-element block b, the 32
 * rows' weights at element 32 b + lane: element (r, k) of group g = r / 32 lies at
 * g * 32 * in + ((slot(k % 32) * (in / 32) + k / 32) * 32 + r % 32) elements. A group is one
 * sequential stream, read in the order the sums need it. Rows past out (the last group) are zero.
 * The lanes' order, l + 8 q for slot 4 l + q, lets the kernel add up each lane's four partial sums
 * as they finish, in the fixed order of the horizontal sum. Each output gets the same
 * multiply-adds in the same order as from row-major weights: the same bits (tests/test_engine.c
 * compares them). Measured in tests/bench/bench_engine.c (t(n)/t(1) of the shipped target, both
 * layouts side by side). */
#define SL_KERN_COL_LANE(jj) (8 * ((jj) & 3) + ((jj) >> 2))
int sl_kern_packable(size_t out, size_t in); /* 1 if in % 32 == 0 and out > 0 */
size_t sl_kern_packed_bytes(sl_dtype dt, size_t out, size_t in); /* out rounded up to 32 rows */
/* Writes W (out, in) of dtype dt, row-major at src, in the packed layout at dst
 * (sl_kern_packed_bytes). */
void sl_kern_pack(void *dst, const void *src, sl_dtype dt, size_t out, size_t in);
/* Row r of a matrix (out, in) in either layout, converted to float32. */
void sl_kern_row_to_f32(float *dst, const void *W, int packed, sl_dtype dt, size_t out, size_t in, size_t r);
void sl_kern_matmul_multi(const sl_kern_mm *mm, size_t count, const float *x, size_t n, size_t in);

/* Attention and activation helpers, AVX2, each output computed in one fixed order:
 * dot = sum a[k] b[k] (8-lane partial sums, fixed horizontal sum, scalar tail); y += a x;
 * x = gelu_tanh(x) in place; up = silu(gate) * up in place. The activations use a vectorised
 * expf (Cephes, ~2 ulp); a row's tail is padded into a vector, so every element of a row goes
 * through the same code whatever the row length. */
float sl_kern_dot(const float *a, const float *b, size_t n);
void sl_kern_axpy(float *y, float a, const float *x, size_t n);
/* The attention's two loops over the keys, each element with the operations above in their order
 * (the same bits), several keys or chunks at a time: s[j] = sl_kern_dot(q, K + j stride, n) *
 * scale for j < len; o = 0 (cont = 0; cont = 1: o as it is, so that a run of keys can be split)
 * then o += p[j] V_j (sl_kern_axpy) for j = 0 .. len - 1. */
void sl_kern_dots(float *s, const float *q, const float *K, size_t stride, size_t len, size_t n, float scale);
void sl_kern_axpy_rows(float *o, const float *p, const float *V, size_t stride, size_t len, size_t n, int cont);
void sl_kern_gelu(float *x, size_t n);
void sl_kern_silu_mul(float *up, const float *gate, size_t n);
/* The attention's exponentials: s[j] = expf(s[j] - m) for j < n, eight at a time, with glibc's
 * expf to the bit (its algorithm, from Arm's optimized-routines: e^x = 2^(k/32) 2^(r/32) in
 * double, a 32-entry table and a cubic; tests/test_engine.c compares every seventh float from
 * -104 to 0 with the C library's expf). One scalar expf call took ~60% of the attention's time
 * at five tokens. sl_kern_expf is the same function one float at a time. */
void sl_kern_exp_shifted(float *s, size_t n, float m);
float sl_kern_expf(float x);

/* Which build of the matmul runs. SL_KERN_AUTO: AVX-512 (F) where the CPU has it, unless the
 * environment sets SL_KERN_ISA=avx2. Both builds give the same bits (tests/test_engine.c checks);
 * they differ in speed for n >= 2. Asking for SL_KERN_WIDE on a CPU without AVX-512F gets AVX2.
 * Returns the build now in use. Call it before computing, not concurrently with a matmul.
 * The AVX-512 build is 1.4-2x the AVX2 build's speed at n = 4..8 when the weights are cached
 * (multiply-add bound; measured ad hoc on the 2-core Zen 5 VM); tests/bench/bench_engine.c times
 * t(n)/t(1) of both builds from memory, side by side. */
typedef enum { SL_KERN_AUTO = -1, SL_KERN_AVX2 = 0, SL_KERN_WIDE = 1 } sl_kern_isa;
sl_kern_isa sl_kern_select(sl_kern_isa isa);
const char *sl_kern_isa_name(void); /* the build in use, in words */
sl_kern_isa sl_kern_current(void);  /* the build in use (chosen now if no call has chosen it yet) */

/* Passes of 2 to 4 tokens in the AVX-512 build read four rows side by side (each input load then
 * feeds four rows), but only rows of at most this many bytes; longer rows are read one at a time.
 * bytes = 0 sets the default for this CPU: 2048 on AMD, no limit elsewhere. Speed only: the bits
 * are the same either way (tests/test_engine.c checks). Returns the value now in effect. Call it
 * before computing, not concurrently with a matmul. Measured ad hoc, f16 weights from memory, one
 * thread, n = 3:
 *  - rows of 4 KiB (in = 2048): four side by side took 1.84x the single-token time on the 2-core
 *    Zen 5 VM, one at a time 1.24x (the shipped target's t(2)/t(1) 1.29-1.33 -> 1.18-1.24 and
 *    t(3)/t(1) 1.38-1.51 -> 1.29-1.34); on the accelerator machine's Xeon four side by side were
 *    the faster (0.75-0.91x against 1.12-1.25x);
 *  - rows of 1 KiB (in = 512): four side by side were faster on both. (At n = 2 one at a time was
 *    faster on the Zen 5 VM for every row length; a rule for that changed the shipped target's
 *    t(2)..t(4) by at most 4%, and was not kept.) */
size_t sl_kern_set_quad_max(size_t bytes);

/* Converts n elements of dtype dt at src (possibly unaligned) to float32. */
void sl_kern_to_f32(float *dst, const void *src, sl_dtype dt, size_t n);
/* Rounds float32 to dt (round to nearest even) and writes n elements at dst. */
void sl_kern_from_f32(void *dst, const float *src, sl_dtype dt, size_t n);

#endif
