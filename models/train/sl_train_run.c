/*
 * sl_train_run.c: one training or distillation run from token files to a native-format model.
 * Every input is checked before the first step (bad input costs no training time). The run is a
 * pure function of (config, hyperparameters, seed, data, teacher): batches come from (seed, step),
 * so a run resumed from a checkpoint produces the same weights, bit for bit, as one never stopped.
 */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_train_gpu.h"
#include "sl_train_io.h"

#define LOG_HEADER "step,tokens,lr,train_loss,grad_norm,val_ce,val_bits_per_token,val_kl,val_tv,wall_s,tokens_per_s\n"

static uint64_t fnv_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static void add_hex(struct json_object *o, const char *key, uint64_t h)
{
    char s[24];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)h);
    json_object_object_add(o, key, json_object_new_string(s));
}

static char *identity_json(const sl_train_run_opts *o, const sl_train_config *cfg, const sl_train_tokens *train,
                           const sl_train_model *teacher, const sl_train_model *init, const sl_train_gpu_api *gpu)
{
    const sl_train_hparams *h = &o->h;
    struct json_object *j = json_object_new_object();
    char *c = sl_train_config_json(cfg);
    json_object_object_add(j, "config", json_object_new_string(c));
    free(c);
    json_object_object_add(j, "objective", json_object_new_string(sl_train_objective_name(h->objective)));
    json_object_object_add(j, "steps", json_object_new_int64((int64_t)h->steps));
    json_object_object_add(j, "batch", json_object_new_int(h->batch));
    json_object_object_add(j, "seq", json_object_new_int(h->seq));
    json_object_object_add(j, "accum", json_object_new_int(h->accum));
    json_object_object_add(j, "lr", sl_train_json_double(h->lr));
    json_object_object_add(j, "min_lr_frac", sl_train_json_double(h->min_lr_frac));
    json_object_object_add(j, "warmup", json_object_new_int64((int64_t)h->warmup));
    json_object_object_add(j, "weight_decay", sl_train_json_double(h->weight_decay));
    json_object_object_add(j, "beta1", sl_train_json_double(h->beta1));
    json_object_object_add(j, "beta2", sl_train_json_double(h->beta2));
    json_object_object_add(j, "eps", sl_train_json_double(h->eps));
    json_object_object_add(j, "clip", sl_train_json_double(h->clip));
    json_object_object_add(j, "seed", json_object_new_int64((int64_t)h->seed));
    json_object_object_add(j, "train_tokens", json_object_new_int64((int64_t)train->n_tokens));
    add_hex(j, "train_hash", fnv_bytes(train->ids, train->n_tokens * sizeof(int32_t)));
    if (teacher) add_hex(j, "teacher_hash", fnv_bytes(teacher->params_mem, teacher->n_params * sizeof(float)));
    if (init) add_hex(j, "init_hash", fnv_bytes(init->params_mem, init->n_params * sizeof(float)));
    /* Only a GPU run names its backend, so CPU checkpoints keep their identity; a run is never
     * resumed on another backend (the bits would differ from an uninterrupted run). */
    if (gpu) json_object_object_add(j, "backend", json_object_new_string(gpu->name));
    char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    return s;
}

/* `git rev-parse HEAD` (with "-dirty" when the tree has changes) or "unknown". */
static void code_revision(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *p = popen("git rev-parse HEAD 2>/dev/null", "r");
    if (!p) return;
    char line[128] = "";
    if (fgets(line, sizeof line, p)) line[strcspn(line, "\n")] = 0;
    int ok = pclose(p) == 0 && line[0];
    if (!ok) return;
    int dirty = 0;
    p = popen("git status --porcelain --untracked-files=no 2>/dev/null", "r");
    if (p) {
        char l2[8];
        dirty = fgets(l2, sizeof l2, p) != NULL;
        pclose(p);
    }
    snprintf(buf, n, "%s%s", line, dirty ? "-dirty" : "");
}

/* Fails early, before any training, if path cannot be written. */
static int check_writable(const char *path)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    sl_atomic_abort(&af);
    return SL_OK;
}

