/*
 * main.c: the speclab command-line program. Dispatches git-style subcommands.
 *
 * Subcommands are weak references so that the table lists the whole planned surface while each
 * command's file is written on its own; a command not built yet says so and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_cli.h"
#include "sl_mpi.h"

typedef int (*sl_cmd_fn)(int argc, char **argv);

#define CMD(name) extern int sl_cmd_##name(int argc, char **argv) __attribute__((weak));
CMD(theory) CMD(mc) CMD(verify) CMD(generate) CMD(tokenize) CMD(model) CMD(train) CMD(distill)
CMD(measure) CMD(eval) CMD(run) CMD(analyze) CMD(recommend) CMD(plot) CMD(export_notebook) CMD(dist)
#undef CMD

static const struct {
    const char *name;
    const char *help;
} commands[] = {
    {"theory", "closed forms: expected tokens, walltime and operation factors, optimal gamma"},
    {"dist", "standardise a distribution, compute beta, D_LK, TV, KL between two"},
    {"mc", "Monte Carlo simulation of Algorithm 1 on synthetic or logged distributions"},
    {"verify", "statistical test that a speculative sampler preserves the target distribution"},
    {"generate", "speculative generation with real target and draft models"},
    {"tokenize", "encode or decode text with a BPE tokenizer"},
    {"model", "inspect model files (model info)"},
    {"train", "train a GPT-2 style model on a tokenized corpus"},
    {"distill", "train a draft against a target's soft labels"},
    {"measure", "log per-prefix p and q of a model pair to HDF5"},
    {"eval", "teacher-forced loss of any model on a token file: bits per token and per byte"},
    {"run", "real speculative decoding vs autoregressive baseline, timed"},
    {"analyze", "analyse an HDF5 log: alpha with CI, beta, lenience, optimal gamma"},
    {"recommend", "choose gamma for a deployment"},
    {"plot", "figures through gnuplot"},
    {"export-notebook", "write a Jupyter notebook that reloads a log"},
};

static sl_cmd_fn lookup(const char *name)
{
    if (!strcmp(name, "theory")) return sl_cmd_theory;
    if (!strcmp(name, "dist")) return sl_cmd_dist;
    if (!strcmp(name, "mc")) return sl_cmd_mc;
    if (!strcmp(name, "verify")) return sl_cmd_verify;
    if (!strcmp(name, "generate")) return sl_cmd_generate;
    if (!strcmp(name, "tokenize")) return sl_cmd_tokenize;
    if (!strcmp(name, "model")) return sl_cmd_model;
    if (!strcmp(name, "train")) return sl_cmd_train;
    if (!strcmp(name, "distill")) return sl_cmd_distill;
    if (!strcmp(name, "measure")) return sl_cmd_measure;
    if (!strcmp(name, "eval")) return sl_cmd_eval;
    if (!strcmp(name, "run")) return sl_cmd_run;
    if (!strcmp(name, "analyze")) return sl_cmd_analyze;
    if (!strcmp(name, "recommend")) return sl_cmd_recommend;
    if (!strcmp(name, "plot")) return sl_cmd_plot;
    if (!strcmp(name, "export-notebook")) return sl_cmd_export_notebook;
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: speclab <command> [options]   (speclab <command> --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        int built = lookup(commands[i].name) != NULL;
        fprintf(f, "  %-16s %s%s\n", commands[i].name, commands[i].help, built ? "" : " (not built yet)");
    }
}

/* speclab never uses OpenBLAS's own thread pool (the engine has its own kernels; the trainer calls
 * sgemm single-threaded inside its OpenMP team), but the pthread build of OpenBLAS starts that
 * pool when the library loads, and its idle threads spin for ~0.1 s, which on a two-core machine
 * costs a short command (analyze of a 650 MB log) ~30% of its wall time. The pool size is read
 * from the environment only at load, so the first start sets it and re-executes itself once. */
static void openblas_single_pool(char **argv)
{
    if (getenv("OPENBLAS_NUM_THREADS")) return;
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1)) return;
    execv("/proc/self/exe", argv); /* on failure: carry on with the pool */
}

/* A failed command's message, with the flag that sets the quantity it names: "gamma_max: 0 is
 * outside ..." becomes "--gamma-max: 0 is outside ...". Empty when there is none. */
static void error_line(int rc, char *line, size_t size)
{
    line[0] = 0;
    if (rc == 0 || !sl_errmsg()[0]) return;
    const char *msg = sl_errmsg(), *colon = strchr(msg, ':');
    char quantity[64], flag[80];
    size_t k = colon ? (size_t)(colon - msg) : 0;
    if (k > 0 && k < sizeof quantity && strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_") == k) {
        memcpy(quantity, msg, k);
        quantity[k] = 0;
        if (sl_cli_flag_for(quantity, flag, sizeof flag)) {
            snprintf(line, size, "%s%s", flag, colon);
            return;
        }
    }
    snprintf(line, size, "%s", msg);
}

int main(int argc, char **argv)
{
    openblas_single_pool(argv);
    if (sl_mpi_init(&argc, &argv)) return 0; /* MPI build: a rank with nothing to do (sl_mpi.h) */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("speclab %s\n", SL_VERSION);
        return 0;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        known |= !strcmp(commands[i].name, argv[1]);
    if (!known) {
        fprintf(stderr, "speclab: unknown command '%s' (speclab --help lists them)\n", argv[1]);
        return 2;
    }
    sl_cmd_fn fn = lookup(argv[1]);
    if (!fn) {
        fprintf(stderr, "speclab %s: this command is not built yet\n", argv[1]);
        return 1;
    }
    sl_err_clear();
    int rc = fn(argc - 1, argv + 1);
    char line[1024];
    error_line(rc, line, sizeof line);
    if (line[0]) {
        fprintf(stderr, "speclab %s: %s\n", argv[1], line);
        if (getenv("SPECLAB_DEBUG")) fprintf(stderr, "  (at %s)\n", sl_errwhere());
    }
    /* MPI build: the ranks' last agreement on how the command ended (sl_mpi.h). */
    return sl_mpi_finish(rc < 0 || rc > 2 ? 1 : rc, argv[1], line);
}
