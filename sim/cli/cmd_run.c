/*
 * cmd_run.c: `speclab run`: parses the options, opens the target, the draft and the tokenizer,
 * runs the experiment (analysis/sl_run.h: speculative decoding and the autoregressive baseline on
 * the same prompts, c and v(n) calibrated in the same run, everything into a run log), then prints
 * the report computed from that log alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_lm_open.h"
#include "sl_model.h"
#include "sl_run.h"
#include "sl_tok.h"

static const char about[] =
    "For each prompt: speculative decoding (G drafts from D, one verification call of T scoring G+1\n"
    "tokens, exact rejection) and the plain autoregressive baseline from T, both timed after an\n"
    "untimed prefill of the prompt; every iteration (drafted, accepted, emitted, seconds drafting,\n"
    "verifying, sampling) goes to the run log RUN.h5 (analysis/LOG_SCHEMA.md). In the same run it\n"
    "measures c = one draft step / one target step and v(n) = one target call on n tokens / one\n"
    "single-token call, n = 1..max(16, G+1), at a realistic context (medians after warm-up), and\n"
    "stores them in the log. Prints tokens per iteration, acceptance with bootstrap CIs over\n"
    "prompts, the measured speedup (autoregressive / speculative time per token, CI over prompts)\n"
    "next to Theorem 3.8 (v = 1) and the generalised E[N]/(G c + v(G+1)), and the time split.\n"
    "Crash-safe and resumable like measure logs: a rerun skips finished shards. The seed S\n"
    "defaults to 1; sequence s draws from (S, stream, s).\n"
    "\n"
    "A sweep (--gamma 1,2,4 or 1:4, or both: 1:4,6,8) decodes each prompt speculatively at every\n"
    "gamma of the list and then autoregressively, back to back: the decodes of each prompt are\n"
    "interleaved, so drift of the machine hits every gamma alike, and the costs each gamma pays are\n"
    "measured at that gamma in the same run (c and v(n) are calibrated once, at the largest gamma).\n"
    "It prints a row per gamma (acceptance, tokens kept per iteration, speedup, the cost of an\n"
    "iteration in baseline tokens, all with CIs over prompts; the in-run costs; the prediction;\n"
    "the best gamma), a least-squares line for that cost in gamma, and the calibration.\n";

#define STR_(x) #x
#define STR(x) STR_(x)

/* The --gamma list, ascending. */
typedef struct {
    int g[SL_RUN_MAX_GAMMAS];
    size_t n;
} gamma_list;

/* "4", "1,2,4", "1:4" or "1:4,6,8": items separated by commas, each G or an inclusive range A:B;
 * together strictly ascending, each in 1..SL_SPEC_GAMMA_MAX, at most SL_RUN_MAX_GAMMAS. */
static int parse_gammas(const char *flag, const char *arg, void *dst)
{
    gamma_list *l = dst;
    l->n = 0;
    for (const char *s = arg;;) {
        const char *comma = strchr(s, ',');
        const size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char item[64], *colon;
        if (len == 0 || len >= sizeof item)
            return sl_fail(SL_EINPUT, "%s: '%s' is not a list like 4, 1,2,4, 1:4 or 1:4,6,8", flag, arg);
        memcpy(item, s, len);
        item[len] = 0;
        if ((colon = strchr(item, ':'))) *colon = 0;
        long a, b;
        int rc = sl_cli_long_in(flag, item, 1, SL_SPEC_GAMMA_MAX, &a);
        if (rc) return rc;
        b = a;
        if (colon && (rc = sl_cli_long_in(flag, colon + 1, 1, SL_SPEC_GAMMA_MAX, &b))) return rc;
        if (b < a) return sl_fail(SL_EINPUT, "%s: the range %ld:%ld in '%s' runs backwards", flag, a, b, arg);
        for (long g = a; g <= b; g++) {
            if (l->n > 0 && g <= l->g[l->n - 1])
                return sl_fail(SL_EINPUT, "%s: '%s' is not strictly ascending (%ld after %d)", flag, arg, g,
                               l->g[l->n - 1]);
            if (l->n == SL_RUN_MAX_GAMMAS)
                return sl_fail(SL_EINPUT, "%s: '%s' has more than %d gammas", flag, arg, SL_RUN_MAX_GAMMAS);
            l->g[l->n++] = (int)g;
        }
        if (!comma) return SL_OK;
        s = comma + 1;
    }
}

typedef struct {
    const char *target, *draft, *tokenizer;
    gamma_list gammas;
    sl_run_config run;
    sl_run_report_config report;
    sl_format fmt;
    int quiet;
} run_opts;

