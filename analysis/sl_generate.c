/* sl_generate.c: speculative or autoregressive generation of one prompt, one or K continuations
 * (sl_generate.h). */
#include "sl_generate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_lm_open.h"
#include "sl_lm_prefix.h"
#include "sl_tok.h"

static const char *mode_name(int autoregressive)
{
    return autoregressive ? "autoregressive" : "speculative";
}

void sl_generate_result_free(sl_generate_result *r)
{
    if (!r) return;
    for (size_t i = 0; r->samples && i < r->n_samples; i++) free(r->samples[i].text);
    free(r->samples);
    free(r->token_block);
    free(r);
}

/* Whether one line (without its newline) is `SEQ MODE` or `SEQ MODE t1,t2,...`. */
static int is_token_line(const char *s)
{
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) s++;
    if (*s++ != ' ') return 0;
    if (!strncmp(s, "speculative", 11)) s += 11;
    else if (!strncmp(s, "autoregressive", 14)) s += 14;
    else return 0;
    if (!*s) return 1;
    if (*s++ != ' ') return 0;
    for (;;) {
        if (*s == '-') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
        if (!*s) return 1;
        if (*s++ != ',') return 0;
    }
}

/* A tokens_out path may be replaced when it does not exist, is empty or holds token lines only:
 * anything else is a file the user did not ask to lose. */
