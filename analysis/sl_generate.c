/* sl_generate.c: speculative generation of one prompt (sl_generate.h). */
#include "sl_generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_lm_open.h"
#include "sl_tok.h"

void sl_generate_result_free(sl_generate_result *r)
{
    if (!r) return;
    free(r->tokens);
    free(r->text);
    free(r);
}

int sl_generate_run(const sl_generate_config *c, sl_generate_result **out)
{
    *out = NULL;
    int rc = sl_spec_config_validate(&c->rule);
    if (rc) return rc;
    if (c->gamma < 1 || c->gamma > SL_SPEC_GAMMA_MAX)
        return sl_fail(SL_EINPUT, "gamma: %zu is outside [1, %d]", c->gamma, SL_SPEC_GAMMA_MAX);
    if (!c->prompt == !c->prompt_ids) return sl_fail(SL_EINPUT, "prompt: give the text or the token ids, one of them");
    sl_lm_handle *ht = NULL, *hd = NULL;
    sl_tok *tok = NULL;
    int32_t *prompt = NULL;
    sl_rand_rng rr;
    int rng_ok = 0;
    size_t n_prompt = 0;
    sl_generate_result *r = calloc(1, sizeof *r);
    if (!r) return sl_fail(SL_EFAIL, "out of memory");
    r->gamma = c->gamma;

    /* The target first: a lookup draft takes its vocabulary, and the one vocabulary check of
     * sl_lm_open compares the draft's against it. */
    sl_lm_open_opts ot = {c->sampling, 0, c->target_role ? c->target_role : "target", NULL};
    if ((rc = sl_lm_open(c->target, &ot, &ht))) goto done;
    sl_lm_open_opts od = {c->sampling, ht->vocab_size, c->draft_role ? c->draft_role : "draft", c->target};
    if ((rc = sl_lm_open(c->draft, &od, &hd))) goto done;
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
    int32_t eos = c->eos_set ? c->eos : tok ? sl_tok_special_id(tok, "<|endoftext|>") : -1;
    /* The target sees prompt + all new tokens + one verification block of gamma + 1. */
    const size_t need = n_prompt + c->tokens + c->gamma + 1;
    const size_t limit = ht->context < hd->context ? ht->context : hd->context;
    if (need > limit) {
        rc = sl_fail(SL_EINPUT, "tokens: prompt %zu + %zu new + gamma %zu + 1 = %zu tokens exceed the context of %zu",
                     n_prompt, c->tokens, c->gamma, need, limit);
        goto done;
    }
    if ((rc = sl_lm_start(ht, need)) || (rc = sl_lm_start(hd, need))) goto done;
    if ((rc = sl_rand_rng_init(&rr, c->seed, 0))) goto done;
    rng_ok = 1;
    r->tokens = sl_malloc((c->tokens + c->gamma + 1) * sizeof *r->tokens);
    if (!r->tokens) {
        rc = SL_EFAIL;
        goto done;
    }
    r->n_prompt = n_prompt;
    double t0 = sl_now_s();
    rc = sl_spec_decode(&c->rule, c->gamma, &ht->lm, &hd->lm, prompt, n_prompt, c->tokens, eos, &rr.base, r->tokens,
                        &r->n_out, &r->stats, NULL, NULL);
    r->wall_s = sl_now_s() - t0;
    if (rc) goto done;
    if (tok) {
        size_t nb;
        if ((rc = sl_tok_decode(tok, r->tokens, r->n_out, &r->text, &nb))) goto done;
    }
    const sl_spec_stats *st = &r->stats;
    r->alpha_hat = st->drafted ? (double)st->accepted / (double)st->drafted : NAN;
    r->tokens_per_iteration = st->iterations ? (double)st->tokens_emitted / (double)st->iterations : NAN;
    r->tokens_per_s = r->wall_s > 0 ? (double)r->n_out / r->wall_s : NAN;
    *out = r;
    r = NULL;
done:
    sl_generate_result_free(r);
    free(prompt);
    if (rng_ok) sl_rand_rng_free(&rr);
    sl_lm_close(ht);
    sl_lm_close(hd);
    if (tok) sl_tok_free(tok);
    return rc;
}

int sl_generate_report(const sl_generate_result *r, sl_table **tables, size_t *n_tables)
{
    *n_tables = 0;
    static const sl_colspec gcols[] = {SL_COL_I("n_prompt"), SL_COL_I("n_new"), SL_COL_S("token_ids"), SL_COL_S("text")};
    static const sl_colspec acols[] = {
        SL_COL_I("gamma"), SL_COL_I("iterations"), SL_COL_I("tokens_emitted"), SL_COL_I("drafted"), SL_COL_I("accepted"),
        SL_COL_D("alpha_hat", "%.4f"), SL_COL_D("tokens_per_iteration", "%.4f"), SL_COL_D("draft_s", "%.4f"),
        SL_COL_D("verify_s", "%.4f"), SL_COL_D("sample_s", "%.4f"), SL_COL_D("wall_s", "%.4f"),
        SL_COL_D("tokens_per_s", "%.4f")};
    sl_table *tg = SL_TABLE_NEW("generation", gcols), *ta = SL_TABLE_NEW("acceptance", acols);
    size_t cap = r->n_out * 12 + 1, k = 0;
    char *ids = sl_malloc(cap);
    if (!ids) {
        sl_table_free(tg);
        sl_table_free(ta);
        return SL_EFAIL;
    }
    ids[0] = 0;
    for (size_t i = 0; i < r->n_out; i++) k += (size_t)snprintf(ids + k, cap - k, "%s%d", i ? "," : "", r->tokens[i]);
    sl_table_row(tg);
    sl_table_seti(tg, "n_prompt", (int64_t)r->n_prompt);
    sl_table_seti(tg, "n_new", (int64_t)r->n_out);
    sl_table_sets(tg, "token_ids", ids);
    if (r->text) sl_table_sets(tg, "text", r->text);
    free(ids);
    const sl_spec_stats *st = &r->stats;
    sl_table_row(ta);
    sl_table_seti(ta, "gamma", (int64_t)r->gamma);
    sl_table_seti(ta, "iterations", (int64_t)st->iterations);
    sl_table_seti(ta, "tokens_emitted", (int64_t)st->tokens_emitted);
    sl_table_seti(ta, "drafted", (int64_t)st->drafted);
    sl_table_seti(ta, "accepted", (int64_t)st->accepted);
    sl_table_setd(ta, "alpha_hat", r->alpha_hat);
    sl_table_setd(ta, "tokens_per_iteration", r->tokens_per_iteration);
    sl_table_setd(ta, "draft_s", st->draft_s);
    sl_table_setd(ta, "verify_s", st->verify_s);
    sl_table_setd(ta, "sample_s", st->sample_s);
    sl_table_setd(ta, "wall_s", r->wall_s);
    sl_table_setd(ta, "tokens_per_s", r->tokens_per_s);
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
