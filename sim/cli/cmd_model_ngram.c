/*
 * cmd_model_ngram.c: `speclab model ngram`: unigram or bigram draft from corpus token files
 * (models/sl_ngram.h; file format models/FORMAT.md, "n-gram models").
 */
#include <getopt.h>
#include <json-c/json.h>
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
            rc = sl_fail(SL_EINPUT, "vocabulary mismatch: --train %s has vocab_size %zu, %s %s has %zu tokens", files[i], fv,
                         tok ? "the tokenizer" : "--vocab", tok ? tok_path : "", V);
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
