/* fuzz_costs.c: recommend's CSV cost tables (analysis/sl_recommend.c, cost_from_csv: "gamma,
 * cost_per_iteration" or "gamma,c,v[,overhead]"), read through sl_recommend_run with a small fixed
 * measure log (tests/fuzz/data/measure.h5) and few bootstrap resamples and simulations. */
#include "fuzz_util.h"
#include "sl_common.h"
#include "sl_recommend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, ".csv");
    if (!path) return 0;
    sl_recommend_config cfg;
    sl_recommend_config_init(&cfg);
    cfg.path = fuzz_data("measure.h5");
    cfg.costs = path;
    cfg.n_boot = 20;
    cfg.n_sims = 50;
    cfg.gamma_max = 8;
    sl_recommend_result res;
    if (sl_recommend_run(&cfg, &res) == SL_OK) sl_recommend_result_free(&res);
    sl_err_clear();
    return 0;
}
