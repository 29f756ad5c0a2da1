/*
 * cmd_tokenize.c: `speclab tokenize train|encode|decode` (byte-level BPE, models/sl_tok.h).
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_tok.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab tokenize train --corpus FILE [FILE...] --vocab-size N --out tokenizer.json\n"
            "                              [--min-count C]\n"
            "       speclab tokenize encode --tokenizer tokenizer.json|model.safetensors [--in FILE]\n"
            "                              [--out x.tok | --jsonl]\n"
            "       speclab tokenize decode --tokenizer tokenizer.json|model.safetensors [--in x.tok|ids.txt]\n"
            "                              [--out FILE]\n"
            "\n"
            "train   learns byte-level BPE merges on the corpus files (UTF-8 text; <|endoftext|> separates\n"
            "        documents). Vocabulary: 256 bytes, N-257 merges, <|endoftext|>. Deterministic: ties\n"
            "        between equally frequent pairs go to the smaller (left id, right id).\n"
            "encode  reads bytes (stdin by default). With --out, writes a token file (models/TOKFILE.md)\n"
            "        and prints one summary line (bytes, tokens, bytes per token); without, prints the\n"
            "        ids on one line. --jsonl: each input line is a JSON string, one line of ids each.\n"
            "decode  reads a token file or whitespace-separated ids (stdin by default) and writes the\n"
            "        bytes (stdout by default).\n"
            "--gpt2 DIR instead of --tokenizer loads GPT-2's own DIR/encoder.json and DIR/vocab.bpe.\n");
}

static int read_all(const char *path, char **buf, size_t *len)
{
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) return sl_fail(SL_EINPUT, "cannot read %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break;
        char *b2 = realloc(b, cap * 2);
        if (!b2) {
            free(b);
            b = NULL;
            break;
        }
        b = b2;
        cap *= 2;
    }
    int err = ferror(f);
    if (path) fclose(f);
    if (!b) return sl_fail(SL_EFAIL, "out of memory reading %s", path ? path : "stdin");
    if (err) {
        free(b);
        return sl_fail(SL_EINPUT, "error reading %s", path ? path : "stdin");
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return SL_OK;
}

static int write_all(const char *path, const char *bytes, size_t n)
{
    if (!path) {
        if (fwrite(bytes, 1, n, stdout) != n || fflush(stdout))
            return sl_fail(SL_EFAIL, "write to stdout failed: %s", strerror(errno));
        return SL_OK;
    }
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    if (fwrite(bytes, 1, n, af.f) != n) {
        int e = errno;
        sl_atomic_abort(&af);
        return sl_fail(SL_EFAIL, "%s: write failed: %s", path, strerror(e));
    }
    return sl_atomic_commit(&af);
}

static int cmd_train(int argc, char **argv)
{
    static const struct option opts[] = {{"corpus", required_argument, 0, 'c'},
                                          {"vocab-size", required_argument, 0, 'v'},
                                          {"out", required_argument, 0, 'o'},
                                          {"min-count", required_argument, 0, 'm'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    size_t n_files = 0;
    long vocab = -1;
    uint64_t min_count = 2;
    const char *out = NULL;
    int rc = files ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    int c;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': files[n_files++] = optarg; break;
        case 'v': rc = sl_cli_long_in("--vocab-size", optarg, 257, 1 << 24, &vocab); break;
        case 'o': out = optarg; break;
        case 'm':
            rc = sl_cli_u64("--min-count", optarg, &min_count);
            if (!rc && min_count < 1) rc = sl_fail(SL_EINPUT, "--min-count: 0 is below 1");
            break;
        case 'h': usage(stdout); free(files); return 0;
        default: rc = sl_fail(SL_EINPUT, "bad option (speclab tokenize --help)");
        }
    }
    /* Files after --corpus A B ... arrive as operands. */
    for (int i = optind; !rc && i < argc; i++) files[n_files++] = argv[i];
    if (!rc && !n_files) rc = sl_fail(SL_EINPUT, "--corpus: no corpus file given");
    if (!rc && vocab < 0) rc = sl_fail(SL_EINPUT, "--vocab-size: required");
    if (!rc && !out) rc = sl_fail(SL_EINPUT, "--out: required");
    char **texts = rc ? NULL : calloc(n_files, sizeof *texts);
    size_t *lens = rc ? NULL : calloc(n_files, sizeof *lens);
    if (!rc && (!texts || !lens)) rc = sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < n_files; i++) {
        rc = read_all(files[i], &texts[i], &lens[i]);
        if (rc) break;
        if (lens[i] == 0) {
            rc = sl_fail(SL_EINPUT, "--corpus %s: the file is empty", files[i]);
            break;
        }
        size_t v = sl_utf8_valid_prefix((const unsigned char *)texts[i], lens[i]);
        if (v != lens[i]) rc = sl_fail(SL_EINPUT, "--corpus %s: not valid UTF-8 at byte %zu", files[i], v);
    }
    sl_tok *t = NULL;
    if (!rc) {
        sl_tok_train_opts o = {.min_count = min_count, .verbose = sl_cli_progress_enabled()};
        double t0 = sl_now_s();
        rc = sl_tok_train((const char *const *)texts, lens, n_files, (size_t)vocab, &o, &t);
        if (!rc) {
            size_t total = 0;
            for (size_t i = 0; i < n_files; i++) total += lens[i];
            printf("trained %zu merges (vocab %zu) on %zu bytes in %.2f s\n", sl_tok_n_merges(t),
                   sl_tok_vocab_size(t), total, sl_now_s() - t0);
        }
    }
    if (!rc) {
        char *json = sl_tok_to_json(t);
        if (!json) rc = SL_EFAIL;
        if (!rc) rc = write_all(out, json, strlen(json));
        free(json);
    }
    sl_tok_free(t);
    for (size_t i = 0; texts && i < n_files; i++) free(texts[i]);
    free(texts);
    free(lens);
    free(files);
    return rc;
}

