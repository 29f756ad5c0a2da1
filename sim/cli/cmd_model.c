/*
 * cmd_model.c: `speclab model info FILE` and `speclab model init ...` (random-weight models for
 * tests and benchmarks); `model ngram` and `model lookup` are in cmd_model_ngram.c. The work is
 * sl_model_info_read and sl_model_init_file (models/sl_model.h); the file format is models/FORMAT.md.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_import.h"
#include "sl_model.h"

/* cmd_model_ngram.c */
int sl_cmd_model_ngram(int argc, char **argv);
int sl_cmd_model_lookup(int argc, char **argv);
int sl_cmd_model_info_ngram(const sl_model_info *in, sl_format fmt);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: speclab model info FILE [--format table|csv|json]\n"
            "       speclab model convert IN OUT [--to speclab|gguf|llama2c] [--dtype D] [--version N] [--force]\n"
            "       speclab model probs MODEL --prompt-ids 1,2,3 [--top K]\n"
            "       speclab model init --arch gpt2|llama --config JSON --out FILE [--seed S]\n"
            "                          [--dtype f32|f16|bf16] [--init-std X] [--tokenizer-json FILE]\n"
            "       speclab model ngram --train FILE.tok ... --order 1|2 --tokenizer TOK --out FILE (see --help)\n"
            "       speclab model lookup --n N [--epsilon E] --fallback NGRAM_FILE --out FILE\n"
            "\n"
            "Every MODEL or FILE may be a speclab model, a Hugging Face GPT-2 folder (or its\n"
            "model.safetensors), a llama2.c checkpoint (tokenizer.bin beside it) or a GGUF file:\n"
            "the format is read from the file's content (models/IMPORTERS.md).\n"
            "info: validates FILE and prints its format, architecture, config, parameter count, dtype\n"
            "      per group of matrices, tokenizer kind and special ids, and the sha256 of its weights.\n"
            "convert: writes IN (any format) as OUT in the native format (default), GGUF or llama2.c.\n"
            "probs: prints the model's next-token distribution after every prefix of the ids (JSON).\n"
            "init: writes a model with random weights (matrices N(0, init_std^2), default 0.02; norm\n"
            "      weights 1 + N(0, 0.01)), e.g. --config '{\"vocab_size\":256,\"n_layer\":2,\"n_head\":4,\n"
            "      \"d_model\":64,\"d_ff\":256,\"max_seq_len\":128}'. --tokenizer-json embeds that file's\n"
            "      text as the tokenizer metadata.\n");
}

