/*
 * cmd_verify_models.c: `speclab verify --target T --draft D ...`: the sampler tested on a real
 * draft/target pair in one process (analysis/sl_verify_models.h). cmd_verify.c dispatches here
 * whenever --target or --draft is given.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_cli.h"
#include "sl_verify_models.h"

static const char about[] =
    "Draws K speculative continuations of k tokens of one prompt with draft D and target T, and K\n"
    "plain autoregressive ones from T, the prompt scored once per worker, and tests that the\n"
    "sampler is lossless (analysis/VERIFY_MODELS.md):\n"
    "  first         token 1 against the exact p(.|prompt) (ar_first: the same for the baseline)\n"
    "  position_j    speculative vs autoregressive token j (chi^2 homogeneity)\n"
    "  pit_ks        every speculative token against the target's own p(.|prefix): randomised PIT\n"
    "  pit_chi2      values, i.i.d. U(0,1) when lossless; KS and a binned chi^2 (ar_pit_*: baseline)\n"
    "  support       any token of probability 0 is a certain rejection\n"
    "Holm over all tests; exit status 0 consistent with lossless, 1 rejected, 2 bad input.\n"
    "Defaults K = 4000, k = 4, gamma = 3: with gamma 3 one iteration can cover the 4 tokens (three\n"
    "drafts and the bonus), so every draft position and every kind of emitted token (accepted\n"
    "draft, resample after a rejection, bonus) is exercised; 4000 x 4 PIT values give KS power\n"
    "against shifts of ~0.02 in the PIT distribution, enough to reject the wrong variants that\n"
    "change the output visibly, in minutes on 2 cores; the smallest (bug-shared-uniform,\n"
    "bug-lowprec-draft) need far more: analysis/verify_controls.csv has what was tried.\n"
    "Sample i draws from streams item 2i (speculative) and 2i+1 (autoregressive): the same seed\n"
    "gives the same output for any --threads. --samples-out writes both sets as\n"
    "`SEQ MODE t1,t2,...` lines (SEQ 2i speculative, 2i+1 autoregressive), as `run --tokens-out`.\n";


/* Whether line (without its newline) is "SEQ MODE t1,t2,...". */
static int token_line(const char *s)
{
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) s++;
    if (*s++ != ' ') return 0;
    if (!strncmp(s, "speculative ", 12)) s += 12;
    else if (!strncmp(s, "autoregressive ", 15)) s += 15;
    else return 0;
    while (1) {
        if (*s == '-') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
        if (!*s) return 1;
        if (*s++ != ',') return 0;
    }
}

/* An existing file is replaced only when it is a token file (or empty). */
static int check_samples_out(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return SL_OK;
    if (!S_ISREG(st.st_mode)) return sl_fail(SL_EINPUT, "--samples-out: %s exists and is not a regular file", path);
    FILE *f = fopen(path, "r");
    if (!f) return sl_fail(SL_EINPUT, "--samples-out: cannot read the existing %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, no = 0;
    ssize_t n;
    int rc = SL_OK;
    while (!rc && (n = getline(&line, &cap, f)) >= 0) {
        no++;
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        if (!token_line(line))
            rc = sl_fail(SL_EINPUT,
                         "--samples-out: %s exists and line %zu is not 'SEQ MODE t1,t2,...': not a token file, "
                         "not replaced (choose another name)",
                         path, no);
    }
    free(line);
    fclose(f);
    return rc;
}

static int write_samples(const char *path, const sl_verify_models_result *r)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    for (size_t i = 0; i < r->samples; i++)
        for (int mode = 0; mode < (r->ar ? 2 : 1); mode++) {
            const int32_t *t = (mode ? r->ar : r->spec) + i * r->tokens;
            fprintf(af.f, "%zu %s", 2 * i + (size_t)mode, mode ? "autoregressive" : "speculative");
            for (size_t j = 0; j < r->tokens; j++) fprintf(af.f, "%s%d", j ? "," : " ", t[j]);
            fputc('\n', af.f);
        }
    if (ferror(af.f)) {
        sl_atomic_abort(&af);
        return sl_fail(SL_EINPUT, "--samples-out: writing %s failed", path);
    }
    return sl_atomic_commit(&af);
}

