#!/usr/bin/python3
"""An external speculative sampler, written without speclab, whose output `speclab verify
--samples` tests (README.md, "Verify your own sampler"; analysis/SAMPLES.md, the CSV format).

It implements Algorithm 1 of Leviathan et al. (2023) for one fixed context-free pair over V
tokens, p(x) = (x + 1) / T and q(x) = (V - x) / T with T = V (V + 1) / 2, using only Python's
`random` with a seed (no numpy):

    draft x_1..x_gamma ~ q
    for i = 1..gamma: r_i ~ U(0, 1); accept x_i while r_i <= p(x_i) / q(x_i)
    n = the number accepted before the first rejection
    emit x_1..x_n, then t ~ norm(max(0, p - q)) if n < gamma, else the bonus t ~ p

and writes every emitted token as a CSV row `iteration,position,token,kind`.

--bug NAME plants one subtle, realistic mistake (each still emits plausible tokens, and each
leaves the acceptance rate of the first draft unchanged, so a speed-only benchmark would not see it):
  shared-uniform         one uniform r drawn per iteration and reused for every position's
                         accept test ("r is already random"). Position 1 is right; later positions
                         are accepted with probability min(1, a(x_i) / a(x_1)) instead of a(x_i),
                         so token_2..token_gamma and the bonus are off.
  unnormalised-residual  the residual max(0, p - q) is sampled by a hand-written inverse CDF that
                         forgets to divide by its sum (1 - beta): a uniform past that sum falls off
                         the end of the loop onto the last token. after_rejection is off.
  bonus-from-draft       the bonus token is drawn from the draft q (the draft model is the one at
                         hand in a pipelined implementation) instead of the target p. bonus is off.

Usage: external_sampler.py --vocab 4 --gamma 3 --iterations 20000 --seed 1 [--bug NAME]
       [--out FILE.csv] [--p-out p.txt --q-out q.txt]
"""
import argparse
import random
import sys

BUGS = ("none", "shared-uniform", "unnormalised-residual", "bonus-from-draft")


def pair(V):
    T = V * (V + 1) / 2
    p = [(x + 1) / T for x in range(V)]
    q = [(V - x) / T for x in range(V)]
    return p, q


def draw(w, u, normalise=True):
    """Inverse CDF of the weights w at u in [0, 1). With normalise=False the weights' sum is
    ignored (the unnormalised-residual bug): u beyond it runs off the end onto the last token."""
    total = sum(w) if normalise else 1.0
    c = 0.0
    last = len(w) - 1
    for x, wx in enumerate(w):
        if wx <= 0:
            continue
        c += wx / total
        last = x
        if u < c:
            return x
    return last if normalise else len(w) - 1  # normalised: rounding left u just above c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=4)
    ap.add_argument("--gamma", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bug", choices=BUGS, default="none")
    ap.add_argument("--out", default="-", help="CSV output (default stdout)")
    ap.add_argument("--p-out", help="write p here, one value per line (for speclab verify --p @FILE)")
    ap.add_argument("--q-out", help="write q here")
    a = ap.parse_args()
    if a.vocab < 2 or a.gamma < 1 or a.iterations < 1:
        ap.error("need --vocab >= 2, --gamma >= 1, --iterations >= 1")
    V, gamma, bug = a.vocab, a.gamma, a.bug
    p, q = pair(V)
    for path, v in ((a.p_out, p), (a.q_out, q)):
        if path:
            with open(path, "w") as f:
                f.write("".join(repr(x) + "\n" for x in v))  # repr: the exact double, read back by strtod
    residual = [max(0.0, px - qx) for px, qx in zip(p, q)]
    rng = random.Random(a.seed)
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    out.write("iteration,position,token,kind\n")
    for it in range(a.iterations):
        drafts = [draw(q, rng.random()) for _ in range(gamma)]
        shared = rng.random() if bug == "shared-uniform" else None
        n = 0
        for x in drafts:
            r = shared if shared is not None else rng.random()
            if r <= p[x] / q[x]:
                n += 1
            else:
                break
        for i in range(n):
            out.write(f"{it},{i + 1},{drafts[i]},accepted\n")
        if n < gamma:
            t = draw(residual, rng.random(), normalise=bug != "unnormalised-residual")
            out.write(f"{it},{n + 1},{t},resampled\n")
        else:
            t = draw(q if bug == "bonus-from-draft" else p, rng.random())
            out.write(f"{it},{gamma + 1},{t},bonus\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