/* A transformer's facts: one model is a record, not a table, so the text form is "key: value" lines. */
static int print_info(const sl_model_info *in, sl_format fmt)
{
    static const char *const sizes[] = {"vocab_size", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "max_seq_len"};
    const sl_model_config *g = &in->cfg;
    const size_t vals[] = {g->vocab_size, g->n_layer, g->n_head, g->n_kv_head, g->d_model, g->d_ff, g->max_seq_len};
    const int llama = !strcmp(in->arch, "llama");
    if (fmt == SL_FMT_TABLE) {
        printf("path: %s\nformat: %s\narch: %s\n", in->path, in->format, in->arch);
        for (size_t i = 0; i < 7; i++) printf("%s: %zu\n", sizes[i], vals[i]);
        printf("norm_eps: %g\n", g->norm_eps);
        if (llama) printf("rope_theta: %g\n", g->rope_theta);
        printf("tied_embeddings: %s\nn_params: %zu\n", g->tied_embeddings ? "true" : "false", in->n_params);
        for (int k = 0; k < SL_MODEL_N_GROUPS; k++) printf("dtype_%s: %s\n", sl_model_group_names[k], in->group_dtype[k]);
        if (in->source_dtypes) printf("source_dtypes: %s\n", in->source_dtypes);
        for (int d = 0; d < 3; d++) printf("bytes_%s: %zu\n", d == 0 ? "f32" : d == 1 ? "f16" : "bf16", in->bytes_by_dtype[d]);
        if (in->has_tokenizer)
            printf("tokenizer: %s, %zu tokens\nbos_id: %d\neos_id: %d\n", in->tokenizer_kind, in->tokenizer_vocab,
                   (int)in->bos_id, (int)in->eos_id);
        else printf("tokenizer: absent\n");
        printf("sha256: %s\n", in->sha256);
        printf("training: %s\n", in->training ? in->training : "(none)");
        for (size_t i = 0; i < in->n_meta; i++) printf("meta.%s: %s\n", in->meta_keys[i], in->meta_vals[i]);
        return SL_OK;
    }
    static const sl_colspec cols[] = {
        SL_COL_S("path"), SL_COL_S("format"), SL_COL_S("arch"), SL_COL_I("vocab_size"), SL_COL_I("n_layer"),
        SL_COL_I("n_head"), SL_COL_I("n_kv_head"), SL_COL_I("d_model"), SL_COL_I("d_ff"), SL_COL_I("max_seq_len"),
        SL_COL_D("norm_eps", "%g"), SL_COL_D("rope_theta", "%g"), SL_COL_I("tied_embeddings"), SL_COL_I("n_params"),
        SL_COL_S("dtype_embeddings"), SL_COL_S("dtype_attention"), SL_COL_S("dtype_mlp"), SL_COL_S("dtype_unembedding"),
        SL_COL_S("source_dtypes"), SL_COL_I("bytes_f32"), SL_COL_I("bytes_f16"), SL_COL_I("bytes_bf16"),
        SL_COL_I("tokenizer"), SL_COL_S("tokenizer_kind"), SL_COL_I("tokenizer_vocab"), SL_COL_I("bos_id"),
        SL_COL_I("eos_id"), SL_COL_I("tokenizer_bytes"), SL_COL_S("sha256"), SL_COL_S("training")};
    sl_table *t = SL_TABLE_NEW("model", cols);
    sl_table_row(t);
    sl_table_sets(t, "path", in->path);
    sl_table_sets(t, "format", in->format);
    sl_table_sets(t, "arch", in->arch);
    for (size_t i = 0; i < 7; i++) sl_table_seti(t, sizes[i], (int64_t)vals[i]);
    sl_table_setd(t, "norm_eps", g->norm_eps);
    sl_table_setd(t, "rope_theta", llama ? g->rope_theta : NAN);
    sl_table_seti(t, "tied_embeddings", g->tied_embeddings);
    sl_table_seti(t, "n_params", (int64_t)in->n_params);
    for (int k = 0; k < SL_MODEL_N_GROUPS; k++) {
        char key[40];
        snprintf(key, sizeof key, "dtype_%s", sl_model_group_names[k]);
        sl_table_sets(t, key, in->group_dtype[k]);
    }
    if (in->source_dtypes) sl_table_sets(t, "source_dtypes", in->source_dtypes);
    sl_table_seti(t, "bytes_f32", (int64_t)in->bytes_by_dtype[SL_DT_F32]);
    sl_table_seti(t, "bytes_f16", (int64_t)in->bytes_by_dtype[SL_DT_F16]);
    sl_table_seti(t, "bytes_bf16", (int64_t)in->bytes_by_dtype[SL_DT_BF16]);
    sl_table_seti(t, "tokenizer", in->has_tokenizer);
    if (in->has_tokenizer) {
        sl_table_sets(t, "tokenizer_kind", in->tokenizer_kind);
        sl_table_seti(t, "tokenizer_vocab", (int64_t)in->tokenizer_vocab);
        sl_table_seti(t, "bos_id", in->bos_id);
        sl_table_seti(t, "eos_id", in->eos_id);
    }
    sl_table_seti(t, "tokenizer_bytes", (int64_t)in->tokenizer_bytes);
    sl_table_sets(t, "sha256", in->sha256);
    if (in->training) sl_table_sets(t, "training", in->training);
    int rc = sl_table_status(t);
    if (!rc) rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    return rc;
}

static int model_info(int argc, char **argv)
{
    sl_format fmt = SL_FMT_TABLE;
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model info", "FILE [--format table|csv|json]",
                "Validates FILE and prints its architecture, config, parameter count, bytes per dtype,\n"
                "whether it carries a tokenizer, and its training metadata.\n");
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 2);
    if (rc) return rc < 0 ? 0 : rc;
    if (c.n_pos != 1) return sl_fail(SL_EINPUT, "model info needs exactly one FILE");
    sl_model_info in;
    if ((rc = sl_model_info_read(c.pos[0], &in))) return rc;
    rc = in.is_transformer ? print_info(&in, fmt) : sl_cmd_model_info_ngram(&in, fmt);
    sl_model_info_free(&in);
    return rc;
}

