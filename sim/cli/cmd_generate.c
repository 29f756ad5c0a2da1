/*
 * cmd_generate.c: `speclab generate`: speculative decoding (sl_spec_decode) with a real target and
 * draft model (analysis/sl_generate.h), printing the text (or token ids when the model carries no
 * tokenizer) and the acceptance statistics.
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
    "tokenizer's <|endoftext|> when there is one; -1 disables stopping. Same seed, same output,\n"
    "whatever the thread count.\n"
    "T and D: model files (gpt2, llama or ngram; models/FORMAT.md) or lookup:N[:EPS[:NGRAM_FILE]]\n"
    "(prompt lookup, models/README.md); they must share a vocabulary.\n";

/* "1,2,3" -> ids (malloc'd). Range against the vocabulary is checked later, by the library. */
static int parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = sl_malloc(cap * sizeof *v);
    if (!v) return SL_EFAIL;
    size_t k = 0;
    const char *p = s;
    while (1) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != 0) || x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return sl_fail(SL_EINPUT, "--prompt-ids: '%s' is not a comma-separated list of integers", s);
        }
        v[k++] = (int32_t)x;
        if (!*end) break;
        p = end + 1;
    }
    *ids = v;
    *n = k;
    return SL_OK;
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
                "                        --tokens N [--seed S] [--temperature X] [--top-k K] [--top-p P] [--min-p M]\n"
                "                        [--rule exact|lenient|...] [--lenience L] [--eos ID] [--format table|csv|json]",
                about);
    sl_cli_string(&c, "target", "T", &g.target, "target model");
    sl_cli_string(&c, "draft", "D", &g.draft, "draft model");
    sl_cli_size(&c, "gamma", "G", &g.gamma, 1, SL_SPEC_GAMMA_MAX, "drafts per iteration");
    sl_cli_string(&c, "prompt-ids", "1,2,3", &ids_arg, "the prompt as comma-separated token ids");
    sl_cli_string(&c, "prompt", "TEXT", &g.prompt, "the prompt as text (needs the target's tokenizer)");
    sl_cli_size(&c, "tokens", "N", &g.tokens, 1, (size_t)1 << 30, "new tokens to generate");
    sl_cli_group_seed(&c, &g.seed, NULL);
    sl_cli_group_sampling(&c, &g.sampling);
    sl_cli_group_rule(&c, &g.rule);
    sl_cli_long(&c, "eos", "ID", &eos, -1, INT32_MAX, "stop at this token; -1 = never (default: the tokenizer's)");
    sl_cli_group_format(&c, &fmt);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (!g.target || !g.draft) return sl_fail(SL_EINPUT, "--target and --draft are required");
    if (!sl_cli_given(&c, "gamma")) return sl_fail(SL_EINPUT, "--gamma is required");
    if (!sl_cli_given(&c, "tokens")) return sl_fail(SL_EINPUT, "--tokens is required");
    if (!ids_arg == !g.prompt) return sl_fail(SL_EINPUT, "give exactly one of --prompt-ids and --prompt");
    if ((rc = sl_spec_config_validate(&g.rule))) return rc;
    g.eos_set = sl_cli_given(&c, "eos");
    g.eos = (int32_t)eos;
    g.target_role = "--target";
    g.draft_role = "--draft";
    int32_t *ids = NULL;
    sl_generate_result *r = NULL;
    sl_table *t[2] = {0};
    size_t nt = 0;
    if (ids_arg && (rc = parse_ids(ids_arg, &ids, &g.n_prompt_ids))) return rc;
    g.prompt_ids = ids;
    if (!(rc = sl_generate_run(&g, &r)) && !(rc = sl_generate_report(r, t, &nt))) {
        if (fmt == SL_FMT_TABLE) {
            /* The text (or ids) on its own lines, then the statistics. */
            if (r->text) printf("%s\n", r->text);
            else {
                for (size_t i = 0; i < r->n_out; i++) printf("%s%d", i ? " " : "", r->tokens[i]);
                printf("\n");
            }
            printf("\n");
            rc = sl_table_write(t[1], stdout, SL_FMT_TABLE);
        } else {
            rc = sl_report_write(t, nt, stdout, fmt);
        }
    }
    for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
    sl_generate_result_free(r);
    free(ids);
    return rc;
}
