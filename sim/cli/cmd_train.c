/*
 * cmd_train.c: `speclab train` (a GPT-2 model from token files) and, through cmd_distill.c,
 * `speclab distill` (a draft against a teacher's soft labels). Both parse the same options into
 * sl_train_run_opts (defaults: models/train/sl_train_opts.h); the run itself is sl_train_run
 * (models/train/sl_train_run.c). Interrupts are turned into a checkpoint and exit 1 here.
 */
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_train_opts.h"

int sl_train_cli(int argc, char **argv, int distill);

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int parse_dtype(const char *flag, const char *arg, void *dst)
{
    if (strcmp(arg, "f32") && strcmp(arg, "f16")) return sl_fail(SL_EINPUT, "%s: '%s' is not f32 or f16", flag, arg);
    *(int *)dst = !strcmp(arg, "f16");
    return SL_OK;
}

static int parse_backend(const char *flag, const char *arg, void *dst)
{
    if (strcmp(arg, "cpu") && strcmp(arg, "cuda") && strcmp(arg, "cuda-emu"))
        return sl_fail(SL_EINPUT, "%s: '%s' is not cpu, cuda or cuda-emu", flag, arg);
    *(const char **)dst = arg;
    return SL_OK;
}

static int parse_objective(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_train_objective_parse(arg, dst);
}

/* Runs o with SIGINT and SIGTERM turned into "checkpoint and stop". */
static int run_interruptible(sl_train_run_opts *o)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    interrupted = 0;
    o->interrupted = &interrupted;
    int rc = sl_train_run(o);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

