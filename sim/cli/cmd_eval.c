/*
 * cmd_eval.c: `speclab eval`: teacher-forced loss of any model (transformer, n-gram, lookup) on a
 * token file: nats and bits per token, and bits per byte given the text's size (analysis/sl_eval.h).
 */
#include <math.h>
#include <stdio.h>

#include "sl_cli.h"
#include "sl_eval.h"

static const char about[] =
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
    "size as K).\n";

int sl_cmd_eval(int argc, char **argv)
{
    sl_eval_config cfg = SL_EVAL_CONFIG_DEFAULT;
    long bytes = -1;
    sl_format fmt = SL_FMT_TABLE;
    sl_cli c;
    sl_cli_init(&c, "eval",
                "--model SPEC --tokens FILE.tok [--text FILE.txt | --bytes N]\n"
                "                    [--context C] [--windows K] [--format table|csv|json]",
                about);
    sl_cli_string(&c, "model", "SPEC", &cfg.model, "model file or lookup:N[:EPS[:NGRAM_FILE]]");
    sl_cli_string(&c, "tokens", "FILE.tok", &cfg.tokens, "token file to score");
    sl_cli_string(&c, "text", "FILE.txt", &cfg.text, "the text the tokens encode (its byte count)");
    sl_cli_long(&c, "bytes", "N", &bytes, 1, 1L << 62, "byte count of the text, instead of --text");
    sl_cli_size(&c, "context", "C", &cfg.context, 1, (size_t)1 << 24, "window length (default: the model's context)");
    sl_cli_size(&c, "windows", "K", &cfg.windows, 1, (size_t)1 << 30, "score K evenly spaced windows of C tokens");
    sl_cli_group_device(&c, NULL);
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (!cfg.model || !cfg.tokens) return sl_fail(SL_EINPUT, "eval needs --model and --tokens");
    if (cfg.text && bytes > 0) return sl_fail(SL_EINPUT, "give at most one of --text and --bytes");
    cfg.bytes = bytes > 0 ? (double)bytes : NAN;
    cfg.model_role = "--model";
    cfg.progress = sl_cli_progress_enabled();
    sl_eval_result *r = NULL;
    sl_table *t = NULL;
    if (!(rc = sl_eval_run(&cfg, &r)) && !(rc = sl_eval_report(r, &t))) rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    sl_eval_result_free(r);
    return rc;
}