/* Registers every option into c, bound to o (defaults set first). */
static void declare(sl_cli *c, run_opts *o)
{
    sl_run_config *r = &o->run;
    sl_run_config_init(r);
    o->report = SL_RUN_REPORT_CONFIG_DEFAULT;
    sl_cli_init(c, "run", "--target T --draft D (--prompts FILE | --prompt-ids FILE) --tokens N --gamma LIST --out RUN.h5 [options]",
                about);
    sl_cli_string(c, "target", "T", &o->target, "target model file");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(c, "draft", "D", &o->draft, "draft: any model spec (file, n-gram, lookup:N)");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(c, "prompts", "FILE", &r->prompts,
                  "text prompts (data/prompts/*.txt), tokenized with the target's tokenizer");
    sl_cli_string(c, "prompt-ids", "FILE", &r->prompt_ids,
                  "or prompts as token ids: one prompt per line of whitespace-separated ids (no tokenizer needed)");
    sl_cli_string(c, "tokenizer", "F", &o->tokenizer, "tokenizer file instead of the target's embedded one");
    sl_cli_size(c, "tokens", "N", &r->tokens, 1, (size_t)1 << 24, "tokens generated per prompt, both modes");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_custom(c, "gamma", "LIST", &o->gammas, parse_gammas,
                  "drafts per iteration, 1.." STR(SL_SPEC_GAMMA_MAX) "; a list (1,2,4 or 1:4,6) is a sweep of "
                  "at most " STR(SL_RUN_MAX_GAMMAS) " gammas, each prompt's decodes interleaved");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_size(c, "max-prompts", "K", &r->max_prompts, 1, (size_t)1 << 30, "use the first K prompts only (default: all)");
    sl_cli_group_sampling(c, &r->sampling);
    sl_cli_group_rule(c, &r->rule);
    sl_cli_long(c, "eos", "ID", &r->eos, -1, INT32_MAX,
                "stop a sequence at this token (default: none, so every prompt decodes N)");
    sl_cli_group_seed(c, &r->seed, NULL);
    sl_cli_long(c, "cost-reps", "R", &r->cost_reps, 1, 100000,
                "timed repetitions per cost point after 3 warm-ups (default 15)");
    sl_cli_size(c, "cost-context", "L", &r->cost_context, 1, (size_t)1 << 24,
                "context length of the cost measurement (default: median prompt + N/2)");
    sl_cli_size(c, "v-max", "M", &r->v_max, 2, 1024, "largest n of v(n) (default max(16, G+1), G the largest gamma)");
    sl_cli_long(c, "boot", "B", &o->report.boot, 0, 10000000, "bootstrap resamples over prompts (default 2000)");
    sl_cli_dbl(c, "ci", "L", &o->report.ci, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "CI level (default 0.95)");
    sl_cli_size(c, "shard-prompts", "S", &r->shard_prompts, 1, (size_t)1 << 20, "prompts per log shard (default 4)");
    sl_cli_string(c, "tokens-out", "FILE", &r->tokens_out,
                  "also write the generated token ids of the sequences decoded now");
    sl_cli_string(c, "out", "RUN.h5", &r->out, "run log");
    c->opt[c->n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_group_force(c, &r->force);
    sl_cli_group_device(c, NULL);
    sl_cli_group_format(c, &o->fmt);
    sl_cli_group_quiet(c, &o->quiet);
}

/* The report of the log at path, printed in fmt: one gamma's tables, or a sweep's. */
static int print_report(const char *path, const sl_run_report_config *cfg, int sweep, sl_format fmt)
{
    sl_table **t = NULL;
    size_t n = 0;
    int rc;
    if (sweep) {
        sl_run_sweep sw;
        if ((rc = sl_run_sweep_file(path, cfg, &sw))) return rc;
        rc = sl_run_sweep_tables(&sw, &t, &n);
        sl_run_sweep_free(&sw);
    } else {
        sl_run_report res;
        if ((rc = sl_run_report_file(path, cfg, &res))) return rc;
        rc = sl_run_report_tables(&res, &t, &n);
        sl_run_report_free(&res);
    }
    if (!rc) rc = sl_report_write(t, n, stdout, fmt);
    for (size_t i = 0; i < n; i++) sl_table_free(t[i]);
    free(t);
    return rc;
}

int sl_cmd_run(int argc, char **argv)
{
    sl_cli c;
    run_opts o = {0};
    declare(&c, &o);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    sl_run_config *r = &o.run;
    r->target_path = o.target;
    r->draft_spec = o.draft;
    o.report.seed = r->seed;
    const int sweep = o.gammas.n >= 2;
    r->gamma = o.gammas.g[0];
    if (sweep) {
        r->gammas = o.gammas.g;
        r->n_gammas = o.gammas.n;
    }
    if ((rc = sl_run_config_validate(r))) return rc;

    sl_model *mt = NULL;
    sl_lm_handle *hd = NULL; /* the draft: any spec of models/sl_lm_open.h (transformer, n-gram, lookup) */
    sl_tok *tok = NULL;
    if ((rc = sl_model_open(o.target, &mt))) goto done;
    sl_lm_open_opts od = {r->sampling, mt->cfg.vocab_size, "--draft", o.target, mt->tokenizer_json};
    if ((rc = sl_lm_open(o.draft, &od, &hd))) goto done;
    if (o.tokenizer) rc = sl_tok_load_file(o.tokenizer, &tok);
    else if (mt->tokenizer_json) rc = sl_tok_from_json(mt->tokenizer_json, &tok);
    else if (r->prompts) rc = sl_fail(SL_EINPUT, "--target %s carries no tokenizer; give --tokenizer FILE or --prompt-ids", o.target);
    if (rc) goto done;

    r->target = mt;
    r->draft = hd;
    r->tok = tok;
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, "run", "sequences", o.quiet);
    r->progress = sl_cli_progress_fn(&pg);
    r->progress_ctx = &pg;
    rc = sl_run_experiment(r);
    sl_cli_progress_end(&pg);
    if (!rc) rc = print_report(r->out, &o.report, sweep, o.fmt);
done:
    if (tok) sl_tok_free(tok);
    sl_lm_close(hd);
    sl_model_close(mt);
    return rc;
}
