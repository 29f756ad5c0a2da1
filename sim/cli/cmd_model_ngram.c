/*
 * cmd_model_ngram.c: `speclab model ngram`: unigram or bigram draft from corpus token files
 * (models/sl_ngram.h; file format models/FORMAT.md, "n-gram models").
 */
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_ngram.h"
#include "sl_tok.h"

int sl_cmd_model_ngram(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab model ngram --train FILE.tok [FILE.tok ...] --order 1|2 (--tokenizer TOK | --vocab V)\n"
            "                           --out FILE\n"
            "                           [--smoothing addk|absdisc|kn] [--add-k K] [--discount D]\n"
            "\n"
            "Counts unigrams (and bigrams, within each file) of the token files and writes a draft with a\n"
            "full smoothed distribution over the vocabulary (models/README.md, \"Drafts that are not\n"
            "transformers\"). Order 1: add-k (default k = 1). Order 2: interpolated Kneser-Ney (kn, the\n"
            "default) or absolute discounting backing off to the add-k unigram (absdisc); the discount D\n"
            "defaults to n1 / (n1 + 2 n2). The token files' vocabulary must be the tokenizer's (TOK: a\n"
            "tokenizer JSON or a model file that carries one); the tokenizer is embedded in the output.\n"
            "--vocab V instead: no tokenizer, the token files must have vocab_size V.\n");
}

int sl_cmd_model_ngram(int argc, char **argv)
{
    static const struct option opts[] = {
        {"train", required_argument, 0, 'T'},   {"order", required_argument, 0, 'n'},
        {"smoothing", required_argument, 0, 's'}, {"add-k", required_argument, 0, 'k'},
        {"discount", required_argument, 0, 'D'}, {"tokenizer", required_argument, 0, 't'},
        {"out", required_argument, 0, 'o'},     {"vocab", required_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},
        {0}};
    const char *tok_path = NULL, *out = NULL;
    const char **files = calloc((size_t)argc, sizeof *files);
    size_t n_files = 0;
    long order = 0, vocab = 0;
    int smoothing_set = 0;
    sl_ngram_opts o = {0, SL_NGRAM_KN, 1.0, 0.0};
    int c, rc = files ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); free(files); return 0;
        case 'T':
            files[n_files++] = optarg;
            /* Further plain arguments after --train are more training files. */
            while (optind < argc && argv[optind][0] != '-') files[n_files++] = argv[optind++];
            break;
        case 'n': rc = sl_cli_long_in("--order", optarg, 1, 2, &order); break;
        case 's': rc = sl_ngram_smoothing_parse(optarg, &o.smoothing); smoothing_set = 1; break;
        case 'k': rc = sl_cli_double_in("--add-k", optarg, 0, 1, 1e9, 0, &o.add_k); break;
        case 'D': rc = sl_cli_double_in("--discount", optarg, 0, 1, 1, 0, &o.discount); break;
        case 't': tok_path = optarg; break;
        case 'o': out = optarg; break;
        case 'V': rc = sl_cli_long_in("--vocab", optarg, 2, INT32_MAX, &vocab); break;
        default: rc = sl_fail(SL_EINPUT, "bad option (speclab model ngram --help)");
        }
    }
    if (!rc && optind != argc) rc = sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!rc && (!n_files || !order || !out || !tok_path == !vocab))
        rc = sl_fail(SL_EINPUT, "model ngram needs --train, --order, --out and one of --tokenizer and --vocab");
    o.order = (int)order;
    if (!rc && !smoothing_set) o.smoothing = order == 1 ? SL_NGRAM_ADDK : SL_NGRAM_KN;
    sl_tok *tok = NULL;
    char *tok_json = NULL;
    int32_t **ids = calloc(n_files ? n_files : 1, sizeof *ids);
    size_t *lens = calloc(n_files ? n_files : 1, sizeof *lens);
    sl_ngram *m = NULL;
    if (!rc && (!ids || !lens)) rc = sl_fail(SL_EFAIL, "out of memory");
    if (!rc && tok_path) rc = sl_tok_load_file(tok_path, &tok);
    if (!rc && tok && !(tok_json = sl_tok_to_json(tok))) rc = SL_EFAIL;
    const size_t V = tok ? sl_tok_vocab_size(tok) : (size_t)vocab;
    for (size_t i = 0; !rc && i < n_files; i++) {
        size_t fv;
        rc = sl_tokfile_read(files[i], &ids[i], &lens[i], &fv);
        if (!rc && fv != V)
            rc = tok ? sl_fail(SL_EINPUT, "vocabulary mismatch: --train %s has vocab_size %zu, the tokenizer %s has %zu tokens",
                               files[i], fv, tok_path, V)
                     : sl_fail(SL_EINPUT, "vocabulary mismatch: --train %s has vocab_size %zu, --vocab is %zu", files[i], fv, V);
        if (!rc && lens[i] == 0) rc = sl_fail(SL_EINPUT, "--train %s holds no tokens", files[i]);
    }
    if (!rc) rc = sl_ngram_train((const int32_t *const *)ids, lens, n_files, V, &o, &m);
    if (!rc) {
        json_object *j = json_object_new_object(), *fa = json_object_new_array();
        for (size_t i = 0; i < n_files; i++) json_object_array_add(fa, json_object_new_string(files[i]));
        json_object_object_add(j, "train_files", fa);
        json_object_object_add(j, "n_tokens", json_object_new_int64((int64_t)m->n_tokens));
        json_object_object_add(j, "distinct_bigrams", json_object_new_int64((int64_t)m->nnz));
        json_object_object_add(j, "tool", json_object_new_string("speclab model ngram"));
        m->training_json = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        json_object_put(j);
        m->tokenizer_json = tok_json;
        tok_json = NULL;
        rc = sl_ngram_write(m, out);
    }
    if (!rc && m->order == 2)
        printf("order 2, smoothing %s, %llu tokens, %zu distinct bigrams, discount %.4f -> %s\n",
               sl_ngram_smoothing_name(m->smoothing), (unsigned long long)m->n_tokens, m->nnz, m->discount, out);
    else if (!rc)
        printf("order 1, smoothing addk (k = %g), %llu tokens -> %s\n", m->add_k, (unsigned long long)m->n_tokens, out);
    for (size_t i = 0; ids && i < n_files; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(files);
    free(tok_json);
    sl_ngram_free(m);
    if (tok) sl_tok_free(tok);
    return rc;
}

