"""Turn the hand-written label lists (labels.txt) into entity offsets.

Usage: python apply_labels.py PASSAGES.jsonl OUT.jsonl labels.txt

labels.txt has one line per passage: INDEX then groups `P:` PERSON, `L:` LOCATION,
`E:` EMAIL_ADDRESS, `T:` PHONE_NUMBER, `U:` URL, items separated by " ; ".
Every listed string was chosen by reading the passage; each is labelled at every
whole-word occurrence in that passage, longest strings first, never overlapping.
"""
import json, re, sys
TYPES = {"P": "PERSON", "L": "LOCATION", "E": "EMAIL_ADDRESS", "T": "PHONE_NUMBER", "U": "URL"}
ann = {}
for f in [sys.argv[3]]:
    for line in open(f, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        idx, _, rest = line.partition(" ")
        items, cur = [], None
        for tok in rest.split(" ; ") if rest else []:
            m = re.match(r"^([PLETU]): (.*)$", tok)
            if m:
                cur, tok = TYPES[m.group(1)], m.group(2)
            items.append((tok.strip(), cur))
        assert int(idx) not in ann, idx
        ann[int(idx)] = items
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
assert sorted(ann) == list(range(len(texts))), set(range(len(texts))) - set(ann)
out = []
problems = 0
for i, t in enumerate(texts):
    spans = []
    for s, ty in sorted(ann[i], key=lambda x: -len(x[0])):
        pat = (r"(?<![\w@.])" if s[0].isalnum() or s[0] in "'‘(" else "") + re.escape(s) + (r"(?![\w@])" if s[-1].isalnum() or s[-1] in ".)" else "")
        hits = [(m.start(), m.end()) for m in re.finditer(pat, t)]
        new = [h for h in hits if not any(h[0] < e and s0 < h[1] for s0, e, _ in spans)]
        if not new:
            print(f"!! {i}: {s!r} ({ty}) not found / all overlapped"); problems += 1
        spans += [(a, b, ty) for a, b in new]
    spans.sort()
    out.append({"text": t, "entities": [{"start": a, "end": b, "type": ty} for a, b, ty in spans]})
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for o in out:
        f.write(json.dumps(o, ensure_ascii=False) + "\n")
from collections import Counter
c = Counter(e["type"] for o in out for e in o["entities"])
print(c, "problems", problems)
