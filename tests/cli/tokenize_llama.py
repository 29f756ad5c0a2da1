#!/usr/bin/python3
"""Our sp-bpe tokenizer (models/sl_tok_sp.c) against llama's reference tokenizer in JavaScript.

The peer is the npm package llama-tokenizer-js (belladoreai, pinned below), installed into build/npm
(git-ignored). It ships the 32000-piece Llama (1/2) vocabulary and the merges list of Hugging Face's
tokenizer.json, and encodes with a priority queue over merges ("left right" -> priority = position
in that list, lower first; equal merges left to right). We dump its vocabulary and merges from node,
build the equivalent sp-bpe JSON (models/sl_tok.h), and require, through the CLI
(`speclab tokenize encode --tokenizer FILE --jsonl`), identical ids on a few hundred varied strings,
and (`speclab tokenize decode`) decode(ids) == the peer's decode(ids) == the string. Exact equality
is the only tolerance: tokenization is discrete.

Why scores can stand for merge priorities (checked below, the test fails if a premise is false):
- SPM merges an adjacent pair when the concatenation is a piece; the peer when "a b" is in its
  merges. The sets agree: every merge's parts and result are normal pieces, and every split of a
  normal piece into two pieces is a merge (HF's converter lists all of them).
- The merges list is sorted by result: all merges of one result piece are consecutive, except for
  a final block of merges that produce only runs of '▁' (the 15 pieces '▁'*2 .. '▁'*16, which
  llama's SentencePiece model gives the same lowest score), ending with the merge '▁ ▁'.
  So score(piece) = -(index of its block) ranks every other piece exactly as the peer does.
  Between two merges of the same piece the peer goes by merge index, SPM leftmost first; the two
  agree unless two different splits of one piece are candidates at once, which the strings here
  do not produce (any such case would show up as a mismatch).
- The '▁'-run pieces all get score -1e9, below every other. In the peer, '▁ ▁' is the last merge,
  so a run of spaces starts merging only when nothing else can, leftmost first, and then the
  growing run absorbs the next '▁' (every '▁'*k + '▁' merge, k < 16, ranks above '▁ ▁') until it
  is 16 long; SPM with equal scores merges the leftmost candidate, which is that same pair. Both
  give runs of 16 from the left.
Flags: the peer's encode(s) defaults to add_bos_token=true, add_preceding_space=true, so the JSON
has add_bos and add_dummy_prefix true (and byte_fallback: characters not in the vocabulary become
<0xXX> pieces in both). One documented difference: for the empty string the peer returns [] while
llama.cpp and SentencePiece give [BOS]; we follow llama.cpp and check that case separately.
The same strings are compared again with the peer's flags off (encode(s, false, false)) against a
copy of the JSON with add_bos and add_dummy_prefix false. Damaged copies of the JSON must make
`speclab tokenize encode` exit 2 with one line.

Skips (exit 0 with a SKIP line) only when npm cannot install the package (no registry) or node
is missing.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from test_tokenize_gpt2 import unescape  # data/prompts escapes, one reader for the peer tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
SPECLAB = os.environ.get("SPECLAB", "build/speclab")
NPM_DIR = os.path.join("build", "npm", "llama-tokenizer")  # its own prefix: an npm install --no-save
# into a shared prefix removes the packages that command did not name (gpt-3-encoder, ...)
PKG = "llama-tokenizer-js@1.2.2"
PEER_JS = os.path.abspath(os.path.join(NPM_DIR, "node_modules", "llama-tokenizer-js", "llama-tokenizer.js"))
SPACE = "\u2581"


def install():
    if not shutil.which("node") or not shutil.which("npm"):
        print("SKIP: node/npm not available")
        return False
    if os.path.exists(PEER_JS):
        return True
    os.makedirs(NPM_DIR, exist_ok=True)
    try:
        r = subprocess.run(["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund", "--no-save", PKG],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"SKIP: npm could not install {PKG}: {e}")
        return False
    if r.returncode != 0 or not os.path.exists(PEER_JS):
        print(f"SKIP: npm could not install {PKG} (registry unreachable?): {r.stderr.strip()[-300:]}")
        return False
    return True


def node(script, *args):
    r = subprocess.run(["node", "--input-type=module", "-e", script, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: node exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


DUMP_JS = f"""
import tok from {json.dumps('file://' + PEER_JS)};
const merges = [...tok.merges.entries()].sort((a, b) => a[1] - b[1]).map(e => e[0]);
process.stdout.write(JSON.stringify({{vocab: tok.vocabById, merges}}));
"""

# Each line of argv[1] is a JSON string; prints {"ids": encode(s), "dec": decode(ids)} per line, with
# both flags (add_bos_token, add_preceding_space) = argv[2] == '1'.
ENCODE_JS = f"""
import tok from {json.dumps('file://' + PEER_JS)};
import fs from 'fs';
const out = [];
for (const l of fs.readFileSync(process.argv[1], 'utf8').split('\\n')) {{
  if (!l) continue;
  const f = process.argv[2] === '1';
  const ids = tok.encode(JSON.parse(l), f, f);
  out.push(JSON.stringify({{ids, dec: tok.decode(ids, f, f)}}));
}}
process.stdout.write(out.join('\\n') + '\\n');
"""


def build_json(vocab, merges):
    """The sp-bpe JSON equivalent to the peer; fails (SystemExit) when a premise of the docstring's
    argument does not hold for the shipped data."""
    n = len(vocab)
    index = {p: i for i, p in enumerate(vocab)}
    if n != 32000 or len(index) != n:
        raise SystemExit(f"FAIL: expected 32000 distinct pieces, got {n} ({len(index)} distinct)")
    types = []
    for i, p in enumerate(vocab):
        if p == "<unk>":
            types.append(2)
        elif p in ("<s>", "</s>"):
            types.append(3)
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            types.append(6)
        else:
            types.append(1)
    if index["<unk>"] != 0 or index["<s>"] != 1 or index["</s>"] != 2 or types.count(6) != 256:
        raise SystemExit("FAIL: unexpected special or byte pieces in the peer's vocabulary")
    # Premise 1: merges = the splits of normal pieces into two normal pieces.
    results = []
    mset = set(merges)
    for k, m in enumerate(merges):
        a, b = m.split(" ")
        r = a + b
        if a not in index or b not in index or r not in index or \
                types[index[a]] != 1 or types[index[b]] != 1 or types[index[r]] != 1:
            raise SystemExit(f"FAIL: merge {k} {m!r} is not two normal pieces making a normal piece")
        results.append(r)
    for p in vocab:
        if types[index[p]] != 1:
            continue
        cps = list(p)
        for j in range(1, len(cps)):
            a, b = "".join(cps[:j]), "".join(cps[j:])
            if a in index and b in index and types[index[a]] == 1 and types[index[b]] == 1 and f"{a} {b}" not in mset:
                raise SystemExit(f"FAIL: piece {p!r} splits into {a!r} + {b!r}, which is not a merge")
    # Premise 2: blocks by result, then a tail of '▁'-runs ending with '▁ ▁'.
    tail = len(results)
    while tail > 0 and set(results[tail - 1]) == {SPACE}:
        tail -= 1
    if merges[-1] != f"{SPACE} {SPACE}":
        raise SystemExit(f"FAIL: the last merge is {merges[-1]!r}, not '▁ ▁'")
    score = [0.0] * n
    seen, block = set(), -1
    for k in range(tail):
        r = results[k]
        if set(r) == {SPACE}:
            raise SystemExit(f"FAIL: merge {k} makes a run of '▁' before the final block")
        if k == 0 or r != results[k - 1]:
            if r in seen:
                raise SystemExit(f"FAIL: the merges of {r!r} are not consecutive (merge {k})")
            seen.add(r)
            block += 1
            score[index[r]] = float(-block)
    tail_pieces = set(results[tail:])
    if any(r in seen for r in tail_pieces):
        raise SystemExit("FAIL: a '▁'-run piece also has merges before the final block")
    for r in tail_pieces:
        score[index[r]] = -1e9
    for r in tail_pieces:
        if len(r) < 16 and f"{r} {SPACE}" not in mset:
            raise SystemExit(f"FAIL: no merge {r!r} + '▁' in the final block")
    return {"type": "sp-bpe", "pieces": vocab, "scores": score, "types": types, "bos": 1, "eos": 2, "unk": 0,
            "add_bos": True, "add_eos": False, "add_dummy_prefix": True, "byte_fallback": True}, block + 1, len(tail_pieces)


def cases():
    rng = random.Random(20261127)
    out = []
    for dom in ("prose", "code"):
        with open(f"data/prompts/{dom}.txt", encoding="utf-8") as f:
            lines = [unescape(l.rstrip("\n")) for l in f]
        out += rng.sample(lines, 60)
    alphabets = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿÀÉÎÕÜß",
        "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΩ",
        "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГД",
        "日本語の文章です漢字かなカタカナ中文测试",
        "한국어텍스트",
        "مرحبا بالعالم",
        "שלום עולם",
        "नमस्ते दुनिया०१२३",
        "ภาษาไทย",
        "😀😃🎉👍🏽🚀❤️‍🔥🦙",
        "0123456789٠١٢٣４５６",
        "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~—–…€£¥©®°±",
        " \t\n\r\u00a0\u2003\u3000\u2028",
        "e\u0301a\u0308n\u0303",
        # Characters that are not pieces: byte fallback (checked below to be outside the vocabulary).
        "\U00010348\U0001f9ec\u2ffb\U0001d11e\u0f3a\ua8e0",
    ]
    for k in range(90):
        n = rng.randint(1, 40)
        pools = rng.sample(alphabets, rng.randint(1, 4))
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
    ws = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "   \n", " \t ", "\u00a0", "\u3000"]
    for k in range(50):
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(ws) * rng.randint(1, 6))
            if rng.random() < 0.7:
                parts.append(rng.choice(["word", "x", "Hello", "42", "é", "(", "foo.bar", "日本", "grabbed"]))
        out.append("".join(parts))
    for k in range(30):
        r = rng.random()
        if r < 0.3:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 30))))
        elif r < 0.6:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f} and {rng.randint(1, 999):,}")
        else:
            out.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)} 0x{rng.getrandbits(32):x}")
    code = ["def f(x):\n    return x * 2\n", "int main(void) {\n\treturn 0;\n}\n", "for (i = 0; i < n; i++) a[i] += b[i];",
            "    if x == 1:\n        pass\n", "<html><body class=\"x\">&amp;</body></html>", "SELECT * FROM t WHERE id = 42;",
            "λx. x + 1 ≤ 2 → ∀y ∈ ℝ", "{\"key\": [1, 2.5e-3, null, true]}"]
    out += code
    # The peer's own regression cases, and runs of spaces around and inside words.
    out += ["grabbed", " grabbed", "           grabbed", "\n", " \n", "	tabs				out here",
            "ax\n####\nboo", "镇", "🦙", "🦙Ꙋ", "Ꙋ🦙", "The llama (/ˈlɑːmə/; 🦙Spanish pronunciation: [ˈʎama])",
            " ", "  ", " " * 16, " " * 17, " " * 33 + "x", "x" + " " * 40, "a  b   c    d", " \t \t ", "\t", "\n\n\n"]
    out += ["a" * 300, "ab" * 200, " " * 500 + "x", "9" * 257, "Supercalifragilisticexpialidocious" * 5,
            "=" * 120 + "\n" + "-" * 120, " ".join(rng.choice(["the", "of", "llama", "speculative", "decoding", "x"])
                                                   for _ in range(2000))]
    out.append("")
    return out


def main():
    if not install():
        return 0
    t0 = time.time()
    d = json.loads(node(DUMP_JS))
    tokj, n_blocks, n_tail = build_json(d["vocab"], d["merges"])
    pieces = set(d["vocab"])
    for ch in "\U00010348\U0001f9ec\u2ffb\U0001d11e\u0f3a\ua8e0":
        if ch in pieces:
            raise SystemExit(f"FAIL: {ch!r} was meant to be outside the vocabulary (byte fallback)")
    tmp = tempfile.mkdtemp(prefix="tokllama.")
    try:
        tok_path = os.path.join(tmp, "llama.json")
        with open(tok_path, "w", encoding="utf-8") as f:
            json.dump(tokj, f, ensure_ascii=False)
        strs = cases()
        cases_path = os.path.join(tmp, "cases.jsonl")
        with open(cases_path, "w", encoding="utf-8") as f:
            for s in strs:
                f.write(json.dumps(s, ensure_ascii=True) + "\n")
        ref = [json.loads(l) for l in node(ENCODE_JS, cases_path, "1").split("\n") if l]
        ours = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", tok_path, "--jsonl", "--in", cases_path],
                              capture_output=True, text=True)
        if ours.returncode != 0:
            print(f"FAIL: speclab tokenize encode --jsonl exited {ours.returncode}: {ours.stderr}")
            return 1
        our_lines = ours.stdout.split("\n")[: len(strs)]
        if len(ref) != len(strs) or len(our_lines) != len(strs):
            print(f"FAIL: line counts {len(ref)} / {len(our_lines)} for {len(strs)} strings")
            return 1
        bad = 0
        for s, r, o in zip(strs, ref, our_lines):
            want = " ".join(map(str, r["ids"])) if s else "1"  # the empty-string difference (docstring)
            if s == "" and r["ids"] != []:
                print(f"FAIL: the peer now encodes '' as {r['ids']}; update this test")
                bad += 1
            if o != want:
                bad += 1
                if bad <= 5:
                    print(f"MISMATCH on {s[:200]!r}:\n  llama-tokenizer-js: {want}\n  speclab:            {o}")
        # Decoding, through the CLI: all non-empty strings' ids in one file (one process), which must
        # decode to the strings joined by single spaces (BOS is skipped wherever it is; each string's
        # dummy-prefix space stays, except the very first); then every 16th string on its own, which
        # must decode to the string exactly (its leading space dropped). The peer's decode of each
        # string's ids must be the string too.
        dbad, n_dec = 0, 0
        ids_path = os.path.join(tmp, "ids.txt")
        nonempty = [(s, r) for s, r in zip(strs, ref) if s]
        with open(ids_path, "w") as f:
            f.write(" ".join(" ".join(map(str, r["ids"])) for _, r in nonempty) + "\n")
        dd = subprocess.run([SPECLAB, "tokenize", "decode", "--tokenizer", tok_path, "--in", ids_path],
                            capture_output=True)
        joined = " ".join(s for s, _ in nonempty).encode("utf-8")
        if dd.returncode != 0 or dd.stdout != joined:
            dbad += 1
            k = next((i for i in range(min(len(joined), len(dd.stdout))) if joined[i] != dd.stdout[i]), None)
            print(f"DECODE MISMATCH on all strings joined (rc {dd.returncode}, {len(dd.stdout)} vs {len(joined)} "
                  f"bytes, first difference at byte {k}): {dd.stderr[-300:]!r}")
        for s, r in nonempty:
            if r["dec"] != s:
                dbad += 1
                print(f"PEER DECODE differs from the string on {s[:100]!r}: {r['dec'][:100]!r}")
        for s, r in nonempty[::16]:
            n_dec += 1
            with open(ids_path, "w") as f:
                f.write(" ".join(map(str, r["ids"])) + "\n")
            dd = subprocess.run([SPECLAB, "tokenize", "decode", "--tokenizer", tok_path, "--in", ids_path],
                                capture_output=True)
            if dd.returncode != 0 or dd.stdout != s.encode("utf-8"):
                dbad += 1
                if dbad <= 5:
                    print(f"DECODE MISMATCH on {s[:100]!r}: speclab {dd.stdout[:100]!r} (rc {dd.returncode})")
        # The peer's flags off (no BOS, no preceding space) against add_bos = add_dummy_prefix = false:
        # ids and decode again, the empty string included (both give []).
        tok0_path = os.path.join(tmp, "llama_noprefix.json")
        with open(tok0_path, "w", encoding="utf-8") as f:
            json.dump(dict(tokj, add_bos=False, add_dummy_prefix=False), f, ensure_ascii=False)
        ref0 = [json.loads(l) for l in node(ENCODE_JS, cases_path, "0").split("\n") if l]
        ours0 = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", tok0_path, "--jsonl", "--in", cases_path],
                               capture_output=True, text=True)
        lines0 = ours0.stdout.split("\n")[: len(strs)]
        bad0 = int(ours0.returncode != 0 or len(ref0) != len(strs) or len(lines0) != len(strs))
        for s, r, o in zip(strs, ref0, lines0):
            if o != " ".join(map(str, r["ids"])) or r["dec"] != s:
                bad0 += 1
                if bad0 <= 5:
                    print(f"MISMATCH (no BOS, no prefix) on {s[:200]!r}:\n  llama-tokenizer-js: {r['ids']} "
                          f"(decodes to {r['dec'][:100]!r})\n  speclab:            {o}")
        with open(ids_path, "w") as f:
            f.write(" ".join(" ".join(map(str, r["ids"])) for r in ref0) + "\n")
        dd = subprocess.run([SPECLAB, "tokenize", "decode", "--tokenizer", tok0_path, "--in", ids_path],
                            capture_output=True)
        if dd.returncode != 0 or dd.stdout != "".join(strs).encode("utf-8"):
            bad0 += 1
            print(f"DECODE MISMATCH (no BOS, no prefix) on all strings concatenated (rc {dd.returncode})")
        # Damaged copies of the same JSON: exit 2 with one line naming the file and the entry.
        for name, damage, frag in [
                ("duplicate", lambda j: j.replace('"<0x05>"', '"<0x04>"', 1).encode(), "are the same text"),
                ("bad utf-8", lambda j: j.replace('"<0x05>"', '"<0x05>\udcff"', 1).encode("utf-8", "surrogateescape"),
                 "not valid UTF-8"),
                ("short scores", lambda j: j.replace('"scores": [0.0, ', '"scores": [', 1).encode(), "entries")]:
            with open(tok_path, encoding="utf-8") as f:
                text = f.read()
            bad_path = os.path.join(tmp, "bad.json")
            with open(bad_path, "wb") as f:
                f.write(damage(text))
            r = subprocess.run([SPECLAB, "tokenize", "encode", "--tokenizer", bad_path, "--in", cases_path],
                               capture_output=True, text=True, errors="replace")
            if r.returncode != 2 or frag not in r.stderr or bad_path not in r.stderr or r.stderr.strip().count("\n"):
                print(f"FAIL: damaged tokenizer ({name}): exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}")
                dbad += 1
        n_tok = sum(len(r["ids"]) for r in ref)
        print(f"llama comparison ({PKG}, {len(d['vocab'])} pieces, {len(d['merges'])} merges -> {n_blocks} score "
              f"blocks + {n_tail} '▁'-run pieces at -1e9): {len(strs) - bad}/{len(strs)} strings ({n_tok} tokens) "
              f"encode identically; decode mismatches {dbad} (all {len(nonempty)} joined, "
              f"{n_dec} alone, the peer's {len(nonempty)}); without BOS and dummy prefix: "
              f"{len(strs) - bad0}/{len(strs)} identical and decoded back; {time.time() - t0:.1f} s")
        return 1 if bad or dbad or bad0 else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
