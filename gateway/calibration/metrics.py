"""nDCG@k and recall@k of a ranking against graded judgments, as trec_eval computes them.

A small pure function rather than the `ir-measures` library (the `tools` extra, which
`kbgate eval` on BEIR datasets uses): the gateway needs these two measures only, and
the library would add a compiled dependency and about 0.4 s and 3 MiB to the first
evaluation of a serving process (docs/decisions/calibration.md). A test holds both to
the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def ndcg_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain of the first `k` documents: the gain of a
    document is its grade (0 when unjudged), discounted by log2(rank + 1); 0 when no
    document is relevant."""
    ideal = sorted((grade for grade in grades.values() if grade > 0), reverse=True)[:k]
    best = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    if best == 0:
        return 0.0
    gained = sum(
        grades.get(document, 0) / math.log2(rank + 2)
        for rank, document in enumerate(_distinct(ranking)[:k])
    )
    return gained / best


def recall_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """The share of relevant documents (grade >= 1) among the first `k`; 0 when none is."""
    relevant = {document for document, grade in grades.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_distinct(ranking)[:k])) / len(relevant)


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean, rounded to 4 places (0 for no values)."""
    return round(sum(values) / len(values), 4) if values else 0.0


def _distinct(ranking: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranking))
