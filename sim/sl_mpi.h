/*
 * sl_mpi.h: the MPI build's split of work across ranks (analysis/MPI.md), behind plain functions
 * so that no other file includes <mpi.h> or tests SL_MPI. In the serial build (and in the MPI
 * build for a command that is not distributed) there is one rank, 0 of 1, and every function is
 * the identity: the whole range is this rank's, sums and gathers do nothing.
 *
 * Results never depend on the number of ranks: every random stream derives from (seed, item), an
 * item being a Monte Carlo block or a shard of sequences, never from a rank; integer counts are
 * summed exactly; floating-point results are computed per item and combined in item order by the
 * code that did so serially.
 */
#ifndef SL_MPI_H
#define SL_MPI_H

#include <stddef.h>
#include <stdint.h>

/* Called first thing by main with its argument vector (the command is argv[1]). MPI build: starts
 * MPI; the commands that split their work (mc, verify, measure) run on every rank, rank 0 alone
 * writing to stdout and stderr; any other command runs on rank 0 as the serial program would, and
 * returns 1 on the other ranks, whose main then exits 0. MPI is finalised at exit. Serial: 0. */
int sl_mpi_init(int *argc, char ***argv);

/* Called by main when a command ends, with its exit code (0 ok, 1 failure, 2 bad input) and, if
 * it failed, the command's name and its message (what main printed; ranks other than 0 print to
 * /dev/null). Returns the exit code of the job. MPI build, distributed command: a last agreement
 * among the ranks. When every rank reaches it, every rank returns the exit code of the lowest
 * failing rank and rank 0 prints that rank's message if it did not fail itself. A rank that
 * failed and finds the others do not come within SPECLAB_MPI_FAIL_WAIT_S seconds (default 10)
 * failed alone, where they wait in a collective of the command (an error before or between the
 * command's status agreements: a model that does not load on one node): it prints its message,
 * "speclab CMD: rank R of N: ...", on its own stderr and ends the job with MPI_Abort(code), so
 * that the job never hangs. Elsewhere: returns code. */
int sl_mpi_finish(int code, const char *cmd, const char *msg);

int sl_mpi_rank(void); /* 0 serially */
int sl_mpi_size(void); /* 1 serially */

/* This rank's share [*lo, *hi) of items 0..n-1: contiguous, in rank order, sizes differing by at
 * most one (rank r: n r / size .. n (r+1) / size). */
void sl_mpi_share(size_t n, size_t *lo, size_t *hi);

/* Collective: agrees on a status. Returns SL_OK when every rank passed SL_OK; else the status of
 * the lowest failing rank, on every rank, with its message (prefixed "rank R of N: " when R > 0)
 * recorded by sl_fail, so that rank 0 prints the one line. */
int sl_mpi_status(int rc);

/* Collective: v[0..n) summed over the ranks, on every rank (exact: integers). */
void sl_mpi_sum_u64(uint64_t *v, size_t n);

/* Collective: buf holds total_bytes laid out in items of item_bytes (the last one may be short),
 * each rank having filled its share of n_items (sl_mpi_share); afterwards every rank has all. */
void sl_mpi_allgather_share(void *buf, size_t n_items, size_t item_bytes, size_t total_bytes);

#endif
