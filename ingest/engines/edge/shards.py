"""Qdrant Edge's shards on disk: one directory per collection under the data dir's
`qdrant-edge` folder, opened on demand and kept open, written under a lock per shard,
indexed by `optimize` (a start's work, before any turn), closed together.

`EdgeEngine` (`ingest.engines.edge.engine`) searches and writes through them; this
module knows how a shard is configured and where it lives, not what its points mean
beyond the payload indexes the Scope needs.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_edge import (
    DatetimeIndexParams,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FloatIndexParams,
    HnswIndexConfig,
    KeywordIndexParams,
    Memory,
    Modifier,
    UpdateOperation,
)

from ingest.engines.common import GRAPH_M
from ingest.engines.edge.disk import DiskReserve, allocated_bytes
from ingest.engines.edge.log_pages import page_out_log
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    IndexUnavailableError,
    checked_collection,
    droppable_collection,
    is_collection_name,
    is_dense_vector,
)
from ingest.payload import INDEXED_KEYS, ON_DISK_KEY, TENANT_KEY, TYPED_INDEXED_KEYS, IndexKind

if TYPE_CHECKING:
    from qdrant_edge import PayloadIndexInfo

#: the config Edge writes into a shard's directory
EDGE_CONFIG_FILE = "edge_config.json"
#: Edge's own threshold (KB of vectors) from which a segment is indexed and a filtered
#: search takes the graph rather than the exact path.
_EDGE_THRESHOLD_KB = 10_000
#: Left by kbgate releases that swapped indexed copies in while serving: a pointer file
#: `<collection>.live` naming the live generation `<collection>~<n>`. Folded back into
#: `<collection>` when the collection is first opened.
_POINTER_SUFFIX = ".live"
_GENERATION_MARK = "~"


@dataclass(slots=True)
class Shard:
    """One open shard and its write lock."""

    shard: EdgeShard
    path: Path
    #: created with the whole-document BM25 vector (shards made before it was added lack it)
    document_keywords: bool
    #: the dense vector sets' dimensions by name: `dense` and any `dense_<slug>` added
    dense_dims: dict[str, int] = field(default_factory=dict)
    writes: threading.Lock = field(default_factory=threading.Lock)
    #: the collection was dropped: a writer that waited for `writes` fails
    dropped: bool = False

    def update(self, operation: UpdateOperation, *, durable: bool = True) -> None:
        """Apply one write, durable (flushed) unless told not to; the caller holds `writes`."""
        self.shard.update(operation)
        if durable:
            self.shard.flush()


class EdgeShards:
    """The shards of one data dir's `qdrant-edge` folder. Thread-safe; one process per data
    dir (a shard's WAL is locked while open)."""

    def __init__(
        self,
        root: Path,
        dense_dim: int,
        *,
        indexing_threshold_kb: int | None = None,
        search_threads: int | None = None,
        min_free_mb: int = 0,
    ) -> None:
        """See `EdgeEngine` for the settings."""
        if search_threads is not None and search_threads < 1:
            raise ValueError("search_threads must be at least 1")
        self._root = root
        #: the free disk writes and builds leave (`ingest.engines.edge.disk`)
        self.disk = DiskReserve(root, min_free_mb)
        self._dense_dim = dense_dim
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_threads = search_threads or len(os.sched_getaffinity(0))
        self._lock = threading.Lock()
        self._shards: dict[str, Shard] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def existing(self, collection: str) -> Shard | None:
        return self._get(collection, create=False)

    def open_shard(self, collection: str) -> Shard | None:
        """The collection's shard if it is open; never loads one."""
        return None if self._closed else self._shards.get(collection)

    def open(self, collection: str) -> Shard:
        held = self._get(collection, create=True)
        if held is None:  # pragma: no cover - _get creates when asked to
            raise IndexUnavailableError(f"could not open collection {collection!r}")
        return held

    def _get(self, collection: str, *, create: bool) -> Shard | None:
        held = self._shards.get(collection)  # open shards need no lock: loads hold it
        if held is not None and not self._closed:
            return held
        checked_collection(collection)
        with self._lock:
            if self._closed:
                raise IndexUnavailableError("the Qdrant Edge index is closed")
            held = self._shards.get(collection)
            if held is None and (create or self._on_disk(collection)):
                with engine_errors(collection):
                    held = self._load_or_create(self._live_directory(collection))
                self._shards[collection] = held
            return held

    def _load_or_create(self, path: Path) -> Shard:
        document_keywords = not path.exists() or _has_document_keywords(path)
        sparse = [SPARSE_VECTOR, *([DOCUMENT_SPARSE_VECTOR] if document_keywords else [])]
        # Dense vector sets added since the shard was made (`add_dense_vector`): a load
        # whose config lacks one is refused as incompatible.
        dims = {DENSE_VECTOR: self._dense_dim, **_added_dense_vectors(path)}
        config = EdgeConfig(
            vectors={
                # Read from the page cache as searches need them, not loaded whole at start:
                # a shard's open segment alone maps 32 MB (docs/decisions/edge-memory.md).
                name: EdgeVectorParams(size=dim, distance=Distance.Cosine, memory=Memory.Cold)
                for name, dim in dims.items()
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
            typed = missing_field_indexes(indexed, dict(TYPED_INDEXED_KEYS))
            for field_path, kind in typed.items():
                shard.update(UpdateOperation.create_field_index(field_path, field_index(kind)))
            if stale or typed:
                shard.flush()
            page_out_log(path)  # read whole by the load, not again until the next one
        except BaseException:
            shard.close()  # release the directory lock
            raise
        return Shard(shard, path, document_keywords, dims)

    def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        """Give the collection's shard (made if needed) the dense vector `vector`."""
        held = self.open(collection)
        if vector in held.dense_dims:
            if held.dense_dims[vector] != dim:
                raise ValueError(f"{vector!r} has {held.dense_dims[vector]} dimensions, not {dim}")
            return
        with held.writes, engine_errors(collection):
            held.update(UpdateOperation.create_dense_vector(vector, dim, Distance.Cosine))
            held.dense_dims[vector] = dim

    def _indexing_config(self) -> dict[str, Any]:
        threshold = self._indexing_threshold_kb
        if threshold == 0:
            return {}
        config: dict[str, Any] = {"hnsw_config": _graphs(threshold or _EDGE_THRESHOLD_KB)}
        if threshold:
            config["optimizers"] = EdgeOptimizersConfig(indexing_threshold=threshold)
        return config

    def drop(self, collection: str) -> int | None:
        """Close and remove the collection's shard; its points (None: it had none)."""
        droppable_collection(collection)
        # Under the open lock: no call can load or create the shard while it goes.
        with self._lock:
            if self._closed:
                raise IndexUnavailableError("the Qdrant Edge index is closed")
            held = self._shards.pop(collection, None)
            if held is None and not self._on_disk(collection):
                return None
            with engine_errors(collection):
                held = held or self._load_or_create(self._live_directory(collection))
                with held.writes:
                    points = held.shard.info().points_count  # the whole collection goes
                    held.shard.close()
                    held.dropped = True
                shutil.rmtree(held.path)
        return points

    def optimize(self) -> list[str]:
        """Every collection's search indexes, built in this process, which stands still
        while they build (Edge holds the GIL): a start's work, before any turn. The
        collections that changed; IndexUnavailableError after trying every collection if
        any failed."""
        if self._indexing_threshold_kb == 0:
            return []
        changed: list[str] = []
        failures: list[IndexUnavailableError] = []
        for collection in self._collections_on_disk():
            try:
                if self._optimize_one(collection):
                    changed.append(collection)
            except IndexUnavailableError as error:
                failures.append(error)
        if len(failures) == 1:
            raise failures[0]  # as it was: a DiskFullError stays one
        if failures:
            raise IndexUnavailableError("; ".join(map(str, failures))) from failures[0]
        return changed

    def _optimize_one(self, collection: str) -> bool:
        held = self.open(collection)
        self.disk.check(allocated_bytes(held.path))  # new segments, then the old ones go
        with held.writes, engine_errors(collection):
            built = held.shard.optimize()
            held.shard.flush()
            return built

    @contextmanager
    def writing(self, collection: str, *, create: bool = False) -> Iterator[Shard | None]:
        """The collection's shard with its write lock held; None when it has none and
        `create` is not asked."""
        held = self.open(collection) if create else self.existing(collection)
        if held is None:
            yield None
            return
        with held.writes:
            if held.dropped:
                raise IndexUnavailableError(f"collection {collection!r} was dropped")
            with engine_errors(collection):
                yield held

    def _collections_on_disk(self) -> list[str]:
        if not self._root.is_dir():
            return []
        names = {path.name for path in self._root.iterdir() if path.is_dir()}
        names |= {path.name.removesuffix(_POINTER_SUFFIX) for path in self._pointers()}
        return sorted(name for name in names if is_collection_name(name))

    def _pointers(self) -> Iterator[Path]:
        return self._root.glob(f"*{_POINTER_SUFFIX}")

    def _on_disk(self, collection: str) -> bool:
        root = self._root
        return (root / collection).exists() or (root / f"{collection}{_POINTER_SUFFIX}").exists()

    def _live_directory(self, collection: str) -> Path:
        """`<root>/<collection>`, after folding back a generation an earlier release
        swapped in (and removing the copies it left)."""
        canonical = self._root / checked_collection(collection)
        pointer = self._root / f"{collection}{_POINTER_SUFFIX}"
        if pointer.exists():
            generation = self._root / pointer.read_text().strip()
            if generation.parent == self._root and generation.is_dir():
                shutil.rmtree(canonical, ignore_errors=True)
                generation.rename(canonical)
            pointer.unlink()
        for leftover in self._root.glob(f"{collection}{_GENERATION_MARK}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return canonical

    def close(self) -> None:
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


@contextmanager
def engine_errors(collection: str) -> Iterator[None]:
    """Edge reports engine failures (I/O, a closed shard) as bare `Exception`s."""
    try:
        yield
    except (TypeError, ValueError):
        raise
    except Exception as exc:
        raise IndexUnavailableError(f"Qdrant Edge failed on {collection!r}: {exc}") from exc


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
    the Scope's other keys only filter. The document key's index is read from disk as
    needed: only a document's own operations filter on it, never a search, and in memory
    it would be read whole at every load of the shard."""
    tenant = key == TENANT_KEY
    memory = Memory.Cold if key == ON_DISK_KEY else None
    return KeywordIndexParams(is_tenant=tenant, enable_hnsw=tenant, memory=memory)


FieldIndexParams = KeywordIndexParams | FloatIndexParams | DatetimeIndexParams


def field_index(kind: IndexKind | str) -> FieldIndexParams:
    """The index of a filtered field of this kind (`ingest.payload.IndexKind`): no graph
    links (only the tenant key has them), kept in memory."""
    match IndexKind(kind):
        case IndexKind.KEYWORD | IndexKind.BOOLEAN:  # booleans are stored as keywords
            return KeywordIndexParams(is_tenant=False, enable_hnsw=False)
        case IndexKind.NUMBER:
            return FloatIndexParams(enable_hnsw=False)
    return DatetimeIndexParams(enable_hnsw=False)


def missing_field_indexes(
    indexed: dict[str, PayloadIndexInfo], wanted: dict[str, str]
) -> dict[str, str]:
    """The paths of `wanted` ({path: kind}) without an index of their kind."""
    return {
        path: kind
        for path, kind in wanted.items()
        if path not in indexed or not isinstance(indexed[path].params, type(field_index(kind)))
    }


def _index_as_wanted(info: PayloadIndexInfo | None, key: str) -> bool:
    """Whether a shard's index of `key` is `_keyword_index(key)` (Edge builds graph links
    for an index's values unless told not to); a different one is made again."""
    params = None if info is None else info.params
    wanted = _keyword_index(key)
    return (
        isinstance(params, KeywordIndexParams)
        and params.is_tenant is wanted.is_tenant
        and (params.enable_hnsw is not False) is wanted.enable_hnsw
        and params.memory == wanted.memory
    )


def _added_dense_vectors(path: Path) -> dict[str, int]:
    """The dense vector sets other than `dense` an existing shard's config names, with
    their dimensions."""
    try:
        config = json.loads((path / EDGE_CONFIG_FILE).read_text())
    except FileNotFoundError:
        return {}
    vectors = config.get("vectors", {})
    return {
        str(name): int(params["size"])
        for name, params in vectors.items()
        if name != DENSE_VECTOR and is_dense_vector(str(name))
    }


def _has_document_keywords(path: Path) -> bool:
    """Whether an existing shard was created with the whole-document BM25 vector, as the
    config Edge keeps in its directory says. A directory without that file was left
    half-created by a crash (Edge writes it first): it is created afresh, with it."""
    try:
        config = json.loads((path / EDGE_CONFIG_FILE).read_text())
    except FileNotFoundError:
        return True
    return DOCUMENT_SPARSE_VECTOR in config.get("sparse_vectors", {})
