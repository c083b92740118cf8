"""Technical tokens for the keyword channel: identifiers matched whole and by their parts.

fastembed's BM25 (`ingest.embedder.embedding`) lowercases a text and splits it at every character
that is not a word character (letters, digits, `_`). An identifier such as
`CVE-2023-50387`, `--prune=now`, `core.untrackedCache`, `gpg.fail` or `1:9.0p1-1` reaches
the index only as its parts (`cve`, `2023`, `50387`), each far commoner than the
identifier, so a passage holding the identifier scores no higher than one holding its
parts apart; and a camelCase or snake_case name (`RequiredRSASize`, `metadata_csum_seed`)
reaches it only whole, so a question naming a part of it never matches.

`keyword_text` adds what the split loses, as extra words after the text, which the same
BM25 then counts like any other:

- an identifier whose word characters are separated by `.` `:` `/` `-` `+` `~` `=` `#`
  `@` or `_` adds its parts joined by `_` (a word BM25 keeps whole: `cve_2023_50387`,
  `core_untrackedcache`), and the same for each of its segments at the coarser
  separators (`1:9.0p1-1` adds `1_9_0p1_1`, `9_0p1_1` and `9_0p1`; `a.b=c` adds `a_b_c`
  and `a_b`);
- a snake_case name adds its parts (`metadata`, `csum`, `seed`) and a camelCase one its
  humps (`required`, `rsa`, `size`).

Questions and passages go through the same function, so an identifier in a question
matches a passage holding it exactly through its joined word (rare, so weighed high by
the IDF), and one holding its parts apart through the parts alone. Prose without such
tokens is returned unchanged.

In a question (`question_weights`) the added words weigh `ADDED_WEIGHT`, its own words
1: an identifier held whole still lifts a passage well above one holding its parts apart
(a joined form is rare, its IDF high), while the floors' statistics, which ask which of
the question's words a passage or the KB holds (`gateway.retrieval.answering`), count its
own words only (`is_own_word`): a question's "dark-mode", written "dark mode" in the KB,
is no word the KB lacks.

A stored text's weights (`term_weights`) count the added words like the words they were
read from, but not in its length: BM25 normalises a term's weight by the text's length,
and a text full of identifiers is no longer for being read two ways (Lucene's BM25 leaves
tokens at the position of another out of the length the same way). A passage holding a
rare option once then keeps the weight it had, rather than losing some to its joined
forms.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ingest.index import SparseVector

if TYPE_CHECKING:
    from fastembed.sparse.bm25 import Bm25

#: Bump when what `keyword_text` adds changes: stored keyword vectors are then made again
#: (`ingest.sync` puts it in each document's version).
KEYWORD_ANALYSIS_VERSION = 1
#: A question's weight of a word `added_terms` found in it (its own words weigh 1).
ADDED_WEIGHT = 0.5
#: Separators inside one identifier, coarsest first: each level's segments are joined
#: again (`1:9.0p1-1` → `9.0p1-1` → `9.0p1`).
_LEVELS = ("=:/@#", "-+~", "._")
_CONNECTORS = "".join(_LEVELS)
#: A run of word characters and connectors, as written (trailing punctuation is stripped
#: by the pattern: it must end in a word character).
_TOKEN = re.compile(rf"[^\W_](?:[\w{re.escape(_CONNECTORS)}]*[^\W_])?")
_ALNUM = re.compile(r"[^\W_]+")
#: what BM25 keeps as one word
_WORD = re.compile(r"\w+")
#: camelCase humps: an upper-case run before a capitalised word, a capitalised or
#: lower-case word, an upper-case run, or digits kept with the letters before them
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
#: fastembed's BM25 drops longer words (its `token_max_length`)
_LONGEST = 40
#: joined words one identifier may add (a long path or URL stops here)
_MOST_PER_TOKEN = 8


def keyword_text(text: str) -> str:
    """`text` with the joined identifiers and name parts appended (see the module doc)."""
    extra = list(added_terms(text))
    return f"{text}\n{' '.join(extra)}" if extra else text


def keyword_analysis_applies(text: str) -> bool:
    """Whether `keyword_text` adds anything to `text` (else its keyword vector is BM25's
    alone, whatever `KEYWORD_ANALYSIS_VERSION`)."""
    return next(added_terms(text), None) is not None


def added_terms(text: str) -> Iterator[str]:
    """The words `keyword_text` appends, once per occurrence of what adds them."""
    for match in _TOKEN.finditer(text):
        token = match.group()
        for word in _WORD.findall(token):
            if "_" in word:
                yield from (part.lower() for part in _ALNUM.findall(word))
        if not _WORD.fullmatch(token):
            yield from _joined(token)
        yield from _humps(token)


def identifier_share(texts: Iterable[str]) -> float:
    """The share of the texts' words (BM25's) that sit in an identifier `added_terms`
    reads more ways than one: an option, a version, an id, a path, a dotted, snake or
    camel name. Prose measures 0.02 to 0.05 (TREC, dbpedia, SciFact), Debian's changelogs
    0.13 to 0.15, on 30 documents as on 200."""
    words = identifiers = 0
    for text in texts:
        words += len(_WORD.findall(text))
        for match in _TOKEN.finditer(text):
            if next(added_terms(match.group()), None) is not None:
                identifiers += 1
    return identifiers / words if words else 0.0


def _joined(token: str) -> Iterator[str]:
    """The identifier's parts joined by `_`, whole and per segment at each coarser level
    (a segment BM25 already holds as one word, joined by `_` alone, is left out)."""
    seen: set[str] = set()
    pieces = [token]
    for level in (None, *_LEVELS[:-1]):
        if level is not None:
            split = re.compile(f"[{re.escape(level)}]+")
            pieces = [part for piece in pieces for part in split.split(piece)]
        for piece in pieces:
            if _WORD.fullmatch(piece):
                continue
            joined = "_".join(_ALNUM.findall(piece)).lower()
            if joined and joined not in seen and len(joined) <= _LONGEST:
                seen.add(joined)
                yield joined
                if len(seen) >= _MOST_PER_TOKEN:
                    return


def _humps(token: str) -> Iterator[str]:
    """A camelCase word's humps, lower-cased (`xmlFreeID` → xml, free, id)."""
    for part in _ALNUM.findall(token):
        if _CAMEL.search(part):
            humps = _HUMP.findall(part)
            if len(humps) >= 2:
                yield from (hump.lower() for hump in humps)


