/* test_model_files.c: the library calls behind `speclab tokenize`, `model info|init|ngram|lookup` and
 * the training defaults (sl_tok_files.c, sl_model_info.c, sl_ngram_build.c, sl_train_opts.c), each
 * checked against the lower-level functions it wraps or against counts done here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_model.h"
#include "sl_ngram.h"
#include "sl_tok.h"
#include "sl_train_opts.h"

/* A fresh directory under /tmp; every test writes its files there. */
static void tmpdir(char *dir /* >= 32 bytes */)
{
    strcpy(dir, "/tmp/sl_test_mfiles_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

/* Removes the directory tmpdir made, with its files (no subdirectories). */
static void rmdir_files(const char *dir)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static const char *CORPUS[2] = {"the cat sat on the mat, the cat ate the rat. <|endoftext|>the end",
                                "int main(void) { return 0; } int x = 1; int y = 2; über 日本"};

Test(tokfiles, train_files_equals_in_memory_training)
{
    char dir[64], p0[96], p1[96];
    tmpdir(dir);
    snprintf(p0, sizeof p0, "%s/a.txt", dir);
    snprintf(p1, sizeof p1, "%s/b.txt", dir);
    write_file(p0, CORPUS[0], strlen(CORPUS[0]));
    write_file(p1, CORPUS[1], strlen(CORPUS[1]));
    const char *paths[2] = {p0, p1};
    sl_tok_train_files_cfg cfg = {.corpus = paths, .n_corpus = 2, .vocab_size = 270, .min_count = 2};
    sl_tok_train_files_result res;
    cr_assert_eq(sl_tok_train_files(&cfg, &res), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(res.corpus_bytes, strlen(CORPUS[0]) + strlen(CORPUS[1]));

    size_t lens[2] = {strlen(CORPUS[0]), strlen(CORPUS[1])};
    sl_tok_train_opts o = {.min_count = 2};
    sl_tok *ref;
    cr_assert_eq(sl_tok_train(CORPUS, lens, 2, 270, &o, &ref), SL_OK);
    char *a = sl_tok_to_json(res.tok), *b = sl_tok_to_json(ref);
    cr_assert_str_eq(a, b, "training from files = training from the same bytes in memory");

    /* sl_tok_save writes exactly the JSON form. */
    char out[96];
    snprintf(out, sizeof out, "%s/tok.json", dir);
    cr_assert_eq(sl_tok_save(res.tok, out), SL_OK);
    sl_tok *back;
    cr_assert_eq(sl_tok_load_file(out, &back), SL_OK, "%s", sl_errmsg());
    char *c = sl_tok_to_json(back);
    cr_assert_str_eq(a, c);
    free(a), free(b), free(c);
    sl_tok_free(ref);
    sl_tok_free(back);
    sl_tok_train_files_result_free(&res);

    /* Bad corpus files name the quantity and the file. */
    write_file(p1, "", 0);
    cr_assert_eq(sl_tok_train_files(&cfg, &res), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "corpus: ", 8) && strstr(sl_errmsg(), "b.txt: the file is empty"), "%s", sl_errmsg());
    cr_assert_null(res.tok);
    write_file(p1, "ok \xff bad", 8);
    cr_assert_eq(sl_tok_train_files(&cfg, &res), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "not valid UTF-8 at byte 3"), "%s", sl_errmsg());
    rmdir_files(dir);
}

Test(tokfiles, encode_decode_files_match_direct_calls)
{
    char dir[64], tokp[96], in[96], tokf[96], idsf[96], back[96];
    tmpdir(dir);
    snprintf(tokp, sizeof tokp, "%s/tok.json", dir);
    snprintf(in, sizeof in, "%s/in.bin", dir);
    snprintf(tokf, sizeof tokf, "%s/x.tok", dir);
    snprintf(idsf, sizeof idsf, "%s/ids.txt", dir);
    snprintf(back, sizeof back, "%s/back.bin", dir);
    size_t lens[2] = {strlen(CORPUS[0]), strlen(CORPUS[1])};
    sl_tok *t;
    cr_assert_eq(sl_tok_train(CORPUS, lens, 2, 280, NULL, &t), SL_OK);
    cr_assert_eq(sl_tok_save(t, tokp), SL_OK);
    static const char bytes[] = "binary \x00\xff\xfe tail <|endoftext|> the cat \xe2\x82";
    const size_t nb = sizeof bytes - 1;
    write_file(in, bytes, nb);
    int32_t *ref;
    size_t n_ref;
    cr_assert_eq(sl_tok_encode(t, bytes, nb, &ref, &n_ref), SL_OK);

    sl_tok_encode_cfg ec = {.tokenizer = tokp, .in_path = in, .out_path = tokf};
    sl_tok_encode_result er;
    cr_assert_eq(sl_tok_encode_file(&ec, &er), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(er.n_bytes, nb);
    cr_assert_eq(er.vocab_size, sl_tok_vocab_size(t));
    cr_assert_eq(er.n_ids, n_ref);
    cr_assert(!memcmp(er.ids, ref, n_ref * sizeof *ref));
    int32_t *fid;
    size_t fn, fv;
    cr_assert_eq(sl_tokfile_read(tokf, &fid, &fn, &fv), SL_OK);
    cr_assert(fn == n_ref && fv == sl_tok_vocab_size(t) && !memcmp(fid, ref, n_ref * sizeof *ref), "the token file holds the ids");
    free(fid);

    /* Decoding the token file, and the same ids as text, gives the bytes back. */
    sl_tok_decode_cfg dc = {.tokenizer = tokp, .in_path = tokf, .out_path = back};
    sl_tok_decode_result dr;
    cr_assert_eq(sl_tok_decode_file(&dc, &dr), SL_OK, "%s", sl_errmsg());
    cr_assert(dr.n_bytes == nb && !memcmp(dr.bytes, bytes, nb));
    sl_tok_decode_result_free(&dr);
    FILE *f = fopen(idsf, "w");
    for (size_t i = 0; i < n_ref; i++) fprintf(f, i % 3 ? " %d" : ",%d\n", ref[i]);
    fclose(f);
    dc.in_path = idsf;
    dc.out_path = NULL;
    cr_assert_eq(sl_tok_decode_file(&dc, &dr), SL_OK, "%s", sl_errmsg());
    cr_assert(dr.n_bytes == nb && !memcmp(dr.bytes, bytes, nb));
    sl_tok_decode_result_free(&dr);
    f = fopen(back, "rb");
    char buf[128];
    cr_assert_eq(fread(buf, 1, sizeof buf, f), nb, "decode wrote out_path");
    fclose(f);
    cr_assert(!memcmp(buf, bytes, nb));
    sl_tok_encode_result_free(&er);

    /* JSON lines: each line on its own; a bad line keeps the lines before it. */
    static const char jl[] = "\"the cat\"\n\"int x\"\n42\n\"never\"\n";
    write_file(in, jl, sizeof jl - 1);
    sl_tok_encode_cfg jc = {.tokenizer = tokp, .in_path = in, .jsonl = 1};
    cr_assert_eq(sl_tok_encode_file(&jc, &er), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "in.bin:3: expected a JSON string"), "%s", sl_errmsg());
    cr_assert_eq(er.n_lines, 2);
    const char *lines[2] = {"the cat", "int x"};
    size_t at = 0;
    for (int i = 0; i < 2; i++) {
        int32_t *li;
        size_t ln;
        cr_assert_eq(sl_tok_encode(t, lines[i], strlen(lines[i]), &li, &ln), SL_OK);
        cr_assert_eq(er.line_end[i] - at, ln);
        cr_assert(!memcmp(er.ids + at, li, ln * sizeof *li));
        at = er.line_end[i];
        free(li);
    }
    sl_tok_encode_result_free(&er);
    free(ref);
    sl_tok_free(t);

    /* Exactly one tokenizer source. */
    sl_tok *none;
    cr_assert_eq(sl_tok_open(NULL, NULL, &none), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "tokenizer: ", 11), "%s", sl_errmsg());
    rmdir_files(dir);
}

