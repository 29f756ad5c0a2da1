/* sl_cli.c: option parsing helpers with one-line errors that name the flag and the value. */
#include "sl_cli.h"

#include "sl_model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sl_cli_double(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end != 0 || errno == ERANGE || !isfinite(x))
        return sl_fail(SL_EINPUT, "%s: '%s' is not a finite number", flag, s);
    *out = x;
    return SL_OK;
}

int sl_cli_double_in(const char *flag, const char *s, double lo, int lo_open, double hi, int hi_open,
                     double *out)
{
    double x;
    int rc = sl_cli_double(flag, s, &x);
    if (rc) return rc;
    if (x < lo || x > hi || (lo_open && x == lo) || (hi_open && x == hi))
        return sl_fail(SL_EINPUT, "%s: %s is outside %c%g, %g%c", flag, s, lo_open ? '(' : '[', lo, hi,
                       hi_open ? ')' : ']');
    *out = x;
    return SL_OK;
}

int sl_cli_long_in(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || *end != 0 || errno == ERANGE)
        return sl_fail(SL_EINPUT, "%s: '%s' is not an integer", flag, s);
    if (x < lo || x > hi) return sl_fail(SL_EINPUT, "%s: %ld is outside [%ld, %ld]", flag, x, lo, hi);
    *out = x;
    return SL_OK;
}

int sl_cli_u64(const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '-') return sl_fail(SL_EINPUT, "%s: '%s' must be a non-negative integer", flag, s);
    unsigned long long x = strtoull(s, &end, 0);
    if (end == s || *end != 0 || errno == ERANGE)
        return sl_fail(SL_EINPUT, "%s: '%s' is not a non-negative integer", flag, s);
    *out = (uint64_t)x;
    return SL_OK;
}

int sl_cli_sweep(const char *flag, const char *s, double **vals, size_t *n)
{
    *vals = NULL;
    *n = 0;
    size_t len = strlen(s);
    char *buf = sl_malloc(len + 1);
    if (!buf) return SL_EFAIL;
    memcpy(buf, s, len + 1);
    int rc = SL_OK;
    double *v = NULL;
    size_t nv = 0;
    if (strchr(buf, ':')) {
        char *parts[3] = {0};
        int np = 0;
        for (char *tok = buf, *sep; tok && np < 3; tok = sep) {
            sep = strchr(tok, ':');
            if (sep) *sep++ = 0;
            parts[np++] = tok;
            if (np == 3 && sep) { rc = sl_fail(SL_EINPUT, "%s: '%s' has more than start:stop:step", flag, s); break; }
        }
        double a, b, step = 1;
        if (!rc) rc = sl_cli_double(flag, parts[0], &a);
        if (!rc) rc = sl_cli_double(flag, parts[1] ? parts[1] : "", &b);
        if (!rc && np == 3) rc = sl_cli_double(flag, parts[2], &step);
        if (!rc && (step <= 0 || b < a))
            rc = sl_fail(SL_EINPUT, "%s: '%s' needs start <= stop and step > 0", flag, s);
        if (!rc) {
            double count = floor((b - a) / step + 1e-9) + 1;
            if (count > 1e6) rc = sl_fail(SL_EINPUT, "%s: '%s' gives more than 1e6 values", flag, s);
            else {
                nv = (size_t)count;
                v = sl_malloc(nv * sizeof *v);
                if (!v) rc = SL_EFAIL;
                /* a + i*step rather than repeated addition, then rounded to 15 significant digits,
                 * so that 0.5 + 2*0.05 is the double nearest 0.6 and not 0.6000000000000001. */
                for (size_t i = 0; !rc && i < nv; i++) {
                    char num[32];
                    snprintf(num, sizeof num, "%.15g", a + (double)i * step);
                    v[i] = strtod(num, NULL);
                    if (v[i] > b) v[i] = b;
                }
            }
        }
    } else {
        size_t cap = 1;
        for (const char *c = buf; *c; c++) cap += *c == ',';
        v = sl_malloc(cap * sizeof *v);
        if (!v) rc = SL_EFAIL;
        for (char *tok = buf, *sep; !rc && tok; tok = sep) {
            sep = strchr(tok, ',');
            if (sep) *sep++ = 0;
            rc = sl_cli_double(flag, tok, &v[nv]);
            nv++;
        }
    }
    free(buf);
    if (rc) {
        free(v);
        return rc;
    }
    *vals = v;
    *n = nv;
    return SL_OK;
}

