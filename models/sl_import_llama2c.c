/*
 * sl_import_llama2c.c: llama2.c checkpoints and their tokenizer.bin, read into the native layout
 * (models/FORMAT.md, arch llama) and written from it. See sl_import.h.
 *
 * The layouts are those of karpathy/llama2.c's export.py (legacy_export = version 0,
 * version1_export, version2_export), run.c (legacy reader) and runq.c (version 2 reader), all
 * little-endian. Header fields: d = dim, f = hidden_dim, L = n_layers, H = n_heads,
 * K = n_kv_heads, V = vocab_size, S = seq_len; hs = d / H, kvd = K * hs.
 *
 *   version 0 (legacy): 7 int32 (d, f, L, H, K, V, S), V < 0 meaning "separate classifier", then
 *     float32 tensors: token_embedding (V,d); rms_att (L,d); wq (L,d,d); wk (L,kvd,d); wv (L,kvd,d);
 *     wo (L,d,d); rms_ffn (L,d); w1 (L,f,d); w2 (L,d,f); w3 (L,f,d); rms_final (d);
 *     freq_cis_real (S,hs/2); freq_cis_imag (S,hs/2); wcls (V,d) when separate.
 *   version 1: uint32 magic 0x616b3432 ("ak42"), int32 version, the 7 int32 (V > 0), uint8
 *     shared_classifier, zeros to byte 256; then float32: rms_att (L,d); rms_ffn (L,d); rms_final;
 *     token_embedding; wq; wk; wv; wo; w1; w2; w3 (each (L, ...)); wcls when not shared.
 *   version 2: as version 1's header, then int32 group_size GS at byte 37, zeros to byte 256; the
 *     norms as version 1 in float32; then each of token_embedding, wq[0..L), wk[..], wv[..], wo[..],
 *     w1[..], w2[..], w3[..], wcls (when not shared) as Q8_0: its n int8 values, then n/GS float32
 *     scales (value = q * scale, runq.c's dequantize). (An early export.py wrote all int8 values
 *     first and all scales after them; runq.c and today's export.py interleave per tensor, as read
 *     here. The two have the same size and cannot be told apart.)
 *
 * Native names: tok_emb, layers.i.{attn_norm, attn.q/k/v/o, mlp_norm, mlp.gate = w1, mlp.down = w2,
 * mlp.up = w3}, final_norm, lm_head (when separate). No row permutation: run.c rotates adjacent
 * pairs (2j, 2j+1) with theta 10000, exactly the native RoPE. llama2.c's format holds neither
 * norm_eps nor rope_theta: they are run.c's fixed 1e-5 and 10000. The legacy file's freq_cis tables
 * are not used (the engine computes its own), but they are checked against theta 10000, so that a
 * file written with another theta is refused rather than run wrongly (see check_freq_cis).
 *
 * Every size comes from the header and is checked (overflow-safe) to add up to exactly the file's
 * size before anything proportional to it is allocated.
 *
 * tokenizer.bin (tokenizer.py): int32 max_token_length, then per token float32 score, int32 len,
 * len bytes; as many tokens as the model's vocabulary (the file does not say). Pieces are
 * SentencePiece's with U+2581 written as ' ', BOS and EOS as "\n<s>\n" and "\n</s>\n"; byte pieces
 * stay "<0xXX>" (today's tokenizer.py and the shipped tokenizer.bin) or, from one earlier
 * tokenizer.py, are the characters chr(0..255) at ids 3..258 (recognised when all 256 are there).
 * Read into the sp-bpe JSON form of sl_tok.h, and written back from it.
 */
#include "sl_import.h"

#include <errno.h>
#include <fcntl.h>
#include <json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_kern.h"
#include "sl_model.h"
#include "sl_tok.h"

#define L2C_MAGIC 0x616b3432u
#define L2C_HEADER_V12 256
#define L2C_HEADER_V0 28

/* ---- the header and the layout it implies ---- */

typedef struct {
    int version;   /* 0 legacy, 1, 2 */
    int64_t d, f, L, H, K, V, S; /* V made positive */
    int shared;    /* classifier = token embedding */
    int64_t gs;    /* version 2: group size */
    uint64_t header_bytes;
} l2c_header;

static uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t rd_i32(const unsigned char *p)
{
    uint32_t u = rd_u32(p);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

static void wr_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The tensor groups of a checkpoint, in the order each version stores them. */
enum { G_EMB, G_ATT_NORM, G_WQ, G_WK, G_WV, G_WO, G_FFN_NORM, G_W1, G_W2, G_W3, G_FINAL, G_FREQ, G_WCLS };
static const int ORDER_V0[] = {G_EMB, G_ATT_NORM, G_WQ, G_WK, G_WV, G_WO, G_FFN_NORM,
                               G_W1,  G_W2,       G_W3, G_FINAL, G_FREQ, G_WCLS};
static const int ORDER_V12[] = {G_ATT_NORM, G_FFN_NORM, G_FINAL, G_EMB, G_WQ, G_WK,
                                G_WV,       G_WO,       G_W1,    G_W2,  G_W3, G_WCLS};

typedef struct {
    const char *name; /* native name (printf with the layer) */
    int per_layer;
    int ndim;
    int64_t rows, cols; /* shape; cols unused when ndim == 1 */
    int quantised;      /* version 2 stores it as Q8_0 */
} l2c_group;

static l2c_group group_info(const l2c_header *h, int g)
{
    const int64_t hs = h->d / h->H, kvd = h->K * hs;
    switch (g) {
    case G_EMB: return (l2c_group){"tok_emb.weight", 0, 2, h->V, h->d, 1};
    case G_ATT_NORM: return (l2c_group){"layers.%d.attn_norm.weight", 1, 1, h->d, 1, 0};
    case G_WQ: return (l2c_group){"layers.%d.attn.q.weight", 1, 2, h->d, h->d, 1};
    case G_WK: return (l2c_group){"layers.%d.attn.k.weight", 1, 2, kvd, h->d, 1};
    case G_WV: return (l2c_group){"layers.%d.attn.v.weight", 1, 2, kvd, h->d, 1};
    case G_WO: return (l2c_group){"layers.%d.attn.o.weight", 1, 2, h->d, h->d, 1};
    case G_FFN_NORM: return (l2c_group){"layers.%d.mlp_norm.weight", 1, 1, h->d, 1, 0};
    case G_W1: return (l2c_group){"layers.%d.mlp.gate.weight", 1, 2, h->f, h->d, 1};
    case G_W2: return (l2c_group){"layers.%d.mlp.down.weight", 1, 2, h->d, h->f, 1};
    case G_W3: return (l2c_group){"layers.%d.mlp.up.weight", 1, 2, h->f, h->d, 1};
    case G_FINAL: return (l2c_group){"final_norm.weight", 0, 1, h->d, 1, 0};
    case G_FREQ: return (l2c_group){"freq_cis", 0, 2, 2 * h->S, hs / 2, 0}; /* real then imaginary */
    default: return (l2c_group){"lm_head.weight", 0, 2, h->V, h->d, 1};
    }
}

static const int *group_order(const l2c_header *h, size_t *n)
{
    if (h->version == 0) {
        *n = sizeof ORDER_V0 / sizeof *ORDER_V0;
        return ORDER_V0;
    }
    *n = sizeof ORDER_V12 / sizeof *ORDER_V12;
    return ORDER_V12;
}

static int group_present(const l2c_header *h, int g)
{
    return g == G_WCLS ? !h->shared : 1;
}

/* Bytes one tensor of the group takes in the file; 0 on overflow (no tensor is empty: every size
 * is >= 1). */
static uint64_t group_tensor_bytes(const l2c_header *h, const l2c_group *gi)
{
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)gi->rows, (uint64_t)gi->cols, &n)) return 0;
    if (h->version == 2 && gi->quantised) {
        if (n % (uint64_t)h->gs) return 0;
        uint64_t s;
        if (__builtin_mul_overflow(n / (uint64_t)h->gs, (uint64_t)4, &s) || __builtin_add_overflow(n, s, &n)) return 0;
        return n;
    }
    if (__builtin_mul_overflow(n, (uint64_t)4, &n)) return 0;
    return n;
}

/* The file size the header implies; 0 when it overflows 64 bits (or a Q8_0 tensor's size is not a
 * multiple of the group size). */
static uint64_t implied_size(const l2c_header *h)
{
    size_t n_order;
    const int *order = group_order(h, &n_order);
    uint64_t total = h->header_bytes;
    for (size_t i = 0; i < n_order; i++) {
        if (!group_present(h, order[i])) continue;
        l2c_group gi = group_info(h, order[i]);
        if (gi.rows == 0 || gi.cols == 0) continue; /* freq_cis of a head_size 1 model: empty */
        uint64_t b = group_tensor_bytes(h, &gi), all;
        if (!b) return 0;
        if (__builtin_mul_overflow(b, gi.per_layer ? (uint64_t)h->L : 1, &all) || __builtin_add_overflow(total, all, &total))
            return 0;
    }
    return total;
}

/* The seven int32 at p into h; 1 when plausible: sizes positive (vocab's sign aside), H divides d,
 * K divides H. */
static int read_config(const unsigned char *p, l2c_header *h, int32_t *vocab_raw)
{
    int32_t v[7];
    for (int i = 0; i < 7; i++) v[i] = rd_i32(p + 4 * i);
    *vocab_raw = v[5];
    h->d = v[0], h->f = v[1], h->L = v[2], h->H = v[3], h->K = v[4], h->S = v[6];
    h->V = v[5] < 0 ? -(int64_t)v[5] : v[5];
    return h->d > 0 && h->f > 0 && h->L > 0 && h->H > 0 && h->K > 0 && h->V > 0 && h->S > 0 && h->d % h->H == 0 &&
           h->H % h->K == 0;
}

int sl_llama2c_detect(const unsigned char *head, size_t n, uint64_t size)
{
    /* The magic alone names the format: the importer then says which versions it reads. */
    if (n >= 4 && rd_u32(head) == L2C_MAGIC) return 1;
    if (n < L2C_HEADER_V0) return 0;
    l2c_header h = {.version = 0, .header_bytes = L2C_HEADER_V0};
    int32_t vraw;
    if (!read_config(head, &h, &vraw)) return 0;
    h.shared = vraw > 0;
    uint64_t want = implied_size(&h);
    return want != 0 && want == size;
}

