/*
 * sl_st.h: safetensors files, memory-mapped for reading and written atomically.
 *
 * Layout (https://github.com/huggingface/safetensors): u64 little-endian header length N, N bytes
 * of JSON ({"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}}), then
 * the data buffer; offsets are relative to the start of the buffer. The JSON is parsed by json-c.
 *
 * The reader validates everything before handing out a pointer: header length within the file,
 * parseable JSON, known dtypes (F32, F16, BF16, I32 only: what our models use), non-negative shapes,
 * offsets inside the buffer, byte counts equal to numel * dtype size, no two tensors overlapping.
 * Any violation is SL_EINPUT with a one-line message naming the file and the tensor.
 * Tensor data pointers point into the read-only mapping and may be unaligned (other writers pad
 * the header only to 8 bytes, or not at all); read them with memcpy or unaligned loads.
 */
#ifndef SL_ST_H
#define SL_ST_H

#include <stddef.h>
#include <stdint.h>

/* I32 holds integer tables (the counts and indices of n-gram models, FORMAT.md); the transformer
 * reader refuses it for weights. */
/* U8 and BOOL (1 byte each) are read only so that importers can skip the attention-mask buffers
 * that old Hugging Face exports store in them; no reader accepts them as weights. */
typedef enum { SL_DT_F32 = 0, SL_DT_F16 = 1, SL_DT_BF16 = 2, SL_DT_I32 = 3, SL_DT_U8 = 4, SL_DT_BOOL = 5 } sl_dtype;

#define SL_ST_MAX_DIMS 4

const char *sl_dtype_name(sl_dtype dt);      /* "F32", "F16", "BF16", "I32" */
int sl_dtype_parse(const char *s, sl_dtype *out); /* SL_EINPUT on anything else */
size_t sl_dtype_size(sl_dtype dt);           /* bytes per element */

typedef struct {
    char *name;
    sl_dtype dtype;
    int ndim;
    int64_t shape[SL_ST_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    const void *data; /* into the mapping; unaligned */
} sl_st_tensor;

typedef struct {
    char *path;
    void *map;          /* the whole file, PROT_READ, MAP_PRIVATE */
    size_t map_bytes;
    size_t n_tensors;
    sl_st_tensor *tensors; /* (n_tensors), in header order */
    size_t n_meta;
    char **meta_keys;   /* (n_meta) */
    char **meta_vals;   /* (n_meta) */
    /* In-memory files (sl_st_mem_*): buffers freed by sl_st_close. */
    size_t n_owned, cap_owned, cap_tensors;
    void **owned;
} sl_st_file;

/* Maps and validates path. On error *out is NULL and the status is SL_EINPUT (bad file) or
 * SL_EFAIL (out of memory). */
int sl_st_open(const char *path, sl_st_file **out);
void sl_st_close(sl_st_file *f);

const sl_st_tensor *sl_st_find(const sl_st_file *f, const char *name); /* NULL if absent */
const char *sl_st_meta(const sl_st_file *f, const char *key);          /* NULL if absent */

/* ---- in-memory files: what the importers build (models/sl_import.h) ----
 * An importer maps a foreign file, then describes the model in the native layout: tensors named
 * and shaped as FORMAT.md says, pointing either into the kept mapping (used in place) or into
 * buffers it allocated and hands over (converted, transposed, dequantised). The engine then reads
 * it exactly as it reads a native file. */

/* An empty file named path (for messages). */
int sl_st_mem_new(const char *path, sl_st_file **out);
/* Keeps a read-only mapping of bytes (from mmap) alive until sl_st_close, which unmaps it. At most
 * one per file. */
void sl_st_mem_keep_map(sl_st_file *f, void *map, size_t bytes);
/* Hands a malloc'd buffer to f (freed by sl_st_close); on failure the buffer is freed. */
int sl_st_mem_own(sl_st_file *f, void *buf);
/* Adds a tensor over data (into the kept mapping or an owned buffer); the name is copied. Checks
 * 0 < ndim <= SL_ST_MAX_DIMS, non-negative sizes, numel * size without overflow, a unique name. */
int sl_st_mem_add(sl_st_file *f, const char *name, sl_dtype dt, int ndim, const int64_t *shape, const void *data);
/* Sets a metadata entry (copied; replaces an existing key). */
int sl_st_mem_meta(sl_st_file *f, const char *key, const char *val);
/* Writes any sl_st_file (mapped or in memory) as a safetensors file, atomically. */
int sl_st_write_file(const sl_st_file *f, const char *path);

/* ---- writer ---- */

/* Tensors and metadata to write; the writer does not copy data, it must stay valid until
 * sl_st_write returns. */
typedef struct {
    const char *name;
    sl_dtype dtype;
    int ndim;
    int64_t shape[SL_ST_MAX_DIMS];
    const void *data; /* numel * dtype size bytes */
} sl_st_wtensor;

/* Writes path atomically (temp file + rename). The header is padded with spaces so that the data
 * buffer starts at a 64-byte boundary; tensors follow each other without gaps in the given order
 * (the reference reader rejects gaps), so data pointers are aligned only as far as the sizes
 * before them allow. meta_keys/vals may be NULL when n_meta is 0. */
int sl_st_write(const char *path, const sl_st_wtensor *tensors, size_t n_tensors, const char *const *meta_keys,
                const char *const *meta_vals, size_t n_meta);

#endif
