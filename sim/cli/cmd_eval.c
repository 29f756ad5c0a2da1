/*
 * cmd_eval.c: `speclab eval`: teacher-forced loss of any model (transformer, n-gram, lookup) on a
 * token file: nats and bits per token, and bits per byte given the text's size.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_cli.h"
#include "sl_lm_open.h"
#include "sl_tok.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab eval --model SPEC --tokens FILE.tok [--text FILE.txt | --bytes N]\n"
            "                    [--context C] [--windows K] [--format table|csv|json]\n"
            "\n"
            "Scores every token of FILE.tok under the model's own next-token distribution (teacher\n"
            "forcing, temperature 1, no truncation) and prints nats per token, bits per token and, with\n"
            "the byte count of the text the tokens encode (--text gives the file, --bytes the number),\n"
            "bits per byte = bits per token * tokens in the file / bytes.\n"
            "SPEC: a model file (gpt2, llama or ngram) or lookup:N[:EPS[:NGRAM_FILE]] (models/README.md).\n"
            "Windows: the file is cut into consecutive windows of C tokens (default: the model's context,\n"
            "1024 for models without one); each window starts from an empty state and scores the token\n"
            "after each of its C tokens, so every token but the first is scored once. --windows K instead\n"
            "scores K windows of C tokens at offsets floor(w * (n - C - 1) / (K - 1)), w = 0..K-1: the\n"
            "windows `speclab train` uses for val_ce (with its --seq-len as C and eval batches x batch\n"
            "size as K).\n");
}

int sl_cmd_eval(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"text", required_argument, 0, 'x'},  {"bytes", required_argument, 0, 'b'},
        {"context", required_argument, 0, 'c'}, {"windows", required_argument, 0, 'w'},
        {"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'},
        {0}};
    const char *spec = NULL, *tok_path = NULL, *text = NULL;
    long bytes_opt = -1, ctx_opt = 0, windows = 0;
    sl_format fmt = SL_FMT_TABLE;
    int c, rc = SL_OK;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case 'm': spec = optarg; break;
        case 't': tok_path = optarg; break;
        case 'x': text = optarg; break;
        case 'b': rc = sl_cli_long_in("--bytes", optarg, 1, 1L << 62, &bytes_opt); break;
        case 'c': rc = sl_cli_long_in("--context", optarg, 1, 1L << 24, &ctx_opt); break;
        case 'w': rc = sl_cli_long_in("--windows", optarg, 1, 1L << 30, &windows); break;
        case 'f': rc = sl_format_parse(optarg, &fmt); break;
        default: rc = sl_fail(SL_EINPUT, "bad option (speclab eval --help)");
        }
    }
    if (rc) return rc;
    if (optind != argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!spec || !tok_path) return sl_fail(SL_EINPUT, "eval needs --model and --tokens");
    if (text && bytes_opt > 0) return sl_fail(SL_EINPUT, "give at most one of --text and --bytes");
    double n_bytes = bytes_opt > 0 ? (double)bytes_opt : NAN;
    if (text) {
        struct stat sb;
        if (stat(text, &sb) != 0) return sl_fail(SL_EINPUT, "--text: cannot read %s: %s", text, strerror(errno));
        if (sb.st_size == 0) return sl_fail(SL_EINPUT, "--text %s is empty", text);
        n_bytes = (double)sb.st_size;
    }

    int32_t *ids = NULL;
    size_t n = 0, fv = 0;
    sl_lm_handle *h = NULL;
    double *dists = NULL;
    sl_table *t = NULL;
    if ((rc = sl_tokfile_read(tok_path, &ids, &n, &fv))) goto done;
    if (n < 2) {
        rc = sl_fail(SL_EINPUT, "--tokens %s holds %zu tokens: at least 2 are needed to score one", tok_path, n);
        goto done;
    }
    sl_lm_open_opts oo = {SL_SAMPLING_DEFAULT, fv, "--model", tok_path};
    if ((rc = sl_lm_open(spec, &oo, &h))) goto done;
    size_t C = ctx_opt ? (size_t)ctx_opt : h->context != SIZE_MAX ? h->context : 1024;
    if (C > h->context) {
        rc = sl_fail(SL_EINPUT, "--context %zu exceeds the context of %s (%zu)", C, spec, h->context);
        goto done;
    }
    if (windows && n < C + 1) {
        rc = sl_fail(SL_EINPUT, "--windows: %s holds %zu tokens, fewer than a window of %zu + 1", tok_path, n, C);
        goto done;
    }
    if (C > n - 1) C = n - 1; /* nothing beyond the file to score */
    const size_t V = h->vocab_size;
    if ((rc = sl_lm_start(h, C))) goto done;
    dists = sl_malloc(C * V * sizeof *dists);
    if (!dists) {
        rc = SL_EFAIL;
        goto done;
    }
    const size_t n_win = windows ? (size_t)windows : (n - 1 + C - 1) / C;
    double nats = 0;
    size_t scored = 0;
    for (size_t w = 0; w < n_win; w++) {
        size_t off, len;
        if (windows) {
            const size_t last = n - C - 1;
            off = n_win > 1 ? (size_t)((double)last * (double)w / (double)(n_win - 1)) : 0;
            len = C;
        } else {
            off = w * C;
            len = n - 1 - off < C ? n - 1 - off : C;
        }
        if ((rc = h->lm.truncate(h->lm.self, 0))) goto done;
        if ((rc = h->lm.extend(h->lm.self, ids + off, len, len, dists))) goto done;
        double s = 0;
        for (size_t j = 0; j < len; j++) s -= log(dists[j * V + (size_t)ids[off + j + 1]]);
        nats += s;
        scored += len;
        if (sl_cli_progress_enabled()) fprintf(stderr, "\reval: window %zu/%zu", w + 1, n_win);
    }
    if (sl_cli_progress_enabled()) fprintf(stderr, "\n");
    const double npt = nats / (double)scored, bpt = npt / log(2.0);
    t = sl_table_alloc("eval");
    if (!t) {
        rc = SL_EFAIL;
        goto done;
    }
    sl_table_add_col(t, "model", SL_COL_STRING, NULL);
    sl_table_add_col(t, "kind", SL_COL_STRING, NULL);
    sl_table_add_col(t, "tokens_file", SL_COL_STRING, NULL);
    sl_table_add_col(t, "tokens_in_file", SL_COL_INT, NULL);
    sl_table_add_col(t, "tokens_scored", SL_COL_INT, NULL);
    sl_table_add_col(t, "windows", SL_COL_INT, NULL);
    sl_table_add_col(t, "context", SL_COL_INT, NULL);
    sl_table_add_col(t, "nats_per_token", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(t, "bits_per_token", SL_COL_DOUBLE, "%.6f");
    sl_table_add_col(t, "bytes", SL_COL_DOUBLE, "%.0f");
    sl_table_add_col(t, "bits_per_byte", SL_COL_DOUBLE, "%.6f");
    sl_table_add_row(t);
    sl_table_set_string(t, 0, spec);
    sl_table_set_string(t, 1, sl_lm_kind_name(h->kind));
    sl_table_set_string(t, 2, tok_path);
    sl_table_set_int(t, 3, (int64_t)n);
    sl_table_set_int(t, 4, (int64_t)scored);
    sl_table_set_int(t, 5, (int64_t)n_win);
    sl_table_set_int(t, 6, (int64_t)C);
    sl_table_set_double(t, 7, npt);
    sl_table_set_double(t, 8, bpt);
    sl_table_set_double(t, 9, n_bytes);
    sl_table_set_double(t, 10, bpt * (double)n / n_bytes);
    rc = sl_table_write(t, stdout, fmt);
done:
    sl_table_free(t);
    free(dists);
    free(ids);
    sl_lm_close(h);
    return rc;
}
