/*
 * sl_notebook.h: Jupyter notebooks (nbformat 4.5) that reload speclab's HDF5 logs with h5py and
 * recompute the analysis with numpy and matplotlib (`speclab export-notebook`).
 *
 * The notebook is the reader's own check of speclab: it stores no number computed by speclab.
 * Its cells, in order: a title (each log's root attributes, the command that reproduces it, what
 * every section means); the settings (log paths, relative to the notebook's folder where they
 * can be, gamma range, bootstrap size and seed); the helpers (h5py loading, numpy recomputation
 * that follows analysis/sl_analyze.c's definitions); per log: alpha with a percentile bootstrap CI
 * over whole sequences, the beta histogram, lenience curves (full distributions only), E[N] from
 * Equation 1 and from the replay of the logged betas, walltime factors and the optimal gamma for
 * c in {0, 0.01, 0.05, 0.1} with v == 1, and for run logs alpha_hat, tokens per iteration, the
 * measured c and v(n) and the observed speedup; last, one JSON line per log with the key numbers
 * (tests/cli/notebook.py compares them with `speclab analyze --format json`).
 *
 * It is not a report renderer: it writes code that recomputes; it never executes the notebook.
 */
#ifndef SL_NOTEBOOK_H
#define SL_NOTEBOOK_H

#include <stddef.h>
#include <stdint.h>

#include "sl_log.h"

typedef struct {
    const char *const *logs; /* (n_logs) HDF5 logs (analysis/LOG_SCHEMA.md), each opened and checked */
    size_t n_logs;
    const char *out;         /* the notebook to write; must end in .ipynb; its folder must exist */
    int force;               /* 1: replace an existing out (default 0: refuse) */
    size_t gamma_max;        /* gamma = 1..gamma_max, as analyze --gamma-max (default 12) */
    size_t n_boot;           /* bootstrap resamples over whole sequences (default 1000) */
    double ci_level;         /* (0, 1), default 0.95 */
    uint64_t seed;           /* numpy's RNG for the bootstrap (default 1) */
    size_t n_hist_bins;      /* beta histogram bins on [0, 1], 1..64 (default 20, as analyze) */
} sl_notebook_config;

void sl_notebook_config_init(sl_notebook_config *c);

typedef struct {
    size_t n_cells;
    size_t bytes;            /* size of the written file */
} sl_notebook_result;

/* Builds the notebook as JSON text (malloc'd, *text freed by the caller). Every log is opened with
 * sl_log_open (schema name and version, datasets and shapes): a missing file, a non-HDF5 file or a
 * log of another schema version is SL_EINPUT with a message that names the file. */
int sl_notebook_build(const sl_notebook_config *c, char **text, size_t *n_cells);

/* sl_notebook_build, then writes c->out atomically: OUT.tmp.PID in the same folder, fsync, rename.
 * An existing out is refused (SL_EINPUT) unless c->force; on any error no file is left behind. */
int sl_notebook_write(const sl_notebook_config *c, sl_notebook_result *res);

/* The speclab command line that reproduces a log, rebuilt from its root attributes (logs do not
 * store the command line): `speclab measure --synthetic ...`, `speclab measure --target ...` or
 * `speclab run ...`, writing out_name. n_sequences and prompt_len (0 when the prompts differ in
 * length) come from /sequences. Returns the length written (truncated to n - 1, as snprintf). */
int sl_notebook_command(const sl_log_meta *m, size_t n_sequences, size_t prompt_len, const char *out_name, char *buf,
                        size_t n);

/* path relative to the folder dir when both share a folder below the root, else absolute
 * (both resolved with realpath: path must exist). SL_EINPUT if either cannot be resolved. */
int sl_notebook_relpath(const char *path, const char *dir, char *buf, size_t n);

#endif
