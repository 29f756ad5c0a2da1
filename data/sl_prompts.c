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

static void sl_prompt_ids_free_fields(sl_prompt_ids *p)
{
    for (size_t i = 0; p->ids && i < p->n; i++) free(p->ids[i]);
    free(p->ids);
    free(p->len);
}

void sl_prompt_ids_free(sl_prompt_ids *p)
{
    if (!p) return;
    sl_prompt_ids_free_fields(p);
    free(p);
}

int sl_prompt_ids_read(const char *path, sl_prompt_ids **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return sl_fail(SL_EINPUT, "prompt_ids: cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, pcap = 0;
    sl_prompt_ids p = {0};
    int rc = SL_OK;
    while (rc == SL_OK && getline(&line, &cap, f) > 0) {
        if (p.n == pcap) {
            pcap = pcap ? 2 * pcap : 64;
            int32_t **t = realloc(p.ids, pcap * sizeof *t);
            if (t) p.ids = t;
            size_t *l = realloc(p.len, pcap * sizeof *l);
            if (l) p.len = l;
            if (!t || !l) {
                rc = sl_fail(SL_EFAIL, "out of memory reading %s", path);
                break;
            }
        }
        size_t i = p.n++;
        p.len[i] = 0;
        if (!(p.ids[i] = malloc((strlen(line) / 2 + 2) * sizeof **p.ids))) {
            rc = sl_fail(SL_EFAIL, "out of memory reading %s", path);
            break;
        }
        char *s = line, *end;
        for (;;) {
            while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
            if (!*s) break;
            errno = 0;
            long v = strtol(s, &end, 10);
            if (end == s || errno || v < 0 || v > INT32_MAX) {
                rc = sl_fail(SL_EINPUT, "prompt_ids: %s line %zu: '%.20s' is not a token id", path, i + 1, s);
                break;
            }
            p.ids[i][p.len[i]++] = (int32_t)v;
            s = end;
        }
        if (!rc && p.len[i] == 0) rc = sl_fail(SL_EINPUT, "prompt_ids: %s line %zu is empty", path, i + 1);
    }
    free(line);
    fclose(f);
    if (!rc && p.n == 0) rc = sl_fail(SL_EINPUT, "prompt_ids: %s holds no prompts", path);
    if (rc) {
        sl_prompt_ids_free_fields(&p);
        return rc;
    }
    if (!(*out = sl_malloc(sizeof **out))) {
        sl_prompt_ids_free_fields(&p);
        return SL_EFAIL;
    }
    **out = p;
    return SL_OK;
}

