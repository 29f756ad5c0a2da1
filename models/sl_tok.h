/*
 * sl_tok.h: tokenizers of two kinds behind one handle: byte-level BPE (GPT-2 style: encode, decode,
 * load, save and train) and SentencePiece-style BPE (llama's: encode, decode, load, save).
 *
 * ---- byte-bpe ----
 * A token is a byte string. Text is cut into pieces first (special tokens such as
 * <|endoftext|>, then GPT-2's pre-tokenisation regex applied with PCRE2 in UTF + UCP mode), then
 * each piece starts as one token per byte and the merges are applied by rank (lowest first).
 * Any byte string is accepted: maximal runs of bytes that are not valid UTF-8 are cut out before
 * the regex runs and become pieces of their own, so decode(encode(s)) == s for every s, NUL bytes
 * included.
 *
 * JSON form (the `tokenizer` metadata of models/FORMAT.md):
 *   {"type":"byte-bpe","vocab":[...],"merges":["a b",...],"special":{"<|endoftext|>":id}}
 * vocab[id] is the token's bytes written with GPT-2's byte-to-unicode mapping (a special token is
 * written as its own text); merges lists "left right" in rank order, and every merge's result must
 * be in the vocabulary. Parsed with json-c.
 *
 * ---- sp-bpe (models/sl_tok_sp.c) ----
 * JSON form: {"type":"sp-bpe","pieces":[...],"scores":[...],"types":[...],"bos":1,"eos":2,"unk":0,
 *             "add_bos":true,"add_eos":false,"add_dummy_prefix":true,"byte_fallback":true}
 * pieces[id] is the piece text as SentencePiece stores it: U+2581 '▁' stands for a space,
 * "<0xXX>" (upper-case hex) for the byte pieces, "<s>", "</s>", "<unk>" for control/unknown.
 * scores[id] is a float (finite as a float), types[id] SentencePiece's / GGUF's token type:
 * 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. bos, eos, unk are ids or -1.
 * Checked on load (SL_EINPUT, one line, otherwise): every key present with its JSON type (other
 * keys are ignored); pieces, scores and types of equal length >= 1; each piece non-empty, valid
 * UTF-8, distinct from every other; a type-6 piece is "<0xXX>"; bos/eos/unk in [-1, n), bos and
 * eos control pieces (type 3), unk an unknown piece (type 2); add_bos needs bos >= 0 and add_eos
 * eos >= 0; byte_fallback needs all 256 byte pieces, and without it unk must be >= 0 (so that
 * every input can be encoded).
 * Encoding (llama.cpp's SPM tokenizer = llama2.c's run.c encode):
 *   1. empty input: just BOS (add_bos) and EOS (add_eos);
 *   2. otherwise one space is put in front when add_dummy_prefix, and every ' ' becomes '▁';
 *   3. each UTF-8 character becomes the piece of that text (only pieces of type 1 or 4 are
 *      looked up by text); a character without one becomes its bytes' <0xXX> pieces when
 *      byte_fallback, else one unk; an input byte that is not valid UTF-8 becomes its byte piece
 *      (unk if the vocabulary has none), so any byte string encodes; (llama.cpp keeps a character
 *      without a piece as text that may still merge; where every character of a piece is itself
 *      a piece, as SentencePiece trains them, that makes no difference)
 *   4. repeatedly, the adjacent pair whose concatenated text is a piece (of type 1 or 4) with the
 *      highest score is merged, the leftmost pair on equal scores; byte and unk symbols never
 *      merge. (A heap over a linked list, one run between such symbols at a time: O(n log n),
 *      memory bounded by the longest run; sl_tok_encode_ref is run.c's quadratic loop over the
 *      whole text, kept for the tests.) User-defined pieces are not matched as atoms first.
 *   5. BOS first when add_bos, EOS last when add_eos.
 * Decoding concatenates sl_tok_token_bytes of the ids (a piece's text with '▁' -> ' ', a byte
 * piece -> its byte, unknown pieces -> their text), skipping BOS, EOS and control pieces, and then
 * drops one leading space when add_dummy_prefix (the one step 2 added). So decode(encode(s)) == s
 * for every s when byte_fallback is on and '▁' is a piece (as in llama's vocabulary), except that a
 * literal '▁' in s comes back as a space (without a '▁' piece a space falls back to the bytes of
 * '▁' and comes back as those). Decoding treats the ids as a text from its start. Pre-tokenisation
 * and merges do not exist for this kind: sl_tok_n_merges is 0, sl_tok_split gives one piece.
 *
 * Errors: SL_EINPUT with a one-line message for malformed JSON, merges naming unknown tokens, ids
 * out of range; SL_EFAIL for out of memory. Thread safety: a loaded sl_tok is read-only, so
 * several threads may encode and decode with it at once.
 */
