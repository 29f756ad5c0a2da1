/* sl_import_hf.c: Hugging Face GPT-2 importer (placeholder until built; see sl_import.h). */
#include "sl_common.h"
#include "sl_import.h"

int sl_import_hf_gpt2(const char *path, sl_st_file **out)
{
    *out = NULL;
    return sl_fail(SL_EINPUT, "%s: Hugging Face GPT-2 import is not built yet", path);
}
