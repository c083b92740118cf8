"""Weighted fusion over documents, represented by their best passages.

Every leg (one channel of one question variation in one KB) ranks passages.
Within a leg a document counts once, at its best passage, so a long document with
many passages does not outvote a short one. A whole-document keyword leg ranks
documents (each hit is a document's first passage): it adds to its documents' scores
but has no say in which of a document's passages represents it. Two ways to turn a leg into scores:

- `score` (the default): each leg's raw scores divided by the leg's best, so the
  leg's top hit is 1 (cosine below 0 counts as 0); a document the leg did not return
  counts as the leg's last hit, the most it could have scored, unless the leg returned
  every passage that matches (a keyword leg with fewer hits than it asked for: an
  identifier a few passages hold), where it counts 0. In a KB where both
  channels run, a leg's hits past its `DISTINCT_HITS`th all count as that one. A
  document's score is `sum(weight * normalised score)`. A channel that matches many
  documents loosely (long argumentative questions and BM25) gives them all similar
  scores, so it moves the order little; rank fusion would give them its full rank spread.
- `rrf`: weighted Reciprocal Rank Fusion, `sum(weight / (k + rank))`, k = 60.

Why `score` is the default: docs/decisions/fusion.md. Each document is represented by
its strongest passages (by the same fusion at passage level). Floors apply to each leg's
raw scores before fusion, never to fused scores.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from ingest.index import LegKind
from ingest.payload import PassageRef
from settings.config import FusionMethod

RRF_K = 60
#: In a KB whose dense and keyword legs both run, a leg tells apart only its first this
#: many hits: the rest count as the last of them. Past a few dozen hits a leg scores text
#: loosely related to the question, and the other channel orders those documents better;
#: they stay candidates. A single-channel KB keeps each leg's whole order. Chosen with the
#: weights on three golden sets together (docs/decisions/fusion-and-floors.md); a default
#: turn (`top_k` 8) ranks 40 passages per leg, so it changes deeper turns only.
DISTINCT_HITS = 60
_KEYWORD_KINDS = frozenset({LegKind.KEYWORD, LegKind.DOCUMENT_KEYWORD})


class RankedHit(Protocol):
    """What fusion reads of a hit: a ranked point or a hit with its whole payload."""

    @property
    def point_id(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def ref(self) -> PassageRef: ...


H = TypeVar("H", bound=RankedHit)
Other = TypeVar("Other", bound=RankedHit)


@dataclass(frozen=True, slots=True)
class RankedLeg(Generic[H]):
    """The hits of one leg, best first, with the channel weight of its KB."""

    kb_id: str
    kind: LegKind
    weight: float
    hits: Sequence[H]
    #: the hits are every passage that scores on the leg (a keyword leg that found fewer
    #: than it asked for): one it did not return holds none of the question's words
    exhaustive: bool = False


@dataclass(slots=True)
class Candidate(Generic[H]):
    """One passage chosen to represent its document, with what each channel said."""

    point_id: str
    hit: H
    score: float = 0.0
    passage_score: float = 0.0
    dense_score: float | None = None
    keyword_score: float | None = None

    @property
    def document_key(self) -> tuple[str, str]:
        return _document_key(self.hit)

    def with_hit(self, hit: Other) -> Candidate[Other]:
        """The same candidate (scores) carrying another form of its hit."""
        return Candidate(
            point_id=self.point_id,
            hit=hit,
            score=self.score,
            passage_score=self.passage_score,
            dense_score=self.dense_score,
            keyword_score=self.keyword_score,
        )


DEFAULT_FUSION = FusionMethod.SCORE


@dataclass(frozen=True, slots=True)
class _LegScores:
    """One leg's contribution to each passage and document it returned, and to those it
    did not return (of its KB; 0 under RRF)."""

    kb_id: str
    passages: dict[str, float]
    documents: dict[tuple[str, str], float]
    absent: float
    #: False for whole-document legs: they rank documents, not the passages within them
    ranks_passages: bool = True


def fuse(
    legs: Sequence[RankedLeg[H]],
    *,
    method: FusionMethod = DEFAULT_FUSION,
    k: int = RRF_K,
    passages_per_document: int = 1,
) -> list[Candidate[H]]:
    """Candidates best first: documents by weighted fusion, each by its best passages."""
    passages: dict[str, Candidate[H]] = {}
    by_kb: dict[str, list[_LegScores]] = defaultdict(list)
    live = [leg for leg in legs if leg.weight > 0 and leg.hits]
    dense_kbs = {leg.kb_id for leg in live if leg.kind is LegKind.DENSE}
    keyword_kbs = {leg.kb_id for leg in live if leg.kind in _KEYWORD_KINDS}
    for leg in live:
        _note_hits(passages, leg)
        if method is FusionMethod.RRF:
            scores = _rank_scores(leg, k)
        else:
            both = leg.kb_id in dense_kbs and leg.kb_id in keyword_kbs
            scores = _normalised_scores(leg, distinct_hits=DISTINCT_HITS if both else None)
        if leg.kind is LegKind.DOCUMENT_KEYWORD:
            scores = replace(scores, ranks_passages=False)
        by_kb[leg.kb_id].append(scores)
    passage_legs = {kb: [s for s in scores if s.ranks_passages] for kb, scores in by_kb.items()}
    by_document: dict[tuple[str, str], list[Candidate[H]]] = defaultdict(list)
    for candidate in passages.values():
        by_document[_document_key(candidate.hit)].append(candidate)
    chosen: list[Candidate[H]] = []
    for document, group in by_document.items():
        kb_id = document[0]
        _score_document(document, group, by_kb[kb_id], passage_legs[kb_id])
        if len(group) == 1 and passages_per_document >= 1:
            chosen.append(group[0])
        else:
            chosen.extend(sorted(group, key=_passage_order)[:passages_per_document])
    return sorted(chosen, key=lambda c: (-c.score, -c.passage_score, c.point_id))


def _score_document(
    document: tuple[str, str],
    group: list[Candidate[H]],
    kb_legs: list[_LegScores],
    passage_legs: list[_LegScores],
) -> None:
    """Set the fused score of the document (shared by its passages) and each passage's
    (`passage_legs`: those of `kb_legs` that rank passages)."""
    score = 0.0
    for leg_scores in kb_legs:
        score += leg_scores.documents.get(document, leg_scores.absent)
    for candidate in group:
        candidate.score = score
        passage_score = 0.0
        for leg_scores in passage_legs:
            passage_score += leg_scores.passages.get(candidate.point_id, leg_scores.absent)
        candidate.passage_score = passage_score


def _note_hits(passages: dict[str, Candidate[H]], leg: RankedLeg[H]) -> None:
    """Add the leg's hits to `passages`, noting each passage's best raw score
    per channel (cosine for dense, BM25 for keyword; a whole document's BM25 is not the
    passage's)."""
    kind = leg.kind
    dense, keyword = kind is LegKind.DENSE, kind is LegKind.KEYWORD
    for hit in leg.hits:
        candidate = passages.get(hit.point_id)
        if candidate is None:
            candidate = passages[hit.point_id] = Candidate(point_id=hit.point_id, hit=hit)
        score = hit.score
        if dense and (candidate.dense_score is None or score > candidate.dense_score):
            candidate.dense_score = score
        elif keyword and (candidate.keyword_score is None or score > candidate.keyword_score):
            candidate.keyword_score = score


def _rank_scores(leg: RankedLeg[H], k: int) -> _LegScores:
    """weight / (k + rank); a document's rank counts distinct documents only."""
    passages: dict[str, float] = {}
    documents: dict[tuple[str, str], float] = {}
    for rank, hit in enumerate(leg.hits, start=1):
        passages.setdefault(hit.point_id, leg.weight / (k + rank))
        document = _document_key(hit)
        if document not in documents:
            documents[document] = leg.weight / (k + len(documents) + 1)
    return _LegScores(leg.kb_id, passages, documents, absent=0.0)


def _normalised_scores(leg: RankedLeg[H], *, distinct_hits: int | None) -> _LegScores:
    """weight * score / the leg's best score; what the leg missed counts as its last hit
    (0 when the leg is exhaustive), and its hits past `distinct_hits` as that hit."""
    hits = leg.hits
    top = max(hit.score for hit in hits)
    weight = leg.weight if top > 0 else 0.0
    divisor = top if top > 0 else 1.0
    least = 0.0
    flattened = bool(distinct_hits) and len(hits) > (distinct_hits or 0)
    if flattened and distinct_hits:
        least = max(hits[distinct_hits - 1].score, 0.0)
    passages: dict[str, float] = {}
    documents: dict[tuple[str, str], float] = {}
    for hit in hits:
        value = weight * max(hit.score, least) / divisor
        if value > passages.get(hit.point_id, 0.0):
            passages[hit.point_id] = value
        else:
            passages.setdefault(hit.point_id, value)
        document = (hit.ref.knowledge_base_id, hit.ref.document_id)
        if value > documents.get(document, 0.0):
            documents[document] = value
        else:
            documents.setdefault(document, value)
    lowest = weight * max(min(hit.score for hit in hits), least) / divisor
    absent = 0.0 if leg.exhaustive and not flattened else lowest
    return _LegScores(leg.kb_id, passages, documents, absent=absent)


def _document_key(hit: RankedHit) -> tuple[str, str]:
    return (hit.ref.knowledge_base_id, hit.ref.document_id)


def _passage_order(candidate: Candidate[H]) -> tuple[float, int]:
    return (-candidate.passage_score, candidate.hit.ref.passage_index)


def cap_per_knowledge_base(
    candidates: Sequence[Candidate[H]], limits: dict[str, int], overall: int
) -> list[Candidate[H]]:
    """Keep each KB's best `limits[kb]` documents, then the best `overall` of all, in order."""
    taken: dict[str, set[str]] = defaultdict(set)
    kept: list[Candidate[H]] = []
    for candidate in candidates:
        kb_id, document_id = candidate.document_key
        documents = taken[kb_id]
        if document_id not in documents and len(documents) >= limits.get(kb_id, 0):
            continue
        documents.add(document_id)
        kept.append(candidate)
    overall_documents: list[tuple[str, str]] = []
    result: list[Candidate[H]] = []
    for candidate in kept:
        if candidate.document_key not in overall_documents:
            if len(overall_documents) >= overall:
                continue
            overall_documents.append(candidate.document_key)
        result.append(candidate)
    return result