#ifndef SL_TOK_H
#define SL_TOK_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_tok sl_tok;

/* Loads a tokenizer from its JSON text (NUL-terminated), of either kind by its "type". */
int sl_tok_from_json(const char *json_text, sl_tok **out);
/* Writes the JSON form; malloc'd, NUL-terminated; NULL (with an error recorded) on failure.
 * from_json(to_json(t)) is the same tokenizer. */
char *sl_tok_to_json(const sl_tok *t);
/* Loads GPT-2's own files: encoder_json and vocab_bpe are file paths (encoder.json maps token to
 * id; vocab.bpe has a "#version" line then one merge per line). "<|endoftext|>", if present in
 * encoder.json, becomes a special token. */
int sl_tok_load_gpt2(const char *encoder_json, const char *vocab_bpe, sl_tok **out);

/* Encodes n bytes; *ids is malloc'd (caller frees), *n_ids its length. Special tokens occurring
 * in the input are emitted as their ids. */
int sl_tok_encode(const sl_tok *t, const char *bytes, size_t n, int32_t **ids, size_t *n_ids);
/* Decodes ids to bytes; *bytes is malloc'd with a NUL after the last byte (not counted in
 * *n_bytes). An id outside [0, vocab_size) is SL_EINPUT. */
int sl_tok_decode(const sl_tok *t, const int32_t *ids, size_t n, char **bytes, size_t *n_bytes);
size_t sl_tok_vocab_size(const sl_tok *t);
void sl_tok_free(sl_tok *t);

/* Id of a special token by its text, or -1 (sp-bpe: a piece of type unknown, control or
 * user-defined, e.g. "<s>"). */
int32_t sl_tok_special_id(const sl_tok *t, const char *text);
/* Bytes of one token (not NUL-terminated); NULL for an id out of range. sp-bpe: the piece as
 * decoded text ('▁' -> ' ', "<0xXX>" -> that byte, control and unknown pieces -> their text). */
const char *sl_tok_token_bytes(const sl_tok *t, int32_t id, size_t *len);
/* Number of merges (0 for sp-bpe, which merges by piece score). */
size_t sl_tok_n_merges(const sl_tok *t);
/* "byte-bpe" or "sp-bpe" (a string literal: still valid after sl_tok_free). */
const char *sl_tok_kind(const sl_tok *t);
/* Begin- and end-of-sequence ids, or -1. byte-bpe: no BOS; EOS is <|endoftext|> if present. */
int32_t sl_tok_bos(const sl_tok *t);
int32_t sl_tok_eos(const sl_tok *t);
/* 1 when a and b have the same size and every id has the same sl_tok_token_bytes in both;
 * else 0 with *first_diff (if not NULL) = the first id that differs, or the smaller size when
 * only the sizes differ. Kinds may differ: only the bytes count. */
int sl_tok_same_vocab(const sl_tok *a, const sl_tok *b, int32_t *first_diff);
/* For tests: sl_tok_encode with the reference merge algorithm everywhere (byte-bpe: GPT-2's
 * pass-by-pass merges for every piece; sp-bpe: llama2.c's quadratic loop over an array). */