/* A model on its backend: the CPU computes on the host model m itself; a GPU backend keeps the
 * training state on the device, and m receives it (sync_host) before checkpoints and export. */
typedef struct {
    sl_train_model *m;
    const sl_train_gpu_api *gpu; /* NULL: the CPU backend */
    sl_gpu_model *g;
} runner;

static int gpu_fail(const runner *x)
{
    return sl_fail(SL_EFAIL, "backend: %s: %s", x->gpu->name, x->gpu->error());
}

static int r_forward(runner *x, const int *inputs, int B, int T)
{
    if (!x->gpu) {
        sl_train_forward(x->m, inputs, B, T);
        return SL_OK;
    }
    return x->gpu->forward(x->g, inputs, B, T) ? gpu_fail(x) : SL_OK;
}

static int r_loss(runner *x, int objective, const int *targets, runner *teacher, int B, int T, float scale, double *out)
{
    if (!x->gpu) {
        *out = sl_train_loss(x->m, objective, targets, teacher ? teacher->m->acts.logits : NULL, B, T, scale);
        return SL_OK;
    }
    *out = x->gpu->loss(x->g, objective, targets, teacher ? teacher->g : NULL, B, T, scale);
    return isnan(*out) && x->gpu->error()[0] ? gpu_fail(x) : SL_OK;
}

static int r_backward(runner *x, const int *inputs, int B, int T)
{
    if (!x->gpu) {
        sl_train_backward(x->m, inputs, B, T);
        return SL_OK;
    }
    return x->gpu->backward(x->g, inputs, B, T) ? gpu_fail(x) : SL_OK;
}

static int r_zero_grad(runner *x)
{
    if (!x->gpu) {
        sl_train_zero_grad(x->m);
        return SL_OK;
    }
    return x->gpu->zero_grad(x->g) ? gpu_fail(x) : SL_OK;
}

static double r_grad_norm(runner *x) { return x->gpu ? x->gpu->grad_norm(x->g) : sl_train_grad_norm(x->m); }

static int r_scale_grads(runner *x, float s)
{
    if (!x->gpu) {
        sl_train_scale_grads(x->m, s);
        return SL_OK;
    }
    return x->gpu->scale_grads(x->g, s) ? gpu_fail(x) : SL_OK;
}

static int r_adamw(runner *x, const sl_train_hparams *h, double lr, uint64_t t)
{
    if (!x->gpu) {
        sl_train_adamw(x->m, h, lr, t);
        return SL_OK;
    }
    return x->gpu->adamw(x->g, h, lr, t) ? gpu_fail(x) : SL_OK;
}

/* Brings the device's parameters (and AdamW moments) into the host model. */
static int r_sync_host(runner *x)
{
    if (!x->gpu) return SL_OK;
    return x->gpu->get_state(x->g, x->m->params_mem, x->m->m, x->m->v) ? gpu_fail(x) : SL_OK;
}

/* A device copy of host model m (parameters and moments) on backend gpu; SL_OK for the CPU. */
static int r_open(runner *x, const sl_train_gpu_api *gpu, sl_train_model *m, int B, int T, int with_grads)
{
    x->m = m;
    x->gpu = gpu;
    x->g = NULL;
    if (!gpu) return SL_OK;
    if (!(x->g = gpu->create(&m->cfg, B, T, with_grads))) return gpu_fail(x);
    return gpu->set_state(x->g, m->params_mem, with_grads ? m->m : NULL, with_grads ? m->v : NULL) ? gpu_fail(x) : SL_OK;
}

static void r_close(runner *x)
{
    if (x->gpu && x->g) x->gpu->destroy(x->g);
    x->g = NULL;
}

typedef struct {
    double ce, kl, tv;
} eval_result;

