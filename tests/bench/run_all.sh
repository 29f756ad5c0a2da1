#!/usr/bin/env bash
# Runs every benchmark in build/bench/ and every tests/bench/*.sh; each prints its own ratios and one line
#   TARGET NAME value=V target=OPT unit=U MET|MISSED        (OP: >=, <=, > or <)
# per target it checks. The TARGET lines of all of them are collected into tests/bench/results.json
# (machine, threads, revision, date, each figure with its target) and summarised at the end.
#   bash tests/bench/run_all.sh                  run everything (what `make bench` does)
#   bash tests/bench/run_all.sh --collect LOG... only collect: results.json from saved outputs
# RESULTS=FILE writes elsewhere. mpi_scaling.sh is not run here: it takes its own arguments
# (OUT.csv RANKS...) and is the MPI machine's benchmark (analysis/MPI.md).
set -u
cd "$(dirname "$0")/../.."
RESULTS=${RESULTS:-tests/bench/results.json}
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
status=0
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

collect() {
  /usr/bin/python3 - "$RESULTS" "$load_start" "$@" <<'PY'
import datetime, json, os, re, subprocess, sys
out, load_start, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
LINE = re.compile(r"^TARGET (\S+) value=(\S+) target=(>=|<=|>|<)(\S+) unit=(\S+) (MET|MISSED)\s*$")
figures, bad = [], 0
for log in logs:
    bench = os.path.basename(log)[:-len(".log")] if log.endswith(".log") else os.path.basename(log)
    with open(log, errors="replace") as f:
        for line in f:
            if not line.startswith("TARGET "):
                continue
            m = LINE.match(line)
            if not m:
                print(f"run_all: malformed TARGET line in {log}: {line.rstrip()}")
                bad += 1
                continue
            name, v, op, t, unit, verdict = m.groups()
            th = re.search(r"\.t(\d+)(\.|$)", name)
            figures.append({"benchmark": bench, "name": name, "value": float(v), "op": op, "target": float(t),
                            "unit": unit, "met": verdict == "MET",
                            "threads": int(th.group(1)) if th else None})


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def mem_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def git(*a):
    r = subprocess.run(["git", *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


with open("/proc/loadavg") as f:
    load_end = " ".join(f.read().split()[:3])
if not load_start:  # --collect: the outputs were made earlier; the load now says nothing about them
    load_end = None
res = {
    "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": mem_gib(), "load_average_start": load_start or None,
                "load_average_end": load_end},
    "threads": {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                "note": "each benchmark sets its own thread counts; a figure's threads come from its name (.tN)"},
    "revision": git("describe", "--always", "--dirty"),
    "collected_from_saved_outputs": not load_start,
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "benchmarks": [os.path.basename(x)[:-4] if x.endswith(".log") else os.path.basename(x) for x in logs],
    "figures": figures,
    "met": sum(f["met"] for f in figures), "missed": sum(not f["met"] for f in figures),
}
with open(out + ".tmp", "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"\n== targets ({res['met']} MET, {res['missed']} MISSED; {out}) ==")
for x in figures:
    print(f"  {'MET   ' if x['met'] else 'MISSED'} {x['name']:50s} {x['value']:10.4g} {x['unit']:3s} (target {x['op']} {x['target']:g})")
sys.exit(1 if bad else 0)
PY
}

if [ "${1:-}" = --collect ]; then
  shift
  load_start=
  collect "$@"
  exit $?
fi

run() { # NAME COMMAND...: runs it with its output shown and kept in $LOGS/NAME.log
  echo "== $1 =="
  local name=$1
  shift
  "$@" 2>&1 | tee "$LOGS/$name.log"
  return "${PIPESTATUS[0]}"
}

for b in "${BUILD:-build}"/bench/*; do
  [ -x "$b" ] || continue
  if [ "$(basename "$b")" = train_gpu_check ]; then
    echo "== $(basename "$b") =="
    # The GPU backend against the CPU trainer: only where `make cuda` built the library.
    lib=${SL_CUDA_LIB:-${BUILD:-build}/libsl_train_cuda.so}
    if [ -f "$lib" ]; then SL_CUDA_LIB=$lib "$b" cuda || status=1
    else echo "skipped: no $lib (make cuda, where nvcc and a GPU exist)"; fi
    continue
  fi
  run "$(basename "$b")" "$b" || status=1
done
for s in tests/bench/*.sh; do
  [ -e "$s" ] || continue
  case "$(basename "$s")" in
    run_all.sh) continue ;;
    mpi_scaling.sh) echo "== $s == skipped: run it by hand with OUT.csv RANKS... (analysis/MPI.md)"; continue ;;
    phase_sweep.sh) echo "== $s == skipped: run it by hand (models/README.md, ~5 min)"; continue ;;
    gpu_bundle.sh) echo "== $s == skipped: not a benchmark (it packs a trip to the GPU machine: models/GPU_INFERENCE.md)"; continue ;;
  esac
  run "$(basename "$s" .sh)" bash "$s" || status=1
done
collect "$LOGS"/*.log || status=1
exit $status