int sl_tok_encode_ref(const sl_tok *t, const char *bytes, size_t n, int32_t **ids, size_t *n_ids);

/*
 * Training. Learns merges on the pre-tokenised words of texts[i] (lens[i] bytes each), counted
 * over all texts; <|endoftext|> occurring in a text is a document boundary, not counted.
 * Vocabulary: ids 0..255 are the single bytes (id = byte value), then one id per merge in the
 * order learned, then <|endoftext|> last; vocab_size counts all of them (>= 257).
 * Each step merges the adjacent pair with the highest count (summed over word occurrences, a
 * pair occurring twice in a word counts twice); ties go to the pair with the smaller left id,
 * then the smaller right id. So training is deterministic and uses no random numbers. Training
 * stops early, with a smaller vocabulary, when no pair occurs at least min_count times
 * (min_count >= 1). Texts must be valid UTF-8 (SL_EINPUT naming the text index otherwise).
 */
typedef struct {
    uint64_t min_count; /* smallest pair count worth a merge; 0 means 2 */
    int verbose;        /* progress lines on stderr */
} sl_tok_train_opts;
int sl_tok_train(const char *const *texts, const size_t *lens, size_t n_texts, size_t vocab_size,
                 const sl_tok_train_opts *opts, sl_tok **out);

/* Loads a tokenizer from a file: tokenizer JSON, or a model's .safetensors whose metadata has a
 * `tokenizer` entry (models/FORMAT.md); told apart by the first byte ('{' or whitespace = JSON). */
int sl_tok_load_file(const char *path, sl_tok **out);

/*
 * Token files (models/TOKFILE.md, version 1): magic "SLTOK\0\0\1" (8 bytes), uint32 vocab_size,
 * uint32 bytes per id (2 if vocab_size <= 65536, else 4), uint64 n_tokens, then n_tokens
 * little-endian ids. Written atomically (temporary file + rename).
 */
int sl_tokfile_write(const char *path, const int32_t *ids, size_t n, size_t vocab_size);
/* Reads and checks a token file (magic, version, size, every id < vocab_size); *ids malloc'd. */
int sl_tokfile_read(const char *path, int32_t **ids, size_t *n, size_t *vocab_size);

/* Pre-tokenisation alone: the end offsets of the pieces that encode would merge separately
 * (special tokens, runs of invalid UTF-8, regex matches), in order; t may be NULL, then only
 * <|endoftext|> is special. *ends is malloc'd. sp-bpe: the whole input is one piece. */
int sl_tok_split(const sl_tok *t, const char *bytes, size_t n, size_t **ends, size_t *n_pieces);

/* Validates UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). Returns the
 * length of the longest valid prefix (n when all is valid). */
size_t sl_utf8_valid_prefix(const unsigned char *s, size_t n);
/* Length of the valid UTF-8 character at s (1..4, n >= 1 bytes available), or 0 if the bytes
 * there are not one. */
size_t sl_utf8_char_len(const unsigned char *s, size_t n);

/* For tests (byte-bpe; sp-bpe returns n): applies the merges to one piece of n byte-level ids in
 * place, returning the new length. naive = 1 uses the reference algorithm (GPT-2's: find the lowest-rank pair, merge all
 * its occurrences left to right, repeat), naive = 0 the heap-based one used for long pieces.
 * work must hold 8 * n int32. */
size_t sl_tok_merge_piece(const sl_tok *t, int32_t *syms, size_t n, int naive, int32_t *work);

/* ---- whole files (what `speclab tokenize` does, one call each) ----
 * Messages name the quantity (corpus, in, out, tokenizer, gpt2) and the file. */

/* Opens a tokenizer: exactly one of path (tokenizer JSON or a model file that carries one, as
 * sl_tok_load_file) and gpt2_dir (GPT-2's own DIR/encoder.json and DIR/vocab.bpe). */