/* Parses and checks the header of a mapped checkpoint (bytes of it). */
static int parse_header(const char *path, const unsigned char *b, size_t bytes, l2c_header *h)
{
    memset(h, 0, sizeof *h);
    int32_t vraw;
    if (bytes >= 4 && rd_u32(b) == L2C_MAGIC) {
        if (bytes < 8)
            return sl_fail(SL_EINPUT, "%s: llama2.c header is truncated (%zu bytes, expected 256)", path, bytes);
        h->version = rd_i32(b + 4);
        if (h->version != 1 && h->version != 2)
            return sl_fail(SL_EINPUT, "%s: llama2.c checkpoint version %d is not supported (expected 1 or 2)", path,
                           h->version);
        if (bytes < L2C_HEADER_V12)
            return sl_fail(SL_EINPUT, "%s: llama2.c version %d header is truncated (%zu bytes, expected 256)", path,
                           h->version, bytes);
        h->header_bytes = L2C_HEADER_V12;
        read_config(b + 8, h, &vraw);
        if (vraw <= 0)
            return sl_fail(SL_EINPUT, "%s: header vocab_size %d: expected > 0 in a version %d checkpoint", path, vraw,
                           h->version);
        unsigned sc = b[36];
        if (sc > 1) return sl_fail(SL_EINPUT, "%s: header shared_classifier byte is %u (expected 0 or 1)", path, sc);
        h->shared = (int)sc;
        if (h->version == 2) {
            h->gs = rd_i32(b + 37);
            if (h->gs <= 0) return sl_fail(SL_EINPUT, "%s: header group_size %lld: expected > 0", path, (long long)h->gs);
        }
    } else {
        if (bytes < L2C_HEADER_V0) return sl_fail(SL_EINPUT, "%s: too short for a llama2.c checkpoint", path);
        h->version = 0;
        h->header_bytes = L2C_HEADER_V0;
        read_config(b, h, &vraw);
        h->shared = vraw > 0;
    }
    const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    const int64_t vals[7] = {h->d, h->f, h->L, h->H, h->K, h->V, h->S};
    for (int i = 0; i < 7; i++)
        if (vals[i] <= 0)
            return sl_fail(SL_EINPUT, "%s: header %s = %lld: expected > 0", path, names[i], (long long)vals[i]);
    if (h->d % h->H)
        return sl_fail(SL_EINPUT, "%s: header n_heads = %lld does not divide dim = %lld", path, (long long)h->H,
                       (long long)h->d);
    if (h->H % h->K)
        return sl_fail(SL_EINPUT, "%s: header n_kv_heads = %lld does not divide n_heads = %lld", path, (long long)h->K,
                       (long long)h->H);
    if ((h->d / h->H) % 2)
        return sl_fail(SL_EINPUT, "%s: head size dim / n_heads = %lld is odd (RoPE rotates pairs)", path,
                       (long long)(h->d / h->H));
    if (h->version == 2) /* sizes < 2^31 each: a product of two fits int64 */
        for (int g = G_EMB; g <= G_WCLS; g++) {
            l2c_group gi = group_info(h, g);
            if (gi.quantised && gi.rows * gi.cols % h->gs)
                return sl_fail(SL_EINPUT, "%s: header group_size %lld does not divide the size of %s (%lld values)", path,
                               (long long)h->gs, g == G_EMB || g == G_WCLS ? gi.name : gi.name + 10,
                               (long long)(gi.rows * gi.cols));
        }
    uint64_t want = implied_size(h);
    if (!want)
        return sl_fail(SL_EINPUT, "%s: the header's sizes (dim %lld, hidden_dim %lld, n_layers %lld, vocab_size %lld%s) "
                       "overflow or do not fit the group size",
                       path, (long long)h->d, (long long)h->f, (long long)h->L, (long long)h->V,
                       h->version == 2 ? ", group_size" : "");
    if (want != (uint64_t)bytes)
        return sl_fail(SL_EINPUT, "%s: llama2.c version %d checkpoint: the header implies %llu bytes, the file has %zu%s",
                       path, h->version, (unsigned long long)want, bytes,
                       want > bytes ? " (truncated?)" : "");
    return SL_OK;
}

/* The legacy freq_cis tables (cos and sin of p * 10000^(-2j/hs), p < S, j < hs/2, float32 as
 * model.py computes them) against the same values in double. The tolerance allows float32
 * arithmetic on the angle (relative error a few 1e-7, so an absolute error growing with p * freq)
 * plus rounding of the result; a file made with another theta differs by far more (theta 500000
 * instead of 10000 moves the cosine at position 1, pair 1, by 0.03 to 0.06 for head sizes 16 to 64). */
static int check_freq_cis(const char *path, const l2c_header *h, const unsigned char *p)
{
    const int64_t hs = h->d / h->H, half = hs / 2;
    for (int64_t t = 0; t < 2; t++)
        for (int64_t pos = 0; pos < h->S; pos++)
            for (int64_t j = 0; j < half; j++) {
                float got;
                memcpy(&got, p + 4 * ((t * h->S + pos) * half + j), 4);
                double a = (double)pos * pow(10000.0, -2.0 * (double)j / (double)hs);
                double want = t == 0 ? cos(a) : sin(a);
                if (!(fabs((double)got - want) <= 1e-5 + 2e-6 * a))
                    return sl_fail(SL_EINPUT, "%s: freq_cis_%s[%lld][%lld] = %g, RoPE with theta 10000 gives %g: the "
                                   "checkpoint was not written with llama2.c's RoPE (theta 10000), which its format implies",
                                   path, t ? "imag" : "real", (long long)pos, (long long)j, (double)got, want);
            }
    return SL_OK;
}

/* ---- tokenizer.bin -> sp-bpe JSON ---- */

/* STEM.tokenizer.bin for path STEM.EXT (or PATH.tokenizer.bin when the file name has no
 * extension); malloc'd. */
static char *sidecar_path(const char *path)
{
    const char *base = sl_path_base(path), *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - path) : strlen(path);
    char *s = sl_malloc(stem + 16);
    if (s) {
        memcpy(s, path, stem);
        strcpy(s + stem, ".tokenizer.bin");
    }
    return s;
}

