/* cmd_measure.c: `speclab measure`: log p and q of a model pair, per generated token, to HDF5. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_log.h"
#include "sl_synth.h"

#include "sl_lm_open.h"
#include "sl_model.h"
#include "sl_prompts.h"
#include "sl_tok.h"

static void usage(void)
{
    printf("usage: speclab measure --synthetic FAMILY --tokens N --out OUT.h5 [options]\n"
           "       speclab measure --target T --draft D --prompts FILE --tokens N --out OUT.h5 [--tokenizer F]\n"
           "\n"
           "The target generates N tokens after each prompt; at every position the standardised target p\n"
           "and draft q over the whole vocabulary give beta = sum min(p, q), D_LK, both entropies, max q,\n"
           "p(token), q(token), logged per token (schema: analysis/LOG_SCHEMA.md). Crash-safe and\n"
           "resumable: rows go to shards OUT.h5.d/shard-NNNNNN.h5; a rerun skips finished shards; a longer\n"
           "prompt list adds shards; OUT.h5 is (re)assembled atomically at the end.\n"
           "\n"
           "  --target T, --draft D  model files (gpt2, llama, ngram; models/FORMAT.md) or lookup:N[:EPS[:NGRAM]];\n"
           "                        --prompts FILE: text prompts (data/prompts/),\n"
           "                        tokenized with the target's embedded tokenizer or --tokenizer F\n"
           "  --synthetic F         noisy | tempered | identical | uniform (sim/sl_synth.h)\n"
           "  --vocab V             synthetic vocabulary (default 256)\n"
           "  --noise S             noisy: draft logit noise sd (default 1)\n"
           "  --draft-temperature T tempered: draft logits / T (default 1.5)\n"
           "  --context C           synthetic context length (default 4096)\n"
           "  --draft-vocab V       give the synthetic draft another vocabulary (to test the mismatch check)\n"
           "  --sequences K         synthetic: K random prompts (default 8)\n"
           "  --prompt-len L        synthetic: tokens per random prompt (default 4)\n"
           "  --prompt-ids FILE     prompts as token ids, one prompt per line (instead of random ones)\n"
           "  --tokens N            tokens generated per prompt (required)\n"
           "  --eos ID              stop a sequence at this token (default: none)\n"
           "  --temperature T, --top-k K, --top-p P, --min-p M   sampling settings for both models\n"
           "  --seed S              global seed (default 1): sequence s samples from (S, target stream, s)\n"
           "  --dist D              full distributions: float32 (default), float16, or none (beta-level only)\n"
           "  --shard-sequences S   sequences per shard (default 16)\n"
           "  --deflate L           compression level of per-token columns (default 4)\n"
           "  --dist-deflate L      compression level of distributions (default 1)\n"
           "  --out OUT.h5          output file (required)\n"
           "  --format F            summary as table (default), csv or json\n");
}

/* Reads one prompt per line of whitespace-separated token ids. */
static int read_prompt_ids(const char *path, int32_t ***tok, size_t **len, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) return sl_fail(SL_EINPUT, "--prompt-ids: cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, np = 0, pcap = 0;
    int32_t **t = NULL;
    size_t *l = NULL;
    int rc = SL_OK;
    while (rc == SL_OK && getline(&line, &cap, f) > 0) {
        if (np == pcap) {
            pcap = pcap ? 2 * pcap : 64;
            t = realloc(t, pcap * sizeof *t);
            l = realloc(l, pcap * sizeof *l);
        }
        t[np] = malloc((strlen(line) / 2 + 2) * sizeof **t);
        l[np] = 0;
        char *s = line, *end;
        for (;;) {
            while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
            if (!*s) break;
            errno = 0;
            long v = strtol(s, &end, 10);
            if (end == s || errno || v < 0 || v > INT32_MAX) {
                rc = sl_fail(SL_EINPUT, "--prompt-ids: %s line %zu: '%.20s' is not a token id", path, np + 1, s);
                break;
            }
            t[np][l[np]++] = (int32_t)v;
            s = end;
        }
        if (!rc && l[np] == 0) rc = sl_fail(SL_EINPUT, "--prompt-ids: %s line %zu is empty", path, np + 1);
        np++;
    }
    free(line);
    fclose(f);
    if (!rc && np == 0) rc = sl_fail(SL_EINPUT, "--prompt-ids: %s holds no prompts", path);
    if (rc) {
        for (size_t i = 0; i < np; i++) free(t[i]);
        free(t);
        free(l);
        return rc;
    }
    *tok = t;
    *len = l;
    *n = np;
    return SL_OK;
}

