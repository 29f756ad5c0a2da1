/* fuzz_samples.c: sample files of verification (analysis/sl_samples.h, SAMPLES.md): csv, hdf5 and
 * ids. Byte 0 chooses the format (auto, csv, hdf5, ids) and gamma (1..8), byte 1 the vocabulary
 * (2..257); the rest is the file. */
#include <stdlib.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_samples.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    sl_samples_format fmt = (sl_samples_format)(data[0] & 3);
    size_t gamma = 1 + ((data[0] >> 2) & 7), V = 2 + (size_t)data[1];
    const char *path = fuzz_file(data + 2, size - 2, ".samples");
    if (!path) return 0;
    sl_samples *s = NULL;
    if (sl_samples_read(path, fmt, V, gamma, &s) == SL_OK) {
        uint64_t tokens = 0;
        size_t w = s->nem ? s->gamma + 1 : 1;
        for (size_t i = 0; i < s->n; i++) {
            size_t k = s->nem ? s->nem[i] : 1;
            if (k < 1 || k > w) abort();
            for (size_t j = 0; j < k; j++)
                if (s->tok[i * w + j] < 0 || (size_t)s->tok[i * w + j] >= s->V) abort();
            tokens += k;
        }
        if (tokens != s->tokens) abort();
        sl_samples_free(s);
    }
    sl_err_clear();
    return 0;
}
