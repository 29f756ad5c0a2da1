/*
 * sl_notebook.c: `speclab export-notebook`: an nbformat-4.5 notebook that reloads HDF5 logs with
 * h5py and recomputes speclab's analysis with numpy (see sl_notebook.h).
 *
 * The Python is fixed text kept here, in three kinds of cell: the helpers (one cell, every
 * definition the notebook uses: each follows the function of analysis/sl_analyze.c or
 * sim/sl_theory.c named in its comment), one line per section and log calling them, and the
 * settings cell, the only one built from the arguments. The notebook is written unexecuted: no
 * outputs, execution counts null, cell ids cell-00, cell-01, ... so that it diffs cleanly.
 */
#include "sl_notebook.h"

#include <errno.h>
#include <fcntl.h>
#include <json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sl_common.h"

void sl_notebook_config_init(sl_notebook_config *c)
{
    memset(c, 0, sizeof *c);
    c->gamma_max = 12;
    c->n_boot = 1000;
    c->ci_level = 0.95;
    c->seed = 1;
    c->n_hist_bins = 20;
}

/* ---- the helpers cell (Python) ---- */

static const char *const HELPERS =
    "import json\n"
    "import math\n"
    "from pathlib import Path\n"
    "\n"
    "import h5py\n"
    "import numpy as np\n"
    "import matplotlib\n"
    "try:\n"
    "    get_ipython().run_line_magic('matplotlib', 'inline')  # the inline backend draws with Agg\n"
    "except NameError:  # run as a plain script\n"
    "    matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "\n"
    "\n"
    "def resolve(path):\n"
    "    # A relative path is relative to the notebook's folder, where Jupyter starts the kernel.\n"
    "    p = Path(path).expanduser()\n"
    "    if not p.is_absolute():\n"
    "        p = Path.cwd() / p\n"
    "    if not p.exists():\n"
    "        raise FileNotFoundError(f'{path}: no such log (looked in {Path.cwd()}); edit LOGS above')\n"
    "    return p\n"
    "\n"
    "\n"
    "def attr(f, name, default=None):\n"
    "    if name not in f.attrs:\n"
    "        return default\n"
    "    v = f.attrs[name]\n"
    "    if isinstance(v, bytes):\n"
    "        return v.decode()\n"
    "    return v.item() if hasattr(v, 'item') else v\n"
    "\n"
    "\n"
    "def expected_tokens(alpha, gamma):\n"
    "    # Equation 1, E[N] = (1 - alpha^(gamma+1)) / (1 - alpha), by Horner's rule (sl_theory_expected_tokens).\n"
    "    if alpha == 1:\n"
    "        return gamma + 1.0\n"
    "    s = 1.0\n"
    "    for _ in range(gamma):\n"
    "        s = 1.0 + alpha * s\n"
    "    return s\n"
    "\n"
    "\n"
    "def boot_ratio(num, den, rng):\n"
    "    # Percentile bootstrap of sum(num) / sum(den) resampling whole sequences (groups) with replacement\n"
    "    # (sl_analyze_boot_ratio; numpy's RNG instead of speclab's streams).\n"
    "    est = num.sum() / den.sum() if den.sum() > 0 else math.nan\n"
    "    n = len(num)\n"
    "    if n < 2 or N_BOOT < 2 or not den.sum() > 0:\n"
    "        return est, math.nan, math.nan\n"
    "    a, d = np.empty(N_BOOT), np.empty(N_BOOT)\n"
    "    step = max(1, (1 << 22) // n)  # resamples per block: bounded memory for many sequences\n"
    "    for b in range(0, N_BOOT, step):\n"
    "        idx = rng.integers(0, n, size=(min(step, N_BOOT - b), n))\n"
    "        a[b:b + len(idx)], d[b:b + len(idx)] = num[idx].sum(axis=1), den[idx].sum(axis=1)\n"
    "    v = a[d > 0] / d[d > 0]\n"
    "    if len(v) < 2:\n"
    "        return est, math.nan, math.nan\n"
    "    lo, hi = np.percentile(v, [50 * (1 - CI_LEVEL), 50 * (1 + CI_LEVEL)])  # linear interpolation (type 7)\n"
    "    return est, float(lo), float(hi)\n"
    "\n"
    "\n"
    "def histogram(beta):\n"
    "    # Bin k holds beta in [k/B, (k+1)/B); beta = 1 goes to the last bin (add_beta in analysis/sl_analyze.c).\n"
    "    h = np.minimum((beta * HIST_BINS).astype(np.int64), HIST_BINS - 1)\n"
    "    return np.bincount(h, minlength=HIST_BINS)\n"
    "\n"
    "\n"
    "def optimum(factors):\n"
    "    # The smallest gamma within 1e-12 (relative) of the best factor; 0 when plain decoding is no slower\n"
    "    # (sl_theory_optimal_gamma).\n"
    "    f = np.asarray(factors, dtype=float)\n"
    "    if len(f) == 0 or not np.isfinite(f).all():  # no alpha (an empty log): no optimum, as analyze\n"
    "        return {'gamma': None, 'factor': math.nan, 'at_cap': 0}\n"
    "    fmax = f.max()\n"
    "    ties = [g + 1 for g in range(len(f)) if f[g] >= fmax * (1 - 1e-12)]\n"
    "    best = ties[0]\n"
    "    return {'gamma': best if fmax > 1 else 0, 'factor': float(f[best - 1]) if fmax > 1 else 1.0,\n"
    "            'at_cap': int(ties[-1] == len(f))}\n"
    "\n"
    "\n"
    "def lenience_curves(f, lens):\n"
    "    # alpha(l) = mean over positions of sum_x min(q(x), p(x)/l) (standard form) and the fraction of\n"
    "    # positions where p(argmax q) >= l max p (temperature-0 form), from float32 (or float16) p and q\n"
    "    # (row_kernel in analysis/sl_analyze.c: products and sums in float64, the ratio in float32).\n"
    "    P, Q = f['distributions/p'], f['distributions/q']\n"
    "    n, V = P.shape\n"
    "    block = max(1, (1 << 22) // V)\n"
    "    inv = [1.0 / l for l in lens]\n"
    "    s_std, s_t0, s_beta = np.zeros(len(lens)), np.zeros(len(lens)), 0.0\n"
    "    for a in range(0, n, block):\n"
    "        p = P[a:a + block].astype(np.float32)\n"
    "        q = Q[a:a + block].astype(np.float32)\n"
    "        pd, qd = p.astype(np.float64), q.astype(np.float64)\n"
    "        s_beta += np.minimum(pd, qd).sum()\n"
    "        for j, il in enumerate(inv):\n"
    "            s_std[j] += np.minimum(pd * il, qd).sum()\n"
    "        pmax = p.max(axis=1)\n"
    "        top = p[np.arange(len(p)), q.argmax(axis=1)]\n"
    "        ratio = np.divide(top, pmax, out=np.zeros_like(top), where=pmax > 0)  # float32, as speclab\n"
    "        for j, l in enumerate(lens):\n"
    "            s_t0[j] += np.count_nonzero(ratio.astype(np.float64) >= l)\n"
    "    return s_std / n, s_t0 / n, s_beta / n\n"
    "\n"
    "\n"
    "def factor_table(alpha, en_replay, cs, vfun, G):\n"
    "    # Walltime factor E[N] / (gamma c + v(gamma + 1)) for gamma = 1..G, from Equation 1 at alpha and\n"
    "    # from the replayed E[N]; the optimal gamma of each.\n"
    "    rows = []\n"
    "    for c in cs:\n"
    "        f_iid = [expected_tokens(alpha, g) / (g * c + vfun(g + 1)) for g in range(1, G + 1)]\n"
    "        row = {'c': c, 'factor_iid': f_iid, 'opt_iid': optimum(f_iid)}\n"
    "        if en_replay is not None:\n"
    "            f_rep = [en_replay[g - 1] / (g * c + vfun(g + 1)) for g in range(1, G + 1)]\n"
    "            row.update(factor_replay=f_rep, opt_replay=optimum(f_rep))\n"
    "        rows.append(row)\n"
    "    return rows\n"
    "\n"
    "\n"
    "def analyze_log(path):\n"
    "    # What speclab analyze computes from one log (sl_analyze_file): alpha, histogram, replay, lenience, factors.\n"
    "    r = {'log': str(path), 'path': resolve(path)}\n"
    "    rng = np.random.default_rng(SEED)  # the same numbers on every execution\n"
    "    with h5py.File(r['path'], 'r') as f:\n"
    "        if attr(f, 'schema') != 'speclab-log' or attr(f, 'schema_version') != 1:\n"
    "            raise ValueError(f'{path}: not a speclab log of schema version 1')\n"
    "        r['attrs'] = {k: attr(f, k) for k in f.attrs}\n"
    "        r['kind'] = kind = attr(f, 'kind')\n"
    "        seq = f['sequences']\n"
    "        seq_id, n_rows = seq['sequence'][:], seq['n_rows'][:]\n"
    "        ns = len(seq_id)\n"
    "        r['n_sequences'] = ns\n"
    "        if kind == 'measure':\n"
    "            beta = np.minimum(f['positions/beta'][:], 1.0)\n"
    "            r['n_positions'] = len(beta)\n"
    "            group = np.repeat(np.arange(ns), n_rows)\n"
    "            num, den = np.bincount(group, weights=beta, minlength=ns), n_rows.astype(np.float64)\n"
    "        else:\n"
    "            beta_all = f['drafts/beta'][:]\n"
    "            ok = ~np.isnan(beta_all)\n"
    "            beta = np.minimum(beta_all[ok], 1.0)\n"
    "            r['n_positions'] = len(beta_all)\n"
    "            group = np.searchsorted(seq_id, f['drafts/sequence'][:][ok])\n"
    "            num = np.bincount(group, weights=beta, minlength=ns)\n"
    "            den = np.bincount(group, minlength=ns).astype(np.float64)\n"
    "        r['beta'] = beta\n"
    "        r['alpha'], r['alpha_lo'], r['alpha_hi'] = boot_ratio(num, den, rng)\n"
    "        r['hist'] = histogram(beta)\n"
    "        G = GAMMA_MAX\n"
    "        r['en_iid'] = [expected_tokens(r['alpha'], g) for g in range(1, G + 1)]\n"
    "        r['en_replay'] = None\n"
    "        if kind == 'measure':\n"
    "            # Window replay, per gamma over every window of gamma consecutive logged positions\n"
    "            # (t + gamma <= n in each sequence): U_gamma = mean of beta_t ... beta_{t+gamma-1};\n"
    "            # E[N](gamma) = mean of 1 + sum_{k<=gamma} beta_t ... beta_{t+k-1}.\n"
    "            S, E, W, start = np.zeros(G), np.zeros(G), np.zeros(G), 0\n"
    "            for n in n_rows:\n"
    "                b = beta[start:start + n]\n"
    "                start += n\n"
    "                for g in range(1, min(G, n) + 1):\n"
    "                    P = np.cumprod(np.lib.stride_tricks.sliding_window_view(b, g), axis=1)\n"
    "                    S[g - 1] += P[:, -1].sum()\n"
    "                    E[g - 1] += P.sum()\n"
    "                    W[g - 1] += n - g + 1\n"
    "            r['n_windows'] = int(W[0])\n"
    "            if W[0] > 0:\n"
    "                with np.errstate(invalid='ignore', divide='ignore'):\n"
    "                    r['uncond'] = np.where(W > 0, S / np.maximum(W, 1), np.nan)\n"
    "                    r['en_replay'] = list(np.where(W > 0, 1 + E / np.maximum(W, 1), np.nan))\n"
    "        r['lenience'] = None\n"
    "        if 'distributions' in f:\n"
    "            std, t0, bd = lenience_curves(f, LENIENCE)\n"
    "            r['lenience'] = {'l': list(LENIENCE), 'standard': list(std), 't0': list(t0)}\n"
    "            r['beta_from_dists'] = bd\n"
    "        r['factors'] = factor_table(r['alpha'], r['en_replay'], COSTS, lambda n: 1.0, G)\n"
    "        if kind == 'run':\n"
    "            r['run'] = run_numbers(f, r, rng)\n"
    "    return r\n"
    "\n"
    "\n"
    "def run_numbers(f, r, rng):\n"
    "    # Run logs (analyze_run in analysis/sl_analyze.c, the report of sim/cli/cmd_run.c).\n"
    "    it = f['iterations']\n"
    "    seq = f['sequences']\n"
    "    gamma = int(attr(f, 'gamma'))\n"
    "    acc, gam, emitted = it['accepted'][:], it['gamma'][:], it['emitted'][:]\n"
    "    tested = acc + (acc < gam)  # the accepted drafts and the first rejected one\n"
    "    seq_id = seq['sequence'][:]\n"
    "    g = np.searchsorted(seq_id, it['sequence'][:])\n"
    "    ns = len(seq_id)\n"
    "    num = np.bincount(g, weights=acc, minlength=ns)\n"
    "    den = np.bincount(g, weights=tested, minlength=ns)\n"
    "    a_hat, a_lo, a_hi = boot_ratio(num, den, rng)\n"
    "    mode, kept, wall = seq['mode'][:], seq['n_generated'][:], seq['wall_s'][:]\n"
    "    spec_s = wall[mode == 0].sum() / kept[mode == 0].sum()\n"
    "    base_s = wall[mode == 1].sum() / kept[mode == 1].sum()\n"
    "    out = {'gamma': gamma, 'iterations': int(len(acc)), 'accepted': int(acc.sum()), 'tested': int(tested.sum()),\n"
    "           'drafted': int(it['drafted'][:].sum()), 'alpha_hat': a_hat, 'alpha_hat_ci': [a_lo, a_hi],\n"
    "           'acceptance_rate': acc.sum() / it['drafted'][:].sum(), 'tokens_per_iteration': emitted.mean(),\n"
    "           'spec_s_per_token': spec_s, 'base_s_per_token': base_s, 'speedup': base_s / spec_s}\n"
    "    out['expected_tokens'] = expected_tokens(a_hat, gamma)\n"
    "    if 'costs' in f and len(f['costs/n']) > 0:\n"
    "        c = float(f['costs'].attrs['c'])\n"
    "        vt = dict(zip(f['costs/n'][:].tolist(), f['costs/v'][:].tolist()))\n"
    "        out.update(c=c, v={int(k): v for k, v in vt.items()}, draft_step_s=float(f['costs'].attrs['draft_step_s']),\n"
    "                   target_step_s=float(f['costs'].attrs['target_step_s']))\n"
    "        out['predicted_thm38'] = out['expected_tokens'] / (gamma * c + 1)\n"
    "        if gamma + 1 in vt:\n"
    "            out['predicted_general'] = out['expected_tokens'] / (gamma * c + vt[gamma + 1])\n"
    "        Gv = 0  # the measured table covers gamma = 1..Gv\n"
    "        while Gv < GAMMA_MAX and (Gv + 2) in vt:\n"
    "            Gv += 1\n"
    "        if Gv > 0:\n"
    "            cs = [c] + [x for x in COSTS if x != c]\n"
    "            out['factors_measured_v'] = factor_table(r['alpha'], None, cs, lambda n: 1.0 if n == 1 else vt[n], Gv)\n"
    "    return out\n"
    "\n"
    "\n"
    "def clean(x):\n"
    "    # JSON without NaN: NaN -> null; numpy scalars -> Python numbers.\n"
    "    if isinstance(x, dict):\n"
    "        return {k: clean(v) for k, v in x.items()}\n"
    "    if isinstance(x, (list, tuple, np.ndarray)):\n"
    "        return [clean(v) for v in x]\n"
    "    if isinstance(x, (np.integer,)):\n"
    "        return int(x)\n"
    "    if isinstance(x, (float, np.floating)):\n"
    "        return None if math.isnan(x) else float(x)\n"
    "    return x\n"
    "\n"
    "\n"
    "def summary(r):\n"
    "    s = {'log': r['log'], 'kind': r['kind'], 'n_sequences': r['n_sequences'], 'n_positions': r['n_positions'],\n"
    "         'alpha': r['alpha'], 'alpha_ci': [r['alpha_lo'], r['alpha_hi']], 'ci_level': CI_LEVEL, 'n_boot': N_BOOT,\n"
    "         'seed': SEED, 'hist': r['hist'], 'lenience': r['lenience'], 'en_iid': r['en_iid'],\n"
    "         'en_replay': r['en_replay'],\n"
    "         'optimal_gamma': [{'c': t['c'], 'gamma_iid': t['opt_iid']['gamma'], 'factor_iid': t['opt_iid']['factor'],\n"
    "                            'gamma_replay': t['opt_replay']['gamma'] if 'opt_replay' in t else None,\n"
    "                            'factor_replay': t['opt_replay']['factor'] if 'opt_replay' in t else None}\n"
    "                           for t in r['factors']]}\n"
    "    if 'run' in r:\n"
    "        run = dict(r['run'])\n"
    "        fm = run.pop('factors_measured_v', None)\n"
    "        if fm:\n"
    "            run['optimal_gamma_measured_v'] = [{'c': t['c'], 'gamma_iid': t['opt_iid']['gamma'],\n"
    "                                                'factor_iid': t['opt_iid']['factor']} for t in fm]\n"
    "        s['run'] = run\n"
    "    return clean(s)\n"
    "\n"
    "\n"
    "def show_alpha(r):\n"
    "    what = 'positions' if r['kind'] == 'measure' else 'drafted tokens with a logged beta'\n"
    "    print(f\"{r['log']}: {r['n_sequences']} sequences, {len(r['beta'])} {what}\")\n"
    "    print(f\"alpha = mean beta = {r['alpha']:.6f}, {100 * CI_LEVEL:g}% CI [{r['alpha_lo']:.6f}, {r['alpha_hi']:.6f}]\"\n"
    "          f\" ({N_BOOT} resamples of whole sequences, numpy seed {SEED})\")\n"
    "    if 'beta_from_dists' in r:\n"
    "        print(f\"beta recomputed from the stored distributions: {r['beta_from_dists']:.6f}\")\n"
    "\n"
    "\n"
    "def plot_hist(r):\n"
    "    h, B = r['hist'], HIST_BINS\n"
    "    fig, ax = plt.subplots(figsize=(6, 3))\n"
    "    ax.bar((np.arange(B) + 0.5) / B, h, width=1 / B, edgecolor='black')\n"
    "    ax.axvline(r['alpha'], color='red', label=f\"alpha = {r['alpha']:.3f}\")\n"
    "    ax.set_xlabel('beta = sum min(p, q)')\n"
    "    ax.set_ylabel('count')\n"
    "    ax.set_xlim(0, 1)\n"
    "    ax.legend()\n"
    "    plt.show()\n"
    "    print('counts per bin:', list(map(int, h)))\n"
    "\n"
    "\n"
    "def show_lenience(r):\n"
    "    L = r['lenience']\n"
    "    fig, ax = plt.subplots(figsize=(6, 3))\n"
    "    ax.plot(L['l'], L['standard'], 'o-', label='standard: sum min(q, p/l)')\n"
    "    ax.plot(L['l'], L['t0'], 's--', label='temperature 0: p(argmax q) >= l max p')\n"
    "    ax.set_xlabel('lenience l')\n"
    "    ax.set_ylabel('alpha(l)')\n"
    "    ax.legend()\n"
    "    plt.show()\n"
    "    print(' l      alpha_standard  alpha_t0')\n"
    "    for l, a, b in zip(L['l'], L['standard'], L['t0']):\n"
    "        print(f'{l:5.2f}  {a:.6f}        {b:.6f}')\n"
    "\n"
    "\n"
    "def show_expected_tokens(r):\n"
    "    G = len(r['en_iid'])\n"
    "    g = np.arange(1, G + 1)\n"
    "    fig, ax = plt.subplots(figsize=(6, 3))\n"
    "    ax.plot(g, r['en_iid'], 'o-', label='Equation 1 at alpha')\n"
    "    if r['en_replay'] is not None:\n"
    "        ax.plot(g, r['en_replay'], 's--', label='replay of the logged betas')\n"
    "    ax.set_xlabel('gamma')\n"
    "    ax.set_ylabel('E[N], tokens per iteration')\n"
    "    ax.legend()\n"
    "    plt.show()\n"
    "    print('gamma  E[N] Eq. 1   E[N] replay')\n"
    "    for k in range(G):\n"
    "        rep = f\"{r['en_replay'][k]:.6f}\" if r['en_replay'] is not None else '-'\n"
    "        print(f'{k + 1:5d}  {r[\"en_iid\"][k]:.6f}     {rep}')\n"
    "\n"
    "\n"
    "def show_optimal_gamma(r, rows=None, label='v = 1'):\n"
    "    rows = rows if rows is not None else r['factors']\n"
    "    fig, ax = plt.subplots(figsize=(6, 3))\n"
    "    for t in rows:\n"
    "        g = np.arange(1, len(t['factor_iid']) + 1)\n"
    "        line, = ax.plot(g, t['factor_iid'], 'o-', label=f\"c = {t['c']:g}\")\n"
    "        if 'factor_replay' in t:\n"
    "            ax.plot(g, t['factor_replay'], '--', color=line.get_color())\n"
    "    ax.axhline(1, color='gray', lw=0.5)\n"
    "    ax.set_xlabel('gamma')\n"
    "    ax.set_ylabel('walltime factor')\n"
    "    ax.set_title(f'{label}; solid: Equation 1, dashed: replay')\n"
    "    ax.legend(fontsize='small')\n"
    "    plt.show()\n"
    "    print('c          gamma*  factor (Eq. 1)   gamma*  factor (replay)')\n"
    "    for t in rows:\n"
    "        o = t['opt_iid']\n"
    "        rep = t.get('opt_replay')\n"
    "        tail = f\"{str(rep['gamma']):>6}  {rep['factor']:.6f}\" if rep else '     -  -'\n"
    "        cap = ' (at the cap)' if o['at_cap'] else ''\n"
    "        print(f\"{t['c']:<9.4g}  {str(o['gamma']):>6}  {o['factor']:.6f}{cap:13s}  {tail}\")\n"
    "\n"
    "\n"
    "def show_run(r):\n"
    "    u = r['run']\n"
    "    print(f\"gamma = {u['gamma']}, {u['iterations']} iterations\")\n"
    "    print(f\"alpha_hat = accepted / tested = {u['accepted']} / {u['tested']} = {u['alpha_hat']:.6f}, \"\n"
    "          f\"{100 * CI_LEVEL:g}% CI [{u['alpha_hat_ci'][0]:.6f}, {u['alpha_hat_ci'][1]:.6f}]\")\n"
    "    print(f\"acceptance rate = accepted / drafted = {u['acceptance_rate']:.6f}\")\n"
    "    print(f\"tokens per iteration = {u['tokens_per_iteration']:.6f}; E[N] at alpha_hat = {u['expected_tokens']:.6f}\")\n"
    "    print(f\"seconds per token: speculative {u['spec_s_per_token']:.3g}, autoregressive {u['base_s_per_token']:.3g}; \"\n"
    "          f\"observed speedup = {u['speedup']:.4f}\")\n"
    "    if 'c' in u:\n"
    "        print(f\"measured c = {u['c']:.4f} (draft step {u['draft_step_s']:.3g} s / target step {u['target_step_s']:.3g} s)\")\n"
    "        print(f\"predicted speedup: Theorem 3.8 (v = 1) {u['predicted_thm38']:.4f}\", end='')\n"
    "        if 'predicted_general' in u:\n"
    "            print(f\", generalised E[N]/(gamma c + v(gamma+1)) {u['predicted_general']:.4f}\")\n"
    "        else:\n"
    "            print()\n"
    "        n = sorted(u['v'])\n"
    "        fig, ax = plt.subplots(figsize=(6, 3))\n"
    "        ax.plot(n, [u['v'][k] for k in n], 'o-', label='measured v(n)')\n"
    "        ax.plot(n, [1] * len(n), ':', color='gray', label='v = 1 (Theorem 3.8)')\n"
    "        ax.set_xlabel('n, tokens scored in one target call')\n"
    "        ax.set_ylabel('v(n), single-token calls')\n"
    "        ax.legend()\n"
    "        plt.show()\n"
    "        if 'factors_measured_v' in u:\n"
    "            show_optimal_gamma(r, u['factors_measured_v'], 'measured c and v(n)')\n"
    ;

