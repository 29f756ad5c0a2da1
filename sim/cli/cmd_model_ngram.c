/*
 * cmd_model_ngram.c: `speclab model ngram` (unigram or bigram draft from corpus token files) and
 * `speclab model lookup` (a prompt-lookup draft as a file), and `model info` for both kinds. The
 * work is sl_ngram_build and sl_lookup_build (models/sl_ngram.h); file format models/FORMAT.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_model.h"
#include "sl_ngram.h"

int sl_cmd_model_ngram(int argc, char **argv);
int sl_cmd_model_lookup(int argc, char **argv);
int sl_cmd_model_info_ngram(const sl_model_info *in, sl_format fmt);

static int parse_smoothing(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_ngram_smoothing_parse(arg, dst);
}

int sl_cmd_model_ngram(int argc, char **argv)
{
    sl_cli_list train = {0};
    sl_ngram_build_cfg cfg = {.opts = {0, SL_NGRAM_KN, 1.0, 0.0}};
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model ngram",
                "--train FILE.tok [FILE.tok ...] --order 1|2 (--tokenizer TOK | --vocab V) --out FILE\n"
                "                           [--smoothing addk|absdisc|kn] [--add-k K] [--discount D]",
                "Counts unigrams (and bigrams, within each file) of the token files and writes a draft with a\n"
                "full smoothed distribution over the vocabulary (models/README.md, \"Drafts that are not\n"
                "transformers\"). Order 1: add-k (default k = 1). Order 2: interpolated Kneser-Ney (kn, the\n"
                "default) or absolute discounting backing off to the add-k unigram (absdisc); the discount D\n"
                "defaults to n1 / (n1 + 2 n2). The token files' vocabulary must be the tokenizer's (TOK: a\n"
                "tokenizer JSON or a model file that carries one); the tokenizer is embedded in the output.\n"
                "--vocab V instead: no tokenizer, the token files must have vocab_size V.\n");
    sl_cli_list_opt(&c, "train", "FILE.tok", &train, "a token file (repeatable; more files may follow)");
    sl_cli_int(&c, "order", "N", &cfg.opts.order, 1, 2, "1 (unigram) or 2 (bigram)");
    sl_cli_string(&c, "tokenizer", "TOK", &cfg.tokenizer, "the token files' tokenizer, embedded in the output");
    sl_cli_size(&c, "vocab", "V", &cfg.vocab_size, 2, INT32_MAX, "instead of --tokenizer: the token files' vocab_size");
    sl_cli_string(&c, "out", "FILE", &cfg.out_path, "the draft file written");
    sl_cli_custom(&c, "smoothing", "S", &cfg.opts.smoothing, parse_smoothing, "addk (order 1), absdisc or kn (order 2)");
    sl_cli_dbl(&c, "add-k", "K", &cfg.opts.add_k, 0, 1e9, SL_OPT_LO_OPEN, "k of the add-k unigram (default 1)");
    sl_cli_dbl(&c, "discount", "D", &cfg.opts.discount, 0, 1, SL_OPT_LO_OPEN, "bigram discount (default n1 / (n1 + 2 n2))");
    int force = 0;
    sl_cli_group_force(&c, &force);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (!rc && (!train.n || !cfg.opts.order || !cfg.out_path || !cfg.tokenizer == !cfg.vocab_size))
        rc = sl_fail(SL_EINPUT, "model ngram needs --train, --order, --out and one of --tokenizer and --vocab");
    if (!rc) rc = sl_out_check("out", cfg.out_path, force, NULL);
    if (!rc && !sl_cli_given(&c, "smoothing")) cfg.opts.smoothing = sl_ngram_smoothing_default(cfg.opts.order);
    cfg.train = train.v;
    cfg.n_train = train.n;
    sl_ngram *m = NULL;
    if (!rc) rc = sl_ngram_build(&cfg, &m);
    if (!rc && m->order == 2)
        printf("order 2, smoothing %s, %llu tokens, %zu distinct bigrams, discount %.4f -> %s\n",
               sl_ngram_smoothing_name(m->smoothing), (unsigned long long)m->n_tokens, m->nnz, m->discount, cfg.out_path);
    else if (!rc)
        printf("order 1, smoothing addk (k = %g), %llu tokens -> %s\n", m->add_k, (unsigned long long)m->n_tokens,
               cfg.out_path);
    sl_ngram_free(m);
    sl_cli_list_free(&train);
    return rc < 0 ? 0 : rc;
}

int sl_cmd_model_lookup(int argc, char **argv)
{
    sl_lookup_build_cfg cfg = {.eps = 0.1};
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "model lookup", "--n N [--epsilon E] --fallback NGRAM_FILE --out FILE",
                "Writes the prompt-lookup draft lookup:N:E:NGRAM_FILE as one file (arch lookup): the unigram\n"
                "counts and tokenizer of NGRAM_FILE (a unigram or bigram file) plus N and E.\n");
    sl_cli_size(&c, "n", "N", &cfg.n, 1, 64, "longest context suffix matched, in [1, 64]");
    sl_cli_dbl(&c, "epsilon", "E", &cfg.eps, 0, 1, SL_OPT_LO_OPEN, "weight of the fallback, in (0, 1] (default 0.1)");
    sl_cli_string(&c, "fallback", "NGRAM_FILE", &cfg.fallback, "n-gram file whose unigram is the fallback");
    sl_cli_string(&c, "out", "FILE", &cfg.out_path, "the draft file written");
    int force = 0;
    sl_cli_group_force(&c, &force);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc) return rc < 0 ? 0 : rc;
    if (!cfg.n || !cfg.fallback || !cfg.out_path)
        return sl_fail(SL_EINPUT, "model lookup needs --n, --fallback and --out");
    if ((rc = sl_out_check("out", cfg.out_path, force, NULL))) return rc;
    return sl_lookup_build(&cfg);
}

/* `speclab model info` for n-gram and lookup files: a record in text, one row otherwise. */
int sl_cmd_model_info_ngram(const sl_model_info *in, sl_format fmt)
{
    const int lookup = in->lookup_n > 0;
    if (fmt == SL_FMT_TABLE) {
        printf("path: %s\narch: %s\nvocab_size: %zu\norder: %d\nsmoothing: %s\nadd_k: %g\n", in->path, in->arch,
               in->vocab_size, in->order, in->smoothing, in->add_k);
        if (in->order == 2) printf("discount: %.17g\ndistinct_bigrams: %zu\n", in->discount, in->distinct_bigrams);
        if (lookup) printf("lookup_n: %zu\nlookup_epsilon: %g\n", in->lookup_n, in->lookup_eps);
        printf("n_tokens: %llu\ntokenizer: %s\ntraining: %s\n", (unsigned long long)in->n_tokens,
               in->has_tokenizer ? "present" : "absent", in->training ? in->training : "(none)");
        return SL_OK;
    }
    static const sl_colspec cols[] = {
        SL_COL_S("path"), SL_COL_S("arch"), SL_COL_I("vocab_size"), SL_COL_I("order"), SL_COL_S("smoothing"),
        SL_COL_D("add_k", "%.17g"), SL_COL_D("discount", "%.17g"), SL_COL_I("n_tokens"), SL_COL_I("distinct_bigrams"),
        SL_COL_I("lookup_n"), SL_COL_D("lookup_epsilon", "%.17g"), SL_COL_I("tokenizer"), SL_COL_S("training")};
    sl_table *t = SL_TABLE_NEW("model", cols);
    sl_table_row(t);
    sl_table_sets(t, "path", in->path);
    sl_table_sets(t, "arch", in->arch);
    sl_table_seti(t, "vocab_size", (int64_t)in->vocab_size);
    sl_table_seti(t, "order", in->order);
    sl_table_sets(t, "smoothing", in->smoothing);
    sl_table_setd(t, "add_k", in->add_k);
    sl_table_setd(t, "discount", in->discount);
    sl_table_seti(t, "n_tokens", (int64_t)in->n_tokens);
    sl_table_seti(t, "distinct_bigrams", (int64_t)in->distinct_bigrams);
    sl_table_seti(t, "lookup_n", (int64_t)in->lookup_n);
    sl_table_setd(t, "lookup_epsilon", in->lookup_eps);
    sl_table_seti(t, "tokenizer", in->has_tokenizer);
    if (in->training) sl_table_sets(t, "training", in->training);
    int rc = sl_table_status(t);
    if (!rc) rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    return rc;
}
