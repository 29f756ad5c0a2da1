/*
 * sl_plot.c: the figure model, the gnuplot script and data writers, and the renderer that runs
 * gnuplot through a pipe with atomic output (sl_plot.h). The kinds live in sl_plot_kinds.c.
 */
#include "sl_plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_common.h"

/* ---- the figure model ---- */

static const char *const style_names[SL_PLOT_STYLE_COUNT] = {
    "lines", "points", "linespoints", "steps", "errorbars", "band", "boxes", "dot-whisker",
};
static const char *const key_names[SL_PLOT_KEY_COUNT] = {
    "top-left", "top-right", "bottom-left", "bottom-right", "outside", "below", "off",
};

const char *sl_plot_style_name(sl_plot_style s) { return (unsigned)s < SL_PLOT_STYLE_COUNT ? style_names[s] : "?"; }
const char *sl_plot_key_name(sl_plot_key k) { return (unsigned)k < SL_PLOT_KEY_COUNT ? key_names[k] : "?"; }

int sl_plot_key_parse(const char *s, sl_plot_key *out)
{
    for (int k = 0; k < SL_PLOT_KEY_COUNT; k++)
        if (!strcmp(s, key_names[k])) {
            *out = (sl_plot_key)k;
            return SL_OK;
        }
    return sl_fail(SL_EINPUT, "key: '%s' is not one of top-left, top-right, bottom-left, bottom-right, outside, below, off", s);
}

void sl_plot_figure_init(sl_plot_figure *f)
{
    memset(f, 0, sizeof *f);
    f->xmin = f->xmax = f->ymin = f->ymax = NAN;
    f->key = SL_PLOT_KEY_TOP_LEFT;
    snprintf(f->xcol, sizeof f->xcol, "x");
    snprintf(f->ycol, sizeof f->ycol, "y");
}

void sl_plot_figure_begin(sl_plot_figure *f, const char *xlabel, const char *ylabel, const char *xcol, const char *ycol)
{
    sl_plot_figure_init(f);
    snprintf(f->xlabel, sizeof f->xlabel, "%s", xlabel);
    snprintf(f->ylabel, sizeof f->ylabel, "%s", ylabel);
    snprintf(f->xcol, sizeof f->xcol, "%s", xcol);
    snprintf(f->ycol, sizeof f->ycol, "%s", ycol);
}

void sl_plot_figure_free(sl_plot_figure *f)
{
    for (size_t p = 0; p < f->n_panels; p++) sl_plot_figure_free(&f->panel[p]);
    free(f->panel);
    f->panel = NULL;
    f->n_panels = 0;
    for (size_t i = 0; i < f->n_series; i++) {
        sl_plot_series *s = &f->series[i];
        free(s->x);
        free(s->y);
        free(s->y_lo);
        free(s->y_hi);
        s->x = s->y = s->y_lo = s->y_hi = NULL;
    }
    f->n_series = 0;
}

sl_plot_series *sl_plot_add_series(sl_plot_figure *f, const char *name, sl_plot_style style, size_t n, int with_ci)
{
    if (f->n_panels) {
        sl_fail(SL_EINPUT, "figure '%s' is made of panels: add series to a panel", f->title);
        return NULL;
    }
    if (f->n_series == SL_PLOT_MAX_SERIES) {
        sl_fail(SL_EINPUT, "figure '%s': more than %d series", f->title, SL_PLOT_MAX_SERIES);
        return NULL;
    }
    sl_plot_series *s = &f->series[f->n_series];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name ? name : "");
    s->style = style;
    s->n = n;
    s->colour = -1;
    size_t k = n ? n : 1;
    s->x = sl_calloc(k, sizeof(double));
    s->y = sl_calloc(k, sizeof(double));
    if (with_ci) {
        s->y_lo = sl_calloc(k, sizeof(double));
        s->y_hi = sl_calloc(k, sizeof(double));
    }
    if (!s->x || !s->y || (with_ci && (!s->y_lo || !s->y_hi))) {
        free(s->x);
        free(s->y);
        free(s->y_lo);
        free(s->y_hi);
        return NULL;
    }
    f->n_series++;
    return s;
}

