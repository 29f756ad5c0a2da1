/* sl_cli.c: option parsing helpers with one-line errors that name the flag and the value. */
#include "sl_cli.h"

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

int sl_cli_progress_enabled(void) { return isatty(STDERR_FILENO); }
