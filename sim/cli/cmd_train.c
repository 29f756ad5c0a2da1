/*
 * cmd_train.c: `speclab train` (a GPT-2 model from token files) and, through cmd_distill.c,
 * `speclab distill` (a draft against a teacher's soft labels). Both parse the same options into
 * sl_train_run_opts; the run itself lives in models/train/sl_train_run.c.
 */
#include <getopt.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_train_io.h"

int sl_train_cli(int argc, char **argv, int distill);

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f, int distill)
{
    fprintf(f,
            "usage: speclab %s --train FILE.tok --valid FILE.tok --config JSON --steps N --out MODEL.safetensors\n"
            "%s"
            "          [--batch B] [--seq T] [--accum K] [--lr LR] [--warmup N] [--min-lr-frac F]\n"
            "          [--weight-decay WD] [--beta1 B1] [--beta2 B2] [--clip G] [--seed S]\n"
            "          [--checkpoint DIR] [--ckpt-every N] [--eval-every N] [--eval-batches N] [--log FILE.csv]\n"
            "          [--dtype f32|f16] [--tokenizer FILE.json] [--init MODEL] [--threads N] [--stop-at STEP]\n"
            "          [--backend cpu|cuda|cuda-emu]\n"
            "\n"
            "%s"
            "  --config      student architecture, e.g. '{\"n_layer\":6,\"n_head\":8,\"d_model\":256,\"d_ff\":1024,\n"
            "                \"max_seq_len\":128,\"vocab_size\":4096}' (optional: norm_eps, tied_embeddings)\n"
            "  --batch/--seq sequences per micro-batch (8) and tokens per sequence (64, at most max_seq_len)\n"
            "  --accum       micro-batches per optimiser step (1)\n"
            "  --lr          peak learning rate (1e-3); linear warm-up over --warmup steps (steps/10), then a\n"
            "                cosine decay to lr * --min-lr-frac (0.1)\n"
            "  --weight-decay AdamW decoupled decay on matrices only (0.1); --beta1 0.9 --beta2 0.95; --clip 1.0\n"
            "  --checkpoint  directory for DIR/checkpoint.bin, written atomically every --ckpt-every steps\n"
            "                (default: --eval-every); rerunning the same command resumes bit for bit\n"
            "  --eval-every  log a row (stdout, and --log FILE.csv) with validation loss and bits per token\n"
            "                every N steps (steps/10); --eval-batches validation batches per row (8)\n"
            "  --dtype       weights stored in the output file (f32)\n"
            "  --tokenizer   JSON file with FORMAT.md's tokenizer object, stored in the output's metadata\n"
            "                (otherwise the teacher's, else the --init model's, is copied)\n"
            "  --init        start from this model's weights (its architecture; --config may be omitted);\n"
            "                with --steps 0 the run only evaluates them (distill: their KL and TV to the teacher)\n"
            "  --threads     OpenMP threads (default: all cores); results do not depend on it\n"
            "  --stop-at     stop after this step with a checkpoint and no export (to test resumption)\n"
            "  --backend     cpu (default: OpenBLAS + OpenMP); cuda: the same model and optimiser on the first\n"
            "                GPU (build/libsl_train_cuda.so from `make cuda`, or $SL_CUDA_LIB); cuda-emu: the\n"
            "                CUDA code run on the CPU, for tests. Same seed, same backend, same GPU: same bits\n"
            "Interrupt (Ctrl-C, SIGTERM) finishes the current step, writes a checkpoint and exits 1.\n",
            distill ? "distill" : "train",
            distill ? "          --teacher TARGET.safetensors --objective kl|tv\n" : "",
            distill ? "Trains a draft against the teacher's distributions on the training text: kl minimises\n"
                      "KL(p_teacher || q_draft); tv minimises 1 - sum min(p, q) = 1 - beta, the rejection rate.\n"
                      "The log adds val_kl and val_tv (mean 1 - beta) against the teacher.\n\n"
                    : "Trains a GPT-2 style model (models/FORMAT.md) with AdamW on next-token cross-entropy.\n\n");
}

