/* fuzz_numbers.c: the number lists and ranges of the command line. Byte 0 chooses the parser, the
 * rest is the argument:
 *   0 sl_cli_sweep ("x", "a,b,c", "start:stop:step")     1 sl_cli_vector inline ("a,b,c")
 *   2 sl_cli_vector "@FILE" (the rest is the file)         3 sl_cli_ids ("1,2,3")
 *   4 sl_cli_double_in (0, 1]                              5 sl_cli_long_in [-5, 1000]
 *   6 sl_cli_u64                                           7 run's --gamma list (cmd_run.c parse_gammas)
 *   8 analyze/recommend --v-table "n:v,..." (cli_deploy.c, through sl_cli_parse)
 * Every successful parse is checked against what its header promises. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_cli.h"
#include "cli_deploy.h"

/* parse_gammas is static in cmd_run.c: the harness compiles that file in (its sl_cmd_run is not
 * called; cmd_run.o is not linked). */
#include "../../sim/cli/cmd_run.c"

static void check_gammas(const char *s)
{
    gamma_list l;
    if (parse_gammas("--gamma", s, &l) != SL_OK) return;
    if (l.n < 1 || l.n > SL_RUN_MAX_GAMMAS) abort();
    for (size_t i = 0; i < l.n; i++)
        if (l.g[i] < 1 || l.g[i] > SL_SPEC_GAMMA_MAX || (i && l.g[i] <= l.g[i - 1])) abort();
}

static void check_vtable(const char *s)
{
    double c = NAN, ci = 0.95;
    size_t gmax = 12, boot = 1000;
    uint64_t seed = 1;
    sl_cli_deploy d = {.c = &c, .gamma_max = &gmax, .n_boot = &boot, .ci_level = &ci, .seed = &seed};
    sl_cli cli;
    sl_cli_init(&cli, "analyze", "", "");
    sl_cli_group_deploy(&cli, &d);
    char *argv[] = {"analyze", "--v-table", (char *)s, NULL};
    if (sl_cli_parse(&cli, 3, argv, 0) == SL_OK) {
        const sl_theory_vcost *vc = sl_cli_deploy_vc(&d);
        if (!vc) abort();
        for (long n = -1; n <= 70; n++) {
            double v;
            if (sl_theory_vcost_eval(vc, n, &v) == SL_OK && !isfinite(v)) abort();
            sl_err_clear();
        }
    }
    sl_cli_deploy_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *s = fuzz_cstr(data + 1, size - 1);
    double *v = NULL, x;
    int32_t *ids = NULL;
    size_t n = 0;
    long l;
    uint64_t u;
    switch (data[0] % 9) {
    case 0:
        if (sl_cli_sweep("--x", s, &v, &n) == SL_OK && n == 0) abort();
        break;
    case 1:
        if (s[0] != '@' && sl_cli_vector("--p", s, &v, &n) == SL_OK && n == 0) abort();
        break;
    case 2: {
        const char *path = fuzz_file(data + 1, size - 1, ".vec");
        char arg[600];
        if (path && strlen(path) < sizeof arg - 1) {
            arg[0] = '@';
            strcpy(arg + 1, path);
            if (sl_cli_vector("--p", arg, &v, &n) == SL_OK && n == 0) abort();
        }
        break;
    }
    case 3: sl_cli_ids("--ids", s, &ids, &n); break;
    case 4:
        if (sl_cli_double_in("--x", s, 0, 1, 1, 0, &x) == SL_OK && !(x > 0 && x <= 1)) abort();
        break;
    case 5:
        if (sl_cli_long_in("--n", s, -5, 1000, &l) == SL_OK && (l < -5 || l > 1000)) abort();
        break;
    case 6: sl_cli_u64("--seed", s, &u); break;
    case 7: check_gammas(s); break;
    case 8: check_vtable(s); break;
    }
    free(v);
    free(ids);
    free(s);
    sl_err_clear();
    return 0;
}