int sl_cli_vector(const char *flag, const char *s, double **out, size_t *n)
{
    if (s[0] != '@') {
        if (strchr(s, ':')) return sl_fail(SL_EINPUT, "%s: '%s': ranges are not allowed here", flag, s);
        return sl_cli_sweep(flag, s, out, n);
    }
    FILE *f = fopen(s + 1, "r");
    if (!f) return sl_fail(SL_EINPUT, "%s: cannot open %s", flag, s + 1);
    size_t cap = 1024, len = 0;
    double *v = sl_malloc(cap * sizeof *v);
    char tok[128];
    int rc = v ? SL_OK : SL_EFAIL;
    while (rc == SL_OK && fscanf(f, "%127s", tok) == 1) {
        if (len == cap) {
            double *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                rc = sl_fail(SL_EFAIL, "out of memory");
                break;
            }
            v = nv;
            cap *= 2;
        }
        rc = sl_cli_double(flag, tok, &v[len++]);
    }
    fclose(f);
    if (rc == SL_OK && len == 0) rc = sl_fail(SL_EINPUT, "%s: %s holds no numbers", flag, s + 1);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = len;
    return SL_OK;
}

int sl_cli_progress_enabled(void) { return isatty(STDERR_FILENO); }

/* ---- the option registry ---- */

#include <getopt.h>
#include <inttypes.h>

void sl_cli_init(sl_cli *c, const char *command, const char *synopsis, const char *about)
{
    memset(c, 0, sizeof *c);
    c->command = command;
    c->synopsis = synopsis;
    c->about = about;
}

sl_opt *sl_cli_add(sl_cli *c, sl_opt o)
{
    /* A command with more options than the registry holds is a programming error: fail loudly. */
    if (c->n == SL_CLI_MAX_OPTS) {
        fprintf(stderr, "speclab %s: too many options for the registry (SL_CLI_MAX_OPTS)\n", c->command);
        abort();
    }
    c->opt[c->n] = o;
    return &c->opt[c->n++];
}

void sl_cli_flag(sl_cli *c, const char *name, int *dst, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .kind = SL_OPT_FLAG, .dst = dst, .help = help});
}

void sl_cli_string(sl_cli *c, const char *name, const char *metavar, const char **dst, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_STRING, .dst = dst, .help = help});
}

void sl_cli_long(sl_cli *c, const char *name, const char *metavar, long *dst, long lo, long hi, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_LONG, .dst = dst, .lo = (double)lo,
                           .hi = (double)hi, .help = help});
}

void sl_cli_size(sl_cli *c, const char *name, const char *metavar, size_t *dst, size_t lo, size_t hi, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_SIZE, .dst = dst, .lo = (double)lo,
                           .hi = (double)hi, .help = help});
}

void sl_cli_int(sl_cli *c, const char *name, const char *metavar, int *dst, int lo, int hi, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_INT, .dst = dst, .lo = lo, .hi = hi,
                           .help = help});
}

void sl_cli_dbl(sl_cli *c, const char *name, const char *metavar, double *dst, double lo, double hi, unsigned flags,
                const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_DOUBLE, .dst = dst, .lo = lo, .hi = hi,
                           .flags = flags, .help = help});
}

void sl_cli_custom(sl_cli *c, const char *name, const char *metavar, void *dst,
                   int (*parse)(const char *flag, const char *arg, void *dst), const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_CUSTOM, .dst = dst, .parse = parse,
                           .help = help});
}

void sl_cli_list_opt(sl_cli *c, const char *name, const char *metavar, sl_cli_list *dst, const char *help)
{
    sl_cli_add(c, (sl_opt){.name = name, .metavar = metavar, .kind = SL_OPT_LIST, .dst = dst, .help = help});
}

