"""The scale-out Index adapter: qdrant-client against a Qdrant server or cluster.

`ServerIndex.local` runs qdrant-client's local mode (a pure-Python emulation,
for fast tests; it ignores payload indexes). Writes use `wait=True`: they are
applied and in the server's WAL when the call returns (on as many copies of each
shard as the layout's write consistency asks); fsync policy is the server's.
Keyword legs compute IDF over the scope's points only, which needs Qdrant
`MIN_SERVER_VERSION`: the adapter reads the server's version when it connects and
refuses an older one, and uses no server it has not checked.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    IncompatibleServerError,
    IndexBuilds,
    IndexUnavailableError,
    Leg,
    LegKind,
    Passage,
    StoredPassage,
    checked_collection,
    droppable_collection,
)
from ingest.index_common import (
    SCROLL_PAGE,
    AdapterReads,
    IdfSearches,
    checked_point_id,
    dense_values,
    keyword_terms,
    legs_idf,
    passage_of,
    scroll_all,
    stored_passages,
    weak_dense_legs,
)
from ingest.payload import (
    INDEXED_KEYS,
    PII_ANALYZER_PATH,
    PayloadKey,
    PiiAnalysis,
    Scope,
    is_valid_org_id,
    pii_payload,
    to_payload,
)
from ingest.qdrant_server_requests import (
    EXACT,
    FILTERED_DENSE,
    GRAPHS,
    MIN_SERVER_VERSION,
    engine_errors,
    index_as_wanted,
    keyword_index,
    match,
    parse_version,
    sparse,
    term_request,
)

_UPSERT_BATCH = 256
_NOT_FOUND = 404


def _scope_filter(
    scope: Scope, *extra: models.Condition, excluding: Sequence[models.Condition] = ()
) -> models.Filter:
    """The only place a Scope becomes a qdrant-client filter; `extra` narrows it further and
    `excluding` leaves out the points matching any of its conditions."""
    must: list[models.Condition] = [
        match(PayloadKey.TENANT_ID, scope.tenant_id),
        models.FieldCondition(
            key=PayloadKey.KNOWLEDGE_BASE_ID, match=models.MatchAny(any=sorted(scope.kb_ids))
        ),
        models.FieldCondition(
            key=PayloadKey.CLASSIFICATION, match=models.MatchAny(any=list(scope.labels))
        ),
    ]
    if scope.strict:
        must.append(match(PayloadKey.ORG_ID, scope.org_id))
    return models.Filter(must=[*must, *extra], must_not=list(excluding) or None)


@dataclass(frozen=True, slots=True)
class CollectionLayout:
    """How the collections kbgate creates are spread over a cluster's nodes."""

    shards: int = 1
    replication_factor: int = 1
    write_consistency: int = 1