int sl_cmd_verify_models(int argc, char **argv)
{
    sl_verify_models_config vc;
    sl_verify_models_config_default(&vc);
    const char *ids_arg = NULL, *samples_out = NULL;
    int no_ar = 0, quiet = 0;
    sl_format fmt = SL_FMT_TABLE;
    sl_cli c;
    sl_cli_init(&c, "verify",
                "--target T --draft D (--prompt TEXT | --prompt-ids 1,2,3 | --prompts FILE)\n"
                "                      [--samples K] [--tokens k] [--gamma G] [--rule R] [options]",
                about);
    sl_cli_string(&c, "target", "T", &vc.target, "target model (any spec of speclab generate)");
    sl_cli_string(&c, "draft", "D", &vc.draft, "draft model");
    sl_cli_string(&c, "prompt", "TEXT", &vc.prompt, "the prompt as text (the target's tokenizer)");
    sl_cli_string(&c, "prompt-ids", "1,2,3", &ids_arg, "the prompt as comma-separated token ids");
    sl_cli_string(&c, "prompts", "FILE", &vc.prompts_file,
                  "text prompts, one a line (data/prompts/*.txt): sample i continues prompt i mod P");
    sl_cli_size(&c, "samples", "K", &vc.samples, 2, (size_t)1 << 28, "continuations per mode (default 4000)");
    sl_cli_size(&c, "tokens", "k", &vc.tokens, 1, 4096, "tokens per continuation (default 4)");
    sl_cli_size(&c, "gamma", "G", &vc.gamma, 1, SL_SPEC_GAMMA_MAX, "drafts per iteration (default 3)");
    sl_cli_group_rule(&c, &vc.rule);
    sl_cli_size(&c, "bug-k", "K", &vc.rule.bug_k, 1, (size_t)1 << 20, "k of the top-k wrong variants (default 1)");
    sl_cli_group_sampling(&c, &vc.sampling);
    sl_cli_flag(&c, "no-autoregressive", &no_ar, "skip the autoregressive set (and the tests that need it)");
    sl_cli_group_seed(&c, &vc.seed, &vc.threads);
    sl_cli_dbl(&c, "level", "A", &vc.level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "family-wise level of the verdict (default 0.01)");
    sl_cli_dbl(&c, "tv", "DELTA", &vc.tv_delta, 0, 1, SL_OPT_LO_OPEN, "deviation for the power statement (default 0.05)");
    sl_cli_size(&c, "pit-bins", "B", &vc.pit_bins, 2, 100000, "bins of the PIT chi^2 test (default 20)");
    sl_cli_string(&c, "samples-out", "FILE", &samples_out,
                  "also write both sets as 'SEQ MODE t1,t2,...' lines (replaces only a token file)");
    sl_cli_group_device(&c, NULL);
    sl_cli_group_format(&c, &fmt);
    sl_cli_group_quiet(&c, &quiet);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (!vc.target || !vc.draft) return sl_fail(SL_EINPUT, "--target and --draft are both required");
    if ((vc.prompt != NULL) + (ids_arg != NULL) + (vc.prompts_file != NULL) != 1)
        return sl_fail(SL_EINPUT, "give exactly one of --prompt, --prompt-ids and --prompts");
    if (samples_out && (rc = check_samples_out(samples_out))) return rc;
    vc.autoregressive = !no_ar;
    vc.keep_samples = samples_out != NULL;
    int32_t *ids = NULL;
    if (ids_arg && (rc = sl_cli_ids("--prompt-ids", ids_arg, &ids, &vc.n_prompt_ids))) return rc;
    vc.prompt_ids = ids;
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, "verify", "samples", quiet);
    vc.progress = sl_cli_progress_fn(&pg);
    vc.progress_ctx = &pg;
    sl_verify_models_result *r = NULL;
    sl_table *t[4] = {0};
    size_t nt = 0;
    rc = sl_verify_models_run(&vc, &r);
    sl_cli_progress_end(&pg);
    if (!rc && samples_out) rc = write_samples(samples_out, r);
    if (!rc && !(rc = sl_verify_models_report(r, t, &nt)) && sl_report_write(t, nt, stdout, fmt))
        rc = sl_fail(SL_EFAIL, "writing the report to stdout failed");
    if (!rc && r->verify->rejected)
        rc = sl_fail(SL_EFAIL, "not lossless: %zu of %zu tests rejected at family-wise level %g (min Holm p = %.3g)",
                     r->verify->n_rejected, r->verify->n_tests, vc.level, r->verify->min_p_holm);
    for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
    sl_verify_models_result_free(r);
    free(ids);
    return rc;
}
