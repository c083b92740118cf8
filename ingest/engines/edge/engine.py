"""Qdrant Edge's calls, synchronous: one shard directory per collection, in this process.

Durability: `EdgeShard.update` appends each operation to the shard's write-ahead
log (a memory-mapped file) before applying it, and `EdgeShard.load` replays the
log, so a write survives the process being killed (`kill -9`) once `update`
returns. Edge does not fsync on `update`; only `flush()` syncs the WAL and the
segments to disk. Every write here ends with `flush()` (a few milliseconds), so
it also survives an OS crash or power loss once the method returns.

Keyword legs compute IDF over the scope's points only (`SearchParams.idf`), so other
tenants' documents never move a tenant's BM25 scores.

Edge runs no background optimizer: written points land in plain segments, searched
exactly. `optimize()` builds the search indexes of the large ones (an HNSW graph per
tenant large enough for one, compact sparse indexes). The binding holds the GIL while
it runs (2.5 s for 13,000 passages), so the gateway calls it at start, before it serves,
as do `kbgate ingest --data-dir`, the eval and the benchmarks after they ingest; what is
written while it serves is searched exactly until the next start
(docs/decisions/edge-in-process.md). `ingest.engines.edge.index.EdgeIndex` is the
Index port over this: every call in a worker thread, with a deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_edge import (
    AcornSearchParams,
    CountRequest,
    EdgeShard,
    FieldCondition,
    Filter,
    HasIdCondition,
    HasVectorCondition,
    IdfParams,
    IsEmptyCondition,
    MatchAny,
    MatchValue,
    Point,
    PointVectors,
    Query,
    QueryBatchRequest,
    QueryRequest,
    ScoredPoint,
    ScrollRequest,
    SearchParams,
    SparseVector,
    UpdateOperation,
)

from ingest.engines.common import (
    ACORN_MAX_SELECTIVITY,
    DENSE_EF,
    SCROLL_PAGE,
    AdapterReads,
    IdfSearches,
    checked_point_id,
    dense_values,
    keyword_terms,
    legs_idf,
    passage_of,
    scroll_all,
    sparse_values,
    stored_passages,
    weak_dense_legs,
)
from ingest.engines.edge.counts import Cell
from ingest.engines.edge.disk import DiskReserve
from ingest.engines.edge.narrowing import narrowing_condition
from ingest.engines.edge.shards import (
    EdgeShards,
    Shard,
    engine_errors,
    field_index,
    missing_field_indexes,
)
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    IndexUnavailableError,
    Leg,
    LegKind,
    Passage,
    StoredPassage,
    is_dense_vector,
)
from ingest.index import SparseVector as PassageSparse
from ingest.payload import (
    PII_ANALYZER_PATH,
    PayloadKey,
    PiiAnalysis,
    Scope,
    is_valid_org_id,
    pii_payload,
    to_payload,
)

if TYPE_CHECKING:
    from qdrant_edge import ConditionType, PointId, Record


EDGE_DIR = "qdrant-edge"


#: Points a Scope's deletion removes per Edge call.
DELETE_PAGE = 1024
#: Points an upsert writes per Edge call, at least: whole documents, each in one call.
UPSERT_PAGE = 256


def _scope_filter(
    scope: Scope, *extra: ConditionType, excluding: Sequence[ConditionType] = ()
) -> Filter:
    """The only place a Scope becomes an Edge filter; `extra` narrows it further and
    `excluding` leaves out the points matching any of its conditions. Keyword
    legs compute IDF over the same filter, so what lies outside the Scope neither moves a
    score nor changes what a search does."""
    must: list[ConditionType] = [
        FieldCondition(key=PayloadKey.TENANT_ID, match=MatchValue(scope.tenant_id)),
        FieldCondition(key=PayloadKey.KNOWLEDGE_BASE_ID, match=MatchAny(sorted(scope.kb_ids))),
        FieldCondition(key=PayloadKey.CLASSIFICATION, match=MatchAny(list(scope.labels))),
    ]
    if scope.strict:
        must.append(FieldCondition(key=PayloadKey.ORG_ID, match=MatchValue(scope.org_id)))
    if scope.narrowing is not None:
        must.append(narrowing_condition(scope.narrowing))
    return Filter(must=[*must, *extra], must_not=list(excluding) or None)


class EdgeEngine(AdapterReads):
    """Qdrant Edge shards under `data_dir / "qdrant-edge"`, opened on demand and kept open.

    Thread-safe; one process per data dir (a shard's WAL is locked while open). Edge's
    Python binding holds the GIL for the whole of every call (`bench.edge_gil`).
    """

    def __init__(
        self,
        data_dir: Path,
        dense_dim: int = 384,
        *,
        indexing_threshold_kb: int | None = None,
        search_threads: int | None = None,
        min_free_mb: int = 0,
    ) -> None:
        """`indexing_threshold_kb`: the vector data (KB) from which `optimize` indexes a
        segment and searches use its graph; Edge's defaults when None; 0 never indexes
        (`optimize` does nothing). Tests set it low to run small collections through
        the HNSW graph. `search_threads`: each shard's search pool, set on every open (a
        shard keeps the count it was last opened with, and Edge would apply that); None:
        one per core this process may use (Edge's own default, eight threads on two cores,
        took 1.3 ms more CPU a turn, docs/decisions/edge-search-threads.md).
        `min_free_mb`: the free disk that writes and index builds leave
        (`ingest.engines.edge.disk`); 0: none."""
        self._dense_dim = dense_dim
        self._shards = EdgeShards(
            Path(data_dir) / EDGE_DIR,
            dense_dim,
            indexing_threshold_kb=indexing_threshold_kb,
            search_threads=search_threads,
            min_free_mb=min_free_mb,
        )

    @property
    def disk(self) -> DiskReserve:
        """The free disk writes and index builds leave."""
        return self._shards.disk

    def ensure_collection(self, collection: str) -> None:
        self._shards.disk.check()
        self._shards.open(collection)

    def ensure_field_indexes(self, collection: str, fields: Mapping[str, str]) -> int:
        self._shards.disk.check()
        with self._shards.writing(collection, create=True) as held:
            if held is None:  # pragma: no cover - created when asked to
                raise IndexUnavailableError(f"could not open collection {collection!r}")
            missing = missing_field_indexes(held.shard.info().payload_schema, dict(fields))
            for path, kind in missing.items():
                index = UpdateOperation.create_field_index(path, field_index(kind))
                held.update(index, durable=False)
            if missing:
                held.shard.flush()
        return len(missing)

    def upsert(
        self,
        collection: str,
        passages: Sequence[Passage],
        overwriting: Callable[[frozenset[Cell]], None] | None = None,
    ) -> None:
        """`overwriting`, if given, hears the cells of the stored points each page is about
        to replace (under the collection's write lock, before the page is written)."""
        if not passages:
            return
        self._shards.disk.check()
        existing = self._shards.existing(collection)
        # Points are built (and checked) before a new shard is made; it gets the vector.
        document_keywords = existing is None or existing.document_keywords
        points = [self._point(passage, document_keywords) for passage in passages]
        with self._shards.writing(collection, create=True) as held:
            if held is None:  # pragma: no cover - created when asked to
                raise IndexUnavailableError(f"could not open collection {collection!r}")
            # Whole documents at a time, as deletions go by pages: a bulk write's thousand
            # points in one call would hold the GIL, and stop every turn, for all of them.
            for page in _document_pages(passages, points):
                if overwriting is not None:
                    overwriting(_stored_cells(held.shard, [point.id for point in page]))
                held.update(UpdateOperation.upsert_points(page), durable=False)
            held.shard.flush()  # durable before it is answered

    def document_keywords(self, collection: str) -> bool:
        held = self._shards.existing(collection)
        return held is not None and held.document_keywords

    def open_document_keywords(self, collection: str) -> bool | None:
        """`document_keywords` of a collection already open, without an engine call; None
        when it is not open (finding out may load its shard)."""
        held = self._shards.open_shard(collection)
        return None if held is None else held.document_keywords

    def keyword_holders(
        self, collection: str, scope: Scope, names: Sequence[str]
    ) -> dict[str, int]:
        """How many of the Scope's points hold each of these keyword vectors (the IDFs'
        N); a vector the collection lacks is left out."""
        held = self._shards.existing(collection)
        if held is None:
            return {}
        with engine_errors(collection):
            return {
                name: held.shard.count(
                    CountRequest(exact=True, filter=_scope_filter(scope, HasVectorCondition(name)))
                )
                for name in names
                if held.document_keywords or name != DOCUMENT_SPARSE_VECTOR
            }

    def keyword_idf(
        self,
        collection: str,
        scope: Scope,
        legs: Sequence[Leg],
        holders: Mapping[str, int] | None = None,
    ) -> tuple[tuple[float, ...], ...]:
        """The keyword legs' term IDFs over the Scope; `holders`: `keyword_holders`'
        answers already known (the others are counted)."""
        held = self._shards.existing(collection)
        if held is None:
            return legs_idf(legs, {})
        terms = {
            name: held_terms
            for name, held_terms in keyword_terms(legs).items()
            if held.document_keywords or name != DOCUMENT_SPARSE_VECTOR
        }
        if not terms:
            return legs_idf(legs, {})
        where = _scope_filter(scope)
        known = holders or {}
        with engine_errors(collection):
            missing = [name for name in terms if name not in known]
            if missing:
                known = {**known, **self.keyword_holders(collection, scope, missing)}
            searches = IdfSearches.plan(terms, {name: known[name] for name in terms})
            requests = [
                *(
                    self._idf_count(name, term, searches.holders[name], where)
                    for name, term in searches.counted
                ),
                *(self._idf_probe(name, term, where) for name, term in searches.probed),
            ]
            found = held.shard.query_batch(QueryBatchRequest(requests)) if requests else []
        return legs_idf(legs, searches.idf(found))

    @staticmethod
    def _idf_count(name: str, term: int, holders: int, where: Filter) -> QueryRequest:
        """Every point of the Scope holding the term, of the `holders` holding the vector.
        Only how many there are is read, not the engine's scores."""
        return QueryRequest(
            limit=holders,
            query=Query.Nearest(_term_query(term), using=name),
            filter=where,
            with_vector=False,
            with_payload=False,
        )

    @staticmethod
    def _idf_probe(name: str, term: int, where: Filter) -> QueryRequest:
        """The term alone over the Scope, with the IDF the keyword legs score with."""
        return QueryRequest(
            limit=1,
            query=Query.Nearest(_term_query(term), using=name),
            filter=where,
            with_vector=[name],
            with_payload=False,
            params=_idf_over(where),
        )

    def _points(
        self, collection: str, scope: Scope, point_ids: Sequence[str], *, terms: bool
    ) -> list[Record]:
        """Those points inside the scope: with their payloads, or (`terms`) with their
        sparse vectors only."""
        ids: set[PointId] = {checked_point_id(pid) for pid in point_ids}
        held = self._shards.existing(collection)
        if held is None or not ids:
            return []
        names = [SPARSE_VECTOR, *([DOCUMENT_SPARSE_VECTOR] if held.document_keywords else [])]
        where = _scope_filter(scope, HasIdCondition(ids))
        with engine_errors(collection):
            records, _ = held.shard.scroll(
                ScrollRequest(
                    limit=len(ids),
                    filter=where,
                    with_payload=not terms,
                    with_vector=names if terms else False,
                )
            )
        return list(records)

    def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        extra = () if document_id is None else (_document(document_id),)
        held = self._shards.existing(collection)
        if held is None:
            return 0
        with engine_errors(collection):
            return held.shard.count(CountRequest(exact=True, filter=_scope_filter(scope, *extra)))

    def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        where = _scope_filter(scope, _document(document_id))
        held = self._shards.existing(collection)
        if held is None:
            return []

        def page(offset: PointId | None) -> tuple[list[Record], PointId | None]:
            return held.shard.scroll(
                ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=where, with_payload=True)
            )

        with engine_errors(collection):
            return stored_passages(scroll_all(page))

    def document_ids(self, collection: str, scope: Scope) -> set[str]:
        where = _scope_filter(scope)
        held = self._shards.existing(collection)
        if held is None:
            return set()
        # Page by page rather than one facet: each Edge call holds the GIL, so one facet
        # over a large Scope would stop every turn for its whole length; a page holds it
        # for a few milliseconds.
        only_the_id = [str(PayloadKey.DOCUMENT_ID)]

        def page(offset: PointId | None) -> tuple[list[Record], PointId | None]:
            return held.shard.scroll(
                ScrollRequest(
                    offset=offset, limit=SCROLL_PAGE, filter=where, with_payload=only_the_id
                )
            )

        with engine_errors(collection):
            records = scroll_all(page)
        return {
            str(payload[PayloadKey.DOCUMENT_ID])
            for record in records
            if (payload := record.payload)
        }

    def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        ids: set[PointId] = {checked_point_id(pid) for pid in point_ids}
        if not ids:
            return 0
        return self._delete_where(collection, _scope_filter(scope, HasIdCondition(ids)))

    def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        return self._delete_where(collection, _scope_filter(scope, _document(document_id)))

    def delete_scope(self, collection: str, scope: Scope) -> int:
        # Page by page, as `document_ids` reads: one delete over a workspace's Scope would
        # hold the GIL, and stop every turn, for as long as all the pages together.
        where = _scope_filter(scope)
        deleted = 0
        while True:
            with self._shards.writing(collection) as held:
                if held is None:
                    return deleted
                page, _ = held.shard.scroll(
                    ScrollRequest(limit=DELETE_PAGE, filter=where, with_payload=False)
                )
                if not page:
                    if deleted:
                        held.shard.flush()  # the deletion is durable before it is answered
                    return deleted
                these: set[PointId] = {record.id for record in page}
                these_inside = _scope_filter(scope, HasIdCondition(these))
                held.update(UpdateOperation.delete_points_by_filter(these_inside), durable=False)
            deleted += len(page)

    def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        where = _scope_filter(scope)
        held = self._shards.existing(collection)
        if held is None:
            return [], None
        with engine_errors(collection):
            records, after = held.shard.scroll(
                ScrollRequest(
                    offset=start, limit=limit, filter=where, with_payload=True, with_vector=True
                )
            )
        return [passage_of(record) for record in records], None if after is None else str(after)

    def drop_collection(self, collection: str) -> int | None:
        return self._shards.drop(collection)

    def backfill_org(self, collection: str, scope: Scope) -> int:
        if scope.strict:
            raise ValueError("backfill_org needs a non-strict scope: strict ones never see legacy")
        if not is_valid_org_id(scope.org_id):
            raise ValueError(f"cannot backfill an invalid org id: {scope.org_id!r}")
        self._shards.disk.check()
        where = _scope_filter(scope, IsEmptyCondition(key=PayloadKey.ORG_ID))
        with self._shards.writing(collection) as held:
            if held is None:
                return 0
            updated = held.shard.count(CountRequest(exact=True, filter=where))
            if updated:
                payload = {PayloadKey.ORG_ID.value: scope.org_id}
                held.update(UpdateOperation.set_payload_by_filter(where, payload))
        return updated

    def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        current = FieldCondition(key=PII_ANALYZER_PATH, match=MatchValue(analyzer))
        where = _scope_filter(scope, excluding=[current])
        held = self._shards.existing(collection)
        if held is None:
            return [], None
        with engine_errors(collection):
            records, after = held.shard.scroll(
                ScrollRequest(offset=start, limit=limit, filter=where, with_payload=True)
            )
        return stored_passages(records), None if after is None else str(after)

    def set_pii(self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]) -> int:
        ids: dict[PointId, PiiAnalysis] = {
            checked_point_id(pid): analysis for pid, analysis in analyses.items()
        }
        if not ids:
            return 0
        self._shards.disk.check()
        with self._shards.writing(collection) as held:
            if held is None:
                return 0
            inside = held.shard.count(
                CountRequest(exact=True, filter=_scope_filter(scope, HasIdCondition(set(ids))))
            )
            for pid, analysis in ids.items():
                payload = {PayloadKey.PII.value: pii_payload(analysis)}
                where = _scope_filter(scope, HasIdCondition({pid}))
                held.update(UpdateOperation.set_payload_by_filter(where, payload), durable=False)
            held.shard.flush()
        return inside

    def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        if not is_dense_vector(vector) or vector == DENSE_VECTOR:
            raise ValueError(f"not a dense vector set to add: {vector!r}")
        self._shards.disk.check()
        self._shards.add_dense_vector(collection, vector, dim)

    def missing_vector_page(
        self, collection: str, scope: Scope, vector: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        held = self._shards.existing(collection)
        if held is None:
            return [], None
        where = _scope_filter(scope, excluding=[HasVectorCondition(_known(held, vector))])
        with engine_errors(collection):
            records, after = held.shard.scroll(
                ScrollRequest(offset=start, limit=limit, filter=where, with_payload=True)
            )
        return stored_passages(records), None if after is None else str(after)

    def set_dense_vectors(
        self, collection: str, scope: Scope, vector: str, vectors: Mapping[str, Sequence[float]]
    ) -> int:
        ids: dict[PointId, list[float]] = {
            checked_point_id(pid): list(values) for pid, values in vectors.items()
        }
        if not ids:
            return 0
        self._shards.disk.check()
        with self._shards.writing(collection) as held:
            if held is None:
                return 0
            name = _known(held, vector)
            dim = held.dense_dims[name]
            if any(len(values) != dim for values in ids.values()):
                raise ValueError(f"{name!r} takes vectors of {dim} dimensions")
            inside = _scope_filter(scope, HasIdCondition(set(ids)))
            count = held.shard.count(CountRequest(exact=True, filter=inside))
            points = [PointVectors(pid, {name: values}) for pid, values in ids.items()]
            # Only points inside the Scope take a vector: the condition is the Scope's filter.
            # Not flushed: a flush holds the GIL for tens of milliseconds (hundreds on a
            # busy disk), every turn waiting; the WAL keeps the vectors through a killed
            # process, the next flushed write or the close makes them durable, and what an
            # OS crash loses a migration finds missing and sets again.
            held.update(UpdateOperation.update_vectors(points, inside), durable=False)
        return count

    def count_vector(self, collection: str, scope: Scope, vector: str) -> int:
        held = self._shards.existing(collection)
        if held is None or vector not in held.dense_dims:
            return 0
        where = _scope_filter(scope, HasVectorCondition(vector))
        with engine_errors(collection):
            return held.shard.count(CountRequest(exact=True, filter=where))

    def drop_dense_vectors(self, collection: str, scope: Scope, vector: str) -> int:
        with self._shards.writing(collection) as held:
            if held is None or vector not in held.dense_dims:
                return 0
            where = _scope_filter(scope, HasVectorCondition(vector))
            count = held.shard.count(CountRequest(exact=True, filter=where))
            if count:
                held.update(UpdateOperation.delete_vectors_by_filter(where, [vector]))
        return count

    def optimize(self) -> list[str]:
        """Every collection's indexes, built in this process: it stops while they build."""
        return self._shards.optimize()

    def ping(self) -> None:
        if self._shards.closed:
            raise IndexUnavailableError("the Qdrant Edge index is closed")

    def close(self) -> None:
        self._shards.close()

    def existing_shard(self, collection: str) -> EdgeShard | None:
        """The collection's open shard (None: no such collection): for benchmarks' exact
        reference searches only."""
        held = self._shards.existing(collection)
        return None if held is None else held.shard

    def _delete_where(self, collection: str, where: Filter) -> int:
        """Delete the points `where` selects (always inside a Scope); how many."""
        with self._shards.writing(collection) as held:
            if held is None:
                return 0
            deleted = held.shard.count(CountRequest(exact=True, filter=where))
            if deleted:
                held.update(UpdateOperation.delete_points_by_filter(where))
        return deleted

    def _point(self, passage: Passage, document_keywords: bool) -> Point:
        vectors: dict[str, Any] = {SPARSE_VECTOR: _sparse(passage.sparse)}
        if passage.dense:
            vectors[DENSE_VECTOR] = self._dense(passage.dense)
        for name, values in passage.dense_sets:
            if not is_dense_vector(name) or name == DENSE_VECTOR or not values:
                raise ValueError(f"not a dense vector set: {name!r}")
            vectors[name] = list(values)
        if document_keywords and passage.document_sparse is not None:
            vectors[DOCUMENT_SPARSE_VECTOR] = _sparse(passage.document_sparse)
        return Point(checked_point_id(passage.point_id), vectors, to_payload(passage.payload))

    def _query_batch(
        self, collection: str, scope: Scope, legs: Sequence[Leg], *, with_payload: bool | list[str]
    ) -> tuple[list[list[ScoredPoint]], int]:
        """Every leg in one engine call, with the payload keys asked for; then the weak dense
        legs (`weak_dense_legs`) again, exactly, in a second call. Answers each leg's points
        and how many legs were searched again.

        Keyword legs compute IDF over the Scope's own points (`where`): never more, and
        never a cheaper filter chosen by what else the tenant holds, so neither the scores
        nor the cost of a search depend on points outside the Scope."""
        where = _scope_filter(scope)
        queries = [self._leg_query(leg) for leg in legs]  # checked before anything is read
        held = self._shards.existing(collection)
        if held is None or not legs:
            return [[] for _ in legs], 0
        # A collection made before document keyword vectors finds nothing on that leg.
        runs = [held.document_keywords or leg.kind is not LegKind.DOCUMENT_KEYWORD for leg in legs]

        def request(leg: Leg, query: Query, params: SearchParams) -> QueryRequest:
            return QueryRequest(
                limit=leg.limit,
                query=query,
                filter=where,
                score_threshold=leg.floor,
                with_payload=with_payload,
                params=params,
            )

        requests = [
            request(leg, query, _FILTERED_DENSE if leg.kind is LegKind.DENSE else _idf_over(where))
            for leg, query, run in zip(legs, queries, runs, strict=True)
            if run
        ]
        with engine_errors(collection):
            found = iter(held.shard.query_batch(QueryBatchRequest(requests)))
            results = [list(next(found)) if run else [] for run in runs]
            weak = weak_dense_legs(legs, results)
            if weak:
                again = [request(legs[i], queries[i], _EXACT) for i in weak]
                exact = held.shard.query_batch(QueryBatchRequest(again))
                for position, points in zip(weak, exact, strict=True):
                    results[position] = list(points)
        return results, len(weak)

    def _leg_query(self, leg: Leg) -> Query:
        if leg.kind is LegKind.DENSE and leg.dense is not None:
            if leg.vector == DENSE_VECTOR:
                return Query.Nearest(self._dense(leg.dense), using=DENSE_VECTOR)
            return Query.Nearest(list(leg.dense), using=leg.vector)
        if leg.kind is not LegKind.DENSE and leg.sparse is not None:
            using = SPARSE_VECTOR if leg.kind is LegKind.KEYWORD else DOCUMENT_SPARSE_VECTOR
            return Query.Nearest(_sparse(leg.sparse), using=using)
        raise ValueError(f"a {leg.kind} leg without its vector")

    def _dense(self, vector: Sequence[float]) -> list[float]:
        return dense_values(vector, self._dense_dim)


#: The dense leg's graph search follows the Scope's filter (ACORN) whatever share of the
#: points it keeps, and keeps `DENSE_EF` candidates: without them a scope of a few
#: percent of a large collection misses about half its exact top 10, and a wide one some
#: (docs/decisions/filtered-search.md). Scopes small enough for Qdrant's exact path
#: search as before.
_FILTERED_DENSE = SearchParams(
    hnsw_ef=DENSE_EF,
    acorn=AcornSearchParams(enable=True, max_selectivity=ACORN_MAX_SELECTIVITY),
)
#: A weak dense answer's second search (`weak_dense_legs`).
_EXACT = SearchParams(exact=True)


def _idf_over(corpus: Filter) -> SearchParams:
    return SearchParams(idf=IdfParams(corpus=corpus))


def _stored_cells(shard: EdgeShard, point_ids: list[PointId]) -> frozenset[Cell]:
    """The cells of those of these points the shard holds."""
    keys = [PayloadKey.TENANT_ID, PayloadKey.KNOWLEDGE_BASE_ID, PayloadKey.CLASSIFICATION]
    cells: set[Cell] = set()
    for record in shard.retrieve(point_ids, with_payload=list(keys), with_vector=False):
        payload = record.payload or {}
        tenant, kb, label = (str(payload.get(key)) for key in keys)
        cells.add((tenant, kb, label))
    return frozenset(cells)


def _document_pages(passages: Sequence[Passage], points: Sequence[Point]) -> list[list[Point]]:
    """`points` (one per passage) in pages of `UPSERT_PAGE` or more, never splitting a
    document's passages (a reader sees a document's new version whole or not at all)."""
    pages: list[list[Point]] = [[]]
    previous: tuple[str, str] | None = None
    for passage, point in zip(passages, points, strict=True):
        document = (passage.payload.document_id, passage.payload.document_version)
        if document != previous and len(pages[-1]) >= UPSERT_PAGE:
            pages.append([])
        pages[-1].append(point)
        previous = document
    return pages


def _known(held: Shard, vector: str) -> str:
    """`vector` when the shard has that dense vector set; ValueError otherwise."""
    if vector not in held.dense_dims:
        raise ValueError(f"the collection has no dense vector set {vector!r}")
    return vector


def _document(document_id: str) -> FieldCondition:
    return FieldCondition(key=PayloadKey.DOCUMENT_ID, match=MatchValue(document_id))


def _term_query(term: int) -> SparseVector:
    """A sparse query of one term, of weight 1."""
    return SparseVector(indices=[term], values=[1.0])


def _sparse(vector: PassageSparse) -> SparseVector:
    indices, values = sparse_values(vector)
    return SparseVector(indices=indices, values=values)
