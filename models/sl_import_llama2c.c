/* sl_import_llama2c.c: llama2.c importer and writer (placeholder until built; see sl_import.h). */
#include "sl_common.h"
#include "sl_import.h"

int sl_llama2c_detect(const unsigned char *head, size_t n, uint64_t size)
{
    (void)head, (void)n, (void)size;
    return 0;
}

int sl_import_llama2c(const char *path, sl_st_file **out)
{
    *out = NULL;
    return sl_fail(SL_EINPUT, "%s: llama2.c import is not built yet", path);
}

int sl_export_llama2c(const sl_st_file *native, const char *path, const sl_export_opts *o)
{
    (void)native, (void)o;
    return sl_fail(SL_EINPUT, "%s: writing llama2.c is not built yet", path);
}