static int check_tokens_out(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return SL_OK;
    if (!S_ISREG(st.st_mode)) return sl_fail(SL_EINPUT, "tokens_out: %s exists and is not a regular file", path);
    FILE *f = fopen(path, "r");
    if (!f) return sl_fail(SL_EINPUT, "tokens_out: cannot read %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, no = 0;
    ssize_t n;
    int rc = SL_OK;
    while ((n = getline(&line, &cap, f)) > 0) {
        no++;
        if (line[n - 1] == '\n') line[--n] = 0;
        if ((size_t)n != strlen(line) || !is_token_line(line)) {
            rc = sl_fail(SL_EINPUT,
                         "tokens_out: %s exists and line %zu is not a token line `SEQ MODE t1,t2,...`; not "
                         "overwritten (remove it or give another file)",
                         path, no);
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

static int write_tokens_out(const char *path, const sl_generate_result *r)
{
    FILE *f = fopen(path, "w");
    if (!f) return sl_fail(SL_EINPUT, "tokens_out: cannot write %s: %s", path, strerror(errno));
    for (size_t s = 0; s < r->n_samples; s++) {
        const sl_generate_sample *x = &r->samples[s];
        fprintf(f, "%zu %s", s, mode_name(r->autoregressive));
        for (size_t i = 0; i < x->n_out; i++) fprintf(f, "%s%d", i ? "," : " ", x->tokens[i]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return sl_fail(SL_EINPUT, "tokens_out: writing %s failed", path);
    return SL_OK;
}

static void stats_add(sl_spec_stats *a, const sl_spec_stats *b)
{
    a->iterations += b->iterations;
    a->draft_calls += b->draft_calls;
    a->target_calls += b->target_calls;
    a->tokens_emitted += b->tokens_emitted;
    a->drafted += b->drafted;
    a->accepted += b->accepted;
    for (size_t i = 0; i < SL_SPEC_GAMMA_MAX; i++) {
        a->accepted_at[i] += b->accepted_at[i];
        a->reached_at[i] += b->reached_at[i];
    }
    a->draft_s += b->draft_s;
    a->verify_s += b->verify_s;
    a->sample_s += b->sample_s;
}

static int check_config(const sl_generate_config *c)
{
    if (!c->prompt == !c->prompt_ids) return sl_fail(SL_EINPUT, "prompt: give the text or the token ids, one of them");
    if (c->autoregressive) {
        if (c->draft) return sl_fail(SL_EINPUT, "draft: autoregressive generation takes no draft (%s given)", c->draft);
        if (c->gamma)
            return sl_fail(SL_EINPUT, "gamma: autoregressive generation drafts nothing (gamma %zu given)", c->gamma);
        return SL_OK;
    }
    int rc = sl_spec_config_validate(&c->rule);
    if (rc) return rc;
    if (!c->draft) return sl_fail(SL_EINPUT, "draft: speculative generation needs a draft model");
    if (c->gamma < 1 || c->gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", c->gamma, SL_SPEC_GAMMA_MAX);
    return SL_OK;
}

/* One worker: its own models, each holding the scored prompt, and its own random streams,
 * reseeded per sample. */
typedef struct {
    sl_lm_handle *ht, *hd;  /* hd NULL in autoregressive mode */
    sl_lm_prefix tp, dp;
    int tp_ok, dp_ok, rng_ok;
    sl_rand_rng rr;
    double prompt_target_s, prompt_draft_s; /* the prompt's scoring */
} gen_worker;

static void worker_free(gen_worker *w)
{
    if (w->tp_ok) sl_lm_prefix_free(&w->tp);
    if (w->dp_ok) sl_lm_prefix_free(&w->dp);
    if (w->rng_ok) sl_rand_rng_free(&w->rr);
    sl_lm_close(w->ht);
    sl_lm_close(w->hd);
}

/* Starts the worker's models for need tokens and scores the prompt. */
static int worker_start(gen_worker *w, const sl_generate_config *c, const int32_t *prompt, size_t n_prompt,
                        size_t need)
{
    int rc = sl_lm_start(w->ht, need);
    if (!rc && w->hd) rc = sl_lm_start(w->hd, need);
    if (rc) return rc;
    double t0 = sl_now_s();
    if ((rc = sl_lm_prefix_init(&w->tp, &w->ht->lm, prompt, n_prompt, 0))) return rc;
    w->tp_ok = 1;
    double t1 = sl_now_s();
    w->prompt_target_s = t1 - t0;
    if (w->hd) {
        if ((rc = sl_lm_prefix_init(&w->dp, &w->hd->lm, prompt, n_prompt, 0))) return rc;
        w->dp_ok = 1;
    }
    w->prompt_draft_s = sl_now_s() - t1;
    if ((rc = sl_rand_rng_init(&w->rr, c->seed, 0))) return rc;
    w->rng_ok = 1;
    return SL_OK;
}

/* Sample s from the streams of item s: what a from-scratch decode of item s gives. */
static int one_sample(gen_worker *w, const sl_generate_config *c, const int32_t *prompt, size_t n_prompt, int32_t eos,
                      size_t s, sl_generate_sample *x, sl_spec_stats *st, double *target_s)
{
    sl_rand_rng_reseed(&w->rr, c->seed, s);
    int rc = sl_lm_prefix_reset(&w->tp);
    if (!rc && w->dp_ok) rc = sl_lm_prefix_reset(&w->dp);
    if (rc) return rc;
    memset(st, 0, sizeof *st);
    *target_s = 0;
    if (c->autoregressive)
        return sl_spec_autoregressive(&w->tp.lm, prompt, n_prompt, c->tokens, eos, &w->rr.base, x->tokens, &x->n_out,
                                      target_s);
    return sl_spec_decode(&c->rule, c->gamma, &w->tp.lm, &w->dp.lm, prompt, n_prompt, c->tokens, eos, &w->rr.base,
                          x->tokens, &x->n_out, st, NULL, NULL);
}

int sl_generate_run(const sl_generate_config *c, sl_generate_result **out)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc) return rc;
    if (c->tokens_out && (rc = check_tokens_out(c->tokens_out))) return rc;
    const int ar = c->autoregressive;
    const size_t K = c->samples ? c->samples : 1;
    const size_t W = c->threads < 2 ? 1 : c->threads < K ? c->threads : K;
    sl_tok *tok = NULL;
    int32_t *prompt = NULL;
    gen_worker *wk = calloc(W, sizeof *wk);
    sl_spec_stats *sst = calloc(K, sizeof *sst); /* (K) per sample, summed in sample order */
    double *sts = calloc(K, sizeof *sts);        /* (K) autoregressive target time per sample */
    size_t n_prompt = 0;
    sl_generate_result *r = calloc(1, sizeof *r);
    if (!r || !wk || !sst || !sts) {
        rc = sl_fail(SL_EFAIL, "out of memory");
        goto done;
    }
    r->autoregressive = ar;
    r->listed = c->samples > 0;
    r->gamma = ar ? 0 : c->gamma;

    /* The target first: a lookup draft takes its vocabulary, and the one vocabulary check of
     * sl_lm_open compares the draft's against it. */
    sl_lm_open_opts ot = {c->sampling, 0, c->target_role ? c->target_role : "target", NULL, NULL};
    if ((rc = sl_lm_open(c->target, &ot, &wk[0].ht))) goto done;
    sl_lm_handle *ht = wk[0].ht;
    sl_lm_open_opts od = {c->sampling, ht->vocab_size, c->draft_role ? c->draft_role : "draft", c->target,
                          ht->tokenizer_json};
    if (!ar && (rc = sl_lm_open(c->draft, &od, &wk[0].hd))) goto done;
    sl_lm_handle *hd = wk[0].hd;
    if (ht->tokenizer_json && (rc = sl_tok_from_json(ht->tokenizer_json, &tok))) goto done;
    if (c->prompt) {
        if (!tok) {
            rc = sl_fail(SL_EINPUT, "prompt: the target %s carries no tokenizer; give the prompt as token ids", c->target);
            goto done;
        }
        if ((rc = sl_tok_encode(tok, c->prompt, strlen(c->prompt), &prompt, &n_prompt))) goto done;
    } else {
        if (!(prompt = sl_malloc((c->n_prompt_ids ? c->n_prompt_ids : 1) * sizeof *prompt))) {
            rc = SL_EFAIL;
            goto done;
        }
        memcpy(prompt, c->prompt_ids, c->n_prompt_ids * sizeof *prompt);
        n_prompt = c->n_prompt_ids;
    }
    if (n_prompt == 0) {
        rc = sl_fail(SL_EINPUT, "prompt: encodes to no tokens");
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || (size_t)prompt[i] >= ht->vocab_size) {
            rc = sl_fail(SL_EINPUT, "prompt_ids: token id %d is outside [0, %zu), the vocabulary of %s", prompt[i],
                         ht->vocab_size, c->target);
            goto done;
        }
    int32_t eos = c->eos_set ? c->eos : tok ? sl_tok_eos(tok) : -1;
    /* The target sees prompt + all new tokens (+ one verification block of gamma + 1). */
    const size_t need = n_prompt + c->tokens + (ar ? 0 : c->gamma + 1);
    const size_t limit = (ar || ht->context < hd->context) ? ht->context : hd->context;
    if (need > limit) {
        if (ar)
            rc = sl_fail(SL_EINPUT, "tokens: prompt %zu + %zu new = %zu tokens exceed the context of %zu", n_prompt,
                         c->tokens, need, limit);
        else
            rc = sl_fail(SL_EINPUT, "tokens: prompt %zu + %zu new + gamma %zu + 1 = %zu tokens exceed the context of %zu",
                         n_prompt, c->tokens, c->gamma, need, limit);
        goto done;
    }
    const size_t stride = c->tokens + r->gamma + 1; /* a speculative iteration may emit past the budget */
    r->n_samples = K;
    r->n_prompt = n_prompt;
    r->samples = calloc(K, sizeof *r->samples);
    r->token_block = sl_malloc(K * stride * sizeof *r->token_block);
    if (!r->samples || !r->token_block) {
        rc = sl_fail(SL_EFAIL, "out of memory for %zu samples", K);
        goto done;
    }
    for (size_t s = 0; s < K; s++) r->samples[s].tokens = r->token_block + s * stride;
    double t0 = sl_now_s();
    /* Every worker scores the prompt once; that time counts where a single decode counts it: the
     * target's in verify_s (target_s), the draft's in draft_s. */
    for (size_t w = 0; w < W && !rc; w++) {
        if (w > 0) {
            rc = sl_lm_open(c->target, &ot, &wk[w].ht);
            if (!rc && !ar) rc = sl_lm_open(c->draft, &od, &wk[w].hd);
        }
        if (!rc) rc = worker_start(&wk[w], c, prompt, n_prompt, need);
    }
    if (rc) goto done;
    if (W == 1) {
        /* No parallel region: the models keep their own OpenMP threads. */
        for (size_t s = 0; s < K && !rc; s++)
            rc = one_sample(&wk[0], c, prompt, n_prompt, eos, s, &r->samples[s], &sst[s], &sts[s]);
    } else {
        /* Workers take whole samples (their models run single-threaded inside the region); sample
         * s depends on s alone, so the split changes nothing. The first failing sample's error wins. */
        size_t err_sample = SIZE_MAX;
        char errbuf[512] = "";
#pragma omp parallel for schedule(dynamic) num_threads((int)W)
        for (size_t s = 0; s < K; s++) {
            gen_worker *w = &wk[omp_get_thread_num()];
            int e = one_sample(w, c, prompt, n_prompt, eos, s, &r->samples[s], &sst[s], &sts[s]);
            if (e) {
#pragma omp critical(sl_generate_err)
                if (s < err_sample) {
                    err_sample = s;
                    rc = e;
                    snprintf(errbuf, sizeof errbuf, "%s", sl_errmsg());
                }
            }
        }
        if (rc) rc = sl_fail(rc, "%s", errbuf);
    }
    r->wall_s = sl_now_s() - t0;
    if (rc) goto done;
    for (size_t s = 0; s < K; s++) {
        stats_add(&r->stats, &sst[s]);
        r->target_s += sts[s];
        r->tokens_out += r->samples[s].n_out;
    }
    for (size_t w = 0; w < W; w++) {
        r->target_s += wk[w].prompt_target_s;
        if (!ar) {
            r->stats.verify_s += wk[w].prompt_target_s;
            r->stats.draft_s += wk[w].prompt_draft_s;
        }
    }
    for (size_t s = 0; tok && s < K; s++) {
        size_t nb;
        if ((rc = sl_tok_decode(tok, r->samples[s].tokens, r->samples[s].n_out, &r->samples[s].text, &nb))) goto done;
    }
    r->n_out = r->samples[0].n_out;
    r->tokens = r->samples[0].tokens;
    r->text = r->samples[0].text;
    const sl_spec_stats *st = &r->stats;
    r->alpha_hat = st->drafted ? (double)st->accepted / (double)st->drafted : NAN;
    r->tokens_per_iteration = st->iterations ? (double)st->tokens_emitted / (double)st->iterations : NAN;
    r->tokens_per_s = r->wall_s > 0 ? (double)r->tokens_out / r->wall_s : NAN;
    if (c->tokens_out && (rc = write_tokens_out(c->tokens_out, r))) goto done;
    *out = r;
    r = NULL;
done:
    sl_generate_result_free(r);
    free(prompt);
    for (size_t w = 0; wk && w < W; w++) worker_free(&wk[w]);
    free(wk);
    free(sst);
    free(sts);
    if (tok) sl_tok_free(tok);
    return rc;
}

/* "1,2,3" (malloc'd). */
static char *ids_string(const int32_t *t, size_t n)
{
    size_t cap = n * 12 + 1, k = 0;
    char *ids = sl_malloc(cap);
    if (!ids) return NULL;
    ids[0] = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(ids + k, cap - k, "%s%d", i ? "," : "", t[i]);
    return ids;
}

static sl_table *continuations_table(const sl_generate_result *r)
{
    static const sl_colspec gcols[] = {SL_COL_I("n_prompt"), SL_COL_I("n_new"), SL_COL_S("token_ids"), SL_COL_S("text")};
    static const sl_colspec scols[] = {SL_COL_I("sample"), SL_COL_I("n_new"), SL_COL_S("token_ids"), SL_COL_S("text")};
    sl_table *t = r->listed ? SL_TABLE_NEW("samples", scols) : SL_TABLE_NEW("generation", gcols);
    for (size_t s = 0; s < r->n_samples; s++) {
        const sl_generate_sample *x = &r->samples[s];
        char *ids = ids_string(x->tokens, x->n_out);
        if (!ids) {
            sl_table_free(t);
            return NULL;
        }
        sl_table_row(t);
        if (r->listed) sl_table_seti(t, "sample", (int64_t)s);
        else sl_table_seti(t, "n_prompt", (int64_t)r->n_prompt);
        sl_table_seti(t, "n_new", (int64_t)x->n_out);
        sl_table_sets(t, "token_ids", ids);
        if (x->text) sl_table_sets(t, "text", x->text);
        free(ids);
    }
    return t;
}

static sl_table *summary_table(const sl_generate_result *r)
{
    static const sl_colspec dcols[] = {SL_COL_S("mode"), SL_COL_I("tokens_emitted"), SL_COL_D("target_s", "%.4f"),
                                       SL_COL_D("wall_s", "%.4f"), SL_COL_D("tokens_per_s", "%.4f")};
    static const sl_colspec acols[] = {
        SL_COL_I("gamma"), SL_COL_I("iterations"), SL_COL_I("tokens_emitted"), SL_COL_I("drafted"), SL_COL_I("accepted"),
        SL_COL_D("alpha_hat", "%.4f"), SL_COL_D("tokens_per_iteration", "%.4f"), SL_COL_D("draft_s", "%.4f"),
        SL_COL_D("verify_s", "%.4f"), SL_COL_D("sample_s", "%.4f"), SL_COL_D("wall_s", "%.4f"),
        SL_COL_D("tokens_per_s", "%.4f")};
    sl_table *t;
    if (r->autoregressive) {
        t = SL_TABLE_NEW("decoding", dcols);
        sl_table_row(t);
        sl_table_sets(t, "mode", mode_name(1));
        sl_table_seti(t, "tokens_emitted", (int64_t)r->tokens_out);
        sl_table_setd(t, "target_s", r->target_s);
    } else {
        const sl_spec_stats *st = &r->stats;
        t = SL_TABLE_NEW("acceptance", acols);
        sl_table_row(t);
        sl_table_seti(t, "gamma", (int64_t)r->gamma);
        sl_table_seti(t, "iterations", (int64_t)st->iterations);
        sl_table_seti(t, "tokens_emitted", (int64_t)st->tokens_emitted);
        sl_table_seti(t, "drafted", (int64_t)st->drafted);
        sl_table_seti(t, "accepted", (int64_t)st->accepted);
        sl_table_setd(t, "alpha_hat", r->alpha_hat);
        sl_table_setd(t, "tokens_per_iteration", r->tokens_per_iteration);
        sl_table_setd(t, "draft_s", st->draft_s);
        sl_table_setd(t, "verify_s", st->verify_s);
        sl_table_setd(t, "sample_s", st->sample_s);
    }
    sl_table_setd(t, "wall_s", r->wall_s);
    sl_table_setd(t, "tokens_per_s", r->tokens_per_s);
    return t;
}

int sl_generate_report(const sl_generate_result *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    sl_table *tg = continuations_table(r);
    if (!tg) return SL_EFAIL;
    sl_table *ta = summary_table(r);
    int rc = sl_table_status(tg);
    if (!rc) rc = sl_table_status(ta);
    if (rc) {
        sl_table_free(tg);
        sl_table_free(ta);
        return rc;
    }
    tables[0] = tg;
    tables[1] = ta;
    *n_tables = 2;
    return SL_OK;
}

int sl_generate_write_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : *s == '\r' ? "\\r" : *s == '\t' ? "\\t" : NULL;
        if (e) fputs(e, f);
        else fputc(*s, f);
    }
    return ferror(f) ? sl_fail(SL_EFAIL, "write failed") : SL_OK;
}
