/*
 * sl_run_report.c: the report of a run log (sl_run.h), computed from the assembled log alone:
 * acceptance with percentile bootstrap CIs over prompts, the measured walltime speedup next to
 * Theorem 3.8 and its generalised form (sim/sl_theory.h), the costs the decode itself paid, and the
 * time split; then the same result rendered as the tables `speclab run` prints. A sweep log holds
 * several gammas: each is reported on its own against the same baseline decodes, and
 * sl_run_sweep_file gathers them, with a least-squares line for the cost of an iteration.
 */
#include "sl_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_log.h"
#include "sl_spec.h"
#include "sl_stats.h"

/* Sums over one prompt's decodes (or over many prompts). */
typedef struct {
    double acc, tested, drafted, iters, emitted, kept, draft_s, verify_s, sample_s, wall; /* speculative */
    double ar_tokens, ar_wall;                                                          /* baseline */
    double beta_tested, n_beta_tested; /* logged beta summed over the tested draft positions */
} prompt_acc;

/* The estimates of one (re)sample of prompts. */
typedef struct {
    double acceptance_rate, alpha_hat, tokens_per_iter, speedup, thm38, general, expected, beta_tested;
    double kept_per_iter, cost_per_iter; /* kept / iterations; (wall / iterations) / baseline seconds per token */
} point;

/* The estimates over prompts idx[0..n) (idx NULL: prompts 0..n-1). */
static int point_of(const prompt_acc *pa, const size_t *idx, size_t n, int gamma, double c, const sl_theory_vcost *vc,
                    point *o)
{
    prompt_acc s;
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < n; i++) {
        const prompt_acc *p = &pa[idx ? idx[i] : i];
        s.acc += p->acc, s.tested += p->tested, s.drafted += p->drafted, s.iters += p->iters;
        s.emitted += p->emitted, s.kept += p->kept, s.wall += p->wall;
        s.ar_tokens += p->ar_tokens, s.ar_wall += p->ar_wall;
        s.beta_tested += p->beta_tested, s.n_beta_tested += p->n_beta_tested;
    }
    o->beta_tested = s.n_beta_tested > 0 ? s.beta_tested / s.n_beta_tested : NAN;
    o->acceptance_rate = s.drafted > 0 ? s.acc / s.drafted : NAN;
    o->alpha_hat = s.tested > 0 ? s.acc / s.tested : NAN;
    o->tokens_per_iter = s.iters > 0 ? s.emitted / s.iters : NAN;
    /* Time per token, so that sequences stopped early at eos compare fairly. */
    o->speedup = s.kept > 0 && s.ar_tokens > 0 && s.wall > 0 ? (s.ar_wall / s.ar_tokens) / (s.wall / s.kept) : NAN;
    /* speedup = kept_per_iter / cost_per_iter: the tokens an iteration keeps over what it costs in
     * baseline tokens. */
    o->kept_per_iter = s.iters > 0 ? s.kept / s.iters : NAN;
    o->cost_per_iter =
        s.iters > 0 && s.ar_tokens > 0 && s.ar_wall > 0 ? (s.wall / s.iters) / (s.ar_wall / s.ar_tokens) : NAN;
    o->thm38 = o->general = o->expected = NAN;
    if (!isnan(o->alpha_hat) && !isnan(c)) {
        int rc = sl_theory_expected_tokens(o->alpha_hat, gamma, &o->expected);
        if (!rc) rc = sl_theory_walltime_factor(o->alpha_hat, gamma, c, &o->thm38);
        if (!rc && vc) rc = sl_theory_walltime_factor_v(o->alpha_hat, gamma, c, vc, &o->general);
        return rc;
    }
    return SL_OK;
}

/* One sequence of the log as the report sees it. */
typedef struct {
    int64_t sequence;
    long slot;  /* the prompt slot its sums go to; -1: not reported (another gamma) */
    int gamma;  /* sweep logs: the gamma its iteration rows must carry (0: the baseline) */
} seq_role;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static int cmp_role(const void *a, const void *b)
{
    return cmp_i64(&((const seq_role *)a)->sequence, &((const seq_role *)b)->sequence);
}

/* The role of sequence number seq (NULL when the log has no such sequence); hint speeds up rows of
 * the same sequence in a row. */
static const seq_role *role_of(const seq_role *roles, size_t ns, int64_t seq, const seq_role **hint)
{
    if (*hint && (*hint)->sequence == seq) return *hint;
    seq_role key = {seq, -1, 0};
    *hint = bsearch(&key, roles, ns, sizeof *roles, cmp_role);
    return *hint;
}

/* Per-prompt sums of the reported gamma from the log. Prompts are paired by prompt_id: a prompt's
 * slot holds its speculative sequence(s) at gamma and all its baseline sequences; the prompts are
 * those with a speculative sequence at gamma, in ascending prompt_id. In a sweep log (n_g >= 2,
 * M = n_g + 1 sequences per prompt) sequence s is speculative at gl[s % M] when s % M < n_g and the
 * baseline otherwise; in a single-gamma log every speculative sequence is at gamma. *pa (calloc'd)
 * has *np slots. */