static int evaluate(runner *m, runner *teacher, const sl_train_tokens *valid, int B, int T, int nb, int *inputs,
                    int *targets, eval_result *r)
{
    int rc;
    double l;
    *r = (eval_result){0, 0, 0};
    for (int k = 0; k < nb; k++) {
        sl_train_tokens_eval_batch(valid, k, nb, B, T, inputs, targets);
        if ((rc = r_forward(m, inputs, B, T)) || (rc = r_loss(m, SL_OBJ_CE, targets, NULL, B, T, 0.0f, &l))) return rc;
        r->ce += l / nb;
        if (teacher) {
            if ((rc = r_forward(teacher, inputs, B, T))) return rc;
            if ((rc = r_loss(m, SL_OBJ_KL, NULL, teacher, B, T, 0.0f, &l))) return rc;
            r->kl += l / nb;
            if ((rc = r_loss(m, SL_OBJ_TV, NULL, teacher, B, T, 0.0f, &l))) return rc;
            r->tv += l / nb;
        }
    }
    return SL_OK;
}

static int append(char **log, const char *row)
{
    size_t a = *log ? strlen(*log) : 0, b = strlen(row);
    char *s = realloc(*log, a + b + 1);
    if (!s) return sl_fail(SL_EFAIL, "out of memory");
    memcpy(s + a, row, b + 1);
    *log = s;
    return SL_OK;
}

static int write_log(const char *path, const char *log)
{
    sl_atomic_file af;
    int rc = sl_atomic_open(&af, path);
    if (rc) return rc;
    fputs(log, af.f);
    return sl_atomic_commit(&af);
}

