"""What both Index adapters do alike, whatever the engine: point ids, vector checks,
reading points back, and paging through a scroll.

Nothing here names an engine's types: points are read through `StoredPoint` and
`ScoredPoint`, which both engines' records and scored points satisfy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    HeldTerms,
    Hit,
    Leg,
    LegKind,
    Passage,
    QueryResult,
    RankedPoint,
    RankResult,
    SparseVector,
    StoredPassage,
    is_dense_vector,
)
from ingest.keyword_scale import bm25_idf
from ingest.payload import REF_KEYS, PassagePayload, Scope, from_payload, ref_from_payload

Item = TypeVar("Item")

#: Points read per page while scrolling.
SCROLL_PAGE = 256
#: The deadline of writes and of a collection's creation or removal, when longer than the
#: call deadline: they take seconds on a busy machine (a collection's files made or
#: removed, a bulk write's points made durable), and are bounded, not answered 503 at 5 s.
WRITE_TIMEOUT_S = 60.0

#: The filtered search both engines run (docs/decisions/filtered-search.md): each tenant
#: large enough for a graph has its own, of `GRAPH_M` links per point and none over the
#: whole collection; the dense leg's graph search keeps `DENSE_EF` candidates and follows
#: the Scope's filter (ACORN) however many of the collection's points it keeps
#: (`ACORN_MAX_SELECTIVITY`: a tenant filling most of its org's collection too).
GRAPH_M = 16
DENSE_EF = 512
ACORN_MAX_SELECTIVITY = 1.0
#: A dense leg whose search answers weakly (nothing, or a best cosine below this) is
#: searched again exactly in its Scope. A graph search misses most for a question far from
#: everything in a large Scope, and such a question is the one with a low best score
#: (docs/decisions/filtered-search.md). It is decided by the Scope's own scores, never by
#: a count or estimate that other tenants' points would move.
EXACT_CHECK_BELOW = 0.5


class StoredPoint(Protocol):
    """A point as an engine returns it: its id and (when asked for) its payload."""

    @property
    def id(self) -> object: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...


class ScoredPoint(StoredPoint, Protocol):
    """A point found by a search, with its score."""

    @property
    def score(self) -> float: ...


class VectorPoint(StoredPoint, Protocol):
    """A point read back with its named vectors (dense lists, sparse objects carrying
    `indices` and `values`)."""

    @property
    def vector(self) -> Any: ...


def checked_point_id(value: str) -> str:
    """The canonical form of a point id; point ids are UUIDs, anything else is a caller bug."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(f"point ids must be UUIDs, got {value!r}") from None


def dense_values(vector: Sequence[float], dimensions: int) -> list[float]:
    """A dense vector's values, refused unless it has the collection's `dimensions`."""
    if len(vector) != dimensions:
        raise ValueError(f"dense vector has {len(vector)} dimensions, not {dimensions}")
    return list(vector)


def sparse_values(vector: SparseVector) -> tuple[list[int], list[float]]:
    """A sparse vector's (indices, values), refused unless they pair up."""
    if len(vector.indices) != len(vector.values):
        raise ValueError("a sparse vector needs as many values as indices")
    return list(vector.indices), list(vector.values)


def hit(point: ScoredPoint) -> Hit:
    return Hit(str(point.id), point.score, from_payload(point.payload or {}))


def ranked_point(point: ScoredPoint) -> RankedPoint:
    return RankedPoint(str(point.id), point.score, ref_from_payload(point.payload or {}))


class AdapterReads:
    """`Index.query`, `rank`, `fetch` and `held_terms`, alike on both engines, over an
    adapter's two scoped engine calls: `_query_batch` (every leg in one call inside the
    Scope, the weak dense legs again: `weak_dense_legs`) and `_points`."""

    def _query_batch(
        self, collection: str, scope: Scope, legs: Sequence[Leg], *, with_payload: bool | list[str]
    ) -> tuple[Sequence[Sequence[ScoredPoint]], int]:
        """Each leg's points with the payload keys asked for, and how many legs were searched
        again."""
        raise NotImplementedError

    def _points(
        self, collection: str, scope: Scope, point_ids: Sequence[str], *, terms: bool
    ) -> Sequence[VectorPoint]:
        """Those points inside the Scope: with their payloads, or (`terms`) with their
        sparse vectors only."""
        raise NotImplementedError

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        found, _ = self._query_batch(collection, scope, legs, with_payload=True)
        return QueryResult(legs=tuple(tuple(map(hit, points)) for points in found))

    def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        found, exact_checks = self._query_batch(
            collection, scope, legs, with_payload=list(REF_KEYS)
        )
        legs_found = tuple(tuple(map(ranked_point, points)) for points in found)
        return RankResult(legs=legs_found, exact_checks=exact_checks)

    def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        records = self._points(collection, scope, point_ids, terms=False)
        return {str(record.id): from_payload(record.payload or {}) for record in records}

    def held_terms(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, HeldTerms]:
        records = self._points(collection, scope, point_ids, terms=True)
        return {str(record.id): held_terms_of(record) for record in records}


