"""The scale-out Index adapter: qdrant-client's `AsyncQdrantClient` against a Qdrant server
or cluster. Every call is awaited with a deadline (`timeout_s`: the client's own request
timeout, and `asyncio.timeout` around each call, which also bounds local mode).

`ServerIndex.local` runs qdrant-client's local mode (a pure-Python emulation,
for fast tests; it ignores payload indexes). Writes use `wait=True`: they are
applied and in the server's WAL when the call returns (on as many copies of each
shard as the layout's write consistency asks); fsync policy is the server's.
Keyword legs compute IDF over the scope's points only, which needs Qdrant
`MIN_SERVER_VERSION`: the adapter reads the server's version when it connects and
refuses an older one, and uses no server it has not checked.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from ingest.engines.common import (
    SCROLL_PAGE,
    WRITE_TIMEOUT_S,
    IdfSearches,
    checked_point_id,
    dense_values,
    held_terms_of,
    hit,
    keyword_terms,
    legs_idf,
    passage_of,
    ranked_point,
    stored_passages,
    weak_dense_legs,
)
from ingest.engines.server.requests import (
    EXACT,
    FILTERED_DENSE,
    GRAPHS,
    MIN_SERVER_VERSION,
    engine_errors,
    field_index,
    field_index_as_wanted,
    index_as_wanted,
    keyword_index,
    match,
    narrowing_condition,
    parse_version,
    sparse,
    term_request,
)
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    HeldTerms,
    IncompatibleServerError,
    IndexTimeoutError,
    IndexUnavailableError,
    Leg,
    LegKind,
    Passage,
    QueryResult,
    RankResult,
    StoredPassage,
    checked_collection,
    droppable_collection,
    is_dense_vector,
)
from ingest.payload import (
    INDEXED_KEYS,
    PII_ANALYZER_PATH,
    REF_KEYS,
    TYPED_INDEXED_KEYS,
    PassagePayload,
    PayloadKey,
    PiiAnalysis,
    Scope,
    from_payload,
    is_valid_org_id,
    pii_payload,
    to_payload,
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
    if scope.narrowing is not None:
        must.append(narrowing_condition(scope.narrowing))
    return models.Filter(must=[*must, *extra], must_not=list(excluding) or None)


@dataclass(frozen=True, slots=True)
class CollectionLayout:
    """How the collections kbgate creates are spread over a cluster's nodes."""

    shards: int = 1
    replication_factor: int = 1
    write_consistency: int = 1


