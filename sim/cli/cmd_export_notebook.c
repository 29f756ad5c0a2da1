/* cmd_export_notebook.c: `speclab export-notebook LOG.h5 [more logs] -o NAME.ipynb`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_cli.h"
#include "sl_notebook.h"

static const char ABOUT[] =
    "Writes a Jupyter notebook (nbformat 4.5, kernel python3) that reloads the logs (speclab measure or\n"
    "run; analysis/LOG_SCHEMA.md) with h5py and recomputes with numpy, drawing with matplotlib: alpha\n"
    "with a percentile bootstrap CI over whole sequences, the beta histogram, lenience curves (logs\n"
    "with full distributions), E[N] from Equation 1 and from the replay of the logged betas, walltime\n"
    "factors and the optimal gamma for c in {0, 0.01, 0.05, 0.1}, and for run logs alpha_hat, tokens\n"
    "per iteration, the measured c and v(n) and the observed speedup. A title cell lists each log's\n"
    "attributes and the command that reproduces it; the last cell prints one JSON line per log.\n"
    "Log paths are stored relative to the notebook's folder when they can be. The notebook is written\n"
    "unexecuted (run it with jupyter nbconvert --execute, or open it), atomically (a temporary file\n"
    "renamed into place); an existing output is kept unless --force is given.\n"
    "\n"
    "  -o FILE                same as --out FILE\n";

int sl_cmd_export_notebook(int argc, char **argv)
{
    sl_notebook_config cfg;
    sl_notebook_config_init(&cfg);
    int force = 0;
    sl_cli c;
    sl_cli_init(&c, "export-notebook", "LOG.h5 [LOG.h5 ...] -o NAME.ipynb [options]", ABOUT);
    sl_cli_string(&c, "out", "NAME.ipynb", &cfg.out, "the notebook to write (must end in .ipynb)");
    c.opt[c.n - 1].flags |= SL_OPT_REQUIRED;
    sl_cli_flag(&c, "force", &force, "replace NAME.ipynb if it exists (default: refuse, exit 2)");
    sl_cli_size(&c, "gamma-max", "G", &cfg.gamma_max, 1, 64, "gamma range 1..G, as speclab analyze (default 12)");
    sl_cli_size(&c, "boot", "B", &cfg.n_boot, 0, 1000000, "bootstrap resamples over whole sequences (default 1000)");
    sl_cli_dbl(&c, "ci", "L", &cfg.ci_level, 0, 1, SL_OPT_LO_OPEN | SL_OPT_HI_OPEN, "confidence level (default 0.95)");
    c.opt[c.n - 1].quantity = "ci_level";
    sl_cli_size(&c, "hist-bins", "B", &cfg.n_hist_bins, 1, 64, "beta histogram bins (default 20)");
    sl_cli_group_seed(&c, &cfg.seed, NULL);
    c.opt[c.n - 1].help = "seed of numpy's RNG for the bootstrap in the notebook (default 1)";

    /* -o FILE and -oFILE are --out: translated before the registry parses (it knows long options only). */
    char **av = calloc((size_t)argc + 1, sizeof *av);
    char **owned = calloc((size_t)argc + 1, sizeof *owned);
    if (!av || !owned) {
        free(av);
        free(owned);
        return sl_fail(SL_EFAIL, "out of memory");
    }
    int after_dashes = 0;
    for (int i = 0; i < argc; i++) {
        av[i] = argv[i];
        if (i == 0 || after_dashes) continue;
        if (!strcmp(argv[i], "--")) after_dashes = 1;
        else if (!strcmp(argv[i], "-o")) av[i] = "--out";
        else if (!strncmp(argv[i], "-o", 2) && (owned[i] = malloc(strlen(argv[i]) + 5))) {
            sprintf(owned[i], "--out=%s", argv[i] + 2);
            av[i] = owned[i];
        }
    }
    int rc = sl_cli_parse(&c, argc, av, SL_CLI_MAX_POS);
    if (rc == -1) rc = SL_OK; /* --help */
    else if (!rc && c.n_pos == 0) rc = sl_fail(SL_EINPUT, "give at least one log file (see speclab export-notebook --help)");
    else if (!rc) {
        cfg.logs = (const char *const *)c.pos;
        cfg.n_logs = c.n_pos;
        cfg.force = force;
        sl_notebook_result res;
        rc = sl_notebook_write(&cfg, &res);
        if (!rc) printf("%s\n", cfg.out);
    }
    for (int i = 0; i < argc; i++) free(owned[i]);
    free(owned);
    free(av);
    return rc;
}