int sl_train_cli(int argc, char **argv, int distill)
{
    sl_train_run_opts o;
    sl_train_run_opts_default(&o);
    long steps = 0, warmup = 0, ckpt_every = 0, eval_every = 0, stop_at = 0;
    int threads = 0;
    static sl_cli c; /* static: main maps a failed quantity to its flag through it after we return */
    sl_cli_init(&c, distill ? "distill" : "train",
                distill ? "--train FILE.tok --valid FILE.tok --config JSON --steps N --out MODEL.safetensors\n"
                          "          --teacher TARGET.safetensors --objective kl|tv [options]"
                        : "--train FILE.tok --valid FILE.tok --config JSON --steps N --out MODEL.safetensors [options]",
                distill ? "Trains a draft against the teacher's distributions on the training text: kl minimises\n"
                          "KL(p_teacher || q_draft); tv minimises 1 - sum min(p, q) = 1 - beta, the rejection rate.\n"
                          "The log adds val_kl and val_tv (mean 1 - beta) against the teacher.\n\n"
                          "--config is the student architecture, e.g. '{\"n_layer\":6,\"n_head\":8,\"d_model\":256,\n"
                          "\"d_ff\":1024,\"max_seq_len\":128,\"vocab_size\":4096}' (optional: norm_eps, tied_embeddings).\n"
                          "The learning rate warms up linearly over --warmup steps, then decays by a cosine to\n"
                          "lr * --min-lr-frac. Rerunning the same command with --checkpoint resumes bit for bit.\n"
                          "Interrupt (Ctrl-C, SIGTERM) finishes the current step, writes a checkpoint and exits 1.\n"
                        : "Trains a GPT-2 style model (models/FORMAT.md) with AdamW on next-token cross-entropy.\n\n"
                          "--config is the architecture, e.g. '{\"n_layer\":6,\"n_head\":8,\"d_model\":256,\n"
                          "\"d_ff\":1024,\"max_seq_len\":128,\"vocab_size\":4096}' (optional: norm_eps, tied_embeddings).\n"
                          "The learning rate warms up linearly over --warmup steps, then decays by a cosine to\n"
                          "lr * --min-lr-frac. Rerunning the same command with --checkpoint resumes bit for bit.\n"
                          "Interrupt (Ctrl-C, SIGTERM) finishes the current step, writes a checkpoint and exits 1.\n");
    sl_cli_string(&c, "train", "FILE.tok", &o.train_path, "training tokens");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "valid", "FILE.tok", &o.valid_path, "validation tokens");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "config", "JSON", &o.config_json, "architecture (required unless --init)");
    sl_cli_long(&c, "steps", "N", &steps, 0, 1000000000L, "optimiser steps; 0 only evaluates the --init weights");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_string(&c, "out", "MODEL", &o.out_path,
                  "the trained model (safetensors); an existing file is replaced only with --force or when the "
                  "run resumes from its --checkpoint");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_group_force(&c, &o.force);
    if (distill) {
        sl_cli_string(&c, "teacher", "TARGET", &o.teacher_path, "the teacher model whose distributions are learnt");
        c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
        sl_cli_custom(&c, "objective", "kl|tv", &o.h.objective, parse_objective, "KL(p_teacher || q) or 1 - beta");
        c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    }
    sl_cli_int(&c, "batch", "B", &o.h.batch, 1, 65536, "sequences per micro-batch (default 8)");
    sl_cli_int(&c, "seq", "T", &o.h.seq, 1, 65536, "tokens per sequence, at most max_seq_len (default 64)");
    sl_cli_int(&c, "accum", "K", &o.h.accum, 1, 65536, "micro-batches per optimiser step (default 1)");
    sl_cli_dbl(&c, "lr", "LR", &o.h.lr, 0, 10, SL_OPT_LO_OPEN, "peak learning rate (default 1e-3)");
    sl_cli_long(&c, "warmup", "N", &warmup, 0, 1000000000L, "linear warm-up steps (default steps/10)");
    sl_cli_dbl(&c, "min-lr-frac", "F", &o.h.min_lr_frac, 0, 1, 0, "the cosine decays to lr * F (default 0.1)");
    sl_cli_dbl(&c, "weight-decay", "WD", &o.h.weight_decay, 0, 10, 0, "AdamW decoupled decay, matrices only (default 0.1)");
    sl_cli_dbl(&c, "beta1", "B1", &o.h.beta1, 0, 1, SL_OPT_HI_OPEN, "AdamW beta1 (default 0.9)");
    sl_cli_dbl(&c, "beta2", "B2", &o.h.beta2, 0, 1, SL_OPT_HI_OPEN, "AdamW beta2 (default 0.95)");
    sl_cli_dbl(&c, "clip", "G", &o.h.clip, 0, 1e9, 0, "global gradient-norm clip; 0 = off (default 1.0)");
    sl_cli_group_seed(&c, &o.h.seed, NULL);
    sl_cli_string(&c, "checkpoint", "DIR", &o.ckpt_dir, "DIR/checkpoint.bin, written atomically; a rerun resumes");
    sl_cli_long(&c, "ckpt-every", "N", &ckpt_every, 1, 1000000000L, "checkpoint every N steps (default --eval-every)");
    sl_cli_long(&c, "eval-every", "N", &eval_every, 1, 1000000000L,
                "log a row (validation loss, bits per token) every N steps (default steps/10)");
    sl_cli_int(&c, "eval-batches", "N", &o.eval_batches, 1, 100000, "validation batches per log row (default 8)");
    sl_cli_string(&c, "log", "FILE.csv", &o.log_path, "the log rows also go to this CSV file");
    sl_cli_custom(&c, "dtype", "f32|f16", &o.f16, parse_dtype, "weights stored in the output file (default f32)");
    sl_cli_string(&c, "tokenizer", "FILE.json", &o.tokenizer_path,
                  "FORMAT.md's tokenizer object for the output's metadata (default: the teacher's, else --init's)");
    sl_cli_string(&c, "init", "MODEL", &o.init_path, "start from this model's weights (its architecture)");
    sl_cli_int(&c, "threads", "N", &threads, 1, 1024, "OpenMP threads (default: all cores); results do not depend on it");
    sl_cli_long(&c, "stop-at", "STEP", &stop_at, 1, 1000000000L, "stop after this step with a checkpoint, no export");
    sl_cli_custom(&c, "backend", "B", &o.backend, parse_backend,
                  "cpu (default), cuda (build/libsl_train_cuda.so or $SL_CUDA_LIB) or cuda-emu (the CUDA code on the CPU)");
    int quiet = 0;
    sl_cli_group_quiet(&c, &quiet);
    int rc = sl_cli_parse(&c, argc, argv, 0);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.config_json && !o.init_path) return sl_fail(SL_EINPUT, "--config JSON (or --init MODEL) is required");
    o.h.steps = (uint64_t)steps;
    o.h.warmup = (uint64_t)warmup;
    o.ckpt_every = (uint64_t)ckpt_every;
    o.eval_every = (uint64_t)eval_every;
    o.stop_at = (uint64_t)stop_at;
    sl_train_run_opts_derive(&o, sl_cli_given(&c, "warmup"));
    if (threads) omp_set_num_threads(threads);
    o.out = stdout;
    sl_cli_progress pg;
    sl_cli_progress_init(&pg, distill ? "distill" : "train", "steps", quiet);
    o.progress = sl_cli_progress_fn(&pg);
    o.progress_ctx = &pg;
    rc = run_interruptible(&o);
    sl_cli_progress_end(&pg);
    return rc;
}

int sl_cmd_train(int argc, char **argv) { return sl_train_cli(argc, argv, 0); }