sl_plot_figure *sl_plot_add_panel(sl_plot_figure *f)
{
    if (f->n_series) {
        sl_fail(SL_EINPUT, "figure '%s' holds series of its own: it cannot hold panels", f->title);
        return NULL;
    }
    if (f->n_panels == SL_PLOT_MAX_PANELS) {
        sl_fail(SL_EINPUT, "figure '%s': more than %d panels", f->title, SL_PLOT_MAX_PANELS);
        return NULL;
    }
    if (!f->panel && !(f->panel = sl_calloc(SL_PLOT_MAX_PANELS, sizeof *f->panel))) return NULL;
    sl_plot_figure *p = &f->panel[f->n_panels++];
    sl_plot_figure_init(p);
    return p;
}

static int needs_ci(sl_plot_style s) { return s == SL_PLOT_ERRORBARS || s == SL_PLOT_BAND || s == SL_PLOT_DOTWHISKER; }

int sl_plot_figure_check(const sl_plot_figure *f)
{
    if (f->n_panels) {
        if (f->n_series) return sl_fail(SL_EINPUT, "figure '%s' holds both panels and series", f->title);
        for (size_t p = 0; p < f->n_panels; p++) {
            if (f->panel[p].n_panels) return sl_fail(SL_EINPUT, "figure '%s': panel %zu holds panels", f->title, p + 1);
            int rc = sl_plot_figure_check(&f->panel[p]);
            if (rc) return rc;
        }
        return SL_OK;
    }
    if (f->n_series == 0) return sl_fail(SL_EINPUT, "figure '%s' has no series to draw", f->title);
    size_t points = 0;
    for (size_t i = 0; i < f->n_series; i++) {
        const sl_plot_series *s = &f->series[i];
        if ((unsigned)s->style >= SL_PLOT_STYLE_COUNT)
            return sl_fail(SL_EINPUT, "figure '%s', series '%s': unknown style %d", f->title, s->name, (int)s->style);
        if (needs_ci(s->style) && (!s->y_lo || !s->y_hi))
            return sl_fail(SL_EINPUT, "figure '%s', series '%s': style %s needs y_lo and y_hi", f->title, s->name,
                           sl_plot_style_name(s->style));
        for (size_t k = 0; k < s->n; k++) {
            if (!isfinite(s->x[k]))
                return sl_fail(SL_EINPUT, "figure '%s', series '%s': x[%zu] is not finite", f->title, s->name, k);
            if (isinf(s->y[k]))
                return sl_fail(SL_EINPUT, "figure '%s', series '%s': y[%zu] is infinite", f->title, s->name, k);
            if (isnan(s->y[k])) continue;
            points++;
            if (f->xlog && !(s->x[k] > 0))
                return sl_fail(SL_EINPUT, "figure '%s', series '%s': x[%zu] = %g on a log axis", f->title, s->name, k, s->x[k]);
            if (f->ylog && !(s->y[k] > 0))
                return sl_fail(SL_EINPUT, "figure '%s', series '%s': y[%zu] = %g on a log axis", f->title, s->name, k, s->y[k]);
        }
    }
    if (points == 0) return sl_fail(SL_EINPUT, "figure '%s': every value is missing (NaN)", f->title);
    return SL_OK;
}

/* ---- a growable string ---- */

typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap <= b->len + (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static int sb_finish(sbuf *b, char **out)
{
    if (b->failed || !b->s) {
        free(b->s);
        return sl_fail(SL_EFAIL, "out of memory building a figure");
    }
    *out = b->s;
    return SL_OK;
}

/* A gnuplot single-quoted string: no escapes are interpreted, a quote is doubled. */
static void sb_quoted(sbuf *b, const char *s)
{
    sb_printf(b, "'");
    for (; *s; s++) sb_printf(b, *s == '\'' ? "''" : "%c", *s);
    sb_printf(b, "'");
}

/* ---- the data file ---- */

#define DATA_MAGIC "# speclab plot data"
#define SCRIPT_MAGIC "# speclab plot script"

/* The blocks of f's series, numbered from *block on (panels number theirs across the figure). */
static void sb_blocks(sbuf *b, const sl_plot_figure *f, const char *panel_title, size_t *block)
{
    for (size_t i = 0; i < f->n_series; i++, (*block)++) {
        const sl_plot_series *s = &f->series[i];
        if (*block) sb_printf(b, "\n\n");
        if (panel_title && i == 0) sb_printf(b, "# panel: %s\n", panel_title);
        sb_printf(b, "# block %zu: %s (%s)\n", *block, s->name[0] ? s->name : "(no key entry)", sl_plot_style_name(s->style));
        int ci = s->y_lo && s->y_hi;
        sb_printf(b, "# %s %s", f->xcol, f->ycol);
        if (ci) sb_printf(b, " %s_lo %s_hi", f->ycol, f->ycol);
        sb_printf(b, "\n");
        int gap = 0;
        for (size_t k = 0; k < s->n; k++) {
            if (isnan(s->y[k])) {
                gap = 1;
                continue;
            }
            if (gap) sb_printf(b, "\n");
            gap = 0;
            sb_printf(b, "%.17g %.17g", s->x[k], s->y[k]);
            if (ci) sb_printf(b, " %.17g %.17g", s->y_lo[k], s->y_hi[k]);
            sb_printf(b, "\n");
        }
    }
}

int sl_plot_data_text(const sl_plot_figure *f, char **out)
{
    sbuf b = {0};
    sb_printf(&b, DATA_MAGIC ": %s\n", f->title);
    sb_printf(&b, "# one block per series, blocks separated by two blank lines (gnuplot: index K);\n"
                  "# a single blank line inside a block is a gap (a missing value)\n");
    size_t block = 0;
    sb_blocks(&b, f, NULL, &block);
    for (size_t p = 0; p < f->n_panels; p++) sb_blocks(&b, &f->panel[p], f->panel[p].title, &block);
    return sb_finish(&b, out);
}

/* ---- the script ---- */

/* Okabe & Ito (2008), "Color Universal Design": distinguishable under every common colour-vision
 * deficiency. Yellow comes last: it is faint on white. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#E69F00",
                                      "#CC79A7", "#56B4E9", "#000000", "#F0E442"};
#define N_PALETTE (sizeof palette / sizeof palette[0])
static const int point_types[] = {7, 5, 9, 13, 11, 6, 4, 8};
/* PNG resolution: 150 dots per inch keeps a column figure near 500 pixels wide and a few tens of KB. */
#define PNG_DPI 150.0

static double height_for(double width_in) { return width_in < 5 ? width_in * 0.76 : width_in * 0.5; }

/* Panels sit side by side at full width, one below the other in a column (each 0.62 of the width tall). */
static int panels_stacked(const sl_plot_figure *f, double width_in) { return f->n_panels > 1 && width_in < 5; }

static void sb_terminal(sbuf *b, sl_plot_term term, double width_in, size_t rows)
{
    double h = rows > 1 ? (double)rows * 0.62 * width_in : height_for(width_in);
    int font_pt = width_in < 5 ? 8 : 9;
    switch (term) {
    case SL_PLOT_PNG:
        /* pngcairo sizes fonts for ~150 dpi already: fontscale 1 matches the PDF's proportions. */
        sb_printf(b, "set terminal pngcairo size %d,%d font 'sans,%d' linewidth 1.25 noenhanced\n",
                  (int)lround(width_in * PNG_DPI), (int)lround(h * PNG_DPI), font_pt);
        break;
    case SL_PLOT_SVG:
        sb_printf(b, "set terminal svg size %d,%d font 'sans,%d' linewidth 1.3 noenhanced\n", (int)lround(width_in * 72),
                  (int)lround(h * 72), font_pt);
        break;
    case SL_PLOT_PDF:
        sb_printf(b, "set terminal pdfcairo size %.2fin,%.2fin font 'sans,%d' linewidth 1.3 noenhanced\n", width_in, h, font_pt);
        break;
    case SL_PLOT_DUMB:
        sb_printf(b, "set terminal dumb size %d,%d noenhanced\n", width_in < 5 ? 90 : 120,
                  (width_in < 5 ? 30 : 36) * (int)(rows > 1 ? rows : 1));
        break;
    }
}

static void sb_range(sbuf *b, const char *axis, double lo, double hi)
{
    if (isnan(lo) && isnan(hi)) return;
    sb_printf(b, "set %srange [", axis);
    if (!isnan(lo)) sb_printf(b, "%.17g", lo);
    sb_printf(b, ":");
    if (!isnan(hi)) sb_printf(b, "%.17g", hi);
    sb_printf(b, "]\n");
}

/* One plot: its title, axes, key and plot command, reading blocks first_block.. of the data. In a
 * figure of panels (multi) the settings a previous panel may have made are reset first, and the
 * data file's name is set once by the caller. */
static void sb_plot(sbuf *b, const sl_plot_figure *f, sl_plot_term term, double width_in, const char *data_name,
                    size_t first_block, int multi)
{
    int dumb = term == SL_PLOT_DUMB;
    if (multi) sb_printf(b, "unset logscale\nset autoscale\nset xtics autofreq\nset format x\n");
    sb_printf(b, "set title ");
    sb_quoted(b, f->title);
    sb_printf(b, "\nset xlabel ");
    sb_quoted(b, f->xlabel);
    sb_printf(b, "\nset ylabel ");
    sb_quoted(b, f->ylabel);
    sb_printf(b, "\n");
    /* Left and bottom axes only, ticks outwards, a faint grid behind the data. */
    sb_printf(b, "set border 3 lw 0.8\nset tics nomirror out scale 0.6\n");
    if (!dumb) sb_printf(b, "set grid back lc rgb '#dddddd' lw 0.5\n");
    if (f->xlog) sb_printf(b, "set logscale x\nset format x '10^%%T'\n");
    if (f->ylog) sb_printf(b, "set logscale y\n");
    sb_range(b, "x", f->xmin, f->xmax);
    sb_range(b, "y", f->ymin, f->ymax);
    if (f->n_xtics) {
        int rotate = 0;
        for (size_t i = 0; i < f->n_xtics; i++) rotate |= strlen(f->xtic[i]) > (width_in < 5 ? 8u : 14u);
        sb_printf(b, "set xtics (");
        for (size_t i = 0; i < f->n_xtics; i++) {
            if (i) sb_printf(b, ", ");
            sb_quoted(b, f->xtic[i]);
            sb_printf(b, " %zu", i + 1);
        }
        sb_printf(b, ")%s\n", rotate ? " rotate by 25 right" : "");
    } else if (f->xtic_step > 0)
        sb_printf(b, "set xtics %.17g\n", f->xtic_step);
    switch (f->key) {
    case SL_PLOT_KEY_TOP_LEFT: sb_printf(b, "set key top left Left reverse"); break;
    case SL_PLOT_KEY_TOP_RIGHT: sb_printf(b, "set key top right"); break;
    case SL_PLOT_KEY_BOTTOM_LEFT: sb_printf(b, "set key bottom left Left reverse"); break;
    case SL_PLOT_KEY_BOTTOM_RIGHT: sb_printf(b, "set key bottom right"); break;
    case SL_PLOT_KEY_OUTSIDE: sb_printf(b, "set key outside right top Left reverse"); break;
    case SL_PLOT_KEY_BELOW: sb_printf(b, "set key below horizontal"); break;
    default: sb_printf(b, "unset key"); break;
    }
    if (f->key != SL_PLOT_KEY_OFF) sb_printf(b, " nobox samplen 2 spacing 1.1\n");
    else sb_printf(b, "\n");

    if (!multi) {
        sb_printf(b, "data = ");
        sb_quoted(b, data_name);
        sb_printf(b, "\n");
    }
    sb_printf(b, "plot ");
    int coloured = 0;
    for (size_t i = 0; i < f->n_series; i++) {
        const sl_plot_series *s = &f->series[i];
        size_t block = first_block + i;
        int ci = s->colour >= 0 ? s->colour : coloured++;
        const char *c = palette[(size_t)ci % N_PALETTE];
        int pt = point_types[(size_t)ci % (sizeof point_types / sizeof point_types[0])];
        if (i) sb_printf(b, ", \\\n     ");
        sb_printf(b, "data index %zu ", block);
        switch (s->style) {
        case SL_PLOT_LINES:
            sb_printf(b, "using 1:2 with lines lw 1.5 dt %d lc rgb '%s'", s->dashed ? 2 : 1, c);
            break;
        case SL_PLOT_POINTS: sb_printf(b, "using 1:2 with points pt %d ps 0.7 lc rgb '%s'", pt, c); break;
        case SL_PLOT_LINESPOINTS:
            sb_printf(b, "using 1:2 with linespoints lw 1.2 dt %d pt %d ps 0.6 lc rgb '%s'", s->dashed ? 2 : 1, pt, c);
            break;
        case SL_PLOT_STEPS: sb_printf(b, "using 1:2 with steps lw 1.5 dt %d lc rgb '%s'", s->dashed ? 2 : 1, c); break;
        case SL_PLOT_ERRORBARS:
            sb_printf(b, "using 1:2:3:4 with yerrorbars pt %d ps 0.6 lw 1 lc rgb '%s'", pt, c);
            break;
        case SL_PLOT_BAND:
            sb_printf(b, "using 1:3:4 with filledcurves fc rgb '%s' fs transparent solid 0.2 noborder notitle, \\\n"
                         "     data index %zu using 1:2 with lines lw 1.5 dt %d lc rgb '%s'",
                      c, block, s->dashed ? 2 : 1, c);
            break;
        case SL_PLOT_BOXES:
            sb_printf(b, "using 1:2:(%.17g) with boxes fs transparent solid 0.3 border lw 1 lc rgb '%s'",
                      s->box_width > 0 ? s->box_width : 1.0, c);
            break;
        case SL_PLOT_DOTWHISKER:
            sb_printf(b, "using 1:2:3:4 with yerrorbars pt 7 ps 1.1 lw 2 lc rgb '%s'", c);
            break;
        default: break;
        }
        if (s->name[0]) {
            sb_printf(b, " title ");
            sb_quoted(b, s->name);
        } else
            sb_printf(b, " notitle");
    }
    sb_printf(b, "\n");
}

int sl_plot_script_text(const sl_plot_figure *f, sl_plot_term term, double width_in, const char *data_name,
                        const char *out_name, const char *command, char **out)
{
    sbuf b = {0};
    int stacked = panels_stacked(f, width_in);
    sb_printf(&b, SCRIPT_MAGIC ": %s\n", f->title);
    if (command) sb_printf(&b, "# made by: %s\n", command);
    sb_printf(&b, "# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)\n");
    sb_printf(&b, "set encoding utf8\n");
    sb_terminal(&b, term, width_in, stacked ? f->n_panels : 1);
    if (out_name) {
        sb_printf(&b, "set output ");
        sb_quoted(&b, out_name);
        sb_printf(&b, "\n");
    }
    if (!f->n_panels) sb_plot(&b, f, term, width_in, data_name, 0, 0);
    else {
        sb_printf(&b, "data = ");
        sb_quoted(&b, data_name);
        sb_printf(&b, "\nset multiplot layout %zu,%zu title ", stacked ? f->n_panels : 1, stacked ? 1 : f->n_panels);
        sb_quoted(&b, f->title);
        sb_printf(&b, "\n");
        size_t block = f->n_series;
        for (size_t p = 0; p < f->n_panels; p++) {
            sb_plot(&b, &f->panel[p], term, width_in, data_name, block, 1);
            block += f->panel[p].n_series;
        }
        sb_printf(&b, "unset multiplot\n");
    }
    if (out_name) sb_printf(&b, "unset output\n");
    return sb_finish(&b, out);
}

/* ---- rendering ---- */

void sl_plot_render_opts_init(sl_plot_render_opts *o)
{
    memset(o, 0, sizeof *o);
    o->width_in = SL_PLOT_WIDTH_COLUMN;
}

int sl_plot_width_parse(const char *s, double *width_in)
{
    if (!strcmp(s, "column")) *width_in = SL_PLOT_WIDTH_COLUMN;
    else if (!strcmp(s, "full")) *width_in = SL_PLOT_WIDTH_FULL;
    else return sl_fail(SL_EINPUT, "width: '%s' is not column (3.3 in) or full (6.8 in)", s);
    return SL_OK;
}

int sl_plot_term_for(const char *path, int term_dumb, sl_plot_term *out)
{
    if (!path || !path[0]) return sl_fail(SL_EINPUT, "out: no output file given");
    if (term_dumb || !strcmp(path, "-")) {
        *out = SL_PLOT_DUMB;
        return SL_OK;
    }
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash + 1)) {
        if (!strcasecmp(dot, ".png")) *out = SL_PLOT_PNG;
        else if (!strcasecmp(dot, ".svg")) *out = SL_PLOT_SVG;
        else if (!strcasecmp(dot, ".pdf")) *out = SL_PLOT_PDF;
        else dot = NULL;
        if (dot) return SL_OK;
    }
    return sl_fail(SL_EINPUT,
                   "out: '%s' does not end in .png, .svg or .pdf (for text art, set term to dumb or give - for the terminal)",
                   path);
}