int sl_tok_open(const char *path, const char *gpt2_dir, sl_tok **out);
/* Writes the JSON form to path atomically. */
int sl_tok_save(const sl_tok *t, const char *path);

typedef struct {
    const char *const *corpus; /* (n_corpus) paths of UTF-8 text files, none empty */
    size_t n_corpus;
    size_t vocab_size;         /* >= 257 */
    uint64_t min_count;        /* >= 1 (sl_tok_train_opts) */
    int verbose;               /* progress lines on stderr */
} sl_tok_train_files_cfg;
typedef struct {
    sl_tok *tok;         /* the trained tokenizer (owned) */
    size_t corpus_bytes; /* bytes read over all corpus files */
    double train_s;      /* seconds spent in sl_tok_train */
} sl_tok_train_files_result;
/* Reads every corpus file (each must be non-empty, valid UTF-8) and trains on them together. */
int sl_tok_train_files(const sl_tok_train_files_cfg *cfg, sl_tok_train_files_result *res);
void sl_tok_train_files_result_free(sl_tok_train_files_result *res);

typedef struct {
    const char *tokenizer; /* see sl_tok_open */
    const char *gpt2_dir;
    const char *in_path;   /* bytes to encode; NULL: stdin */
    const char *out_path;  /* token file (TOKFILE.md) written atomically; NULL: none */
    int jsonl;             /* every input line is a JSON string, encoded on its own (no out_path) */
} sl_tok_encode_cfg;
typedef struct {
    size_t n_bytes;    /* bytes read */
    size_t vocab_size; /* the tokenizer's */
    int32_t *ids;      /* (n_ids) */
    size_t n_ids;
    size_t n_lines;    /* jsonl: lines encoded; line i is ids[line_end[i-1] .. line_end[i]) */
    size_t *line_end;  /* (n_lines) */
} sl_tok_encode_result;
/* Encodes the input. With jsonl, a line that is not a JSON string fails (SL_EINPUT naming the
 * input and line) and res keeps the lines before it. */
int sl_tok_encode_file(const sl_tok_encode_cfg *cfg, sl_tok_encode_result *res);
void sl_tok_encode_result_free(sl_tok_encode_result *res);

typedef struct {
    const char *tokenizer; /* see sl_tok_open */
    const char *gpt2_dir;
    const char *in_path;   /* a token file, or whitespace/comma-separated ids; NULL: stdin (ids only) */
    const char *out_path;  /* the bytes written here atomically; NULL: only returned */
} sl_tok_decode_cfg;
typedef struct {
    char *bytes; /* (n_bytes) plus a NUL */
    size_t n_bytes;
} sl_tok_decode_result;
/* Decodes a token file (checked, its vocab_size must be the tokenizer's) or text ids. */
int sl_tok_decode_file(const sl_tok_decode_cfg *cfg, sl_tok_decode_result *res);
void sl_tok_decode_result_free(sl_tok_decode_result *res);

/* ---- internal: the sp-bpe half (models/sl_tok_sp.c), reached through the functions above ---- */
struct json_object;
typedef struct sl_tok_sp sl_tok_sp;
int sl_tok_sp_from_json(struct json_object *root, const char *what, sl_tok_sp **out);
char *sl_tok_sp_to_json(const sl_tok_sp *s);
void sl_tok_sp_free(sl_tok_sp *s);
size_t sl_tok_sp_size(const sl_tok_sp *s);
int sl_tok_sp_encode(const sl_tok_sp *s, const char *bytes, size_t n, int naive, int32_t **ids, size_t *n_ids);
int sl_tok_sp_decode(const sl_tok_sp *s, const int32_t *ids, size_t n, char **bytes, size_t *n_bytes);
const char *sl_tok_sp_token_bytes(const sl_tok_sp *s, int32_t id, size_t *len);
int32_t sl_tok_sp_special_id(const sl_tok_sp *s, const char *text);
int32_t sl_tok_sp_bos(const sl_tok_sp *s);
int32_t sl_tok_sp_eos(const sl_tok_sp *s);

#endif