/* Target and draft (any spec of models/sl_lm_open.h), text prompts tokenized with the target's
 * tokenizer (or --tokenizer), then sl_log_measure. */
static int measure_models(const char *target, const char *draft, const char *prompts, const char *tokenizer,
                          sl_log_meta *meta, const sl_log_write_opts *wo, const char *out)
{
    sl_lm_handle *ht = NULL, *hd = NULL;
    sl_tok *tok = NULL;
    sl_prompts *pr = NULL;
    int32_t **ids = NULL;
    size_t *len = NULL;
    sl_lm_open_opts ot = {meta->sampling, 0, "--target", NULL};
    int rc = sl_lm_open(target, &ot, &ht);
    sl_lm_open_opts od = {meta->sampling, ht ? ht->vocab_size : 0, "--draft", target};
    if (!rc) rc = sl_lm_open(draft, &od, &hd);
    if (!rc) rc = sl_tok_load_file(tokenizer ? tokenizer : ht->file ? ht->file : "", &tok);
    if (!rc && sl_tok_vocab_size(tok) > ht->vocab_size)
        rc = sl_fail(SL_EINPUT, "the tokenizer has %zu tokens, more than the models' %zu", sl_tok_vocab_size(tok),
                     ht->vocab_size);
    if (!rc) rc = sl_prompts_read(prompts, &pr);
    size_t ctx_len = !rc ? (ht->context < hd->context ? ht->context : hd->context) : 0, longest = 0;
    if (!rc) {
        ids = calloc(pr->n, sizeof *ids);
        len = calloc(pr->n, sizeof *len);
        if (!ids || !len) rc = sl_fail(SL_EFAIL, "out of memory");
    }
    for (size_t i = 0; !rc && i < pr->n; i++) {
        rc = sl_tok_encode(tok, pr->text[i], pr->len[i], &ids[i], &len[i]);
        if (!rc && len[i] + meta->tokens_per_sequence > ctx_len)
            rc = sl_fail(SL_EINPUT, "%s: prompt %zu has %zu tokens; with --tokens %llu that is longer than the context of %zu",
                         prompts, i + 1, len[i], (unsigned long long)meta->tokens_per_sequence, ctx_len);
        if (!rc && len[i] == 0) rc = sl_fail(SL_EINPUT, "%s: prompt %zu encodes to no tokens", prompts, i + 1);
        if (!rc && len[i] > longest) longest = len[i];
    }
    if (!rc) rc = sl_lm_start(ht, longest + meta->tokens_per_sequence);
    if (!rc) rc = sl_lm_start(hd, longest + meta->tokens_per_sequence);
    /* A spec without a file (lookup:N) has no content hash: "" as the schema allows. */
    if (!rc && ht->file) rc = sl_log_sha256_file(ht->file, meta->target_sha256);
    if (!rc && hd->file) rc = sl_log_sha256_file(hd->file, meta->draft_sha256);
    if (!rc) {
        snprintf(meta->target_name, sizeof meta->target_name, "%s", target);
        snprintf(meta->draft_name, sizeof meta->draft_name, "%s", draft);
        snprintf(meta->source, sizeof meta->source, "models; prompts %s", prompts);
        meta->vocab_size = ht->vocab_size;
        sl_log_prompts lp = {pr->n, (const int32_t *const *)ids, len, NULL};
        rc = sl_log_measure(&ht->lm, &hd->lm, &lp, meta, wo, out, sl_cli_progress_enabled());
    }
    for (size_t i = 0; ids && i < pr->n; i++) free(ids[i]);
    free(ids);
    free(len);
    sl_prompts_free(pr);
    if (tok) sl_tok_free(tok);
    sl_lm_close(ht);
    sl_lm_close(hd);
    return rc;
}

/* The one-row summary of a written measure log, read back from the file. */
static int print_summary(const char *out, sl_format fmt)
{
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, out);
    if (rc) return rc;
    sl_table *t = sl_table_alloc("measure");
    if (!t) {
        sl_log_close(r);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    const sl_log_meta *m = sl_log_meta_of(r);
    sl_table_add_col(t, "file", SL_COL_STRING, NULL);
    sl_table_add_col(t, "sequences", SL_COL_INT, NULL);
    sl_table_add_col(t, "positions", SL_COL_INT, NULL);
    sl_table_add_col(t, "vocab_size", SL_COL_INT, NULL);
    sl_table_add_col(t, "dist", SL_COL_STRING, NULL);
    sl_table_add_row(t);
    sl_table_set_string(t, 0, out);
    sl_table_set_int(t, 1, (int64_t)sl_log_n_sequences(r));
    sl_table_set_int(t, 2, (int64_t)sl_log_n_rows(r));
    sl_table_set_int(t, 3, (int64_t)m->vocab_size);
    sl_table_set_string(t, 4, sl_log_dist_name(m->dist));
    rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    sl_log_close(r);
    return rc;
}

