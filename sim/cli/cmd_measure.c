/* cmd_measure.c: `speclab measure`: log p and q of a model pair, per generated token, to HDF5
 * (analysis/sl_measure.h). */
#include <stdint.h>
#include <stdio.h>

#include "sl_cli.h"
#include "sl_measure.h"

static const char about[] =
    "The target generates N tokens after each prompt; at every position the standardised target p\n"
    "and draft q over the whole vocabulary give beta = sum min(p, q), D_LK, both entropies, max q,\n"
    "p(token), q(token), logged per token (schema: analysis/LOG_SCHEMA.md). Crash-safe and\n"
    "resumable: rows go to shards OUT.h5.d/shard-NNNNNN.h5; a rerun skips finished shards; a longer\n"
    "prompt list adds shards; OUT.h5 is (re)assembled atomically at the end. An existing OUT.h5\n"
    "that is not a speclab measure log is never replaced unless --force is given.\n"
    "--target T, --draft D: model files (gpt2, llama, ngram; models/FORMAT.md) or lookup:N[:EPS[:NGRAM]];\n"
    "--prompts FILE: text prompts (data/prompts/), tokenized with the target's embedded tokenizer\n"
    "or --tokenizer F; or --prompt-ids FILE: prompts as token ids, one prompt per line of\n"
    "whitespace-separated ids (with models and with --synthetic).\n";

static int parse_synthetic(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_synth_family_parse(arg, dst);
}

static int parse_dist(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_log_dist_parse(arg, dst);
}

