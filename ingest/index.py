"""The Index port: what kbgate asks of a vector engine, always through a Scope.

Two adapters implement it, each in its folder under `ingest/engines/`:
`ingest.engines.edge.index.EdgeIndex` (Qdrant Edge embedded in this process, the
default) and `ingest.engines.server.index.ServerIndex` (qdrant-client's
`AsyncQdrantClient`: a server, a cluster, or local mode for fast tests). Both run the
same contract tests.

The port is asynchronous and every call is bounded: an engine call that does not answer
within the adapter's deadline (writes and a collection's creation or removal: a longer
one, `ingest.engines.common.WRITE_TIMEOUT_S`) raises `IndexTimeoutError` (an
`IndexUnavailableError`, answered 503) while the caller's event loop goes on. Code that
runs in a worker thread calls the port through `ingest.engines.blocking.BlockingIndex`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ingest.payload import PassagePayload, PassageRef, PiiAnalysis, Scope, is_valid_org_id

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
#: BM25 of a whole document (title and all its text), carried by its first passage only.
DOCUMENT_SPARSE_VECTOR = "bm25_document"
#: The prefix of every other dense vector set: `dense_<model slug>` (`dense_vector_name`).
DENSE_SET_PREFIX = "dense_"
SHARED_COLLECTION = "kb_shared"
ORG_COLLECTION_PREFIX = "kb_org_"


class Storage(enum.StrEnum):
    """Where a knowledge base's passages live."""

    ORG = "org"
    SHARED = "shared"


def org_collection(org_id: str) -> str:
    """The collection of one organization; the org id is validated, as it names a directory."""
    if not is_valid_org_id(org_id):
        raise ValueError(f"invalid org id for a collection name: {org_id!r}")
    return f"{ORG_COLLECTION_PREFIX}{org_id}"


def collection_for(storage: Storage | str, org_id: str) -> str:
    """The collection a KB of this storage kind lives in."""
    return SHARED_COLLECTION if Storage(storage) is Storage.SHARED else org_collection(org_id)


def is_collection_name(name: str) -> bool:
    """Whether `name` is one kbgate makes: `kb_shared` or `kb_org_<org id>` (collection
    names become directory names, so nothing else is ever used)."""
    org_id = name.removeprefix(ORG_COLLECTION_PREFIX)
    return name == SHARED_COLLECTION or (org_id != name and is_valid_org_id(org_id))


def droppable_collection(name: str) -> str:
    """`name` when it is an organization's collection; ValueError for `kb_shared` (every
    organization's workspaces write to it) and for anything kbgate does not make."""
    if checked_collection(name) == SHARED_COLLECTION:
        raise ValueError("kb_shared is never dropped: delete inside a Scope instead")
    return name


def checked_collection(name: str) -> str:
    """`name` when `is_collection_name` holds; otherwise ValueError."""
    if not is_collection_name(name):
        raise ValueError(f"not a kbgate collection name: {name!r}")
    return name


def dense_vector_name(model_slug: str) -> str:
    """The named vector of a dense vector set other than the deployment model's (`dense`):
    `dense_` and the model's slug (lower-case letters, digits and `_`)."""
    if not model_slug or not all(c.isascii() and (c.isalnum() or c == "_") for c in model_slug):
        raise ValueError(f"not a model slug: {model_slug!r}")
    return f"{DENSE_SET_PREFIX}{model_slug.lower()}"


def is_dense_vector(name: str) -> bool:
    """Whether `name` is a dense vector set's: `dense` or `dense_<slug>`."""
    return name == DENSE_VECTOR or name.startswith(DENSE_SET_PREFIX)


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A BM25 vector: token ids and weights, same length."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class HeldTerms:
    """The BM25 terms of one point: its passage's, and its whole document's (empty where
    the collection stores no document vectors)."""

    passage: frozenset[int]
    document: frozenset[int]


@dataclass(frozen=True, slots=True)
class Passage:
    """One point to write: deterministic id, its vectors, full payload.

    A document's first passage also carries `document_sparse`, the BM25 vector of the
    whole document, which collections created without it ignore. `dense` is the
    deployment model's vector (empty: the point has none, its KB's set was retired);
    `dense_sets` the other dense vector sets' (`dense_<slug>` name, vector), written
    while a KB migrates to another model or after it did (`gateway.admin.migration`).
    """

    point_id: str
    dense: tuple[float, ...]
    sparse: SparseVector
    payload: PassagePayload
    document_sparse: SparseVector | None = None
    dense_sets: tuple[tuple[str, tuple[float, ...]], ...] = ()


