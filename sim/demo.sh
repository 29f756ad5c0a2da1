#!/usr/bin/env bash
# make demo: the main job. Grows with each issue; each step says what it shows.
set -euo pipefail
S=${SPECLAB:-build/speclab}
echo "== speclab demo =="
"$S" --help
