/*
 * sl_mpi.c: the ranks of the MPI build (sl_mpi.h). The only file that includes <mpi.h>: compiled
 * with -DSL_MPI by mpicc into build/speclab-mpi alone (Makefile: mpi), and as the one-rank
 * identity everywhere else.
 */
#include "sl_mpi.h"

#include "sl_common.h"

static void share_of(size_t n, int rank, int size, size_t *lo, size_t *hi)
{
    /* n r / size without overflow for any n < 2^64 / size (ranks are few). */
    *lo = n / (size_t)size * (size_t)rank + n % (size_t)size * (size_t)rank / (size_t)size;
    *hi = n / (size_t)size * (size_t)(rank + 1) + n % (size_t)size * (size_t)(rank + 1) / (size_t)size;
}

#ifdef SL_MPI

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = 0, g_size = 1; /* of the distributed command; 0 of 1 otherwise */
static MPI_Comm g_fin = MPI_COMM_NULL; /* the last agreement's own communicator (sl_mpi_finish) */
static FILE *g_err = NULL;             /* this rank's stderr before it was sent to /dev/null */

/* The commands that split their work across ranks. */
static int distributed(const char *cmd)
{
    static const char *const cmds[] = {"mc", "verify", "measure", "run", "analyze"};
    for (size_t i = 0; cmd && i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i])) return 1;
    return 0;
}

static void finish(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

int sl_mpi_init(int *argc, char ***argv)
{
    const char *cmd = *argc >= 2 ? (*argv)[1] : NULL;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "speclab: MPI_Init failed\n");
        exit(1);
    }
    atexit(finish);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* An error on any rank reaches rank 0 through sl_mpi_status; a crash, through mpirun. The other
     * ranks keep quiet, so that the output is the serial program's. */
    if (rank != 0) {
        int fd = dup(2);
        g_err = fd >= 0 ? fdopen(fd, "w") : NULL;
    }
    if (rank != 0 && (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))) {
        /* nothing to print it on: carry on */
    }
    if (distributed(cmd)) {
        g_rank = rank;
        g_size = size;
        MPI_Comm_dup(MPI_COMM_WORLD, &g_fin);
        return 0;
    }
    return rank != 0; /* rank 0 runs the command alone */
}

int sl_mpi_rank(void) { return g_rank; }
int sl_mpi_size(void) { return g_size; }

void sl_mpi_share(size_t n, size_t *lo, size_t *hi) { share_of(n, g_rank, g_size, lo, hi); }

/* Completes rq, sleeping between polls: a rank that waits long for the others (rank 0 assembling
 * a log, a rank with one shard more) then leaves its core to them, where a blocking call of Open
 * MPI would spin on it, which costs the working ranks their time on an oversubscribed machine. */
static void wait_sleeping(MPI_Request *rq)
{
    int done = 0;
    struct timespec nap = {0, 1000000}; /* 1 ms */
    MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    while (!done) {
        nanosleep(&nap, NULL);
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    }
}

int sl_mpi_status(int rc)
{
    if (g_size == 1) return rc;
    int mine = rc ? g_rank : g_size, first = g_size;
    MPI_Request rq;
    MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &rq);
    wait_sleeping(&rq);
    if (first == g_size) return SL_OK;
    char msg[512] = "";
    int code = rc;
    if (g_rank == first) snprintf(msg, sizeof msg, "%s", sl_errmsg()[0] ? sl_errmsg() : "failed");
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
    MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD);
    msg[sizeof msg - 1] = 0;
    if (g_rank == first && first == 0) return code; /* its own message, as the serial program says it */
    if (first == 0) return sl_fail(code, "%s", msg);
    return sl_fail(code, "rank %d of %d: %s", first, g_size, msg);
}

int sl_mpi_finish(int code, const char *cmd, const char *msg)
{
    if (g_size == 1) return code;
    int mine = code ? g_rank : g_size, first = g_size, done = 0;
    MPI_Request rq;
    MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, g_fin, &rq);
    if (code) { /* wait a while for the others; alone, end the job */
        const char *e = getenv("SPECLAB_MPI_FAIL_WAIT_S");
        double wait_s = e && atof(e) > 0 ? atof(e) : 10, t0 = MPI_Wtime();
        struct timespec nap = {0, 1000000};
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        while (!done && MPI_Wtime() - t0 < wait_s) {
            nanosleep(&nap, NULL);
            MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        }
        if (!done) {
            if (g_rank != 0 && g_err)
                fprintf(g_err, "speclab %s: rank %d of %d: %s\n", cmd ? cmd : "", g_rank, g_size, msg && *msg ? msg : "failed");
            if (g_err) fflush(g_err);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, code);
        }
    } else {
        wait_sleeping(&rq);
    }
    if (first == g_size) return 0;
    char line[512] = "";
    int c = code;
    if (g_rank == first) snprintf(line, sizeof line, "%s", msg && *msg ? msg : "failed");
    MPI_Bcast(line, (int)sizeof line, MPI_CHAR, first, g_fin);
    MPI_Bcast(&c, 1, MPI_INT, first, g_fin);
    line[sizeof line - 1] = 0;
    if (g_rank == 0 && !code) fprintf(stderr, "speclab %s: rank %d of %d: %s\n", cmd ? cmd : "", first, g_size, line);
    return c;
}

void sl_mpi_sum_u64(uint64_t *v, size_t n)
{
    if (g_size == 1) return;
    for (size_t o = 0; o < n;) {
        size_t k = n - o < (size_t)1 << 28 ? n - o : (size_t)1 << 28;
        MPI_Allreduce(MPI_IN_PLACE, v + o, (int)k, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        o += k;
    }
}

void sl_mpi_allgather_share(void *buf, size_t n_items, size_t item_bytes, size_t total_bytes)
{
    if (g_size == 1) return;
    for (int r = 0; r < g_size; r++) {
        size_t lo, hi;
        share_of(n_items, r, g_size, &lo, &hi);
        size_t b0 = lo * item_bytes, b1 = hi * item_bytes;
        if (b1 > total_bytes) b1 = total_bytes;
        if (b0 > b1) b0 = b1;
        for (size_t o = b0; o < b1;) {
            size_t k = b1 - o < (size_t)1 << 30 ? b1 - o : (size_t)1 << 30;
            MPI_Bcast((char *)buf + o, (int)k, MPI_BYTE, r, MPI_COMM_WORLD);
            o += k;
        }
    }
}

#else /* one rank */

int sl_mpi_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int sl_mpi_rank(void) { return 0; }
int sl_mpi_size(void) { return 1; }
void sl_mpi_share(size_t n, size_t *lo, size_t *hi) { share_of(n, 0, 1, lo, hi); }
int sl_mpi_status(int rc) { return rc; }
int sl_mpi_finish(int code, const char *cmd, const char *msg)
{
    (void)cmd;
    (void)msg;
    return code;
}
void sl_mpi_sum_u64(uint64_t *v, size_t n)
{
    (void)v;
    (void)n;
}
void sl_mpi_allgather_share(void *buf, size_t n_items, size_t item_bytes, size_t total_bytes)
{
    (void)buf;
    (void)n_items;
    (void)item_bytes;
    (void)total_bytes;
}

#endif
