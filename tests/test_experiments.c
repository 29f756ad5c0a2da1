/* test_experiments.c: the result structs of `speclab dist`, `eval`, `measure` and `generate`
 * (sim/sl_dist_pair.h, analysis/sl_eval.h, sl_measure.h, sl_generate.h) against independent
 * computations, and their reports against the structs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_dist_pair.h"
#include "sl_dist_report.h"
#include "sl_eval.h"
#include "sl_generate.h"
#include "sl_measure.h"
#include "sl_model.h"
#include "sl_tok.h"

static char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k = 0;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "/tmp/sl_test_experiments_%ld_%s", (long)getpid(), name);
    return p;
}

static void rm_log(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.d'", path, path);
    cr_assert_eq(system(cmd), 0);
}

/* Every field from its definition, summed here term by term (1e-15: a few terms of doubles). */
Test(experiments, dist_pair_fields_equal_their_definitions)
{
    const double p[] = {0.5, 0.3, 0.2, 0}, q[] = {0.1, 0.3, 0.4, 0.2}, l = 0.7;
    sl_dist_pair *r;
    cr_assert_eq(sl_dist_pair_compute(p, q, 4, 1e-9, l, &r), SL_OK, "%s", sl_errmsg());
    double beta = 0, al = 0, sm = 0, z = 0, klpq = 0, hp = 0, nonit = INFINITY;
    for (int x = 0; x < 4; x++) {
        beta += fmin(p[x], q[x]);
        al += fmin(q[x], p[x] / l);
        sm += p[x] * q[x];
        z += fmax(0, p[x] - q[x]);
        if (p[x] > 0) {
            klpq += p[x] * log(p[x] / q[x]);
            hp -= p[x] * log(p[x]);
            nonit = fmin(nonit, q[x] / p[x]);
        }
    }
    cr_assert_float_eq(r->beta, beta, 1e-15);
    cr_assert_float_eq(r->d_lk, 1 - beta, 1e-15);
    cr_assert_float_eq(r->tv, 1 - beta, 1e-15); /* TV = 1 - beta for two pmfs */
    cr_assert_float_eq(r->alpha_lenient, al, 1e-15);
    cr_assert_float_eq(r->alpha_sampler_match, sm, 1e-15);
    cr_assert_float_eq(r->alpha_nonit_rejection, nonit, 1e-15);
    cr_assert_float_eq(r->rejection_prob, z, 1e-15);
    cr_assert_float_eq(r->kl_p_q, klpq, 1e-15);
    cr_assert(isinf(r->kl_q_p)); /* q has mass where p has none */
    cr_assert_float_eq(r->entropy_p, hp, 1e-15);
    for (int x = 0; x < 4; x++) cr_assert_float_eq(r->residual[x], fmax(0, p[x] - q[x]) / z, 1e-15);
    sl_table *t[2];
    size_t n;
    cr_assert_eq(sl_dist_pair_report(r, t, &n), SL_OK);
    cr_assert_eq(n, 2);
    double v;
    cr_assert_eq(sl_table_getd(sl_report_find(t, n, "summary"), 0, "beta", &v), SL_OK);
    cr_assert_eq(v, r->beta);
    cr_assert_eq(sl_table_getd(sl_report_find(t, n, "per_token"), 3, "q", &v), SL_OK);
    cr_assert_eq(v, 0.2);
    sl_table_free(t[0]);
    sl_table_free(t[1]);
    sl_dist_pair_free(r);
    /* p == q: no rejection, the residual is undefined (NaN); bad input names the quantity. */
    cr_assert_eq(sl_dist_pair_compute(p, p, 4, 1e-9, 1, &r), SL_OK);
    cr_assert(r->beta == 1 && r->rejection_prob == 0 && isnan(r->residual[0]));
    sl_dist_pair_free(r);
    const double bad[] = {0.5, 0.4, 0.1, 0.1};
    cr_assert_eq(sl_dist_pair_compute(bad, q, 4, 1e-9, 1, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "p sums to", 9), "%s", sl_errmsg());
    cr_assert_eq(sl_dist_pair_compute(p, q, 4, 1e-9, 0, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "lenience:", 9), "%s", sl_errmsg());
}

/* Teacher-forced loss against the model's own logits through sl_model_forward and a softmax
 * computed here, window by window (consecutive windows of C = 8 over 20 tokens: 3 windows). */