/* GPT-2 parameters counted by hand (tied embeddings): embeddings, per layer qkv + proj + 2 norms
 * + MLP (weights and biases), final norm. */
static size_t gpt2_params(size_t V, size_t S, size_t L, size_t d, size_t ff)
{
    size_t layer = (3 * d * d + 3 * d) + (d * d + d) + 2 * 2 * d + (d * ff + ff) + (ff * d + d);
    return V * d + S * d + L * layer + 2 * d;
}

Test(modelinfo, init_then_info_reports_the_config)
{
    char dir[64], tokp[96], mp[96];
    tmpdir(dir);
    snprintf(tokp, sizeof tokp, "%s/tok.json", dir);
    snprintf(mp, sizeof mp, "%s/m.st", dir);
    size_t lens[2] = {strlen(CORPUS[0]), strlen(CORPUS[1])};
    sl_tok *t;
    cr_assert_eq(sl_tok_train(CORPUS, lens, 2, 270, NULL, &t), SL_OK);
    cr_assert_eq(sl_tok_save(t, tokp), SL_OK);
    char *json = sl_tok_to_json(t);
    const size_t tv = sl_tok_vocab_size(t); /* 270 or fewer: training stops when no pair occurs twice */
    sl_tok_free(t);

    sl_model_init_cfg ic = {.arch = SL_ARCH_GPT2,
                            .config_json = "{\"vocab_size\":300,\"n_layer\":2,\"n_head\":2,\"d_model\":16,\"d_ff\":40,"
                                           "\"max_seq_len\":24}",
                            .seed = 5, .dtype = SL_DT_F16, .init_std = 0.1, .tokenizer_path = tokp, .out_path = mp};
    cr_assert_eq(sl_model_init_file(&ic), SL_OK, "%s", sl_errmsg());
    sl_model_info in;
    cr_assert_eq(sl_model_info_read(mp, &in), SL_OK, "%s", sl_errmsg());
    cr_assert(in.is_transformer);
    cr_assert_str_eq(in.arch, "gpt2");
    cr_assert_str_eq(in.path, mp);
    cr_assert(in.vocab_size == 300 && in.cfg.n_layer == 2 && in.cfg.n_head == 2 && in.cfg.n_kv_head == 2 &&
              in.cfg.d_model == 16 && in.cfg.d_ff == 40 && in.cfg.max_seq_len == 24 && in.cfg.tied_embeddings);
    const size_t np = gpt2_params(300, 24, 2, 16, 40);
    cr_assert_eq(in.n_params, np);
    /* f16 matrices; norm weights and biases: whatever is not f16 is f32. */
    cr_assert_eq(in.bytes_by_dtype[SL_DT_F16] / 2 + in.bytes_by_dtype[SL_DT_F32] / 4, np);
    cr_assert_eq(in.bytes_by_dtype[SL_DT_BF16], 0);
    cr_assert(in.has_tokenizer && in.tokenizer_bytes == strlen(json));
    cr_assert_not_null(in.training);
    cr_assert(strstr(in.training, "\"seed\": 5"), "%s", in.training);
    for (size_t i = 0; i < in.n_meta; i++)
        cr_assert(strcmp(in.meta_keys[i], "tokenizer") && strcmp(in.meta_keys[i], "config"), "reported fields are not meta");
    cr_assert(isnan(in.lookup_eps) && isnan(in.discount));
    sl_model_info_free(&in);
    free(json);

    /* A tokenizer with more tokens than the vocabulary is refused, naming the quantity. */
    ic.config_json = "{\"vocab_size\":64,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,\"max_seq_len\":8}";
    cr_assert_eq(sl_model_init_file(&ic), SL_EINPUT);
    char want[64];
    snprintf(want, sizeof want, "%zu tokens, more than vocab_size 64", tv);
    cr_assert(!strncmp(sl_errmsg(), "tokenizer_json: ", 16) && strstr(sl_errmsg(), want), "%s", sl_errmsg());
    ic.config_json = "{\"vocab_size\":64}";
    cr_assert_eq(sl_model_init_file(&ic), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "config: ", 8), "%s", sl_errmsg());
    rmdir_files(dir);
}

