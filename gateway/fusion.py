"""Weighted Reciprocal Rank Fusion over documents, represented by their best passages.

Every leg (one channel of one question variation in one KB) ranks passages.
Within a leg a document counts once, at the rank of its best passage, so a long
document with many passages does not outvote a short one. Documents are then
scored by weighted RRF over all legs, `sum(weight / (k + rank))`, and each is
represented by its strongest passages (by passage-level RRF). Floors apply to
each leg's raw scores before fusion, never to fused scores.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ingest.index import Hit, LegKind

RRF_K = 60


@dataclass(frozen=True, slots=True)
class RankedLeg:
    """The hits of one leg, best first, with the channel weight of its KB."""

    kb_id: str
    kind: LegKind
    weight: float
    hits: Sequence[Hit]


@dataclass(slots=True)
class Candidate:
    """One passage chosen to represent its document, with what each channel said."""

    point_id: str
    hit: Hit
    score: float = 0.0
    passage_score: float = 0.0
    dense_score: float | None = None
    keyword_score: float | None = None
    legs: set[LegKind] = field(default_factory=set)

    @property
    def document_key(self) -> tuple[str, str]:
        return (self.hit.payload.knowledge_base_id, self.hit.payload.document_id)


def fuse(
    legs: Sequence[RankedLeg], *, k: int = RRF_K, passages_per_document: int = 1
) -> list[Candidate]:
    """Candidates best first: documents by weighted RRF, each by its best passages."""
    passages: dict[str, Candidate] = {}
    documents: dict[tuple[str, str], float] = defaultdict(float)
    for leg in legs:
        if leg.weight <= 0:
            continue
        seen_documents: set[tuple[str, str]] = set()
        for rank, hit in enumerate(leg.hits, start=1):
            candidate = passages.get(hit.point_id)
            if candidate is None:
                candidate = passages[hit.point_id] = Candidate(point_id=hit.point_id, hit=hit)
            candidate.passage_score += leg.weight / (k + rank)
            candidate.legs.add(leg.kind)
            _note_channel_score(candidate, leg.kind, hit.score)
            document = candidate.document_key
            if document not in seen_documents:
                seen_documents.add(document)
                documents[document] += leg.weight / (k + len(seen_documents))
    by_document: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in passages.values():
        candidate.score = documents[candidate.document_key]
        by_document[candidate.document_key].append(candidate)
    chosen = [
        passage
        for group in by_document.values()
        for passage in sorted(group, key=_passage_order)[:passages_per_document]
    ]
    return sorted(chosen, key=lambda c: (-c.score, -c.passage_score, c.point_id))


def _passage_order(candidate: Candidate) -> tuple[float, int]:
    return (-candidate.passage_score, candidate.hit.payload.passage_index)


def _note_channel_score(candidate: Candidate, kind: LegKind, score: float) -> None:
    """Keep each channel's best raw score (cosine for dense, BM25 for keyword)."""
    if kind is LegKind.DENSE:
        best = candidate.dense_score
        candidate.dense_score = score if best is None else max(best, score)
    else:
        best = candidate.keyword_score
        candidate.keyword_score = score if best is None else max(best, score)


def cap_per_knowledge_base(
    candidates: Sequence[Candidate], limits: dict[str, int], overall: int
) -> list[Candidate]:
    """Keep each KB's best `limits[kb]` documents, then the best `overall` of all, in order."""
    taken: dict[str, set[str]] = defaultdict(set)
    kept: list[Candidate] = []
    for candidate in candidates:
        kb_id, document_id = candidate.document_key
        documents = taken[kb_id]
        if document_id not in documents and len(documents) >= limits.get(kb_id, 0):
            continue
        documents.add(document_id)
        kept.append(candidate)
    overall_documents: list[tuple[str, str]] = []
    result: list[Candidate] = []
    for candidate in kept:
        if candidate.document_key not in overall_documents:
            if len(overall_documents) >= overall:
                continue
            overall_documents.append(candidate.document_key)
        result.append(candidate)
    return result