def term_weights(bm25: Bm25, text: str) -> SparseVector:
    """fastembed's BM25 weights of a stored text (`Bm25.passage_embed`'s), with the words
    `added_terms` finds counted as terms but not in the text's length."""
    from fastembed.common.utils import remove_non_alphanumeric

    words = _analysed(bm25, remove_non_alphanumeric(text))
    counts = Counter(words)
    counts.update(_analysed(bm25, " ".join(added_terms(text))))
    length = bm25.k * (1 - bm25.b + bm25.b * len(words) / bm25.avg_len)
    weights = {
        bm25.compute_token_id(term): found * (bm25.k + 1) / (found + length)
        for term, found in counts.items()
    }
    ordered = sorted(weights.items())
    return SparseVector(
        indices=tuple(index for index, _ in ordered),
        values=tuple(value for _, value in ordered),
    )


def question_weights(bm25: Bm25, text: str) -> SparseVector:
    """A question's BM25 vector: each of its words once at weight 1 (fastembed's
    `query_embed`), each added word that is not one of them at `ADDED_WEIGHT`."""
    from fastembed.common.utils import remove_non_alphanumeric

    own = {bm25.compute_token_id(word) for word in _analysed(bm25, remove_non_alphanumeric(text))}
    added = {bm25.compute_token_id(word) for word in _analysed(bm25, " ".join(added_terms(text)))}
    weights = dict.fromkeys(own, 1.0) | dict.fromkeys(added - own, ADDED_WEIGHT)
    ordered = sorted(weights.items())
    return SparseVector(
        indices=tuple(index for index, _ in ordered),
        values=tuple(value for _, value in ordered),
    )


def is_own_word(weight: float) -> bool:
    """Whether a question term of this weight (`question_weights`) is one of its words."""
    return weight > ADDED_WEIGHT


def _analysed(bm25: Bm25, text: str) -> list[str]:
    """fastembed's BM25 words of `text`: split, stopwords out, stemmed (its own steps)."""
    return bm25._stem(bm25.tokenizer.tokenize(text))
