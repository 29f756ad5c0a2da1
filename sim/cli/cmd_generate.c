/*
 * cmd_generate.c: `speclab generate`: speculative decoding (sl_spec_decode) with a real target and
 * draft model, or plain autoregressive sampling from the target (analysis/sl_generate.h), of one
 * continuation or K; prints the text (or token ids when the model carries no tokenizer) and the
 * acceptance statistics.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sl_cli.h"
#include "sl_generate.h"

static const char about[] =
    "Generates N tokens after the prompt from target model T, drafting G tokens per iteration with\n"
    "draft model D, and prints the text\n"
    "(token ids when T has no tokenizer) and the acceptance statistics: alpha_hat = accepted /\n"
    "drafted. The same sampling settings standardise both models' logits. --eos defaults to the\n"
    "tokenizer's end-of-sequence token (<|endoftext|>, </s>) when there is one; -1 disables\n"
    "stopping. Same seed, same output, whatever the thread count.\n"
    "--autoregressive samples from T alone (no --draft, --gamma or rule options) and reports the\n"
    "decoding time instead of acceptance.\n"
    "--samples K draws K continuations of the prompt, scoring it once; sample i uses the random\n"
    "streams of item i, so sample 0 is what the same command without --samples prints. The table\n"
    "format prints one line per sample, `INDEX<TAB>TEXT` with \\, newline, CR and tab escaped as\n"
    "\\\\ \\n \\r \\t (`INDEX<TAB>ID ID ...` without a tokenizer), then the summary; csv and json\n"
    "give a `samples` table (sample, n_new, token_ids, text). --threads N spreads the samples over\n"
    "N workers, each with its own single-threaded copy of the models: the same output for any N.\n"
    "--tokens-out FILE writes lines `SAMPLE MODE t1,t2,...` (the format of run --tokens-out, for\n"
    "verify --two-sample); an existing file is replaced only if it holds such lines.\n"
    "T and D: model files (gpt2, llama or ngram; models/FORMAT.md) or lookup:N[:EPS[:NGRAM_FILE]]\n"
    "(prompt lookup, models/README.md); they must share a vocabulary.\n";


/* The continuations on their own lines, then the statistics. */
static int print_table(const sl_generate_result *r, sl_table *summary)
{
    for (size_t s = 0; s < r->n_samples; s++) {
        const sl_generate_sample *x = &r->samples[s];
        if (r->listed) printf("%zu\t", s);
        if (x->text && r->listed) sl_generate_write_escaped(stdout, x->text);
        else if (x->text) printf("%s", x->text);
        else
            for (size_t i = 0; i < x->n_out; i++) printf("%s%d", i ? " " : "", x->tokens[i]);
        printf("\n");
    }
    printf("\n");
    return sl_table_write(summary, stdout, SL_FMT_TABLE);
}

int sl_cmd_generate(int argc, char **argv)
{
    sl_generate_config g = {.sampling = SL_SAMPLING_DEFAULT, .rule = SL_SPEC_CONFIG_DEFAULT};
    const char *ids_arg = NULL;
    long eos = -1;
    sl_format fmt = SL_FMT_TABLE;
    sl_cli c;
    sl_cli_init(&c, "generate",
                "--target T --draft D --gamma G (--prompt-ids 1,2,3 | --prompt TEXT)\n"
                "                        --tokens N [--samples K [--threads N]] [--tokens-out FILE] [--seed S]\n"
                "                        [--temperature X] [--top-k K] [--top-p P] [--min-p M]\n"
                "                        [--rule exact|lenient|...] [--lenience L] [--eos ID] [--format table|csv|json]\n"
                "       speclab generate --autoregressive --target T (--prompt-ids 1,2,3 | --prompt TEXT) --tokens N\n"
                "                        [--samples K [--threads N]] [--tokens-out FILE]\n"
                "                        [sampling, --seed, --eos, --format as above]",
                about);
    sl_cli_string(&c, "target", "T", &g.target, "target model");
    sl_cli_string(&c, "draft", "D", &g.draft, "draft model");
    sl_cli_size(&c, "gamma", "G", &g.gamma, 1, SL_SPEC_GAMMA_MAX, "drafts per iteration");
    sl_cli_flag(&c, "autoregressive", &g.autoregressive, "sample from the target alone (no draft)");
    sl_cli_string(&c, "prompt-ids", "1,2,3", &ids_arg, "the prompt as comma-separated token ids");
    sl_cli_string(&c, "prompt", "TEXT", &g.prompt, "the prompt as text (needs the target's tokenizer)");
    sl_cli_size(&c, "tokens", "N", &g.tokens, 1, (size_t)1 << 30, "new tokens to generate");
    sl_cli_size(&c, "samples", "K", &g.samples, 1, (size_t)1 << 24,
                "K continuations of the prompt, one line each; sample i from the seed's item i");
    sl_cli_string(&c, "tokens-out", "FILE", &g.tokens_out, "also write the continuations' token ids (run's format)");
    sl_cli_group_seed(&c, &g.seed, NULL);
    sl_cli_size(&c, "threads", "N", &g.threads, 1, 1024,
                "--samples: N workers, each with its own single-threaded models (default 1: one worker, the "
                "models threaded); the output does not depend on it");
    sl_cli_group_sampling(&c, &g.sampling);
    sl_cli_group_rule(&c, &g.rule);
    sl_cli_long(&c, "eos", "ID", &eos, -1, INT32_MAX, "stop at this token; -1 = never (default: the tokenizer's)");
    sl_cli_group_device(&c, NULL);
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (g.autoregressive) {
        static const char *const spec_only[] = {"draft", "gamma", "rule", "lenience"};
        for (size_t i = 0; i < sizeof spec_only / sizeof *spec_only; i++)
            if (sl_cli_given(&c, spec_only[i]))
                return sl_fail(SL_EINPUT, "--%s: autoregressive generation drafts nothing; drop --%s or --autoregressive",
                               spec_only[i], spec_only[i]);
        if (!g.target) return sl_fail(SL_EINPUT, "--target is required");
    } else {
        if (!g.target || !g.draft) return sl_fail(SL_EINPUT, "--target and --draft are required (or --autoregressive)");
        if (!sl_cli_given(&c, "gamma")) return sl_fail(SL_EINPUT, "--gamma is required");
    }
    if (!sl_cli_given(&c, "tokens")) return sl_fail(SL_EINPUT, "--tokens is required");
    if (sl_cli_given(&c, "threads") && !g.samples)
        return sl_fail(SL_EINPUT, "--threads: workers share the samples of --samples K; give --samples");
    if (!ids_arg == !g.prompt) return sl_fail(SL_EINPUT, "give exactly one of --prompt-ids and --prompt");
    if (!g.autoregressive && (rc = sl_spec_config_validate(&g.rule))) return rc;
    g.eos_set = sl_cli_given(&c, "eos");
    g.eos = (int32_t)eos;
    g.target_role = "--target";
    g.draft_role = "--draft";
    int32_t *ids = NULL;
    sl_generate_result *r = NULL;
    sl_table *t[2] = {0};
    size_t nt = 0;
    if (ids_arg && (rc = sl_cli_ids("--prompt-ids", ids_arg, &ids, &g.n_prompt_ids))) return rc;
    g.prompt_ids = ids;
    if (!(rc = sl_generate_run(&g, &r)) && !(rc = sl_generate_report(r, t, &nt)))
        rc = fmt == SL_FMT_TABLE ? print_table(r, t[1]) : sl_report_write(t, nt, stdout, fmt);
    for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
    sl_generate_result_free(r);
    free(ids);
    return rc;
}
