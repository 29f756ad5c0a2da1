/* sl_enum.c: depth-first enumeration of the random choices of a sampling run (see sl_enum.h). */
#include "sl_enum.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"

#define NONE SIZE_MAX
#define MAX_UNIFORMS 256

typedef struct {
    size_t pick;  /* the alternative taken on the current path */
    size_t next;  /* the next alternative, NONE when exhausted */
    int advanced; /* pick was just advanced: next must be recomputed when replayed */
} choice;

typedef struct {
    sl_rand base;
    choice *stack;
    size_t n_stack, cap, depth;
    double prob;
    double lo[MAX_UNIFORMS], hi[MAX_UNIFORMS];
    unsigned n_uniforms;
    int error;
} enum_state;

/* The next alternative after pick among n, given which ones are possible. */
static size_t next_positive(const double *w, size_t n, size_t after)
{
    for (size_t x = after + 1; x < n; x++)
        if (w[x] > 0) return x;
    return NONE;
}

/* Returns the branch to take at the current depth (first possible one for a new branch point). */
static choice *branch(enum_state *s, size_t first)
{
    if (s->depth < s->n_stack) return &s->stack[s->depth++];
    if (s->n_stack == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        choice *st = realloc(s->stack, cap * sizeof *st);
        if (!st) {
            s->error = 1;
            return NULL;
        }
        s->stack = st;
        s->cap = cap;
    }
    choice *c = &s->stack[s->n_stack++];
    s->depth++;
    c->pick = first;
    c->advanced = 1;
    return c;
}

static size_t enum_categorical(sl_rand *self, int stream, const double *pmf, const sl_alias *alias, size_t V)
{
    (void)stream;
    (void)alias;
    enum_state *s = (enum_state *)self;
    if (!pmf || s->error) {
        s->error = 1; /* alias-only draws cannot be enumerated */
        return 0;
    }
    size_t first = next_positive(pmf, V, (size_t)-1);
    if (first == NONE) {
        s->error = 1;
        return 0;
    }
    choice *c = branch(s, first);
    if (!c) return 0;
    if (c->advanced) {
        c->next = next_positive(pmf, V, c->pick);
        c->advanced = 0;
    }
    s->prob *= pmf[c->pick];
    return c->pick;
}

static unsigned enum_uniform_new(sl_rand *self, int stream)
{
    (void)stream;
    enum_state *s = (enum_state *)self;
    if (s->n_uniforms == MAX_UNIFORMS) {
        s->error = 1;
        return 0;
    }
    s->lo[s->n_uniforms] = 0;
    s->hi[s->n_uniforms] = 1;
    return s->n_uniforms++;
}

/* r < t with r uniform on [lo, hi): certain when t is outside the interval, else a branch with
 * probabilities proportional to the two sub-intervals. Branch 0 = below, 1 = not below. */
static int enum_uniform_below(sl_rand *self, unsigned h, double t)
{
    enum_state *s = (enum_state *)self;
    if (s->error || h >= s->n_uniforms) {
        s->error = 1;
        return 0;
    }
    double lo = s->lo[h], hi = s->hi[h];
    if (t >= hi) return 1;
    if (t <= lo) return 0;
    choice *c = branch(s, 0);
    if (!c) return 0;
    if (c->advanced) {
        c->next = c->pick == 0 ? 1 : NONE;
        c->advanced = 0;
    }
    if (c->pick == 0) {
        s->prob *= (t - lo) / (hi - lo);
        s->hi[h] = t;
        return 1;
    }
    s->prob *= (hi - t) / (hi - lo);
    s->lo[h] = t;
    return 0;
}

int sl_enum_paths(int (*run)(void *ctx, sl_rand *rand), void (*record)(void *ctx, double prob), void *ctx,
                  size_t max_paths, size_t *n_paths)
{
    enum_state s;
    memset(&s, 0, sizeof s);
    s.base.categorical = enum_categorical;
    s.base.uniform_new = enum_uniform_new;
    s.base.uniform_below = enum_uniform_below;
    *n_paths = 0;
    int rc = SL_OK;
    for (;;) {
        s.depth = 0;
        s.prob = 1;
        s.n_uniforms = 0;
        rc = run(ctx, &s.base);
        if (rc) break;
        if (s.error || s.depth != s.n_stack) {
            rc = sl_fail(SL_EFAIL, "enumeration failed: the run drew from an alias table only, used too "
                                   "many uniforms, or did not replay its choices deterministically");
            break;
        }
        record(ctx, s.prob);
        if (++*n_paths > max_paths) {
            rc = sl_fail(SL_EFAIL, "enumeration stopped: more than %zu paths", max_paths);
            break;
        }
        while (s.n_stack > 0 && s.stack[s.n_stack - 1].next == NONE) s.n_stack--;
        if (s.n_stack == 0) break;
        choice *top = &s.stack[s.n_stack - 1];
        top->pick = top->next;
        top->advanced = 1;
    }
    free(s.stack);
    return rc;
}