int sl_cmd_measure(int argc, char **argv)
{
    sl_measure_config m;
    sl_measure_config_init(&m);
    sl_format fmt = SL_FMT_TABLE;
    long eos = -1;
    size_t shard = (size_t)m.shard_sequences;
    sl_cli c;
    sl_cli_init(&c, "measure", "--synthetic FAMILY --tokens N --out OUT.h5 [options]\n"
                "       speclab measure --target T --draft D (--prompts FILE [--tokenizer F] | --prompt-ids FILE)\n"
                "                       --tokens N --out OUT.h5 [options]", about);
    sl_cli_custom(&c, "synthetic", "F", &m.synth.family, parse_synthetic,
                  "noisy | tempered | identical | uniform (sim/sl_synth.h)");
    sl_cli_size(&c, "vocab", "V", &m.synth.V, 2, (size_t)1 << 24, "synthetic vocabulary (default 256)");
    sl_cli_dbl(&c, "noise", "S", &m.synth.noise, 0, 1e6, 0, "noisy: draft logit noise sd (default 1)");
    sl_cli_dbl(&c, "draft-temperature", "T", &m.synth.draft_temperature, 0, 1e6, SL_OPT_LO_OPEN,
               "tempered: draft logits / T (default 1.5)");
    sl_cli_size(&c, "context", "C", &m.synth.context, 1, (size_t)1 << 30, "synthetic context length (default 4096)");
    sl_cli_size(&c, "draft-vocab", "V", &m.draft_vocab, 2, (size_t)1 << 24,
                "give the synthetic draft another vocabulary (to test the mismatch check)");
    sl_cli_size(&c, "sequences", "K", &m.sequences, 1, (size_t)1 << 30, "synthetic: K random prompts (default 8)");
    sl_cli_size(&c, "prompt-len", "L", &m.prompt_len, 1, (size_t)1 << 20, "synthetic: tokens per random prompt (default 4)");
    sl_cli_string(&c, "prompt-ids", "FILE", &m.prompt_ids, "prompts as token ids, one prompt per line (instead of --prompts, or of random synthetic ones)");
    sl_cli_string(&c, "target", "T", &m.target, "target model");
    sl_cli_string(&c, "draft", "D", &m.draft, "draft model");
    sl_cli_string(&c, "prompts", "FILE", &m.prompts, "text prompts, one per line");
    sl_cli_string(&c, "tokenizer", "F", &m.tokenizer, "tokenizer file (default: the target's)");
    sl_cli_size(&c, "tokens", "N", &m.tokens, 1, (size_t)1 << 30, "tokens generated per prompt (required)");
    sl_cli_long(&c, "eos", "ID", &eos, 0, INT32_MAX, "stop a sequence at this token (default: none)");
    sl_cli_group_sampling(&c, &m.sampling);
    sl_cli_group_seed(&c, &m.seed, NULL);
    sl_cli_custom(&c, "dist", "D", &m.dist, parse_dist, "full distributions: float32 (default), float16, or none");
    sl_cli_size(&c, "shard-sequences", "S", &shard, 1, (size_t)1 << 30, "sequences per shard (default 16)");
    sl_cli_int(&c, "deflate", "L", &m.write.deflate_level, 0, 9, "compression level of per-token columns (default 4)");
    sl_cli_int(&c, "dist-deflate", "L", &m.write.dist_level, 0, 9, "compression level of distributions (default 1)");
    sl_cli_string(&c, "out", "OUT.h5", &m.out, "output file (required)");
    sl_cli_group_force(&c, &m.force);
    sl_cli_group_device(&c, NULL);
    sl_cli_group_format(&c, &fmt);
    int quiet = 0;
    sl_cli_group_quiet(&c, &quiet);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc == -1) return 0;
    if (rc) return rc;
    m.eos = eos;
    m.shard_sequences = shard;
    int synthetic = sl_cli_given(&c, "synthetic");
    if (m.target || m.draft || m.prompts || m.tokenizer) {
        if (synthetic) return sl_fail(SL_EINPUT, "--synthetic cannot be combined with --target/--draft/--prompts");
        if (!m.target || !m.draft || !m.prompts == !m.prompt_ids)
            return sl_fail(SL_EINPUT, "give --target, --draft and one of --prompts and --prompt-ids together");
        if (m.tokenizer && m.prompt_ids)
            return sl_fail(SL_EINPUT, "--tokenizer: token-id prompts (--prompt-ids) are not tokenized; drop one");
        /* Options of the synthetic pair would be ignored with models: refused instead. */
        static const char *const synth_only[] = {"vocab", "noise", "draft-temperature", "context", "draft-vocab",
                                                 "sequences", "prompt-len"};
        for (size_t i = 0; i < sizeof synth_only / sizeof *synth_only; i++)
            if (sl_cli_given(&c, synth_only[i]))
                return sl_fail(SL_EINPUT, "--%s: an option of the synthetic pair, not used with --target/--draft",
                               synth_only[i]);
        m.target_role = "--target";
        m.draft_role = "--draft";
    } else if (!synthetic) {
        return sl_fail(SL_EINPUT, "give --synthetic FAMILY or --target/--draft/--prompts (see --help)");
    } else if (m.prompt_ids && (sl_cli_given(&c, "sequences") || sl_cli_given(&c, "prompt-len"))) {
        return sl_fail(SL_EINPUT, "--%s: sets the random prompts, which --prompt-ids replaces; drop one",
                       sl_cli_given(&c, "sequences") ? "sequences" : "prompt-len");
    }
    if (!sl_cli_given(&c, "tokens")) return sl_fail(SL_EINPUT, "--tokens is required");
    if (!m.out) return sl_fail(SL_EINPUT, "--out is required");
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, "measure", "sequences", quiet);
    m.progress = sl_cli_progress_fn(&pg);
    m.progress_ctx = &pg;
    sl_measure_result *r = NULL;
    sl_table *t = NULL;
    rc = sl_measure_run(&m, &r);
    sl_cli_progress_end(&pg);
    if (!rc && !(rc = sl_measure_report(r, &t))) rc = sl_table_write(t, stdout, fmt);
    sl_table_free(t);
    sl_measure_result_free(r);
    return rc;
}
