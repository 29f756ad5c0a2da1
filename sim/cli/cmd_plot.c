/*
 * cmd_plot.c: `speclab plot KIND [LOG ...] -o FILE [options]`: a figure through gnuplot
 * (plots/sl_plot.h). Parses, computes the result through the library (sl_theory, sl_analyze_file,
 * sl_mc_run), builds the figure with the kind's sl_plot_* function, renders it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_analyze.h"
#include "sl_cli.h"
#include "sl_mc.h"
#include "sl_plot.h"

typedef enum { SRC_THEORY, SRC_LOG, SRC_MC, SRC_POWER } kind_source;

typedef int (*theory_fn)(const sl_plot_theory_config *, sl_plot_figure *);
typedef int (*log_fn)(const sl_analyze_result *, const char *const *, size_t, sl_plot_figure *);

static const struct {
    const char *name;
    kind_source src;
    theory_fn theory;
    log_fn log;
} kinds[] = {
    {"theory-tokens", SRC_THEORY, sl_plot_theory_tokens, NULL},
    {"theory-speedup", SRC_THEORY, sl_plot_theory_speedup, NULL},
    {"theory-optimal-gamma", SRC_THEORY, sl_plot_theory_optimal_gamma, NULL},
    {"theory-ops", SRC_THEORY, sl_plot_theory_ops, NULL},
    {"beta-hist", SRC_LOG, NULL, sl_plot_beta_hist},
    {"lenience", SRC_LOG, NULL, sl_plot_lenience},
    {"acceptance-position", SRC_LOG, NULL, sl_plot_acceptance_position},
    {"acceptance-confidence", SRC_LOG, NULL, sl_plot_acceptance_confidence},
    {"alpha-ci", SRC_LOG, NULL, sl_plot_alpha_ci},
    {"mc-tokens", SRC_MC, NULL, NULL},
    {"verify-power", SRC_POWER, NULL, NULL},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* A comma list or start:stop:step sweep of at most SL_PLOT_THEORY_MAX values. */
typedef struct {
    size_t n;
    double v[SL_PLOT_THEORY_MAX];
} sweep;

