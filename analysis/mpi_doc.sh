#!/usr/bin/env bash
# mpi_doc.sh: puts the MPI measurements (analysis/*.csv, written by tests/bench/mpi_scaling.sh,
# verify_throughput.sh and verify_cost.py: the commands are in analysis/MPI.md) into the tables of
# analysis/MPI.md. Usage: bash analysis/mpi_doc.sh
set -eu
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 analysis/mpi_efficiency.py analysis/mpi_scaling_device.csv > "$T/dev16.csv"
python3 analysis/doc_table.py analysis/MPI.md "$T/dev16.csv" mpi_scaling_device
if [ -f analysis/mpi_scaling_dev.csv ]; then
  python3 analysis/mpi_efficiency.py analysis/mpi_scaling_dev.csv > "$T/dev2.csv"
  python3 analysis/doc_table.py analysis/MPI.md "$T/dev2.csv" mpi_scaling_dev
fi
C="nodes ranks tests level_per_test iterations per_rank_iterations_per_s fixed_s wall_s wall_h core_hours"
# shellcheck disable=SC2086
python3 analysis/doc_table.py analysis/MPI.md analysis/verify_cost_device.csv verify_cost_device $C
# shellcheck disable=SC2086
python3 analysis/doc_table.py analysis/MPI.md analysis/verify_models_cost_device.csv verify_models_cost_device $C
# MPI.md: the largest verification at Holm's level (first row of each node count), synthetic and
# with models.
python3 - "$T/cost.csv" <<'PY'
import csv, sys
rows = []
for what, path in [("synthetic noisy pair, V = 50257", "analysis/verify_cost_device.csv"),
                   ("models draft-s + draft-xxs, V = 4096", "analysis/verify_models_cost_device.csv")]:
    r = list(csv.DictReader(open(path)))
    m = r[0]["tests"]
    for x in r:
        if x["tests"] == m:
            rows.append([what, x["nodes"], x["ranks"], x["iterations"], x["per_rank_iterations_per_s"], x["wall_h"],
                         x["core_hours"]])
w = csv.writer(open(sys.argv[1], "w"), lineterminator="\n")
w.writerow(["verification (TV 0.001, power 0.9)", "nodes", "ranks", "samples", "per rank / s", "hours", "core-hours"])
w.writerows(rows)
PY
python3 analysis/doc_table.py analysis/MPI.md "$T/cost.csv" mpi_verify_cost