static void write_tok(const char *path, const int32_t *ids, size_t n, size_t V)
{
    cr_assert_eq(sl_tokfile_write(path, ids, n, V), SL_OK, "%s", sl_errmsg());
}

Test(ngrambuild, counts_match_a_naive_count_and_info_reports_them)
{
    enum { V = 40, N0 = 700, N1 = 300 };
    static int32_t a[N0], b[N1];
    for (int i = 0; i < N0; i++) a[i] = (i * 7 + i / 13) % V;
    for (int i = 0; i < N1; i++) b[i] = (i * i + 3) % 17;
    char dir[64], pa[96], pb[96], out[96], lk[96];
    tmpdir(dir);
    snprintf(pa, sizeof pa, "%s/a.tok", dir);
    snprintf(pb, sizeof pb, "%s/b.tok", dir);
    snprintf(out, sizeof out, "%s/bi.st", dir);
    snprintf(lk, sizeof lk, "%s/lk.st", dir);
    write_tok(pa, a, N0, V);
    write_tok(pb, b, N1, V);
    /* Distinct bigrams within each file, never across the boundary. */
    static char seen[V][V];
    size_t distinct = 0;
    for (int i = 1; i < N0; i++) distinct += !seen[a[i - 1]][a[i]]++;
    for (int i = 1; i < N1; i++) distinct += !seen[b[i - 1]][b[i]]++;

    const char *train[2] = {pa, pb};
    sl_ngram_build_cfg cfg = {.train = train, .n_train = 2, .vocab_size = V,
                              .opts = {2, sl_ngram_smoothing_default(2), 1.0, 0.0}, .out_path = out};
    sl_ngram *m;
    cr_assert_eq(sl_ngram_build(&cfg, &m), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(m->n_tokens, N0 + N1);
    cr_assert_eq(m->nnz, distinct);
    cr_assert_eq(m->smoothing, SL_NGRAM_KN);
    sl_model_info in;
    cr_assert_eq(sl_model_info_read(out, &in), SL_OK, "%s", sl_errmsg());
    cr_assert(!in.is_transformer);
    cr_assert_str_eq(in.arch, "ngram");
    cr_assert_str_eq(in.smoothing, "kn");
    cr_assert(in.order == 2 && in.vocab_size == V && in.n_tokens == N0 + N1 && in.distinct_bigrams == distinct);
    cr_assert_eq(in.discount, m->discount);
    cr_assert(in.lookup_n == 0 && isnan(in.lookup_eps) && !in.has_tokenizer);
    cr_assert(in.training && strstr(in.training, "\"train_files\"") && strstr(in.training, "b.tok"), "%s", in.training);
    sl_model_info_free(&in);
    sl_ngram_free(m);

    /* The lookup draft keeps the unigram of its fallback. */
    sl_lookup_build_cfg lc = {.n = 3, .eps = 0.25, .fallback = out, .out_path = lk};
    cr_assert_eq(sl_lookup_build(&lc), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(sl_model_info_read(lk, &in), SL_OK, "%s", sl_errmsg());
    cr_assert_str_eq(in.arch, "lookup");
    cr_assert(in.order == 1 && in.lookup_n == 3 && in.lookup_eps == 0.25 && in.n_tokens == N0 + N1 && isnan(in.discount));
    sl_model_info_free(&in);
    lc.n = 65;
    cr_assert_eq(sl_lookup_build(&lc), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "n: ", 3), "%s", sl_errmsg());

    /* Bad inputs name the quantity. */
    cfg.vocab_size = 64;
    cr_assert_eq(sl_ngram_build(&cfg, &m), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "vocabulary mismatch: train file") && strstr(sl_errmsg(), "vocab is 64"), "%s", sl_errmsg());
    write_tok(pb, b, 0, V);
    cfg.vocab_size = V;
    cr_assert_eq(sl_ngram_build(&cfg, &m), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "train: ", 7) && strstr(sl_errmsg(), "holds no tokens"), "%s", sl_errmsg());
    cr_assert_null(m);
    cr_assert_eq(sl_ngram_smoothing_default(1), SL_NGRAM_ADDK);
    rmdir_files(dir);
}

