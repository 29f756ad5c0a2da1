/*
 * sl_lm_prefix.c: the shared-prefix model of sl_lm_prefix.h.
 */
#include "sl_lm_prefix.h"

#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

/* Records the pmf after `after` tokens of the sequence (a position inside the prefix is not kept). */
static void record(sl_lm_prefix *w, size_t after, const double *pmf)
{
    size_t V = w->inner->vocab_size;
    if (after < w->n_prefix || after - w->n_prefix > w->max_rows) return;
    memcpy(w->rows + (after - w->n_prefix) * V, pmf, V * sizeof *pmf);
}

static int prefix_extend(void *self, const int32_t *tokens, size_t n, size_t n_rows, double *dists)
{
    sl_lm_prefix *w = self;
    const size_t V = w->inner->vocab_size, P = w->n_prefix;
    if (n < 1 || n_rows < 1 || n_rows > n) return sl_fail(SL_EINPUT, "prefix model: bad extend (%zu tokens, %zu rows)", n, n_rows);
    /* Tokens inside the prefix must be the prefix itself. */
    size_t in_prefix = w->len < P ? (P - w->len < n ? P - w->len : n) : 0;
    if (in_prefix && memcmp(tokens, w->prefix + w->len, in_prefix * sizeof *tokens) != 0)
        return sl_fail(SL_EINPUT, "prefix model: the sequence leaves the shared prefix at position %zu", w->len);
    const size_t first_row = w->len + n - n_rows; /* row r is the pmf after first_row + r + 1 tokens */
    if (first_row + 1 < P)
        return sl_fail(SL_EINPUT, "prefix model: a row inside the shared prefix (after %zu tokens) was asked for",
                       first_row + 1);
    size_t fresh = n - in_prefix; /* tokens for the inner model */
    size_t cached = 0;            /* the row after the prefix, if asked for */
    if (first_row + 1 == P) {
        memcpy(dists, w->rows, V * sizeof *dists);
        cached = 1;
    }
    if (fresh > 0) {
        size_t rows = n_rows - cached;
        int rc = w->inner->extend(w->inner->self, tokens + in_prefix, fresh, rows, dists + cached * V);
        w->inner_calls++;
        if (rc) return rc;
    }
    for (size_t r = 0; r < n_rows; r++) record(w, first_row + r + 1, dists + r * V);
    w->len += n;
    return SL_OK;
}

static int prefix_truncate(void *self, size_t len)
{
    sl_lm_prefix *w = self;
    if (len > w->len) return sl_fail(SL_EINPUT, "prefix model: truncate to %zu, longer than %zu", len, w->len);
    int rc = w->inner->truncate(w->inner->self, len > w->n_prefix ? len : w->n_prefix);
    if (!rc) w->len = len;
    return rc;
}

int sl_lm_prefix_init(sl_lm_prefix *w, sl_lm *inner, const int32_t *prefix, size_t n_prefix, size_t max_rows)
{
    memset(w, 0, sizeof *w);
    if (n_prefix < 1) return sl_fail(SL_EINPUT, "the prompt is empty: at least one token is needed");
    w->inner = inner;
    w->n_prefix = n_prefix;
    w->max_rows = max_rows;
    w->prefix = sl_malloc(n_prefix * sizeof *prefix);
    w->rows = sl_malloc((max_rows + 1) * inner->vocab_size * sizeof *w->rows);
    if (!w->prefix || !w->rows) {
        sl_lm_prefix_free(w);
        return SL_EFAIL;
    }
    memcpy(w->prefix, prefix, n_prefix * sizeof *prefix);
    int rc = inner->extend(inner->self, prefix, n_prefix, 1, w->rows);
    if (rc) {
        sl_lm_prefix_free(w);
        return rc;
    }
    w->lm = (sl_lm){w, inner->vocab_size, prefix_extend, prefix_truncate};
    return SL_OK;
}

int sl_lm_prefix_reset(sl_lm_prefix *w)
{
    return prefix_truncate(w, 0);
}

const double *sl_lm_prefix_row(const sl_lm_prefix *w, size_t j)
{
    return j <= w->max_rows ? w->rows + j * w->inner->vocab_size : NULL;
}

void sl_lm_prefix_free(sl_lm_prefix *w)
{
    free(w->prefix);
    free(w->rows);
    w->prefix = NULL;
    w->rows = NULL;
}
