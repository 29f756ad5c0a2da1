/* sl_import_gguf.c: GGUF importer and writer (placeholder until built; see sl_import.h). */
#include "sl_common.h"
#include "sl_import.h"

int sl_import_gguf(const char *path, sl_st_file **out)
{
    *out = NULL;
    return sl_fail(SL_EINPUT, "%s: GGUF import is not built yet", path);
}

int sl_export_gguf(const sl_st_file *native, const char *path, const sl_export_opts *o)
{
    (void)native, (void)o;
    return sl_fail(SL_EINPUT, "%s: writing GGUF is not built yet", path);
}