class ServerIndex(AdapterReads):
    """Collections on a Qdrant server (or in qdrant-client local mode)."""

    #: A server call waits on the network without the GIL; local mode is Python.
    holds_the_gil = False

    def __init__(
        self,
        client: QdrantClient,
        dense_dim: int = 384,
        layout: CollectionLayout | None = None,
        *,
        verified: bool = False,
    ) -> None:
        self._client = client
        self._dense_dim = dense_dim
        self._layout = layout or CollectionLayout()
        #: the server's version was read and is new enough
        self._verified = verified
        self._lock = threading.RLock()
        # Local mode is a single-threaded emulation (no locks inside); the gateway calls
        # the index from worker threads, so there every engine call takes the lock.
        self._serialize = False
        self._known: set[str] = set()  # collections seen to exist (`_calling` forgets)
        self._ensured: set[str] = set()  # ... and whose payload indexes were checked
        #: per collection: created with the whole-document BM25 vector (older ones lack it)
        self._document_keywords: dict[str, bool] = {}
        self._payload_indexes = True
        self._closed = False

    def _serialized(self) -> AbstractContextManager[object]:
        return self._lock if self._serialize else nullcontext()

    @classmethod
    def connect(
        cls,
        url: str,
        api_key: str | None,
        timeout_s: float,
        dense_dim: int = 384,
        layout: CollectionLayout | None = None,
    ) -> ServerIndex:
        """A client for a server whose version is checked now if it answers.

        Raises IncompatibleServerError for a server older than `MIN_SERVER_VERSION`.
        A server that does not answer yet is checked by the first call that reaches it
        (readiness pings it); until then every call fails with IndexUnavailableError.
        """
        client = QdrantClient(
            url=url,
            api_key=api_key,
            timeout=max(1, math.ceil(timeout_s)),
            check_compatibility=False,  # `verify_version` refuses, the client only warns
        )
        index = cls(client, dense_dim, layout)
        try:
            index.verify_version()
        except IndexUnavailableError:
            pass
        except IncompatibleServerError:
            client.close()
            raise
        return index

    def verify_version(self) -> None:
        """Read the server's version; IncompatibleServerError if it is too old."""
        with self._calling("(version)"):
            reported = self._client.info().version
        if parse_version(reported) < MIN_SERVER_VERSION:
            needed = ".".join(map(str, MIN_SERVER_VERSION))
            raise IncompatibleServerError(
                f"the Qdrant server reports version {reported}; kbgate needs Qdrant {needed} "
                "or newer (keyword scores use per-scope IDF). Upgrade the server."
            )
        self._verified = True

    @classmethod
    def local(cls, path: Path | None, dense_dim: int = 384) -> ServerIndex:
        """qdrant-client local mode: in memory when `path` is None."""
        client = QdrantClient(location=":memory:") if path is None else QdrantClient(path=str(path))
        index = cls(client, dense_dim, verified=True)  # the client's own emulation
        index._payload_indexes = False  # local mode ignores them and warns
        index._serialize = True
        return index

    def ensure_collection(self, collection: str) -> None:
        self._check(collection)
        if collection in self._ensured:
            return
        with self._lock, self._calling(collection):
            if not self._client.collection_exists(collection):
                self._create(collection)
            if self._payload_indexes:
                self._index_for_scopes(collection)
            self._known.add(collection)
            self._ensured.add(collection)

    def _index_for_scopes(self, collection: str) -> None:
        """The Scope keys' payload indexes and the per-tenant graphs; a collection made
        before them is brought in line (the server rebuilds its graphs in the background)."""
        info = self._client.get_collection(collection)
        graphs = info.config.hnsw_config
        if (graphs.m, graphs.payload_m) != (GRAPHS.m, GRAPHS.payload_m):
            self._client.update_collection(collection, hnsw_config=GRAPHS)
        for key in INDEXED_KEYS:
            if not index_as_wanted(info.payload_schema.get(key), key):
                self._client.create_payload_index(collection, key, keyword_index(key), wait=True)

    def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        # Points are built (and checked) before a new collection is made; it gets the vector.
        document_keywords = not self._exists(collection) or self.document_keywords(collection)
        points = [self._point(passage, document_keywords) for passage in passages]
        self.ensure_collection(collection)
        with self._serialized(), self._calling(collection):
            for start in range(0, len(points), _UPSERT_BATCH):
                batch = points[start : start + _UPSERT_BATCH]
                self._client.upsert(collection, batch, wait=True)

    def document_keywords(self, collection: str) -> bool:
        known = self._document_keywords.get(collection)
        if known is not None:
            return known
        if not self._exists(collection):
            return False
        with self._serialized(), self._calling(collection):
            sparse = self._client.get_collection(collection).config.params.sparse_vectors
        known = self._document_keywords[collection] = DOCUMENT_SPARSE_VECTOR in (sparse or {})
        return known

    def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        if not self._exists(collection):
            return legs_idf(legs, {})
        document_keywords = self.document_keywords(collection)
        terms = {
            name: held_terms
            for name, held_terms in keyword_terms(legs).items()
            if document_keywords or name != DOCUMENT_SPARSE_VECTOR
        }
        if not terms:
            return legs_idf(legs, {})
        where = _scope_filter(scope)
        # Probes compute IDF over the scope only, as the keyword legs do.
        over_scope = models.SearchParams(idf=models.IdfCorpusParams(corpus=where))
        with self._serialized(), self._calling(collection):
            holders = {
                name: self._client.count(
                    collection,
                    _scope_filter(scope, models.HasVectorCondition(has_vector=name)),
                    exact=True,
                ).count
                for name in terms
            }
            searches = IdfSearches.plan(terms, holders)
            requests = [
                *(
                    term_request(name, term, where, limit=holders[name], vector=False)
                    for name, term in searches.counted
                ),
                *(
                    term_request(name, term, where, limit=1, vector=True, params=over_scope)
                    for name, term in searches.probed
                ),
            ]
            responses = self._client.query_batch_points(collection, requests) if requests else []
        return legs_idf(legs, searches.idf([response.points for response in responses]))

    def _points(
        self, collection: str, scope: Scope, point_ids: Sequence[str], *, terms: bool
    ) -> list[models.Record]:
        """Those points inside the scope: with their payloads, or (`terms`) with their
        sparse vectors only."""
        ids: list[models.ExtendedPointId] = [
            checked_point_id(pid) for pid in dict.fromkeys(point_ids)
        ]
        if not ids or not self._exists(collection):
            return []
        names = [SPARSE_VECTOR]
        if terms and self.document_keywords(collection):
            names.append(DOCUMENT_SPARSE_VECTOR)
        where = _scope_filter(scope, models.HasIdCondition(has_id=ids))
        with self._serialized(), self._calling(collection):
            records, _ = self._client.scroll(
                collection,
                where,
                limit=len(ids),
                with_payload=not terms,
                with_vectors=names if terms else False,
            )
        return records

    def _query_batch(
        self,
        collection: str,
        scope: Scope,
        legs: Sequence[Leg],
        *,
        with_payload: bool | list[str],
    ) -> tuple[list[list[models.ScoredPoint]], int]:
        """Every leg in one call, then the weak dense legs (`weak_dense_legs`) again,
        exactly, as on Qdrant Edge. Answers each leg's points and how many were searched
        again."""
        where = _scope_filter(scope)
        requests = [self._leg_request(leg, where, with_payload) for leg in legs]
        if not requests or not self._exists(collection):
            return [[] for _ in legs], 0
        # A collection made before document keyword vectors finds nothing on that leg.
        document_keywords = self.document_keywords(collection)
        runs = [document_keywords or leg.kind is not LegKind.DOCUMENT_KEYWORD for leg in legs]
        wanted = [request for request, run in zip(requests, runs, strict=True) if run]
        with self._serialized(), self._calling(collection):
            responses = iter(self._client.query_batch_points(collection, wanted) if wanted else [])
            results = [next(responses).points if run else [] for run in runs]
            weak = weak_dense_legs(legs, results)
            if weak:
                again = [requests[i].model_copy(update={"params": EXACT}) for i in weak]
                exact = self._client.query_batch_points(collection, again)
                for position, response in zip(weak, exact, strict=True):
                    results[position] = response.points
        return results, len(weak)

    def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        extra = () if document_id is None else (match(PayloadKey.DOCUMENT_ID, document_id),)
        where = _scope_filter(scope, *extra)
        if not self._exists(collection):
            return 0
        with self._serialized(), self._calling(collection):
            return self._client.count(collection, where, exact=True).count

    def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        where = _scope_filter(scope, match(PayloadKey.DOCUMENT_ID, document_id))
        if not self._exists(collection):
            return []

        def page(
            offset: models.ExtendedPointId | None,
        ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
            return self._client.scroll(
                collection, where, limit=SCROLL_PAGE, offset=offset, with_payload=True
            )

        with self._serialized(), self._calling(collection):
            return stored_passages(scroll_all(page))

    def document_ids(self, collection: str, scope: Scope) -> set[str]:
        where = _scope_filter(scope)
        if not self._exists(collection):
            return set()
        with self._serialized(), self._calling(collection):
            # A facet returns its top `limit` values: the point count bounds the distinct ones.
            points = self._client.count(collection, where, exact=True).count
            if points == 0:
                return set()
            facet = self._client.facet(
                collection, PayloadKey.DOCUMENT_ID, where, limit=points, exact=True
            )
        return {str(hit.value) for hit in facet.hits}

    def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        ids: list[models.ExtendedPointId] = [checked_point_id(pid) for pid in point_ids]
        if not ids:
            return 0
        return self._delete(collection, _scope_filter(scope, models.HasIdCondition(has_id=ids)))

    def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        where = _scope_filter(scope, match(PayloadKey.DOCUMENT_ID, document_id))
        return self._delete(collection, where)

    def delete_scope(self, collection: str, scope: Scope) -> int:
        return self._delete(collection, _scope_filter(scope))

    def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        where = _scope_filter(scope)
        if not self._exists(collection):
            return [], None
        with self._serialized(), self._calling(collection):
            records, after = self._client.scroll(
                collection, where, limit=limit, offset=start, with_payload=True, with_vectors=True
            )
        return [passage_of(record) for record in records], None if after is None else str(after)

    def drop_collection(self, collection: str) -> int | None:
        droppable_collection(collection)
        if not self._exists(collection):
            return None
        with self._lock, self._calling(collection):
            points = self._client.get_collection(collection).points_count or 0  # it all goes
            self._client.delete_collection(collection)
        self._forget(collection)
        return points

    def backfill_org(self, collection: str, scope: Scope) -> int:
        if scope.strict:
            raise ValueError("backfill_org needs a non-strict scope: strict ones never see legacy")
        if not is_valid_org_id(scope.org_id):
            raise ValueError(f"cannot backfill an invalid org id: {scope.org_id!r}")
        legacy = models.IsEmptyCondition(is_empty=models.PayloadField(key=PayloadKey.ORG_ID))
        where = _scope_filter(scope, legacy)
        if not self._exists(collection):
            return 0
        with self._serialized(), self._calling(collection):
            updated = self._client.count(collection, where, exact=True).count
            if updated:
                payload = {PayloadKey.ORG_ID.value: scope.org_id}
                self._client.set_payload(collection, payload, models.FilterSelector(filter=where))
        return updated

    def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        current = models.FieldCondition(
            key=PII_ANALYZER_PATH, match=models.MatchValue(value=analyzer)
        )
        where = _scope_filter(scope, excluding=[current])
        if not self._exists(collection):
            return [], None
        with self._serialized(), self._calling(collection):
            records, after = self._client.scroll(
                collection, where, limit=limit, offset=start, with_payload=True
            )
        return stored_passages(records), None if after is None else str(after)

    def set_pii(self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]) -> int:
        ids = {checked_point_id(pid): analysis for pid, analysis in analyses.items()}
        if not ids or not self._exists(collection):
            return 0
        operations: list[models.UpdateOperation] = [
            models.SetPayloadOperation(
                set_payload=models.SetPayload(
                    payload={PayloadKey.PII.value: pii_payload(analysis)},
                    filter=_scope_filter(scope, models.HasIdCondition(has_id=[pid])),
                )
            )
            for pid, analysis in ids.items()
        ]
        inside = _scope_filter(scope, models.HasIdCondition(has_id=list(ids)))
        with self._serialized(), self._calling(collection):
            count = self._client.count(collection, inside, exact=True).count
            self._client.batch_update_points(collection, operations, wait=True)
        return count

    def optimize(self) -> list[str]:
        """Nothing to do: the server's own optimizer indexes segments in the background."""
        return []

    def index_written(self) -> IndexBuilds:
        """Nothing to do: the server's own optimizer indexes segments in the background."""
        return IndexBuilds()

    def ping(self) -> None:
        if self._closed:
            raise IndexUnavailableError("the Qdrant index is closed")
        self._require_verified()
        with self._serialized(), self._calling("(ping)"):
            self._client.get_collections()

    def close(self) -> None:
        self._closed = True
        self._client.close()

    def _delete(self, collection: str, where: models.Filter) -> int:
        if not self._exists(collection):
            return 0
        with self._serialized(), self._calling(collection):
            deleted = self._client.count(collection, where, exact=True).count
            if deleted:
                self._client.delete(collection, models.FilterSelector(filter=where), wait=True)
        return deleted

    @contextmanager
    def _calling(self, collection: str) -> Iterator[None]:
        """`_engine_errors`, and a collection the server no longer has (another replica
        dropped it) is forgotten, so the next call finds out afresh."""
        try:
            with engine_errors(collection):
                yield
        except UnexpectedResponse as exc:
            if exc.status_code != _NOT_FOUND:
                raise
            self._forget(collection)
            raise IndexUnavailableError(f"Qdrant has no collection {collection!r}") from exc

    def _forget(self, collection: str) -> None:
        self._known.discard(collection)
        self._ensured.discard(collection)
        self._document_keywords.pop(collection, None)

    def _check(self, collection: str) -> None:
        if self._closed:
            raise IndexUnavailableError("the Qdrant index is closed")
        checked_collection(collection)
        self._require_verified()

    def _require_verified(self) -> None:
        """No call reaches a server whose version was not checked (or was too old)."""
        if self._verified:
            return
        try:
            self.verify_version()
        except IncompatibleServerError as error:
            raise IndexUnavailableError(str(error)) from error

    def _exists(self, collection: str) -> bool:
        self._check(collection)
        if collection in self._known:
            return True
        with self._serialized(), self._calling(collection):
            exists = self._client.collection_exists(collection)
        if exists:
            self._known.add(collection)
        return exists

    def _create(self, collection: str) -> None:
        try:
            self._client.create_collection(
                collection,
                vectors_config={
                    DENSE_VECTOR: models.VectorParams(
                        size=self._dense_dim, distance=models.Distance.COSINE
                    )
                },
                sparse_vectors_config={
                    name: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    for name in (SPARSE_VECTOR, DOCUMENT_SPARSE_VECTOR)
                },
                hnsw_config=GRAPHS,
                shard_number=self._layout.shards,
                replication_factor=self._layout.replication_factor,
                write_consistency_factor=self._layout.write_consistency,
            )
        except UnexpectedResponse:
            # Another gateway replica may have created it in between.
            if not self._client.collection_exists(collection):
                raise

    def _point(self, passage: Passage, document_keywords: bool) -> models.PointStruct:
        vectors: dict[str, models.Vector] = {
            DENSE_VECTOR: self._dense(passage.dense),
            SPARSE_VECTOR: sparse(passage.sparse),
        }
        if document_keywords and passage.document_sparse is not None:
            vectors[DOCUMENT_SPARSE_VECTOR] = sparse(passage.document_sparse)
        payload = to_payload(passage.payload)
        return models.PointStruct(
            id=checked_point_id(passage.point_id), vector=vectors, payload=payload
        )

    def _leg_request(
        self, leg: Leg, where: models.Filter, with_payload: bool | list[str]
    ) -> models.QueryRequest:
        if leg.kind is LegKind.DENSE and leg.dense is not None:
            query = models.NearestQuery(nearest=self._dense(leg.dense))
            # ACORN keeps the graph search's recall under narrow Scope filters, as on
            # Qdrant Edge (docs/decisions/filtered-search.md); local mode has no graph.
            using, params = DENSE_VECTOR, FILTERED_DENSE if self._payload_indexes else None
        elif leg.sparse is not None:
            query = models.NearestQuery(nearest=sparse(leg.sparse))
            # IDF over the scope only: other tenants' documents must not move our scores.
            idf = models.IdfCorpusParams(corpus=where)
            using = SPARSE_VECTOR if leg.kind is LegKind.KEYWORD else DOCUMENT_SPARSE_VECTOR
            params = models.SearchParams(idf=idf)
        else:
            raise ValueError(f"a {leg.kind} leg without its vector")
        return models.QueryRequest(
            query=query,
            using=using,
            filter=where,
            params=params,
            limit=leg.limit,
            score_threshold=leg.floor,
            with_payload=with_payload,
        )

    def _dense(self, vector: Sequence[float]) -> list[float]:
        return dense_values(vector, self._dense_dim)
