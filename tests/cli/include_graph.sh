#!/usr/bin/env bash
# include_graph.sh: the folder-level include graph of the C sources, checked against the layering of
# STYLE.md ("Folders show the flow"). Every `#include "..."` in sim/, analysis/, models/, data/,
# plots/ and notebooks_export/ (subfolders included: sim/cli/, models/train/, ...) is resolved to
# the file it names, as the compiler would find it (the including file's folder first, else the one
# file of that name in those folders), and gives an edge between the two files' folders. Fails, with
# one line per violation, when
#   (a) the folders form a cycle;
#   (b) the core, sim/ without sim/cli/, includes anything outside sim/;
#   (c) anything but sim/cli/ itself (and tests/, not scanned) includes from sim/cli/, the CLI.
# Prints every edge found. Exit 0 = pass.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOTS=(sim analysis models data plots notebooks_export)

declare -A by_name=()   # basename -> paths (space separated)
files=()
while IFS= read -r f; do
  files+=("$f")
  b=${f##*/}
  by_name[$b]="${by_name[$b]:-}${by_name[$b]:+ }$f"
done < <(find "${ROOTS[@]}" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)

declare -A edges=()     # "from to" -> number of includes
violations=0
violation() { echo "VIOLATION: $*"; violations=$((violations + 1)); }

# Resolves include name $2 of file $1; prints the path, or nothing when it is not in the tree.
resolve() {
  local dir=${1%/*} name=$2 cands
  if [ -f "$dir/$name" ]; then realpath -m --relative-to=. "$dir/$name"; return; fi
  if [[ $name == */* ]]; then [ -f "$name" ] && echo "$name"; return; fi
  cands=${by_name[$name]:-}
  if [[ $cands == *" "* ]]; then echo "AMBIGUOUS:$cands"; return; fi
  [ -n "$cands" ] && echo "$cands"
}

is_core() { [[ $1 == sim || ($1 == sim/* && $1 != sim/cli && $1 != sim/cli/*) ]]; }

for f in "${files[@]}"; do
  from=${f%/*}
  while IFS=: read -r line name; do
    to_file=$(resolve "$f" "$name")
    if [ -z "$to_file" ]; then continue; fi   # not ours (a system or third-party header)
    if [[ $to_file == AMBIGUOUS:* ]]; then
      violation "$f:$line: #include \"$name\" matches several files (${to_file#AMBIGUOUS:})"
      continue
    fi
    to=${to_file%/*}
    if is_core "$from" && [[ $to != sim && $to != sim/* ]]; then
      violation "$f:$line: the core (sim/) includes $to_file"
    fi
    if [[ ($to == sim/cli || $to == sim/cli/*) && $from != sim/cli && $from != sim/cli/* ]]; then
      violation "$f:$line: includes $to_file from the CLI (sim/cli/)"
    fi
    [ "$from" = "$to" ] && continue
    edges["$from $to"]=$(( ${edges["$from $to"]:-0} + 1 ))
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/^\([0-9]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1:\2/')
done

echo "include edges (folder -> folder: includes):"
while read -r a b; do echo "  $a -> $b: ${edges["$a $b"]}"; done < <(printf '%s\n' "${!edges[@]}" | LC_ALL=C sort)

# (a) Cycles: the folders that reach each other, found by closing the edge relation (a handful of
# folders, so Floyd-Warshall in bash is plenty).
nodes=$(for e in "${!edges[@]}"; do echo "${e% *}"; echo "${e#* }"; done | LC_ALL=C sort -u)
declare -A reach=()
for e in "${!edges[@]}"; do reach["$e"]=1; done
for k in $nodes; do
  for i in $nodes; do
    [ -n "${reach["$i $k"]:-}" ] || continue
    for j in $nodes; do
      [ -n "${reach["$k $j"]:-}" ] && reach["$i $j"]=1
    done
  done
done
declare -A reported=()
for i in $nodes; do
  [ -n "${reported[$i]:-}" ] && continue
  [ -n "${reach["$i $i"]:-}" ] || continue
  scc=$i
  for j in $nodes; do
    [ "$j" != "$i" ] && [ -n "${reach["$i $j"]:-}" ] && [ -n "${reach["$j $i"]:-}" ] && scc="$scc $j"
  done
  inner=""
  for a in $scc; do
    reported[$a]=1
    for b in $scc; do [ -n "${edges["$a $b"]:-}" ] && inner="$inner${inner:+, }$a -> $b"; done
  done
  violation "include cycle between folders {$scc}: $inner"
done

if [ "$violations" -gt 0 ]; then
  echo "include_graph: $violations violation(s)"
  exit 1
fi
echo "include_graph: ok (no cycle; sim/ includes only sim/; only sim/cli/ includes sim/cli/)"
