#!/usr/bin/env bash
# samples.sh: a few sampled texts from every shipped model, into FAMILY/samples.md (family_lib.sh).
# Each model samples alone: `speclab generate --target M --draft M --gamma 1` (draft = target, so
# every draft is accepted and the text is distributed exactly as M's own samples), temperature 1,
# seed 1, 64 tokens after two held-out prompts of each domain (lines PROMPTS of data/prompts/,
# escapes undone): four texts per model.
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${SPECLAB:-build/speclab}
. models/family/family_lib.sh
out=$FAMILY/samples.md
tmp=$out.tmp
N=64
PROMPTS=${PROMPTS:-3 7}
prompt() { head -n "$2" "data/prompts/$1.txt" | tail -n 1 | /usr/bin/python3 -c 'import sys; s=sys.stdin.read().rstrip("\n"); print(s.encode().decode("unicode_escape") if "\\n" in s else s, end="")'; }
{
  echo "# Samples from the shipped family"
  echo
  echo "Made by \`bash models/family/samples.sh\`: each model samples alone (\`speclab generate --target M"
  echo "--draft M --gamma 1\`, so the text is distributed as M's own samples), temperature 1, seed 1,"
  echo "$N tokens after a held-out prompt (\`data/prompts/\`, never in the training split). The prompt is"
  echo "shown once; the model's continuation follows it in each block."
  for d in prose code; do for k in $PROMPTS; do
    p=$(prompt "$d" "$k")
    echo
    echo "## $d, prompt $k"
    echo
    echo "Prompt:"
    echo
    echo '```'
    printf '%s\n' "$p"
    echo '```'
    for m in $(family_models | sed "s|^|$FAMILY/|") models/drafts/bigram models/drafts/unigram; do
      echo
      echo "**$(basename "$m")**:"
      echo
      echo '```'
      "$S" generate --target "$m.safetensors" --draft "$m.safetensors" --gamma 1 --prompt "$p" \
        --tokens $N --seed 1 --eos -1 | awk '/^# acceptance/ {exit} {print}' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
      echo '```'
    done
  done; done
} > "$tmp"
mv "$tmp" "$out"
echo "wrote $out"
