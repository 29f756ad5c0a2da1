/*
 * test_notebook.c: the notebook exporter's C side: relative paths, the command rebuilt from a
 * log's attributes (and its shell quoting), the notebook's JSON structure (nbformat 4.5, cell ids,
 * no outputs), and the atomic write that refuses to replace a file without force. Executing the
 * notebook and comparing its numbers with speclab analyze is tests/cli/notebook.py's job.
 */
#include <criterion/criterion.h>
#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_common.h"
#include "sl_log.h"
#include "sl_notebook.h"
#include "sl_synth.h"

static void sh(const char *fmt, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(notebook, relpath)
{
    char d[256], buf[4096];
    snprintf(d, sizeof d, "/tmp/sl_test_nb_rel.%ld", (long)getpid());
    sh("rm -rf %s && mkdir -p %s/a/b %s/c", d);
    char f[512], g[512], h[512];
    snprintf(f, sizeof f, "%s/a/b/x.h5", d);
    snprintf(g, sizeof g, "%s/c/y.h5", d);
    snprintf(h, sizeof h, "%s/z.h5", d);
    FILE *fp;
    cr_assert((fp = fopen(f, "w")) && !fclose(fp));
    cr_assert((fp = fopen(g, "w")) && !fclose(fp));
    cr_assert((fp = fopen(h, "w")) && !fclose(fp));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b", d);
    cr_assert_eq(sl_notebook_relpath(f, dir, buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, "x.h5");
    cr_assert_eq(sl_notebook_relpath(g, dir, buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, "../../c/y.h5");
    cr_assert_eq(sl_notebook_relpath(h, dir, buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, "../../z.h5");
    cr_assert_eq(sl_notebook_relpath(f, d, buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, "a/b/x.h5");
    /* A folder name that is a prefix of another's is not a common folder. */
    snprintf(dir, sizeof dir, "%s/a", d);
    char ab[512];
    snprintf(ab, sizeof ab, "%s/ab", d);
    cr_assert_eq(mkdir(ab, 0755), 0);
    cr_assert_eq(sl_notebook_relpath(f, ab, buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, "../a/b/x.h5");
    /* Only the root in common: absolute. */
    cr_assert_eq(sl_notebook_relpath(f, "/proc", buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, f);
    cr_assert_eq(sl_notebook_relpath(f, "/", buf, sizeof buf), SL_OK);
    cr_assert_str_eq(buf, f);
    cr_assert_eq(sl_notebook_relpath("/nonexistent/x.h5", d, buf, sizeof buf), SL_EINPUT);
    sh("rm -rf %s", d);
}

Test(notebook, command_from_attributes)
{
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    snprintf(m.source, sizeof m.source, "synthetic:noisy vocab=300 noise=1 draft_temperature=1.5 context=4096");
    m.tokens_per_sequence = 48;
    m.seed = 1;
    m.dist = SL_LOG_DIST_NONE;
    m.shard_sequences = 16;
    char buf[2048];
    sl_notebook_command(&m, 12, 4, "m.h5", buf, sizeof buf);
    cr_assert_str_eq(buf, "speclab measure --synthetic noisy --vocab 300 --noise 1 --draft-temperature 1.5 --context 4096 "
                          "--sequences 12 --prompt-len 4 --tokens 48 --temperature 1 --top-k 0 --top-p 1 --min-p 0 "
                          "--seed 1 --dist none --shard-sequences 16 --out m.h5");
    sl_log_meta r;
    sl_log_meta_init(&r, SL_LOG_RUN);
    snprintf(r.target_name, sizeof r.target_name, "models/my target.st");
    snprintf(r.draft_name, sizeof r.draft_name, "it's.st");
    snprintf(r.source, sizeof r.source, "models; prompts p.txt");
    snprintf(r.rule, sizeof r.rule, "lenient");
    r.lenience = 0.5;
    r.gamma = 3;
    r.tokens_per_sequence = 24;
    r.seed = 7;
    r.eos = 2;
    r.shard_sequences = 8;
    r.sampling.temperature = 0;
    sl_notebook_command(&r, 6, 0, "run.h5", buf, sizeof buf);
    cr_assert_str_eq(buf, "speclab run --target 'models/my target.st' --draft 'it'\\''s.st' --prompts p.txt --max-prompts 3 "
                          "--gamma 3 --rule lenient --lenience 0.5 --tokens 24 --temperature 0 --top-k 0 --top-p 1 "
                          "--min-p 0 --eos 2 --seed 7 --shard-prompts 4 --out run.h5");
}

/* A small float16 measure log in dir/m.h5. */
static void small_log(const char *path)
{
    sl_synth_params sp = SL_SYNTH_DEFAULT;
    sp.V = 64;
    sl_synth_lm *mt, *md;
    cr_assert_eq(sl_synth_alloc(&sp, 0, &mt), SL_OK);
    cr_assert_eq(sl_synth_alloc(&sp, 1, &md), SL_OK);
    sl_lm lt = sl_synth_lm_of(mt), ld = sl_synth_lm_of(md);
    int32_t pt[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    const int32_t *pp[3] = {pt[0], pt[1], pt[2]};
    size_t pl[3] = {2, 2, 2};
    sl_log_prompts pr = {3, pp, pl, NULL};
    sl_log_meta m;
    sl_log_meta_init(&m, SL_LOG_MEASURE);
    m.dist = SL_LOG_DIST_F16;
    m.tokens_per_sequence = 20;
    m.shard_sequences = 4;
    snprintf(m.target_name, sizeof m.target_name, "synthetic-target:noisy");
    snprintf(m.draft_name, sizeof m.draft_name, "synthetic-draft:noisy");
    snprintf(m.source, sizeof m.source, "synthetic:noisy vocab=64 noise=1 draft_temperature=1.5 context=4096");
    m.vocab_size = 64;
    cr_assert_eq(sl_log_measure(&lt, &ld, &pr, &m, NULL, path, NULL, NULL), SL_OK, "%s", sl_errmsg());
    sl_synth_free(mt);
    sl_synth_free(md);
}

Test(notebook, structure_and_atomic_write)
{
    char d[256], log[320], out[320], sub[320];
    snprintf(d, sizeof d, "/tmp/sl_test_nb.%ld", (long)getpid());
    sh("rm -rf %s && mkdir -p %s/nb", d);
    snprintf(log, sizeof log, "%s/m.h5", d);
    snprintf(out, sizeof out, "%s/nb/m.ipynb", d);
    snprintf(sub, sizeof sub, "%s/nb", d);
    small_log(log);
    const char *logs[] = {log};
    sl_notebook_config c;
    sl_notebook_config_init(&c);
    c.logs = logs;
    c.n_logs = 1;
    c.out = out;
    char *text = NULL;
    size_t n_cells = 0;
    cr_assert_eq(sl_notebook_build(&c, &text, &n_cells), SL_OK, "%s", sl_errmsg());
    json_object *nb = json_tokener_parse(text);
    cr_assert(nb);
    json_object *v, *cells, *md;
    cr_assert(json_object_object_get_ex(nb, "nbformat", &v) && json_object_get_int(v) == 4);
    cr_assert(json_object_object_get_ex(nb, "nbformat_minor", &v) && json_object_get_int(v) == 5);
    cr_assert(json_object_object_get_ex(nb, "metadata", &md));
    cr_assert(json_object_object_get_ex(md, "kernelspec", &v) && json_object_object_get_ex(v, "name", &v));
    cr_assert_str_eq(json_object_get_string(v), "python3");
    cr_assert(json_object_object_get_ex(nb, "cells", &cells));
    size_t n = json_object_array_length(cells);
    cr_assert_eq(n, n_cells);
    int saw_path = 0, saw_lenience = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *cell = json_object_array_get_idx(cells, i), *id, *src, *ty;
        char want[32];
        snprintf(want, sizeof want, "cell-%02zu", i);
        cr_assert(json_object_object_get_ex(cell, "id", &id));
        cr_assert_str_eq(json_object_get_string(id), want);
        cr_assert(json_object_object_get_ex(cell, "cell_type", &ty));
        if (!strcmp(json_object_get_string(ty), "code")) {
            json_object *outs;
            cr_assert(json_object_object_get_ex(cell, "outputs", &outs) && json_object_array_length(outs) == 0);
        }
        cr_assert(json_object_object_get_ex(cell, "source", &src));
        for (size_t k = 0; k < json_object_array_length(src); k++) {
            const char *line = json_object_get_string(json_object_array_get_idx(src, k));
            saw_path |= strstr(line, "\"../m.h5\"") != NULL;
            saw_lenience |= strstr(line, "show_lenience(RESULTS[0])") != NULL;
        }
    }
    cr_assert(saw_path, "the settings cell names the log relative to the notebook");
    cr_assert(saw_lenience, "a float16 log has the lenience section");
    json_object_put(nb);
    free(text);

    /* Atomic write: no temporary file left; an existing file is refused without force. */
    sl_notebook_result res;
    cr_assert_eq(sl_notebook_write(&c, &res), SL_OK, "%s", sl_errmsg());
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq((size_t)st.st_size, res.bytes);
    FILE *f = fopen(out, "w");
    fputs("keep\n", f);
    fclose(f);
    cr_assert_eq(sl_notebook_write(&c, &res), SL_EINPUT);
    cr_assert(strstr(sl_errmsg(), "exists"), "%s", sl_errmsg());
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq(st.st_size, 5);
    c.force = 1;
    cr_assert_eq(sl_notebook_write(&c, &res), SL_OK, "%s", sl_errmsg());
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_gt(st.st_size, 5);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", sub);
    cr_assert_eq(system(cmd), 0, "only the notebook in its folder");

    /* Bad configurations. */
    c.gamma_max = 0;
    cr_assert_eq(sl_notebook_write(&c, &res), SL_EINPUT);
    c.gamma_max = 12;
    c.n_logs = 0;
    cr_assert_eq(sl_notebook_write(&c, &res), SL_EINPUT);
    sh("rm -rf %s", d);
}
