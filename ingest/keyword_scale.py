"""The keyword floor's scale: a BM25 score as a share of the most the question could score.

A keyword leg scores a passage p for a question q (fastembed's BM25 term weights, the
engine's IDF modifier over the Scope) as

    score(q, p) = sum over the question's terms t of  w(t) * idf(t) * tf(t, p)

with w(t) the question's weight of the term (1), tf(t, p) = f (k1 + 1) / (f + k1 (1 - b
+ b |p| / avgdl)) for a term found f times in p (below k1 + 1 however often it occurs),
and idf(t) = ln(1 + (N - n + 0.5) / (n + 0.5)) over the N points of the Scope holding the
leg's vector, n of which hold the term (n = 0 for a term the KB lacks). No passage can
score more than

    attainable(q) = (k1 + 1) * sum over t of  w(t) * idf(t)

so `relative_keyword_score` = score / attainable lies between 0 and 1: the share of the
question's keyword weight a passage matches, each term counted by how rare it is. BM25
grows with the number of the question's terms and with the IDF (that is, with the KB's
size); the share does neither: a KB twice as large of the same kind of documents keeps
every n / N and so every share, and a longer question raises the attainable score as much
as the score of a passage that matches it. A term the KB lacks counts fully in the
attainable score and never in a passage's: a question about something else matches little
of its own weight. `keyword_floor` is on this scale; `keyword_floor_score` turns it into
the raw BM25 floor a leg applies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: fastembed's BM25 k1 (`ingest.embedder.embedding`): a term's weight in a passage stays
#: below k1 + 1.
BM25_K1 = 1.2


def bm25_idf(points: int, holders: int) -> float:
    """IDF of a term held by `holders` of `points` points, as the engine computes it."""
    return math.log(1.0 + (points - holders + 0.5) / (holders + 0.5))


def attainable_keyword_score(idf: Sequence[float], weights: Sequence[float]) -> float:
    """The most a passage can score for a question with these term IDFs and weights."""
    return (BM25_K1 + 1.0) * sum(w * i for w, i in zip(weights, idf, strict=True))


def relative_keyword_score(score: float, attainable: float) -> float:
    """A raw BM25 score as a share of the question's attainable score (0 when nothing is)."""
    return score / attainable if attainable > 0 else 0.0


def keyword_floor_score(floor: float, attainable: float) -> float:
    """The raw BM25 score a keyword leg must reach for a relative `floor` (0..1)."""
    return floor * attainable
