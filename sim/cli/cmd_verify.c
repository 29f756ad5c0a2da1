/*
 * cmd_verify.c: `speclab verify`: statistical test that a speculative sampler preserves the
 * target distribution (analysis/sl_verify.h), and `--power` sample-size planning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_family.h"
#include "sl_cli.h"
#include "sl_mc.h"
#include "sl_samples.h"
#include "sl_verify.h"
#include "sl_verify_exact.h"

static const char about[] =
    "Runs the speculative sampler on a context-free synthetic pair and tests the emitted tokens\n"
    "against the known target pmf: per output position (first token, k-th token, bonus token,\n"
    "the token after a rejection), every token, and 2- and 3-token blocks; Pearson chi^2 and G\n"
    "with pooling, exact or Monte Carlo multinomial p-values for small counts, Holm over all\n"
    "tests, TV with a CI, the power reached against TV = --tv and tv_90, the TV each test detects\n"
    "with power 0.9. --exact: the exact deviation of the rule per test and the iterations to see it.\n"
    "Other modes: --samples FILE (tokens from your own sampler, analysis/SAMPLES.md);\n"
    "--two-sample A [B] (two files of token sequences, analysis/VERIFY_TWO.md);\n"
    "--target T --draft D (real models in one process, analysis/VERIFY_MODELS.md).\n"
    "Exit status: 0 consistent with lossless, 1 rejected (not lossless), 2 bad input.\n"
    "Rules: exact | lenient | lenient-t0 | sampler-match | bug-draft-argmax | bug-draft-topk |\n"
    "bug-residual-paired | bug-resample-from-p | bug-lowprec-draft | bug-p-inplace | bug-shared-uniform.\n"
    "With --samples FILE the same tests run on tokens a sampler emitted elsewhere, against the pair\n"
    "given by --p/--q (or --family), --gamma and --rule: a CSV (iteration,position,token,kind), an\n"
    "HDF5 file with those four datasets, or one token id per line (then only the stream tests all,\n"
    "pair, triple). analysis/SAMPLES.md describes the formats.\n";

/* A pmf from --p/--q (sl_cli_vector: "a,b,c" or @FILE); at least 2 entries. */
typedef struct {
    double *v; /* (n) malloc'd */
    size_t n;
} vec;

static int read_pmf(const char *flag, const char *s, vec *out)
{
    int rc = sl_cli_vector(flag, s, &out->v, &out->n);
    if (!rc && out->n < 2) {
        rc = sl_fail(SL_EINPUT, "%s: '%s' has %zu entries, expected at least 2", flag, s, out->n);
        free(out->v);
        *out = (vec){0};
    }
    return rc;
}

static int parse_samples_format(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_samples_format_parse(arg, dst);
}

/* One table goes out on its own (a JSON array), several as a report (a JSON object). */
static int write_tables(sl_table **t, size_t n, sl_format fmt)
{
    if (n == 1 ? sl_table_write(t[0], stdout, fmt) : sl_report_write(t, n, stdout, fmt))
        return sl_fail(SL_EFAIL, "writing the report to stdout failed");
    return SL_OK;
}

/* Builds the plan of the chosen pair: an explicit --p/--q, or the family. */
static int make_plan(const vec *p, const vec *q, const sl_mc_family_params *fp, const sl_spec_config *cfg,
                     sl_mc_plan **plan)
{
    sl_mc_rows *rows = NULL;
    int rc = SL_OK;
    if (p->v) {
        if ((rc = sl_dist_check(p->v, p->n, SL_DIST_SUM_TOL, "--p")) || (rc = sl_dist_check(q->v, q->n, SL_DIST_SUM_TOL, "--q")))
            return rc;
        if (!(rows = sl_mc_rows_alloc(p->n, 1, SL_MC_IID))) return SL_EFAIL;
        memcpy(rows->p, p->v, p->n * sizeof *p->v);
        memcpy(rows->q, q->v, q->n * sizeof *q->v);
    } else if ((rc = sl_mc_family_rows(fp, &rows))) {
        return rc;
    }
    sl_mc_source src = sl_mc_rows_source(rows);
    rc = sl_mc_plan_alloc(&src, fp->gamma, cfg, plan);
    sl_mc_rows_free(rows);
    return rc;
}

/* The other modes, each in its own file: two sample files (cmd_verify_two.c) and real models in
 * one process (cmd_verify_models.c). */
extern int sl_cmd_verify_two(int argc, char **argv) __attribute__((weak));
extern int sl_cmd_verify_models(int argc, char **argv) __attribute__((weak));

/* Which mode argv asks for: 2 = two sample files (--two-sample A B), 3 = models (--target or
 * --draft), 1 = a synthetic pair or an external sample file. */