/* Writes len bytes to fd, then fsyncs it. */
static int write_all(int fd, const char *s, size_t len, const char *what)
{
    while (len) {
        ssize_t k = write(fd, s, len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return sl_fail(SL_EFAIL, "writing %s: %s", what, strerror(errno));
        s += k;
        len -= (size_t)k;
    }
    if (fsync(fd) && errno != EINVAL) return sl_fail(SL_EFAIL, "writing %s: %s", what, strerror(errno));
    return SL_OK;
}

/* Creates a fresh temporary file next to `path` (same directory, so rename is atomic) with the
 * permissions the umask gives a new file; its name goes to tmp (n bytes). */
static int make_temp(const char *path, char *tmp, size_t n, int *fd_out)
{
    static unsigned counter;
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    for (int tries = 0; tries < 100; tries++) {
        unsigned k = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        int w = snprintf(tmp, n, "%.*s.%s.tmp-%ld-%u", dirlen, path, slash ? slash + 1 : path, (long)getpid(), k);
        if (w < 0 || (size_t)w >= n) return sl_fail(SL_EINPUT, "out: path '%s' is too long", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *fd_out = fd;
            return SL_OK;
        }
        if (errno != EEXIST)
            return sl_fail(SL_EINPUT, "out: cannot create a file in the directory of '%s': %s", path, strerror(errno));
    }
    return sl_fail(SL_EFAIL, "out: no free temporary name next to '%s'", path);
}

/* An existing file we may replace: absent, or one that speclab plot wrote (its first line). */
static int replaceable(const char *path, const char *magic)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return errno == ENOENT ? SL_OK : sl_fail(SL_EINPUT, "out: cannot read existing '%s': %s", path, strerror(errno));
    char line[64] = "";
    int ours = fgets(line, sizeof line, fp) && !strncmp(line, magic, strlen(magic));
    fclose(fp);
    if (!ours)
        return sl_fail(SL_EINPUT, "out: '%s' exists and was not written by speclab plot; refusing to replace it", path);
    return SL_OK;
}

