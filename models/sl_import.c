/*
 * sl_import.c: format detection, the one open call for every format, and convert. See sl_import.h.
 * The formats themselves live in sl_import_hf.c, sl_import_llama2c.c and sl_import_gguf.c.
 */
#include "sl_import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_common.h"
#include "sl_kern.h"

static const char *const FORMAT_NAMES[] = {"speclab", "hf-gpt2", "llama2c", "gguf"};

const char *sl_model_format_name(sl_model_format f)
{
    return (unsigned)f < 4 ? FORMAT_NAMES[f] : "?";
}

int sl_model_format_parse(const char *s, sl_model_format *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, FORMAT_NAMES[i])) {
            *out = (sl_model_format)i;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "unknown model format '%s' (expected speclab, hf-gpt2, llama2c or gguf)", s);
}

/* A safetensors file: u64 header length within the file, then '{'. Returns 1 and sets *speclab
 * when its metadata names format speclab-model (read from the header only). */
static int is_safetensors(const char *path, const unsigned char *head, size_t n, uint64_t size, int *speclab)
{
    *speclab = 0;
    if (n < 9 || head[8] != '{') return 0;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | head[i];
    /* A broken length: a damaged safetensors file; the native reader names what is wrong. */
    *speclab = 1;
    if (hl < 2 || hl > size - 8) return 1;
    *speclab = 0;
    /* The metadata may sit anywhere in the header: read it (bounded: sl_st_open caps headers at
     * 100 MB and reads them anyway). */
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t cap = hl < (1u << 20) ? (size_t)hl : (1u << 20);
    char *buf = sl_malloc(cap + 1);
    if (buf && fseek(f, 8, SEEK_SET) == 0) {
        size_t got = fread(buf, 1, cap, f);
        buf[got] = 0;
        *speclab = strstr(buf, "\"speclab-model\"") != NULL;
    }
    free(buf);
    fclose(f);
    return 1;
}

int sl_model_detect(const char *path, sl_model_format *out)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        *out = SL_FMT_HF_GPT2;
        return SL_OK;
    }
    if (!S_ISREG(sb.st_mode)) return sl_fail(SL_EINPUT, "%s: not a regular file or folder", path);
    unsigned char head[64];
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    n = fread(head, 1, sizeof head, f);
    fclose(f);
    uint64_t size = (uint64_t)sb.st_size;
    int speclab;
    if (n >= 4 && !memcmp(head, "GGUF", 4)) *out = SL_FMT_GGUF;
    else if (is_safetensors(path, head, n, size, &speclab)) *out = speclab ? SL_FMT_SPECLAB : SL_FMT_HF_GPT2;
    else if (sl_llama2c_detect(head, n, size)) *out = SL_FMT_LLAMA2C;
    else if (n >= 8 && ((head[0] == 0x80 && head[1] >= 2) || !memcmp(head, "PK\3\4", 4)))
        return sl_fail(SL_EINPUT, "%s: a PyTorch pickle (pytorch_model.bin); speclab reads only safetensors weights: "
                       "convert it with the transformers library (save_pretrained(..., safe_serialization=True))", path);
    else
        return sl_fail(SL_EINPUT, "%s: unknown model format (not a speclab or Hugging Face safetensors file, a llama2.c "
                       "checkpoint or GGUF)", path);
    return SL_OK;
}

int sl_model_file_open(const char *path, sl_st_file **out, sl_model_format *fmt_out)
{
    *out = NULL;
    sl_model_format fmt;
    int rc = sl_model_detect(path, &fmt);
    if (rc) return rc;
    if (fmt_out) *fmt_out = fmt;
    switch (fmt) {
    case SL_FMT_SPECLAB: return sl_st_open(path, out);
    case SL_FMT_HF_GPT2: return sl_import_hf_gpt2(path, out);
    case SL_FMT_LLAMA2C: return sl_import_llama2c(path, out);
    case SL_FMT_GGUF: return sl_import_gguf(path, out);
    }
    return sl_fail(SL_EFAIL, "unreachable format %d", (int)fmt);
}

/* Is dt a floating-point weight type (one --dtype converts between)? */
static int is_float_dtype(sl_dtype dt) { return dt == SL_DT_F32 || dt == SL_DT_F16 || dt == SL_DT_BF16; }

