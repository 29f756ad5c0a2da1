/* fuzz_log.c: HDF5 logs (analysis/sl_log.h): sl_log_validate (`speclab analyze --validate`), and
 * sl_log_open followed by the reads analyze does: the sequences table, every row block, the costs
 * and (for a small vocabulary) the distributions by both paths (raw chunks + libdeflate, H5Dread).
 *
 * sl_log_open probes the file's metadata in a forked child first (sl_log_read.c, probe_in_child).
 * Under libFuzzer the child inherits the sanitizers' and libFuzzer's signal handlers, so a crash
 * of libhdf5 in the child is reported by the child (and it exits, not killed by a signal): the
 * parent then opens the file itself and crashes the same way, which libFuzzer records. Such a
 * crash is a libhdf5 fault that the probe turns into a one-line error in the shipped binary. */
#include <stdlib.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_log.h"

static void read_all(sl_log_reader *r)
{
    sl_log_seq *seq = NULL;
    if (sl_log_sequences(r, &seq) == SL_OK) free(seq);
    const sl_log_meta *m = sl_log_meta_of(r);
    size_t rows = sl_log_n_rows(r);
    if (m->kind == SL_LOG_MEASURE) {
        sl_log_pos_block b;
        if (sl_log_pos_block_alloc(&b, 7) == SL_OK) {
            for (size_t first = 0; first < rows && sl_log_read_positions(r, first, &b) == SL_OK && b.n; first += b.n) {}
            sl_log_pos_block_free(&b);
        }
        size_t V = m->vocab_size, ch = sl_log_dist_rows_per_chunk(r);
        size_t n = rows < ch ? rows : ch;
        if (sl_log_has_dists(r) && V <= 4096 && n && n <= 256) {
            float *p = malloc(n * V * sizeof *p), *q = malloc(n * V * sizeof *q);
            double *pd = malloc(V * sizeof *pd), *qd = malloc(V * sizeof *qd);
            if (p && q && pd && qd) {
                sl_log_read_dists(r, 0, n, p, q, 1, 1);
                sl_log_read_dists(r, 0, n, p, q, 0, 1);
                sl_log_read_row(r, rows - 1, pd, qd);
            }
            free(p), free(q), free(pd), free(qd);
        }
    } else {
        sl_log_iter_block b;
        if (sl_log_iter_block_alloc(&b, 7) == SL_OK) {
            for (size_t first = 0; first < rows && sl_log_read_iterations(r, first, &b) == SL_OK && b.n; first += b.n) {}
            sl_log_iter_block_free(&b);
        }
        sl_log_draft_block d;
        size_t nd = sl_log_n_drafts(r);
        if (sl_log_draft_block_alloc(&d, 7) == SL_OK) {
            for (size_t first = 0; first < nd && sl_log_read_drafts(r, first, &d) == SL_OK && d.n; first += d.n) {}
            sl_log_draft_block_free(&d);
        }
        sl_log_costs c;
        if (sl_log_read_costs(r, &c) == SL_OK) sl_log_costs_free(&c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".h5");
    if (!path) return 0;
    sl_log_validate(path);
    sl_err_clear();
    sl_log_reader *r = NULL;
    if (sl_log_open(&r, path) == SL_OK) {
        read_all(r);
        sl_log_close(r);
    }
    sl_err_clear();
    return 0;
}
