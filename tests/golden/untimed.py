"""tests/golden/untimed.py FILE...: rewrites speclab outputs in place (text tables, CSV or JSON
reports, with a trailing "exit=N" line) so that every value that depends on the clock reads
"<timed>"; two captures of the same commands can then be diffed. A column or metric is timed when
its name matches TIMED below (seconds, rates, speedups, costs c and v(n), what is derived from them)."""
import json, re, sys

TIMED = re.compile(r"(^seconds$|_s$|_s_|per_s|speedup|walltime|factor|^c$|^v$|^c_|cost|^v_|vtab|predicted|"
                   r"latency|inside|in_ci|gamma_opt|gamma_best|recommend|cor39|improves|p50|p90|p99|^mean$|"
                   r"tokens_per_s|draft_s|verify_s|sample_s|^best|^opt|vs_best|_ci_lo$|_ci_hi$)")
NAMEKEYS = ("metric", "quantity", "name", "what")


def scrub_json(x):
    if isinstance(x, dict):
        timed_row = any(isinstance(v, str) and TIMED.search(v) for k, v in x.items() if k in NAMEKEYS) \
            or x.get("policy") == "oracle"  # the oracle's choices depend on the measured c
        return {k: ("<timed>" if TIMED.search(k) or (timed_row and k not in NAMEKEYS) else scrub_json(v))
                for k, v in x.items()}
    if isinstance(x, list):
        return [scrub_json(v) for v in x]
    return x


def scrub_lines(lines):
    out, header, sep = [], None, None
    for line in lines:
        if not line.strip() or line.startswith("#"):
            header = None
            out.append(line)
            continue
        cells = line.split(",") if sep == "," or (header is None and "," in line and "  " not in line) else line.split()
        if header is None:
            sep = "," if "," in line and "  " not in line else None
            header = cells
            out.append((", " if sep == "," else "  ").join(c.strip() for c in cells))
            continue
        if len(cells) == len(header):
            rowname = any(TIMED.search(c) for c in cells[:1]) or "oracle" in cells
            cells = ["<timed>" if TIMED.search(h) or (rowname and i > 0) else c for i, (h, c) in enumerate(zip(header, cells))]
            out.append((", " if sep == "," else "  ").join(cells))
        else:
            out.append(" ".join(line.split()))
    return out


for path in sys.argv[1:]:
    text = open(path, errors="surrogateescape").read()
    body, mark, tail = text.rpartition("exit=")
    if not mark:
        body, tail = text, ""
    try:
        new = json.dumps(scrub_json(json.loads(body)), indent=1, sort_keys=True) + "\n"
    except ValueError:
        new = "\n".join(scrub_lines(body.split("\n")))
    open(path, "w", errors="surrogateescape").write(new + (("exit=" + tail) if mark else ""))