void sl_cli_list_free(sl_cli_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Appends arg to l, which has room for every argument of the command line (argc values). */
static int list_add(sl_cli_list *l, const char *arg, int argc)
{
    if (!l->v && !(l->v = sl_calloc((size_t)argc + 1, sizeof *l->v))) return SL_EFAIL;
    l->v[l->n++] = arg;
    return SL_OK;
}

static int parse_rule(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_rule_parse(arg, dst);
}

static int parse_format(const char *flag, const char *arg, void *dst)
{
    (void)flag;
    return sl_format_parse(arg, dst);
}

void sl_cli_group_sampling(sl_cli *c, sl_sampling *s)
{
    sl_cli_dbl(c, "temperature", "T", &s->temperature, 0, 1e6, 0, "sampling temperature; 0 = greedy (default 1)");
    sl_cli_size(c, "top-k", "K", &s->top_k, 0, (size_t)1 << 30, "keep the K most probable tokens; 0 = off (default)");
    sl_cli_dbl(c, "top-p", "P", &s->top_p, 0, 1, SL_OPT_LO_OPEN, "nucleus: smallest set with mass >= P (default 1 = off)");
    sl_cli_dbl(c, "min-p", "M", &s->min_p, 0, 1, SL_OPT_HI_OPEN, "drop tokens below M times the top probability (default 0)");
}

void sl_cli_group_rule(sl_cli *c, sl_spec_config *cfg)
{
    sl_cli_custom(c, "rule", "R", &cfg->rule, parse_rule,
                  "acceptance rule: exact (default), lenient, lenient-t0, sampler-match, or a bug-* variant");
    sl_cli_dbl(c, "lenience", "L", &cfg->lenience, 0, 1, SL_OPT_LO_OPEN, "lenience l of the lenient rules (default 1)");
}

/* The device is set for the whole process as soon as the flag is read: every transformer the
 * command opens afterwards (target and draft alike) is placed there when its context is made. */
static int parse_device(const char *flag, const char *arg, void *dst)
{
    (void)flag; /* the library's message starts with "device:", which main() turns into the flag */
    int rc = sl_model_set_default_device(arg);
    if (rc) return rc;
    *(const char **)dst = arg;
    return SL_OK;
}

void sl_cli_group_device(sl_cli *c, const char **device)
{
    static const char *unused;
    sl_cli_custom(c, "device", "D", device ? device : &unused, parse_device,
                  "where transformers run: cpu (default), cuda (build/libsl_infer_cuda.so, `make cuda`) or cuda-emu "
                  "(the CUDA kernels on the CPU, for tests)");
}

void sl_cli_group_seed(sl_cli *c, uint64_t *seed, int *threads)
{
    sl_cli_add(c, (sl_opt){.name = "seed", .metavar = "S", .kind = SL_OPT_U64, .dst = seed,
                           .help = "global seed: every random stream derives from (S, stream, item)"});
    if (threads)
        sl_cli_int(c, "threads", "N", threads, 0, 1024, "worker threads; 0 = OpenMP's default (results do not depend on it)");
}

void sl_cli_group_format(sl_cli *c, sl_format *fmt)
{
    sl_cli_custom(c, "format", "F", fmt, parse_format, "output: table (default), csv or json");
}

/* A copy of the most recently parsed command's registry, for sl_cli_flag_for: main() asks after
 * the command has returned, when the command's own sl_cli (often on its stack) is gone. */
static sl_cli last_copy;
static const sl_cli *last_parsed;

static int set_value(sl_opt *o, const char *arg)
{
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", o->name);
    int lo_open = (o->flags & SL_OPT_LO_OPEN) != 0, hi_open = (o->flags & SL_OPT_HI_OPEN) != 0;
    long v;
    int rc;
    switch (o->kind) {
    case SL_OPT_FLAG: *(int *)o->dst = 1; return SL_OK;
    case SL_OPT_STRING: *(const char **)o->dst = arg; return SL_OK;
    case SL_OPT_LONG: return sl_cli_long_in(flag, arg, (long)o->lo, (long)o->hi, (long *)o->dst);
    case SL_OPT_SIZE:
        if ((rc = sl_cli_long_in(flag, arg, (long)o->lo, (long)o->hi, &v))) return rc;
        *(size_t *)o->dst = (size_t)v;
        return SL_OK;
    case SL_OPT_INT:
        if ((rc = sl_cli_long_in(flag, arg, (long)o->lo, (long)o->hi, &v))) return rc;
        *(int *)o->dst = (int)v;
        return SL_OK;
    case SL_OPT_DOUBLE: return sl_cli_double_in(flag, arg, o->lo, lo_open, o->hi, hi_open, (double *)o->dst);
    case SL_OPT_U64: return sl_cli_u64(flag, arg, (uint64_t *)o->dst);
    case SL_OPT_FORMAT: return sl_format_parse(arg, (sl_format *)o->dst);
    case SL_OPT_CUSTOM: return o->parse(flag, arg, o->dst);
    case SL_OPT_LIST: break; /* appended by sl_cli_parse, which knows argc */
    }
    return sl_fail(SL_EFAIL, "%s: unknown option kind", flag);
}

static int add_pos(sl_cli *c, char *arg, size_t max_pos)
{
    if (c->n_pos == max_pos || c->n_pos == SL_CLI_MAX_POS)
        return sl_fail(SL_EINPUT, "unexpected argument '%s' (see speclab %s --help)", arg, c->command);
    c->pos[c->n_pos++] = arg;
    return SL_OK;
}

int sl_cli_parse(sl_cli *c, int argc, char **argv, size_t max_pos)
{
    struct option lo[SL_CLI_MAX_OPTS + 2];
    for (size_t i = 0; i < c->n; i++) {
        lo[i] = (struct option){c->opt[i].name, c->opt[i].kind == SL_OPT_FLAG ? no_argument : required_argument, 0,
                                256 + (int)i};
        c->opt[i].seen = 0;
    }
    lo[c->n] = (struct option){"help", no_argument, 0, 'h'};
    lo[c->n + 1] = (struct option){0, 0, 0, 0};
    last_copy = *c;
    last_parsed = &last_copy;
    c->n_pos = 0;
    optind = 1;
    opterr = 0;
    int ch, rc;
    sl_opt *list = NULL; /* the list option whose values plain arguments continue, if any */
    /* "-": positional arguments come back in order as code 1, so they may stand anywhere. */
    while ((ch = getopt_long(argc, argv, "-h", lo, NULL)) != -1) {
        if (ch == 'h') {
            sl_cli_usage(c, stdout);
            return -1;
        }
        if (ch == 1) {
            if (list) rc = list_add(list->dst, optarg, argc);
            else rc = add_pos(c, optarg, max_pos);
            if (rc) return rc;
            continue;
        }
        list = NULL;
        if (ch < 256 || ch >= 256 + (int)c->n) {
            const char *bad = argv[optind - 1];
            if (ch == '?' && optopt >= 256)
                return sl_fail(SL_EINPUT, "option '%s' needs a value (see speclab %s --help)", bad, c->command);
            /* An unknown short option may sit in a group ("-xh") that optind has not moved past. */
            if (ch == '?' && optopt > 0 && optopt < 256)
                return sl_fail(SL_EINPUT, "unknown option '-%c' (see speclab %s --help)", optopt, c->command);
            return sl_fail(SL_EINPUT, "unknown option '%s' (see speclab %s --help)", bad, c->command);
        }
        sl_opt *o = &c->opt[ch - 256];
        if (o->kind == SL_OPT_LIST) {
            if ((rc = list_add(o->dst, optarg, argc))) return rc;
            list = o;
        } else if ((rc = set_value(o, optarg)))
            return rc;
        o->seen = 1;
    }
    for (; optind < argc; optind++) /* after "--" */
        if ((rc = add_pos(c, argv[optind], max_pos))) return rc;
    for (size_t i = 0; i < c->n; i++)
        if ((c->opt[i].flags & SL_OPT_REQUIRED) && !c->opt[i].seen)
            return sl_fail(SL_EINPUT, "--%s is required (see speclab %s --help)", c->opt[i].name, c->command);
    return SL_OK;
}

int sl_cli_given(const sl_cli *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->opt[i].name, name)) return c->opt[i].seen;
    return 0;
}