/* ---- what the exporter knows of each log ---- */

typedef struct {
    const char *path;        /* as given */
    char stored[PATH_MAX];   /* as the notebook names it: relative to the notebook's folder, or absolute */
    sl_log_meta meta;
    size_t n_sequences, n_rows, n_drafts, prompt_len, n_prompts;
    int has_dists;
} log_info;

static int read_info(const char *path, const char *nb_dir, log_info *li)
{
    memset(li, 0, sizeof *li);
    li->path = path;
    sl_log_reader *r = NULL;
    int rc = sl_log_open(&r, path);
    if (rc) return rc;
    li->meta = *sl_log_meta_of(r);
    li->n_sequences = sl_log_n_sequences(r);
    li->n_rows = sl_log_n_rows(r);
    li->n_drafts = li->meta.kind == SL_LOG_RUN ? sl_log_n_drafts(r) : 0;
    li->has_dists = sl_log_has_dists(r);
    sl_log_seq *seqs = NULL;
    rc = sl_log_sequences(r, &seqs);
    for (size_t s = 0; !rc && s < li->n_sequences; s++) {
        size_t len = (size_t)seqs[s].n_prompt_tokens;
        if (s == 0) li->prompt_len = len;
        else if (len != li->prompt_len) li->prompt_len = 0;
        /* A run log holds one baseline decode per prompt, and one speculative decode per gamma. */
        li->n_prompts += li->meta.kind == SL_LOG_MEASURE || seqs[s].mode == 1;
    }
    free(seqs);
    sl_log_close(r);
    if (!rc) rc = sl_notebook_relpath(path, nb_dir, li->stored, sizeof li->stored);
    return rc;
}

