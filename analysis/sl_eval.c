/* sl_eval.c: teacher-forced loss (sl_eval.h). */
#include "sl_eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_lm_open.h"
#include "sl_tok.h"

void sl_eval_result_free(sl_eval_result *r)
{
    if (!r) return;
    free(r->model);
    free(r->tokens_file);
    free(r);
}

int sl_eval_run(const sl_eval_config *cfg, sl_eval_result **out)
{
    *out = NULL;
    double n_bytes = cfg->bytes > 0 ? cfg->bytes : NAN;
    if (cfg->text) {
        struct stat sb;
        if (stat(cfg->text, &sb) != 0)
            return sl_fail(SL_EINPUT, "text: cannot read %s: %s", cfg->text, strerror(errno));
        if (sb.st_size == 0) return sl_fail(SL_EINPUT, "text: %s is empty", cfg->text);
        n_bytes = (double)sb.st_size;
    }
    const char *spec = cfg->model, *tok_path = cfg->tokens;
    int32_t *ids = NULL;
    size_t n = 0, fv = 0;
    sl_lm_handle *h = NULL;
    double *dists = NULL;
    sl_eval_result *r = NULL;
    int rc;
    if ((rc = sl_tokfile_read(tok_path, &ids, &n, &fv))) goto done;
    if (n < 2) {
        rc = sl_fail(SL_EINPUT, "tokens: %s holds %zu tokens: at least 2 are needed to score one", tok_path, n);
        goto done;
    }
    sl_lm_open_opts oo = {SL_SAMPLING_DEFAULT, fv, cfg->model_role ? cfg->model_role : "model", tok_path, NULL};
    if ((rc = sl_lm_open(spec, &oo, &h))) goto done;
    size_t C = cfg->context ? cfg->context : h->context != SIZE_MAX ? h->context : 1024;
    if (C > h->context) {
        rc = sl_fail(SL_EINPUT, "context: %zu exceeds the context of %s (%zu)", C, spec, h->context);
        goto done;
    }
    if (cfg->windows && n < C + 1) {
        rc = sl_fail(SL_EINPUT, "windows: %s holds %zu tokens, fewer than a window of %zu + 1", tok_path, n, C);
        goto done;
    }
    if (C > n - 1) C = n - 1; /* nothing beyond the file to score */
    const size_t V = h->vocab_size;
    if ((rc = sl_lm_start(h, C))) goto done;
    dists = sl_malloc(C * V * sizeof *dists); /* (C, V) */
    if (!dists) {
        rc = SL_EFAIL;
        goto done;
    }
    const size_t n_win = cfg->windows ? cfg->windows : (n - 1 + C - 1) / C;
    double nats = 0;
    size_t scored = 0;
    for (size_t w = 0; w < n_win; w++) {
        size_t off, len;
        if (cfg->windows) {
            const size_t last = n - C - 1;
            off = n_win > 1 ? (size_t)((double)last * (double)w / (double)(n_win - 1)) : 0;
            len = C;
        } else {
            off = w * C;
            len = n - 1 - off < C ? n - 1 - off : C;
        }
        if ((rc = h->lm.truncate(h->lm.self, 0))) goto done;
        if ((rc = h->lm.extend(h->lm.self, ids + off, len, len, dists))) goto done;
        double s = 0;
        for (size_t j = 0; j < len; j++) s -= log(dists[j * V + (size_t)ids[off + j + 1]]);
        nats += s;
        scored += len;
        if (cfg->progress) fprintf(stderr, "\reval: window %zu/%zu", w + 1, n_win);
    }
    if (cfg->progress) fprintf(stderr, "\n");
    r = calloc(1, sizeof *r);
    if (!r || !(r->model = strdup(spec)) || !(r->tokens_file = strdup(tok_path))) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    r->kind = sl_lm_kind_name(h->kind);
    r->tokens_in_file = n;
    r->tokens_scored = scored;
    r->windows = n_win;
    r->context = C;
    r->nats_per_token = nats / (double)scored;
    r->bits_per_token = r->nats_per_token / log(2.0);
    r->bytes = n_bytes;
    r->bits_per_byte = r->bits_per_token * (double)n / n_bytes;
    *out = r;
    r = NULL;
done:
    sl_eval_result_free(r);
    free(dists);
    free(ids);
    sl_lm_close(h);
    return rc;
}

int sl_eval_report(const sl_eval_result *r, sl_table **out)
{
    static const sl_colspec cols[] = {
        SL_COL_S("model"), SL_COL_S("kind"), SL_COL_S("tokens_file"), SL_COL_I("tokens_in_file"),
        SL_COL_I("tokens_scored"), SL_COL_I("windows"), SL_COL_I("context"), SL_COL_D("nats_per_token", "%.6f"),
        SL_COL_D("bits_per_token", "%.6f"), SL_COL_D("bytes", "%.0f"), SL_COL_D("bits_per_byte", "%.6f")};
    sl_table *t = SL_TABLE_NEW("eval", cols);
    sl_table_row(t);
    sl_table_sets(t, "model", r->model);
    sl_table_sets(t, "kind", r->kind);
    sl_table_sets(t, "tokens_file", r->tokens_file);
    sl_table_seti(t, "tokens_in_file", (int64_t)r->tokens_in_file);
    sl_table_seti(t, "tokens_scored", (int64_t)r->tokens_scored);
    sl_table_seti(t, "windows", (int64_t)r->windows);
    sl_table_seti(t, "context", (int64_t)r->context);
    sl_table_setd(t, "nats_per_token", r->nats_per_token);
    sl_table_setd(t, "bits_per_token", r->bits_per_token);
    sl_table_setd(t, "bytes", r->bytes);
    sl_table_setd(t, "bits_per_byte", r->bits_per_byte);
    int rc = sl_table_status(t);
    if (rc) {
        sl_table_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}