static int parse_arch(const char *flag, const char *arg, void *dst)
{
    return sl_arch_parse(arg, dst) ? sl_fail(SL_EINPUT, "%s: '%s' is not gpt2 or llama", flag, arg) : SL_OK;
}

static int parse_dtype(const char *flag, const char *arg, void *dst)
{
    return sl_dtype_parse(arg, dst) ? sl_fail(SL_EINPUT, "%s: '%s' is not f32, f16 or bf16", flag, arg) : SL_OK;
}

static int model_init(int argc, char **argv)
{
    sl_model_init_cfg cfg = {.dtype = SL_DT_F32, .init_std = 0.02};
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model init",
                "--arch gpt2|llama --config JSON --out FILE [--seed S] [--dtype f32|f16|bf16] [--init-std X] "
                "[--tokenizer-json FILE]",
                "Writes a model with random weights (matrices N(0, init_std^2), default 0.02; norm\n"
                "weights 1 + N(0, 0.01)), e.g. --config '{\"vocab_size\":256,\"n_layer\":2,\"n_head\":4,\n"
                "\"d_model\":64,\"d_ff\":256,\"max_seq_len\":128}'. --tokenizer-json embeds that file's\n"
                "text as the tokenizer metadata. An existing FILE is replaced only with --force.\n");
    sl_cli_custom(&c, "arch", "A", &cfg.arch, parse_arch, "gpt2 or llama");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "config", "JSON", &cfg.config_json, "the architecture (models/FORMAT.md's config object)");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "out", "FILE", &cfg.out_path, "the model file written");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_group_seed(&c, &cfg.seed, NULL);
    sl_cli_custom(&c, "dtype", "D", &cfg.dtype, parse_dtype, "stored weights: f32 (default), f16 or bf16");
    sl_cli_dbl(&c, "init-std", "X", &cfg.init_std, 0, 10, SL_OPT_LO_OPEN, "standard deviation of the matrices (default 0.02)");
    sl_cli_string(&c, "tokenizer-json", "FILE", &cfg.tokenizer_path, "tokenizer JSON embedded as the tokenizer metadata");
    int force = 0;
    sl_cli_group_force(&c, &force);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = sl_out_check("out", cfg.out_path, force, NULL))) return rc;
    return sl_model_init_file(&cfg);
}

static int parse_format(const char *flag, const char *arg, void *dst)
{
    return sl_model_format_parse(arg, dst) ? sl_fail(SL_EINPUT, "%s: '%s' is not speclab, gguf or llama2c", flag, arg)
                                           : SL_OK;
}

static int model_convert(int argc, char **argv)
{
    sl_model_format to = SL_FMT_SPECLAB;
    sl_export_opts o = {0};
    int version = -1;
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model convert", "IN OUT [--to speclab|gguf|llama2c] [--dtype D] [--version N] [--force]",
                "Reads IN in any format speclab opens (a speclab model, a Hugging Face GPT-2 folder, a\n"
                "llama2.c checkpoint, GGUF: told apart by content) and writes OUT in the native format\n"
                "(default), GGUF or llama2.c. The weights keep their type unless --dtype says otherwise\n"
                "(gguf: f32, f16, bf16, q8_0; llama2c: f32 with --version 0 or 1, Q8_0 with --version 2).\n"
                "llama2.c files also get OUT's stem + .tokenizer.bin when the model has a SentencePiece\n"
                "tokenizer. An existing OUT is replaced only with --force.\n");
    sl_cli_custom(&c, "to", "FORMAT", &to, parse_format, "speclab (default), gguf or llama2c");
    sl_cli_string(&c, "dtype", "D", &o.dtype, "the weights' type in OUT (default: as in IN)");
    sl_cli_int(&c, "version", "N", &version, 0, 3, "llama2c: 0 (legacy), 1 or 2; gguf: 2 or 3 (default 3)");
    sl_cli_group_force(&c, &o.force);
    int rc = sl_cli_parse(&c, argc, argv, 2);
    if (rc) return rc < 0 ? 0 : rc;
    if (c.n_pos != 2) return sl_fail(SL_EINPUT, "model convert needs IN and OUT");
    o.version = version < 0 ? (to == SL_FMT_GGUF ? 3 : 0) : version;
    if ((rc = sl_model_convert(c.pos[0], c.pos[1], to, &o))) return rc;
    fprintf(stderr, "model convert: wrote %s (%s)\n", c.pos[1], sl_model_format_name(to));
    return SL_OK;
}