int sl_train_cli(int argc, char **argv, int distill)
{
    enum {
        O_TRAIN = 1000, O_VALID, O_CONFIG, O_STEPS, O_BATCH, O_SEQ, O_ACCUM, O_LR, O_WARMUP, O_MINLR, O_WD, O_B1,
        O_B2, O_CLIP, O_SEED, O_CKPT, O_CKPT_EVERY, O_EVAL_EVERY, O_EVAL_BATCHES, O_LOG, O_OUT, O_DTYPE, O_TOK,
        O_THREADS, O_STOP, O_TEACHER, O_OBJ, O_INIT, O_BACKEND, O_HELP
    };
    static const struct option opts[] = {
        {"train", 1, 0, O_TRAIN}, {"valid", 1, 0, O_VALID}, {"config", 1, 0, O_CONFIG}, {"steps", 1, 0, O_STEPS},
        {"batch", 1, 0, O_BATCH}, {"seq", 1, 0, O_SEQ}, {"accum", 1, 0, O_ACCUM}, {"lr", 1, 0, O_LR},
        {"warmup", 1, 0, O_WARMUP}, {"min-lr-frac", 1, 0, O_MINLR}, {"weight-decay", 1, 0, O_WD},
        {"beta1", 1, 0, O_B1}, {"beta2", 1, 0, O_B2}, {"clip", 1, 0, O_CLIP}, {"seed", 1, 0, O_SEED},
        {"checkpoint", 1, 0, O_CKPT}, {"ckpt-every", 1, 0, O_CKPT_EVERY}, {"eval-every", 1, 0, O_EVAL_EVERY},
        {"eval-batches", 1, 0, O_EVAL_BATCHES}, {"log", 1, 0, O_LOG}, {"out", 1, 0, O_OUT},
        {"dtype", 1, 0, O_DTYPE}, {"tokenizer", 1, 0, O_TOK}, {"threads", 1, 0, O_THREADS},
        {"stop-at", 1, 0, O_STOP}, {"teacher", 1, 0, O_TEACHER}, {"objective", 1, 0, O_OBJ}, {"init", 1, 0, O_INIT},
        {"backend", 1, 0, O_BACKEND}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};
    sl_train_run_opts o;
    memset(&o, 0, sizeof o);
    sl_train_hparams_default(&o.h);
    o.eval_batches = 8;
    int warmup_set = 0, have_steps = 0, objective_set = 0;
    long v;
    double d;
    uint64_t u;
    int rc = SL_OK, c;
    optind = 1;
    opterr = 0;
    while (!rc && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_TRAIN: o.train_path = optarg; break;
        case O_VALID: o.valid_path = optarg; break;
        case O_CONFIG: o.config_json = optarg; break;
        case O_OUT: o.out_path = optarg; break;
        case O_CKPT: o.ckpt_dir = optarg; break;
        case O_LOG: o.log_path = optarg; break;
        case O_TOK: o.tokenizer_path = optarg; break;
        case O_TEACHER: o.teacher_path = optarg; break;
        case O_INIT: o.init_path = optarg; break;
        case O_BACKEND:
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "cuda-emu"))
                rc = sl_fail(SL_EINPUT, "--backend: '%s' is not cpu, cuda or cuda-emu", optarg);
            else o.backend = optarg;
            break;
        case O_STEPS:
            if (!(rc = sl_cli_long_in("--steps", optarg, 0, 1000000000L, &v))) o.h.steps = (uint64_t)v, have_steps = 1;
            break;
        case O_BATCH: if (!(rc = sl_cli_long_in("--batch", optarg, 1, 65536, &v))) o.h.batch = (int)v; break;
        case O_SEQ: if (!(rc = sl_cli_long_in("--seq", optarg, 1, 65536, &v))) o.h.seq = (int)v; break;
        case O_ACCUM: if (!(rc = sl_cli_long_in("--accum", optarg, 1, 65536, &v))) o.h.accum = (int)v; break;
        case O_LR: if (!(rc = sl_cli_double_in("--lr", optarg, 0, 1, 10, 0, &d))) o.h.lr = d; break;
        case O_WARMUP:
            if (!(rc = sl_cli_long_in("--warmup", optarg, 0, 1000000000L, &v))) o.h.warmup = (uint64_t)v, warmup_set = 1;
            break;
        case O_MINLR: if (!(rc = sl_cli_double_in("--min-lr-frac", optarg, 0, 0, 1, 0, &d))) o.h.min_lr_frac = d; break;
        case O_WD: if (!(rc = sl_cli_double_in("--weight-decay", optarg, 0, 0, 10, 0, &d))) o.h.weight_decay = d; break;
        case O_B1: if (!(rc = sl_cli_double_in("--beta1", optarg, 0, 0, 1, 1, &d))) o.h.beta1 = d; break;
        case O_B2: if (!(rc = sl_cli_double_in("--beta2", optarg, 0, 0, 1, 1, &d))) o.h.beta2 = d; break;
        case O_CLIP: if (!(rc = sl_cli_double_in("--clip", optarg, 0, 0, 1e9, 0, &d))) o.h.clip = d; break;
        case O_SEED: if (!(rc = sl_cli_u64("--seed", optarg, &u))) o.h.seed = u; break;
        case O_CKPT_EVERY:
            if (!(rc = sl_cli_long_in("--ckpt-every", optarg, 1, 1000000000L, &v))) o.ckpt_every = (uint64_t)v;
            break;
        case O_EVAL_EVERY:
            if (!(rc = sl_cli_long_in("--eval-every", optarg, 1, 1000000000L, &v))) o.eval_every = (uint64_t)v;
            break;
        case O_EVAL_BATCHES: if (!(rc = sl_cli_long_in("--eval-batches", optarg, 1, 100000, &v))) o.eval_batches = (int)v; break;
        case O_STOP: if (!(rc = sl_cli_long_in("--stop-at", optarg, 1, 1000000000L, &v))) o.stop_at = (uint64_t)v; break;
        case O_THREADS:
            if (!(rc = sl_cli_long_in("--threads", optarg, 1, 1024, &v))) omp_set_num_threads((int)v);
            break;
        case O_DTYPE:
            if (!strcmp(optarg, "f16")) o.f16 = 1;
            else if (!strcmp(optarg, "f32")) o.f16 = 0;
            else rc = sl_fail(SL_EINPUT, "--dtype: '%s' is not f32 or f16", optarg);
            break;
        case O_OBJ:
            objective_set = 1;
            if (!strcmp(optarg, "kl")) o.h.objective = SL_OBJ_KL;
            else if (!strcmp(optarg, "tv")) o.h.objective = SL_OBJ_TV;
            else rc = sl_fail(SL_EINPUT, "--objective: '%s' is not kl or tv", optarg);
            break;
        case O_HELP: usage(stdout, distill); return 0;
        default:
            return sl_fail(SL_EINPUT, "unknown or incomplete option '%s' (speclab %s --help)", argv[optind - 1],
                           distill ? "distill" : "train");
        }
    }
    if (rc) return rc;
    if (optind < argc) return sl_fail(SL_EINPUT, "unexpected argument '%s'", argv[optind]);
    if (!o.train_path) return sl_fail(SL_EINPUT, "--train FILE.tok is required");
    if (!o.valid_path) return sl_fail(SL_EINPUT, "--valid FILE.tok is required");
    if (!o.config_json && !o.init_path) return sl_fail(SL_EINPUT, "--config JSON (or --init MODEL) is required");
    if (!o.out_path) return sl_fail(SL_EINPUT, "--out MODEL.safetensors is required");
    if (!have_steps) return sl_fail(SL_EINPUT, "--steps N is required");
    if (distill) {
        if (!o.teacher_path) return sl_fail(SL_EINPUT, "--teacher MODEL.safetensors is required");
        if (!objective_set) return sl_fail(SL_EINPUT, "--objective kl|tv is required");
    } else if (o.teacher_path || objective_set) {
        return sl_fail(SL_EINPUT, "--teacher and --objective belong to speclab distill");
    }
    if (!warmup_set) o.h.warmup = o.h.steps / 10;
    if (!o.eval_every) o.eval_every = o.h.steps / 10 ? o.h.steps / 10 : 1;
    if (!o.ckpt_every) o.ckpt_every = o.eval_every;
    o.out = stdout;
    o.progress = sl_cli_progress_enabled();

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    interrupted = 0;
    o.interrupted = &interrupted;
    rc = sl_train_run(&o);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

int sl_cmd_train(int argc, char **argv) { return sl_train_cli(argc, argv, 0); }