void sl_cli_usage(const sl_cli *c, FILE *f)
{
    fprintf(f, "usage: speclab %s %s\n", c->command, c->synopsis ? c->synopsis : "[options]");
    if (c->about && c->about[0]) fprintf(f, "\n%s", c->about);
    if (c->about && c->about[0] && c->about[strlen(c->about) - 1] != '\n') fputc('\n', f);
    fputc('\n', f);
    for (size_t i = 0; i < c->n; i++) {
        const sl_opt *o = &c->opt[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(f, "  %-22s %s%s\n", left, o->help ? o->help : "", (o->flags & SL_OPT_REQUIRED) ? " (required)" : "");
    }
    fprintf(f, "  %-22s %s\n", "--help", "this text");
}

const char *sl_cli_flag_for(const char *quantity, char *buf, size_t n)
{
    if (!last_parsed) return NULL;
    for (size_t i = 0; i < last_parsed->n; i++) {
        const sl_opt *o = &last_parsed->opt[i];
        char q[80];
        if (o->quantity) snprintf(q, sizeof q, "%s", o->quantity);
        else {
            snprintf(q, sizeof q, "%s", o->name);
            for (char *p = q; *p; p++)
                if (*p == '-') *p = '_';
        }
        if (!strcmp(q, quantity)) {
            snprintf(buf, n, "--%s", o->name);
            return buf;
        }
    }
    return NULL;
}

/* ---- progress lines ---- */

void sl_cli_progress_init(sl_cli_progress *p, const char *label, const char *unit, int quiet)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit;
    p->on = !quiet && sl_cli_progress_enabled();
    p->start_s = sl_now_s();
}