static int read_prompts(sl_log_reader *r, const char *path, const int *gl, size_t n_g, int gamma, prompt_acc **pa_out,
                        size_t *np_out, uint64_t *acc_at, uint64_t *rej_at)
{
    sl_log_seq *seqs = NULL;
    const size_t ns = sl_log_n_sequences(r), M = n_g + 1;
    const int sweep = n_g >= 2;
    prompt_acc *pa = NULL;
    seq_role *roles = NULL;  /* (ns) sorted by sequence */
    int64_t *pid = NULL;     /* (np) the reported prompts' ids, ascending */
    size_t np = 0;
    sl_log_iter_block b;
    memset(&b, 0, sizeof b);
    sl_log_draft_block db;
    memset(&db, 0, sizeof db);

    int rc = sl_log_sequences(r, &seqs);
    if (!rc && sweep && ns % M != 0)
        rc = sl_fail(SL_EINPUT, "%s: %zu sequences is not a multiple of %zu (gammas %s and the baseline per prompt)",
                     path, ns, M, sl_log_meta_of(r)->gammas);
    if (!rc) {
        roles = malloc((ns ? ns : 1) * sizeof *roles);
        pid = malloc((ns ? ns : 1) * sizeof *pid);
        if (!roles || !pid) rc = sl_fail(SL_EFAIL, "out of memory");
    }
    /* Which gamma each sequence decoded, and the prompts of the reported one. */
    for (size_t i = 0; !rc && i < ns; i++) {
        const sl_log_seq *q = &seqs[i];
        int g = q->mode == 1 ? 0 : gl[0];
        if (sweep) {
            const size_t j = (size_t)(q->sequence % (int64_t)M);
            if (q->sequence < 0 || (q->mode == 1) != (j == n_g)) {
                rc = sl_fail(SL_EINPUT, "%s: sequence %lld is %s, but a sweep over %s puts %s there", path,
                             (long long)q->sequence, q->mode == 1 ? "autoregressive" : "speculative",
                             sl_log_meta_of(r)->gammas, j == n_g ? "the baseline" : "a speculative decode");
                break;
            }
            g = q->mode == 1 ? 0 : gl[j];
        }
        roles[i] = (seq_role){q->sequence, -1, g};
        if (q->mode != 1 && g == gamma) pid[np++] = q->prompt_id;
    }
    if (!rc) {
        qsort(pid, np, sizeof *pid, cmp_i64);
        size_t u = 0;
        for (size_t i = 0; i < np; i++)
            if (u == 0 || pid[u - 1] != pid[i]) pid[u++] = pid[i];
        np = u;
        pa = calloc(np ? np : 1, sizeof *pa);
        if (!pa) rc = sl_fail(SL_EFAIL, "out of memory");
    }
    for (size_t i = 0; !rc && i < ns; i++) {
        const sl_log_seq *q = &seqs[i];
        const int64_t *hit = np ? bsearch(&q->prompt_id, pid, np, sizeof *pid, cmp_i64) : NULL;
        if (!hit) continue;
        prompt_acc *p = &pa[hit - pid];
        if (q->mode == 1) {
            p->ar_tokens += (double)q->n_generated;
            p->ar_wall += q->wall_s;
        } else if (roles[i].gamma == gamma) {
            roles[i].slot = (long)(hit - pid);
            p->kept += (double)q->n_generated;
            p->wall += q->wall_s;
        }
    }
    if (!rc) qsort(roles, ns, sizeof *roles, cmp_role);
    if (!rc) rc = sl_log_iter_block_alloc(&b, 4096);
    const seq_role *hint = NULL;
    for (size_t first = 0; !rc; first += b.n) {
        rc = sl_log_read_iterations(r, first, &b);
        if (rc || b.n == 0) break;
        for (size_t i = 0; i < b.n && !rc; i++) {
            const seq_role *sr = role_of(roles, ns, b.sequence[i], &hint);
            if (!sr) rc = sl_fail(SL_EINPUT, "%s: /iterations row %zu names sequence %d, which /sequences lacks", path,
                                  first + i, b.sequence[i]);
            else if (sweep && b.gamma[i] != sr->gamma)
                rc = sl_fail(SL_EINPUT,
                             "%s: /iterations row %zu of sequence %d has gamma %d; the sweep over %s puts %d there", path,
                             first + i, b.sequence[i], b.gamma[i], sl_log_meta_of(r)->gammas, sr->gamma);
            if (rc || sr->slot < 0) continue;
            prompt_acc *p = &pa[sr->slot];
            p->acc += b.accepted[i];
            p->tested += b.accepted[i] + (b.accepted[i] < b.gamma[i]); /* the first rejection was tested too */
            for (int j = 0; j < b.accepted[i] && j < gamma; j++) acc_at[j]++; /* draft positions j + 1 */
            if (b.accepted[i] < b.gamma[i] && b.accepted[i] < gamma) rej_at[b.accepted[i]]++;
            p->drafted += b.drafted[i];
            p->iters += 1;
            p->emitted += b.emitted[i];
            p->draft_s += b.draft_s[i];
            p->verify_s += b.verify_s[i];
            p->sample_s += b.sample_s[i];
        }
    }
    /* Tested draft positions: the accepted ones and the first rejected one of each iteration (the
     * accepted flags are a prefix). Given its context a tested draft is accepted with probability
     * beta, so accepted / tested must match the mean logged beta over the same positions whatever
     * selects them; the mean beta of a measure log weighs every position of the target's text
     * alike and can differ (positions after an acceptance are tested more often). */
    if (!rc) rc = sl_log_draft_block_alloc(&db, 4096);
    int prev_acc = 0;
    hint = NULL;
    for (size_t first = 0; !rc; first += db.n) {
        rc = sl_log_read_drafts(r, first, &db);
        if (rc || db.n == 0) break;
        for (size_t i = 0; i < db.n && !rc; i++) {
            int tested = db.draft_position[i] == 1 || prev_acc;
            prev_acc = db.accepted[i];
            const seq_role *sr = role_of(roles, ns, db.sequence[i], &hint);
            if (!sr) rc = sl_fail(SL_EINPUT, "%s: /drafts row %zu names sequence %d, which /sequences lacks", path,
                                  first + i, db.sequence[i]);
            else if (sr->slot >= 0 && tested && !isnan(db.beta[i])) {
                prompt_acc *p = &pa[sr->slot];
                p->beta_tested += db.beta[i];
                p->n_beta_tested += 1;
            }
        }
    }
    if (db.cap) sl_log_draft_block_free(&db);
    if (b.cap) sl_log_iter_block_free(&b);
    free(seqs);
    free(roles);
    free(pid);
    if (rc) {
        free(pa);
        return rc;
    }
    *pa_out = pa;
    *np_out = np;
    return SL_OK;
}