def passage_of(point: VectorPoint) -> Passage:
    """A point read with its vectors, as `Index.upsert` takes it back. A sparse vector the
    engine left out (it had no terms) reads as empty."""
    vectors: Mapping[str, Any] = point.vector if isinstance(point.vector, Mapping) else {}
    document = vectors.get(DOCUMENT_SPARSE_VECTOR)
    return Passage(
        point_id=str(point.id),
        dense=tuple(float(value) for value in vectors.get(DENSE_VECTOR) or ()),
        sparse=_sparse_of(vectors.get(SPARSE_VECTOR)),
        payload=from_payload(point.payload or {}),
        document_sparse=None if document is None else _sparse_of(document),
        dense_sets=tuple(
            (str(name), tuple(float(value) for value in values))
            for name, values in sorted(vectors.items())
            if name != DENSE_VECTOR and is_dense_vector(str(name)) and values
        ),
    )


def held_terms_of(point: VectorPoint) -> HeldTerms:
    """A point read with its sparse vectors, as the terms it holds."""
    vectors: Mapping[str, Any] = point.vector if isinstance(point.vector, Mapping) else {}
    return HeldTerms(
        passage=frozenset(_sparse_of(vectors.get(SPARSE_VECTOR)).indices),
        document=frozenset(_sparse_of(vectors.get(DOCUMENT_SPARSE_VECTOR)).indices),
    )


def _sparse_of(vector: Any) -> SparseVector:
    if vector is None:
        return SparseVector(indices=(), values=())
    return SparseVector(
        indices=tuple(int(i) for i in vector.indices),
        values=tuple(float(v) for v in vector.values),
    )


def stored_passages(records: Iterable[StoredPoint]) -> list[StoredPassage]:
    """Scrolled points with their payloads, ordered by passage index (then point id)."""
    passages = [StoredPassage(str(r.id), from_payload(r.payload or {})) for r in records]
    return sorted(passages, key=lambda p: (p.payload.passage_index, p.point_id))


def scroll_all(read_page: Callable[[Any], tuple[Sequence[Item], Any]]) -> list[Item]:
    """Every item of a scroll: `read_page(offset)` returns a page and the next page's
    offset (None after the last), starting from None. The offset is the engine's own,
    handed back as it came."""
    items: list[Item] = []
    offset: Any = None
    while True:
        page, offset = read_page(offset)
        items.extend(page)
        if offset is None:
            return items


# ---- weak dense answers -------------------------------------------------------------


def weak_dense_legs(legs: Sequence[Leg], found: Sequence[Sequence[ScoredPoint]]) -> list[int]:
    """The positions of the dense legs to search again exactly: those that found nothing
    (a Scope with no point above the leg's floor, or a graph search that missed) or whose
    best score is below `EXACT_CHECK_BELOW`."""
    return [
        position
        for position, (leg, points) in enumerate(zip(legs, found, strict=True))
        if leg.kind is LegKind.DENSE and (not points or points[0].score < EXACT_CHECK_BELOW)
    ]


# ---- keyword IDF: counted, or probed term by term ----------------------------------

#: The most points of the Scope holding a keyword vector for which `keyword_idf` counts
#: each term's holders n by searching for the term alone, reading every point that holds
#: it (`counted_idf`); over more, it reads n back from the engine's IDF (`probed_idf`),
#: which costs less than listing so many points.
IDF_COUNT_LIMIT = 4096


def keyword_vector_name(kind: LegKind) -> str:
    """The sparse vector a keyword leg of this kind searches."""
    return SPARSE_VECTOR if kind is LegKind.KEYWORD else DOCUMENT_SPARSE_VECTOR