int sl_export_speclab(const sl_st_file *native, const char *path, const sl_export_opts *o)
{
    sl_dtype want = SL_DT_F32;
    int convert = 0;
    if (o && o->dtype) {
        if (sl_dtype_parse(o->dtype, &want)) return SL_EINPUT;
        for (size_t i = 0; i < native->n_tensors; i++)
            convert |= native->tensors[i].ndim == 2 && is_float_dtype(native->tensors[i].dtype) &&
                       native->tensors[i].dtype != want;
    }
    /* The native file records only the native metadata, plus where it came from. */
    if (!convert) return sl_st_write_file(native, path);
    /* --dtype: every matrix (2-D float tensor) in the wanted type, through float32 (exact from
     * f16/bf16, rounded to nearest even towards f16/bf16); vectors (norms, biases) as they are. */
    const size_t n = native->n_tensors;
    sl_st_wtensor *w = calloc(n ? n : 1, sizeof *w);
    void **bufs = calloc(n ? n : 1, sizeof *bufs);
    float *tmp = NULL;
    int rc = w && bufs ? SL_OK : sl_fail(SL_EFAIL, "out of memory converting %s", path);
    for (size_t i = 0; i < n && !rc; i++) {
        const sl_st_tensor *t = &native->tensors[i];
        w[i] = (sl_st_wtensor){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(w[i].shape, t->shape, sizeof t->shape);
        if (t->ndim != 2 || !is_float_dtype(t->dtype) || t->dtype == want) continue;
        float *f = realloc(tmp, (t->numel ? t->numel : 1) * sizeof *f);
        bufs[i] = malloc((t->numel ? t->numel : 1) * sl_dtype_size(want));
        if (!f || !bufs[i]) {
            if (f) tmp = f;
            rc = sl_fail(SL_EFAIL, "out of memory converting tensor '%s'", t->name);
            break;
        }
        tmp = f;
        sl_kern_to_f32(tmp, t->data, t->dtype, t->numel);
        sl_kern_from_f32(bufs[i], tmp, want, t->numel);
        w[i].dtype = want;
        w[i].data = bufs[i];
    }
    if (!rc)
        rc = sl_st_write(path, w, n, (const char *const *)native->meta_keys, (const char *const *)native->meta_vals,
                         native->n_meta);
    for (size_t i = 0; bufs && i < n; i++) free(bufs[i]);
    free(bufs);
    free(w);
    free(tmp);
    return rc;
}

int sl_model_convert(const char *in, const char *out, sl_model_format fmt, const sl_export_opts *o)
{
    sl_export_opts dflt = {0};
    if (!o) o = &dflt;
    int rc = sl_out_check("OUT", out, o->force, NULL);
    if (rc) return rc;
    sl_st_file *f = NULL;
    if ((rc = sl_model_file_open(in, &f, NULL))) return rc;
    const char *arch = sl_st_meta(f, "arch");
    if (!arch || (strcmp(arch, "gpt2") && strcmp(arch, "llama"))) {
        sl_st_close(f);
        return sl_fail(SL_EINPUT, "%s: only transformer models (arch gpt2 or llama) convert; this one is '%s'", in,
                       arch ? arch : "?");
    }
    switch (fmt) {
    case SL_FMT_SPECLAB: rc = sl_export_speclab(f, out, o); break;
    case SL_FMT_GGUF: rc = sl_export_gguf(f, out, o); break;
    case SL_FMT_LLAMA2C: rc = sl_export_llama2c(f, out, o); break;
    case SL_FMT_HF_GPT2: rc = sl_fail(SL_EINPUT, "writing hf-gpt2 is not supported (write speclab, gguf or llama2c)"); break;
    }
    sl_st_close(f);
    return rc;
}

int sl_model_sha256(const char *path, char *hex)
{
    struct stat sb;
    if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) return sl_sha256_file(path, hex);
    size_t n = strlen(path) + sizeof "/model.safetensors";
    char *p = sl_malloc(n);
    if (!p) return SL_EFAIL;
    snprintf(p, n, "%s/model.safetensors", path);
    int rc = sl_sha256_file(p, hex);
    free(p);
    return rc;
}
