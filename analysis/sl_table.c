/* sl_table.c: aligned text, CSV and JSON writers over one table structure. */
#include "sl_table.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = sl_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* Records the first failure on t (sticky) and returns its code. */
static int fail_table(sl_table *t, int code)
{
    if (t && !t->status) t->status = code;
    return code;
}
#define TABLE_FAIL(t, code, ...) fail_table((t), sl_fail((code), __VA_ARGS__))

int sl_table_status(const sl_table *t) { return t ? t->status : SL_EFAIL; }

static sl_table *table_alloc(const char *title)
{
    sl_table *t = sl_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->title = dupstr(title ? title : "");
    if (!t->title) {
        free(t);
        return NULL;
    }
    return t;
}

void sl_table_free(sl_table *t)
{
    if (!t) return;
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_cols; c++) {
            sl_cell *cell = &t->cells[r * t->n_cols + c];
            if (cell->type == SL_COL_STRING && !cell->is_null) free(cell->v.s);
        }
    for (size_t c = 0; c < t->n_cols; c++) {
        free(t->cols[c].name);
        free(t->cols[c].text_fmt);
    }
    free(t->cols);
    free(t->cells);
    free(t->title);
    free(t);
}

static int add_col(sl_table *t, const char *name, sl_coltype type, const char *text_fmt)
{
    if (!t) return SL_EFAIL;
    if (t->status) return t->status;
    if (t->n_rows > 0) return TABLE_FAIL(t, SL_EFAIL, "table %s: columns must be added before rows", t->title);
    if (sl_table_col(t, name) >= 0) return TABLE_FAIL(t, SL_EFAIL, "table %s: column %s declared twice", t->title, name);
    sl_column *cols = realloc(t->cols, (t->n_cols + 1) * sizeof *cols);
    if (!cols) return TABLE_FAIL(t, SL_EFAIL, "out of memory");
    t->cols = cols;
    const char *fmt = text_fmt ? text_fmt : type == SL_COL_DOUBLE ? "%.6g" : type == SL_COL_INT ? "%lld" : "%s";
    sl_column *c = &t->cols[t->n_cols];
    c->name = dupstr(name);
    c->text_fmt = dupstr(fmt);
    c->type = type;
    t->n_cols++; /* counted even when a copy failed, so that sl_table_free frees what exists */
    if (!c->name || !c->text_fmt) return fail_table(t, SL_EFAIL);
    return SL_OK;
}

sl_table *sl_table_new(const char *title, const sl_colspec *cols, size_t n_cols)
{
    sl_table *t = table_alloc(title);
    for (size_t c = 0; t && c < n_cols; c++)
        if (add_col(t, cols[c].name, cols[c].type, cols[c].text_fmt)) {
            sl_table_free(t);
            return NULL;
        }
    return t;
}

int sl_table_row(sl_table *t)
{
    if (!t) return SL_EFAIL;
    if (t->status) return t->status;
    if (t->n_rows == t->cap_rows) {
        size_t cap = t->cap_rows ? 2 * t->cap_rows : 16;
        sl_cell *cells = realloc(t->cells, cap * (t->n_cols ? t->n_cols : 1) * sizeof *cells);
        if (!cells) return TABLE_FAIL(t, SL_EFAIL, "out of memory growing table %s", t->title);
        t->cells = cells;
        t->cap_rows = cap;
    }
    sl_cell *row = &t->cells[t->n_rows * t->n_cols];
    for (size_t c = 0; c < t->n_cols; c++) {
        row[c].type = t->cols[c].type;
        row[c].is_null = 1;
    }
    t->n_rows++;
    return SL_OK;
}

/* The cell of column name in the last row, or NULL with the table failed. */
static sl_cell *last_cell(sl_table *t, const char *name, sl_coltype type)
{
    if (!t || t->status) return NULL;
    long found = sl_table_col(t, name);
    if (found < 0) {
        TABLE_FAIL(t, SL_EFAIL, "table %s has no column %s", t->title, name);
        return NULL;
    }
    size_t col = (size_t)found;
    if (t->n_rows == 0) {
        TABLE_FAIL(t, SL_EFAIL, "table %s: column %s set before any row", t->title, t->cols[col].name);
        return NULL;
    }
    if (t->cols[col].type != type) {
        TABLE_FAIL(t, SL_EFAIL, "table %s: column %s is of another type", t->title, t->cols[col].name);
        return NULL;
    }
    return &t->cells[(t->n_rows - 1) * t->n_cols + col];
}

