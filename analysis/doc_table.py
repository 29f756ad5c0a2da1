#!/usr/bin/env python3
"""doc_table.py DOC.md CSV NAME [COL ...]: puts CSV (all columns, or the ones named) as a Markdown
table into DOC.md between the lines <!-- NAME begin --> and <!-- NAME end -->, so that the tables
of the documents come from the files the scripts regenerate. Exit 2 when the markers are missing."""
import csv, re, sys

if len(sys.argv) < 4:
    sys.exit("usage: doc_table.py DOC.md CSV NAME [COL ...]")
doc, path, name, cols = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = list(csv.DictReader(open(path)))
cols = cols or list(rows[0])
md = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
md += "".join("| " + " | ".join(r[c] for c in cols) + " |\n" for r in rows)
s = open(doc).read()
pat = re.compile(r"(<!-- %s begin -->\n).*?(<!-- %s end -->)" % (re.escape(name), re.escape(name)), re.S)
if not pat.search(s):
    print(f"{doc} has no <!-- {name} begin/end --> markers", file=sys.stderr)
    sys.exit(2)
open(doc, "w").write(pat.sub(lambda m: m.group(1) + md + m.group(2), s))
print(f"{doc}: table {name} updated from {path}")
