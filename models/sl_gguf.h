/*
 * sl_gguf.h: the GGUF container (versions 2 and 3, little-endian) and ggml's block dequantisers.
 *
 * Layout (ggml's docs/gguf.md): "GGUF", u32 version, u64 tensor count, u64 key/value count; the
 * key/values (GGUF string key = u64 length + bytes, u32 value type, value; arrays are u32 element
 * type + u64 count + elements, strings and arrays nest); the tensor infos (string name, u32 n_dims,
 * u64 ne[n_dims] fastest dimension first, u32 ggml type, u64 offset relative to the data section);
 * padding to general.alignment (default 32); the data section.
 *
 * sl_gguf_parse validates everything before handing out a pointer: magic, version 2 or 3 (v1 used
 * u32 counts and is refused), counts no larger than the bytes left can hold (checked before any
 * allocation), every value inside the buffer, arrays nested at most 8 deep, unique keys, an
 * alignment that is a power of two, tensor names of at most 64 bytes and unique, 1 to 4 dims,
 * element counts and byte sizes without overflow, ne[0] a multiple of the type's block size,
 * offsets aligned, inside the buffer and not overlapping, known types only (those with a
 * dequantiser below). Violations are SL_EINPUT with one line naming the file and the key or tensor.
 *
 * Dequantisers (ggml-quants.c, dequantize_row_*): F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K. Each does
 * the float32 operations ggml's reference code does, in the same order (d * q, (d * sc) * q,
 * d1 * q - m1); the build's -std=c11 keeps GCC from fusing them into FMAs, so the results are
 * bit-identical to tests/importers/gguf_write.py's numpy dequantisers.
 */
#ifndef SL_GGUF_H
#define SL_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Value types of the key/values. */
enum {
    SL_GGUF_U8 = 0, SL_GGUF_I8 = 1, SL_GGUF_U16 = 2, SL_GGUF_I16 = 3, SL_GGUF_U32 = 4, SL_GGUF_I32 = 5,
    SL_GGUF_F32 = 6, SL_GGUF_BOOL = 7, SL_GGUF_STR = 8, SL_GGUF_ARR = 9, SL_GGUF_U64 = 10, SL_GGUF_I64 = 11,
    SL_GGUF_F64 = 12,
};

/* ggml tensor types speclab reads (ggml.h's enum ggml_type numbers). */
enum {
    SL_GGML_F32 = 0, SL_GGML_F16 = 1, SL_GGML_Q4_0 = 2, SL_GGML_Q8_0 = 8, SL_GGML_Q4_K = 12, SL_GGML_Q6_K = 14,
    SL_GGML_BF16 = 30,
};

#define SL_GGUF_MAX_DIMS 4
#define SL_GGUF_MAX_NAME 64 /* bytes of a tensor name (gguf.md) */

typedef struct {
    char *key;                 /* NUL-terminated copy */
    uint32_t type;             /* SL_GGUF_* */
    uint32_t arr_type;         /* arrays: element type */
    uint64_t n;                /* strings: bytes; arrays: elements */
    const unsigned char *data; /* into the buffer: the scalar, the string's bytes, the first element */
} sl_gguf_kv;

typedef struct {
    char *name;                /* NUL-terminated copy */
    uint32_t type;             /* SL_GGML_* */
    int n_dims;
    uint64_t ne[SL_GGUF_MAX_DIMS]; /* fastest first; unused dims are 1 */
    uint64_t numel;
    uint64_t offset;           /* from the start of the data section */
    size_t nbytes;
    const unsigned char *data; /* into the buffer */
} sl_gguf_tensor;

typedef struct {
    const char *path;          /* borrowed, for messages */
    const unsigned char *buf;  /* the whole file (borrowed) */
    size_t size;
    uint32_t version;
    uint64_t alignment;
    size_t data_start;         /* bytes from buf to the data section */
    size_t n_kv;
    sl_gguf_kv *kv;            /* (n_kv), in file order */
    size_t n_tensors;
    sl_gguf_tensor *tensors;   /* (n_tensors), in file order */
} sl_gguf;

/* Parses buf (size bytes: a mapped file) and validates it; path names it in messages and must
 * outlive *out. On error *out is NULL. */
int sl_gguf_parse(const void *buf, size_t size, const char *path, sl_gguf **out);
void sl_gguf_free(sl_gguf *g);

const sl_gguf_kv *sl_gguf_find_kv(const sl_gguf *g, const char *key);        /* NULL if absent */
const sl_gguf_tensor *sl_gguf_find_tensor(const sl_gguf *g, const char *name); /* NULL if absent */

/* Typed reads: SL_EINPUT naming the key when it is absent (unless a default is given: the *_opt
 * forms leave *out untouched and return SL_OK when absent) or of the wrong type. */
int sl_gguf_get_uint(const sl_gguf *g, const char *key, uint64_t max, uint64_t *out); /* any integer type, 0..max */
int sl_gguf_get_uint_opt(const sl_gguf *g, const char *key, uint64_t max, uint64_t *out);
int sl_gguf_get_float(const sl_gguf *g, const char *key, double *out); /* F32 (see below) or F64 */
int sl_gguf_get_float_opt(const sl_gguf *g, const char *key, double *out);
int sl_gguf_get_bool_opt(const sl_gguf *g, const char *key, int *out);
int sl_gguf_get_str(const sl_gguf *g, const char *key, const char **s, size_t *len); /* not NUL-terminated */
/* An array of elem_type; SL_GGUF_I32 accepts an array of any integer type (read with sl_gguf_arr_int). */
int sl_gguf_get_arr(const sl_gguf *g, const char *key, uint32_t elem_type, const sl_gguf_kv **out);

/* Elements of arrays (validated by the parser): the i-th fixed-size element; and strings in turn:
 * *p starts at kv->data, each call returns one string and advances. */
int64_t sl_gguf_arr_int(const sl_gguf_kv *kv, uint64_t i);
float sl_gguf_arr_f32(const sl_gguf_kv *kv, uint64_t i);
void sl_gguf_next_str(const unsigned char **p, const char **s, size_t *len);

/* A float32 key read back as the shortest decimal that gives the same float32 (1e-05 for the float
 * nearest 1e-5): the value a writer that rounded a double to float32 started from, in the common
 * case of a short decimal. Exact for the float32 itself either way. */
double sl_gguf_f32_to_double(float f);

/* Types: a name ("Q4_K"; "?" for unknown numbers), block elements and block bytes (0 when unknown). */
const char *sl_ggml_type_name(uint32_t type);
size_t sl_ggml_block_elems(uint32_t type);
size_t sl_ggml_block_bytes(uint32_t type);

/* Dequantises n elements (a multiple of the block size) of type from src into dst. */
void sl_ggml_dequant(uint32_t type, const void *src, float *dst /* (n) */, size_t n);

/* ggml's reference Q8_0 quantiser (quantize_row_q8_0_ref): per block of 32, d = max|x| / 127,
 * q = roundf(x * (1/d)) (0 when d = 0), d stored as f16. n a multiple of 32; dst holds n/32*34 bytes. */
void sl_ggml_quant_q8_0(const float *src /* (n) */, void *dst, size_t n);

#endif
