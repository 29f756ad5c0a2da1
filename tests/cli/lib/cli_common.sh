# cli_common.sh, sourced by the CLI test scripts in tests/cli/ (this folder is not run as a test):
# S (the speclab binary), T (a temporary folder removed at exit), fail (0 until a check fails),
# ok/bad NAME (report a check), expect_2 NAME PATTERN ARGS... (speclab ARGS exits 2 with exactly
# one line on stderr matching PATTERN).
S=${SPECLAB:-build/speclab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
expect_2() {
  local name=$1 pat=$2; shift 2
  "$S" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -- "$pat" "$T/err"; then ok "$name"
  else bad "$name (rc=$rc): $(cat "$T/err")"; fi
}