/* ---- paths ---- */

int sl_notebook_relpath(const char *path, const char *dir, char *buf, size_t n)
{
    char a[PATH_MAX], d[PATH_MAX];
    if (!realpath(path, a)) return sl_fail(SL_EINPUT, "cannot resolve %s: %s", path, strerror(errno));
    if (!realpath(dir, d)) return sl_fail(SL_EINPUT, "cannot resolve the folder %s: %s", dir, strerror(errno));
    /* The longest common prefix that ends at a component boundary in both: common is the index of
     * the '/' (or the end) that closes it; 0 means only the root is shared. */
    size_t i = 0, common;
    while (a[i] && a[i] == d[i]) i++;
    if ((a[i] == '/' || a[i] == 0) && (d[i] == '/' || d[i] == 0)) {
        common = i;
    } else { /* back to the last '/' of the shared prefix a[0, i) */
        common = i > 0 ? i - 1 : 0;
        while (common > 0 && a[common] != '/') common--;
    }
    if (strlen(d) == 1) common = 0; /* the notebook sits in "/": keep the absolute path */
    if (common == 0) {
        if ((size_t)snprintf(buf, n, "%s", a) >= n) return sl_fail(SL_EINPUT, "path too long: %s", a);
        return SL_OK;
    }
    size_t w = 0;
    buf[0] = 0;
    for (const char *s = d + common; *s; s++) /* one ".." per component of dir below the common prefix */
        if (*s == '/' && (w += (size_t)snprintf(buf + w, w < n ? n - w : 0, "../")) >= n)
            return sl_fail(SL_EINPUT, "path too long: %s", a);
    const char *rest = a[common] == '/' ? a + common + 1 : a + common;
    if (w + strlen(rest) + 2 > n) return sl_fail(SL_EINPUT, "path too long: %s", a);
    snprintf(buf + w, n - w, "%s", *rest ? rest : ".");
    return SL_OK;
}

