/*
 * cmd_tokenize.c: `speclab tokenize train|encode|decode` (byte-level BPE; encode and decode also
 * with the SentencePiece-style tokenizers of imported llama models). Parses, calls one function of
 * models/sl_tok.h ("whole files"), prints.
 */
#include <errno.h>
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

static int cmd_train(int argc, char **argv)
{
    sl_tok_train_files_cfg cfg = {.min_count = 2, .verbose = sl_cli_progress_enabled()};
    const char *out = NULL;
    sl_cli_list corpus = {0};
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, "tokenize train", "--corpus FILE [FILE...] --vocab-size N --out tokenizer.json [--min-count C]",
                "Learns byte-level BPE merges on the corpus files (UTF-8 text; <|endoftext|> separates\n"
                "documents). Vocabulary: 256 bytes, N-257 merges, <|endoftext|>. Deterministic: ties\n"
                "between equally frequent pairs go to the smaller (left id, right id). An existing --out\n"
                "file is replaced only with --force.\n");
    sl_cli_list_opt(&c, "corpus", "FILE", &corpus, "a UTF-8 corpus file (repeatable; more files may follow)");
    sl_cli_size(&c, "vocab-size", "N", &cfg.vocab_size, 257, (size_t)1 << 24, "vocabulary size, in [257, 2^24]");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "out", "FILE", &out, "the tokenizer JSON written here");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_add(&c, (sl_opt){.name = "min-count", .metavar = "C", .kind = SL_OPT_U64, .dst = &cfg.min_count,
                            .help = "smallest pair count worth a merge, >= 1 (default 2)"});
    int force = 0;
    sl_cli_group_force(&c, &force);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (!rc) rc = sl_out_check("out", out, force, NULL); /* before the training, not after */
    if (!rc && cfg.min_count < 1) rc = sl_fail(SL_EINPUT, "--min-count: 0 is below 1");
    if (!rc && !corpus.n) rc = sl_fail(SL_EINPUT, "--corpus: no corpus file given");
    cfg.corpus = corpus.v;
    cfg.n_corpus = corpus.n;
    sl_tok_train_files_result res = {0};
    if (!rc) rc = sl_tok_train_files(&cfg, &res);
    if (!rc)
        printf("trained %zu merges (vocab %zu) on %zu bytes in %.2f s\n", sl_tok_n_merges(res.tok),
               sl_tok_vocab_size(res.tok), res.corpus_bytes, res.train_s);
    if (!rc) rc = sl_tok_save(res.tok, out);
    sl_tok_train_files_result_free(&res);
    sl_cli_list_free(&corpus);
    return rc < 0 ? 0 : rc;
}

/* The options encode and decode share; returns the parse status. */
static int parse_io(int argc, char **argv, const char *name, const char *synopsis, const char *about,
                    const char **tok, const char **gpt2, const char **in, const char **out, int *jsonl, int *force)
{
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, name, synopsis, about);
    sl_cli_string(&c, "tokenizer", "FILE", tok, "tokenizer JSON (byte-bpe or sp-bpe), or a model file of any format that carries one");
    sl_cli_string(&c, "gpt2", "DIR", gpt2, "instead of --tokenizer: GPT-2's own DIR/encoder.json and DIR/vocab.bpe");
    sl_cli_string(&c, "in", "FILE", in, "input (default: stdin)");
    sl_cli_string(&c, "out", "FILE", out, "output (default: stdout; an existing FILE is replaced only with --force)");
    if (jsonl) sl_cli_flag(&c, "jsonl", jsonl, "each input line is a JSON string; one line of ids each");
    sl_cli_group_force(&c, force);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (!rc && !*tok == !*gpt2)
        return sl_fail(SL_EINPUT, "--tokenizer: required (tokenizer.json or model.safetensors), or --gpt2 DIR");
    if (!rc) rc = sl_out_check("out", *out, *force, NULL);
    return rc;
}

static void print_ids(const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
}

static int cmd_encode(int argc, char **argv)
{
    sl_tok_encode_cfg cfg = {0};
    int force = 0;
    int rc = parse_io(argc, argv, "tokenize encode",
                      "--tokenizer tokenizer.json|model.safetensors [--in FILE] [--out x.tok | --jsonl]",
                      "Reads bytes (stdin by default). With --out, writes a token file (models/TOKFILE.md)\n"
                      "and prints one summary line (bytes, tokens, bytes per token); without, prints the\n"
                      "ids on one line. --jsonl: each input line is a JSON string, one line of ids each.\n",
                      &cfg.tokenizer, &cfg.gpt2_dir, &cfg.in_path, &cfg.out_path, &cfg.jsonl, &force);
    if (rc) return rc < 0 ? 0 : rc;
    if (cfg.jsonl && cfg.out_path) return sl_fail(SL_EINPUT, "--jsonl prints ids on stdout; drop --out");
    sl_tok_encode_result res;
    rc = sl_tok_encode_file(&cfg, &res);
    /* With --jsonl the lines before a bad one were encoded: print them as they were. */
    for (size_t i = 0; i < res.n_lines; i++) {
        size_t a = i ? res.line_end[i - 1] : 0;
        print_ids(res.ids + a, res.line_end[i] - a);
    }
    if (!rc && !cfg.jsonl && cfg.out_path) {
        printf("%zu bytes -> %zu tokens (%.4f bytes per token) -> %s\n", res.n_bytes, res.n_ids,
               res.n_ids ? (double)res.n_bytes / (double)res.n_ids : 0.0, cfg.out_path);
    } else if (!rc && !cfg.jsonl) {
        print_ids(res.ids, res.n_ids);
        if (fflush(stdout)) rc = sl_fail(SL_EFAIL, "write to stdout failed");
    }
    sl_tok_encode_result_free(&res);
    return rc;
}

static int cmd_decode(int argc, char **argv)
{
    sl_tok_decode_cfg cfg = {0};
    int force = 0;
    int rc = parse_io(argc, argv, "tokenize decode",
                      "--tokenizer tokenizer.json|model.safetensors [--in x.tok|ids.txt] [--out FILE]",
                      "Reads a token file or whitespace-separated ids (stdin by default) and writes the\n"
                      "bytes (stdout by default).\n",
                      &cfg.tokenizer, &cfg.gpt2_dir, &cfg.in_path, &cfg.out_path, NULL, &force);
    if (rc) return rc < 0 ? 0 : rc;
    sl_tok_decode_result res;
    rc = sl_tok_decode_file(&cfg, &res);
    if (!rc && !cfg.out_path && (fwrite(res.bytes, 1, res.n_bytes, stdout) != res.n_bytes || fflush(stdout)))
        rc = sl_fail(SL_EFAIL, "write to stdout failed: %s", strerror(errno));
    sl_tok_decode_result_free(&res);
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
