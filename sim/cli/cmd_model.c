/*
 * cmd_model.c: `speclab model info FILE` and `speclab model init ...` (random-weight models for
 * tests and benchmarks). The file format is models/FORMAT.md.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_model.h"
#include "sl_tok.h"

/* cmd_model_ngram.c */
int sl_cmd_model_ngram(int argc, char **argv);
int sl_cmd_model_lookup(int argc, char **argv);
int sl_model_info_ngram(const char *path, sl_format fmt);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab model info FILE [--format table|csv|json]\n"
            "       speclab model init --arch gpt2|llama --config JSON --out FILE [--seed S]\n"
            "                          [--dtype f32|f16|bf16] [--init-std X] [--tokenizer-json FILE]\n"
            "       speclab model ngram --train FILE.tok ... --order 1|2 --tokenizer TOK --out FILE (see --help)\n"
            "       speclab model lookup --n N [--epsilon E] --fallback NGRAM_FILE --out FILE\n"
            "\n"
            "info: validates FILE and prints its architecture, config, parameter count, bytes per dtype,\n"
            "      whether it carries a tokenizer, and its training metadata.\n"
            "init: writes a model with random weights (matrices N(0, init_std^2), default 0.02; norm\n"
            "      weights 1 + N(0, 0.01)), e.g. --config '{\"vocab_size\":256,\"n_layer\":2,\"n_head\":4,\n"
            "      \"d_model\":64,\"d_ff\":256,\"max_seq_len\":128}'. --tokenizer-json embeds that file's\n"
            "      text as the tokenizer metadata.\n");
}

static int model_info(int argc, char **argv)
{
    sl_format fmt = SL_FMT_TABLE;
    static const struct option opts[] = {{"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0}};
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'f') {
            if ((rc = sl_format_parse(optarg, &fmt))) return rc;
        } else return sl_fail(SL_EINPUT, "bad option (speclab model --help)");
    }
    if (optind != argc - 1) return sl_fail(SL_EINPUT, "model info needs exactly one FILE");
    const char *path = argv[optind];
    {
        /* n-gram and lookup drafts share the container but not the reader. */
        sl_st_file *f = NULL;
        if ((rc = sl_st_open(path, &f))) return rc;
        const char *arch = sl_st_meta(f, "arch");
        int ng = arch && (!strcmp(arch, "ngram") || !strcmp(arch, "lookup"));
        sl_st_close(f);
        if (ng) return sl_model_info_ngram(path, fmt);
    }
    sl_model *m;
    if ((rc = sl_model_open(path, &m))) return rc;
    const sl_model_config *g = &m->cfg;
    const char *training = sl_st_meta(m->st, "training");
    sl_table *t = sl_table_alloc("model");
    if (!t) {
        sl_model_close(m);
        return SL_EFAIL;
    }
    sl_table_add_col(t, "path", SL_COL_STRING, NULL);
    sl_table_add_col(t, "arch", SL_COL_STRING, NULL);
    const char *ints[] = {"vocab_size", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "max_seq_len"};
    const size_t vals[] = {g->vocab_size, g->n_layer, g->n_head, g->n_kv_head, g->d_model, g->d_ff, g->max_seq_len};
    for (size_t i = 0; i < 7; i++) sl_table_add_col(t, ints[i], SL_COL_INT, NULL);
    sl_table_add_col(t, "norm_eps", SL_COL_DOUBLE, "%g");
    sl_table_add_col(t, "rope_theta", SL_COL_DOUBLE, "%g");
    sl_table_add_col(t, "tied_embeddings", SL_COL_INT, NULL);
    sl_table_add_col(t, "n_params", SL_COL_INT, NULL);
    sl_table_add_col(t, "bytes_f32", SL_COL_INT, NULL);
    sl_table_add_col(t, "bytes_f16", SL_COL_INT, NULL);
    sl_table_add_col(t, "bytes_bf16", SL_COL_INT, NULL);
    sl_table_add_col(t, "tokenizer", SL_COL_INT, NULL);
    sl_table_add_col(t, "tokenizer_bytes", SL_COL_INT, NULL);
    sl_table_add_col(t, "training", SL_COL_STRING, NULL);
    sl_table_add_row(t);
    size_t col = 0;
    sl_table_set_string(t, col++, path);
    sl_table_set_string(t, col++, sl_arch_name(m->arch));
    for (size_t i = 0; i < 7; i++) sl_table_set_int(t, col++, (int64_t)vals[i]);
    sl_table_set_double(t, col++, g->norm_eps);
    sl_table_set_double(t, col++, m->arch == SL_ARCH_LLAMA ? g->rope_theta : NAN);
    sl_table_set_int(t, col++, g->tied_embeddings);
    sl_table_set_int(t, col++, (int64_t)m->n_params);
    for (int d = 0; d < 3; d++) sl_table_set_int(t, col++, (int64_t)m->bytes_by_dtype[d]);
    sl_table_set_int(t, col++, m->tokenizer_json != NULL);
    sl_table_set_int(t, col++, m->tokenizer_json ? (int64_t)strlen(m->tokenizer_json) : 0);
    if (training) sl_table_set_string(t, col++, training);
    if (fmt == SL_FMT_TABLE) {
        /* One model is a record, not a table: print it as "key: value" lines. */
        printf("path: %s\narch: %s\n", path, sl_arch_name(m->arch));
        for (size_t i = 0; i < 7; i++) printf("%s: %zu\n", ints[i], vals[i]);
        printf("norm_eps: %g\n", g->norm_eps);
        if (m->arch == SL_ARCH_LLAMA) printf("rope_theta: %g\n", g->rope_theta);
        printf("tied_embeddings: %s\nn_params: %zu\n", g->tied_embeddings ? "true" : "false", m->n_params);
        for (int d = 0; d < 3; d++) printf("bytes_%s: %zu\n", d == 0 ? "f32" : d == 1 ? "f16" : "bf16", m->bytes_by_dtype[d]);
        printf("tokenizer: %s\n", m->tokenizer_json ? "present" : "absent");
        printf("training: %s\n", training ? training : "(none)");
        for (size_t i = 0; i < m->st->n_meta; i++) {
            const char *k = m->st->meta_keys[i];
            if (strcmp(k, "format") && strcmp(k, "format_version") && strcmp(k, "arch") && strcmp(k, "config") &&
                strcmp(k, "training") && strcmp(k, "tokenizer"))
                printf("meta.%s: %s\n", k, m->st->meta_vals[i]);
        }
        rc = SL_OK;
    } else {
        rc = sl_table_write(t, stdout, fmt);
    }
    sl_table_free(t);
    sl_model_close(m);
    return rc;
}

