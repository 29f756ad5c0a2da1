#!/usr/bin/env bash
# tests/fuzz/summarize.sh: the README table from libFuzzer's own logs (build/fuzz/logs/NAME.log,
# written by run.sh): keeps the last lines of each log in tests/fuzz/logs/NAME.log and prints one
# markdown row per harness: seconds, executions, final cov and ft, corpus files, crashes.
# Usage: bash tests/fuzz/summarize.sh [NAME...]
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p tests/fuzz/logs
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in build/fuzz/logs/*.log; do n=$(basename "$f" .log); [[ $n == *.merge ]] || names+=("$n"); done
fi
echo "| harness | seconds | executions | cov | ft | corpus files (KiB) | crashes |"
echo "|---|---|---|---|---|---|---|"
for n in "${names[@]}"; do
    log=build/fuzz/logs/$n.log
    [ -f "$log" ] || continue
    { grep -E '^INFO: Seed|^INFO: seed corpus' "$log" | head -2; grep -E '^#[0-9]+' "$log" | tail -4;
      grep -E '==ERROR|ERROR: libFuzzer|runtime error|deadly signal|^stat::|^Done|SUMMARY' "$log"; } > tests/fuzz/logs/$n.log
    secs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 | grep -oE '[0-9]+ second' | cut -d' ' -f1)
    # A run stopped by a finding prints no Done line: executions / executions per second, about.
    avg=$(grep -oE '^stat::average_exec_per_sec: +[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
    execs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    [ -n "$secs" ] || { [ -n "$execs" ] && [ "${avg:-0}" -gt 0 ] && secs="~$((execs / avg))"; }
    last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | cut -d' ' -f2)
    ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | cut -d' ' -f2)
    crashes=$(grep -cE '==ERROR|ERROR: libFuzzer|runtime error:|deadly signal' "$log")
    c=${n%%.*} # model.run1.log: an earlier run of harness model, stopped by its finding
    files=$(find tests/fuzz/corpus/$c -type f | wc -l)
    kib=$(du -sk tests/fuzz/corpus/$c | cut -f1)
    echo "| $n | ${secs:-?} | ${execs:-?} | ${cov:-?} | ${ft:-?} | $files ($kib) | $crashes |"
done