/* The first informative line of gnuplot's stderr: the one naming the script line ("line 3: ...")
 * if there is one, else the first non-blank line. */
static void first_error_line(FILE *err, char *msg, size_t n)
{
    char line[512];
    msg[0] = 0;
    rewind(err);
    int have_first = 0;
    while (fgets(line, sizeof line, err)) {
        size_t k = strlen(line);
        while (k && (line[k - 1] == '\n' || line[k - 1] == '\r' || line[k - 1] == ' ')) line[--k] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || strspn(p, "^ ") == strlen(p)) continue;
        const char *l = strstr(p, "line ");
        if (l && l[5] >= '0' && l[5] <= '9' && strchr(l, ':')) {
            snprintf(msg, n, "%.*s", (int)(n - 1), p); /* a long line is cut */
            return;
        }
        if (!have_first) {
            snprintf(msg, n, "%.*s", (int)(n - 1), p);
            have_first = 1;
        }
    }
}

/* Runs gnuplot with the script on its stdin. stdout goes to ours when to_stdout, else to
 * /dev/null; stderr is kept in a temporary file for the message. The child is always reaped. */
static int run_gnuplot(const char *bin, const char *script, int to_stdout)
{
    int in[2] = {-1, -1}, ex[2] = {-1, -1}, devnull = -1;
    FILE *err = tmpfile();
    if (!err) return sl_fail(SL_EFAIL, "gnuplot: cannot create a temporary file for its messages: %s", strerror(errno));
    if (pipe2(in, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
        int e = errno;
        if (in[0] >= 0) close(in[0]), close(in[1]);
        fclose(err);
        return sl_fail(SL_EFAIL, "gnuplot: pipe: %s", strerror(e));
    }
    if (!to_stdout && (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(ex[0]), close(ex[1]);
        fclose(err);
        return sl_fail(SL_EFAIL, "gnuplot: /dev/null: %s", strerror(e));
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(ex[0]), close(ex[1]);
        if (devnull >= 0) close(devnull);
        fclose(err);
        return sl_fail(SL_EFAIL, "gnuplot: fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* The child: only async-signal-safe calls until exec. */
        if (dup2(in[0], 0) < 0 || dup2(fileno(err), 2) < 0 || (devnull >= 0 && dup2(devnull, 1) < 0)) {
            int e = errno;
            (void)!write(ex[1], &e, sizeof e);
            _exit(127);
        }
        char *const argv[] = {(char *)bin, NULL};
        execvp(bin, argv);
        int e = errno;
        (void)!write(ex[1], &e, sizeof e);
        _exit(127);
    }
    close(in[0]);
    close(ex[1]);
    if (devnull >= 0) close(devnull);

    /* gnuplot may exit before reading the whole script (exec failed, an early error): a write to
     * the closed pipe must give EPIPE here, not kill this process with SIGPIPE. */
    sigset_t pipe_set, old_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    size_t len = strlen(script), off = 0;
    while (off < len) {
        ssize_t k = write(in[1], script + off, len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* EPIPE: the child's status says why */
        off += (size_t)k;
    }
    close(in[1]);
    sigpending(&pending);
    if (!was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);

    int exec_errno = 0;
    ssize_t got;
    do got = read(ex[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(ex[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fclose(err);
            return sl_fail(SL_EFAIL, "gnuplot: waitpid: %s", strerror(errno));
        }
    int rc = SL_OK;
    if (got == (ssize_t)sizeof exec_errno) {
        rc = sl_fail(SL_EINPUT, "cannot run gnuplot '%s': %s (install gnuplot, or set GNUPLOT to its path)", bin,
                     strerror(exec_errno));
    } else if (WIFSIGNALED(status)) {
        rc = sl_fail(SL_EFAIL, "gnuplot '%s' was killed by signal %d", bin, WTERMSIG(status));
    } else if (WEXITSTATUS(status) != 0) {
        char msg[400];
        first_error_line(err, msg, sizeof msg);
        rc = sl_fail(SL_EINPUT, "gnuplot failed (exit status %d): %s", WEXITSTATUS(status), msg[0] ? msg : "(no message)");
    } else if (off < len) {
        rc = sl_fail(SL_EFAIL, "gnuplot '%s' exited before reading the whole script", bin);
    }
    fclose(err);
    return rc;
}

static const char *gnuplot_bin(const sl_plot_render_opts *o)
{
    if (o->gnuplot && o->gnuplot[0]) return o->gnuplot;
    const char *env = getenv("GNUPLOT");
    return env && env[0] ? env : "gnuplot";
}

static int render_stdout(const sl_plot_figure *f, const sl_plot_render_opts *o)
{
    const char *dir = getenv("TMPDIR");
    char path[4096], *data = NULL, *script = NULL;
    snprintf(path, sizeof path, "%s/speclab-plot-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return sl_fail(SL_EFAIL, "cannot create a temporary data file in %s: %s", dir ? dir : "/tmp", strerror(errno));
    int rc = sl_plot_data_text(f, &data);
    if (!rc) rc = write_all(fd, data, strlen(data), path);
    close(fd);
    if (!rc) rc = sl_plot_script_text(f, SL_PLOT_DUMB, o->width_in, path, NULL, o->command, &script);
    if (!rc) rc = run_gnuplot(gnuplot_bin(o), script, 1);
    unlink(path);
    free(data);
    free(script);
    return rc;
}

int sl_plot_render(const sl_plot_figure *f, const sl_plot_render_opts *o)
{
    sl_plot_term term;
    int rc;
    if ((rc = sl_plot_figure_check(f))) return rc;
    if ((rc = sl_plot_term_for(o->out, o->term_dumb, &term))) return rc;
    if (!(o->width_in > 0 && o->width_in < 100)) return sl_fail(SL_EINPUT, "width: %g inches is not a figure width", o->width_in);
    if (!strcmp(o->out, "-")) return render_stdout(f, o);

    const char *out = o->out;
    struct stat st;
    if (!stat(out, &st) && S_ISDIR(st.st_mode)) return sl_fail(SL_EINPUT, "out: '%s' is a directory", out);
    /* FILE.dat and FILE.gp: the figure's path without its extension (fig.png -> fig.dat). */
    char stem[4096], dat[4100], gp[4100];
    size_t len = strlen(out);
    if (len >= sizeof stem) return sl_fail(SL_EINPUT, "out: path '%.64s...' is too long", out);
    memcpy(stem, out, len + 1);
    char *dot = strrchr(stem, '.');
    if (dot && dot > stem + (sl_path_base(stem) - stem)) *dot = 0;
    snprintf(dat, sizeof dat, "%s.dat", stem);
    snprintf(gp, sizeof gp, "%s.gp", stem);
    if (!strcmp(dat, out) || !strcmp(gp, out))
        return sl_fail(SL_EINPUT, "out: '%s' would be its own data file or script", out);
    if ((rc = replaceable(dat, DATA_MAGIC)) || (rc = replaceable(gp, SCRIPT_MAGIC))) return rc;

    char t_fig[4200] = "", t_dat[4200] = "", t_gp[4200] = "";
    char *data = NULL, *script_file = NULL, *script_pipe = NULL;
    int fd = -1;
    if ((rc = make_temp(out, t_fig, sizeof t_fig, &fd))) goto fail;
    close(fd);
    if ((rc = make_temp(dat, t_dat, sizeof t_dat, &fd))) goto fail;
    if (!(rc = sl_plot_data_text(f, &data))) rc = write_all(fd, data, strlen(data), t_dat);
    close(fd);
    if (rc) goto fail;
    if ((rc = make_temp(gp, t_gp, sizeof t_gp, &fd))) goto fail;
    /* The script on disk names the final files relative to its own directory; the one piped to
     * gnuplot names the temporary ones as this process sees them. */
    rc = sl_plot_script_text(f, term, o->width_in, sl_path_base(dat), sl_path_base(out), o->command, &script_file);
    if (!rc) rc = write_all(fd, script_file, strlen(script_file), t_gp);
    close(fd);
    if (rc) goto fail;
    if ((rc = sl_plot_script_text(f, term, o->width_in, t_dat, t_fig, o->command, &script_pipe))) goto fail;
    if ((rc = run_gnuplot(gnuplot_bin(o), script_pipe, 0))) goto fail;
    if (stat(t_fig, &st) || st.st_size == 0) {
        rc = sl_fail(SL_EFAIL, "gnuplot exited 0 but wrote nothing to '%s'", t_fig);
        goto fail;
    }
    /* The figure goes last: whoever sees the new figure also finds its data and script. */
    if (rename(t_dat, dat) || rename(t_gp, gp) || rename(t_fig, out)) {
        rc = sl_fail(SL_EFAIL, "out: renaming into place failed for '%s': %s", out, strerror(errno));
        goto fail;
    }
    free(data);
    free(script_file);
    free(script_pipe);
    return SL_OK;
fail:
    if (t_fig[0]) unlink(t_fig);
    if (t_dat[0]) unlink(t_dat);
    if (t_gp[0]) unlink(t_gp);
    free(data);
    free(script_file);
    free(script_pipe);
    return rc;
}