/* ---- the command that reproduces a log ---- */

/* The shortest of %.15g and %.17g that reads back as x (0.95, not 0.94999999999999996). */
static const char *shortest(double x, char *buf, size_t n)
{
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
    return buf;
}

/* Appends " --flag value" to the command, single-quoting the value when the shell would split it. */
static void arg(FILE *f, const char *flag, const char *fmt, ...)
{
    char v[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    fprintf(f, " %s", flag);
    if (!v[0]) return;
    if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=+-,@%") == strlen(v)) {
        fprintf(f, " %s", v);
        return;
    }
    fputs(" '", f);
    for (const char *s = v; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

static void sampling_args(FILE *f, const sl_log_meta *m)
{
    char num[32];
    arg(f, "--temperature", "%s", shortest(m->sampling.temperature, num, sizeof num));
    arg(f, "--top-k", "%zu", m->sampling.top_k);
    arg(f, "--top-p", "%s", shortest(m->sampling.top_p, num, sizeof num));
    arg(f, "--min-p", "%s", shortest(m->sampling.min_p, num, sizeof num));
    if (m->eos >= 0) arg(f, "--eos", "%lld", (long long)m->eos);
    arg(f, "--seed", "%llu", (unsigned long long)m->seed);
}

/* Sequences per prompt of a run log: one per gamma of its list (gammas "1,2,4") or the one
 * gamma, plus the autoregressive baseline. */
static size_t run_sequences_per_prompt(const sl_log_meta *m)
{
    size_t k = 2; /* n commas: n + 1 gammas */
    for (const char *c = m->gammas; *c; c++) k += *c == ',';
    return k;
}

int sl_notebook_command(const sl_log_meta *m, size_t n_sequences, size_t prompt_len, const char *out_name, char *buf,
                        size_t n)
{
    char *text = NULL, num[32];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return snprintf(buf, n, "%s", "");
    char family[32];
    size_t vocab = 0, context = 0;
    double noise = 0, dtemp = 0;
    const char *prompts = strncmp(m->source, "models; prompts ", 16) == 0 ? m->source + 16 : NULL;
    if (m->kind == SL_LOG_MEASURE &&
        sscanf(m->source, "synthetic:%31s vocab=%zu noise=%lf draft_temperature=%lf context=%zu", family, &vocab, &noise,
               &dtemp, &context) == 5) {
        fputs("speclab measure", f);
        arg(f, "--synthetic", "%s", family);
        arg(f, "--vocab", "%zu", vocab);
        arg(f, "--noise", "%s", shortest(noise, num, sizeof num));
        arg(f, "--draft-temperature", "%s", shortest(dtemp, num, sizeof num));
        arg(f, "--context", "%zu", context);
        arg(f, "--sequences", "%zu", n_sequences);
        if (prompt_len) arg(f, "--prompt-len", "%zu", prompt_len);
    } else if (m->kind == SL_LOG_MEASURE) {
        fputs("speclab measure", f);
        arg(f, "--target", "%s", m->target_name);
        arg(f, "--draft", "%s", m->draft_name);
        arg(f, "--prompts", "%s", prompts ? prompts : "PROMPTS.txt");
    } else {
        fputs("speclab run", f);
        arg(f, "--target", "%s", m->target_name);
        arg(f, "--draft", "%s", m->draft_name);
        arg(f, "--prompts", "%s", prompts ? prompts : "PROMPTS.txt");
        arg(f, "--max-prompts", "%zu", n_sequences / run_sequences_per_prompt(m));
        if (m->gammas[0]) arg(f, "--gamma", "%s", m->gammas);
        else arg(f, "--gamma", "%llu", (unsigned long long)m->gamma);
        arg(f, "--rule", "%s", m->rule);
        if (strncmp(m->rule, "lenient", 7) == 0) arg(f, "--lenience", "%s", shortest(m->lenience, num, sizeof num));
    }
    arg(f, "--tokens", "%llu", (unsigned long long)m->tokens_per_sequence);
    sampling_args(f, m);
    if (m->kind == SL_LOG_MEASURE) {
        arg(f, "--dist", "%s", sl_log_dist_name(m->dist));
        arg(f, "--shard-sequences", "%llu", (unsigned long long)m->shard_sequences);
    } else {
        arg(f, "--shard-prompts", "%llu", (unsigned long long)(m->shard_sequences / run_sequences_per_prompt(m)));
    }
    arg(f, "--out", "%s", out_name);
    fclose(f);
    int w = snprintf(buf, n, "%s", text ? text : "");
    free(text);
    return w;
}

/* ---- cells ---- */

typedef struct {
    json_object *cells;
    size_t n;
} nb_cells;

/* nbformat stores a cell's source as a list of lines, each but the last ending in "\n". */
static json_object *source_lines(const char *text)
{
    json_object *a = json_object_new_array();
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '\n') len--; /* no trailing empty line */
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - text) + 1 : len;
        json_object_array_add(a, json_object_new_string_len(text + i, (int)(e - i)));
        i = e;
    }
    return a;
}

