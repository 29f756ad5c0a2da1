/*
 * sl_log_schema.c: the log's schema (analysis/LOG_SCHEMA.md) as tables of groups and columns, the
 * names and defaults of its metadata, and the HDF5 helpers that the writer and the reader share.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_common.h"
#include "sl_log_internal.h"

/* ---- schema tables ---- */

static const col_def pos_cols[] = {
    {"sequence", T_I32}, {"position", T_I32},  {"token", T_I32},   {"beta", T_F64},    {"d_lk", T_F64},
    {"entropy_p", T_F64}, {"entropy_q", T_F64}, {"q_max", T_F64}, {"p_token", T_F64}, {"q_token", T_F64},
};
static const col_def dist_cols[] = {{"p", T_DIST}, {"q", T_DIST}};
static const col_def mseq_cols[] = {
    {"sequence", T_I64}, {"prompt_id", T_I64}, {"n_prompt_tokens", T_I64}, {"n_generated", T_I64}, {"n_rows", T_I64},
};
static const col_def rseq_cols[] = {
    {"sequence", T_I64}, {"prompt_id", T_I64}, {"n_prompt_tokens", T_I64}, {"n_generated", T_I64},
    {"n_rows", T_I64},   {"n_drafts", T_I64},  {"mode", T_I8},             {"wall_s", T_F64},
};
static const col_def prompt_cols[] = {{"tokens", T_I32}};
static const col_def iter_cols[] = {
    {"sequence", T_I32}, {"iteration", T_I32}, {"gamma", T_I32},   {"drafted", T_I32},  {"accepted", T_I32},
    {"emitted", T_I32},  {"draft_s", T_F64},   {"verify_s", T_F64}, {"sample_s", T_F64},
};
static const col_def draft_cols[] = {
    {"sequence", T_I32}, {"iteration", T_I32}, {"draft_position", T_I32},
    {"token", T_I32},    {"accepted", T_I8},   {"beta", T_F64},
};
static const col_def cost_cols[] = {{"n", T_I64}, {"v", T_F64}, {"call_s", T_F64}};

#define NC(a) (sizeof a / sizeof a[0])
static const table_def measure_tables[M_NT] = {
    {"positions", pos_cols, NC(pos_cols), 0},
    {"distributions", dist_cols, NC(dist_cols), 1},
    {"sequences", mseq_cols, NC(mseq_cols), 0},
    {"prompts", prompt_cols, NC(prompt_cols), 0},
};
static const table_def run_tables[R_NT] = {
    {"iterations", iter_cols, NC(iter_cols), 0},
    {"drafts", draft_cols, NC(draft_cols), 0},
    {"sequences", rseq_cols, NC(rseq_cols), 0},
    {"prompts", prompt_cols, NC(prompt_cols), 0},
};
const table_def sl_log_costs_table = {"costs", cost_cols, NC(cost_cols), 0};

const table_def *sl_log_kind_tables(sl_log_kind k, size_t *n)
{
    *n = k == SL_LOG_MEASURE ? M_NT : R_NT;
    return k == SL_LOG_MEASURE ? measure_tables : run_tables;
}

/* ---- HDF5 helpers ---- */

void sl_log_h5_quiet(void)
{
    static int done;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

hid_t sl_log_h5_f16_type(void)
{
    static hid_t t = -1;
    if (t < 0) {
        t = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
        H5Tlock(t);
    }
    return t;
}

int sl_log_h5_get_attr_str(hid_t obj, const char *name, char *buf, size_t n)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t sz = H5Tget_size(t);
        char *tmp = calloc(1, sz + 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz);
        if (tmp && H5Aread(a, mt, tmp) >= 0) {
            snprintf(buf, n, "%s", tmp);
            rc = 0;
        }
        H5Tclose(mt);
        free(tmp);
    }
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int sl_log_h5_get_attr_num(hid_t obj, const char *name, hid_t mtype, void *v)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    H5T_class_t cl = H5Tget_class(t);
    int rc = (cl == H5T_INTEGER || cl == H5T_FLOAT) && H5Aread(a, mtype, v) >= 0 ? 0 : -1;
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int sl_log_h5_read_i64_all(hid_t g, const char *name, int64_t **out, size_t *n)
{
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t s = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int rank = H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    if (rank != 1) {
        H5Dclose(d);
        return -1;
    }
    *n = dims[0];
    *out = malloc((dims[0] + 1) * sizeof **out);
    int rc = *out && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) >= 0 ? 0 : -1;
    H5Dclose(d);
    return rc;
}

/* ---- small helpers ---- */

const char *sl_log_kind_name(sl_log_kind k) { return k == SL_LOG_RUN ? "run" : "measure"; }
const char *sl_log_dist_name(sl_log_dist d)
{
    return d == SL_LOG_DIST_F32 ? "float32" : d == SL_LOG_DIST_F16 ? "float16" : "none";
}
int sl_log_dist_parse(const char *s, sl_log_dist *out)
{
    if (!strcmp(s, "none") || !strcmp(s, "beta")) *out = SL_LOG_DIST_NONE;
    else if (!strcmp(s, "float32") || !strcmp(s, "f32")) *out = SL_LOG_DIST_F32;
    else if (!strcmp(s, "float16") || !strcmp(s, "f16")) *out = SL_LOG_DIST_F16;
    else return sl_fail(SL_EINPUT, "dist: '%s' is not one of none, float32, float16", s);
    return SL_OK;
}

void sl_log_meta_init(sl_log_meta *m, sl_log_kind kind)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->sampling = SL_SAMPLING_DEFAULT;
    m->eos = -1;
    m->shard_sequences = 16;
    m->lenience = 1;
    snprintf(m->rule, sizeof m->rule, "exact");
    m->schema_version = SL_LOG_SCHEMA_VERSION;
}
