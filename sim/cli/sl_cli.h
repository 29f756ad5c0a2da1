/*
 * sl_cli.h: the speclab command table and option-parsing helpers shared by every subcommand.
 *
 * Each subcommand lives in its own file sim/cli/cmd_NAME.c and defines
 *     int sl_cmd_NAME(int argc, char **argv);   // argv[0] is the subcommand name
 * returning an exit code (0 ok, 1 failure, 2 bad usage or bad input). On error it records the
 * message with sl_fail() and returns the status; main() prints "speclab NAME: message" and exits.
 * `--help` prints usage on stdout and returns 0.
 */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "sl_common.h"
#include "sl_dist.h"
#include "sl_spec.h"
#include "sl_table.h"

/* ---- the option registry ----
 *
 * A command declares its options once, as a list of sl_opt bound to the fields of its config
 * struct, and sl_cli_parse does the rest: getopt_long, range checks with one-line errors that name
 * the flag, required options, positional arguments, and --help generated from the same list. The
 * groups shared by several commands (sampling, acceptance rule, seed and threads, output format)
 * are declared once below and added by each command that takes them, so a flag means the same
 * thing, with the same range and help text, everywhere.
 *
 * The library names quantities in its messages ("gamma: 70 is outside [1, 64]"); when a command
 * fails, main() rewrites a leading quantity into the flag that sets it ("--gamma: ...") from the
 * list the command registered (sl_cli_flag_for). */
typedef enum {
    SL_OPT_FLAG,   /* no argument: *(int *)dst = 1 */
    SL_OPT_STRING, /* *(const char **)dst = the argument */
    SL_OPT_LONG,   /* *(long *)dst, checked against [lo, hi] */
    SL_OPT_SIZE,   /* *(size_t *)dst, checked against [lo, hi] */
    SL_OPT_INT,    /* *(int *)dst, checked against [lo, hi] */
    SL_OPT_DOUBLE, /* *(double *)dst, finite, checked against [lo, hi] (open ends by flags) */
    SL_OPT_U64,    /* *(uint64_t *)dst, non-negative (seeds) */
    SL_OPT_FORMAT, /* *(sl_format *)dst: table | csv | json */
    SL_OPT_CUSTOM, /* parse(flag, arg, dst) */
    SL_OPT_LIST    /* *(sl_cli_list *)dst: repeatable; plain arguments right after its value join it */
} sl_opt_kind;

/* The values of a list option ("--corpus a.txt b.txt --corpus c.txt"), in order; v points into
 * argv and is owned by the list (sl_cli_list_free). */
typedef struct {
    const char **v; /* (n) */
    size_t n;
} sl_cli_list;
void sl_cli_list_free(sl_cli_list *l);

enum {
    SL_OPT_REQUIRED = 1, /* the command refuses to run without it */
    SL_OPT_LO_OPEN = 2,  /* lo itself is excluded */
    SL_OPT_HI_OPEN = 4,  /* hi itself is excluded */
};

typedef struct {
    const char *name;     /* the long option without dashes: "gamma-max" */
    const char *metavar;  /* the argument in --help ("N"); NULL for flags */
    sl_opt_kind kind;
    void *dst;
    double lo, hi;        /* range for LONG / SIZE / INT / DOUBLE */
    unsigned flags;       /* SL_OPT_REQUIRED | SL_OPT_LO_OPEN | SL_OPT_HI_OPEN */
    int (*parse)(const char *flag, const char *arg, void *dst); /* SL_OPT_CUSTOM */
    const char *help;     /* one line; "(default ...)" belongs here */
    const char *quantity; /* the library's name for it when that differs from name ('-' -> '_') */
    int seen;             /* set by sl_cli_parse */
} sl_opt;

#define SL_CLI_MAX_OPTS 96
#define SL_CLI_MAX_POS 64

typedef struct {
    const char *command;  /* "run" */
    const char *synopsis; /* "--target T --draft D --prompts FILE ... [options]" */
    const char *about;    /* paragraphs printed between the synopsis and the options */
    size_t n;
    sl_opt opt[SL_CLI_MAX_OPTS];
    size_t n_pos;         /* positional arguments after parsing */
    char *pos[SL_CLI_MAX_POS]; /* (n_pos) pointers into argv */
} sl_cli;

void sl_cli_init(sl_cli *c, const char *command, const char *synopsis, const char *about);
/* Adds one option; returns it so a caller can adjust a field. */
sl_opt *sl_cli_add(sl_cli *c, sl_opt o);
/* Shorthands for the common kinds. */
void sl_cli_flag(sl_cli *c, const char *name, int *dst, const char *help);
void sl_cli_string(sl_cli *c, const char *name, const char *metavar, const char **dst, const char *help);
void sl_cli_long(sl_cli *c, const char *name, const char *metavar, long *dst, long lo, long hi, const char *help);
void sl_cli_size(sl_cli *c, const char *name, const char *metavar, size_t *dst, size_t lo, size_t hi, const char *help);
void sl_cli_int(sl_cli *c, const char *name, const char *metavar, int *dst, int lo, int hi, const char *help);
void sl_cli_dbl(sl_cli *c, const char *name, const char *metavar, double *dst, double lo, double hi, unsigned flags,
                const char *help);