typedef struct {
    const char *tok, *gpt2, *in, *out;
    int jsonl;
} io_opts;

static int parse_common(int argc, char **argv, io_opts *o)
{
    static const struct option opts[] = {{"tokenizer", required_argument, 0, 't'},
                                          {"gpt2", required_argument, 0, 'g'},
                                          {"in", required_argument, 0, 'i'},
                                          {"out", required_argument, 0, 'o'},
                                          {"jsonl", no_argument, 0, 'j'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': o->tok = optarg; break;
        case 'g': o->gpt2 = optarg; break;
        case 'i': o->in = optarg; break;
        case 'o': o->out = optarg; break;
        case 'j': o->jsonl = 1; break;
        case 'h': usage(stdout); return -1;
        default: return sl_fail(SL_EINPUT, "bad option (speclab tokenize --help)");
        }
    }
    if (optind < argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!o->tok == !o->gpt2)
        return sl_fail(SL_EINPUT, "--tokenizer: required (tokenizer.json or model.safetensors), or --gpt2 DIR");
    return SL_OK;
}

/* Loads --tokenizer FILE, or GPT-2's own encoder.json + vocab.bpe from --gpt2 DIR. */
static int load_tok(const io_opts *o, sl_tok **t)
{
    if (o->tok) return sl_tok_load_file(o->tok, t);
    size_t n = strlen(o->gpt2) + 32;
    char *a = malloc(n), *b = malloc(n);
    int rc = a && b ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    if (!rc) {
        snprintf(a, n, "%s/encoder.json", o->gpt2);
        snprintf(b, n, "%s/vocab.bpe", o->gpt2);
        rc = sl_tok_load_gpt2(a, b, t);
    }
    free(a);
    free(b);
    return rc;
}

