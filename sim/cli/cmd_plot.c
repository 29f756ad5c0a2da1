/*
 * cmd_plot.c: `speclab plot KIND [LOG ...] -o FILE [options]`: a figure through gnuplot. Parses the
 * options into a request, calls sl_plot_make (plots/sl_plot_make.h: the result and the figure)
 * and draws it with sl_plot_render (plots/sl_plot.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_plot.h"
#include "sl_plot_make.h"

static int parse_list(const char *flag, const char *arg, void *dst)
{
    sl_plot_list *s = dst;
    double *vals = NULL;
    size_t n = 0;
    int rc = sl_cli_sweep(flag, arg, &vals, &n);
    if (rc) return rc;
    if (n == 0 || n > SL_PLOT_THEORY_MAX) rc = sl_fail(SL_EINPUT, "%s: %zu values; expected 1 to %d", flag, n, SL_PLOT_THEORY_MAX);
    else {
        s->n = n;
        memcpy(s->v, vals, n * sizeof *vals);
    }
    free(vals);
    return rc;
}

static int parse_family(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_mc_family_parse(arg, dst);
}

static int parse_width(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_plot_width_parse(arg, dst);
}

static int parse_key(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_plot_key_parse(arg, dst);
}

static int parse_term(const char *flag, const char *arg, void *dst)
{
    if (!strcmp(arg, "dumb")) *(int *)dst = 1;
    else if (!strcmp(arg, "auto")) *(int *)dst = 0;
    else return sl_fail(SL_EINPUT, "%s: '%s' is not auto (by the file's extension) or dumb (text)", flag, arg);
    return SL_OK;
}

static const char about[] =
    "Draws a figure with gnuplot (GNUPLOT names the binary; default gnuplot on PATH) and writes,\n"
    "next to it, FILE.dat (the numbers) and FILE.gp (the script: `gnuplot FILE.gp` in that\n"
    "directory redraws it). The format follows the extension: .png, .svg, .pdf; `-o -` or\n"
    "--term dumb draws text. The figure is written to a temporary name and renamed into place only\n"
    "when gnuplot succeeds. Log kinds take LOG files (speclab measure/run) as FILE or NAME=FILE.\n"
    "\n"
    "kinds:\n"
    "  theory-tokens          E[N] vs alpha, one curve per --gamma (Leviathan et al. Fig. 2)\n"
    "  theory-speedup         walltime improvement vs alpha per --gamma at one --c (Thm 3.8)\n"
    "  theory-optimal-gamma   optimal gamma vs alpha, one step curve per --c (Fig. 3)\n"
    "  theory-ops             operation factor vs alpha per --gamma at --c-hat (Thm 3.11, Fig. 4)\n"
    "  beta-hist LOG...       beta histogram of each log, normalised, overlaid\n"
    "  lenience LOG...        alpha(l), standard and temperature-0 forms (logs with distributions)\n"
    "  acceptance-position LOG...   per draft position, conditional and unconditional (replay;\n"
    "                         observed with Wilson CIs from --run RUN.h5 or a run log)\n"
    "  acceptance-confidence LOG... mean beta per draft-confidence (max q) bin\n"
    "  alpha-ci LOG...        alpha with its bootstrap CI per log, dot and whisker\n"
    "  mc-tokens              Monte Carlo (--family ...) tokens-per-iteration histogram with Wilson\n"
    "                         CIs vs the predicted pmf, i.i.d. and position-dependent\n"
    "  verify-power           power of the verification test vs samples, per --tv (--df, --level)\n"
    "  verify-qq              QQ plot of the exact sampler's verification p-values over\n"
    "                         --replications runs of `speclab verify` (--family ...), with a 95% band\n"
    "  run-speedup RUN...     measured speedup with its CI vs gamma, next to Theorem 3.8 and\n"
    "                         E[N]/(gamma c + v(gamma+1)) with theirs (one run log per gamma)\n"
    "  run-chen RUN...        Chen et al. Figure 1 layout vs gamma: time per token, tokens per\n"
    "                         iteration, time per iteration (three panels, full width)\n"
    "\n"
    "Defaults per kind: --gamma 1,2,3,5,7,10 (theory; mc-tokens: 4); --c 0.05 (theory-speedup),\n"
    "0.01,0.02,0.05,0.1,0.2 (theory-optimal-gamma); --c-hat 0 (as the paper's Table 1). The run\n"
    "kinds report each log as `speclab run` does: pass its --boot, --ci and --seed for its CIs.\n";

static char *join_command(int argc, char **argv)
{
    size_t len = 16;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 3;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "speclab");
    for (int i = 0; i < argc; i++) p += sprintf(p, strpbrk(argv[i], " \t'\"") || !argv[i][0] ? " '%s'" : " %s", argv[i]);
    return s;
}

int sl_cmd_plot(int argc, char **argv)
{
    sl_plot_request rq;
    sl_plot_request_init(&rq);
    sl_plot_render_opts ro;
    sl_plot_render_opts_init(&ro);

    sl_cli cli;
    sl_cli_init(&cli, "plot", "KIND [LOG ...] -o FILE [options]", about);
    sl_cli_string(&cli, "out", "FILE", &ro.out, "the figure: .png, .svg, .pdf, or - for the terminal (also -o FILE)");
    sl_cli_custom(&cli, "width", "W", &ro.width_in, parse_width, "column (3.3 in, default; run-chen: full) or full (6.8 in)");
    sl_cli_custom(&cli, "term", "T", &ro.term_dumb, parse_term, "auto (by extension, default) or dumb (text art)");
    sl_cli_custom(&cli, "key", "K", &rq.key, parse_key,
                  "legend: top-left, top-right, bottom-left, bottom-right, outside, below, off (default: per kind)");
    sl_cli_string(&cli, "title", "TEXT", &rq.title, "replace the figure's title");
    /* theory */
    sl_cli_custom(&cli, "gamma", "G", &rq.gamma, parse_list,
                  "drafts per iteration: theory kinds a list (default 1,2,3,5,7,10); mc-tokens one value 1..64 (default 4; verify-qq 3)");
    sl_cli_custom(&cli, "c", "C", &rq.c, parse_list,
                  "draft step / target step: theory-speedup one value (default 0.05); theory-optimal-gamma a list");
    sl_cli_dbl(&cli, "c-hat", "H", &rq.c_hat, 0, 1e6, 0, "theory-ops: draft ops per token / target ops per token (default 0)");
    sl_cli_dbl(&cli, "v-linear", "S", &rq.v_linear, 0, 1e6, 0, "theory-speedup, -optimal-gamma: v(n) = 1 + S (n - 1) (default v = 1)");
    sl_cli_size(&cli, "points", "N", &rq.points, 2, 100001, "alpha grid points on [0, 1] (default 201)");
    sl_cli_int(&cli, "gamma-cap", "G", &rq.gamma_cap, 1, 1000, "theory-optimal-gamma: largest gamma searched; curves stop there (default 20)");
    /* logs */
    sl_cli_string(&cli, "run", "RUN.h5", &rq.run_path, "log kinds: a run log of the same pair (observed acceptance)");
    sl_cli_size(&cli, "gamma-max", "G", &rq.gamma_max, 1, SL_ANALYZE_GMAX, "log kinds: draft positions 1..G (default 12)");
    sl_cli_size(&cli, "boot", "B", &rq.boot, 10, 1000000, "log kinds: bootstrap resamples (default 1000; run kinds 2000)");
    sl_cli_dbl(&cli, "ci", "L", &rq.ci, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "log and run kinds: confidence level (default 0.95)");
    sl_cli_custom(&cli, "lenience", "LIST", &rq.lenience, parse_list, "lenience: grid in (0, 1] (default 0.1:1:0.1)");
    /* Monte Carlo: the names, ranges and defaults of `speclab mc` */
    sl_cli_custom(&cli, "family", "F", &rq.family.family, parse_family,
                  "mc-tokens, verify-qq: identical | noisy | dirichlet | zipf | disjoint | positional (required)");
    sl_cli_size(&cli, "vocab", "V", &rq.family.V, 2, (size_t)1 << 30, "mc-tokens: vocabulary size (default 256; verify-qq 8)");
    sl_cli_long(&cli, "iterations", "N", &rq.iterations, 1, 1L << 40, "mc-tokens: iterations to simulate (default 100000; verify-qq per run 20000)");
    sl_cli_dbl(&cli, "noise", "E", &rq.family.noise, 0, 1e6, 0, "mc-tokens: noisy/positional logit noise std (default 0.5)");
    sl_cli_dbl(&cli, "confidence", "C", &rq.confidence, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "mc-tokens: confidence of the Wilson intervals (default 0.95)");
    sl_cli_group_seed(&cli, &rq.seed, NULL);
    /* verification */
    sl_cli_custom(&cli, "tv", "LIST", &rq.tv, parse_list, "verify-power: TV deviations (default 0.005,0.01,0.02,0.05)");
    sl_cli_dbl(&cli, "df", "K", &rq.df, 1, 1e9, 0, "verify-power: degrees of freedom (default 7)");
    sl_cli_dbl(&cli, "level", "A", &rq.level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "verify-power: test level (default 0.01)");
    sl_cli_dbl(&cli, "n-min", "N", &rq.n_min, 1, 1e15, 0, "verify-power: smallest sample size (default 10)");
    sl_cli_dbl(&cli, "n-max", "N", &rq.n_max, 1, 1e15, 0, "verify-power: largest sample size (default 1e7)");
    sl_cli_size(&cli, "replications", "R", &rq.replications, 2, 1000000, "verify-qq: runs, seeds S..S+R-1 (default 200)");

    /* The registry knows long options only: -o FILE is --out FILE. */
    char **av = malloc(((size_t)argc + 1) * sizeof *av);
    if (!av) return sl_fail(SL_EFAIL, "out of memory");
    for (int i = 0; i < argc; i++) av[i] = !strcmp(argv[i], "-o") ? "--out" : argv[i];
    av[argc] = NULL;
    int rc = sl_cli_parse(&cli, argc, av, SL_CLI_MAX_POS);
    free(av);
    if (rc < 0) return 0; /* --help */
    if (rc) return rc;
    if (cli.n_pos == 0) return sl_fail(SL_EINPUT, "give a kind (see speclab plot --help)");
    if (!ro.out) return sl_fail(SL_EINPUT, "--out is required: -o FILE.png|.svg|.pdf, or -o - for the terminal");
    rq.kind = cli.pos[0];
    rq.n_inputs = cli.n_pos - 1;
    rq.inputs = (const char *const *)&cli.pos[1];
    rq.key_set = sl_cli_given(&cli, "key");
    rq.family_set = sl_cli_given(&cli, "family");
    rq.vocab_set = sl_cli_given(&cli, "vocab");

    sl_plot_figure fig;
    if ((rc = sl_plot_make(&rq, &fig))) return rc;
    if (!sl_cli_given(&cli, "width") && fig.width_in > 0) ro.width_in = fig.width_in;
    char *command = join_command(argc, argv);
    ro.command = command;
    rc = sl_plot_render(&fig, &ro);
    free(command);
    sl_plot_figure_free(&fig);
    return rc;
}
