"""The embedded Index adapter: Qdrant Edge, one shard directory per collection.

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
tenant large enough for one, compact sparse indexes), which cuts a SciFact turn's ranking
call from 21 to 8 ms (README, "Search indexes on the embedded engine"). The binding holds
the GIL while it runs (2.5 s for 13,000 passages), so the gateway calls it at start,
before it serves, as do `kbgate ingest --data-dir`, the eval and the benchmarks after they
ingest. While it serves, `index_written` builds the indexes of collections that took many
writes in a child process, on a copy of the shard, and swaps the copy in
(`ingest.edge_build`).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_edge import (
    AcornSearchParams,
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FacetRequest,
    FieldCondition,
    Filter,
    HasIdCondition,
    HasVectorCondition,
    HnswIndexConfig,
    IdfParams,
    IsEmptyCondition,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Memory,
    Modifier,
    Point,
    Query,
    QueryBatchRequest,
    QueryRequest,
    ScoredPoint,
    ScrollRequest,
    SearchParams,
    SparseVector,
    UpdateOperation,
)

from ingest import edge_build
from ingest.edge_log_pages import page_out_log
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    IndexUnavailableError,
    Leg,
    LegKind,
    Passage,
    QueryResult,
    RankResult,
    StoredPassage,
    checked_collection,
    droppable_collection,
    is_collection_name,
)
from ingest.index import SparseVector as PassageSparse
from ingest.index_common import (
    ACORN_MAX_SELECTIVITY,
    DENSE_EF,
    GRAPH_M,
    SCROLL_PAGE,
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
from ingest.index_common import hit as _hit
from ingest.index_common import ranked_point as _ranked
from ingest.payload import (
    INDEXED_KEYS,
    PII_ANALYZER_PATH,
    REF_KEYS,
    TENANT_KEY,
    PassagePayload,
    PayloadKey,
    PiiAnalysis,
    Scope,
    from_payload,
    is_valid_org_id,
    pii_payload,
    to_payload,
)

if TYPE_CHECKING:
    from qdrant_edge import ConditionType, PayloadIndexInfo, PointId, Record


EDGE_DIR = "qdrant-edge"
#: the config Edge writes into a shard's directory
_EDGE_CONFIG_FILE = "edge_config.json"


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
    return Filter(must=[*must, *extra], must_not=list(excluding) or None)


@dataclass(slots=True)
class _Shard:
    shard: EdgeShard
    #: the shard's directory (a generation's after a swap: `ingest.edge_build`)
    path: Path
    #: created with the whole-document BM25 vector (shards made before it was added lack it)
    document_keywords: bool
    writes: threading.Lock = field(default_factory=threading.Lock)
    #: points written since the shard was opened or last indexed
    unindexed: int = 0
    #: while a copy is indexed beside it: every write since the copy, replayed onto it
    journal: list[UpdateOperation] | None = None
    #: swapped for its indexed copy: a writer that waited for `writes` writes to the copy
    retired: bool = False
    #: the collection was dropped: a writer that waited for `writes` fails
    dropped: bool = False

    def update(self, operation: UpdateOperation, *, durable: bool = True) -> None:
        """Apply one write (and make it durable unless told not to); the caller holds
        `writes`."""
        self.shard.update(operation)
        if self.journal is not None:
            self.journal.append(operation)
        if durable:
            self.shard.flush()


class EdgeIndex:
    """Qdrant Edge shards under `data_dir / "qdrant-edge"`, opened on demand and kept open.

    Thread-safe; one process per data dir (a shard's WAL is locked while open). Edge's
    Python binding holds the GIL for the whole of every call (`bench.edge_gil`).
    """

    holds_the_gil = True

    def __init__(
        self,
        data_dir: Path,
        dense_dim: int = 384,
        *,
        indexing_threshold_kb: int | None = None,
        search_threads: int | None = None,
    ) -> None:
        """`indexing_threshold_kb`: the vector data (KB) from which `optimize` indexes a
        segment and searches use its graph; Edge's defaults when None; 0 never indexes
        (`optimize` does nothing). Tests set it low to run small collections through
        the HNSW graph. `search_threads`: each shard's search pool, set on every open (a
        shard keeps the count it was last opened with, and Edge would apply that); None:
        one per core this process may use (`_search_threads_default`)."""
        if search_threads is not None and search_threads < 1:
            raise ValueError("search_threads must be at least 1")
        self._root = Path(data_dir) / EDGE_DIR
        self._dense_dim = dense_dim
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_threads = search_threads or _search_threads_default()
        self._lock = threading.Lock()
        self._shards: dict[str, _Shard] = {}
        self._builds = edge_build.BuildChildren()
        self._building = threading.Lock()  # one build at a time: each keeps a journal
        self._closed = False

    def ensure_collection(self, collection: str) -> None:
        self._open(collection)

    def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        existing = self._existing(collection)
        # Points are built (and checked) before a new shard is made; it gets the vector.
        document_keywords = existing is None or existing.document_keywords
        points = [self._point(passage, document_keywords) for passage in passages]
        with self._writing(collection, create=True) as held:
            if held is None:  # pragma: no cover - created when asked to
                raise IndexUnavailableError(f"could not open collection {collection!r}")
            held.update(UpdateOperation.upsert_points(points))
            held.unindexed += len(points)

    def document_keywords(self, collection: str) -> bool:
        held = self._existing(collection)
        return held is not None and held.document_keywords

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        found, _ = self._query_batch(collection, scope, legs, with_payload=True)
        return QueryResult(legs=tuple(tuple(map(_hit, points)) for points in found))

    def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        found, exact_checks = self._query_batch(
            collection, scope, legs, with_payload=list(REF_KEYS)
        )
        legs_found = tuple(tuple(map(_ranked, points)) for points in found)
        return RankResult(legs=legs_found, exact_checks=exact_checks)

    def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        held = self._existing(collection)
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
        with _engine_errors(collection):
            holders = {
                name: held.shard.count(
                    CountRequest(exact=True, filter=_scope_filter(scope, HasVectorCondition(name)))
                )
                for name in terms
            }
            searches = IdfSearches.plan(terms, holders)
            requests = [
                *(
                    self._idf_count(name, term, holders[name], where)
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

    def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        ids: set[PointId] = {checked_point_id(pid) for pid in point_ids}
        held = self._existing(collection)
        if held is None or not ids:
            return {}
        where = _scope_filter(scope, HasIdCondition(ids))
        with _engine_errors(collection):
            records, _ = held.shard.scroll(
                ScrollRequest(limit=len(ids), filter=where, with_payload=True)
            )
        return {str(record.id): from_payload(record.payload or {}) for record in records}

    def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        extra = () if document_id is None else (_document(document_id),)
        held = self._existing(collection)
        if held is None:
            return 0
        with _engine_errors(collection):
            return held.shard.count(CountRequest(exact=True, filter=_scope_filter(scope, *extra)))

    def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        where = _scope_filter(scope, _document(document_id))
        held = self._existing(collection)
        if held is None:
            return []

        def page(offset: PointId | None) -> tuple[list[Record], PointId | None]:
            return held.shard.scroll(
                ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=where, with_payload=True)
            )

        with _engine_errors(collection):
            return stored_passages(scroll_all(page))

    def document_ids(self, collection: str, scope: Scope) -> set[str]:
        where = _scope_filter(scope)
        held = self._existing(collection)
        if held is None:
            return set()
        with _engine_errors(collection):
            # A facet returns its top `limit` values: the point count bounds the distinct ones.
            points = held.shard.count(CountRequest(exact=True, filter=where))
            if points == 0:
                return set()
            facet = held.shard.facet(
                FacetRequest(key=PayloadKey.DOCUMENT_ID, limit=points, exact=True, filter=where)
            )
        return {str(hit.value) for hit in facet.hits}

    def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        ids: set[PointId] = {checked_point_id(pid) for pid in point_ids}
        if not ids:
            return 0
        return self._delete(collection, _scope_filter(scope, HasIdCondition(ids)))

    def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        return self._delete(collection, _scope_filter(scope, _document(document_id)))

    def delete_scope(self, collection: str, scope: Scope) -> int:
        return self._delete(collection, _scope_filter(scope))

    def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        where = _scope_filter(scope)
        held = self._existing(collection)
        if held is None:
            return [], None
        with _engine_errors(collection):
            records, after = held.shard.scroll(
                ScrollRequest(
                    offset=start, limit=limit, filter=where, with_payload=True, with_vector=True
                )
            )
        return [passage_of(record) for record in records], None if after is None else str(after)

    def drop_collection(self, collection: str) -> int | None:
        droppable_collection(collection)
        # Under the open lock: no call can load or create the shard while it goes.
        with self._lock:
            if self._closed:
                raise IndexUnavailableError("the Qdrant Edge index is closed")
            held = self._shards.pop(collection, None)
            if held is None and not self._on_disk(collection):
                return None
            with _engine_errors(collection):
                held = held or self._load_or_create(self._live_directory(collection))
                with held.writes:
                    points = held.shard.info().points_count  # the whole collection goes
                    held.shard.close()
                    held.dropped = True
                edge_build.remove_collection(self._root, collection, held.path)
        return points

    def backfill_org(self, collection: str, scope: Scope) -> int:
        if scope.strict:
            raise ValueError("backfill_org needs a non-strict scope: strict ones never see legacy")
        if not is_valid_org_id(scope.org_id):
            raise ValueError(f"cannot backfill an invalid org id: {scope.org_id!r}")
        where = _scope_filter(scope, IsEmptyCondition(key=PayloadKey.ORG_ID))
        with self._writing(collection) as held:
            if held is None:
                return 0
            updated = held.shard.count(CountRequest(exact=True, filter=where))
            if updated:
                held.update(
                    UpdateOperation.set_payload_by_filter(where, {PayloadKey.ORG_ID: scope.org_id})
                )
        return updated

    def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        current = FieldCondition(key=PII_ANALYZER_PATH, match=MatchValue(analyzer))
        where = _scope_filter(scope, excluding=[current])
        held = self._existing(collection)
        if held is None:
            return [], None
        with _engine_errors(collection):
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
        with self._writing(collection) as held:
            if held is None:
                return 0
            inside = held.shard.count(
                CountRequest(exact=True, filter=_scope_filter(scope, HasIdCondition(set(ids))))
            )
            for pid, analysis in ids.items():
                where = _scope_filter(scope, HasIdCondition({pid}))
                payload = {PayloadKey.PII.value: pii_payload(analysis)}
                held.update(UpdateOperation.set_payload_by_filter(where, payload), durable=False)
            held.shard.flush()
        return inside

    def optimize(self) -> list[str]:
        """Every collection's indexes, built in this process: it stops while they build."""
        if self._indexing_threshold_kb == 0:
            return []
        changed, failures = [], []
        for collection in self._collections_on_disk():
            try:  # one collection failing must not keep the others plain
                held = self._open(collection)
                with held.writes, _engine_errors(collection):
                    if held.shard.optimize():
                        changed.append(collection)
            except IndexUnavailableError as error:
                failures.append(str(error))
        if failures:
            raise IndexUnavailableError(f"indexing failed: {'; '.join(failures)}")
        return changed

    def index_written(self) -> list[str]:
        """Build, beside the serving process, the indexes of the open collections that took
        enough writes to fill an indexed segment since they were opened or last indexed;
        return the collections swapped for their indexed copy. Slow (the build's seconds,
        in a child process), but reads and writes go on meanwhile: writes wait only while
        the shard is copied and while the writes made during the build are replayed, and
        the process stops only while it loads the indexed copy (a fraction of a second).
        """
        if self._indexing_threshold_kb == 0:
            return []
        swapped, failures = [], []
        with self._building:
            due = [name for name, held in list(self._shards.items()) if held.unindexed >= self._due]
            for collection in due:
                try:  # one collection failing must not keep the others plain
                    if self._index_beside(collection):
                        swapped.append(collection)
                except IndexUnavailableError as error:
                    failures.append(str(error))
        if failures:
            raise IndexUnavailableError(f"indexing failed: {'; '.join(failures)}")
        return swapped

    def optimize_directory(self, path: Path) -> bool:
        """Build the indexes of the shard in `path` (not open elsewhere), in this process;
        whether anything changed. The build child's work (`ingest.edge_build`)."""
        held = self._load_or_create(path)
        try:
            with _engine_errors(path.name):
                built = held.shard.optimize()
                held.shard.flush()
        finally:
            held.shard.close()
        return built

    def _index_beside(self, collection: str) -> bool:
        held = self._existing(collection)
        if held is None:
            return False
        copy = edge_build.next_generation(self._root, collection)
        with held.writes:
            if self._let_go(held):
                return False
            with _engine_errors(collection):
                held.shard.flush()
            shutil.copytree(held.path, copy)
            held.journal, written = [], held.unindexed
        try:
            built = self._builds.build(copy, self._dense_dim, self._indexing_threshold_kb)
            fresh = self._load_copy(collection, copy) if built else None
        except IndexUnavailableError:
            self._forget_copy(held, copy, written=0)
            if self._let_go(held):  # dropped or closed meanwhile: nothing to build
                return False
            raise
        except BaseException:
            self._forget_copy(held, copy, written=0)
            raise
        if fresh is None:  # nothing large enough to index: not tried again until more writes
            self._forget_copy(held, copy, written)
            return False
        swapped = False
        try:
            swapped = self._swap(collection, held, fresh, written)
        finally:
            if not swapped:
                fresh.shard.close()
                shutil.rmtree(copy, ignore_errors=True)
        if not swapped:
            return False
        # A reader may have taken the old shard just before the swap: it is closed only
        # once any such call is long done.
        time.sleep(_RETIRED_GRACE_S)
        with _engine_errors(collection):
            held.shard.close()
        shutil.rmtree(held.path, ignore_errors=True)
        return True

    def _let_go(self, held: _Shard) -> bool:
        """Whether the shard was dropped or swapped, or the index closed (by other threads)."""
        return held.retired or held.dropped or self._closed

    def _load_copy(self, collection: str, copy: Path) -> _Shard:
        if not (copy / _EDGE_CONFIG_FILE).is_file():  # never create an empty one instead
            raise IndexUnavailableError(f"the indexed copy of {collection!r} is gone")
        try:
            with _engine_errors(collection):
                return self._load_or_create(copy)
        except ValueError as error:
            raise IndexUnavailableError(f"the indexed copy of {collection!r}: {error}") from error

    @staticmethod
    def _forget_copy(held: _Shard, copy: Path, written: int) -> None:
        with held.writes:
            held.journal = None
            held.unindexed -= written
        shutil.rmtree(copy, ignore_errors=True)

    def _swap(self, collection: str, held: _Shard, fresh: _Shard, written: int) -> bool:
        """Replay onto `fresh` the writes `held` took since it was copied, then put it in
        `held`'s place; False (nothing changed) when the collection was dropped or the
        index closed meanwhile."""
        with held.writes:
            journal, held.journal = held.journal or [], None
            with self._lock:
                if self._closed or self._shards.get(collection) is not held:
                    return False
                with _engine_errors(collection):
                    for operation in journal:
                        fresh.shard.update(operation)
                    fresh.shard.flush()
                    if fresh.shard.info().points_count != held.shard.info().points_count:
                        raise IndexUnavailableError(f"the indexed copy of {collection!r} differs")
                edge_build.point_to(self._root, collection, fresh.path)
                self._shards[collection] = fresh
            held.retired = True
            fresh.unindexed = held.unindexed - written
        return True

    @contextmanager
    def _writing(self, collection: str, *, create: bool = False) -> Iterator[_Shard | None]:
        """The collection's shard with its write lock held; None when it has none and
        `create` is not asked. A shard swapped for its indexed copy while the caller
        waited for the lock hands the write to the copy."""
        while True:
            held = self._open(collection) if create else self._existing(collection)
            if held is None:
                yield None
                return
            with held.writes:
                if held.retired:
                    continue
                if held.dropped:
                    raise IndexUnavailableError(f"collection {collection!r} was dropped")
                with _engine_errors(collection):
                    yield held
                return

    def _collections_on_disk(self) -> list[str]:
        if not self._root.is_dir():
            return []
        names = {path.name for path in self._root.iterdir() if path.is_dir()}
        names |= set(edge_build.swapped_collections(self._root))
        return sorted(name for name in names if is_collection_name(name))

    def _on_disk(self, collection: str) -> bool:
        return (self._root / collection).exists() or edge_build.pointer_file(
            self._root, collection
        ).exists()

    def _live_directory(self, collection: str) -> Path:
        return edge_build.live_directory(self._root, checked_collection(collection))

    def ping(self) -> None:
        if self._closed:
            raise IndexUnavailableError("the Qdrant Edge index is closed")

    def close(self) -> None:
        self._builds.stop()
        with self._lock:
            self._closed = True
            shards, self._shards = self._shards, {}
        failures = []
        for collection, held in shards.items():
            with held.writes:
                try:
                    held.shard.flush()
                    held.shard.close()
                except Exception as exc:  # one failure must not keep the others open
                    failures.append(f"{collection}: {exc}")
        if failures:
            raise IndexUnavailableError(f"closing Qdrant Edge shards failed: {'; '.join(failures)}")

    def _delete(self, collection: str, where: Filter) -> int:
        with self._writing(collection) as held:
            if held is None:
                return 0
            deleted = held.shard.count(CountRequest(exact=True, filter=where))
            if deleted:
                held.update(UpdateOperation.delete_points_by_filter(where))
        return deleted

    def _existing(self, collection: str) -> _Shard | None:
        return self._get(collection, create=False)

    def _open(self, collection: str) -> _Shard:
        held = self._get(collection, create=True)
        if held is None:  # pragma: no cover - _get creates when asked to
            raise IndexUnavailableError(f"could not open collection {collection!r}")
        return held

    def _get(self, collection: str, *, create: bool) -> _Shard | None:
        held = self._shards.get(collection)  # open shards need no lock: loads hold it
        if held is not None and not self._closed:
            return held
        checked_collection(collection)
        with self._lock:
            if self._closed:
                raise IndexUnavailableError("the Qdrant Edge index is closed")
            held = self._shards.get(collection)
            if held is None and (create or self._on_disk(collection)):
                with _engine_errors(collection):
                    held = self._load_or_create(self._live_directory(collection))
                self._shards[collection] = held
            return held

    def _load_or_create(self, path: Path) -> _Shard:
        document_keywords = not path.exists() or _has_document_keywords(path)
        sparse = [SPARSE_VECTOR, *([DOCUMENT_SPARSE_VECTOR] if document_keywords else [])]
        config = EdgeConfig(
            vectors={
                # Read from the page cache as searches need them, not loaded whole at start:
                # a shard's open segment alone maps 32 MB (docs/decisions/edge-memory.md).
                DENSE_VECTOR: EdgeVectorParams(
                    size=self._dense_dim, distance=Distance.Cosine, memory=Memory.Cold
                )
            },
            sparse_vectors={name: EdgeSparseVectorParams(modifier=Modifier.Idf) for name in sparse},
            max_search_threads=self._search_threads,
            **self._indexing_config(),
        )
        # Loading with the config checks it against the stored segments, and also
        # recovers a directory left half-created by a crash.
        if path.exists():
            shard = EdgeShard.load(str(path), config)
        else:
            shard = EdgeShard.create(str(path), config)
        try:
            indexed = shard.info().payload_schema
            stale = [key for key in INDEXED_KEYS if not _index_as_wanted(indexed.get(key), key)]
            for key in stale:
                shard.update(UpdateOperation.create_field_index(key, _keyword_index(key)))
            if stale:
                shard.flush()
            page_out_log(path)  # read whole by the load, not again until the next one
        except BaseException:
            shard.close()  # release the directory lock
            raise
        return _Shard(shard, path, document_keywords)

    @property
    def _due(self) -> int:
        """Points written from which `index_written` builds: enough dense vectors to pass
        the indexing threshold, so that the build has a segment to index."""
        threshold_kb = self._indexing_threshold_kb or _EDGE_THRESHOLD_KB
        return max(1, threshold_kb * 1024 // (self._dense_dim * 4))

    def _indexing_config(self) -> dict[str, Any]:
        threshold = self._indexing_threshold_kb
        if threshold == 0:
            return {}
        config: dict[str, Any] = {"hnsw_config": _graphs(threshold or _EDGE_THRESHOLD_KB)}
        if threshold:
            config["optimizers"] = EdgeOptimizersConfig(indexing_threshold=threshold)
        return config

    def _point(self, passage: Passage, document_keywords: bool) -> Point:
        vectors: dict[str, Any] = {
            DENSE_VECTOR: self._dense(passage.dense),
            SPARSE_VECTOR: _sparse(passage.sparse),
        }
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
        held = self._existing(collection)
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
        with _engine_errors(collection):
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
            return Query.Nearest(self._dense(leg.dense), using=DENSE_VECTOR)
        if leg.kind is not LegKind.DENSE and leg.sparse is not None:
            using = SPARSE_VECTOR if leg.kind is LegKind.KEYWORD else DOCUMENT_SPARSE_VECTOR
            return Query.Nearest(_sparse(leg.sparse), using=using)
        raise ValueError(f"a {leg.kind} leg without its vector")

    def _dense(self, vector: Sequence[float]) -> list[float]:
        return dense_values(vector, self._dense_dim)


def _search_threads_default() -> int:
    """One search thread per core the process may use. Edge's own default (eight threads
    on two cores here) took 1.3 ms more CPU a turn and served eight callers fewer turns a
    second; one thread (searching in the calling thread, on the question model's core)
    made one caller's turn about 1 ms slower (docs/benchmarks.md). Edge holds the GIL
    for a whole call, so the gateway never runs two searches at once: the pool only
    spreads one call's segments."""
    return len(os.sched_getaffinity(0))


@contextmanager
def _engine_errors(collection: str) -> Iterator[None]:
    """Edge reports engine failures (I/O, a closed shard) as bare `Exception`s."""
    try:
        yield
    except (TypeError, ValueError):
        raise
    except Exception as exc:
        raise IndexUnavailableError(f"Qdrant Edge failed on {collection!r}: {exc}") from exc


#: Edge's own threshold (KB of vectors) from which a segment is indexed and a filtered
#: search takes the graph rather than the exact path.
_EDGE_THRESHOLD_KB = 10_000
#: The dense leg's graph search follows the Scope's filter (ACORN) whatever share of the
#: points it keeps, and keeps `DENSE_EF` candidates: without them a scope of a few
#: percent of a large collection misses about half its exact top 10, and a wide one some
#: (docs/decisions/filtered-search.md). Scopes small enough for Qdrant's exact path
#: search as before.
_FILTERED_DENSE = SearchParams(
    hnsw_ef=DENSE_EF,
    acorn=AcornSearchParams(enable=True, max_selectivity=ACORN_MAX_SELECTIVITY),
)
#: How long a shard swapped for its indexed copy stays open for calls already under way.
_RETIRED_GRACE_S = 1.0
#: A weak dense answer's second search (`weak_dense_legs`).
_EXACT = SearchParams(exact=True)


def _graphs(full_scan_threshold_kb: int) -> HnswIndexConfig:
    """One graph per tenant, none over the whole collection: every search carries its
    tenant (the Scope), so a tenant with more vectors than the threshold searches its own
    graph (`payload_m` links on `tenantId`, the only key with graph links) and a smaller
    one is searched exactly. Built in about half the time of a collection-wide graph
    with links for every key's values (docs/decisions/edge-graphs.md)."""
    return HnswIndexConfig(
        m=0, ef_construct=100, full_scan_threshold=full_scan_threshold_kb, payload_m=GRAPH_M
    )


def _keyword_index(key: str) -> KeywordIndexParams:
    """The tenant key groups each tenant's points together and carries the graph links;
    the Scope's other keys only filter."""
    tenant = key == TENANT_KEY
    return KeywordIndexParams(is_tenant=tenant, enable_hnsw=tenant)


def _index_as_wanted(info: PayloadIndexInfo | None, key: str) -> bool:
    """Whether a shard's index of `key` is `_keyword_index(key)` (Edge builds graph links
    for an index's values unless told not to); a different one is made again."""
    params = None if info is None else info.params
    wanted = _keyword_index(key)
    return (
        isinstance(params, KeywordIndexParams)
        and params.is_tenant is wanted.is_tenant
        and (params.enable_hnsw is not False) is wanted.enable_hnsw
    )


def _idf_over(corpus: Filter) -> SearchParams:
    return SearchParams(idf=IdfParams(corpus=corpus))


def _has_document_keywords(path: Path) -> bool:
    """Whether an existing shard was created with the whole-document BM25 vector, as the
    config Edge keeps in its directory says. A directory without that file was left
    half-created by a crash (Edge writes it first): it is created afresh, with it."""
    try:
        config = json.loads((path / _EDGE_CONFIG_FILE).read_text())
    except FileNotFoundError:
        return True
    return DOCUMENT_SPARSE_VECTOR in config.get("sparse_vectors", {})


def _document(document_id: str) -> FieldCondition:
    return FieldCondition(key=PayloadKey.DOCUMENT_ID, match=MatchValue(document_id))


def _term_query(term: int) -> SparseVector:
    """A sparse query of one term, of weight 1."""
    return SparseVector(indices=[term], values=[1.0])


def _sparse(vector: PassageSparse) -> SparseVector:
    indices, values = sparse_values(vector)
    return SparseVector(indices=indices, values=values)