def keyword_terms(legs: Sequence[Leg]) -> dict[str, tuple[int, ...]]:
    """The distinct terms of the keyword legs, per sparse vector they search."""
    terms: dict[str, dict[int, None]] = {}
    for leg in legs:
        if leg.kind is not LegKind.DENSE and leg.sparse is not None:
            held = terms.setdefault(keyword_vector_name(leg.kind), {})
            held.update(dict.fromkeys(leg.sparse.indices))
    return {name: tuple(held) for name, held in terms.items()}


@dataclass(frozen=True, slots=True)
class IdfSearches:
    """The searches `keyword_idf` runs, one per (vector, term), in this order: `counted`,
    the term alone (weight 1), as many points as the Scope holds the vector (`holders`),
    reading neither payload nor vector; then `probed`, the term alone, limit 1, reading
    the vector, with the IDF over the Scope the keyword legs score with. The terms of a
    vector no point of the Scope holds (`unheld`) need no search."""

    holders: Mapping[str, int]
    counted: tuple[tuple[str, int], ...]
    probed: tuple[tuple[str, int], ...]
    unheld: tuple[tuple[str, int], ...]

    @classmethod
    def plan(cls, terms: Mapping[str, Sequence[int]], holders: Mapping[str, int]) -> IdfSearches:
        """Count the terms of the vectors the Scope's points hold at most `IDF_COUNT_LIMIT`
        times; probe the others."""
        pairs = [(name, term) for name in terms for term in terms[name]]
        return cls(
            holders=holders,
            counted=tuple(p for p in pairs if 0 < holders[p[0]] <= IDF_COUNT_LIMIT),
            probed=tuple(p for p in pairs if holders[p[0]] > IDF_COUNT_LIMIT),
            unheld=tuple(p for p in pairs if holders[p[0]] == 0),
        )

    def idf(self, found: Sequence[Sequence[ScoredPoint]]) -> dict[tuple[str, int], float]:
        """Every term's IDF over the Scope, from the searches' answers (`found`, in order)."""
        idf = dict.fromkeys(self.unheld, bm25_idf(0, 0))
        counts = len(self.counted)
        idf.update(counted_idf(self.counted, found[:counts], self.holders))
        idf.update(probed_idf(self.probed, found[counts:], self.holders))
        return idf


def counted_idf(
    counted: Sequence[tuple[str, int]],
    found: Sequence[Sequence[ScoredPoint]],
    holders: Mapping[str, int],
) -> dict[tuple[str, int], float]:
    """The IDFs of (vector, term) pairs, one search each for the term alone that read as
    many points as the Scope holds the vector (N, `holders`): it found every point holding
    the term (each scores above 0), so n is how many it found."""
    return {
        (name, term): bm25_idf(holders[name], len(points))
        for (name, term), points in zip(counted, found, strict=True)
    }


def probed_idf(
    probes: Sequence[tuple[str, int]],
    found: Sequence[Sequence[ScoredPoint]],
    holders: Mapping[str, int],
) -> dict[tuple[str, int], float]:
    """The IDFs of (vector, term) pairs, one search each for the term alone (weight 1)
    over the Scope, with the engine's IDF over the Scope and its best point's vector:
    that point scores idf x its weight for the term, so idf is score / weight. A term no
    point of the Scope holds has n = 0: `bm25_idf(N, 0)`, with N (`holders`) the Scope's
    points holding the vector."""
    idf: dict[tuple[str, int], float] = {}
    for (name, term), points in zip(probes, found, strict=True):
        probed = _probe_idf(name, term, points)
        idf[(name, term)] = bm25_idf(holders[name], 0) if probed is None else probed
    return idf


def legs_idf(
    legs: Sequence[Leg], idf: Mapping[tuple[str, int], float]
) -> tuple[tuple[float, ...], ...]:
    """Each keyword leg's term IDFs, in the order of its terms (dense legs: ()). Terms not
    found in `idf` (a vector the collection lacks, whose leg finds nothing) count 0."""
    return tuple(
        ()
        if leg.kind is LegKind.DENSE or leg.sparse is None
        else tuple(
            idf.get((keyword_vector_name(leg.kind), term), 0.0) for term in leg.sparse.indices
        )
        for leg in legs
    )


def _probe_idf(name: str, term: int, points: Sequence[ScoredPoint]) -> float | None:
    for point in points:
        vectors = getattr(point, "vector", None)
        sparse = vectors.get(name) if isinstance(vectors, Mapping) else None
        if sparse is None:
            continue
        for index, weight in zip(sparse.indices, sparse.values, strict=True):
            if index == term and weight > 0:
                return float(point.score) / float(weight)
    return None