void sl_cli_custom(sl_cli *c, const char *name, const char *metavar, void *dst,
                   int (*parse)(const char *flag, const char *arg, void *dst), const char *help);

void sl_cli_list_opt(sl_cli *c, const char *name, const char *metavar, sl_cli_list *dst, const char *help);

/* ---- shared groups ---- */
/* --temperature --top-k --top-p --min-p into s (which keeps its defaults when not given). */
void sl_cli_group_sampling(sl_cli *c, sl_sampling *s);
/* --rule --lenience into cfg. */
void sl_cli_group_rule(sl_cli *c, sl_spec_config *cfg);
/* --seed (default shown as given in *seed) and, when threads != NULL, --threads (0 = all cores). */
void sl_cli_group_seed(sl_cli *c, uint64_t *seed, int *threads);
/* --device cpu|cuda|cuda-emu: sets the process's default device (sl_model_set_default_device) as
 * it is parsed; *device (when device != NULL) records the name. */
void sl_cli_group_device(sl_cli *c, const char **device);
/* --format table|csv|json. */
void sl_cli_group_format(sl_cli *c, sl_format *fmt);

/* Parses argv (argv[0] is the command's name). Returns SL_OK, SL_EINPUT with the message
 * recorded (unknown option, bad value, missing required option, positional arguments beyond
 * max_pos), or -1 after printing --help on stdout. Positional arguments land in c->pos. */
int sl_cli_parse(sl_cli *c, int argc, char **argv, size_t max_pos);
/* Whether an option was given on the command line. */
int sl_cli_given(const sl_cli *c, const char *name);
/* Prints the generated help: "usage: speclab CMD SYNOPSIS", about, then one line per option. */
void sl_cli_usage(const sl_cli *c, FILE *f);
/* The flag ("--gamma-max") that sets a quantity ("gamma_max") in the last parsed command, or NULL. */
const char *sl_cli_flag_for(const char *quantity, char *buf, size_t n);

/* Parses a finite double; flag names the option in the error message. */
int sl_cli_double(const char *flag, const char *s, double *out);
/* As sl_cli_double, and checks lo <= x <= hi (an open end excludes the bound). */
int sl_cli_double_in(const char *flag, const char *s, double lo, int lo_open, double hi, int hi_open,
                     double *out);
/* Parses an integer in [lo, hi]. */
int sl_cli_long_in(const char *flag, const char *s, long lo, long hi, long *out);
int sl_cli_u64(const char *flag, const char *s, uint64_t *out);

/* Parses a sweep: "x", "a,b,c" or "start:stop:step" (inclusive of stop within 1e-9 of a step;
 * for integer flags "start:stop" means step 1). Returns a malloc'd array in *vals. */
int sl_cli_sweep(const char *flag, const char *s, double **vals, size_t *n);

/* Parses a vector (a pmf, logits): "a,b,c" (sl_cli_sweep without ranges) or "@FILE", numbers
 * separated by whitespace. Returns a malloc'd array in *out. Used by dist and verify. */
int sl_cli_vector(const char *flag, const char *s, double **out, size_t *n);

/* True when stderr is a terminal: progress goes to stderr only then. */
int sl_cli_progress_enabled(void);

/* ---- progress lines ----
 * One line on stderr, "measure: 12/16 sequences  3.1 sequences/s  1 s left", rewritten in place
 * with \r at most 10 times a second and ended with a newline when done reaches total (or by
 * sl_cli_progress_end after a failure). Shown only when stderr is a terminal and --quiet was not
 * given; results on stdout are never touched. sl_cli_progress_cb matches the library's
 * sl_progress_fn: pass it with the struct as ctx, or pass sl_cli_progress_fn(p), NULL when off. */
typedef struct {
    const char *label; /* "measure" */
    const char *unit;  /* "sequences" */
    int on;            /* stderr is a terminal and not --quiet */
    double start_s;    /* sl_now_s() at init */
    double last_s;     /* last time the line was drawn */
    double first_s;    /* the first callback: the rate counts from it, so that work a resumed run */
    size_t first_done; /* skipped at once does not inflate it */
    int called;        /* first_s and first_done are set */
    int open;          /* a line was drawn and not yet ended */
} sl_cli_progress;

void sl_cli_progress_init(sl_cli_progress *p, const char *label, const char *unit, int quiet);
void sl_cli_progress_cb(void *ctx, size_t done, size_t total);
/* The callback to hand the library: sl_cli_progress_cb when p is on, NULL (silent) otherwise. */
sl_progress_fn sl_cli_progress_fn(const sl_cli_progress *p);
/* Ends a line left open (work that failed or stopped before total). */
void sl_cli_progress_end(sl_cli_progress *p);
/* --quiet: no progress line on stderr. */
void sl_cli_group_quiet(sl_cli *c, int *quiet);
/* --force: replace an existing output that this command did not write (sl_out_check). */
void sl_cli_group_force(sl_cli *c, int *force);

/* Parses "1,2,3" into token ids (malloc'd, *n entries); SL_EINPUT naming flag otherwise. */
int sl_cli_ids(const char *flag, const char *s, int32_t **ids, size_t *n);

#endif
