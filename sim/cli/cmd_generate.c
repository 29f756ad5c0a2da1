/*
 * cmd_generate.c: `speclab generate`: speculative decoding (sl_spec_decode) with a real target and
 * draft model (any spec of models/sl_lm_open.h), printing the text (or token ids when the model carries no
 * tokenizer) and the acceptance statistics.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_lm_open.h"
#include "sl_spec.h"
#include "sl_tok.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab generate --target T --draft D --gamma G (--prompt-ids 1,2,3 | --prompt TEXT)\n"
            "                        --tokens N [--seed S] [--temperature X] [--top-k K] [--top-p P] [--min-p M]\n"
            "                        [--rule exact|lenient|...] [--lenience L] [--eos ID] [--format table|csv|json]\n"
            "\n"
            "Generates N tokens after the prompt from target model T, drafting G tokens per iteration with\n"
            "draft model D, and prints the text\n"
            "(token ids when T has no tokenizer) and the acceptance statistics: alpha_hat = accepted /\n"
            "drafted. The same sampling settings standardise both models' logits. --eos defaults to the\n"
            "tokenizer's <|endoftext|> when there is one; -1 disables stopping. Same seed, same output,\n"
            "whatever the thread count.\n"
            "T and D: model files (gpt2, llama or ngram; models/FORMAT.md) or lookup:N[:EPS[:NGRAM_FILE]]\n"
            "(prompt lookup, models/README.md); they must share a vocabulary.\n");
}

typedef struct {
    const char *target, *draft, *prompt_ids, *prompt;
    long gamma, tokens, eos;
    int eos_set;
    uint64_t seed;
    sl_sampling sampling;
    sl_spec_config cfg;
    sl_format fmt;
} gen_opts;

static int parse(int argc, char **argv, gen_opts *o)
{
    static const struct option opts[] = {
        {"target", required_argument, 0, 'T'}, {"draft", required_argument, 0, 'D'},
        {"gamma", required_argument, 0, 'g'},  {"prompt-ids", required_argument, 0, 'I'},
        {"prompt", required_argument, 0, 'P'}, {"tokens", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},   {"temperature", required_argument, 0, 't'},
        {"top-k", required_argument, 0, 'k'},  {"top-p", required_argument, 0, 'p'},
        {"min-p", required_argument, 0, 'm'},  {"rule", required_argument, 0, 'r'},
        {"lenience", required_argument, 0, 'l'}, {"eos", required_argument, 0, 'e'},
        {"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'},
        {0}};
    memset(o, 0, sizeof *o);
    o->gamma = -1;
    o->tokens = -1;
    o->sampling = SL_SAMPLING_DEFAULT;
    o->cfg = SL_SPEC_CONFIG_DEFAULT;
    int c, rc = SL_OK;
    long k;
    optind = 1;
    while (rc == SL_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'T': o->target = optarg; break;
        case 'D': o->draft = optarg; break;
        case 'I': o->prompt_ids = optarg; break;
        case 'P': o->prompt = optarg; break;
        case 'g': rc = sl_cli_long_in("--gamma", optarg, 1, SL_SPEC_GAMMA_MAX, &o->gamma); break;
        case 'n': rc = sl_cli_long_in("--tokens", optarg, 1, 1L << 30, &o->tokens); break;
        case 's': rc = sl_cli_u64("--seed", optarg, &o->seed); break;
        case 't': rc = sl_cli_double_in("--temperature", optarg, 0, 0, 1e6, 0, &o->sampling.temperature); break;
        case 'k':
            rc = sl_cli_long_in("--top-k", optarg, 0, 1L << 30, &k);
            o->sampling.top_k = (size_t)k;
            break;
        case 'p': rc = sl_cli_double_in("--top-p", optarg, 0, 1, 1, 0, &o->sampling.top_p); break;
        case 'm': rc = sl_cli_double_in("--min-p", optarg, 0, 0, 1, 1, &o->sampling.min_p); break;
        case 'r': rc = sl_rule_parse(optarg, &o->cfg.rule); break;
        case 'l': rc = sl_cli_double_in("--lenience", optarg, 0, 1, 1, 0, &o->cfg.lenience); break;
        case 'e':
            rc = sl_cli_long_in("--eos", optarg, -1, INT32_MAX, &o->eos);
            o->eos_set = 1;
            break;
        case 'f': rc = sl_format_parse(optarg, &o->fmt); break;
        default: return sl_fail(SL_EINPUT, "bad option (speclab generate --help)");
        }
    }
    if (rc) return rc;
    if (optind != argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!o->target || !o->draft) return sl_fail(SL_EINPUT, "--target and --draft are required");
    if (o->gamma < 0) return sl_fail(SL_EINPUT, "--gamma is required");
    if (o->tokens < 0) return sl_fail(SL_EINPUT, "--tokens is required");
    if (!o->prompt_ids == !o->prompt) return sl_fail(SL_EINPUT, "give exactly one of --prompt-ids and --prompt");
    return sl_spec_config_validate(&o->cfg);
}

/* "1,2,3" -> ids (malloc'd). Range against the vocabulary is checked later, by the model. */
static int parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = sl_malloc(cap * sizeof *v);
    if (!v) return SL_EFAIL;
    size_t k = 0;
    const char *p = s;
    while (1) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != 0) || x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return sl_fail(SL_EINPUT, "--prompt-ids: '%s' is not a comma-separated list of integers", s);
        }
        v[k++] = (int32_t)x;
        if (!*end) break;
        p = end + 1;
    }
    *ids = v;
    *n = k;
    return SL_OK;
}