Test(experiments, eval_equals_softmax_of_forward_logits)
{
    const char *model = "tests/ref/gpt2_f32.safetensors";
    sl_model *m;
    cr_assert_eq(sl_model_open(model, &m), SL_OK, "%s", sl_errmsg());
    const size_t V = m->cfg.vocab_size, n = 20, C = 8;
    int32_t ids[20];
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % V);
    const char *tok = tmp_path("e.tok");
    cr_assert_eq(sl_tokfile_write(tok, ids, n, V), SL_OK, "%s", sl_errmsg());
    float *logits = malloc(C * V * sizeof *logits);
    double nats = 0;
    size_t scored = 0;
    for (size_t off = 0; off < n - 1; off += C) {
        size_t len = n - 1 - off < C ? n - 1 - off : C;
        sl_model_ctx *ctx;
        cr_assert_eq(sl_model_ctx_alloc(m, C, &ctx), SL_OK);
        cr_assert_eq(sl_model_forward(ctx, ids + off, len, logits), SL_OK);
        for (size_t j = 0; j < len; j++) {
            const float *z = logits + j * V;
            double mx = -INFINITY, s = 0;
            for (size_t v = 0; v < V; v++) mx = fmax(mx, z[v]);
            for (size_t v = 0; v < V; v++) s += exp(z[v] - mx);
            nats -= z[ids[off + j + 1]] - mx - log(s);
        }
        scored += len;
        sl_model_ctx_free(ctx);
    }
    sl_eval_config c = SL_EVAL_CONFIG_DEFAULT;
    c.model = model;
    c.tokens = tok;
    c.context = C;
    c.bytes = 100;
    sl_eval_result *r;
    cr_assert_eq(sl_eval_run(&c, &r), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(r->windows, 3);
    cr_assert_eq(r->tokens_scored, scored);
    cr_assert_eq(r->tokens_in_file, n);
    cr_assert_str_eq(r->kind, "transformer");
    /* 1e-9 relative: the engine's double softmax of the same float logits. */
    cr_assert_float_eq(r->nats_per_token, nats / (double)scored, 1e-9 * nats / (double)scored);
    cr_assert_float_eq(r->bits_per_byte, r->nats_per_token / log(2.0) * (double)n / 100, 1e-12);
    sl_table *t;
    cr_assert_eq(sl_eval_report(r, &t), SL_OK);
    double v;
    cr_assert_eq(sl_table_getd(t, 0, "nats_per_token", &v), SL_OK);
    cr_assert_eq(v, r->nats_per_token);
    sl_table_free(t);
    sl_eval_result_free(r);
    /* A context beyond the model's is refused, naming the quantity. */
    c.context = m->cfg.max_seq_len + 1;
    cr_assert_eq(sl_eval_run(&c, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "context:", 8), "%s", sl_errmsg());
    free(logits);
    unlink(tok);
    sl_model_close(m);
}

/* A synthetic measure: K sequences of N positions each (no eos), read back from the file; a rerun
 * resumes (skips every shard) and reports the same; bad prompt ids name the quantity. */
Test(experiments, measure_result_reads_back_the_log)
{
    sl_measure_config c;
    sl_measure_config_init(&c);
    c.out = tmp_path("m.h5");
    rm_log(c.out);
    c.synth.V = 64;
    c.sequences = 3;
    c.prompt_len = 2;
    c.tokens = 10;
    c.shard_sequences = 2;
    sl_measure_result *r;
    for (int run = 0; run < 2; run++) {
        cr_assert_eq(sl_measure_run(&c, &r), SL_OK, "%s", sl_errmsg());
        cr_assert_str_eq(r->out, c.out);
        cr_assert_eq(r->sequences, 3);
        cr_assert_eq(r->positions, 30);
        cr_assert_eq(r->vocab_size, 64);
        cr_assert_eq(r->dist, SL_LOG_DIST_F32);
        sl_table *t;
        cr_assert_eq(sl_measure_report(r, &t), SL_OK);
        double v;
        cr_assert_eq(sl_table_getd(t, 0, "positions", &v), SL_OK);
        cr_assert_eq(v, 30);
        cr_assert_str_eq(sl_table_gets(t, 0, "dist"), "float32");
        sl_table_free(t);
        sl_measure_result_free(r);
    }
    rm_log(c.out);
    const char *ids = tmp_path("ids.txt");
    FILE *f = fopen(ids, "w");
    fprintf(f, "1 2\n3 64\n");
    fclose(f);
    c.prompt_ids = ids;
    cr_assert_eq(sl_measure_run(&c, &r), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "prompt_ids: prompt 1 holds token 64", 35), "%s", sl_errmsg());
    unlink(ids);
    rm_log(c.out);
}

/* A model drafting for itself (p == q) has every draft accepted: alpha_hat = 1; the same seed
 * gives the same tokens; the report's cells are the struct's fields. */
Test(experiments, generate_self_draft_accepts_everything)
{
    const int32_t prompt[] = {1, 2, 3};
    sl_generate_config c = {.target = "tests/ref/gpt2_f32.safetensors", .draft = "tests/ref/gpt2_f32.safetensors",
                            .prompt_ids = prompt, .n_prompt_ids = 3, .gamma = 3, .tokens = 12, .eos_set = 1,
                            .eos = -1, .seed = 5, .sampling = SL_SAMPLING_DEFAULT, .rule = SL_SPEC_CONFIG_DEFAULT};
    sl_generate_result *a, *b;
    cr_assert_eq(sl_generate_run(&c, &a), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_generate_run(&c, &b), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(a->n_out, 12);
    cr_assert_eq(a->n_prompt, 3);
    cr_assert(a->stats.drafted > 0 && a->stats.accepted == a->stats.drafted);
    cr_assert_eq(a->alpha_hat, 1.0);
    cr_assert_float_eq(a->tokens_per_iteration, (double)a->stats.tokens_emitted / (double)a->stats.iterations, 1e-15);
    cr_assert_null(a->text); /* the fixture carries no tokenizer */
    cr_assert_eq(memcmp(a->tokens, b->tokens, 12 * sizeof *a->tokens), 0);
    sl_table *t[2];
    size_t n;
    cr_assert_eq(sl_generate_report(a, t, &n), SL_OK);
    double v;
    cr_assert_eq(sl_table_getd(sl_report_find(t, n, "acceptance"), 0, "accepted", &v), SL_OK);
    cr_assert_eq(v, (double)a->stats.accepted);
    const char *tok = sl_table_gets(sl_report_find(t, n, "generation"), 0, "token_ids");
    char first[16];
    snprintf(first, sizeof first, "%d,", a->tokens[0]);
    cr_assert(tok && !strncmp(tok, first, strlen(first)), "%s", tok);
    sl_table_free(t[0]);
    sl_table_free(t[1]);
    sl_generate_result_free(a);
    sl_generate_result_free(b);
    /* Too long for the context: refused, naming the quantity. */
    c.tokens = 100000;
    cr_assert_eq(sl_generate_run(&c, &a), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "tokens:", 7), "%s", sl_errmsg());
}
