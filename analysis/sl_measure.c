/* sl_measure.c: sources and prompts for sl_log_measure (sl_measure.h). */
#include "sl_measure.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_import.h"
#include "sl_lm_open.h"
#include "sl_prompts.h"
#include "sl_tok.h"

void sl_measure_config_init(sl_measure_config *c)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    memset(c, 0, sizeof *c);
    c->synth = SL_SYNTH_DEFAULT;
    c->sequences = 8;
    c->prompt_len = 4;
    c->eos = m.eos;
    c->sampling = m.sampling;
    c->seed = 1;
    c->dist = SL_LOG_DIST_F32;
    c->shard_sequences = m.shard_sequences;
    c->write = SL_LOG_WRITE_OPTS_DEFAULT;
}

/* Prompts as arrays of token ids: (n) arrays tok[i] of len[i] ids. */
typedef struct {
    size_t n;
    int32_t **tok;
    size_t *len;
} prompt_set;

static void prompt_set_free(prompt_set *p)
{
    for (size_t i = 0; p->tok && i < p->n; i++) free(p->tok[i]);
    free(p->tok);
    free(p->len);
    memset(p, 0, sizeof *p);
}

/* The token-id prompts of path (data/sl_prompts.h), taken over as a prompt_set. */
static int read_prompt_ids(const char *path, prompt_set *out)
{
    sl_prompt_ids *p;
    int rc = sl_prompt_ids_read(path, &p);
    if (rc) return rc;
    *out = (prompt_set){p->n, p->ids, p->len};
    free(p);
    return SL_OK;
}

/* K random prompts of L tokens: prompt i from (seed, data stream, i). */
static int random_prompts(size_t K, size_t L, size_t V, uint64_t seed, prompt_set *out)
{
    prompt_set p = {K, calloc(K, sizeof *p.tok), calloc(K, sizeof *p.len)};
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, 0);
    int rc = p.tok && p.len && r ? SL_OK : SL_EFAIL;
    for (size_t i = 0; !rc && i < K; i++) {
        sl_rng_reseed(r, seed, SL_STREAM_DATA, i);
        if (!(p.tok[i] = malloc(L * sizeof **p.tok))) {
            rc = SL_EFAIL;
            break;
        }
        p.len[i] = L;
        for (size_t j = 0; j < L; j++) p.tok[i][j] = (int32_t)gsl_rng_uniform_int(r, V);
    }
    if (r) gsl_rng_free(r);
    if (rc) {
        prompt_set_free(&p);
        return sl_fail(SL_EFAIL, "out of memory making %zu prompts", K);
    }
    *out = p;
    return SL_OK;
}

/* Text prompts (one per line) encoded with tok into a prompt set. */
static int encode_prompts(const char *path, const sl_tok *tok, prompt_set *out)
{
    sl_prompts *pr = NULL;
    int rc = sl_prompts_read(path, &pr);
    if (rc) return rc;
    prompt_set p = {pr->n, calloc(pr->n, sizeof *p.tok), calloc(pr->n, sizeof *p.len)};
    if (!p.tok || !p.len) rc = sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < pr->n; i++) {
        rc = sl_tok_encode(tok, pr->text[i], pr->len[i], &p.tok[i], &p.len[i]);
        if (!rc && p.len[i] == 0) rc = sl_fail(SL_EINPUT, "prompts: %s: prompt %zu encodes to no tokens", path, i + 1);
    }
    sl_prompts_free(pr);
    if (rc) {
        prompt_set_free(&p);
        return rc;
    }
    *out = p;
    return SL_OK;
}

/* Target and draft (any spec of models/sl_lm_open.h) on text prompts tokenized with the target's
 * tokenizer (or c->tokenizer), or on token-id prompts, then sl_log_measure. */
