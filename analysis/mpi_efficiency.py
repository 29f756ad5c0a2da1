#!/usr/bin/env python3
"""mpi_efficiency.py SCALING.csv [MACHINE]: the efficiency per rank count of a scaling CSV written
by tests/bench/mpi_scaling.sh (columns command,scaling,ranks,items,seconds,efficiency), one row
per (command, scaling) and one column per rank count, as CSV on stdout (for analysis/doc_table.py:
the README's table). MACHINE, when given, fills a first column naming where it was measured."""
import csv, sys

if len(sys.argv) < 2:
    sys.exit("usage: mpi_efficiency.py SCALING.csv [MACHINE]")
rows = list(csv.DictReader(open(sys.argv[1])))
ranks = sorted({int(r["ranks"]) for r in rows})
keys = []
for r in rows:
    k = (r["command"], r["scaling"])
    if k not in keys:
        keys.append(k)
eff = {(r["command"], r["scaling"], int(r["ranks"])): r["efficiency"] for r in rows}
w = csv.writer(sys.stdout, lineterminator="\n")
head = (["machine"] if len(sys.argv) > 2 else []) + ["command", "scaling"] + [f"{n} ranks" for n in ranks]
w.writerow(head)
for c, s in keys:
    w.writerow(([sys.argv[2]] if len(sys.argv) > 2 else []) + [c, s] + [eff.get((c, s, n), "") for n in ranks])