int sl_cmd_measure(int argc, char **argv)
{
    static const struct option opts[] = {
        {"synthetic", required_argument, 0, 'S'},   {"vocab", required_argument, 0, 'V'},
        {"noise", required_argument, 0, 'n'},       {"draft-temperature", required_argument, 0, 'D'},
        {"context", required_argument, 0, 'C'},     {"sequences", required_argument, 0, 'K'},
        {"prompt-len", required_argument, 0, 'L'},  {"prompt-ids", required_argument, 0, 'I'},
        {"tokens", required_argument, 0, 'N'},      {"eos", required_argument, 0, 'E'},
        {"temperature", required_argument, 0, 'T'}, {"top-k", required_argument, 0, 'k'},
        {"top-p", required_argument, 0, 'P'},       {"min-p", required_argument, 0, 'm'},
        {"seed", required_argument, 0, 's'},        {"dist", required_argument, 0, 'd'},
        {"shard-sequences", required_argument, 0, 'H'}, {"deflate", required_argument, 0, 'z'},
        {"dist-deflate", required_argument, 0, 'Z'}, {"out", required_argument, 0, 'o'},
        {"format", required_argument, 0, 'f'},      {"target", required_argument, 0, 't'},
        {"draft", required_argument, 0, 'r'},       {"prompts", required_argument, 0, 'p'},
        {"draft-vocab", required_argument, 0, 'W'}, {"tokenizer", required_argument, 0, 'k' + 256},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sl_log_meta meta;
    sl_log_meta_init(&meta, SL_LOG_MEASURE);
    meta.dist = SL_LOG_DIST_F32;
    meta.seed = 1;
    sl_log_write_opts wo = SL_LOG_WRITE_OPTS_DEFAULT;
    const char *synthetic = NULL, *out = NULL, *prompt_ids = NULL, *target = NULL, *draft = NULL, *prompts = NULL,
               *tokenizer = NULL;
    long K = 8, L = 4, N = -1, v, draft_vocab = 0;
    sl_format fmt = SL_FMT_TABLE;
    int c, rc = SL_OK;
    optind = 1;
    opterr = 0;
    while (rc == SL_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'S': synthetic = optarg; rc = sl_synth_family_parse(optarg, &sp.family); break;
        case 'V': rc = sl_cli_long_in("--vocab", optarg, 2, 1L << 24, &v); sp.V = (size_t)v; break;
        case 'n': rc = sl_cli_double_in("--noise", optarg, 0, 0, 1e6, 0, &sp.noise); break;
        case 'D': rc = sl_cli_double_in("--draft-temperature", optarg, 0, 1, 1e6, 0, &sp.draft_temperature); break;
        case 'C': rc = sl_cli_long_in("--context", optarg, 1, 1L << 30, &v); sp.context = (size_t)v; break;
        case 'K': rc = sl_cli_long_in("--sequences", optarg, 1, 1L << 30, &K); break;
        case 'L': rc = sl_cli_long_in("--prompt-len", optarg, 1, 1L << 20, &L); break;
        case 'I': prompt_ids = optarg; break;
        case 'N': rc = sl_cli_long_in("--tokens", optarg, 1, 1L << 30, &N); break;
        case 'E': rc = sl_cli_long_in("--eos", optarg, 0, INT32_MAX, &v); meta.eos = v; break;
        case 'T': rc = sl_cli_double_in("--temperature", optarg, 0, 0, 1e6, 0, &meta.sampling.temperature); break;
        case 'k': rc = sl_cli_long_in("--top-k", optarg, 0, 1L << 30, &v); meta.sampling.top_k = (size_t)v; break;
        case 'P': rc = sl_cli_double_in("--top-p", optarg, 0, 1, 1, 0, &meta.sampling.top_p); break;
        case 'm': rc = sl_cli_double_in("--min-p", optarg, 0, 0, 1, 1, &meta.sampling.min_p); break;
        case 's': rc = sl_cli_u64("--seed", optarg, &meta.seed); break;
        case 'd': rc = sl_log_dist_parse(optarg, &meta.dist); break;
        case 'H': rc = sl_cli_long_in("--shard-sequences", optarg, 1, 1L << 30, &v); meta.shard_sequences = (uint64_t)v; break;
        case 'z': rc = sl_cli_long_in("--deflate", optarg, 0, 9, &v); wo.deflate_level = (int)v; break;
        case 'Z': rc = sl_cli_long_in("--dist-deflate", optarg, 0, 9, &v); wo.dist_level = (int)v; break;
        case 'o': out = optarg; break;
        case 'f': rc = sl_format_parse(optarg, &fmt); break;
        case 't': target = optarg; break;
        case 'r': draft = optarg; break;
        case 'p': prompts = optarg; break;
        case 'k' + 256: tokenizer = optarg; break;
        case 'W': rc = sl_cli_long_in("--draft-vocab", optarg, 2, 1L << 24, &draft_vocab); break;
        case 'h': usage(); return 0;
        default: return sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (rc) return rc;
    if (optind < argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (target || draft || prompts) {
        if (synthetic) return sl_fail(SL_EINPUT, "--synthetic cannot be combined with --target/--draft/--prompts");
        if (!target || !draft || !prompts) return sl_fail(SL_EINPUT, "give --target, --draft and --prompts together");
        if (N < 0) return sl_fail(SL_EINPUT, "--tokens is required");
        if (!out) return sl_fail(SL_EINPUT, "--out is required");
        meta.tokens_per_sequence = (uint64_t)N;
        rc = measure_models(target, draft, prompts, tokenizer, &meta, &wo, out);
        return rc ? rc : print_summary(out, fmt);
    }
    if (!synthetic) return sl_fail(SL_EINPUT, "give --synthetic FAMILY or --target/--draft/--prompts (see --help)");
    if (N < 0) return sl_fail(SL_EINPUT, "--tokens is required");
    if (!out) return sl_fail(SL_EINPUT, "--out is required");
    sp.seed = meta.seed;
    sp.sampling = meta.sampling;
    meta.tokens_per_sequence = (uint64_t)N;
    meta.vocab_size = sp.V;
    snprintf(meta.target_name, sizeof meta.target_name, "synthetic-target:%s", sl_synth_family_name(sp.family));
    snprintf(meta.draft_name, sizeof meta.draft_name, "synthetic-draft:%s", sl_synth_family_name(sp.family));
    snprintf(meta.source, sizeof meta.source, "synthetic:%s vocab=%zu noise=%.17g draft_temperature=%.17g context=%zu",
             sl_synth_family_name(sp.family), sp.V, sp.noise, sp.draft_temperature, sp.context);

    int32_t **ptok = NULL;
    size_t *plen = NULL, np = 0;
    if (prompt_ids) {
        rc = read_prompt_ids(prompt_ids, &ptok, &plen, &np);
        for (size_t i = 0; !rc && i < np; i++)
            for (size_t j = 0; j < plen[i] && !rc; j++)
                if ((size_t)ptok[i][j] >= sp.V)
                    rc = sl_fail(SL_EINPUT, "--prompt-ids: prompt %zu holds token %d outside the vocabulary [0, %zu)", i,
                                 ptok[i][j], sp.V);
    } else {
        np = (size_t)K;
        ptok = calloc(np, sizeof *ptok);
        plen = calloc(np, sizeof *plen);
        gsl_rng *r = sl_rng_alloc(meta.seed, SL_STREAM_DATA, 0);
        for (size_t i = 0; i < np && ptok && plen && r; i++) {
            sl_rng_reseed(r, meta.seed, SL_STREAM_DATA, i);
            ptok[i] = malloc((size_t)L * sizeof **ptok);
            plen[i] = (size_t)L;
            for (long j = 0; ptok[i] && j < L; j++) ptok[i][j] = (int32_t)gsl_rng_uniform_int(r, sp.V);
        }
        if (r) gsl_rng_free(r);
    }
    sl_synth_lm *mt = NULL, *md = NULL;
    if (!rc) rc = sl_synth_alloc(&sp, 0, &mt);
    sl_synth_params spd = sp;
    if (draft_vocab) spd.V = (size_t)draft_vocab;
    if (!rc) rc = sl_synth_alloc(&spd, 1, &md);
    if (!rc) {
        sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
        sl_log_prompts pr = {np, (const int32_t *const *)ptok, plen, NULL};
        rc = sl_log_measure(&lt, &ld, &pr, &meta, &wo, out, sl_cli_progress_enabled());
    }
    if (!rc) rc = print_summary(out, fmt);
    sl_synth_free(mt);
    sl_synth_free(md);
    for (size_t i = 0; ptok && i < np; i++) free(ptok[i]);
    free(ptok);
    free(plen);
    return rc;
}