static int read_text_file(const char *flag, const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open %s", flag, path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? sl_malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return sl_fail(SL_EINPUT, "%s: cannot read %s", flag, path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    return SL_OK;
}

static int model_init(int argc, char **argv)
{
    const char *arch_s = NULL, *config = NULL, *out = NULL, *tok_path = NULL;
    uint64_t seed = 0;
    sl_dtype dt = SL_DT_F32;
    double init_std = 0.02;
    static const struct option opts[] = {{"arch", required_argument, 0, 'a'},    {"config", required_argument, 0, 'c'},
                                         {"seed", required_argument, 0, 's'},    {"dtype", required_argument, 0, 'd'},
                                         {"out", required_argument, 0, 'o'},     {"init-std", required_argument, 0, 'i'},
                                         {"tokenizer-json", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
                                         {0}};
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case 'a': arch_s = optarg; break;
        case 'c': config = optarg; break;
        case 'o': out = optarg; break;
        case 't': tok_path = optarg; break;
        case 's':
            if ((rc = sl_cli_u64("--seed", optarg, &seed))) return rc;
            break;
        case 'd':
            if (sl_dtype_parse(optarg, &dt)) return sl_fail(SL_EINPUT, "--dtype: '%s' is not f32, f16 or bf16", optarg);
            break;
        case 'i':
            if ((rc = sl_cli_double_in("--init-std", optarg, 0, 1, 10, 0, &init_std))) return rc;
            break;
        default: return sl_fail(SL_EINPUT, "bad option (speclab model --help)");
        }
    }
    if (optind != argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!arch_s || !config || !out) return sl_fail(SL_EINPUT, "model init needs --arch, --config and --out");
    sl_arch arch;
    if (sl_arch_parse(arch_s, &arch)) return sl_fail(SL_EINPUT, "--arch: '%s' is not gpt2 or llama", arch_s);
    sl_model_config cfg;
    if ((rc = sl_model_config_parse(config, arch, "--config", &cfg))) return rc;
    char *tok = NULL;
    if (tok_path && (rc = read_text_file("--tokenizer-json", tok_path, &tok))) return rc;
    if (tok) {
        /* The tokenizer must parse and fit the model's vocabulary (a model may pad it, not cut it). */
        sl_tok *t;
        if ((rc = sl_tok_from_json(tok, &t))) {
            char why[256]; /* copied: sl_fail formats into the buffer sl_errmsg points to */
            snprintf(why, sizeof why, "%s", sl_errmsg());
            free(tok);
            return sl_fail(SL_EINPUT, "--tokenizer-json %s: %s", tok_path, why);
        }
        size_t tv = sl_tok_vocab_size(t);
        sl_tok_free(t);
        if (tv > cfg.vocab_size) {
            free(tok);
            return sl_fail(SL_EINPUT, "--tokenizer-json %s has %zu tokens, more than vocab_size %zu", tok_path, tv,
                           cfg.vocab_size);
        }
    }
    rc = sl_model_init_write(out, arch, &cfg, seed, dt, init_std, tok);
    free(tok);
    return rc;
}

int sl_cmd_model(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? sl_fail(SL_EINPUT, "model needs a subcommand: info or init") : 0;
    }
    if (!strcmp(argv[1], "info")) return model_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "init")) return model_init(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ngram")) return sl_cmd_model_ngram(argc - 1, argv + 1);
    if (!strcmp(argv[1], "lookup")) return sl_cmd_model_lookup(argc - 1, argv + 1);
    return sl_fail(SL_EINPUT, "unknown model subcommand '%s' (expected info, init, ngram or lookup)", argv[1]);
}