int sl_train_run(const sl_train_run_opts *o)
{
    const sl_train_hparams *h = &o->h;
    int B = h->batch, T = h->seq, rc;
    sl_train_config cfg;
    sl_train_tokens *train = NULL, *valid = NULL;
    sl_train_model *m = NULL, *teacher = NULL, *init = NULL;
    char *tokenizer = NULL, *init_tokenizer = NULL, *ckpt_path = NULL, *training = NULL;
    int *inputs = NULL, *targets = NULL;
    gsl_rng *r = NULL;
    sl_train_ckpt_state st = {0};
    const sl_train_gpu_api *gpu = NULL;
    runner rm = {0}, rt = {0};
    char gpu_info[256] = "";

    if (o->init_path) {
        /* The starting weights define the architecture; a --config given too must agree. */
        if ((rc = sl_train_import(o->init_path, 1, 1, &init, &init_tokenizer))) return rc; /* weights only */
        cfg = init->cfg;
        sl_train_config given;
        if (o->config_json && (rc = sl_train_config_parse(o->config_json, &given)) == 0 &&
            memcmp(&given, &cfg, sizeof cfg) != 0)
            rc = sl_fail(SL_EINPUT, "config: differs from the architecture of the starting model %s", o->init_path);
        if (rc) goto done;
    } else if (!o->config_json) {
        return sl_fail(SL_EINPUT,
                       "config: required (the architecture as JSON) unless training starts from a model's weights");
    } else if ((rc = sl_train_config_parse(o->config_json, &cfg))) {
        return rc;
    }
    if (T > cfg.max_seq_len) {
        rc = sl_fail(SL_EINPUT, "seq: %d exceeds the config's max_seq_len %d", T, cfg.max_seq_len);
        goto done;
    }
    if ((h->objective != SL_OBJ_CE) != (o->teacher_path != NULL)) {
        rc = sl_fail(SL_EINPUT, "objective %s %s a teacher", sl_train_objective_name(h->objective),
                     o->teacher_path ? "does not take" : "needs");
        goto done;
    }
    if (o->backend && strcmp(o->backend, "cpu") != 0 &&
        (rc = sl_train_gpu_open(o->backend, &gpu, gpu_info, sizeof gpu_info)))
        goto done;
    if ((rc = sl_train_tokens_read(o->train_path, &train))) goto done;
    if ((rc = sl_train_tokens_read(o->valid_path, &valid))) goto done;
    const sl_train_tokens *tfs[2] = {train, valid};
    for (int i = 0; i < 2; i++) {
        if ((int)tfs[i]->vocab_size != cfg.vocab_size) {
            rc = sl_fail(SL_EINPUT, "vocabulary mismatch: %s has vocab_size %u, the config %d", tfs[i]->path,
                         tfs[i]->vocab_size, cfg.vocab_size);
            goto done;
        }
        if (tfs[i]->n_tokens < (uint64_t)T + 1) {
            rc = sl_fail(SL_EINPUT, "seq: %d needs at least %d tokens; token file %s has %llu", T, T + 1, tfs[i]->path,
                         (unsigned long long)tfs[i]->n_tokens);
            goto done;
        }
    }
    if (o->teacher_path) {
        if ((rc = sl_train_import(o->teacher_path, B, T, &teacher, &tokenizer))) goto done;
        if (teacher->cfg.vocab_size != cfg.vocab_size) {
            rc = sl_fail(SL_EINPUT, "vocabulary mismatch: teacher %s has vocab_size %d, the student config %d",
                         o->teacher_path, teacher->cfg.vocab_size, cfg.vocab_size);
            goto done;
        }
    }
    if (!tokenizer && init_tokenizer) { /* the teacher's tokenizer first, else the starting model's */
        tokenizer = init_tokenizer;
        init_tokenizer = NULL;
    }
    if (o->tokenizer_path) {
        free(tokenizer);
        tokenizer = NULL;
        if ((rc = sl_read_file(o->tokenizer_path, "tokenizer", &tokenizer, NULL))) goto done;
        struct json_object *tj = json_tokener_parse(tokenizer);
        int ok = tj && json_object_is_type(tj, json_type_object);
        if (tj) json_object_put(tj);
        if (!ok) {
            rc = sl_fail(SL_EINPUT, "tokenizer: %s is not a JSON object", o->tokenizer_path);
            goto done;
        }
    }
    /* Never replace a file this run did not start: an existing output is ours only when the run
     * resumes from its checkpoint (which checks that the settings are the same). */
    int resuming = 0;
    if (o->ckpt_dir) {
        size_t n = strlen(o->ckpt_dir) + 32;
        char *p = sl_malloc(n);
        if (!p) {
            rc = SL_EFAIL;
            goto done;
        }
        snprintf(p, n, "%s/checkpoint.bin", o->ckpt_dir);
        resuming = access(p, F_OK) == 0;
        free(p);
    }
    if (!resuming && (rc = sl_out_check("out", o->out_path, o->force, NULL))) goto done;
    if (!resuming && o->log_path && (rc = sl_out_check("log", o->log_path, o->force, NULL))) goto done;
    if ((rc = check_writable(o->out_path))) goto done;
    if (o->log_path && (rc = check_writable(o->log_path))) goto done;
    if (o->ckpt_dir) {
        if (mkdir(o->ckpt_dir, 0777) != 0 && errno != EEXIST) {
            rc = sl_fail(SL_EINPUT, "checkpoint: cannot create the directory %s: %s", o->ckpt_dir, strerror(errno));
            goto done;
        }
        size_t n = strlen(o->ckpt_dir) + 32;
        ckpt_path = sl_malloc(n);
        if (!ckpt_path) {
            rc = SL_EFAIL;
            goto done;
        }
        snprintf(ckpt_path, n, "%s/checkpoint.bin", o->ckpt_dir);
        if ((rc = check_writable(ckpt_path))) goto done;
    }

    if (!(m = sl_train_model_alloc(&cfg, B, T, 1))) {
        rc = SL_EFAIL;
        goto done;
    }
    if (init) memcpy(m->params_mem, init->params_mem, m->n_params * sizeof(float));
    else sl_train_init(m, h->seed);
    st.identity = identity_json(o, &cfg, train, teacher, init, gpu);
    if (ckpt_path && access(ckpt_path, F_OK) == 0) {
        if ((rc = sl_train_ckpt_load(ckpt_path, m, &st))) goto done;
        if (st.step > h->steps) {
            rc = sl_fail(SL_EINPUT, "steps: %llu, but checkpoint %s is already at step %llu", (unsigned long long)h->steps,
                         ckpt_path, (unsigned long long)st.step);
            goto done;
        }
        if (o->out && st.log) fputs(st.log, o->out);
    } else {
        st.log = strdup(LOG_HEADER);
        if (o->out) fputs(LOG_HEADER, o->out);
    }
    if (o->out) fflush(o->out);

    inputs = sl_malloc((size_t)B * T * sizeof(int));
    targets = sl_malloc((size_t)B * T * sizeof(int));
    r = sl_rng_alloc(h->seed, SL_STREAM_DATA, 0);
    if (!inputs || !targets || !r) {
        rc = SL_EFAIL;
        goto done;
    }
    if ((rc = r_open(&rm, gpu, m, B, T, 1))) goto done;
    if (teacher && (rc = r_open(&rt, gpu, teacher, B, T, 0))) goto done;
    if (gpu && o->out) fprintf(stderr, "backend %s: %s\n", gpu->name, gpu_info);
    uint64_t eval_every = o->eval_every ? o->eval_every : h->steps;
    uint64_t ckpt_every = o->ckpt_every ? o->ckpt_every : eval_every;
    int eval_batches = o->eval_batches > 0 ? o->eval_batches : 8;
    double t0 = sl_now_s(), wall0 = st.wall_s;
    uint64_t tokens0 = st.tokens_seen;
    eval_result ev = {NAN, NAN, NAN};
    while (st.step < h->steps) {
        uint64_t step = st.step;
        if ((rc = r_zero_grad(&rm))) goto done;
        double loss = 0;
        for (int mb = 0; mb < h->accum; mb++) {
            double l;
            sl_train_tokens_batch(train, h->seed, step, mb, h->accum, B, T, inputs, targets, r);
            if ((rc = r_forward(&rm, inputs, B, T))) goto done;
            if (teacher && (rc = r_forward(&rt, inputs, B, T))) goto done;
            if ((rc = r_loss(&rm, h->objective, targets, teacher ? &rt : NULL, B, T, 1.0f / (float)h->accum, &l)))
                goto done;
            loss += l / h->accum;
            if ((rc = r_backward(&rm, inputs, B, T))) goto done;
        }
        double gn = r_grad_norm(&rm);
        if (rm.gpu && isnan(gn) && rm.gpu->error()[0]) {
            rc = gpu_fail(&rm);
            goto done;
        }
        if (!isfinite(loss) || !isfinite(gn)) {
            rc = sl_fail(SL_EFAIL, "loss or gradient became non-finite at step %llu (learning rate too high?); "
                         "the last checkpoint is intact", (unsigned long long)step);
            goto done;
        }
        if (h->clip > 0 && gn > h->clip && (rc = r_scale_grads(&rm, (float)(h->clip / gn)))) goto done;
        double lr = sl_train_lr(h, step);
        if ((rc = r_adamw(&rm, h, lr, step + 1))) goto done;
        st.step = step + 1;
        st.tokens_seen += (uint64_t)B * T * h->accum;
        st.loss_sum += loss;
        st.loss_n++;
        double now = sl_now_s();
        st.wall_s = wall0 + (now - t0);
        int last = st.step == h->steps;
        if (o->progress) o->progress(o->progress_ctx, (size_t)st.step, (size_t)h->steps);
        int stop = (o->stop_at && st.step >= o->stop_at) || (o->interrupted && *o->interrupted);
        if (st.step % eval_every == 0 || last) {
            if ((rc = evaluate(&rm, teacher ? &rt : NULL, valid, B, T, eval_batches, inputs, targets, &ev))) goto done;
            char row[512], kl[32] = "", tv[32] = "";
            if (teacher) {
                snprintf(kl, sizeof kl, "%.6f", ev.kl);
                snprintf(tv, sizeof tv, "%.6f", ev.tv);
            }
            double tps = (double)(st.tokens_seen - tokens0) / fmax(now - t0, 1e-9);
            snprintf(row, sizeof row, "%llu,%llu,%.6g,%.6f,%.4f,%.6f,%.6f,%s,%s,%.1f,%.0f\n",
                     (unsigned long long)st.step, (unsigned long long)st.tokens_seen, lr, st.loss_sum / st.loss_n, gn,
                     ev.ce, ev.ce / M_LN2, kl, tv, st.wall_s, tps);
            st.loss_sum = 0;
            st.loss_n = 0;
            if ((rc = append(&st.log, row))) goto done;
            if (o->out) {
                fputs(row, o->out);
                fflush(o->out);
            }
            if (o->log_path && (rc = write_log(o->log_path, st.log))) goto done;
        }
        if (ckpt_path && (st.step % ckpt_every == 0 || last || stop))
            if ((rc = r_sync_host(&rm)) || (rc = sl_train_ckpt_save(ckpt_path, m, &st))) goto done;
        if (stop && !last) {
            if (o->interrupted && *o->interrupted)
                rc = sl_fail(SL_EFAIL, "interrupted after step %llu%s; rerun the same command to resume",
                             (unsigned long long)st.step,
                             ckpt_path ? " (checkpoint written)" : " (no checkpoint directory: progress lost)");
            else if (o->out)
                fprintf(stderr, "stopped after step %llu as asked (--stop-at); rerun without it to resume\n",
                        (unsigned long long)st.step);
            goto done;
        }
    }
    if (isnan(ev.ce) && (rc = evaluate(&rm, teacher ? &rt : NULL, valid, B, T, eval_batches, inputs, targets, &ev)))
        goto done;
    if ((rc = r_sync_host(&rm))) goto done;
    if (h->steps == 0) {
        /* --steps 0 evaluates the starting weights (e.g. --init with a teacher: their TV to it). */
        char row[512], kl[32] = "", tv[32] = "";
        if (teacher) {
            snprintf(kl, sizeof kl, "%.6f", ev.kl);
            snprintf(tv, sizeof tv, "%.6f", ev.tv);
        }
        snprintf(row, sizeof row, "0,0,0,,,%.6f,%.6f,%s,%s,0.0,0\n", ev.ce, ev.ce / M_LN2, kl, tv);
        if ((rc = append(&st.log, row))) goto done;
        if (o->out) fputs(row, o->out);
        if (o->log_path && (rc = write_log(o->log_path, st.log))) goto done;
    }

    /* Export: the training record for FORMAT.md's `training` metadata. */
    {
        char rev[160];
        code_revision(rev, sizeof rev);
        struct json_object *j = json_tokener_parse(st.identity);
        json_object_object_del(j, "config");
        json_object_object_add(j, "code_revision", json_object_new_string(rev));
        json_object_object_add(j, "train_file", json_object_new_string(o->train_path));
        json_object_object_add(j, "valid_file", json_object_new_string(o->valid_path));
        if (o->teacher_path) json_object_object_add(j, "teacher", json_object_new_string(o->teacher_path));
        if (o->init_path) json_object_object_add(j, "init", json_object_new_string(o->init_path));
        json_object_object_add(j, "tokens_seen", json_object_new_int64((int64_t)st.tokens_seen));
        json_object_object_add(j, "wall_time_s", sl_train_json_double(round(st.wall_s * 10) / 10));
        if (gpu) json_object_object_add(j, "device", json_object_new_string(gpu_info));
        else json_object_object_add(j, "threads", json_object_new_int(omp_get_max_threads()));
        json_object_object_add(j, "n_params", json_object_new_int64((int64_t)m->n_params));
        json_object_object_add(j, "val_ce", sl_train_json_double(ev.ce));
        json_object_object_add(j, "val_bits_per_token", sl_train_json_double(ev.ce / M_LN2));
        if (teacher) {
            json_object_object_add(j, "val_kl", sl_train_json_double(ev.kl));
            json_object_object_add(j, "val_tv", sl_train_json_double(ev.tv));
        }
        training = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        json_object_put(j);
        rc = sl_train_export(m, o->out_path, o->f16, training, tokenizer);
    }

done:
    r_close(&rm);
    r_close(&rt);
    if (r) gsl_rng_free(r);
    free(inputs);
    free(targets);
    free(st.identity);
    free(st.log);
    free(training);
    free(tokenizer);
    free(init_tokenizer);
    free(ckpt_path);
    sl_train_model_free(m);
    sl_train_model_free(teacher);
    sl_train_model_free(init);
    sl_train_tokens_free(train);
    sl_train_tokens_free(valid);
    return rc;
}
