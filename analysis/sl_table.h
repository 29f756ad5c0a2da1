/*
 * sl_table.h: one results structure that every output reads.
 *
 * A command builds sl_table values (named, typed columns; rows appended) and hands them to
 * sl_table_write, which prints an aligned text table, CSV or JSON. The plotter and the notebook
 * exporter read the same structures, so numbers never get re-derived per output format.
 */
#ifndef SL_TABLE_H
#define SL_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { SL_FMT_TABLE = 0, SL_FMT_CSV = 1, SL_FMT_JSON = 2 } sl_format;

typedef enum { SL_COL_DOUBLE, SL_COL_INT, SL_COL_STRING } sl_coltype;

typedef struct {
    sl_coltype type;
    union {
        double d;
        int64_t i;
        char *s; /* owned */
    } v;
    int is_null;
} sl_cell;

typedef struct {
    char *name;      /* column name: snake_case, THEORY.md's words (alpha, gamma, walltime_factor) */
    sl_coltype type;
    char *text_fmt;  /* printf format for the aligned text table, e.g. "%.6f" */
} sl_column;

typedef struct {
    char *title;         /* shown above the text table; the key in JSON reports */
    int status;          /* the first failure of any call on this table (sticky; SL_OK when none) */
    size_t n_cols;
    sl_column *cols;     /* (n_cols) */
    size_t n_rows;
    size_t cap_rows;
    sl_cell *cells;      /* (cap_rows, n_cols), row-major */
} sl_table;

/* ---- building a table: columns declared once, cells set by name ----
 *
 *     static const sl_colspec cols[] = {SL_COL_D("alpha", "%.6g"), SL_COL_I("gamma"), SL_COL_S("method")};
 *     sl_table *t = SL_TABLE_NEW("recommendation", cols);
 *     sl_table_row(t);
 *     sl_table_setd(t, "alpha", a);
 *     ...
 *     if (sl_table_status(t)) ...   // one check covers every call above
 *
 * Errors are sticky, like a stream's error flag: the first failing call on a table (an unknown
 * column, a cell of another type, a set before any row, out of memory) records its message and
 * code in t->status, every later call on t is a no-op that returns the same code, and
 * sl_table_write / sl_report_write refuse a table whose status is set. A builder therefore sets
 * many cells and checks once, and no failure goes unseen. A NULL table (a failed allocation) is
 * accepted by every call and reported as SL_EFAIL. */
typedef struct {
    const char *name;     /* snake_case, THEORY.md's words (alpha, gamma, walltime_factor) */
    sl_coltype type;
    const char *text_fmt; /* printf format for the text table; NULL: "%.6g", "%lld" or "%s" */
} sl_colspec;

#define SL_COL_D(name, fmt) {(name), SL_COL_DOUBLE, (fmt)}
#define SL_COL_I(name) {(name), SL_COL_INT, NULL}
#define SL_COL_S(name) {(name), SL_COL_STRING, NULL}

/* A table with the given columns and no rows; NULL (error recorded) on failure. */
sl_table *sl_table_new(const char *title, const sl_colspec *cols /* (n_cols) */, size_t n_cols);
#define SL_TABLE_NEW(title, cols) sl_table_new((title), (cols), sizeof(cols) / sizeof((cols)[0]))
void sl_table_free(sl_table *t);

/* Appends a row whose cells are all null; the setters fill the last row. */
int sl_table_row(sl_table *t);
/* A NaN double is stored as null (absent). */
int sl_table_setd(sl_table *t, const char *col, double v);
int sl_table_seti(sl_table *t, const char *col, int64_t v);
int sl_table_sets(sl_table *t, const char *col, const char *s);
int sl_table_setf(sl_table *t, const char *col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The sticky status: SL_OK, or the code of the first failure (its message was recorded then). */
int sl_table_status(const sl_table *t);

/* ---- reading by name (figures, notebooks, tests) ---- */
/* Column index by name, or -1. */
long sl_table_col(const sl_table *t, const char *name);
/* *out = the cell as a double (ints converted; null gives NaN). SL_EINPUT for an unknown column,
 * a string column or a row out of range. */
int sl_table_getd(const sl_table *t, size_t row, const char *col, double *out);
/* The string cell, or NULL (null cell, unknown column, other type, row out of range). */
const char *sl_table_gets(const sl_table *t, size_t row, const char *col);
/* The table of a report with this title, or NULL. */
sl_table *sl_report_find(sl_table *const *tables, size_t n, const char *title);

/* Writes one table: text (aligned, title line), CSV (header + rows) or JSON (array of objects);
 * a table whose status is set is refused with that code.
 * Doubles go out with 17 significant digits in CSV/JSON; null is empty in CSV, null in JSON. */
int sl_table_write(const sl_table *t, FILE *f, sl_format fmt);
/* Writes one row as one JSON object. */
int sl_table_write_json_row(const sl_table *t, size_t row, FILE *f);
/* Writes several tables as one report: text and CSV one after another (CSV sections start with
 * "# title"), JSON as one object {"title": [rows...], ...}. */
int sl_report_write(sl_table *const *tables, size_t n, FILE *f, sl_format fmt);

/* Parses "table" | "csv" | "json". */
int sl_format_parse(const char *s, sl_format *out);

#endif