/* The log's calibration as sl_run_costs (has = 0 when the log holds none). */
static int read_costs(sl_log_reader *r, sl_run_costs *out, int *has)
{
    sl_log_costs lc;
    memset(&lc, 0, sizeof lc);
    memset(out, 0, sizeof *out);
    *has = 0;
    int rc = sl_log_read_costs(r, &lc);
    if (!rc && lc.count > 0) {
        rc = sl_theory_vcost_table(&out->v, lc.n, lc.v, lc.count);
        if (!rc && !(out->call_s = malloc(lc.count * sizeof *out->call_s))) rc = sl_fail(SL_EFAIL, "out of memory");
        if (!rc) {
            memcpy(out->call_s, lc.call_s, lc.count * sizeof *out->call_s);
            out->c = lc.c;
            out->draft_step_s = lc.draft_step_s;
            out->target_step_s = lc.target_step_s;
            *has = 1;
        } else sl_run_costs_free(out);
    }
    sl_log_costs_free(&lc);
    return rc;
}

/* Percentile bootstrap over whole prompts (each keeps its speculative and baseline decodes, so the
 * speedup's numerator and denominator move together): the CIs of every estimate of point, and of
 * alpha_hat - beta_tested paired on the same resamples. */
enum { K_RATE, K_ALPHA, K_TPI, K_SPEED, K_38, K_GEN, K_EXP, K_BETA, K_DIFF, K_KPI, K_CPI, K_N }; /* new keys last */

static int bootstrap(const prompt_acc *pa, size_t np, int gamma, double c, const sl_theory_vcost *vc,
                     const sl_run_report_config *cfg, double lo[K_N], double hi[K_N])
{
    for (int k = 0; k < K_N; k++) lo[k] = hi[k] = NAN;
    const long boot = cfg->boot;
    const double level = cfg->ci;
    if (boot <= 0 || np <= 1) return SL_OK;
    double *bs = malloc((size_t)boot * K_N * sizeof *bs);
    size_t *idx = malloc(np * sizeof *idx);
    gsl_rng *g = sl_rng_alloc(cfg->seed, SL_STREAM_BOOT, 0);
    int rc = !bs || !idx || !g ? sl_fail(SL_EFAIL, "out of memory") : SL_OK;
    for (long j = 0; !rc && j < boot; j++) {
        for (size_t i = 0; i < np; i++) idx[i] = (size_t)gsl_rng_uniform_int(g, np);
        point q;
        rc = point_of(pa, idx, np, gamma, c, vc, &q);
        double v[K_N] = {q.acceptance_rate, q.alpha_hat,  q.tokens_per_iter, q.speedup,
                         q.thm38,           q.general,    q.expected,        q.beta_tested,
                         q.alpha_hat - q.beta_tested,     q.kept_per_iter,   q.cost_per_iter};
        for (int k = 0; k < K_N; k++) bs[k * boot + j] = v[k];
    }
    if (g) gsl_rng_free(g);
    for (int k = 0; !rc && k < K_N; k++) {
        double *x = bs + k * boot;
        size_t n = 0;
        for (long j = 0; j < boot; j++)
            if (!isnan(x[j])) x[n++] = x[j];
        /* Not sl_stats_percentile_ci: its upper level (1 + level)/2 differs from this
         * 1 - (1 - level)/2 in the last bit for some levels below 0.25, and the bytes must stay. */
        lo[k] = sl_stats_quantile(x, n, (1 - level) / 2);
        hi[k] = sl_stats_quantile_sorted(x, n, 1 - (1 - level) / 2);
    }
    free(bs);
    free(idx);
    return rc;
}

