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
#include "sl_table.h"

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

/* True when stderr is a terminal: progress goes to stderr only then. */
int sl_cli_progress_enabled(void);

#endif