/* "1 h 02 min", "3 min 05 s", "12 s", "2.4 s": short enough for one line. */
static void format_duration(double s, char *buf, size_t n)
{
    long t = (long)(s + 0.5);
    if (s < 9.95) snprintf(buf, n, "%.1f s", s);
    else if (t >= 3600) snprintf(buf, n, "%ld h %02ld min", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%ld min %02ld s", t / 60, t % 60);
    else snprintf(buf, n, "%ld s", t);
}

void sl_cli_progress_cb(void *ctx, size_t done, size_t total)
{
    sl_cli_progress *p = ctx;
    if (!p->on) return;
    double now = sl_now_s(), elapsed = now - p->start_s;
    int last = done >= total;
    if (!p->called) {
        p->called = 1;
        p->first_s = now;
        p->first_done = done;
    }
    if (!last && p->open && now - p->last_s < 0.1) return; /* at most ~10 redraws a second */
    p->last_s = now;
    char left[32] = "?";
    double rate = done > p->first_done && now > p->first_s ? (double)(done - p->first_done) / (now - p->first_s)
                  : elapsed > 0                            ? (double)done / elapsed
                                                           : 0;
    if (last) format_duration(elapsed, left, sizeof left);
    else if (rate > 0) format_duration((double)(total - done) / rate, left, sizeof left);
    /* \033[K clears what a longer earlier line left behind (stderr is a terminal here). */
    fprintf(stderr, "\r%s: %zu/%zu %s  %.*f %s/s  %s %s\033[K", p->label, done, total, p->unit,
            rate < 10 ? 2 : rate < 1000 ? 1 : 0, rate, p->unit, left, last ? "elapsed" : "left");
    p->open = 1;
    if (last) {
        fputc('\n', stderr);
        p->open = 0;
    }
    fflush(stderr);
}

sl_progress_fn sl_cli_progress_fn(const sl_cli_progress *p) { return p->on ? sl_cli_progress_cb : NULL; }

void sl_cli_progress_end(sl_cli_progress *p)
{
    if (p->open) fputc('\n', stderr);
    p->open = 0;
}

void sl_cli_group_quiet(sl_cli *c, int *quiet)
{
    sl_cli_flag(c, "quiet", quiet, "no progress line on stderr (shown only when stderr is a terminal)");
}

void sl_cli_group_force(sl_cli *c, int *force)
{
    sl_cli_flag(c, "force", force,
                "replace an existing output file this command did not write (without it: refused, exit 2)");
}

/* "1,2,3" -> token ids (malloc'd, *n of them); flag names the option in the error. */
int sl_cli_ids(const char *flag, const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *v = sl_malloc(cap * sizeof *v);
    if (!v) return SL_EFAIL;
    size_t k = 0;
    const char *p = s;
    while (1) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != 0) || errno || x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return sl_fail(SL_EINPUT, "%s: '%s' is not a comma-separated list of integers", flag, s);
        }
        v[k++] = (int32_t)x;
        if (!*end) break;
        p = end + 1;
    }
    *ids = v;
    *n = k;
    return SL_OK;
}