/* `speclab model lookup`: a prompt-lookup draft as a file: N, epsilon and the unigram fallback
 * (the unigram counts of an n-gram file, with its tokenizer). */
int sl_cmd_model_lookup(int argc, char **argv);
int sl_cmd_model_lookup(int argc, char **argv)
{
    static const struct option opts[] = {{"n", required_argument, 0, 'n'},        {"epsilon", required_argument, 0, 'e'},
                                         {"fallback", required_argument, 0, 'F'}, {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},           {0}};
    const char *fb = NULL, *out = NULL;
    long n = 0;
    double eps = 0.1;
    int c, rc = SL_OK;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            printf("usage: speclab model lookup --n N [--epsilon E] --fallback NGRAM_FILE --out FILE\n"
                   "\nWrites the prompt-lookup draft lookup:N:E:NGRAM_FILE as one file (arch lookup): the unigram\n"
                   "counts and tokenizer of NGRAM_FILE (a unigram or bigram file) plus N and E.\n");
            return 0;
        case 'n': rc = sl_cli_long_in("--n", optarg, 1, 64, &n); break;
        case 'e': rc = sl_cli_double_in("--epsilon", optarg, 0, 1, 1, 0, &eps); break;
        case 'F': fb = optarg; break;
        case 'o': out = optarg; break;
        default: rc = sl_fail(SL_EINPUT, "bad option (speclab model lookup --help)");
        }
    }
    if (rc) return rc;
    if (optind != argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!n || !fb || !out) return sl_fail(SL_EINPUT, "model lookup needs --n, --fallback and --out");
    sl_ngram *m = NULL;
    if ((rc = sl_ngram_open(fb, &m))) return rc;
    /* Keep the unigram only: the fallback is P1. */
    free(m->row_ptr), free(m->col), free(m->cnt);
    m->row_ptr = m->col = m->cnt = NULL;
    m->nnz = 0;
    m->order = 1;
    m->smoothing = SL_NGRAM_ADDK;
    m->lookup_n = (size_t)n;
    m->lookup_eps = eps;
    rc = sl_ngram_write(m, out);
    sl_ngram_free(m);
    return rc;
}

