/*
 * test_half.c: the f16/bf16 codec (sim/sl_half.h) against a naive reference written here with
 * double arithmetic (frexp, ldexp, nearbyint under the default ties-to-even rounding) instead of
 * bit manipulation: every f16 and bf16 value, the floats at every rounding boundary (ties, one ulp
 * either side, sticky bits), and a few million random bit patterns, NaN, infinity and subnormals
 * included. Results are compared as bits, so NaN payloads count.
 *
 * Before the codec was merged the three converters it replaces (analysis/sl_log.c and
 * models/sl_kern.c: F16C; models/sl_train_export.c: bit manipulation) were compared on all 2^32
 * floats and all 2^16 halves: they agreed on every non-NaN value and differed only in NaN handling,
 * which is why sl_half keeps the trainer's NaN rule as its own pair of functions.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sl_half.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- the naive reference ---- */

/* Rounds finite f to the format with `mant_bits` explicit mantissa bits, smallest normal exponent
 * emin and exponent bias `bias`, and encodes it; sign | inf when the rounded magnitude exceeds
 * max_finite. Every step is exact in double. */
static uint16_t ref_round(float f, int mant_bits, int emin, int bias, double max_finite, uint16_t inf)
{
    uint16_t sign = (uint16_t)((bits_of(f) >> 16) & 0x8000u);
    double a = fabs((double)f);
    if (a == 0) return sign;
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    int E = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, E - mant_bits); /* the spacing of the target format around a */
    double v = nearbyint(a / q) * q;
    if (v > max_finite) return (uint16_t)(sign | inf);
    if (v < ldexp(1.0, emin)) return (uint16_t)(sign | (uint16_t)(v / ldexp(1.0, emin - mant_bits)));
    frexp(v, &e);
    uint16_t biased = (uint16_t)(e - 1 + bias), mant = (uint16_t)(v / ldexp(1.0, e - 1 - mant_bits) - ldexp(1.0, mant_bits));
    return (uint16_t)(sign | (uint16_t)(biased << mant_bits) | mant);
}

/* F16C's rule for NaN: quiet, top 10 payload bits kept. */
static uint16_t ref_f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    if (isnan(f)) return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (isinf(f)) return (uint16_t)(((x >> 16) & 0x8000u) | 0x7c00u);
    return ref_round(f, 10, -14, 15, 65504.0, 0x7c00u);
}

/* The trainer's rule for NaN: the canonical quiet NaN, payload dropped. */
static uint16_t ref_f32_to_f16_canonical_nan(float f)
{
    if (isnan(f)) return (uint16_t)(((bits_of(f) >> 16) & 0x8000u) | 0x7e00u);
    return ref_f32_to_f16(f);
}

static uint16_t ref_f32_to_bf16(float f)
{
    uint32_t x = bits_of(f);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x0040u);
    if (isinf(f)) return (uint16_t)(((x >> 16) & 0x8000u) | 0x7f80u);
    return ref_round(f, 7, -126, 127, ldexp(255.0, 120), 0x7f80u); /* largest finite bf16: (2 - 2^-7) 2^127 */
}

/* quiet = 1: F16C's rule (a signalling NaN is quieted); 0: the payload as it is. */
static uint32_t ref_f16_to_f32(uint16_t h, int quiet)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) return sign | 0x7f800000u | (m && quiet ? 0x400000u : 0) | (m << 13);
    double v = e == 0 ? ldexp((double)m, -24) : ldexp(1024.0 + m, (int)e - 25);
    return sign | bits_of((float)v);
}

static uint32_t ref_bf16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 7) & 0xffu, m = h & 0x7fu;
    if (e == 255) return (uint32_t)h << 16;
    double v = e == 0 ? ldexp((double)m, -133) : ldexp(128.0 + m, (int)e - 134);
    return sign | bits_of((float)v);
}

/* ---- the sample of floats ---- */

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct {
    long n, bad;
    uint32_t first_bad;
    uint16_t got, want;
} tally;

static void check16(tally *t, uint32_t x, uint16_t got, uint16_t want)
{
    t->n++;
    if (got != want && t->bad++ == 0) t->first_bad = x, t->got = got, t->want = want;
}

/* Every f32 whose bits above `round_bit` take every value, with the bits below set to each of a few
 * patterns (0: exact or a tie; 1, all ones, half and half +- 1: either side of the tie), then
 * `n_random` random bit patterns. */
static void sample_floats(int round_bit, long n_random, void (*fn)(void *ctx, uint32_t x), void *ctx)
{
    uint32_t low = (1u << round_bit) - 1, half = 1u << (round_bit - 1);
    const uint32_t lows[] = {0, 1, low, half - 1, half, half + 1};
    for (uint64_t hi = 0; hi < (1ull << (32 - round_bit)); hi++)
        for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++) fn(ctx, (uint32_t)(hi << round_bit) | lows[i]);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < n_random; i++) fn(ctx, (uint32_t)(xorshift(&s) >> 11));
}

typedef struct {
    tally f16, f16_canon, bf16;
} f32_checks;

static void check_f16(void *ctx, uint32_t x)
{
    f32_checks *c = ctx;
    float f = float_of(x);
    check16(&c->f16, x, sl_half_f32_to_f16(f), ref_f32_to_f16(f));
    check16(&c->f16_canon, x, sl_half_f32_to_f16_canonical_nan(f), ref_f32_to_f16_canonical_nan(f));
}

