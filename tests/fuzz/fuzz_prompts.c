/* fuzz_prompts.c: prompt files (data/sl_prompts.h sl_prompts_read): one prompt per line with
 * backslash escapes, UTF-8. */
#include <string.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_prompts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".txt");
    if (!path) return 0;
    sl_prompts *p = NULL;
    if (sl_prompts_read(path, &p) == SL_OK) {
        for (size_t i = 0; i < p->n; i++)
            if (p->len[i] == 0 || p->text[i][p->len[i]] != 0) abort(); /* non-empty, NUL-terminated */
        sl_prompts_free(p);
    }
    sl_err_clear();
    return 0;
}