static int measure_models(const sl_measure_config *c, sl_log_meta *meta)
{
    sl_lm_handle *ht = NULL, *hd = NULL;
    sl_tok *tok = NULL;
    prompt_set pr = {0};
    const char *target = c->target, *draft = c->draft;
    const char *prompts = c->prompts ? c->prompts : c->prompt_ids;
    if (!c->prompts == !c->prompt_ids)
        return sl_fail(SL_EINPUT, "prompts: give text prompts or token-id prompts (prompt_ids), one of them");
    if (c->prompt_ids && c->tokenizer)
        return sl_fail(SL_EINPUT, "tokenizer: %s is not used with token-id prompts (prompt_ids %s)", c->tokenizer,
                       c->prompt_ids);
    sl_lm_open_opts ot = {meta->sampling, 0, c->target_role ? c->target_role : "target", NULL, NULL};
    int rc = sl_lm_open(target, &ot, &ht);
    sl_lm_open_opts od = {meta->sampling, ht ? ht->vocab_size : 0, c->draft_role ? c->draft_role : "draft", target,
                          ht ? ht->tokenizer_json : NULL};
    if (!rc) rc = sl_lm_open(draft, &od, &hd);
    if (c->prompts) {
        if (!rc) rc = sl_tok_load_file(c->tokenizer ? c->tokenizer : ht->file ? ht->file : "", &tok);
        if (!rc && sl_tok_vocab_size(tok) > ht->vocab_size)
            rc = sl_fail(SL_EINPUT, "the tokenizer has %zu tokens, more than the models' %zu", sl_tok_vocab_size(tok),
                         ht->vocab_size);
        if (!rc) rc = encode_prompts(prompts, tok, &pr);
    } else if (!rc) {
        rc = read_prompt_ids(prompts, &pr);
        for (size_t i = 0; !rc && i < pr.n; i++)
            for (size_t j = 0; j < pr.len[i] && !rc; j++)
                if ((size_t)pr.tok[i][j] >= ht->vocab_size)
                    rc = sl_fail(SL_EINPUT, "prompt_ids: %s line %zu holds token %d outside the vocabulary [0, %zu) of %s",
                                 prompts, i + 1, pr.tok[i][j], ht->vocab_size, target);
    }
    size_t ctx_len = !rc ? (ht->context < hd->context ? ht->context : hd->context) : 0, longest = 0;
    for (size_t i = 0; !rc && i < pr.n; i++) {
        if (pr.len[i] + meta->tokens_per_sequence > ctx_len)
            rc = sl_fail(SL_EINPUT,
                         "%s: %s: prompt %zu has %zu tokens; with %llu tokens to generate that is longer than "
                         "the context of %zu",
                         c->prompts ? "prompts" : "prompt_ids", prompts, i + 1, pr.len[i],
                         (unsigned long long)meta->tokens_per_sequence, ctx_len);
        if (pr.len[i] > longest) longest = pr.len[i];
    }
    if (!rc) rc = sl_lm_start(ht, longest + meta->tokens_per_sequence);
    if (!rc) rc = sl_lm_start(hd, longest + meta->tokens_per_sequence);
    /* A spec without a file (lookup:N) has no content hash: "" as the schema allows. */
    if (!rc && ht->file) rc = sl_model_sha256(ht->file, meta->target_sha256);
    if (!rc && hd->file) rc = sl_model_sha256(hd->file, meta->draft_sha256);
    if (!rc) {
        snprintf(meta->target_name, sizeof meta->target_name, "%s", target);
        snprintf(meta->draft_name, sizeof meta->draft_name, "%s", draft);
        snprintf(meta->source, sizeof meta->source, "models; %s %s", c->prompts ? "prompts" : "prompt_ids", prompts);
        meta->vocab_size = ht->vocab_size;
        sl_log_prompts lp = {pr.n, (const int32_t *const *)pr.tok, pr.len, NULL};
        rc = sl_log_measure(&ht->lm, &hd->lm, &lp, meta, &c->write, c->out, c->progress, c->progress_ctx);
    }
    prompt_set_free(&pr);
    if (tok) sl_tok_free(tok);
    sl_lm_close(ht);
    sl_lm_close(hd);
    return rc;
}