/* DIR/tokenizer.bin for path DIR/FILE; malloc'd. */
static char *folder_tokenizer_path(const char *path)
{
    size_t dir = (size_t)(sl_path_base(path) - path);
    char *s = sl_malloc(dir + 16);
    if (s) {
        memcpy(s, path, dir);
        strcpy(s + dir, "tokenizer.bin");
    }
    return s;
}

static int is_byte_piece(const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF"; /* SentencePiece writes <0x%02X> */
    return n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* The UTF-8 bytes of code point c < 256 (chr(c) in Python); returns their count. */
static size_t utf8_latin1(unsigned c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | c >> 6);
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

typedef struct {
    const char *s; /* into the file's bytes */
    size_t n;
    float score;
} raw_token;

/* Reads tokenizer.bin at tpath (vocab tokens) into the sp-bpe JSON (*json_out, malloc'd). own names
 * the checkpoint's own tokenizer file, for the messages about a file made for another vocabulary. */
static int read_tokenizer(const char *tpath, size_t vocab, const char *own, char **json_out)
{
    *json_out = NULL;
    char *buf = NULL;
    size_t len = 0;
    int rc = sl_read_file(tpath, "tokenizer", &buf, &len);
    if (rc) return rc;
    const unsigned char *b = (const unsigned char *)buf;
    raw_token *tok = NULL;
    json_object *root = NULL;
    if (len < 4) {
        rc = sl_fail(SL_EINPUT, "%s: truncated (%zu bytes; a tokenizer.bin starts with an int32 max_token_length)", tpath,
                     len);
        goto done;
    }
    int32_t max_len = rd_i32(b);
    if (max_len < 0) {
        rc = sl_fail(SL_EINPUT, "%s: max_token_length %d is negative", tpath, max_len);
        goto done;
    }
    /* Each token takes at least 8 bytes: the count is bounded by the file before allocating. */
    if (vocab > (len - 4) / 8) {
        rc = sl_fail(SL_EINPUT, "%s: truncated: %zu bytes cannot hold the model's %zu tokens (8 bytes each at least; "
                     "the checkpoint's own tokenizer goes in %s)", tpath, len, vocab, own);
        goto done;
    }
    tok = sl_malloc(vocab * sizeof *tok);
    if (!tok) {
        rc = SL_EFAIL;
        goto done;
    }
    size_t off = 4, longest = 0;
    for (size_t i = 0; i < vocab; i++) {
        if (len - off < 8) {
            rc = sl_fail(SL_EINPUT, "%s: truncated at token %zu of the model's %zu (the checkpoint's own tokenizer goes "
                         "in %s)", tpath, i, vocab, own);
            goto done;
        }
        memcpy(&tok[i].score, b + off, 4);
        int32_t n = rd_i32(b + off + 4);
        off += 8;
        if (n < 0 || n > max_len) {
            rc = sl_fail(SL_EINPUT, "%s: token %zu has length %d (expected 0..max_token_length = %d)", tpath, i, n,
                         max_len);
            goto done;
        }
        if ((size_t)n > len - off) {
            rc = sl_fail(SL_EINPUT, "%s: token %zu (length %d) runs past the end of the file", tpath, i, n);
            goto done;
        }
        if (!isfinite(tok[i].score)) {
            rc = sl_fail(SL_EINPUT, "%s: token %zu has a score that is not finite", tpath, i);
            goto done;
        }
        tok[i].s = buf + off;
        tok[i].n = (size_t)n;
        off += (size_t)n;
        if ((size_t)n > longest) longest = (size_t)n;
    }
    if (off != len) {
        rc = sl_fail(SL_EINPUT, "%s: %zu bytes follow the model's %zu tokens: the tokenizer is for a larger vocabulary "
                     "(the checkpoint's own tokenizer goes in %s)", tpath, len - off, vocab, own);
        goto done;
    }
    /* One earlier tokenizer.py wrote byte piece <0xXX> as the character chr(XX): recognised when
     * ids 3..258 hold exactly chr(0)..chr(255). */
    int chr_bytes = vocab >= 259;
    for (unsigned c = 0; c < 256 && chr_bytes; c++) {
        char u[2];
        size_t un = utf8_latin1(c, u);
        chr_bytes = tok[3 + c].n == un && !memcmp(tok[3 + c].s, u, un);
    }
    root = json_object_new_object();
    json_object *pieces = json_object_new_array_ext((int)vocab), *scores = json_object_new_array_ext((int)vocab),
                *types = json_object_new_array_ext((int)vocab);
    json_object_object_add(root, "type", json_object_new_string("sp-bpe"));
    json_object_object_add(root, "pieces", pieces);
    json_object_object_add(root, "scores", scores);
    json_object_object_add(root, "types", types);
    char *piece = sl_malloc(3 * longest + 16); /* each byte becomes at most 3 */
    if (!piece) {
        rc = SL_EFAIL;
        goto done;
    }
    int64_t bos = -1, eos = -1, unk = -1;
    size_t n_byte_pieces = 0;
    for (size_t i = 0; i < vocab && !rc; i++) {
        const char *s = tok[i].s;
        size_t n = tok[i].n, k = 0;
        int type = 1;
        if (chr_bytes && i >= 3 && i < 259) {
            k = (size_t)snprintf(piece, 16, "<0x%02X>", (unsigned)(i - 3));
            type = 6;
        } else if (n == 5 && !memcmp(s, "\n<s>\n", 5)) {
            k = (size_t)snprintf(piece, 16, "<s>");
            type = 3;
            if (bos < 0) bos = (int64_t)i;
        } else if (n == 6 && !memcmp(s, "\n</s>\n", 6)) {
            k = (size_t)snprintf(piece, 16, "</s>");
            type = 3;
            if (eos < 0) eos = (int64_t)i;
        } else {
            if (n == 0) {
                rc = sl_fail(SL_EINPUT, "%s: token %zu is empty", tpath, i);
                break;
            }
            if (sl_utf8_valid_prefix((const unsigned char *)s, n) != n || memchr(s, 0, n)) {
                rc = sl_fail(SL_EINPUT, "%s: token %zu is not valid UTF-8 text (a piece must be)", tpath, i);
                break;
            }
            for (size_t j = 0; j < n; j++) {
                if (s[j] == ' ') {
                    memcpy(piece + k, "\xe2\x96\x81", 3); /* U+2581, SentencePiece's space */
                    k += 3;
                } else
                    piece[k++] = s[j];
            }
            if (is_byte_piece(s, n)) type = 6;
            else if (n == 5 && !memcmp(s, "<unk>", 5)) {
                type = 2;
                if (unk < 0) unk = (int64_t)i;
            }
        }
        if (type == 6) n_byte_pieces++;
        json_object_array_add(pieces, json_object_new_string_len(piece, (int)k));
        json_object_array_add(scores, json_object_new_double((double)tok[i].score));
        json_object_array_add(types, json_object_new_int(type));
    }
    free(piece);
    if (rc) goto done;
    json_object_object_add(root, "bos", json_object_new_int64(bos));
    json_object_object_add(root, "eos", json_object_new_int64(eos));
    json_object_object_add(root, "unk", json_object_new_int64(unk));
    json_object_object_add(root, "add_bos", json_object_new_boolean(bos >= 0)); /* run.c: BOS first */
    json_object_object_add(root, "add_eos", json_object_new_boolean(0));
    json_object_object_add(root, "add_dummy_prefix", json_object_new_boolean(1));
    json_object_object_add(root, "byte_fallback", json_object_new_boolean(n_byte_pieces >= 256));
    const char *js = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    size_t jl = strlen(js);
    if (!(*json_out = sl_malloc(jl + 1))) rc = SL_EFAIL;
    else memcpy(*json_out, js, jl + 1);
done:
    json_object_put(root);
    free(tok);
    free(buf);
    return rc;
}

/* ---- import ---- */

static int add_meta(sl_st_file *f, const l2c_header *h, const char *tok_json, const char *notes, size_t n_f32,
                    size_t n_q8)
{
    sl_model_config c = {.vocab_size = (size_t)h->V, .n_layer = (size_t)h->L, .n_head = (size_t)h->H,
                         .n_kv_head = (size_t)h->K, .d_model = (size_t)h->d, .d_ff = (size_t)h->f,
                         .max_seq_len = (size_t)h->S, .norm_eps = 1e-5, .rope_theta = 10000.0,
                         .tied_embeddings = h->shared};
    char *cfg = sl_model_config_json(&c, SL_ARCH_LLAMA);
    if (!cfg) return SL_EFAIL;
    char dtypes[96];
    if (n_q8) snprintf(dtypes, sizeof dtypes, "{\"Q8_0\": %zu, \"F32\": %zu}", n_q8, n_f32);
    else snprintf(dtypes, sizeof dtypes, "{\"F32\": %zu}", n_f32);
    int rc = sl_st_mem_meta(f, "format", "speclab-model");
    if (!rc) rc = sl_st_mem_meta(f, "format_version", "1");
    if (!rc) rc = sl_st_mem_meta(f, "arch", "llama");
    if (!rc) rc = sl_st_mem_meta(f, "config", cfg);
    if (!rc && tok_json) rc = sl_st_mem_meta(f, "tokenizer", tok_json);
    if (!rc) rc = sl_st_mem_meta(f, "source_format", "llama2c");
    if (!rc) rc = sl_st_mem_meta(f, "source_dtypes", dtypes);
    if (!rc) rc = sl_st_mem_meta(f, "source_notes", notes);
    free(cfg);
    return rc;
}

/* Finds and reads the tokenizer beside path; *json NULL (and a note) when there is none. */
static int find_tokenizer(const char *path, size_t vocab, char **json, char *note, size_t note_cap)
{
    *json = NULL;
    char *cand[2] = {sidecar_path(path), folder_tokenizer_path(path)};
    int rc = cand[0] && cand[1] ? SL_OK : SL_EFAIL;
    int found = 0;
    for (int k = 0; k < 2 && !rc && !found; k++) {
        struct stat st;
        if (!strcmp(cand[k], path) || stat(cand[k], &st) != 0 || !S_ISREG(st.st_mode)) continue;
        found = 1;
        rc = read_tokenizer(cand[k], vocab, sl_path_base(cand[0]), json);
        if (!rc) snprintf(note, note_cap, "tokenizer: %s", sl_path_base(cand[k]));
    }
    if (!rc && !found)
        snprintf(note, note_cap, "tokenizer: none found beside the checkpoint (looked for %s and %s)",
                 sl_path_base(cand[0]), sl_path_base(cand[1]));
    free(cand[0]);
    free(cand[1]);
    return rc;
}

int sl_import_llama2c(const char *path, sl_st_file **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sl_fail(SL_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return sl_fail(SL_EINPUT, "%s: not a regular, non-empty file", path);
    }
    size_t bytes = (size_t)st.st_size;
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return sl_fail(SL_EINPUT, "%s: cannot map: %s", path, strerror(errno));
    const unsigned char *b = map;
    l2c_header h;
    sl_st_file *f = NULL;
    char *tok_json = NULL;
    int rc = parse_header(path, b, bytes, &h);
    if (rc || (rc = sl_st_mem_new(path, &f))) {
        munmap(map, bytes);
        return rc;
    }
    sl_st_mem_keep_map(f, map, bytes);
    size_t n_order, n_f32 = 0, n_q8 = 0;
    const int *order = group_order(&h, &n_order);
    uint64_t off = h.header_bytes;
    char name[64];
    for (size_t gi_k = 0; gi_k < n_order && !rc; gi_k++) {
        int g = order[gi_k];
        if (!group_present(&h, g)) continue;
        l2c_group gi = group_info(&h, g);
        uint64_t tb = group_tensor_bytes(&h, &gi);
        if (g == G_FREQ) {
            if (gi.cols > 0) rc = check_freq_cis(path, &h, b + off);
            off += tb;
            continue;
        }
        int64_t shape[2] = {gi.rows, gi.cols};
        size_t numel = (size_t)gi.rows * (size_t)gi.cols;
        for (int64_t l = 0; l < (gi.per_layer ? h.L : 1) && !rc; l++) {
            snprintf(name, sizeof name, gi.name, (int)l);
            const void *data = b + off;
            if (h.version == 2 && gi.quantised) {
                float *w = sl_malloc_aligned(numel * sizeof *w);
                if (!w || (rc = sl_st_mem_own(f, w))) {
                    rc = SL_EFAIL;
                    break;
                }
                const int8_t *q = (const int8_t *)(b + off);
                const unsigned char *sc = b + off + numel;
                const size_t gs = (size_t)h.gs, n_groups = numel / gs;
                /* runq.c's dequantize; the groups are independent, so threads give the same bytes. */
#pragma omp parallel for schedule(static) if (numel >= (1u << 20))
                for (size_t gk = 0; gk < n_groups; gk++) {
                    float s;
                    memcpy(&s, sc + 4 * gk, 4);
                    for (size_t i = gk * gs; i < (gk + 1) * gs; i++) w[i] = (float)q[i] * s;
                }
                data = w;
                n_q8++;
            } else
                n_f32++;
            rc = sl_st_mem_add(f, name, SL_DT_F32, gi.ndim, shape, data);
            off += tb;
        }
    }
    char note[600] = "";
    if (!rc) rc = find_tokenizer(path, (size_t)h.V, &tok_json, note, sizeof note);
    if (!rc) {
        char notes[800];
        snprintf(notes, sizeof notes, "llama2.c %s checkpoint%s; norm_eps 1e-5 and rope_theta 10000 are llama2.c's fixed values; %s",
                 h.version == 0 ? "legacy (version 0)" : h.version == 1 ? "version 1 (float32)" : "version 2 (Q8_0)",
                 h.version == 0 ? " (its freq_cis tables checked against theta 10000, then skipped)" : "", note);
        rc = add_meta(f, &h, tok_json, notes, n_f32, n_q8);
    }
    free(tok_json);
    if (rc) {
        sl_st_close(f);
        return rc;
    }
    *out = f;
    return SL_OK;
}

/* ---- export ---- */

/* sp-bpe JSON -> tokenizer.bin bytes (*out, *n; malloc'd); *out NULL when the tokenizer is of
 * another kind (byte-bpe cannot be expressed). */
static int tokenizer_bin(const char *path, const char *tok_json, size_t vocab, unsigned char **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    json_object *root = json_tokener_parse(tok_json), *type = NULL, *pieces = NULL, *scores = NULL, *v;
    if (!root || !json_object_object_get_ex(root, "type", &type)) {
        json_object_put(root);
        return sl_fail(SL_EINPUT, "%s: the model's tokenizer metadata is not a tokenizer JSON", path);
    }
    if (strcmp(json_object_get_string(type), "sp-bpe")) {
        json_object_put(root);
        return SL_OK;
    }
    int rc = SL_OK;
    if (!json_object_object_get_ex(root, "pieces", &pieces) || !json_object_is_type(pieces, json_type_array) ||
        !json_object_object_get_ex(root, "scores", &scores) || !json_object_is_type(scores, json_type_array) ||
        json_object_array_length(pieces) != vocab || json_object_array_length(scores) != vocab) {
        json_object_put(root);
        return sl_fail(SL_EINPUT, "%s: the tokenizer's pieces and scores must be %zu each (the model's vocabulary): "
                       "tokenizer.bin holds exactly vocab_size tokens", path, vocab);
    }
    int64_t bos = -1, eos = -1;
    if (json_object_object_get_ex(root, "bos", &v)) bos = json_object_get_int64(v);
    if (json_object_object_get_ex(root, "eos", &v)) eos = json_object_get_int64(v);
    /* Sizes: the replaced text is never longer than the piece (3-byte U+2581 -> 1 byte), BOS/EOS
     * are 6 bytes at most. */
    size_t total = 4, max_len = 0;
    for (size_t i = 0; i < vocab; i++) {
        json_object *p = json_object_array_get_idx(pieces, i);
        if (!json_object_is_type(p, json_type_string)) {
            json_object_put(root);
            return sl_fail(SL_EINPUT, "%s: tokenizer piece %zu is not a string", path, i);
        }
        total += 8 + (size_t)json_object_get_string_len(p) + 6;
    }
    unsigned char *buf = sl_malloc(total);
    if (!buf) {
        json_object_put(root);
        return SL_EFAIL;
    }
    size_t off = 4;
    for (size_t i = 0; i < vocab; i++) {
        json_object *p = json_object_array_get_idx(pieces, i);
        const char *s = json_object_get_string(p);
        size_t n = (size_t)json_object_get_string_len(p), k = 0;
        unsigned char *dst = buf + off + 8;
        if ((int64_t)i == bos) memcpy(dst, "\n<s>\n", k = 5);
        else if ((int64_t)i == eos) memcpy(dst, "\n</s>\n", k = 6);
        else
            for (size_t j = 0; j < n; j++) {
                if (j + 3 <= n && !memcmp(s + j, "\xe2\x96\x81", 3)) {
                    dst[k++] = ' ';
                    j += 2;
                } else
                    dst[k++] = (unsigned char)s[j];
            }
        float score = (float)json_object_get_double(json_object_array_get_idx(scores, i));
        memcpy(buf + off, &score, 4);
        wr_u32(buf + off + 4, (uint32_t)k);
        off += 8 + k;
        if (k > max_len) max_len = k;
    }
    if (max_len > INT32_MAX) rc = sl_fail(SL_EINPUT, "%s: a tokenizer piece is too long", path);
    wr_u32(buf, (uint32_t)max_len);
    json_object_put(root);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *n_out = off;
    return SL_OK;
}

static int write_all(sl_atomic_file *af, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, af->f) == n ? SL_OK : SL_EFAIL;
}