static int model_probs(int argc, char **argv)
{
    const char *ids_arg = NULL;
    size_t top = 0;
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model probs", "MODEL --prompt-ids 1,2,3 [--top K]",
                "Prints, as JSON, the next-token distribution of MODEL (any format) after every prefix of the\n"
                "ids: {\"vocab_size\": V, \"ids\": [...], \"probs\": [[p_0 .. p_V-1], ...]} (row j follows\n"
                "ids[0..j]; softmax of the float32 logits in double, printed with 17 significant digits).\n"
                "--top K prints each row's K most probable tokens as [[id, p], ...] instead.\n");
    sl_cli_string(&c, "prompt-ids", "1,2,3", &ids_arg, "the token ids");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_size(&c, "top", "K", &top, 0, 1u << 30, "only the K most probable tokens of each row");
    int rc = sl_cli_parse(&c, argc, argv, 2);
    if (rc) return rc < 0 ? 0 : rc;
    if (c.n_pos != 1) return sl_fail(SL_EINPUT, "model probs needs exactly one MODEL");
    int32_t *ids = NULL;
    size_t n = 0;
    if ((rc = sl_cli_ids("--prompt-ids", ids_arg, &ids, &n))) return rc;
    sl_model_probs p;
    rc = sl_model_next_probs(c.pos[0], ids, n, &p);
    if (rc) {
        free(ids);
        return rc;
    }
    const size_t V = p.vocab_size;
    size_t *order = top ? sl_malloc(V * sizeof *order) : NULL;
    if (top && !order) rc = SL_EFAIL;
    printf("{\"vocab_size\": %zu, \"ids\": [", V);
    for (size_t j = 0; j < n; j++) printf("%s%d", j ? ", " : "", (int)ids[j]);
    printf("], \"probs\": [");
    for (size_t j = 0; j < n && !rc; j++) {
        const double *row = p.probs + j * V;
        printf("%s\n[", j ? "," : "");
        if (!top) {
            for (size_t v = 0; v < V; v++) printf("%s%.17g", v ? ", " : "", row[v]);
        } else {
            /* K largest by selection: K passes over V (K is small in practice); ties to the lower id. */
            size_t k = top < V ? top : V;
            for (size_t v = 0; v < V; v++) order[v] = v;
            for (size_t i = 0; i < k; i++) {
                size_t best = i;
                for (size_t v = i + 1; v < V; v++)
                    if (row[order[v]] > row[order[best]] || (row[order[v]] == row[order[best]] && order[v] < order[best]))
                        best = v;
                size_t tmp = order[i];
                order[i] = order[best];
                order[best] = tmp;
                printf("%s[%zu, %.17g]", i ? ", " : "", order[i], row[order[i]]);
            }
        }
        printf("]");
    }
    printf("]}\n");
    free(order);
    free(ids);
    sl_model_probs_free(&p);
    return rc;
}

int sl_cmd_model(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? sl_fail(SL_EINPUT, "model needs a subcommand: info, init, convert, probs, ngram or lookup") : 0;
    }
    if (!strcmp(argv[1], "info")) return model_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "init")) return model_init(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return model_convert(argc - 1, argv + 1);
    if (!strcmp(argv[1], "probs")) return model_probs(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ngram")) return sl_cmd_model_ngram(argc - 1, argv + 1);
    if (!strcmp(argv[1], "lookup")) return sl_cmd_model_lookup(argc - 1, argv + 1);
    return sl_fail(SL_EINPUT, "unknown model subcommand '%s' (expected info, init, convert, probs, ngram or lookup)", argv[1]);
}