/* The synthetic pair of sim/sl_synth.h on random or given token-id prompts. */
static int measure_synthetic(const sl_measure_config *c, sl_log_meta *meta)
{
    sl_synth_params sp = c->synth;
    sp.seed = meta->seed;
    sp.sampling = meta->sampling;
    meta->vocab_size = sp.V;
    const char *fam = sl_synth_family_name(sp.family);
    snprintf(meta->target_name, sizeof meta->target_name, "synthetic-target:%s", fam);
    snprintf(meta->draft_name, sizeof meta->draft_name, "synthetic-draft:%s", fam);
    snprintf(meta->source, sizeof meta->source, "synthetic:%s vocab=%zu noise=%.17g draft_temperature=%.17g context=%zu",
             fam, sp.V, sp.noise, sp.draft_temperature, sp.context);
    prompt_set pr = {0};
    int rc;
    if (c->prompt_ids) {
        rc = read_prompt_ids(c->prompt_ids, &pr);
        for (size_t i = 0; !rc && i < pr.n; i++)
            for (size_t j = 0; j < pr.len[i] && !rc; j++)
                if ((size_t)pr.tok[i][j] >= sp.V)
                    rc = sl_fail(SL_EINPUT, "prompt_ids: prompt %zu holds token %d outside the vocabulary [0, %zu)", i,
                                 pr.tok[i][j], sp.V);
    } else {
        rc = random_prompts(c->sequences, c->prompt_len, sp.V, meta->seed, &pr);
    }
    sl_synth_lm *mt = NULL, *md = NULL;
    if (!rc) rc = sl_synth_alloc(&sp, 0, &mt);
    sl_synth_params spd = sp;
    if (c->draft_vocab) spd.V = c->draft_vocab;
    if (!rc) rc = sl_synth_alloc(&spd, 1, &md);
    if (!rc) {
        sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
        sl_log_prompts lp = {pr.n, (const int32_t *const *)pr.tok, pr.len, NULL};
        rc = sl_log_measure(&lt, &ld, &lp, meta, &c->write, c->out, c->progress, c->progress_ctx);
    }
    sl_synth_free(mt);
    sl_synth_free(md);
    prompt_set_free(&pr);
    return rc;
}

void sl_measure_result_free(sl_measure_result *r)
{
    if (!r) return;
    free(r->out);
    free(r);
}

/* An existing out is continued (resumed, appended to, re-assembled) only when it is a measure log
 * speclab wrote; anything else is replaced only with force. */
static int check_existing(const char *out, int force)
{
    struct stat st;
    if (force || lstat(out, &st) != 0) return SL_OK;
    sl_log_reader *r = NULL;
    int ours = S_ISREG(st.st_mode) && sl_log_open(&r, out) == SL_OK && sl_log_meta_of(r)->kind == SL_LOG_MEASURE;
    sl_log_close(r);
    sl_err_clear();
    return ours ? SL_OK : sl_out_check("out", out, 0, "was not written by speclab measure");
}

int sl_measure_run(const sl_measure_config *c, sl_measure_result **out)
{
    *out = NULL;
    if (!c->out) return sl_fail(SL_EINPUT, "out: no output file given");
    int rc0 = check_existing(c->out, c->force);
    if (rc0) return rc0;
    if (c->tokens < 1) return sl_fail(SL_EINPUT, "tokens: %zu, expected >= 1", c->tokens);
    sl_log_meta meta;
    sl_log_meta_init(&meta, SL_LOG_MEASURE);
    meta.sampling = c->sampling;
    meta.seed = c->seed;
    meta.eos = c->eos;
    meta.dist = c->dist;
    meta.shard_sequences = c->shard_sequences;
    meta.tokens_per_sequence = (uint64_t)c->tokens;
    double t0 = sl_now_s();
    int rc = c->target ? measure_models(c, &meta) : measure_synthetic(c, &meta);
    if (rc) return rc;
    /* The summary is read back from the file, so it covers shards of earlier runs too. */
    sl_log_reader *r = NULL;
    if ((rc = sl_log_open(&r, c->out))) return rc;
    sl_measure_result *res = calloc(1, sizeof *res);
    if (!res || !(res->out = strdup(c->out))) {
        free(res);
        sl_log_close(r);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    const sl_log_meta *m = sl_log_meta_of(r);
    res->sequences = sl_log_n_sequences(r);
    res->positions = sl_log_n_rows(r);
    res->vocab_size = m->vocab_size;
    res->dist = m->dist;
    res->seconds = sl_now_s() - t0;
    sl_log_close(r);
    *out = res;
    return SL_OK;
}

int sl_measure_report(const sl_measure_result *r, sl_table **out)
{
    static const sl_colspec cols[] = {SL_COL_S("file"), SL_COL_I("sequences"), SL_COL_I("positions"),
                                      SL_COL_I("vocab_size"), SL_COL_S("dist")};
    sl_table *t = SL_TABLE_NEW("measure", cols);
    sl_table_row(t);
    sl_table_sets(t, "file", r->out);
    sl_table_seti(t, "sequences", (int64_t)r->sequences);
    sl_table_seti(t, "positions", (int64_t)r->positions);
    sl_table_seti(t, "vocab_size", (int64_t)r->vocab_size);
    sl_table_sets(t, "dist", sl_log_dist_name(r->dist));
    int rc = sl_table_status(t);
    if (rc) {
        sl_table_free(t);
        t = NULL;
    }
    *out = t;
    return rc;
}