/* Q8_0 as export.py's quantize_q80: per group of gs, scale = max|w| / 127 (float32), q =
 * round-half-even(w / scale) (torch.round); a group of zeros gets scale 0 and q = 0 (export.py would
 * divide 0 by 0 there). */
static int quantise_q80(const float *w, size_t n, size_t gs, int8_t *q, float *s)
{
    for (size_t g = 0; g < n / gs; g++) {
        float wmax = 0;
        for (size_t i = g * gs; i < (g + 1) * gs; i++) {
            if (!isfinite(w[i])) return SL_EINPUT;
            wmax = fmaxf(wmax, fabsf(w[i]));
        }
        float scale = wmax / 127.0f;
        s[g] = scale;
        /* |w / scale| <= 127 up to one rounding, except where scale is subnormal (imprecise): clamped
         * there, so the cast stays in range. */
        for (size_t i = g * gs; i < (g + 1) * gs; i++)
            q[i] = scale > 0 ? (int8_t)fminf(127.0f, fmaxf(-127.0f, nearbyintf(w[i] / scale))) : 0;
    }
    return SL_OK;
}

int sl_export_llama2c(const sl_st_file *native, const char *path, const sl_export_opts *o)
{
    sl_export_opts dflt = {0};
    if (!o) o = &dflt;
    const char *arch = sl_st_meta(native, "arch"), *cfg_json = sl_st_meta(native, "config");
    if (!arch || strcmp(arch, "llama"))
        return sl_fail(SL_EINPUT, "%s: llama2.c holds only llama models; this one is '%s' (write speclab or gguf)", path,
                       arch ? arch : "?");
    if (!cfg_json) return sl_fail(SL_EINPUT, "%s: the model has no config", native->path);
    sl_model_config c;
    int rc = sl_model_config_parse(cfg_json, SL_ARCH_LLAMA, native->path, &c);
    if (rc) return rc;
    if (c.norm_eps != 1e-5 || c.rope_theta != 10000.0)
        return sl_fail(SL_EINPUT, "%s: llama2.c's format has no norm_eps or rope_theta field (its programs use 1e-5 and "
                       "10000); this model has norm_eps %g and rope_theta %g", path, c.norm_eps, c.rope_theta);
    int version = o->version;
    if (o->dtype && !strcasecmp(o->dtype, "q8_0") && version == 0) version = 2;
    if (version < 0 || version > 2)
        return sl_fail(SL_EINPUT, "%s: llama2.c version %d: expected 0 (legacy), 1 or 2", path, version);
    if (o->dtype && strcasecmp(o->dtype, version == 2 ? "q8_0" : "f32"))
        return sl_fail(SL_EINPUT, "%s: llama2.c version %d stores %s, not %s", path, version,
                       version == 2 ? "q8_0" : "f32", o->dtype);
    const size_t cv[7] = {c.d_model, c.d_ff, c.n_layer, c.n_head, c.n_kv_head, c.vocab_size, c.max_seq_len};
    for (int i = 0; i < 7; i++)
        if (cv[i] > INT32_MAX) return sl_fail(SL_EINPUT, "%s: a config size (%zu) does not fit llama2.c's int32 header", path, cv[i]);
    l2c_header h = {.version = version, .d = (int64_t)c.d_model, .f = (int64_t)c.d_ff, .L = (int64_t)c.n_layer,
                    .H = (int64_t)c.n_head, .K = (int64_t)c.n_kv_head, .V = (int64_t)c.vocab_size,
                    .S = (int64_t)c.max_seq_len, .shared = c.tied_embeddings,
                    .header_bytes = version ? L2C_HEADER_V12 : L2C_HEADER_V0};
    if (version == 2) /* export.py: halve the group size from 64 until it divides dim */
        for (h.gs = 64; h.d % h.gs;) h.gs /= 2;
    if (!implied_size(&h)) return sl_fail(SL_EINPUT, "%s: the model's sizes overflow", path);
    /* Every tensor present, shaped as the config says, of a float dtype. */
    size_t n_order, max_numel = 0;
    const int *order = group_order(&h, &n_order);
    char name[64];
    for (size_t k = 0; k < n_order; k++) {
        if (!group_present(&h, order[k]) || order[k] == G_FREQ) continue;
        l2c_group gi = group_info(&h, order[k]);
        for (int64_t l = 0; l < (gi.per_layer ? h.L : 1); l++) {
            snprintf(name, sizeof name, gi.name, (int)l);
            const sl_st_tensor *t = sl_st_find(native, name);
            if (!t) return sl_fail(SL_EINPUT, "%s: tensor '%s' is missing", native->path, name);
            int ok = t->ndim == gi.ndim && t->shape[0] == gi.rows && (gi.ndim == 1 || t->shape[1] == gi.cols) &&
                     (t->dtype == SL_DT_F32 || t->dtype == SL_DT_F16 || t->dtype == SL_DT_BF16);
            if (!ok) return sl_fail(SL_EINPUT, "%s: tensor '%s' has the wrong shape or dtype for the config", native->path, name);
            if (t->numel > max_numel) max_numel = t->numel;
        }
    }
    /* The tokenizer first: a model whose tokenizer cannot be written is refused before any file is. */
    unsigned char *tbin = NULL;
    size_t tbin_n = 0;
    const char *tj = sl_st_meta(native, "tokenizer");
    if (tj && (rc = tokenizer_bin(path, tj, c.vocab_size, &tbin, &tbin_n))) return rc;
    char *tpath = sidecar_path(path);
    if (!tpath) {
        free(tbin);
        return SL_EFAIL;
    }
    /* A tokenizer left from an earlier file must not pair with this one. */
    if ((rc = sl_out_check("OUT", tpath, o->force, "would be read as this checkpoint's tokenizer"))) goto done_early;
    if (!tbin) unlink(tpath);
    const size_t half = (size_t)(h.d / h.H / 2); /* freq_cis rows are written one at a time */
    size_t buf_n = max_numel > half ? max_numel : half;
    float *wf = sl_malloc((buf_n ? buf_n : 1) * sizeof *wf);
    int8_t *wq = version == 2 ? sl_malloc(max_numel ? max_numel : 1) : NULL;
    float *ws = version == 2 ? sl_malloc((max_numel / (size_t)h.gs + 1) * sizeof *ws) : NULL;
    if (!wf || (version == 2 && (!wq || !ws))) {
        rc = SL_EFAIL;
        goto done;
    }
    sl_atomic_file af;
    if ((rc = sl_atomic_open(&af, path))) goto done;
    unsigned char head[L2C_HEADER_V12] = {0};
    int32_t cfg7[7] = {(int32_t)h.d, (int32_t)h.f, (int32_t)h.L, (int32_t)h.H, (int32_t)h.K, (int32_t)h.V, (int32_t)h.S};
    if (version == 0) {
        if (!h.shared) cfg7[5] = -cfg7[5];
        for (int i = 0; i < 7; i++) wr_u32(head + 4 * i, (uint32_t)cfg7[i]);
    } else {
        wr_u32(head, L2C_MAGIC);
        wr_u32(head + 4, (uint32_t)version);
        for (int i = 0; i < 7; i++) wr_u32(head + 8 + 4 * i, (uint32_t)cfg7[i]);
        head[36] = (unsigned char)h.shared;
        if (version == 2) wr_u32(head + 37, (uint32_t)h.gs);
    }
    rc = write_all(&af, head, h.header_bytes);
    for (size_t k = 0; k < n_order && !rc; k++) {
        int g = order[k];
        if (!group_present(&h, g)) continue;
        l2c_group gi = group_info(&h, g);
        if (g == G_FREQ) { /* as model.py's precompute_freqs_cis, in float32: cos table, then sin */
            const size_t hs = 2 * half;
            for (int t = 0; t < 2 && !rc; t++)
                for (size_t p = 0; p < (size_t)h.S && !rc; p++) {
                    for (size_t j = 0; j < half; j++) {
                        float a = (float)p * (1.0f / powf(10000.0f, (float)(2 * j) / (float)hs));
                        wf[j] = t ? sinf(a) : cosf(a);
                    }
                    rc = write_all(&af, wf, half * sizeof *wf);
                }
            continue;
        }
        for (int64_t l = 0; l < (gi.per_layer ? h.L : 1) && !rc; l++) {
            snprintf(name, sizeof name, gi.name, (int)l);
            const sl_st_tensor *t = sl_st_find(native, name);
            sl_kern_to_f32(wf, t->data, t->dtype, t->numel);
            if (version == 2 && gi.quantised) {
                if (quantise_q80(wf, t->numel, (size_t)h.gs, wq, ws)) {
                    sl_atomic_abort(&af);
                    rc = sl_fail(SL_EINPUT, "%s: tensor '%s' holds a value that is not finite: Q8_0 cannot hold it",
                                 native->path, name);
                    goto done;
                }
                rc = write_all(&af, wq, t->numel);
                if (!rc) rc = write_all(&af, ws, t->numel / (size_t)h.gs * sizeof *ws);
            } else
                rc = write_all(&af, wf, t->numel * sizeof *wf);
        }
    }
    if (rc) {
        int e = errno;
        sl_atomic_abort(&af);
        rc = sl_fail(SL_EFAIL, "writing %s failed: %s", path, strerror(e));
        goto done;
    }
    if ((rc = sl_atomic_commit(&af))) goto done;
    if (tbin) {
        sl_atomic_file tf;
        if ((rc = sl_atomic_open(&tf, tpath))) goto done;
        if (write_all(&tf, tbin, tbin_n)) {
            int e = errno;
            sl_atomic_abort(&tf);
            rc = sl_fail(SL_EFAIL, "writing %s failed: %s", tpath, strerror(e));
            goto done;
        }
        rc = sl_atomic_commit(&tf);
    }
done:
    free(wf);
    free(wq);
    free(ws);
done_early:
    free(tpath);
    free(tbin);
    return rc;
}