static int parse_sweep(const char *flag, const char *arg, void *dst)
{
    sweep *s = dst;
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
    "\n"
    "Defaults per kind: --gamma 1,2,3,5,7,10 (theory; mc-tokens: 4); --c 0.05 (theory-speedup),\n"
    "0.01,0.02,0.05,0.1,0.2 (theory-optimal-gamma); --c-hat 0 (as the paper's Table 1).\n";

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

/* NAME=FILE or FILE; the label is NAME, else the file's base name. */
static void split_log_arg(char *arg, const char **name, const char **path)
{
    struct stat st;
    char *eq = strchr(arg, '=');
    if (eq && eq != arg && stat(arg, &st) != 0) {
        *eq = 0;
        *name = arg;
        *path = eq + 1;
        return;
    }
    const char *slash = strrchr(arg, '/');
    *name = slash ? slash + 1 : arg;
    *path = arg;
}

int sl_cmd_plot(int argc, char **argv)
{
    const char *out_path = NULL, *run_path = NULL;
    double width_in = SL_PLOT_WIDTH_COLUMN, c_hat = 0, v_linear = NAN, confidence = 0.95, ci = 0.95;
    double df = 7, level = 0.01, n_min = 10, n_max = 1e7;
    int term_dumb = 0, key_given = 0, gamma_cap = 20;
    sl_plot_key key = SL_PLOT_KEY_TOP_LEFT;
    sweep gammas = {0}, cs = {0}, tvs = {0}, lens = {0};
    size_t points = 201, gamma_max = 12, n_boot = 1000;
    sl_mc_family_params fp = SL_MC_FAMILY_DEFAULT;
    long iterations = 100000;
    uint64_t seed = 1;
    const char *title = NULL;

    sl_cli cli;
    sl_cli_init(&cli, "plot", "KIND [LOG ...] -o FILE [options]", about);
    sl_cli_string(&cli, "out", "FILE", &out_path, "the figure: .png, .svg, .pdf, or - for the terminal (also -o FILE)");
    sl_cli_custom(&cli, "width", "W", &width_in, parse_width, "column (3.3 in, default) or full (6.8 in)");
    sl_cli_custom(&cli, "term", "T", &term_dumb, parse_term, "auto (by extension, default) or dumb (text art)");
    sl_cli_custom(&cli, "key", "K", &key, parse_key,
                  "legend: top-left, top-right, bottom-left, bottom-right, outside, below, off (default: per kind)");
    sl_cli_string(&cli, "title", "TEXT", &title, "replace the figure's title");
    /* theory */
    sl_cli_custom(&cli, "gamma", "G", &gammas, parse_sweep,
                  "drafts per iteration: theory kinds a list (default 1,2,3,5,7,10); mc-tokens one value 1..64 (default 4)");
    sl_cli_custom(&cli, "c", "C", &cs, parse_sweep,
                  "draft step / target step: theory-speedup one value (default 0.05); theory-optimal-gamma a list");
    sl_cli_dbl(&cli, "c-hat", "H", &c_hat, 0, 1e6, 0, "theory-ops: draft ops per token / target ops per token (default 0)");
    sl_cli_dbl(&cli, "v-linear", "S", &v_linear, 0, 1e6, 0, "theory-speedup, -optimal-gamma: v(n) = 1 + S (n - 1) (default v = 1)");
    sl_cli_size(&cli, "points", "N", &points, 2, 100001, "alpha grid points on [0, 1] (default 201)");
    sl_cli_int(&cli, "gamma-cap", "G", &gamma_cap, 1, 1000, "theory-optimal-gamma: largest gamma searched; curves stop there (default 20)");
    /* logs */
    sl_cli_string(&cli, "run", "RUN.h5", &run_path, "log kinds: a run log of the same pair (observed acceptance)");
    sl_cli_size(&cli, "gamma-max", "G", &gamma_max, 1, SL_ANALYZE_GMAX, "log kinds: draft positions 1..G (default 12)");
    sl_cli_size(&cli, "boot", "B", &n_boot, 10, 1000000, "log kinds: bootstrap resamples (default 1000)");
    sl_cli_dbl(&cli, "ci", "L", &ci, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "log kinds: confidence level (default 0.95)");
    sl_cli_custom(&cli, "lenience", "LIST", &lens, parse_sweep, "lenience: grid in (0, 1] (default 0.1:1:0.1)");
    /* Monte Carlo: the names, ranges and defaults of `speclab mc` */
    sl_cli_custom(&cli, "family", "F", &fp.family, parse_family,
                  "mc-tokens: identical | noisy | dirichlet | zipf | disjoint | positional (required)");
    sl_cli_size(&cli, "vocab", "V", &fp.V, 2, (size_t)1 << 30, "mc-tokens: vocabulary size (default 256)");
    sl_cli_long(&cli, "iterations", "N", &iterations, 1, 1L << 40, "mc-tokens: iterations to simulate (default 100000)");
    sl_cli_dbl(&cli, "noise", "E", &fp.noise, 0, 1e6, 0, "mc-tokens: noisy/positional logit noise std (default 0.5)");
    sl_cli_dbl(&cli, "confidence", "C", &confidence, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN,
               "mc-tokens: confidence of the Wilson intervals (default 0.95)");
    sl_cli_group_seed(&cli, &seed, NULL);
    /* verification */
    sl_cli_custom(&cli, "tv", "LIST", &tvs, parse_sweep, "verify-power: TV deviations (default 0.005,0.01,0.02,0.05)");
    sl_cli_dbl(&cli, "df", "K", &df, 1, 1e9, 0, "verify-power: degrees of freedom (default 7)");
    sl_cli_dbl(&cli, "level", "A", &level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "verify-power: test level (default 0.01)");
    sl_cli_dbl(&cli, "n-min", "N", &n_min, 1, 1e15, 0, "verify-power: smallest sample size (default 10)");
    sl_cli_dbl(&cli, "n-max", "N", &n_max, 1, 1e15, 0, "verify-power: largest sample size (default 1e7)");

    /* The registry knows long options only: -o FILE is --out FILE. */
    char **av = malloc(((size_t)argc + 1) * sizeof *av);
    if (!av) return sl_fail(SL_EFAIL, "out of memory");
    for (int i = 0; i < argc; i++) av[i] = !strcmp(argv[i], "-o") ? "--out" : argv[i];
    av[argc] = NULL;
    int rc = sl_cli_parse(&cli, argc, av, SL_CLI_MAX_POS);
    free(av);
    if (rc < 0) return 0; /* --help */
    if (rc) return rc;
    key_given = sl_cli_given(&cli, "key");
    fp.seed = seed;

    if (cli.n_pos == 0) return sl_fail(SL_EINPUT, "give a kind (see speclab plot --help)");
    size_t kind = 0;
    while (kind < N_KINDS && strcmp(kinds[kind].name, cli.pos[0])) kind++;
    if (kind == N_KINDS) return sl_fail(SL_EINPUT, "unknown kind '%s' (see speclab plot --help)", cli.pos[0]);
    if (!out_path) return sl_fail(SL_EINPUT, "--out is required: -o FILE.png|.svg|.pdf, or -o - for the terminal");
    kind_source src = kinds[kind].src;
    size_t n_logs = cli.n_pos - 1;
    if (src == SRC_LOG && n_logs == 0) return sl_fail(SL_EINPUT, "%s: give at least one LOG file", kinds[kind].name);
    if (src != SRC_LOG && n_logs > 0) return sl_fail(SL_EINPUT, "%s takes no LOG files; got '%s'", kinds[kind].name, cli.pos[1]);
    if (src == SRC_LOG && run_path && n_logs != 1) return sl_fail(SL_EINPUT, "--run goes with exactly one measure log");

    sl_plot_figure fig;
    sl_plot_figure_init(&fig);
    sl_theory_vcost vc = {0};
    int have_vc = 0;
    sl_analyze_result *res = NULL;
    const char **names = NULL;
    size_t n_done = 0;
    sl_mc_rows *rows = NULL;
    sl_mc_plan *plan = NULL;
    char *command = NULL;

    if (src == SRC_THEORY) {
        sl_plot_theory_config cfg;
        sl_plot_theory_config_init(&cfg);
        const char *kn = kinds[kind].name;
        if (gammas.n) {
            cfg.n_gamma = gammas.n;
            for (size_t i = 0; i < gammas.n; i++) {
                if (gammas.v[i] != floor(gammas.v[i]) || gammas.v[i] < 1 || gammas.v[i] > SL_THEORY_GAMMA_MAX) {
                    rc = sl_fail(SL_EINPUT, "--gamma: %g is not an integer in [1, %d]", gammas.v[i], SL_THEORY_GAMMA_MAX);
                    goto done;
                }
                cfg.gamma[i] = (int)gammas.v[i];
            }
        }
        if (!strcmp(kn, "theory-speedup")) {
            cfg.n_c = 1;
            cfg.c[0] = cs.n ? cs.v[0] : 0.05;
            if (cs.n > 1) {
                rc = sl_fail(SL_EINPUT, "--c: theory-speedup draws one c (got %zu); see theory-optimal-gamma for several", cs.n);
                goto done;
            }
        } else if (cs.n) {
            cfg.n_c = cs.n;
            memcpy(cfg.c, cs.v, cs.n * sizeof cs.v[0]);
        }
        cfg.c_hat = c_hat;
        cfg.n_alpha = points;
        cfg.gamma_cap = gamma_cap;
        if (!isnan(v_linear)) {
            if ((rc = sl_theory_vcost_linear(&vc, v_linear))) goto done;
            have_vc = 1;
            cfg.vc = &vc;
        }
        rc = kinds[kind].theory(&cfg, &fig);
    } else if (src == SRC_LOG) {
        res = calloc(n_logs, sizeof *res);
        names = calloc(n_logs, sizeof *names);
        if (!res || !names) {
            rc = sl_fail(SL_EFAIL, "out of memory");
            goto done;
        }
        sl_analyze_opts o;
        sl_analyze_opts_init(&o);
        o.gamma_max = gamma_max;
        o.n_boot = n_boot;
        o.ci_level = ci;
        o.seed = seed;
        o.run_path = run_path;
        if (lens.n) {
            for (size_t i = 0; i < lens.n; i++)
                if (!(lens.v[i] > 0 && lens.v[i] <= 1)) {
                    rc = sl_fail(SL_EINPUT, "--lenience: %g is outside (0, 1]", lens.v[i]);
                    goto done;
                }
            o.n_lenience = lens.n;
            memcpy(o.lenience, lens.v, lens.n * sizeof lens.v[0]);
        }
        /* Only the figures that need the distribution pass pay for it. */
        o.no_dists = strcmp(kinds[kind].name, "lenience") != 0;
        for (size_t i = 0; i < n_logs; i++) {
            const char *path;
            split_log_arg(cli.pos[1 + i], &names[i], &path);
            if ((rc = sl_analyze_file(path, &o, &res[i]))) goto done;
            n_done++;
        }
        rc = kinds[kind].log(res, names, n_logs, &fig);
    } else if (src == SRC_MC) {
        if (!sl_cli_given(&cli, "family")) {
            rc = sl_fail(SL_EINPUT, "--family is required for mc-tokens (identical|noisy|dirichlet|zipf|disjoint|positional)");
            goto done;
        }
        if (gammas.n > 1 || (gammas.n && (gammas.v[0] != floor(gammas.v[0]) || gammas.v[0] < 1 || gammas.v[0] > SL_SPEC_GAMMA_MAX))) {
            rc = sl_fail(SL_EINPUT, "--gamma: mc-tokens takes one integer in [1, %d]", SL_SPEC_GAMMA_MAX);
            goto done;
        }
        if (gammas.n) fp.gamma = (size_t)gammas.v[0];
        sl_spec_config scfg = SL_SPEC_CONFIG_DEFAULT;
        if ((rc = sl_mc_family_rows(&fp, &rows))) goto done;
        sl_mc_source msrc = sl_mc_rows_source(rows);
        if ((rc = sl_mc_plan_alloc(&msrc, fp.gamma, &scfg, &plan))) goto done;
        sl_mc_opts mo = {(size_t)iterations, seed, 0, NULL, NULL, 0};
        sl_mc_result mres;
        sl_mc_prediction pred;
        if ((rc = sl_mc_run(plan, &mo, &mres))) goto done;
        if ((rc = sl_mc_predict(plan, mres.iterations, &pred))) goto done;
        rc = sl_plot_mc_tokens(&mres, &pred, 1 - confidence, &fig);
    } else {
        sl_plot_power_config pc;
        sl_plot_power_config_init(&pc);
        if (tvs.n) {
            pc.n_delta = tvs.n;
            memcpy(pc.delta, tvs.v, tvs.n * sizeof tvs.v[0]);
        }
        pc.df = df;
        pc.level = level;
        pc.n_lo = n_min;
        pc.n_hi = n_max;
        rc = sl_plot_verify_power(&pc, &fig);
    }
    if (rc) goto done;
    if (key_given) fig.key = key;
    if (title) snprintf(fig.title, sizeof fig.title, "%s", title);

    sl_plot_render_opts ro;
    sl_plot_render_opts_init(&ro);
    ro.out = out_path;
    ro.width_in = width_in;
    ro.term_dumb = term_dumb;
    ro.command = command = join_command(argc, argv);
    rc = sl_plot_render(&fig, &ro);
done:
    free(command);
    sl_plot_figure_free(&fig);
    if (have_vc) sl_theory_vcost_free(&vc);
    for (size_t i = 0; i < n_done; i++) sl_analyze_result_free(&res[i]);
    free(res);
    free(names);
    sl_mc_plan_free(plan);
    sl_mc_rows_free(rows);
    return rc;
}