static sl_run_estimate est(double value, double lo, double hi) { return (sl_run_estimate){value, lo, hi}; }

/* Opens log_path as a run log and reads its gammas (gl, SL_RUN_MAX_GAMMAS) into *n_g. */
static int open_run_log(const char *log_path, const sl_run_report_config *cfg, sl_log_reader **r, int *gl, size_t *n_g)
{
    *r = NULL;
    if (cfg->boot < 0) return sl_fail(SL_EINPUT, "boot: %ld is negative", cfg->boot);
    if (!(cfg->ci > 0 && cfg->ci < 1)) return sl_fail(SL_EINPUT, "ci: %g is outside (0, 1)", cfg->ci);
    int rc = sl_log_open(r, log_path);
    if (rc) return rc;
    const sl_log_meta *m = sl_log_meta_of(*r);
    if (m->kind != SL_LOG_RUN)
        rc = sl_fail(SL_EINPUT, "%s: a %s log, not a run log", log_path, sl_log_kind_name(m->kind));
    else if (!(*n_g = sl_run_log_gammas(m, gl))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sl_errmsg());
        rc = sl_fail(SL_EINPUT, "%s: %s", log_path, msg);
    }
    if (rc) {
        sl_log_close(*r);
        *r = NULL;
    }
    return rc;
}

