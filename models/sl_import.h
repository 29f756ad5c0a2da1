/*
 * sl_import.h: one loader interface for every model format speclab opens, and the writers.
 *
 * Every importer turns its format into the native layout (models/FORMAT.md) held in memory as an
 * sl_st_file (models/sl_st.h, "in-memory files"): metadata format = speclab-model, format_version =
 * 1, arch, config (sl_model_config_json), tokenizer (the JSON of models/sl_tok.h, when the source
 * carries one), and source_format / source_dtypes (below); tensors with FORMAT.md's names and
 * shapes in F32, F16 or BF16, pointing into the kept mapping of the source where the bytes are
 * already right, or into converted buffers the file owns. sl_model_open then builds the engine's
 * model from it exactly as from a native file, so every command that takes a model path takes
 * every format.
 *
 * Formats, told apart by content (sl_model_detect), never by the file name:
 *   speclab  a safetensors file whose metadata says format = speclab-model (FORMAT.md)
 *   hf-gpt2  a Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json + merges.txt
 *            or tokenizer.json), or its model.safetensors (the folder is the file's folder)
 *   llama2c  a llama2.c checkpoint: the legacy 7-int header or the versioned one (magic "ak42",
 *            version 1 f32, version 2 Q8_0); its tokenizer.bin is looked for beside the checkpoint
 *            (STEM.tokenizer.bin, then tokenizer.bin); without one the model has no tokenizer
 *   gguf     GGUF v2/v3 (magic "GGUF"), architectures gpt2 and llama, its embedded tokenizer
 *
 * Metadata the importers add (strings, as safetensors requires):
 *   source_format  "hf-gpt2", "llama2c" or "gguf"
 *   source_dtypes  JSON object: the source's tensor type name -> number of tensors stored in it,
 *                  e.g. {"Q8_0": 14, "F32": 5} (what `model info` reports as the file's dtypes)
 *   source_notes   optional free text (e.g. "tokenizer: none found beside the checkpoint")
 *
 * Errors: SL_EINPUT with one line naming the file (and tensor or key) for anything malformed:
 * truncated files, impossible dimensions, sizes whose product overflows, offsets outside the file
 * or overlapping, unknown types, oversized headers; no allocation larger than the file justifies.
 */
#ifndef SL_IMPORT_H
#define SL_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "sl_st.h"

typedef enum {
    SL_FMT_SPECLAB = 0,
    SL_FMT_HF_GPT2 = 1,
    SL_FMT_LLAMA2C = 2,
    SL_FMT_GGUF = 3,
} sl_model_format;

const char *sl_model_format_name(sl_model_format f); /* "speclab", "hf-gpt2", "llama2c", "gguf" */
int sl_model_format_parse(const char *s, sl_model_format *out);

/* Reads the file's first bytes (or a folder's listing) and names its format; SL_EINPUT naming the
 * file when it is none of them. */
int sl_model_detect(const char *path, sl_model_format *out);

/* Opens any model file (or HF folder) as a native-layout file. For speclab files this is
 * sl_st_open itself (n-gram and lookup drafts included). fmt_out may be NULL. */
int sl_model_file_open(const char *path, sl_st_file **out, sl_model_format *fmt_out);

/* sha256 of the file holding a model's weights (64 hex digits; hex has room for 65): the file
 * itself, or a Hugging Face folder's model.safetensors. What logs record to name the weights. */
int sl_model_sha256(const char *path, char *hex);

/* ---- one implementation per format (models/sl_import_*.c) ---- */

/* Each opens path (already detected as its format) into a native-layout file. */
int sl_import_hf_gpt2(const char *path, sl_st_file **out);
int sl_import_llama2c(const char *path, sl_st_file **out);
int sl_import_gguf(const char *path, sl_st_file **out);

/* Content tests used by sl_model_detect: head holds the file's first n bytes (n may be short for
 * a short file), size is the file's size. */
int sl_llama2c_detect(const unsigned char *head, size_t n, uint64_t size);

/* ---- writers ---- */

typedef struct {
    const char *dtype; /* weights' type in the output: "f32", "f16", "bf16", "q8_0"; NULL keeps each
                          tensor's (a format that cannot hold it says so) */
    int version;       /* llama2c: 0 legacy header, 1 (f32), 2 (Q8_0); gguf: 3 (default) or 2 */
    int force;         /* replace an existing output */
} sl_export_opts;

/* Each writes a native-layout file (as sl_model_file_open returns) in its format, atomically.
 * Round trip: sl_model_file_open(written) gives the same tensors bit for bit wherever the output
 * type holds the values exactly. llama2.c's format has no norm_eps or rope_theta field: a model
 * whose values differ from llama2.c's fixed 1e-5 and 10000 is refused. The llama2.c writer also
 * writes OUT_STEM.tokenizer.bin when the model carries a SentencePiece-style tokenizer. */
int sl_export_gguf(const sl_st_file *native, const char *path, const sl_export_opts *o);
int sl_export_llama2c(const sl_st_file *native, const char *path, const sl_export_opts *o);
/* The native format (models/FORMAT.md). */
int sl_export_speclab(const sl_st_file *native, const char *path, const sl_export_opts *o);

/* `speclab model convert IN OUT [--to FORMAT]`: opens IN in any format, writes OUT in fmt. */
int sl_model_convert(const char *in, const char *out, sl_model_format fmt, const sl_export_opts *o);

#endif