Test(trainopts, derived_defaults_follow_steps)
{
    sl_train_run_opts o;
    sl_train_run_opts_default(&o);
    sl_train_hparams h;
    sl_train_hparams_default(&h);
    cr_assert(!memcmp(&o.h, &h, sizeof h), "the hyperparameters are sl_train_hparams_default's");
    cr_assert(o.eval_batches == 8 && !o.eval_every && !o.ckpt_every && !o.train_path);
    o.h.steps = 250;
    sl_train_run_opts_derive(&o, 0);
    cr_assert(o.h.warmup == 25 && o.eval_every == 25 && o.ckpt_every == 25);
    sl_train_run_opts_default(&o);
    o.h.steps = 7;
    o.h.warmup = 3;
    o.ckpt_every = 4;
    sl_train_run_opts_derive(&o, 1);
    cr_assert(o.h.warmup == 3 && o.eval_every == 1 && o.ckpt_every == 4, "given values stay; eval_every at least 1");
    int obj = -1;
    cr_assert(sl_train_objective_parse("kl", &obj) == SL_OK && obj == SL_OBJ_KL);
    cr_assert(sl_train_objective_parse("tv", &obj) == SL_OK && obj == SL_OBJ_TV);
    cr_assert_eq(sl_train_objective_parse("js", &obj), SL_EINPUT);
    cr_assert(!strncmp(sl_errmsg(), "objective: ", 11), "%s", sl_errmsg());
}