/* The report of one gamma of the open log r (gl: its n_g gammas; gamma among them). */
static int report_of(sl_log_reader *r, const char *log_path, const sl_run_report_config *cfg, const int *gl, size_t n_g,
                     int gamma, sl_run_report *res)
{
    memset(res, 0, sizeof *res);
    prompt_acc *pa = NULL;
    size_t np = 0;
    sl_run_costs costs;
    int have_vc = 0;
    memset(&costs, 0, sizeof costs);
    uint64_t acc_at[SL_SPEC_GAMMA_MAX] = {0}, rej_at[SL_SPEC_GAMMA_MAX] = {0}; /* per draft position */
    int rc = read_prompts(r, log_path, gl, n_g, gamma, &pa, &np, acc_at, rej_at);
    if (!rc) rc = read_costs(r, &costs, &have_vc);
    const sl_theory_vcost *vc = have_vc ? &costs.v : NULL;
    const double c = have_vc ? costs.c : NAN;
    point pt;
    double lo[K_N], hi[K_N];
    if (!rc) rc = point_of(pa, NULL, np, gamma, c, vc, &pt);
    if (!rc) rc = bootstrap(pa, np, gamma, c, vc, cfg, lo, hi);
    sl_gof iid;
    memset(&iid, 0, sizeof iid);
    if (!rc && gamma >= 2) rc = sl_stats_homogeneity(acc_at, rej_at, (size_t)gamma, SL_GOF_G, &iid);
    if (!rc && !(res->prompt_sums = malloc((np ? np : 1) * sizeof *res->prompt_sums)))
        rc = sl_fail(SL_EFAIL, "out of memory");
    if (rc) {
        free(pa);
        sl_run_costs_free(&costs);
        free(res->prompt_sums);
        res->prompt_sums = NULL;
        return rc;
    }
    for (size_t i = 0; i < np; i++)
        res->prompt_sums[i] = (sl_run_prompt_sums){pa[i].iters,    pa[i].kept,      pa[i].wall,
                                                   pa[i].draft_s,  pa[i].verify_s,  pa[i].ar_tokens,
                                                   pa[i].ar_wall,  pa[i].acc,       pa[i].tested};
    res->n_prompt_sums = np;
    res->threads = (int)sl_log_meta_of(r)->threads;

    prompt_acc tot;
    memset(&tot, 0, sizeof tot);
    for (size_t i = 0; i < np; i++) {
        tot.acc += pa[i].acc, tot.tested += pa[i].tested, tot.drafted += pa[i].drafted, tot.iters += pa[i].iters;
        tot.emitted += pa[i].emitted, tot.kept += pa[i].kept, tot.wall += pa[i].wall;
        tot.draft_s += pa[i].draft_s, tot.verify_s += pa[i].verify_s, tot.sample_s += pa[i].sample_s;
        tot.ar_tokens += pa[i].ar_tokens, tot.ar_wall += pa[i].ar_wall;
    }
    free(pa);

    res->gamma = gamma;
    res->prompts = np;
    res->iterations = tot.iters;
    res->accepted = tot.acc;
    res->drafted = tot.drafted;
    res->tested = tot.tested;
    res->acceptance_rate = est(pt.acceptance_rate, lo[K_RATE], hi[K_RATE]);
    res->alpha_hat = est(pt.alpha_hat, lo[K_ALPHA], hi[K_ALPHA]);
    res->beta_tested = est(pt.beta_tested, lo[K_BETA], hi[K_BETA]);
    /* Paired over the same tested drafts: given its context a draft is accepted with probability
     * beta, so this difference has mean 0 whatever selects the positions. The 1e-6: beta sums
     * float32 probabilities, so a draft equal to the target gives beta = 1 +- 1e-7 and a CI of
     * width 0 a hair off 0. */
    const double tol = 1e-6;
    res->alpha_minus_beta_tested = est(pt.alpha_hat - pt.beta_tested, lo[K_DIFF], hi[K_DIFF]);
    res->acceptance_matches_beta = lo[K_DIFF] <= tol && -tol <= hi[K_DIFF];
    res->tokens_per_iteration = est(pt.tokens_per_iter, lo[K_TPI], hi[K_TPI]);
    /* One alpha at every draft position (what E[N] at alpha_hat assumes): accepted and rejected
     * counts by position as a 2 x gamma table, its homogeneity G-test (sl_stats_homogeneity, cells
     * with small expected counts pooled). */
    res->iid_g = res->iid_df = res->iid_p = NAN;
    if (gamma >= 2) res->iid_g = iid.stat, res->iid_df = iid.df, res->iid_p = iid.p_value;
    res->expected_tokens = est(pt.expected, lo[K_EXP], hi[K_EXP]);
    res->c = c;
    res->v_gamma_plus_1 = NAN;
    if (vc) sl_theory_vcost_eval(vc, gamma + 1, &res->v_gamma_plus_1);
    res->speedup = est(pt.speedup, lo[K_SPEED], hi[K_SPEED]);
    res->predicted_thm38 = est(pt.thm38, lo[K_38], hi[K_38]);
    res->predicted_general = est(pt.general, lo[K_GEN], hi[K_GEN]);
    const int in38 = pt.thm38 >= lo[K_SPEED] && pt.thm38 <= hi[K_SPEED];
    const int ingen = pt.general >= lo[K_SPEED] && pt.general <= hi[K_SPEED];
    res->thm38_in_ci = isnan(lo[K_SPEED]) ? NAN : in38;
    res->general_in_ci = isnan(lo[K_SPEED]) ? NAN : ingen;
    /* The same costs as the decode itself paid them: per draft step and per verification call,
     * relative to the baseline's time per token. When the prediction from these matches the
     * measured speedup but the one from the isolated timings does not, the theory holds and the
     * isolated timings misrepresent the decode (threads idling between calls, cache state). */
    const double ar_tok = tot.ar_tokens > 0 ? tot.ar_wall / tot.ar_tokens : NAN;
    res->c_in_run = tot.drafted > 0 ? tot.draft_s / tot.drafted / ar_tok : NAN;
    res->v_in_run = tot.iters > 0 ? tot.verify_s / tot.iters / ar_tok : NAN;
    res->predicted_in_run_costs = NAN;
    sl_theory_vcost v_run;
    /* Undefined (NaN) where E[N] is (no costs or no tested drafts) or the in-run costs are. */
    if (!isnan(pt.expected) && isfinite(res->c_in_run) && res->c_in_run >= 0 &&
        sl_theory_vcost_const(&v_run, res->v_in_run) == SL_OK)
        sl_theory_walltime_factor_v(pt.alpha_hat, gamma, res->c_in_run, &v_run, &res->predicted_in_run_costs);
    res->ar_time_per_token_s = ar_tok;
    res->spec_time_per_token_s = tot.kept > 0 ? tot.wall / tot.kept : NAN;
    res->target_step_s = have_vc ? costs.target_step_s : NAN;
    res->draft_step_s = have_vc ? costs.draft_step_s : NAN;

    const double secs[6] = {tot.draft_s, tot.verify_s, tot.sample_s, tot.wall - tot.draft_s - tot.verify_s - tot.sample_s,
                            tot.wall, tot.ar_wall};
    sl_run_time_part *parts[6] = {&res->drafting,          &res->verification,        &res->sampling,
                                  &res->other,             &res->speculative_total, &res->autoregressive_total};
    for (int i = 0; i < 6; i++) *parts[i] = (sl_run_time_part){secs[i], i < 5 && tot.wall > 0 ? secs[i] / tot.wall : NAN};
    res->has_costs = have_vc;
    res->costs = costs;
    res->kept_per_iteration = est(pt.kept_per_iter, lo[K_KPI], hi[K_KPI]);
    res->cost_per_iteration = est(pt.cost_per_iter, lo[K_CPI], hi[K_CPI]);
    res->overhead_in_run = tot.iters > 0 ? (tot.wall - tot.draft_s - tot.verify_s) / tot.iters / ar_tok : NAN;
    return SL_OK;
}

/* gl as "1,2,4". */
static void list_of(const int *gl, size_t n_g, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n_g && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? "," : "", gl[i]);
}