class LegKind(enum.StrEnum):
    DENSE = "dense"
    KEYWORD = "keyword"
    #: BM25 over whole documents: each hit is a document's first passage.
    DOCUMENT_KEYWORD = "document_keyword"


@dataclass(frozen=True, slots=True)
class Leg:
    """One ranked search inside a query: dense (cosine), keyword (BM25 over passages) or
    document keyword (BM25 over whole documents) leg.

    `floor` is the minimum score a hit must reach on this leg (None: no floor). A dense
    leg searches the named vector `vector`: `dense`, or a KB's other vector set.
    """

    kind: LegKind
    dense: tuple[float, ...] | None = None
    sparse: SparseVector | None = None
    limit: int = 100
    floor: float | None = None
    vector: str = DENSE_VECTOR

    def __post_init__(self) -> None:
        if self.kind is LegKind.DENSE and self.dense is None:
            raise ValueError("a dense leg needs a dense vector")
        if self.kind is not LegKind.DENSE and self.sparse is None:
            raise ValueError("a keyword leg needs a sparse vector")
        if self.limit < 1:
            raise ValueError("a leg's limit must be at least 1")
        if not is_dense_vector(self.vector):
            raise ValueError(f"not a dense vector set: {self.vector!r}")


@dataclass(frozen=True, slots=True)
class Hit:
    """One scored point of one leg."""

    point_id: str
    score: float
    payload: PassagePayload

    @property
    def ref(self) -> PassageRef:
        return self.payload.ref


@dataclass(frozen=True, slots=True)
class RankedPoint:
    """One scored point of one leg of a ranking query: where it belongs, not its text."""

    point_id: str
    score: float
    ref: PassageRef


@dataclass(frozen=True, slots=True)
class StoredPassage:
    """A point read back by scroll (no score)."""

    point_id: str
    payload: PassagePayload


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The hits of each leg, in the order the legs were given."""

    legs: tuple[tuple[Hit, ...], ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class RankResult:
    """The ranked points of each leg, in the order the legs were given, and how many
    dense legs were searched again exactly because their first answer was weak
    (`ingest.engines.common.EXACT_CHECK_BELOW`)."""

    legs: tuple[tuple[RankedPoint, ...], ...] = field(default_factory=tuple)
    exact_checks: int = 0


class IndexUnavailableError(RuntimeError):
    """The engine could not be reached or did not answer in time."""


class IndexTimeoutError(IndexUnavailableError):
    """An engine call did not answer within its deadline. The call may still finish (a
    write then takes effect); the request that made it is answered 503."""


class DiskFullError(IndexUnavailableError):
    """A write refused, nothing written: the embedded engine's disk is down to the free
    space it keeps (`ingest.engines.edge.disk`). The figures are for operators' logs, never for an
    answer: they move with every workspace's writes."""

    def __init__(self, *, free_mb: int, needed_mb: int, reserve_mb: int) -> None:
        super().__init__(
            f"the index's disk has {free_mb} MiB free; {needed_mb} MiB more would leave less "
            f"than the {reserve_mb} MiB kept free"
        )
        self.free_mb = free_mb
        self.needed_mb = needed_mb
        self.reserve_mb = reserve_mb


class IncompatibleServerError(RuntimeError):
    """The engine answers, but its version lacks what the adapter relies on."""