static void add_cell(nb_cells *c, const char *type, const char *text)
{
    json_object *o = json_object_new_object();
    char id[32];
    snprintf(id, sizeof id, "cell-%02zu", c->n++);
    json_object_object_add(o, "cell_type", json_object_new_string(type));
    if (!strcmp(type, "code")) json_object_object_add(o, "execution_count", NULL);
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "metadata", json_object_new_object());
    if (!strcmp(type, "code")) json_object_object_add(o, "outputs", json_object_new_array());
    json_object_object_add(o, "source", source_lines(text));
    json_object_array_add(c->cells, o);
}

/* A cell from printf-style text. */
static void cellf(nb_cells *c, const char *type, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n >= 0) add_cell(c, type, text);
    free(text);
}

/* A Python (and JSON) string literal for s. */
static const char *pystr(const char *s, char *buf, size_t n)
{
    json_object *o = json_object_new_string(s);
    snprintf(buf, n, "%s", json_object_to_json_string_ext(o, JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return buf;
}

static void title_cell(nb_cells *c, const sl_notebook_config *cfg, const log_info *li)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fprintf(f, "# speclab logs: ");
    for (size_t i = 0; i < cfg->n_logs; i++) fprintf(f, "%s`%s`", i ? ", " : "", sl_path_base(li[i].stored));
    fprintf(f, "\n\nWritten by `speclab export-notebook` (speclab %s). This notebook reloads the HDF5 logs below with "
               "**h5py** and recomputes what `speclab analyze` reports from them with **numpy**, drawing with "
               "**matplotlib**: it stores no number computed by speclab, so it is an independent check. Schema of the "
               "logs: `analysis/LOG_SCHEMA.md`; formulas: `THEORY.md` (notation: p = target, q = draft, γ = drafts per "
               "iteration, c = cost of a draft step and v(n) = cost of a target call on n tokens, both in single-token "
               "target steps).\n",
            SL_VERSION);
    for (size_t i = 0; i < cfg->n_logs; i++) {
        const log_info *l = &li[i];
        const sl_log_meta *m = &l->meta;
        char cmd[4096];
        sl_notebook_command(m, l->n_sequences, l->prompt_len, sl_path_base(l->path), cmd, sizeof cmd);
        fprintf(f, "\n## Log %zu: `%s` (%s log)\n\n| attribute | value |\n|---|---|\n", i + 1, l->stored,
                sl_log_kind_name(m->kind));
        fprintf(f, "| target (p) | `%s`%s%s |\n", m->target_name, m->target_sha256[0] ? ", sha256 " : "", m->target_sha256);
        fprintf(f, "| draft (q) | `%s`%s%s |\n", m->draft_name, m->draft_sha256[0] ? ", sha256 " : "", m->draft_sha256);
        fprintf(f, "| source | `%s` |\n| vocabulary | %llu |\n", m->source, (unsigned long long)m->vocab_size);
        fprintf(f, "| sampling (both models) | temperature %g, top-k %zu%s, top-p %g, min-p %g |\n",
                m->sampling.temperature, m->sampling.top_k, m->sampling.top_k ? "" : " (off)", m->sampling.top_p,
                m->sampling.min_p);
        fprintf(f, "| seed | %llu |\n| tokens per sequence | %llu (eos: ", (unsigned long long)m->seed,
                (unsigned long long)m->tokens_per_sequence);
        if (m->eos >= 0) fprintf(f, "%lld) |\n", (long long)m->eos);
        else fprintf(f, "none) |\n");
        if (m->kind == SL_LOG_MEASURE)
            fprintf(f, "| rows | %zu sequences, %zu positions |\n| distributions | %s%s |\n", l->n_sequences, l->n_rows,
                    sl_log_dist_name(m->dist), l->has_dists ? "" : " (β-level log: no lenience curves)");
        else
            fprintf(f, "| rows | %zu sequences (%zu prompts, each speculative and autoregressive), %zu iterations, "
                       "%zu drafted tokens |\n| γ, rule, lenience | %llu, %s, %g |\n",
                    l->n_sequences, l->n_prompts, l->n_rows, l->n_drafts, (unsigned long long)m->gamma, m->rule,
                    m->lenience);
        fprintf(f, "| written by | speclab %s, source revision `%s`, at %s |\n", m->tool_version, m->source_revision,
                m->created_utc);
        fprintf(f, "\nThe command that reproduces it (rebuilt from these attributes: a log does not store its command "
                   "line%s):\n\n```sh\n%s\n```\n",
                m->kind == SL_LOG_RUN ? "; the timings, and so c, v(n) and the speedup, are this machine's own"
                : l->prompt_len && !strncmp(m->source, "synthetic:", 10)
                    ? "; it assumes the random prompts of `--sequences` and `--prompt-len`, not `--prompt-ids`"
                    : "",
                cmd);
    }
    fprintf(f, "\n## What each section shows\n\n"
               "- **α**: the mean of the logged β = Σ_x min(p(x), q(x)), the probability that a draft token is "
               "accepted, with a percentile bootstrap CI that resamples whole sequences.\n"
               "- **β histogram**: how the per-position acceptance probability is spread.\n"
               "- **Lenience**: α(l) for the lenient rule (standard and temperature-0 forms), from the full "
               "distributions when the log stores them.\n"
               "- **Expected tokens E[N]**: tokens emitted per iteration of Algorithm 1 with γ drafts, from Equation 1 "
               "at α and from a replay of the logged β sequences.\n"
               "- **Walltime factor and optimal γ**: E[N]/(γc + v(γ+1)), the speedup over autoregressive decoding, and "
               "the γ that maximises it, for c in {0, 0.01, 0.05, 0.1} with v ≡ 1.\n"
               "- **Run logs**: the observed acceptance α̂, tokens per iteration, the measured c and v(n), the observed "
               "speedup and the predictions at α̂.\n"
               "- **Summary**: one JSON line per log with the key numbers, for machines.\n\n"
               "Run all cells (Kernel → Restart & Run All); the numbers are the same on every run (numpy's RNG is "
               "seeded).\n");
    fclose(f);
    add_cell(c, "markdown", text);
    free(text);
}

static void settings_cells(nb_cells *c, const sl_notebook_config *cfg, const log_info *li)
{
    add_cell(c, "markdown",
             "## Settings\n\nThe logs' paths are relative to this notebook's folder (Jupyter starts the kernel there) "
             "where the export could make them so, else absolute: edit them if you move the files. The other settings "
             "are speclab analyze's defaults (`--gamma-max`, `--boot`, `--ci`, `--seed`); keep them equal to compare "
             "with its output.");
    char *text = NULL, lit[PATH_MAX + 64], num[32];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fprintf(f, "LOGS = [\n");
    for (size_t i = 0; i < cfg->n_logs; i++) fprintf(f, "    %s,\n", pystr(li[i].stored, lit, sizeof lit));
    fprintf(f, "]\n"
               "GAMMA_MAX = %zu  # gamma = 1..GAMMA_MAX (the replay uses every window of gamma positions, as speclab analyze)\n"
               "N_BOOT = %zu  # bootstrap resamples of whole sequences\n"
               "CI_LEVEL = %s\n"
               "SEED = %llu  # numpy's RNG: the same numbers on every run (not speclab's RNG: the CI bounds differ)\n"
               "HIST_BINS = %zu  # beta histogram bins on [0, 1]\n"
               "LENIENCE = [0.1 * k for k in range(1, 11)]  # speclab analyze's default grid\n"
               "COSTS = [0.0, 0.01, 0.05, 0.1]  # c, draft step / target step\n"
               "RESULTS = [None] * len(LOGS)\n",
            cfg->gamma_max, cfg->n_boot, shortest(cfg->ci_level, num, sizeof num), (unsigned long long)cfg->seed,
            cfg->n_hist_bins);
    fclose(f);
    add_cell(c, "code", text);
    free(text);
}

static void log_cells(nb_cells *c, size_t i, const log_info *l)
{
    const sl_log_meta *m = &l->meta;
    const char *tool = m->kind == SL_LOG_RUN ? "speclab run" : "speclab measure";
    int run = m->kind == SL_LOG_RUN;
    cellf(c, "markdown",
          "## Log %zu: `%s`: α and its confidence interval\n\n"
          "Produced by `%s` (the full command is in the title cell). α is the expected acceptance probability of a "
          "draft token: at each %s the log holds β = Σ_x min(p(x), q(x)), the probability that Algorithm 1 accepts a "
          "token drawn from q given that prefix, and α is their mean (Σβ / number of %s). The interval is a "
          "percentile bootstrap at level `CI_LEVEL`: `N_BOOT` resamples of whole sequences with replacement, α "
          "recomputed as Σβ / Σn each time; resampling sequences rather than positions respects the dependence "
          "between positions of one text. `speclab analyze` computes the same α and uses the same method with its own "
          "random streams, so its bounds differ from these by Monte Carlo error only.%s",
          i + 1, l->stored, tool, run ? "drafted token" : "generated position", run ? "drafted tokens" : "positions",
          l->has_dists ? " With full distributions the notebook also recomputes β from p and q (the stored floats summed in double)." : "");
    cellf(c, "code", "r = RESULTS[%zu] = analyze_log(LOGS[%zu])\nshow_alpha(r)", i, i);
    cellf(c, "markdown",
          "### Log %zu: the β histogram\n\nThe number of %s whose β falls in each of `HIST_BINS` equal bins of [0, 1] "
          "(bin k holds [k/B, (k+1)/B); β = 1 falls in the last), as `speclab analyze`'s `beta_histogram`. The red line "
          "is α. Log: `%s`, from `%s`.",
          i + 1, run ? "drafted tokens" : "positions", l->stored, tool);
    cellf(c, "code", "plot_hist(RESULTS[%zu])", i);
    if (l->has_dists) {
        cellf(c, "markdown",
              "### Log %zu: lenience curves\n\nThe lenient rule accepts a draft x with probability min(1, p(x) / (l "
              "q(x))) for a lenience l in (0, 1]; its acceptance is α(l) = Σ_x min(q(x), p(x)/l), averaged over "
              "positions (**standard form**; l = 1 gives α). At temperature 0 the draft proposes argmax q and the "
              "lenient check accepts it when p(argmax q) ≥ l · max p; α₀(l) is the fraction of positions where that "
              "holds (**temperature-0 form**). Both read the full distributions `/distributions/p` and `/q` "
              "(%s), in blocks. Log: `%s`, from `%s`.",
              i + 1, sl_log_dist_name(m->dist), l->stored, tool);
        cellf(c, "code", "show_lenience(RESULTS[%zu])", i);
    } else {
        cellf(c, "markdown",
              "### Log %zu: lenience curves\n\nNot available: %s. The lenience curves α(l) = mean Σ_x min(q(x), "
              "p(x)/l) and their temperature-0 form need the full distributions (`speclab measure --dist float32` or "
              "`float16`). Log: `%s`, from `%s`.",
              i + 1,
              run ? "a run log stores β per drafted token, not the distributions"
                  : "this log stores β per position only (`--dist none`)",
              l->stored, tool);
    }
    cellf(c, "markdown",
          "### Log %zu: expected tokens per iteration\n\nE[N] is the expected number of tokens one iteration of "
          "Algorithm 1 emits with γ drafts (the accepted drafts plus the token the target adds). **Equation 1** "
          "assumes every draft is accepted independently with probability α: E[N] = (1 − α^(γ+1)) / (1 − α). %s "
          "Log: `%s`, from `%s`.",
          i + 1,
          run ? "A run log has no replay (its drafts were not logged along one text); its observed tokens per "
                "iteration are in the run section below."
              : "The **window replay** uses the logged β sequences instead: for each γ, every start t with "
                "t + γ ≤ n in a sequence is a window, and E[N](γ) = mean over those windows of 1 + Σ_{k=1..γ} "
                "β_t ⋯ β_{t+k−1}. It keeps the dependence between neighbouring positions but starts an iteration at "
                "every position; `speclab analyze` also prints the exact sequential replay (its `sequential` column, "
                "THEORY.md §5.1), which starts each iteration where the previous one ended.",
          l->stored, tool);
    cellf(c, "code", "show_expected_tokens(RESULTS[%zu])", i);
    cellf(c, "markdown",
          "### Log %zu: walltime factor and optimal γ\n\nThe walltime factor E[N] / (γc + v(γ+1)) is the expected "
          "speedup over autoregressive decoding when a draft step costs c target steps and verifying γ + 1 tokens "
          "costs v(γ+1); with v ≡ 1, as here, it is Theorem 3.8: (1 − α^(γ+1)) / ((1 − α)(γc + 1)). The optimal γ "
          "is the smallest γ in 1..GAMMA_MAX whose factor is within 10⁻¹² (relative) of the largest, or 0 when no γ "
          "beats plain decoding (factor ≤ 1), as `sl_theory_optimal_gamma`; \"at the cap\" means a larger "
          "GAMMA_MAX might do better. Solid lines: Equation 1 at α; dashed: the replayed E[N]. Log: `%s`, from `%s`.",
          i + 1, l->stored, tool);
    cellf(c, "code", "show_optimal_gamma(RESULTS[%zu])", i);
    if (run) {
        cellf(c, "markdown",
              "### Log %zu: the run\n\n**α̂** = accepted / tested drafts, where the tested drafts of an iteration are "
              "the accepted ones and the first rejected one: it estimates α along the run's own texts (CI: bootstrap "
              "over sequences). The **acceptance rate** = accepted / drafted (vLLM's). **Tokens per iteration** = "
              "mean emitted, to compare with E[N] at α̂ = (1 − α̂^(γ+1)) / (1 − α̂). **c** = draft step / target step "
              "and **v(n)** = target call on n tokens / single-token call were measured by `speclab run` before "
              "decoding (`/costs`). The **observed speedup** = (autoregressive seconds per token) / (speculative "
              "seconds per token) over all prompts; next to it the predictions at α̂: Theorem 3.8 E[N] / (γc + 1) and "
              "the generalised E[N] / (γc + v(γ+1)), then the walltime factors and optimal γ with the measured c and "
              "v(n). Timings are those of the machine that ran `%s`. Log: `%s`.",
              i + 1, tool, l->stored);
        cellf(c, "code", "show_run(RESULTS[%zu])", i);
    }
}

int sl_notebook_build(const sl_notebook_config *cfg, char **text, size_t *n_cells)
{
    *text = NULL;
    if (cfg->n_logs == 0) return sl_fail(SL_EINPUT, "give at least one log");
    if (cfg->gamma_max < 1 || cfg->gamma_max > 64) return sl_fail(SL_EINPUT, "gamma_max: %zu is outside [1, 64]", cfg->gamma_max);
    if (cfg->n_hist_bins < 1 || cfg->n_hist_bins > 64)
        return sl_fail(SL_EINPUT, "hist_bins: %zu is outside [1, 64]", cfg->n_hist_bins);
    if (!(cfg->ci_level > 0 && cfg->ci_level < 1)) return sl_fail(SL_EINPUT, "ci_level: %g is outside (0, 1)", cfg->ci_level);
    if (!cfg->out || !cfg->out[0]) return sl_fail(SL_EINPUT, "out: no notebook path given");
    /* The notebook's folder, against which the logs' paths are made relative. */
    char *dup = strdup(cfg->out);
    if (!dup) return sl_fail(SL_EFAIL, "out of memory");
    char *slash = strrchr(dup, '/');
    const char *dir = slash ? (slash == dup ? "/" : (*slash = 0, dup)) : ".";
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        int rc = sl_fail(SL_EINPUT, "out: the folder %s of %s does not exist", dir, cfg->out);
        free(dup);
        return rc;
    }
    log_info *li = calloc(cfg->n_logs, sizeof *li);
    int rc = li ? SL_OK : sl_fail(SL_EFAIL, "out of memory");
    for (size_t i = 0; !rc && i < cfg->n_logs; i++) rc = read_info(cfg->logs[i], dir, &li[i]);
    if (rc) {
        free(li);
        free(dup);
        return rc;
    }
    nb_cells c = {json_object_new_array(), 0};
    title_cell(&c, cfg, li);
    settings_cells(&c, cfg, li);
    add_cell(&c, "markdown",
             "## Helpers\n\nLoading (h5py) and recomputation (numpy). Each function follows the definition of the "
             "speclab function named in its comment, so that the numbers can be compared with `speclab analyze`.");
    add_cell(&c, "code", HELPERS);
    for (size_t i = 0; i < cfg->n_logs; i++) log_cells(&c, i, &li[i]);
    add_cell(&c, "markdown",
             "## Summary for machines\n\nOne JSON line per log: α and its CI, the β histogram counts, the lenience "
             "curves, E[N] from Equation 1 and from the replay, the optimal γ per c, and for run logs the run's numbers "
             "(NaN is written as null). `tests/cli/notebook.py` compares them with `speclab analyze --format json`.");
    add_cell(&c, "code",
             "for r in RESULTS:\n    if r is not None:\n        print(json.dumps(summary(r), allow_nan=False))");

    json_object *nb = json_object_new_object();
    json_object_object_add(nb, "cells", c.cells);
    json_object *md = json_object_new_object(), *ks = json_object_new_object(), *lang = json_object_new_object(),
                *sl = json_object_new_object(), *logs = json_object_new_array();
    json_object_object_add(ks, "display_name", json_object_new_string("Python 3 (ipykernel)"));
    json_object_object_add(ks, "language", json_object_new_string("python"));
    json_object_object_add(ks, "name", json_object_new_string("python3"));
    json_object_object_add(lang, "name", json_object_new_string("python"));
    for (size_t i = 0; i < cfg->n_logs; i++) json_object_array_add(logs, json_object_new_string(li[i].stored));
    json_object_object_add(sl, "tool_version", json_object_new_string(SL_VERSION));
    json_object_object_add(sl, "logs", logs);
    json_object_object_add(md, "kernelspec", ks);
    json_object_object_add(md, "language_info", lang);
    json_object_object_add(md, "speclab", sl);
    json_object_object_add(nb, "metadata", md);
    json_object_object_add(nb, "nbformat", json_object_new_int(4));
    json_object_object_add(nb, "nbformat_minor", json_object_new_int(5));
    const char *s = json_object_to_json_string_ext(nb, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    *text = malloc(n + 2);
    if (*text) {
        memcpy(*text, s, n);
        (*text)[n] = '\n';
        (*text)[n + 1] = 0;
    } else {
        rc = sl_fail(SL_EFAIL, "out of memory");
    }
    if (n_cells) *n_cells = c.n;
    json_object_put(nb);
    free(li);
    free(dup);
    return rc;
}

int sl_notebook_write(const sl_notebook_config *cfg, sl_notebook_result *res)
{
    if (res) memset(res, 0, sizeof *res);
    if (!cfg->out) return sl_fail(SL_EINPUT, "out: no notebook path given");
    size_t ol = strlen(cfg->out);
    if (ol < 6 || strcmp(cfg->out + ol - 6, ".ipynb"))
        return sl_fail(SL_EINPUT, "out: %s does not end in .ipynb", cfg->out);
    struct stat st;
    if (!cfg->force && lstat(cfg->out, &st) == 0)
        return sl_fail(SL_EINPUT, "out: %s exists (replacing it needs force)", cfg->out);
    char *text = NULL;
    size_t n_cells = 0;
    int rc = sl_notebook_build(cfg, &text, &n_cells);
    if (rc) return rc;
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", cfg->out, (long)getpid()) >= sizeof tmp) {
        free(text);
        return sl_fail(SL_EINPUT, "out: path too long: %s", cfg->out);
    }
    size_t len = strlen(text);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = sl_fail(SL_EINPUT, "out: cannot create %s: %s", tmp, strerror(errno));
        free(text);
        return rc;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    int ok = done == len && fsync(fd) == 0;
    int err = errno;
    ok &= close(fd) == 0;
    free(text);
    if (!ok) {
        unlink(tmp);
        return sl_fail(SL_EFAIL, "out: writing %s failed: %s", tmp, strerror(err));
    }
    /* Without --force the rename must not replace a file that appeared meanwhile. */
    int moved = cfg->force ? rename(tmp, cfg->out) : renameat2(AT_FDCWD, tmp, AT_FDCWD, cfg->out, RENAME_NOREPLACE);
    if (moved != 0 && !cfg->force && errno == EINVAL) { /* a file system without RENAME_NOREPLACE */
        moved = link(tmp, cfg->out);
        if (moved == 0) unlink(tmp);
    }
    if (moved != 0) {
        err = errno;
        unlink(tmp);
        if (err == EEXIST) return sl_fail(SL_EINPUT, "out: %s exists (replacing it needs force)", cfg->out);
        return sl_fail(SL_EINPUT, "out: cannot rename %s to %s: %s", tmp, cfg->out, strerror(err));
    }
    /* The rename itself is made durable by syncing the folder (best effort). */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", cfg->out);
    char *slash = strrchr(dir, '/');
    if (slash) slash == dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (res) {
        res->n_cells = n_cells;
        res->bytes = len;
    }
    return SL_OK;
}