class ServerIndex:
    """Collections on a Qdrant server (or in qdrant-client local mode), as the `Index`
    port. Its calls belong on one event loop: the one that makes the first."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        dense_dim: int = 384,
        layout: CollectionLayout | None = None,
        *,
        timeout_s: float = 5.0,
        verified: bool = False,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self._client = client
        self._dense_dim = dense_dim
        self._layout = layout or CollectionLayout()
        self._timeout_s = timeout_s
        #: the server's version was read and is new enough
        self._verified = verified
        #: held while a collection is created or dropped
        self._lock = asyncio.Lock()
        self._known: set[str] = set()  # collections seen to exist (`_calling` forgets)
        self._ensured: set[str] = set()  # ... and whose payload indexes were checked
        #: per collection: created with the whole-document BM25 vector (older ones lack it)
        self._document_keywords: dict[str, bool] = {}
        self._payload_indexes = True
        self._closed = False

    @classmethod
    async def connect(
        cls,
        url: str,
        api_key: str | None,
        timeout_s: float,
        dense_dim: int = 384,
        layout: CollectionLayout | None = None,
    ) -> ServerIndex:
        """A client for a server whose version is checked now if it answers. Call it on
        the event loop that will make the index's calls.

        Raises IncompatibleServerError for a server older than `MIN_SERVER_VERSION`.
        A server that does not answer yet is checked by the first call that reaches it
        (readiness pings it); until then every call fails with IndexUnavailableError.
        """
        client = AsyncQdrantClient(
            url=url,
            api_key=api_key,
            timeout=max(1, math.ceil(timeout_s)),
            check_compatibility=False,  # `verify_version` refuses, the client only warns
        )
        index = cls(client, dense_dim, layout, timeout_s=timeout_s)
        try:
            await index.verify_version()
        except IndexUnavailableError:
            pass
        except IncompatibleServerError:
            await client.close()
            raise
        return index

    async def verify_version(self) -> None:
        """Read the server's version; IncompatibleServerError if it is too old."""
        async with self._calling("(version)"):
            reported = (await self._client.info()).version
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
        client = (
            AsyncQdrantClient(location=":memory:")
            if path is None
            else AsyncQdrantClient(path=str(path))
        )
        index = cls(client, dense_dim, verified=True)  # the client's own emulation
        index._payload_indexes = False  # local mode ignores them and warns
        return index

    async def ensure_collection(self, collection: str) -> None:
        await self._check(collection)
        if collection in self._ensured:
            return
        async with self._lock, self._calling(collection, write=True):
            if not await self._client.collection_exists(collection):
                await self._create(collection)
            if self._payload_indexes:
                await self._index_for_scopes(collection)
            self._known.add(collection)
            self._ensured.add(collection)

    async def _index_for_scopes(self, collection: str) -> None:
        """The Scope keys' payload indexes and the per-tenant graphs; a collection made
        before them is brought in line (the server rebuilds its graphs in the background)."""
        info = await self._client.get_collection(collection)
        graphs = info.config.hnsw_config
        if (graphs.m, graphs.payload_m) != (GRAPHS.m, GRAPHS.payload_m):
            await self._client.update_collection(collection, hnsw_config=GRAPHS)
        for key in INDEXED_KEYS:
            if not index_as_wanted(info.payload_schema.get(key), key):
                await self._client.create_payload_index(
                    collection, key, keyword_index(key), wait=True
                )
        await self._field_indexes(collection, info, dict(TYPED_INDEXED_KEYS))

    async def _field_indexes(
        self, collection: str, info: models.CollectionInfo, fields: Mapping[str, str]
    ) -> int:
        """A payload index on each of `fields` ({path: kind}) without one of its kind."""
        missing = {
            path: kind
            for path, kind in fields.items()
            if not field_index_as_wanted(info.payload_schema.get(path), kind)
        }
        for path, kind in missing.items():
            await self._client.create_payload_index(collection, path, field_index(kind), wait=True)
        return len(missing)

    async def ensure_field_indexes(self, collection: str, fields: Mapping[str, str]) -> int:
        await self.ensure_collection(collection)
        if not self._payload_indexes:
            return 0  # local mode ignores payload indexes: filters read the payloads
        async with self._lock, self._calling(collection, write=True):
            info = await self._client.get_collection(collection)
            return await self._field_indexes(collection, info, fields)

    async def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        # Points are built (and checked) before a new collection is made; it gets the vector.
        document_keywords = not await self._exists(collection) or await self.document_keywords(
            collection
        )
        points = [self._point(passage, document_keywords) for passage in passages]
        await self.ensure_collection(collection)
        async with self._calling(collection, write=True):
            for start in range(0, len(points), _UPSERT_BATCH):
                batch = points[start : start + _UPSERT_BATCH]
                await self._client.upsert(collection, batch, wait=True)

    async def document_keywords(self, collection: str) -> bool:
        known = self._document_keywords.get(collection)
        if known is not None:
            return known
        if not await self._exists(collection):
            return False
        async with self._calling(collection):
            sparse = (await self._client.get_collection(collection)).config.params.sparse_vectors
        known = self._document_keywords[collection] = DOCUMENT_SPARSE_VECTOR in (sparse or {})
        return known

    async def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        if not await self._exists(collection):
            return legs_idf(legs, {})
        document_keywords = await self.document_keywords(collection)
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
        async with self._calling(collection):
            holders = {
                name: (
                    await self._client.count(
                        collection,
                        _scope_filter(scope, models.HasVectorCondition(has_vector=name)),
                        exact=True,
                    )
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
            responses = (
                await self._client.query_batch_points(collection, requests) if requests else []
            )
        return legs_idf(legs, searches.idf([response.points for response in responses]))

    async def _points(
        self, collection: str, scope: Scope, point_ids: Sequence[str], *, terms: bool
    ) -> list[models.Record]:
        """Those points inside the scope: with their payloads, or (`terms`) with their
        sparse vectors only."""
        ids: list[models.ExtendedPointId] = [
            checked_point_id(pid) for pid in dict.fromkeys(point_ids)
        ]
        if not ids or not await self._exists(collection):
            return []
        names = [SPARSE_VECTOR]
        if terms and await self.document_keywords(collection):
            names.append(DOCUMENT_SPARSE_VECTOR)
        where = _scope_filter(scope, models.HasIdCondition(has_id=ids))
        async with self._calling(collection):
            records, _ = await self._client.scroll(
                collection,
                where,
                limit=len(ids),
                with_payload=not terms,
                with_vectors=names if terms else False,
            )
        return records

    async def _query_batch(
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
        if not requests or not await self._exists(collection):
            return [[] for _ in legs], 0

        # A collection made before document keyword vectors finds nothing on that leg.
        document_keywords = await self.document_keywords(collection)
        runs = [document_keywords or leg.kind is not LegKind.DOCUMENT_KEYWORD for leg in legs]
        wanted = [request for request, run in zip(requests, runs, strict=True) if run]
        async with self._calling(collection):
            responses = iter(
                await self._client.query_batch_points(collection, wanted) if wanted else []
            )
            results = [next(responses).points if run else [] for run in runs]
            weak = weak_dense_legs(legs, results)
            if weak:
                again = [requests[i].model_copy(update={"params": EXACT}) for i in weak]
                exact = await self._client.query_batch_points(collection, again)
                for position, response in zip(weak, exact, strict=True):
                    results[position] = response.points
        return results, len(weak)

    async def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        found, _ = await self._query_batch(collection, scope, legs, with_payload=True)
        return QueryResult(legs=tuple(tuple(map(hit, points)) for points in found))

    async def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        found, exact_checks = await self._query_batch(
            collection, scope, legs, with_payload=list(REF_KEYS)
        )
        ranked = tuple(tuple(map(ranked_point, points)) for points in found)
        return RankResult(legs=ranked, exact_checks=exact_checks)

    async def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        records = await self._points(collection, scope, point_ids, terms=False)
        return {str(record.id): from_payload(record.payload or {}) for record in records}

    async def held_terms(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, HeldTerms]:
        records = await self._points(collection, scope, point_ids, terms=True)
        return {str(record.id): held_terms_of(record) for record in records}

    async def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        extra = () if document_id is None else (match(PayloadKey.DOCUMENT_ID, document_id),)
        where = _scope_filter(scope, *extra)
        if not await self._exists(collection):
            return 0
        async with self._calling(collection):
            return (await self._client.count(collection, where, exact=True)).count

    async def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        where = _scope_filter(scope, match(PayloadKey.DOCUMENT_ID, document_id))
        if not await self._exists(collection):
            return []

        records: list[models.Record] = []
        offset: models.ExtendedPointId | None = None
        async with self._calling(collection):
            while True:
                page, offset = await self._client.scroll(
                    collection, where, limit=SCROLL_PAGE, offset=offset, with_payload=True
                )
                records.extend(page)
                if offset is None:
                    return stored_passages(records)

    async def document_ids(self, collection: str, scope: Scope) -> set[str]:
        where = _scope_filter(scope)
        if not await self._exists(collection):
            return set()
        async with self._calling(collection):
            # A facet returns its top `limit` values: the point count bounds the distinct ones.
            points = (await self._client.count(collection, where, exact=True)).count
            if points == 0:
                return set()
            facet = await self._client.facet(
                collection, PayloadKey.DOCUMENT_ID, where, limit=points, exact=True
            )
        return {str(hit.value) for hit in facet.hits}

    async def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        ids: list[models.ExtendedPointId] = [checked_point_id(pid) for pid in point_ids]
        if not ids:
            return 0
        return await self._delete(
            collection, _scope_filter(scope, models.HasIdCondition(has_id=ids))
        )

    async def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        where = _scope_filter(scope, match(PayloadKey.DOCUMENT_ID, document_id))
        return await self._delete(collection, where)

    async def delete_scope(self, collection: str, scope: Scope) -> int:
        return await self._delete(collection, _scope_filter(scope))

    async def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        where = _scope_filter(scope)
        if not await self._exists(collection):
            return [], None
        async with self._calling(collection):
            records, after = await self._client.scroll(
                collection, where, limit=limit, offset=start, with_payload=True, with_vectors=True
            )
        return [passage_of(record) for record in records], None if after is None else str(after)

    async def drop_collection(self, collection: str) -> int | None:
        droppable_collection(collection)
        if not await self._exists(collection):
            return None
        async with self._lock, self._calling(collection, write=True):
            points = (
                await self._client.get_collection(collection)
            ).points_count or 0  # it all goes
            await self._client.delete_collection(collection)
        self._forget(collection)
        return points

    async def backfill_org(self, collection: str, scope: Scope) -> int:
        if scope.strict:
            raise ValueError("backfill_org needs a non-strict scope: strict ones never see legacy")
        if not is_valid_org_id(scope.org_id):
            raise ValueError(f"cannot backfill an invalid org id: {scope.org_id!r}")
        legacy = models.IsEmptyCondition(is_empty=models.PayloadField(key=PayloadKey.ORG_ID))
        where = _scope_filter(scope, legacy)
        if not await self._exists(collection):
            return 0
        async with self._calling(collection, write=True):
            updated = (await self._client.count(collection, where, exact=True)).count
            if updated:
                payload = {PayloadKey.ORG_ID.value: scope.org_id}
                await self._client.set_payload(
                    collection, payload, models.FilterSelector(filter=where)
                )
        return updated

    async def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        current = models.FieldCondition(
            key=PII_ANALYZER_PATH, match=models.MatchValue(value=analyzer)
        )
        where = _scope_filter(scope, excluding=[current])
        if not await self._exists(collection):
            return [], None
        async with self._calling(collection):
            records, after = await self._client.scroll(
                collection, where, limit=limit, offset=start, with_payload=True
            )
        return stored_passages(records), None if after is None else str(after)

    async def set_pii(
        self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]
    ) -> int:
        ids = {checked_point_id(pid): analysis for pid, analysis in analyses.items()}
        if not ids or not await self._exists(collection):
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
        async with self._calling(collection, write=True):
            count = (await self._client.count(collection, inside, exact=True)).count
            await self._client.batch_update_points(collection, operations, wait=True)
        return count

    async def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        if not is_dense_vector(vector) or vector == DENSE_VECTOR:
            raise ValueError(f"not a dense vector set to add: {vector!r}")
        await self.ensure_collection(collection)
        async with self._lock, self._calling(collection, write=True):
            info = await self._client.get_collection(collection)
            vectors = info.config.params.vectors
            held = vectors.get(vector) if isinstance(vectors, dict) else None
            if held is not None:
                if held.size != dim:
                    raise ValueError(f"{vector!r} has {held.size} dimensions, not {dim}")
                return
            config = models.DenseVectorNameConfig(
                dense=models.DenseVectorConfig(size=dim, distance=models.Distance.COSINE)
            )
            await self._client.create_vector_name(collection, vector, config, wait=True)

    async def missing_vector_page(
        self, collection: str, scope: Scope, vector: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        start = None if offset is None else checked_point_id(offset)
        where = _scope_filter(scope, excluding=[models.HasVectorCondition(has_vector=vector)])
        if not await self._exists(collection):
            return [], None
        async with self._calling(collection):
            records, after = await self._client.scroll(
                collection, where, limit=limit, offset=start, with_payload=True
            )
        return stored_passages(records), None if after is None else str(after)

    async def set_dense_vectors(
        self, collection: str, scope: Scope, vector: str, vectors: Mapping[str, Sequence[float]]
    ) -> int:
        ids = {checked_point_id(pid): list(values) for pid, values in vectors.items()}
        if not is_dense_vector(vector):
            raise ValueError(f"not a dense vector set: {vector!r}")
        if not ids or not await self._exists(collection):
            return 0
        inside = _scope_filter(scope, models.HasIdCondition(has_id=list(ids)))
        points = [models.PointVectors(id=pid, vector={vector: v}) for pid, v in ids.items()]
        async with self._calling(collection, write=True):
            count = (await self._client.count(collection, inside, exact=True)).count
            # Only points inside the Scope take a vector: the update's filter is the Scope's.
            await self._client.update_vectors(collection, points, wait=True, update_filter=inside)
        return count

    async def count_vector(self, collection: str, scope: Scope, vector: str) -> int:
        where = _scope_filter(scope, models.HasVectorCondition(has_vector=vector))
        if not await self._exists(collection):
            return 0
        async with self._calling(collection):
            return (await self._client.count(collection, where, exact=True)).count

    async def drop_dense_vectors(self, collection: str, scope: Scope, vector: str) -> int:
        where = _scope_filter(scope, models.HasVectorCondition(has_vector=vector))
        if not await self._exists(collection):
            return 0
        async with self._calling(collection, write=True):
            count = (await self._client.count(collection, where, exact=True)).count
            if count:
                await self._client.delete_vectors(
                    collection, [vector], models.FilterSelector(filter=where), wait=True
                )
        return count

    async def optimize(self) -> list[str]:
        """Nothing to do: the server's own optimizer indexes segments in the background."""
        return []

    async def ping(self) -> None:
        if self._closed:
            raise IndexUnavailableError("the Qdrant index is closed")
        await self._require_verified()
        async with self._calling("(ping)"):
            await self._client.get_collections()

    async def close(self) -> None:
        self._closed = True
        await self._client.close()

    async def _delete(self, collection: str, where: models.Filter) -> int:
        if not await self._exists(collection):
            return 0
        async with self._calling(collection, write=True):
            deleted = (await self._client.count(collection, where, exact=True)).count
            if deleted:
                await self._client.delete(
                    collection, models.FilterSelector(filter=where), wait=True
                )
        return deleted

    @asynccontextmanager
    async def _calling(self, collection: str, *, write: bool = False) -> AsyncIterator[None]:
        """The call's deadline (`IndexTimeoutError`; a `write`'s as on Qdrant Edge,
        `WRITE_TIMEOUT_S` at least) and `engine_errors`; a collection the
        server no longer has (another replica dropped it) is forgotten, so the next call
        finds out afresh."""
        timeout_s = max(self._timeout_s, WRITE_TIMEOUT_S) if write else self._timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                with engine_errors(collection):
                    yield
        except TimeoutError as exc:
            raise IndexTimeoutError(
                f"Qdrant did not answer on {collection!r} within {timeout_s:g} s"
            ) from exc
        except UnexpectedResponse as exc:
            if exc.status_code != _NOT_FOUND:
                raise
            self._forget(collection)
            raise IndexUnavailableError(f"Qdrant has no collection {collection!r}") from exc

    def _forget(self, collection: str) -> None:
        self._known.discard(collection)
        self._ensured.discard(collection)
        self._document_keywords.pop(collection, None)

    async def _check(self, collection: str) -> None:
        if self._closed:
            raise IndexUnavailableError("the Qdrant index is closed")
        checked_collection(collection)
        await self._require_verified()

    async def _require_verified(self) -> None:
        """No call reaches a server whose version was not checked (or was too old)."""
        if self._verified:
            return
        try:
            await self.verify_version()
        except IncompatibleServerError as error:
            raise IndexUnavailableError(str(error)) from error

    async def _exists(self, collection: str) -> bool:
        await self._check(collection)
        if collection in self._known:
            return True
        async with self._calling(collection):
            exists = await self._client.collection_exists(collection)
        if exists:
            self._known.add(collection)
        return exists

    async def _create(self, collection: str) -> None:
        try:
            await self._client.create_collection(
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
            if not await self._client.collection_exists(collection):
                raise

    def _point(self, passage: Passage, document_keywords: bool) -> models.PointStruct:
        vectors: dict[str, models.Vector] = {SPARSE_VECTOR: sparse(passage.sparse)}
        if passage.dense:
            vectors[DENSE_VECTOR] = self._dense(passage.dense)
        for name, values in passage.dense_sets:
            if not is_dense_vector(name) or name == DENSE_VECTOR or not values:
                raise ValueError(f"not a dense vector set: {name!r}")
            vectors[name] = list(values)
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
            values = self._dense(leg.dense) if leg.vector == DENSE_VECTOR else list(leg.dense)
            query = models.NearestQuery(nearest=values)
            # ACORN keeps the graph search's recall under narrow Scope filters, as on
            # Qdrant Edge (docs/decisions/filtered-search.md); local mode has no graph.
            using, params = leg.vector, FILTERED_DENSE if self._payload_indexes else None
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