class Index(Protocol):
    """A vector engine seen through Scopes only. No method takes a raw filter."""

    async def ensure_collection(self, collection: str) -> None:
        """Create the collection (vectors, payload indexes) if it does not exist."""

    async def ensure_field_indexes(self, collection: str, fields: Mapping[str, str]) -> int:
        """Create the collection if need be, and a payload index on each path of `fields`
        ({path: `ingest.payload.IndexKind`}) that has none of that kind: what a KB's
        declared fields are filtered by. Returns how many were created."""

    async def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        """Write points; durable when this returns."""

    async def document_keywords(self, collection: str) -> bool:
        """Whether the collection stores whole-document BM25 vectors, so document keyword
        legs can run on it (collections created before they existed do not)."""

    async def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        """Run every leg inside the scope, in one engine call where the engine allows."""

    async def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        """`query` reading only each hit's `PassageRef`: the ranking step of a turn."""

    async def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        """For each leg, the IDF of each of its question's terms as that keyword leg
        computes it over the Scope (`ingest.keyword_scale.bm25_idf`, a term no point
        holds counting n = 0); () for a dense leg. What a keyword floor is scaled by."""

    async def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        """The payloads of those points that exist inside the scope, by point id."""

    async def held_terms(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, HeldTerms]:
        """The BM25 terms each of those points inside the scope holds, by point id: what
        tells whether a keyword hit holds a question's words."""

    async def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        """Points inside the scope (optionally of one document)."""

    async def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        """Every point of one document inside the scope, ordered by passage index."""

    async def document_ids(self, collection: str, scope: Scope) -> set[str]:
        """The distinct document ids inside the scope."""

    async def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        """Delete the given points, but only those inside the scope; returns how many."""

    async def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        """Delete every point of one document inside the scope; returns how many."""

    async def delete_scope(self, collection: str, scope: Scope) -> int:
        """Delete every point inside the scope; returns how many (0 when the collection
        does not exist)."""

    async def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        """One page of the points inside the scope, with their vectors, as `upsert` takes
        them; and the offset of the next page (None after the last). Start with None."""

    async def drop_collection(self, collection: str) -> int | None:
        """Remove an organization's collection and every point in it (once the org's
        workspaces are deleted); returns how many points it still held, None when there
        was no such collection. ValueError for `kb_shared`, which is never dropped."""

    async def backfill_org(self, collection: str, scope: Scope) -> int:
        """Set `orgId = scope.org_id` on points inside the (non-strict) scope that lack it."""

    async def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        """One page of the points inside the scope whose PII analysis is missing or was made
        by another analyzer than `analyzer`, and the next page's offset (None after the
        last). Start with None; points analysed meanwhile drop out of later pages."""

    async def set_pii(
        self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]
    ) -> int:
        """Store each point's PII analysis (`pii`) on it, for the points inside the scope;
        other payload keys stay. Returns how many points were inside the scope."""

    # dense vector sets beside `dense` (a KB's model migration, `gateway.admin.migration`)
    async def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        """Create the collection if needed and give it the named dense vector `vector`
        (`dense_vector_name`; cosine, `dim` dimensions) unless it has it; points without
        it stay as they are."""

    async def missing_vector_page(
        self, collection: str, scope: Scope, vector: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        """One page of the points inside the scope that lack the dense vector `vector`, and
        the next page's offset (None after the last). Start with None; points given the
        vector meanwhile drop out of later pages."""

    async def set_dense_vectors(
        self, collection: str, scope: Scope, vector: str, vectors: Mapping[str, Sequence[float]]
    ) -> int:
        """Store each point's `vector` (by point id), for the points inside the scope; its
        other vectors and payload stay. Returns how many points were inside the scope.
        Unlike other writes it may return before the vectors are flushed to disk (they
        survive the process being killed, not an OS crash): its caller, a migration, finds
        vectors lost so missing and sets them again."""

    async def count_vector(self, collection: str, scope: Scope, vector: str) -> int:
        """Points inside the scope that hold the dense vector `vector`."""

    async def drop_dense_vectors(self, collection: str, scope: Scope, vector: str) -> int:
        """Remove the dense vector `vector` from the points inside the scope (they keep
        their other vectors); returns how many held it."""

    async def optimize(self) -> list[str]:
        """Build the search indexes (HNSW, compact sparse indexes) of every collection's
        large unindexed segments; return the collections that changed. Blocking and slow
        (seconds per 10,000 passages), so it has no deadline: run it only while no turn
        is served (a start's work, before the first turn). Raises
        `IndexUnavailableError` after trying every collection if any failed; searches
        still answer (exactly) where it did."""

    async def ping(self) -> None:
        """Raise `IndexUnavailableError` when the engine cannot answer."""

    async def close(self) -> None:
        """Release files, sockets and threads."""
