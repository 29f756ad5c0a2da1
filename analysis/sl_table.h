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
    size_t n_cols;
    sl_column *cols;     /* (n_cols) */
    size_t n_rows;
    size_t cap_rows;
    sl_cell *cells;      /* (cap_rows, n_cols), row-major */
} sl_table;

sl_table *sl_table_alloc(const char *title);
void sl_table_free(sl_table *t);
/* text_fmt may be NULL: "%.6g" for doubles, "%lld" for ints, "%s" for strings. */
int sl_table_add_col(sl_table *t, const char *name, sl_coltype type, const char *text_fmt);
/* Appends an empty row (all cells null) and returns SL_OK; fill it with the setters. */
int sl_table_add_row(sl_table *t);
/* Setters act on the last row; col is the column index. A NaN double is stored as null. */
void sl_table_set_double(sl_table *t, size_t col, double v);
void sl_table_set_int(sl_table *t, size_t col, int64_t v);
int sl_table_set_string(sl_table *t, size_t col, const char *s);
/* Column index by name, or -1. */
long sl_table_col(const sl_table *t, const char *name);

/* Writes one table: text (aligned, title line), CSV (header + rows) or JSON (array of objects).
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
