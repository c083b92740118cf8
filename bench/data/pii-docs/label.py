"""Apply the hand labels (labels.txt) to the sampled passages.

Usage: python label.py RAW.jsonl LABELS.txt OUT.jsonl
RAW.jsonl is sample.py output (entities empty). Regexes only PROPOSE emails, URLs and
dotted quads; every passage was read and labels.txt records the reading (see README.md).
"""
import json, re
EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][\w.+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
URL = re.compile(r"(?:https?|ftp|git|ssh|file)://[^\s<>\"'`\)\]\}|\\]+|(?<![\w./@-])www\.[^\s<>\"'`\)\]\}|\\]+")
IP4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
def propose(t):
    ents = []
    for m in URL.finditer(t):
        s, e = m.span()
        while e > s and t[e-1] in ".,;:!?'\"*_`>": e -= 1
        ents.append((s, e, "URL"))
    for m in EMAIL.finditer(t):
        s, e = m.span()
        if any(a <= s < b for a, b, _ in ents): continue
        ents.append((s, e, "EMAIL_ADDRESS"))
    for m in IP4.finditer(t):
        if all(int(x) <= 255 for x in m.group().split(".")):
            s, e = m.span()
            if any(a <= s < b for a, b, _ in ents): continue
            ents.append((s, e, "IP_ADDRESS"))
    return sorted(ents)

import json, re, sys
TYPES = {"P": "PERSON", "E": "EMAIL_ADDRESS", "U": "URL", "I": "IP_ADDRESS", "PH": "PHONE_NUMBER"}
L = [json.loads(l)["text"] for l in open(sys.argv[1])]
ops = {}
for line in open(sys.argv[2], encoding="utf-8"):
    line = line.rstrip("\n")
    if not line.strip() or line.startswith("//"): continue
    idx, rest = line.split(" ", 1) if " " in line else (line, "")
    ops.setdefault(int(idx), []).append(rest)

def find_all(t, s, word=True):
    toks = s.split(" ")
    pat = r"\s+".join(re.escape(x) for x in toks)
    if word: pat = r"(?<![\w])" + pat + r"(?![\w])"
    return [m.span() for m in re.finditer(pat, t)]

def overlaps(a, b, spans):
    return any(a < e and s < b for s, e, _ in spans)

problems = []
out = []
for i, t in enumerate(L):
    ents = propose(t)
    person = []
    for op in ops.get(i, []):
        kind, _, arg = op.partition(":")
        items = [x.strip() for x in arg.split(";") if x.strip()]
        kind = kind.strip()
        if kind.startswith("-"):            # drop proposed entities by exact text
            ty = TYPES[kind[1:]]
            for it in items:
                n0 = len(ents)
                ents = [x for x in ents if not (x[2] == ty and t[x[0]:x[1]] == it)]
                if len(ents) == n0: problems.append((i, "drop-miss", it))
        elif kind.startswith("+"):          # add all occurrences of a string
            ty = TYPES[kind[1:]]
            for it in items:
                sp = find_all(t, it, word=False)
                if not sp: problems.append((i, "add-miss", it))
                for s, e in sp:
                    if not overlaps(s, e, ents): ents.append((s, e, ty))
        elif kind.startswith("L"):          # list mode: each line is a person, name before ' <' / ' (' / end
            skip = set(x for x in items if not x.startswith("#"))
            maxl = next((int(x[1:]) for x in items if x.startswith("#")), None)
            pos = 0; nline = 0
            for ln in t.split("\n"):
                st = pos + len(ln) - len(ln.lstrip())
                name = ln.strip()
                pos += len(ln) + 1
                nline += 1
                if maxl is not None and nline > maxl: continue
                if not name or name in skip: continue
                m = re.match(r"[*-] +", name)
                if m:
                    st += m.end(); name = name[m.end():]
                name = re.split(r" \*\*| <| \(| -- | - |, | & |\s{2,}|\t", name)[0]
                name = name.rstrip(" ,")
                if not name or "@" in name or name.startswith("<"): continue
                person.append((st, st + len(name)))
        elif kind == "P":
            for it in items:
                sp = find_all(t, it)
                if not sp: problems.append((i, "person-miss", it))
                person.extend(sp)
        elif kind == "X":                  # remove person spans by text (after list mode)
            for it in items:
                person = [p for p in person if t[p[0]:p[1]] != it]
        else:
            problems.append((i, "bad-op", op))
    for s, e in sorted(set(person)):
        if overlaps(s, e, ents):
            continue   # inside an URL/email: the larger span wins
        ents.append((s, e, "PERSON"))
    ents.sort()
    out.append({"text": t, "entities": [{"start": s, "end": e, "type": ty} for s, e, ty in ents]})
for p in problems: print("PROBLEM", p)
with open(sys.argv[3], "w", encoding="utf-8") as f:
    for d in out: f.write(json.dumps(d, ensure_ascii=False) + "\n")