int sl_run_report_file(const char *log_path, const sl_run_report_config *cfg, sl_run_report *res)
{
    memset(res, 0, sizeof *res);
    sl_run_report_config dflt = SL_RUN_REPORT_CONFIG_DEFAULT;
    if (!cfg) cfg = &dflt;
    sl_log_reader *r = NULL;
    int gl[SL_RUN_MAX_GAMMAS];
    size_t n_g = 0;
    int rc = open_run_log(log_path, cfg, &r, gl, &n_g);
    if (rc) return rc;
    char list[256];
    list_of(gl, n_g, list, sizeof list);
    int gamma = cfg->gamma;
    if (gamma == 0 && n_g >= 2)
        rc = sl_fail(SL_EINPUT, "gamma: %s is a sweep over %s; name one of them", log_path, list);
    else if (gamma == 0) gamma = gl[0];
    else {
        size_t k = 0;
        while (k < n_g && gl[k] != gamma) k++;
        if (k == n_g)
            rc = sl_fail(SL_EINPUT, "gamma: %d is not %s %s (%s)", gamma,
                         n_g >= 2 ? "among the gammas of" : "the gamma of", log_path, list);
    }
    if (!rc) rc = report_of(r, log_path, cfg, gl, n_g, gamma, res);
    sl_log_close(r);
    return rc;
}

void sl_run_report_free(sl_run_report *res)
{
    if (!res) return;
    sl_run_costs_free(&res->costs);
    res->has_costs = 0;
    free(res->prompt_sums);
    res->prompt_sums = NULL;
    res->n_prompt_sums = 0;
}

/* ---- a sweep ---- */

/* Least squares y ~ a + b x over n >= 2 points (closed form, centred). */
static void line_fit(const double *x, const double *y, size_t n, double *a, double *b)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    for (size_t i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    *b = sxy / sxx;
    *a = my - *b * mx;
}

int sl_run_sweep_file(const char *path, const sl_run_report_config *cfg, sl_run_sweep *out)
{
    memset(out, 0, sizeof *out);
    sl_run_report_config dflt = SL_RUN_REPORT_CONFIG_DEFAULT;
    if (!cfg) cfg = &dflt;
    sl_log_reader *r = NULL;
    int gl[SL_RUN_MAX_GAMMAS];
    size_t n_g = 0;
    int rc = open_run_log(path, cfg, &r, gl, &n_g);
    if (rc) return rc;
    out->threads = (int)sl_log_meta_of(r)->threads;
    if (!(out->per_gamma = calloc(n_g, sizeof *out->per_gamma))) rc = sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < n_g; i++) {
        rc = report_of(r, path, cfg, gl, n_g, gl[i], &out->per_gamma[i]);
        if (!rc) out->n = i + 1;
    }
    sl_log_close(r);
    if (rc) {
        sl_run_sweep_free(out);
        return rc;
    }
    double best = NAN, x[SL_RUN_MAX_GAMMAS], y[SL_RUN_MAX_GAMMAS];
    int defined = 1;
    for (size_t i = 0; i < n_g; i++) {
        const sl_run_report *p = &out->per_gamma[i];
        if (!isnan(p->speedup.value) && (isnan(best) || p->speedup.value > best)) {
            best = p->speedup.value;
            out->best_gamma = p->gamma;
        }
        x[i] = p->gamma;
        y[i] = p->cost_per_iteration.value;
        defined = defined && isfinite(y[i]) && y[i] > 0;
    }
    out->fit_a = out->fit_b = out->fit_max_rel_error = NAN;
    if (n_g >= 2 && defined) {
        line_fit(x, y, n_g, &out->fit_a, &out->fit_b);
        out->fit_max_rel_error = 0;
        for (size_t i = 0; i < n_g; i++) {
            const double e = fabs((out->fit_a + out->fit_b * x[i]) / y[i] - 1);
            if (e > out->fit_max_rel_error) out->fit_max_rel_error = e;
        }
    }
    return SL_OK;
}

void sl_run_sweep_free(sl_run_sweep *s)
{
    if (!s) return;
    for (size_t i = 0; s->per_gamma && i < s->n; i++) sl_run_report_free(&s->per_gamma[i]);
    free(s->per_gamma);
    s->per_gamma = NULL;
    s->n = 0;
}

/* ---- rendering ---- */

static void metric(sl_table *t, const char *name, sl_run_estimate e, const char *note)
{
    sl_table_row(t);
    sl_table_sets(t, "metric", name);
    sl_table_setd(t, "value", e.value);
    sl_table_setd(t, "ci_lo", e.lo);
    sl_table_setd(t, "ci_hi", e.hi);
    sl_table_sets(t, "note", note);
}

/* A value without a CI. */
static sl_run_estimate plain(double v) { return (sl_run_estimate){v, NAN, NAN}; }