static void check_bf16(void *ctx, uint32_t x)
{
    f32_checks *c = ctx;
    float f = float_of(x);
    check16(&c->bf16, x, sl_half_f32_to_bf16(f), ref_f32_to_bf16(f));
}

static void assert_tally(const tally *t, const char *what)
{
    cr_assert_gt(t->n, 0);
    cr_assert_eq(t->bad, 0, "%s: %ld of %ld floats differ from the reference, first 0x%08x: 0x%04x, expected 0x%04x", what,
                 t->bad, t->n, t->first_bad, t->got, t->want);
}

/* ---- tests ---- */

Test(half, f32_to_f16_matches_reference_at_every_rounding_boundary)
{
    f32_checks c;
    memset(&c, 0, sizeof c);
    sample_floats(13, 1L << 21, check_f16, &c); /* f16 keeps 10 of the 23 mantissa bits */
    assert_tally(&c.f16, "sl_half_f32_to_f16");
    assert_tally(&c.f16_canon, "sl_half_f32_to_f16_canonical_nan");
}

Test(half, f32_to_bf16_matches_reference_at_every_rounding_boundary)
{
    f32_checks c;
    memset(&c, 0, sizeof c);
    sample_floats(16, 1L << 21, check_bf16, &c);
    assert_tally(&c.bf16, "sl_half_f32_to_bf16");
}

Test(half, every_f16_and_bf16_widens_as_the_reference)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t x = (uint16_t)h;
        cr_assert_eq(bits_of(sl_half_f16_to_f32(x)), ref_f16_to_f32(x, 1), "f16 0x%04x", h);
        cr_assert_eq(bits_of(sl_half_f16_to_f32_keep_nan(x)), ref_f16_to_f32(x, 0), "f16 0x%04x (keep NaN)", h);
        cr_assert_eq(bits_of(sl_half_bf16_to_f32(x)), ref_bf16_to_f32(x), "bf16 0x%04x", h);
        /* Every non-NaN value survives 16 bits -> float -> 16 bits. */
        if ((x & 0x7c00u) != 0x7c00u || !(x & 0x3ffu)) {
            cr_assert_eq(sl_half_f32_to_f16(sl_half_f16_to_f32(x)), x, "f16 0x%04x round trip", h);
            cr_assert_eq(sl_half_f32_to_f16_canonical_nan(sl_half_f16_to_f32_keep_nan(x)), x, "f16 0x%04x round trip", h);
        }
        if ((x & 0x7f80u) != 0x7f80u || !(x & 0x7fu))
            cr_assert_eq(sl_half_f32_to_bf16(sl_half_bf16_to_f32(x)), x, "bf16 0x%04x round trip", h);
    }
}

Test(half, bulk_f16_equals_scalar_for_every_length_and_offset)
{
    static uint16_t in[65536 + 16];
    static float out[65536 + 16];
    for (uint32_t h = 0; h < 65536; h++) in[h] = (uint16_t)h;
    sl_half_f16_to_f32_n(in, out, 65536);
    for (uint32_t h = 0; h < 65536; h++)
        cr_assert_eq(bits_of(out[h]), bits_of(sl_half_f16_to_f32((uint16_t)h)), "f16 0x%04x", h);
    /* Lengths around the 8-wide step, from unaligned starts: the scalar tail must agree too. */
    for (size_t off = 0; off < 3; off++)
        for (size_t n = 0; n <= 17; n++) {
            for (size_t i = 0; i < 18; i++) out[i] = -1.0f;
            sl_half_f16_to_f32_n(in + 0x7bf0 + off, out, n);
            for (size_t i = 0; i < n; i++) cr_assert_eq(bits_of(out[i]), bits_of(sl_half_f16_to_f32(in[0x7bf0 + off + i])));
            cr_assert_eq(out[n], -1.0f, "wrote past n = %zu", n);
        }
}

Test(half, named_cases)
{
    cr_assert_eq(sl_half_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(sl_half_f32_to_f16(65520.0f), 0x7c00);                    /* rounds up past 65504 */
    cr_assert_eq(sl_half_f32_to_f16(ldexpf(1, -25)), 0x0000);              /* tie to even: 0 */
    cr_assert_eq(sl_half_f32_to_f16(ldexpf(3, -25)), 0x0002);              /* tie to even: 2 */
    cr_assert_eq(sl_half_f32_to_f16(-ldexpf(1, -26)), 0x8000);             /* signed zero */
    cr_assert_eq(sl_half_f32_to_f16(float_of(0x7fffffffu)), 0x7fff);       /* NaN payload kept (F16C) */
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(float_of(0x7fffffffu)), 0x7e00);
    cr_assert_eq(sl_half_f32_to_f16_canonical_nan(float_of(0xff800001u)), 0xfe00);
    cr_assert_eq(bits_of(sl_half_f16_to_f32(0x7c01)), 0x7fc02000u);        /* signalling NaN quieted */
    cr_assert_eq(bits_of(sl_half_f16_to_f32_keep_nan(0x7c01)), 0x7f802000u);
    cr_assert_eq(sl_half_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);           /* tie to even */
    cr_assert_eq(sl_half_f32_to_bf16(float_of(0x7f7fffffu)), 0x7f80);      /* FLT_MAX rounds to infinity */
    cr_assert_eq(sl_half_f32_to_bf16(float_of(0x7f800001u)), 0x7fc0);      /* signalling NaN quieted */
}
