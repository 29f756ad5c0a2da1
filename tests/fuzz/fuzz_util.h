/* fuzz_util.h: what every harness shares: the fuzz bytes as a file (most parsers take a path) or
 * as a NUL-terminated string. One temporary file per process, removed at exit. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "sl_model.h"

/* Writes data (n bytes) to this process's temporary file, suffix ext (".h5", ".csv", ...), and
 * returns its path (valid until the next call); NULL when the write failed. */
const char *fuzz_file(const uint8_t *data, size_t n, const char *ext);
/* As fuzz_file, in a second file (k = 1) beside the first (k = 0). */
const char *fuzz_file_slot(int k, const uint8_t *data, size_t n, const char *ext);
/* A malloc'd NUL-terminated copy of data (n bytes); free() it. */
char *fuzz_cstr(const uint8_t *data, size_t n);
/* A data file of the harnesses (tests/fuzz/data/NAME) as a path: relative to the working
 * directory (the repository root, where build.sh, replay.sh and `make fuzz` run them), or under
 * $SL_FUZZ_DATA when set. */
const char *fuzz_data(const char *name);

/* Uses an accepted transformer a little and closes it: one forward call of 2 tokens (ids 0 and
 * V - 1) when the vocabulary, width and context are small enough for a fuzzer's memory. */
void fuzz_forward_and_close(sl_model *m);

#endif