static int verify_mode(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--target") || !strcmp(argv[i], "--draft") || !strncmp(argv[i], "--target=", 9) ||
            !strncmp(argv[i], "--draft=", 8))
            return 3;
        if (!strcmp(argv[i], "--two-sample") && i + 1 < argc &&
            (strncmp(argv[i + 1], "--", 2) != 0 || !strcmp(argv[i + 1], "--help")))
            return 2;
    }
    return 1;
}

static int verify_synthetic(int argc, char **argv);

int sl_cmd_verify(int argc, char **argv)
{
    int mode = verify_mode(argc, argv);
    int (*fn)(int, char **) = mode == 2 ? sl_cmd_verify_two : mode == 3 ? sl_cmd_verify_models : verify_synthetic;
    if (!fn) return sl_fail(SL_EFAIL, "verify: this mode is not built yet");
    return fn(argc, argv);
}

/* Tests the samples in a file against the plan's pair (sl_samples.h, SAMPLES.md). */
static int verify_file(const sl_mc_plan *plan, const char *path, sl_samples_format sf, const sl_verify_opts *vo,
                       int quiet, sl_verify_result **res)
{
    sl_samples *sm = NULL;
    int rc = sl_samples_read(path, sf, sl_mc_plan_vocab(plan), sl_mc_plan_gamma(plan), &sm);
    if (!rc && !sm->nem && !quiet)
        fprintf(stderr, "speclab verify: %s holds a plain token stream (ids): only the stream tests all, pair and "
                "triple run (iterations = 0 in the verdict)\n", path);
    if (!rc) rc = sl_verify_samples(plan, sm->tok, sm->nem, sm->n, vo, res);
    sl_samples_free(sm);
    return rc;
}