int sl_cmd_generate(int argc, char **argv)
{
    gen_opts o;
    int rc = parse(argc, argv, &o);
    if (rc == -1) return 0;
    if (rc) return rc;
    sl_lm_handle *ht = NULL, *hd = NULL;
    sl_tok *tok = NULL;
    int32_t *prompt = NULL, *out = NULL;
    char *text = NULL;
    sl_rand_rng rr;
    int rng_ok = 0;
    sl_table *tg = NULL, *ta = NULL;
    size_t n_prompt = 0, n_out = 0;

    /* The target first: a lookup draft takes its vocabulary, and the one vocabulary check of
     * sl_lm_open compares the draft's against it. */
    sl_lm_open_opts ot = {o.sampling, 0, "--target", NULL};
    if ((rc = sl_lm_open(o.target, &ot, &ht))) goto done;
    sl_lm_open_opts od = {o.sampling, ht->vocab_size, "--draft", o.target};
    if ((rc = sl_lm_open(o.draft, &od, &hd))) goto done;
    if (ht->tokenizer_json && (rc = sl_tok_from_json(ht->tokenizer_json, &tok))) goto done;
    if (o.prompt) {
        if (!tok) {
            rc = sl_fail(SL_EINPUT, "--prompt: the target %s carries no tokenizer; use --prompt-ids", o.target);
            goto done;
        }
        size_t n;
        if ((rc = sl_tok_encode(tok, o.prompt, strlen(o.prompt), &prompt, &n))) goto done;
        n_prompt = n;
    } else if ((rc = parse_ids(o.prompt_ids, &prompt, &n_prompt))) {
        goto done;
    }
    if (n_prompt == 0) {
        rc = sl_fail(SL_EINPUT, "--prompt: encodes to no tokens");
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || (size_t)prompt[i] >= ht->vocab_size) {
            rc = sl_fail(SL_EINPUT, "--prompt-ids: token id %d is outside [0, %zu), the vocabulary of %s", prompt[i],
                         ht->vocab_size, o.target);
            goto done;
        }
    int32_t eos = o.eos_set ? (int32_t)o.eos : tok ? sl_tok_special_id(tok, "<|endoftext|>") : -1;
    /* The target sees prompt + all new tokens + one verification block of gamma + 1. */
    const size_t need = n_prompt + (size_t)o.tokens + (size_t)o.gamma + 1;
    const size_t limit = ht->context < hd->context ? ht->context : hd->context;
    if (need > limit) {
        rc = sl_fail(SL_EINPUT, "--tokens: prompt %zu + %ld new + gamma %ld + 1 = %zu tokens exceed the context of %zu",
                     n_prompt, o.tokens, o.gamma, need, limit);
        goto done;
    }
    if ((rc = sl_lm_start(ht, need)) || (rc = sl_lm_start(hd, need))) goto done;
    if ((rc = sl_rand_rng_init(&rr, o.seed, 0))) goto done;
    rng_ok = 1;
    out = sl_malloc(((size_t)o.tokens + (size_t)o.gamma + 1) * sizeof *out);
    if (!out) {
        rc = SL_EFAIL;
        goto done;
    }
    sl_spec_stats st;
    memset(&st, 0, sizeof st);
    double t0 = sl_now_s();
    rc = sl_spec_decode(&o.cfg, (size_t)o.gamma, &ht->lm, &hd->lm, prompt, n_prompt, (size_t)o.tokens, eos,
                        &rr.base, out, &n_out, &st, NULL, NULL);
    double wall_s = sl_now_s() - t0;
    if (rc) goto done;
    if (tok) {
        size_t nb;
        if ((rc = sl_tok_decode(tok, out, n_out, &text, &nb))) goto done;
    }

    tg = sl_table_alloc("generation");
    ta = sl_table_alloc("acceptance");
    if (!tg || !ta) {
        rc = SL_EFAIL;
        goto done;
    }
    sl_table_add_col(tg, "n_prompt", SL_COL_INT, NULL);
    sl_table_add_col(tg, "n_new", SL_COL_INT, NULL);
    sl_table_add_col(tg, "token_ids", SL_COL_STRING, NULL);
    sl_table_add_col(tg, "text", SL_COL_STRING, NULL);
    sl_table_add_row(tg);
    sl_table_set_int(tg, 0, (int64_t)n_prompt);
    sl_table_set_int(tg, 1, (int64_t)n_out);
    {
        size_t cap = n_out * 12 + 1, k = 0;
        char *ids = sl_malloc(cap);
        if (!ids) {
            rc = SL_EFAIL;
            goto done;
        }
        ids[0] = 0;
        for (size_t i = 0; i < n_out; i++) k += (size_t)snprintf(ids + k, cap - k, "%s%d", i ? "," : "", out[i]);
        sl_table_set_string(tg, 2, ids);
        free(ids);
    }
    if (text) sl_table_set_string(tg, 3, text);
    const char *cols[] = {"gamma", "iterations", "tokens_emitted", "drafted", "accepted", "alpha_hat",
                          "tokens_per_iteration", "draft_s", "verify_s", "sample_s", "wall_s", "tokens_per_s"};
    for (int i = 0; i < 12; i++)
        sl_table_add_col(ta, cols[i], i < 5 ? SL_COL_INT : SL_COL_DOUBLE, i < 5 ? NULL : "%.4f");
    sl_table_add_row(ta);
    sl_table_set_int(ta, 0, o.gamma);
    sl_table_set_int(ta, 1, (int64_t)st.iterations);
    sl_table_set_int(ta, 2, (int64_t)st.tokens_emitted);
    sl_table_set_int(ta, 3, (int64_t)st.drafted);
    sl_table_set_int(ta, 4, (int64_t)st.accepted);
    sl_table_set_double(ta, 5, st.drafted ? (double)st.accepted / (double)st.drafted : NAN);
    sl_table_set_double(ta, 6, st.iterations ? (double)st.tokens_emitted / (double)st.iterations : NAN);
    sl_table_set_double(ta, 7, st.draft_s);
    sl_table_set_double(ta, 8, st.verify_s);
    sl_table_set_double(ta, 9, st.sample_s);
    sl_table_set_double(ta, 10, wall_s);
    sl_table_set_double(ta, 11, wall_s > 0 ? (double)n_out / wall_s : NAN);
    if (o.fmt == SL_FMT_TABLE) {
        /* The text (or ids) on its own lines, then the statistics. */
        if (text) printf("%s\n", text);
        else {
            for (size_t i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
            printf("\n");
        }
        printf("\n");
        rc = sl_table_write(ta, stdout, SL_FMT_TABLE);
    } else {
        sl_table *both[2] = {tg, ta};
        rc = sl_report_write(both, 2, stdout, o.fmt);
    }
done:
    sl_table_free(tg);
    sl_table_free(ta);
    free(text);
    free(out);
    free(prompt);
    if (rng_ok) sl_rand_rng_free(&rr);
    sl_lm_close(ht);
    sl_lm_close(hd);
    if (tok) sl_tok_free(tok);
    return rc;
}