static sl_table *run_table(const sl_run_report *r)
{
    static const sl_colspec cols[] = {SL_COL_S("metric"), SL_COL_D("value", "%.5g"), SL_COL_D("ci_lo", "%.5g"),
                                      SL_COL_D("ci_hi", "%.5g"), SL_COL_S("note")};
    sl_table *t = SL_TABLE_NEW("run", cols);
    char note[256];
    metric(t, "gamma", plain(r->gamma), "drafts per iteration");
    metric(t, "prompts", plain((double)r->prompts), "each decoded speculatively and autoregressively");
    metric(t, "iterations", plain(r->iterations), "speculative iterations (Algorithm 1)");
    snprintf(note, sizeof note, "accepted %.0f of %.0f drafted (vLLM's acceptance rate)", r->accepted, r->drafted);
    metric(t, "acceptance_rate", r->acceptance_rate, note);
    snprintf(note, sizeof note, "accepted %.0f of %.0f tested (drafts up to the first rejection): estimates alpha",
             r->accepted, r->tested);
    metric(t, "alpha_hat", r->alpha_hat, note);
    metric(t, "beta_tested", r->beta_tested, "mean logged beta at the tested positions: what alpha_hat must match");
    snprintf(note, sizeof note, "paired, same resamples; acceptance == beta %s (0 %s the CI, +-1e-6)",
             r->acceptance_matches_beta ? "holds" : "FAILS", r->acceptance_matches_beta ? "inside" : "outside");
    metric(t, "alpha_minus_beta_tested", r->alpha_minus_beta_tested, note);
    metric(t, "tokens_per_iteration", r->tokens_per_iteration, "observed emitted / iterations");
    metric(t, "expected_tokens", r->expected_tokens, "E[N] = (1 - a^(g+1))/(1 - a) at alpha_hat");
    snprintf(note, sizeof note, "G-test of one alpha at every draft position (%.0f df): %s", r->iid_df,
             isnan(r->iid_p) ? "gamma 1, nothing to test"
             : r->iid_p < 0.001 ? "rejected: acceptance depends on the position (or the prompt), E[N] at alpha_hat is biased"
                                : "not rejected at 0.001");
    metric(t, "iid_g", plain(r->iid_g), note);
    metric(t, "iid_df", plain(r->iid_df), "its degrees of freedom: positions (after pooling small cells) - 1");
    metric(t, "iid_p", plain(r->iid_p), "its p-value (chi-square tail)");
    metric(t, "c", plain(r->c), "measured: draft step / target step (medians)");
    metric(t, "v_gamma_plus_1", plain(r->v_gamma_plus_1), "measured: target call on gamma+1 tokens / single-token call");
    metric(t, "speedup", r->speedup, "measured: autoregressive / speculative time per token (CI over prompts)");
    const double speed = r->speedup.value;
    snprintf(note, sizeof note, "Theorem 3.8 E[N]/(g c + 1) at alpha_hat; %s the measured CI (%+.1f%%)",
             r->thm38_in_ci == 1 ? "INSIDE" : "outside", 100 * (r->predicted_thm38.value / speed - 1));
    metric(t, "predicted_thm38", r->predicted_thm38, note);
    snprintf(note, sizeof note, "E[N]/(g c + v(g+1)) at alpha_hat; %s the measured CI (%+.1f%%)",
             r->general_in_ci == 1 ? "INSIDE" : "outside", 100 * (r->predicted_general.value / speed - 1));
    metric(t, "predicted_general", r->predicted_general, note);
    metric(t, "thm38_in_ci", plain(r->thm38_in_ci), "1 if Theorem 3.8's prediction is inside");
    metric(t, "general_in_ci", plain(r->general_in_ci), "1 if the generalised prediction is inside");
    metric(t, "c_in_run", plain(r->c_in_run), "draft seconds per draft step in the decode / baseline seconds per token");
    metric(t, "v_in_run", plain(r->v_in_run), "verification seconds per call in the decode / baseline seconds per token");
    snprintf(note, sizeof note, "E[N]/(g c_in_run + v_in_run): the decode's own costs (%+.1f%%)",
             100 * (r->predicted_in_run_costs / speed - 1));
    metric(t, "predicted_in_run_costs", plain(r->predicted_in_run_costs), note);
    metric(t, "ar_time_per_token_s", plain(r->ar_time_per_token_s), "baseline seconds per token");
    metric(t, "spec_time_per_token_s", plain(r->spec_time_per_token_s), "speculative seconds per token");
    metric(t, "target_step_s", plain(r->target_step_s), "cost measurement");
    metric(t, "draft_step_s", plain(r->draft_step_s), "cost measurement");
    return t;
}

static sl_table *time_split_table(const sl_run_report *r)
{
    static const sl_colspec cols[] = {SL_COL_S("component"), SL_COL_D("seconds", "%.5g"), SL_COL_D("fraction", "%.4f")};
    sl_table *t = SL_TABLE_NEW("time_split", cols);
    const char *names[6] = {"drafting", "verification", "sampling", "other", "speculative_total", "autoregressive_total"};
    const sl_run_time_part *parts[6] = {&r->drafting, &r->verification,      &r->sampling,
                                        &r->other,    &r->speculative_total, &r->autoregressive_total};
    for (int i = 0; i < 6; i++) {
        sl_table_row(t);
        sl_table_sets(t, "component", names[i]);
        sl_table_setd(t, "seconds", parts[i]->seconds);
        sl_table_setd(t, "fraction", parts[i]->fraction);
    }
    return t;
}

static sl_table *costs_table(const sl_run_report *r)
{
    static const sl_colspec cols[] = {SL_COL_I("n"), SL_COL_D("call_s", "%.5g"), SL_COL_D("v", "%.4f")};
    sl_table *t = SL_TABLE_NEW("costs", cols);
    const size_t count = r->has_costs ? r->costs.v.n_entries : 0;
    for (size_t i = 0; i < count; i++) {
        sl_table_row(t);
        sl_table_seti(t, "n", r->costs.v.n[i]);
        sl_table_setd(t, "call_s", r->costs.call_s[i]);
        sl_table_setd(t, "v", r->costs.v.v[i]);
    }
    return t;
}