static int put_double(sl_cell *c, double v)
{
    c->is_null = isnan(v);
    c->v.d = v;
    return SL_OK;
}

static int put_int(sl_cell *c, int64_t v)
{
    c->is_null = 0;
    c->v.i = v;
    return SL_OK;
}

static int put_string(sl_table *t, sl_cell *c, const char *s)
{
    if (!c->is_null) free(c->v.s);
    c->v.s = s ? dupstr(s) : NULL;
    c->is_null = c->v.s == NULL;
    return s && !c->v.s ? fail_table(t, SL_EFAIL) : SL_OK;
}

int sl_table_setd(sl_table *t, const char *col, double v)
{
    sl_cell *c = last_cell(t, col, SL_COL_DOUBLE);
    return c ? put_double(c, v) : sl_table_status(t);
}

int sl_table_seti(sl_table *t, const char *col, int64_t v)
{
    sl_cell *c = last_cell(t, col, SL_COL_INT);
    return c ? put_int(c, v) : sl_table_status(t);
}

int sl_table_sets(sl_table *t, const char *col, const char *s)
{
    sl_cell *c = last_cell(t, col, SL_COL_STRING);
    return c ? put_string(t, c, s) : sl_table_status(t);
}

int sl_table_setf(sl_table *t, const char *col, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return TABLE_FAIL(t, SL_EFAIL, "table %s: text for column %s is too long", t ? t->title : "?", col);
    return sl_table_sets(t, col, buf);
}

int sl_table_getd(const sl_table *t, size_t row, const char *col, double *out)
{
    long c = t ? sl_table_col(t, col) : -1;
    if (c < 0 || row >= t->n_rows || t->cols[c].type == SL_COL_STRING)
        return sl_fail(SL_EINPUT, "table %s: no numeric cell %s in row %zu", t ? t->title : "?", col, row);
    const sl_cell *cell = &t->cells[row * t->n_cols + (size_t)c];
    *out = cell->is_null ? NAN : cell->type == SL_COL_INT ? (double)cell->v.i : cell->v.d;
    return SL_OK;
}

const char *sl_table_gets(const sl_table *t, size_t row, const char *col)
{
    long c = t ? sl_table_col(t, col) : -1;
    if (c < 0 || row >= t->n_rows || t->cols[c].type != SL_COL_STRING) return NULL;
    const sl_cell *cell = &t->cells[row * t->n_cols + (size_t)c];
    return cell->is_null ? NULL : cell->v.s;
}

sl_table *sl_report_find(sl_table *const *tables, size_t n, const char *title)
{
    for (size_t i = 0; i < n; i++)
        if (tables[i] && strcmp(tables[i]->title, title) == 0) return tables[i];
    return NULL;
}

long sl_table_col(const sl_table *t, const char *name)
{
    for (size_t c = 0; c < t->n_cols; c++)
        if (strcmp(t->cols[c].name, name) == 0) return (long)c;
    return -1;
}

/* Formats a cell for the text table into buf. */
static void cell_text(const sl_column *col, const sl_cell *cell, char *buf, size_t n)
{
    if (cell->is_null) {
        snprintf(buf, n, "-");
        return;
    }
    switch (col->type) {
    case SL_COL_DOUBLE:
        if (isinf(cell->v.d)) snprintf(buf, n, cell->v.d > 0 ? "inf" : "-inf");
        else snprintf(buf, n, col->text_fmt, cell->v.d);
        break;
    case SL_COL_INT: snprintf(buf, n, col->text_fmt, (long long)cell->v.i); break;
    case SL_COL_STRING: snprintf(buf, n, col->text_fmt, cell->v.s); break;
    }
}

