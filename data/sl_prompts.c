/* sl_prompts.c: the prompt-set reader (format in sl_prompts.h and data/README.md). */
#include "sl_prompts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_tok.h"

void sl_prompts_free(sl_prompts *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->text[i]);
    free(p->text);
    free(p->len);
    free(p);
}

int sl_prompts_read(const char *path, sl_prompts **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sl_fail(SL_EINPUT, "cannot read prompts %s: %s", path, strerror(errno));
    sl_prompts *p = sl_calloc(1, sizeof *p);
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    size_t lineno = 0;
    int rc = p ? SL_OK : SL_EFAIL;
    while (!rc && (got = getline(&line, &lcap, f)) != -1) {
        lineno++;
        size_t n = (size_t)got;
        if (n && line[n - 1] == '\n') n--;
        if (sl_utf8_valid_prefix((const unsigned char *)line, n) != n) {
            rc = sl_fail(SL_EINPUT, "%s:%zu: not valid UTF-8", path, lineno);
            break;
        }
        if (n == 0) {
            rc = sl_fail(SL_EINPUT, "%s:%zu: empty prompt", path, lineno);
            break;
        }
        char *s = sl_malloc(n + 1);
        if (!s) { rc = SL_EFAIL; break; }
        size_t k = 0;
        for (size_t i = 0; i < n && !rc; i++) {
            if (line[i] != '\\') { s[k++] = line[i]; continue; }
            char e = i + 1 < n ? line[++i] : 0;
            switch (e) {
            case 'n': s[k++] = '\n'; break;
            case 't': s[k++] = '\t'; break;
            case 'r': s[k++] = '\r'; break;
            case '\\': s[k++] = '\\'; break;
            default:
                rc = sl_fail(SL_EINPUT, "%s:%zu: bad escape at column %zu (expected \\n, \\t, \\r or \\\\)", path,
                             lineno, i + 1);
            }
        }
        if (rc) { free(s); break; }
        s[k] = 0;
        if (p->n == cap) {
            cap = cap ? cap * 2 : 256;
            char **t = realloc(p->text, cap * sizeof *t);
            if (t) p->text = t;
            size_t *l = realloc(p->len, cap * sizeof *l);
            if (l) p->len = l;
            if (!t || !l) { free(s); rc = sl_fail(SL_EFAIL, "out of memory"); break; }
        }
        p->text[p->n] = s;
        p->len[p->n++] = k;
    }
    if (!rc && ferror(f)) rc = sl_fail(SL_EINPUT, "%s: read error", path);
    if (!rc && p->n == 0) rc = sl_fail(SL_EINPUT, "%s: no prompts (empty file)", path);
    free(line);
    fclose(f);
    if (rc) {
        sl_prompts_free(p);
        return rc;
    }
    *out = p;
    return SL_OK;
}