static void print_ids(const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

/* --jsonl: every input line is a JSON string; prints one line of ids per input line. */
static int encode_jsonl(const sl_tok *t, char *text, const char *name)
{
    int rc = SL_OK;
    size_t lineno = 0;
    for (char *line = text; line && *line && !rc;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        json_object *o = json_tokener_parse(line);
        if (!o || !json_object_is_type(o, json_type_string)) {
            rc = sl_fail(SL_EINPUT, "%s:%zu: expected a JSON string", name, lineno);
        } else {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            rc = sl_tok_encode(t, json_object_get_string(o), (size_t)json_object_get_string_len(o), &ids, &n_ids);
            if (!rc) print_ids(ids, n_ids);
            free(ids);
        }
        if (o) json_object_put(o);
        line = nl ? nl + 1 : NULL;
    }
    return rc;
}

static int cmd_encode(int argc, char **argv)
{
    io_opts o = {0};
    int rc = parse_common(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *in = o.in, *out = o.out;
    sl_tok *t = NULL;
    char *text = NULL;
    size_t n = 0, n_ids = 0;
    int32_t *ids = NULL;
    rc = load_tok(&o, &t);
    if (!rc) rc = read_all(in, &text, &n);
    if (!rc && o.jsonl) {
        rc = out ? sl_fail(SL_EINPUT, "--jsonl prints ids on stdout; drop --out") : encode_jsonl(t, text, in ? in : "stdin");
        free(text);
        sl_tok_free(t);
        return rc;
    }
    if (!rc) rc = sl_tok_encode(t, text, n, &ids, &n_ids);
    if (!rc && out) {
        rc = sl_tokfile_write(out, ids, n_ids, sl_tok_vocab_size(t));
        if (!rc)
            printf("%zu bytes -> %zu tokens (%.4f bytes per token) -> %s\n", n, n_ids,
                   n_ids ? (double)n / (double)n_ids : 0.0, out);
    } else if (!rc) {
        print_ids(ids, n_ids);
        if (fflush(stdout)) rc = sl_fail(SL_EFAIL, "write to stdout failed");
    }
    free(ids);
    free(text);
    sl_tok_free(t);
    return rc;
}

static int cmd_decode(int argc, char **argv)
{
    io_opts o = {0};
    int rc = parse_common(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *in = o.in, *out = o.out;
    sl_tok *t = NULL;
    char *text = NULL, *bytes = NULL;
    size_t n = 0, n_ids = 0, n_bytes = 0, vs = 0;
    int32_t *ids = NULL;
    rc = load_tok(&o, &t);
    if (!rc) rc = read_all(in, &text, &n);
    if (!rc && n >= 8 && !memcmp(text, "SLTOK", 5)) {
        /* A token file: read it through the checking reader. */
        if (!in) {
            rc = sl_fail(SL_EINPUT, "decode: give a token file with --in, not on stdin");
        } else {
            rc = sl_tokfile_read(in, &ids, &n_ids, &vs);
            if (!rc && vs != sl_tok_vocab_size(t))
                rc = sl_fail(SL_EINPUT, "%s: vocab size %zu, the tokenizer has %zu", in, vs, sl_tok_vocab_size(t));
        }
    } else if (!rc) {
        ids = malloc((n / 2 + 1) * sizeof *ids);
        if (!ids) rc = sl_fail(SL_EFAIL, "out of memory");
        char *p = text;
        while (!rc) {
            while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
            if (!*p) break;
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
                rc = sl_fail(SL_EINPUT, "%s: '%.20s' is not a token id", in ? in : "stdin", p);
                break;
            }
            ids[n_ids++] = (int32_t)v;
            p = end;
        }
    }
    if (!rc) rc = sl_tok_decode(t, ids, n_ids, &bytes, &n_bytes);
    if (!rc) rc = write_all(out, bytes, n_bytes);
    free(bytes);
    free(ids);
    free(text);
    sl_tok_free(t);
    return rc;
}

int sl_cmd_tokenize(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return sl_fail(SL_EINPUT, "expected a subcommand: train, encode or decode");
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(sub, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(sub, "decode")) return cmd_decode(argc - 1, argv + 1);
    return sl_fail(SL_EINPUT, "unknown subcommand '%s' (expected train, encode or decode)", sub);
}