/* Exact-enough machine form: 17 significant digits round-trip a double. */
static void cell_machine(const sl_cell *cell, char *buf, size_t n, int json)
{
    if (cell->is_null) {
        snprintf(buf, n, json ? "null" : "");
        return;
    }
    switch (cell->type) {
    case SL_COL_DOUBLE:
        if (!isfinite(cell->v.d)) snprintf(buf, n, json ? "null" : (cell->v.d > 0 ? "inf" : "-inf"));
        else snprintf(buf, n, "%.17g", cell->v.d);
        break;
    case SL_COL_INT: snprintf(buf, n, "%lld", (long long)cell->v.i); break;
    case SL_COL_STRING: buf[0] = 0; break; /* strings are written by the callers below */
    }
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void csv_string(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int sl_table_write_json_row(const sl_table *t, size_t row, FILE *f)
{
    char buf[64];
    fputc('{', f);
    for (size_t c = 0; c < t->n_cols; c++) {
        const sl_cell *cell = &t->cells[row * t->n_cols + c];
        if (c) fputs(", ", f);
        json_string(f, t->cols[c].name);
        fputs(": ", f);
        if (t->cols[c].type == SL_COL_STRING && !cell->is_null) json_string(f, cell->v.s);
        else {
            cell_machine(cell, buf, sizeof buf, 1);
            fputs(buf, f);
        }
    }
    fputc('}', f);
    return ferror(f) ? sl_fail(SL_EFAIL, "write error") : SL_OK;
}

static int write_text(const sl_table *t, FILE *f)
{
    size_t *w = sl_calloc(t->n_cols ? t->n_cols : 1, sizeof *w);
    if (!w) return SL_EFAIL;
    char buf[256];
    for (size_t c = 0; c < t->n_cols; c++) w[c] = strlen(t->cols[c].name);
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_cols; c++) {
            cell_text(&t->cols[c], &t->cells[r * t->n_cols + c], buf, sizeof buf);
            size_t n = strlen(buf);
            if (n > w[c]) w[c] = n;
        }
    if (t->title[0]) fprintf(f, "# %s\n", t->title);
    for (size_t c = 0; c < t->n_cols; c++)
        fprintf(f, "%s%*s", c ? "  " : "", (int)w[c], t->cols[c].name);
    fputc('\n', f);
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            cell_text(&t->cols[c], &t->cells[r * t->n_cols + c], buf, sizeof buf);
            fprintf(f, "%s%*s", c ? "  " : "", (int)w[c], buf);
        }
        fputc('\n', f);
    }
    free(w);
    return ferror(f) ? sl_fail(SL_EFAIL, "write error") : SL_OK;
}

static int write_csv(const sl_table *t, FILE *f)
{
    char buf[64];
    for (size_t c = 0; c < t->n_cols; c++) {
        if (c) fputc(',', f);
        csv_string(f, t->cols[c].name);
    }
    fputc('\n', f);
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            const sl_cell *cell = &t->cells[r * t->n_cols + c];
            if (c) fputc(',', f);
            if (t->cols[c].type == SL_COL_STRING && !cell->is_null) csv_string(f, cell->v.s);
            else {
                cell_machine(cell, buf, sizeof buf, 0);
                fputs(buf, f);
            }
        }
        fputc('\n', f);
    }
    return ferror(f) ? sl_fail(SL_EFAIL, "write error") : SL_OK;
}

static int write_json_array(const sl_table *t, FILE *f)
{
    fputc('[', f);
    for (size_t r = 0; r < t->n_rows; r++) {
        fputs(r ? ",\n " : "", f);
        sl_table_write_json_row(t, r, f);
    }
    fputc(']', f);
    return ferror(f) ? sl_fail(SL_EFAIL, "write error") : SL_OK;
}

int sl_table_write(const sl_table *t, FILE *f, sl_format fmt)
{
    if (sl_table_status(t)) return sl_table_status(t);
    int rc;
    switch (fmt) {
    case SL_FMT_CSV: return write_csv(t, f);
    case SL_FMT_JSON:
        rc = write_json_array(t, f);
        fputc('\n', f);
        return rc;
    default: return write_text(t, f);
    }
}

int sl_report_write(sl_table *const *tables, size_t n, FILE *f, sl_format fmt)
{
    int rc = SL_OK;
    for (size_t i = 0; i < n; i++)
        if (sl_table_status(tables[i])) return sl_table_status(tables[i]);
    if (fmt == SL_FMT_JSON) {
        fputc('{', f);
        for (size_t i = 0; i < n && rc == SL_OK; i++) {
            fputs(i ? ",\n " : "", f);
            json_string(f, tables[i]->title);
            fputs(": ", f);
            rc = write_json_array(tables[i], f);
        }
        fputs("}\n", f);
        return rc;
    }
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        if (i) fputc('\n', f);
        if (fmt == SL_FMT_CSV) fprintf(f, "# %s\n", tables[i]->title);
        rc = sl_table_write(tables[i], f, fmt);
    }
    return rc;
}

int sl_format_parse(const char *s, sl_format *out)
{
    if (strcmp(s, "table") == 0 || strcmp(s, "text") == 0) *out = SL_FMT_TABLE;
    else if (strcmp(s, "csv") == 0) *out = SL_FMT_CSV;
    else if (strcmp(s, "json") == 0) *out = SL_FMT_JSON;
    else return sl_fail(SL_EINPUT, "format: '%s' is not one of table, csv, json", s);
    return SL_OK;
}
