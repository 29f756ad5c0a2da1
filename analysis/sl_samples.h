/*
 * sl_samples.h: tokens a speculative sampler emitted elsewhere (another program, another
 * language), read from a file for sl_verify_samples. The formats, their rules and every error are
 * described in analysis/SAMPLES.md; this reader is the one place that enforces them.
 *
 *   csv   the header "iteration,position,token,kind", then one row per emitted token:
 *         kind accepted (a draft the target kept), resampled (the token emitted at a rejection)
 *         or bonus (the extra token after gamma accepted drafts)
 *   hdf5  four 1-D datasets of equal length at the root: iteration, position, token (integers)
 *         and kind (integer codes 0 accepted, 1 resampled, 2 bonus, or the strings)
 *   ids   one token id per line: a plain stream without iteration structure
 *   auto  hdf5 when the file starts with HDF5's 8-byte signature, csv when its first line is the
 *         header, ids otherwise
 *
 * An iteration is accepted rows at positions 1..k-1 followed by exactly one terminal row:
 * resampled at k <= gamma, or bonus at k = gamma + 1. Every rule is checked while reading; the
 * first violation gives SL_EINPUT with a one-line message "FILE:LINE: ..." (csv, ids; LINE
 * 1-based) or "FILE: row R: ..." (hdf5; R 0-based, as numpy and h5py count).
 */
#ifndef SL_SAMPLES_H
#define SL_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

/* The version of the formats in SAMPLES.md; an HDF5 file may state it in the root attribute
 * samples_version (optional; another value is refused). */
#define SL_SAMPLES_VERSION 1

typedef enum { SL_SAMPLES_AUTO = 0, SL_SAMPLES_CSV, SL_SAMPLES_HDF5, SL_SAMPLES_IDS } sl_samples_format;

/* Kind codes of the HDF5 format (and the order of the names below). */
enum { SL_SAMPLES_ACCEPTED = 0, SL_SAMPLES_RESAMPLED = 1, SL_SAMPLES_BONUS = 2 };

typedef struct {
    sl_samples_format format; /* the format read (never AUTO) */
    size_t V, gamma;
    size_t n;                 /* iterations (csv, hdf5) or tokens (ids) */
    int32_t *tok;             /* (n, gamma + 1) with nem, unused slots -1; (n) without */
    uint8_t *nem;             /* (n) tokens emitted by each iteration, 1..gamma + 1; NULL for ids */
    uint64_t tokens;          /* emitted tokens in all */
} sl_samples;

/* "csv" | "hdf5" | "ids" | "auto". */
int sl_samples_format_parse(const char *s, sl_samples_format *out);
const char *sl_samples_format_name(sl_samples_format f);

/* Reads path as `format` for a pair of vocabulary V (2 <= V <= INT32_MAX) and gamma drafts per
 * iteration (1..SL_SPEC_GAMMA_MAX) into *out (free with sl_samples_free). SL_EINPUT for a bad
 * file, SL_EFAIL when memory runs out. */
int sl_samples_read(const char *path, sl_samples_format format, size_t V, size_t gamma, sl_samples **out);
void sl_samples_free(sl_samples *s);

#endif