/* A value with its CI as three columns: name, name_ci_lo, name_ci_hi. */
static void set_est(sl_table *t, const char *name, sl_run_estimate e)
{
    char col[64];
    sl_table_setd(t, name, e.value);
    snprintf(col, sizeof col, "%s_ci_lo", name);
    sl_table_setd(t, col, e.lo);
    snprintf(col, sizeof col, "%s_ci_hi", name);
    sl_table_setd(t, col, e.hi);
}

static sl_table *sweep_table(const sl_run_sweep *s)
{
#define EST_COLS(name) SL_COL_D(name, "%.5g"), SL_COL_D(name "_ci_lo", "%.5g"), SL_COL_D(name "_ci_hi", "%.5g")
    static const sl_colspec cols[] = {SL_COL_I("gamma"),           SL_COL_I("prompts"),
                                      SL_COL_D("iterations", "%.0f"), EST_COLS("alpha_hat"),
                                      EST_COLS("tokens_per_iteration"), EST_COLS("speedup"),
                                      EST_COLS("cost_per_iteration"), SL_COL_D("c_in_run", "%.5g"),
                                      SL_COL_D("v_in_run", "%.5g"), SL_COL_D("overhead_in_run", "%.5g"),
                                      SL_COL_D("predicted_general", "%.5g"), SL_COL_D("iid_g", "%.5g"),
                                      SL_COL_D("iid_df", "%.0f"), SL_COL_D("iid_p", "%.3g"), SL_COL_I("best")};
#undef EST_COLS
    sl_table *t = SL_TABLE_NEW("sweep", cols);
    for (size_t i = 0; i < s->n; i++) {
        const sl_run_report *r = &s->per_gamma[i];
        sl_table_row(t);
        sl_table_seti(t, "gamma", r->gamma);
        sl_table_seti(t, "prompts", (int64_t)r->prompts);
        sl_table_setd(t, "iterations", r->iterations);
        set_est(t, "alpha_hat", r->alpha_hat);
        set_est(t, "tokens_per_iteration", r->kept_per_iteration);
        set_est(t, "speedup", r->speedup);
        set_est(t, "cost_per_iteration", r->cost_per_iteration);
        sl_table_setd(t, "c_in_run", r->c_in_run);
        sl_table_setd(t, "v_in_run", r->v_in_run);
        sl_table_setd(t, "overhead_in_run", r->overhead_in_run);
        sl_table_setd(t, "predicted_general", r->predicted_general.value);
        sl_table_setd(t, "iid_g", r->iid_g);
        sl_table_setd(t, "iid_df", r->iid_df);
        sl_table_setd(t, "iid_p", r->iid_p);
        sl_table_seti(t, "best", r->gamma == s->best_gamma);
    }
    return t;
}

static sl_table *cost_fit_table(const sl_run_sweep *s)
{
    static const sl_colspec cols[] = {SL_COL_D("fit_a", "%.5g"), SL_COL_D("fit_b", "%.5g"),
                                      SL_COL_D("fit_max_rel_error", "%.4f"), SL_COL_S("note")};
    sl_table *t = SL_TABLE_NEW("cost_fit", cols);
    sl_table_row(t);
    sl_table_setd(t, "fit_a", s->fit_a);
    sl_table_setd(t, "fit_b", s->fit_b);
    sl_table_setd(t, "fit_max_rel_error", s->fit_max_rel_error);
    sl_table_sets(t, "note", "cost per iteration in baseline-token units ~ a + b gamma; least squares over the sweep");
    return t;
}

/* Takes the nt tables in t (freed on failure) as the result. */
static int hand_over(sl_table **t, size_t nt, sl_table ***tables, size_t *n)
{
    int rc = SL_OK;
    for (size_t i = 0; i < nt && !rc; i++) rc = sl_table_status(t[i]);
    if (rc) {
        for (size_t i = 0; i < nt; i++) sl_table_free(t[i]);
        free(t);
        return rc;
    }
    *tables = t;
    *n = nt;
    return SL_OK;
}

int sl_run_sweep_tables(const sl_run_sweep *s, sl_table ***tables, size_t *n)
{
    *tables = NULL;
    *n = 0;
    if (s->n < 1) return sl_fail(SL_EINPUT, "sweep: no gamma reported");
    sl_table **t = malloc(3 * sizeof *t);
    if (!t) return sl_fail(SL_EFAIL, "out of memory");
    t[0] = sweep_table(s);
    t[1] = cost_fit_table(s);
    t[2] = costs_table(&s->per_gamma[0]); /* one calibration per log */
    return hand_over(t, 3, tables, n);
}

int sl_run_report_tables(const sl_run_report *res, sl_table ***tables, size_t *n)
{
    *tables = NULL;
    *n = 0;
    sl_table **t = malloc(3 * sizeof *t);
    if (!t) return sl_fail(SL_EFAIL, "out of memory");
    t[0] = run_table(res);
    t[1] = time_split_table(res);
    t[2] = costs_table(res);
    return hand_over(t, 3, tables, n);
}