static int verify_synthetic(int argc, char **argv)
{
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    fp.V = 8;
    fp.gamma = 3;
    sl_spec_config cfg = SL_SPEC_CONFIG_DEFAULT;
    sl_verify_opts vo = SL_VERIFY_OPTS_DEFAULT;
    sl_format fmt = SL_FMT_TABLE;
    size_t df = 0, reps = 0;
    int power_only = 0, exact = 0;
    const char *ps = NULL, *qs = NULL, *samples = NULL;
    sl_samples_format sf = SL_SAMPLES_AUTO;
    vec p = {0}, q = {0};
    sl_cli c;
    sl_cli_init(&c, "verify", "[--family F | --p LIST --q LIST] [options]\n"
                "       speclab verify --samples FILE [--samples-format F] (--p LIST --q LIST | --family F) --gamma G [options]\n"
                "       speclab verify --power --tv DELTA [--level A] [--df K | --vocab V]", about);
    sl_cli_family_group(&c, &fp, &cfg, "family vocabulary size (default 8)", "drafts per iteration (default 3)");
    sl_cli_string(&c, "p", "LIST", &ps, "an explicit target pmf, comma-separated or @FILE (whitespace-separated; with --q, same length)");
    sl_cli_string(&c, "q", "LIST", &qs, "an explicit draft pmf, as --p");
    sl_cli_string(&c, "samples", "FILE", &samples,
                  "test tokens emitted elsewhere instead of running the sampler (analysis/SAMPLES.md)");
    sl_cli_custom(&c, "samples-format", "F", &sf, parse_samples_format,
                  "csv | hdf5 | ids | auto (default: HDF5 signature, CSV header, else ids)");
    sl_cli_size(&c, "iterations", "N", &vo.iterations, 1, (size_t)1 << 34,
                "iterations (default 200000: see README for what it detects)");
    sl_cli_dbl(&c, "level", "A", &vo.level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "family-wise level of the verdict (default 0.01)");
    sl_cli_dbl(&c, "tv", "DELTA", &vo.tv_delta, 0, 1, SL_OPT_LO_OPEN,
               "deviation for the power statement (default 0.05); without --iterations, the iterations that give\n"
               "the first-token test power 0.9 against a TV of DELTA");
    sl_cli_flag(&c, "exact", &exact, "enumerate one iteration of the rule: each test's exact deviation and the iterations to see it");
    sl_cli_flag(&c, "two-sample", &vo.two_sample, "compare with plain target samples instead of the known pmf");
    sl_cli_flag(&c, "power", &power_only, "only print the n needed for power 0.9 against --tv at --level");
    sl_cli_size(&c, "df", "K", &df, 1, (size_t)1 << 30, "degrees of freedom for --power (default vocab - 1)");
    sl_cli_size(&c, "replications", "R", &reps, 2, 1000000,
                "self-check: R runs (seeds S..S+R-1); KS test of each test's p-values against U(0,1)");
    sl_cli_size(&c, "mc-sims", "M", &vo.mc_sims, 100, 100000000,
                "Monte Carlo multinomial draws for small counts (default 20000)");
    sl_cli_int(&c, "threads", "T", &vo.threads, 0, 1024, "OpenMP threads, 0 = all; output is identical for any T");
    sl_cli_group_format(&c, &fmt);
    int quiet = 0;
    sl_cli_group_quiet(&c, &quiet);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    sl_mc_plan *plan = NULL;
    sl_table *tables[3] = {0};
    size_t nt = 0;
    if (rc == -1) {
        rc = SL_OK;
        goto out;
    }
    if (rc) goto out;
    if ((ps && (rc = read_pmf("--p", ps, &p))) || (qs && (rc = read_pmf("--q", qs, &q)))) goto out;
    vo.seed = fp.seed;
    if (power_only) {
        sl_verify_power_result pw;
        double d = df > 0 ? (double)df : (double)((p.v ? p.n : fp.V) - 1);
        if (!(rc = sl_verify_power(vo.tv_delta, d, vo.level, 0.9, &pw)) &&
            !(rc = sl_verify_power_report(&pw, &tables[0])))
            rc = write_tables(tables, nt = 1, fmt);
        goto out;
    }
    if ((p.v != NULL) != (q.v != NULL)) {
        rc = sl_fail(SL_EINPUT, "--p and --q: give both or neither");
        goto out;
    }
    if (p.v && sl_cli_given(&c, "family")) {
        rc = sl_fail(SL_EINPUT, "--family and --p/--q: give one of them");
        goto out;
    }
    if (p.v && p.n != q.n) {
        rc = sl_fail(SL_EINPUT, "--p has %zu entries but --q has %zu: the vocabularies must match", p.n, q.n);
        goto out;
    }
    if (!samples && sl_cli_given(&c, "samples-format")) {
        rc = sl_fail(SL_EINPUT, "--samples-format: only with --samples FILE");
        goto out;
    }
    if (samples && (reps > 0 || sl_cli_given(&c, "iterations"))) {
        rc = sl_fail(SL_EINPUT, "--samples: the file sets the sample size and the sampler is not run, so --%s does not apply",
                     reps > 0 ? "replications" : "iterations");
        goto out;
    }
    if ((rc = make_plan(&p, &q, &fp, &cfg, &plan))) goto out;
    if (exact) {
        sl_verify_exact_result e;
        if (!(rc = sl_verify_exact(plan, vo.level, 0.9, 20000000, &e)) && !(rc = sl_verify_exact_report(&e, tables, &nt)))
            rc = write_tables(tables, nt, fmt);
        goto out;
    }
    if (!samples && reps == 0 && sl_cli_given(&c, "tv") && !sl_cli_given(&c, "iterations")) {
        size_t m;
        double it;
        if ((rc = sl_verify_iterations_for_tv(plan, vo.tv_delta, vo.level, 0.9, &m, &it))) goto out;
        if (it > (double)((size_t)1 << 34)) {
            rc = sl_fail(SL_EINPUT, "--tv %g needs %.3g iterations, more than 2^34", vo.tv_delta, it);
            goto out;
        }
        vo.iterations = (size_t)it;
        if (!quiet) fprintf(stderr, "verify: %zu iterations give the first-token test power 0.9 against TV %g\n", vo.iterations, vo.tv_delta);
    }
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, "verify", reps > 0 ? "replications" : "iterations", quiet);
    vo.progress = sl_cli_progress_fn(&pg);
    vo.progress_ctx = &pg;
    if (reps > 0) {
        /* Self-check: are the p-values uniform under this sampler? */
        sl_verify_uniformity_result *u = NULL;
        rc = sl_verify_uniformity(plan, &vo, reps, &u);
        sl_cli_progress_end(&pg);
        if (!rc && !(rc = sl_verify_uniformity_report(u, &tables[0])))
            rc = write_tables(tables, nt = 1, fmt);
        sl_verify_uniformity_free(u);
        goto out;
    }
    sl_verify_result *res = NULL;
    rc = samples ? verify_file(plan, samples, sf, &vo, quiet, &res) : sl_verify_run(plan, &vo, &res);
    sl_cli_progress_end(&pg);
    if (!rc && !(rc = sl_verify_report(res, tables, &nt)) &&
        !(rc = write_tables(tables, nt, fmt)) && res->rejected)
        rc = sl_fail(SL_EFAIL, "not lossless: %zu of %zu tests rejected at family-wise level %g (min Holm p = %.3g)",
                     res->n_rejected, res->n_tests, vo.level, res->min_p_holm);
    sl_verify_result_free(res);
out:
    for (size_t i = 0; i < 3; i++) sl_table_free(tables[i]);
    sl_mc_plan_free(plan);
    free(p.v);
    free(q.v);
    return rc;
}