/* `speclab model info` for n-gram and lookup files. */
int sl_model_info_ngram(const char *path, sl_format fmt);
int sl_model_info_ngram(const char *path, sl_format fmt)
{
    sl_ngram *m = NULL;
    int rc = sl_ngram_open(path, &m);
    if (rc) return rc;
    sl_table *t = sl_table_alloc("model");
    const char *cols[] = {"path", "arch", "vocab_size", "order", "smoothing", "add_k", "discount", "n_tokens",
                          "distinct_bigrams", "lookup_n", "lookup_epsilon", "tokenizer", "training"};
    const sl_coltype ty[] = {SL_COL_STRING, SL_COL_STRING, SL_COL_INT, SL_COL_INT, SL_COL_STRING, SL_COL_DOUBLE,
                              SL_COL_DOUBLE, SL_COL_INT, SL_COL_INT, SL_COL_INT, SL_COL_DOUBLE, SL_COL_INT, SL_COL_STRING};
    for (int i = 0; i < 13; i++) sl_table_add_col(t, cols[i], ty[i], ty[i] == SL_COL_DOUBLE ? "%.17g" : NULL);
    sl_table_add_row(t);
    sl_table_set_string(t, 0, path);
    sl_table_set_string(t, 1, m->lookup_n ? "lookup" : "ngram");
    sl_table_set_int(t, 2, (int64_t)m->vocab_size);
    sl_table_set_int(t, 3, m->order);
    sl_table_set_string(t, 4, sl_ngram_smoothing_name(m->smoothing));
    sl_table_set_double(t, 5, m->add_k);
    sl_table_set_double(t, 6, m->order == 2 ? m->discount : NAN);
    sl_table_set_int(t, 7, (int64_t)m->n_tokens);
    sl_table_set_int(t, 8, (int64_t)m->nnz);
    sl_table_set_int(t, 9, (int64_t)m->lookup_n);
    sl_table_set_double(t, 10, m->lookup_n ? m->lookup_eps : NAN);
    sl_table_set_int(t, 11, m->tokenizer_json != NULL);
    if (m->training_json) sl_table_set_string(t, 12, m->training_json);
    if (fmt == SL_FMT_TABLE) {
        printf("path: %s\narch: %s\nvocab_size: %zu\norder: %d\nsmoothing: %s\nadd_k: %g\n", path,
               m->lookup_n ? "lookup" : "ngram", m->vocab_size, m->order, sl_ngram_smoothing_name(m->smoothing), m->add_k);
        if (m->order == 2) printf("discount: %.17g\ndistinct_bigrams: %zu\n", m->discount, m->nnz);
        if (m->lookup_n) printf("lookup_n: %zu\nlookup_epsilon: %g\n", m->lookup_n, m->lookup_eps);
        printf("n_tokens: %llu\ntokenizer: %s\ntraining: %s\n", (unsigned long long)m->n_tokens,
               m->tokenizer_json ? "present" : "absent", m->training_json ? m->training_json : "(none)");
    } else {
        rc = sl_table_write(t, stdout, fmt);
    }
    sl_table_free(t);
    sl_ngram_free(m);
    return rc;
}