/* Copies src to dst with the config's n_layer replaced: the tensors stay those of src. */
static void write_with_n_layer(const char *src, const char *dst, const char *n_layer)
{
    sl_st_file *f;
    cr_assert_eq(sl_st_open(src, &f), SL_OK, "%s", sl_errmsg());
    sl_st_wtensor *wt = calloc(f->n_tensors, sizeof *wt);
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sl_st_tensor *t = &f->tensors[i];
        wt[i] = (sl_st_wtensor){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(wt[i].shape, t->shape, sizeof t->shape);
    }
    char cfg[512];
    const char *old = sl_st_meta(f, "config"), *at = strstr(old, "\"n_layer\":");
    cr_assert_not_null(at);
    const char *end = strpbrk(at + 10, ",}");
    snprintf(cfg, sizeof cfg, "%.*s\"n_layer\":%s%s", (int)(at - old), old, n_layer, end);
    const char **vals = calloc(f->n_meta, sizeof *vals);
    for (size_t i = 0; i < f->n_meta; i++) vals[i] = strcmp(f->meta_keys[i], "config") ? f->meta_vals[i] : cfg;
    cr_assert_eq(sl_st_write(dst, wt, f->n_tensors, (const char *const *)f->meta_keys, vals, f->n_meta), SL_OK, "%s",
                 sl_errmsg());
    free(vals);
    free(wt);
    sl_st_close(f);
}

/* Issue 17, defect 4: a 16 KB file whose config claims 2^22 layers made the loader allocate 7.3 GB
 * (27 s) before it found the first missing tensor; 2^31 layers said "out of memory" (exit 1). The
 * config is now bounded by the file's tensor count first: exit 2, naming n_layer and the count.
 * One layer more than the file holds still gets the message naming the missing tensor. */
Test(modelinfo, config_counts_are_bounded_by_the_file_before_allocating)
{
    char dir[64], mp[96], bad[96];
    tmpdir(dir);
    snprintf(mp, sizeof mp, "%s/m.st", dir);
    snprintf(bad, sizeof bad, "%s/bad.st", dir);
    sl_model_init_cfg ic = {.arch = SL_ARCH_GPT2,
                            .config_json = "{\"vocab_size\":64,\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"d_ff\":32,"
                                           "\"max_seq_len\":16}",
                            .seed = 1, .dtype = SL_DT_F32, .init_std = 0.1, .out_path = mp};
    cr_assert_eq(sl_model_init_file(&ic), SL_OK, "%s", sl_errmsg());
    const char *big[] = {"4194304", "2147483648"};
    for (int i = 0; i < 2; i++) {
        write_with_n_layer(mp, bad, big[i]);
        sl_model *m = NULL;
        cr_assert_eq(sl_model_open(bad, &m), SL_EINPUT, "n_layer %s: %s", big[i], sl_errmsg());
        cr_assert_null(m);
        char want[64];
        snprintf(want, sizeof want, "n_layer = %s needs at least 16 tensors per layer", big[i]);
        cr_assert(strstr(sl_errmsg(), want) && strstr(sl_errmsg(), "the file holds 20"), "%s", sl_errmsg());
        sl_model_info in;
        cr_assert_eq(sl_model_info_read(bad, &in), SL_EINPUT, "%s", sl_errmsg());
    }
    write_with_n_layer(mp, bad, "2");
    sl_model *m = NULL;
    cr_assert_eq(sl_model_open(bad, &m), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "tensor 'layers.1.attn_norm.weight' is missing"), "%s", sl_errmsg());
    write_with_n_layer(mp, bad, "1");
    cr_assert_eq(sl_model_open(bad, &m), SL_OK, "%s", sl_errmsg());
    sl_model_close(m);
    rmdir_files(dir);
}
