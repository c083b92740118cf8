"""Qdrant Edge's shards on disk: one directory per collection, opened on demand and kept
open, written under a lock per shard, indexed at start (`optimize`) or beside the serving
process (`index_written`, on a copy built by `ingest.edge_build`), closed together. A large
collection is served by a host process (`ingest.edge_host`) from the start's indexing or
its first build on, and each later indexed copy is loaded by a new host that takes over.

`EdgeIndex` (`ingest.qdrant_edge`) searches and writes through them; this module knows how
a shard is configured and where it lives, not what its points mean beyond the payload
indexes the Scope needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    HnswIndexConfig,
    KeywordIndexParams,
    Memory,
    Modifier,
    UpdateOperation,
)

from ingest import edge_build
from ingest.edge_disk import DiskReserve, allocated_bytes
from ingest.edge_host import CollectionHostedError, CollectionMovedError, EdgeHost
from ingest.edge_log_pages import page_out_log
from ingest.edge_writes import Write
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    IndexBuilds,
    IndexUnavailableError,
    checked_collection,
    droppable_collection,
    is_collection_name,
)
from ingest.index_common import GRAPH_M
from ingest.payload import INDEXED_KEYS, ON_DISK_KEY, TENANT_KEY

if TYPE_CHECKING:
    from qdrant_edge import PayloadIndexInfo

#: the config Edge writes into a shard's directory
EDGE_CONFIG_FILE = "edge_config.json"

#: Edge's own threshold (KB of vectors) from which a segment is indexed and a filtered
#: search takes the graph rather than the exact path.
_EDGE_THRESHOLD_KB = 10_000
#: How long a shard swapped for its indexed copy stays open for calls already under way.
_RETIRED_GRACE_S = 1.0
#: an indexed copy loaded: a shard here, or a host process
_Loaded = TypeVar("_Loaded", bound="Shard | EdgeHost")


@dataclass(slots=True)
class Shard:
    """One open shard, with its write lock and what a build beside it needs."""

    shard: EdgeShard
    #: the shard's directory (a generation's after a swap: `ingest.edge_build`)
    path: Path
    #: created with the whole-document BM25 vector (shards made before it was added lack it)
    document_keywords: bool
    writes: threading.Lock = field(default_factory=threading.Lock)
    #: points written since the shard was opened or last indexed
    unindexed: int = 0
    #: while a copy is indexed beside it: every write since the copy, replayed onto it
    journal: list[Write] | None = None
    #: swapped for its indexed copy: a writer that waited for `writes` writes to the copy
    retired: bool = False
    #: the collection was dropped: a writer that waited for `writes` fails
    dropped: bool = False
    #: handed to the host of its next indexed copy (in a host): writes are refused, and
    #: sent there by the gateway; reads are still answered
    moved: bool = False
    #: how long Edge took to load the shard (it holds the GIL throughout), in ms
    load_ms: float = 0.0

    def update(self, write: Write, operation: UpdateOperation, *, durable: bool = True) -> None:
        """Apply one write, `operation` being Edge's form of it, and make it durable unless
        told not to; the caller holds `writes`."""
        self.shard.update(operation)
        if self.journal is not None:
            self.journal.append(write)
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
        host_from_points: int | None = None,
        min_free_mb: int = 0,
    ) -> None:
        """See `EdgeIndex` for the settings."""
        if search_threads is not None and search_threads < 1:
            raise ValueError("search_threads must be at least 1")
        self._root = root
        #: the free disk writes and builds leave (`ingest.edge_disk`)
        self.disk = DiskReserve(root, min_free_mb)
        self._dense_dim = dense_dim
        self._indexing_threshold_kb = indexing_threshold_kb
        self._search_threads = search_threads or _search_threads_default()
        self._lock = threading.Lock()
        self._shards: dict[str, Shard] = {}
        self._builds = edge_build.BuildChildren()
        self._building = threading.Lock()  # one build at a time: each keeps a journal
        self._closed = False
        #: collections served by a host process since their indexed copy was swapped in
        self._hosts: dict[str, EdgeHost] = {}
        #: points from which a collection's indexed copy is loaded and served by a host
        #: process (`ingest.edge_host`) rather than loaded here; None: never
        self._host_from_points = host_from_points

    @property
    def closed(self) -> bool:
        return self._closed

    def existing(self, collection: str) -> Shard | None:
        return self._get(collection, create=False)

    def open(self, collection: str) -> Shard:
        held = self._get(collection, create=True)
        if held is None:  # pragma: no cover - _get creates when asked to
            raise IndexUnavailableError(f"could not open collection {collection!r}")
        return held

    def host_of(self, collection: str) -> EdgeHost | None:
        """The host process serving the collection, if one does."""
        return self._hosts.get(collection)

    def revive(self, collection: str, dead: EdgeHost) -> EdgeHost:
        """A host started again on the collection's directory in place of one that died
        (its writes are in the directory's log); the current host if another call already
        started it. IndexUnavailableError when the collection is gone or will not load."""
        with self._lock:
            current = self._hosts.get(collection)
            if current is None:
                raise IndexUnavailableError(f"collection {collection!r} is gone")
            if current is not dead:
                return current
            current.stop()
            host = self._host(collection, current.path)
            self._hosts[collection] = host
            return host

    def moved_from(self, collection: str) -> EdgeHost:
        """The host serving the collection once the move under way to another host is done
        (its old host refused a write meanwhile). IndexUnavailableError when it is gone."""
        with self._lock:  # held by the move
            host = self._hosts.get(collection)
        if host is None:
            raise IndexUnavailableError(f"collection {collection!r} is gone")
        return host

    def _host(self, collection: str, path: Path) -> EdgeHost:
        return EdgeHost(
            self._root,
            collection,
            path,
            dense_dim=self._dense_dim,
            threshold_kb=self._indexing_threshold_kb,
            search_threads=self._search_threads,
        )

    def adopt(self, collection: str, path: Path) -> float:
        """Serve `collection` from the indexed copy in `path` (a host's start); the load's
        ms."""
        held = self._load_copy(collection, path)
        with self._lock:
            self._shards[collection] = held
        return held.load_ms

    def _get(self, collection: str, *, create: bool) -> Shard | None:
        held = self._shards.get(collection)  # open shards need no lock: loads hold it
        if held is not None and not self._closed:
            return held
        if collection in self._hosts:
            raise CollectionHostedError(collection)
        checked_collection(collection)
        with self._lock:
            if self._closed:
                raise IndexUnavailableError("the Qdrant Edge index is closed")
            if collection in self._hosts:  # handed to a host while this call waited
                raise CollectionHostedError(collection)
            held = self._shards.get(collection)
            if held is None and (create or self._on_disk(collection)):
                with engine_errors(collection):
                    held = self._load_or_create(self._live_directory(collection))
                self._shards[collection] = held
            return held

    def _load_or_create(self, path: Path) -> Shard:
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
        started = time.perf_counter()
        if path.exists():
            shard = EdgeShard.load(str(path), config)
        else:
            shard = EdgeShard.create(str(path), config)
        load_ms = (time.perf_counter() - started) * 1000
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
        return Shard(shard, path, document_keywords, load_ms=load_ms)

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

    def drop(self, collection: str) -> int | None:
        """Close and remove the collection's shard; its points (None: it had none)."""
        droppable_collection(collection)
        host = self._hosts.get(collection)
        if host is not None:
            points: int | None = host.call("drop_collection", collection)
            with self._lock:
                self._hosts.pop(collection, None)
            host.stop()
            return points
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
                edge_build.remove_collection(self._root, collection, held.path)
        return points

    def optimize(self) -> list[str]:
        """Every collection's indexes, built in this process (it stops while they build);
        then the large collections handed to host processes, which serve them and load
        their later indexed copies (a start's work, before any turn)."""
        if self._indexing_threshold_kb == 0:
            return []
        built = _each(self._collections_on_disk(), self._optimize_open)
        if self._host_from_points is not None:
            self._hand_to_hosts(self._host_from_points)
        return built

    def _hand_to_hosts(self, from_points: int) -> None:
        """Close here the open collections of `from_points` points or more and start a
        host on each, several at once. A collection whose host will not start is opened
        here again at its next call; IndexUnavailableError once all were tried."""
        with self._lock:
            paths = {}
            for collection, held in list(self._shards.items()):
                with held.writes, engine_errors(collection):
                    if held.shard.info().points_count < from_points:
                        continue
                    held.shard.flush()
                    held.shard.close()
                    del self._shards[collection]
                    held.retired = True  # a writer that waited finds the host
                paths[collection] = held.path
            # two per core: one host's imports and load overlap another's disk reads
            starting = 2 * len(os.sched_getaffinity(0))
            with ThreadPoolExecutor(starting, thread_name_prefix="edge-host-start") as pool:
                starts = {name: pool.submit(self._host, name, path) for name, path in paths.items()}

            def started(collection: str) -> bool:
                self._hosts[collection] = starts[collection].result()
                return True

            _each(starts, started)

    def index_written(self, operation_of: Callable[[Write], UpdateOperation]) -> IndexBuilds:
        """Build, beside the serving process, the indexes of the open collections that took
        enough writes to fill an indexed segment since they were opened or last indexed;
        answer the collections swapped for their indexed copy, and the longest load of
        such a copy. Slow (the build's seconds, in a child process), but reads and writes
        go on meanwhile: writes wait only while the shard is copied and while the writes
        made during the build are replayed, and the process stops only while it loads the
        indexed copy (a fraction of a second).
        """
        if self._indexing_threshold_kb == 0:
            return IndexBuilds()  # nor are there hosts: only builds make them
        with self._building:
            self.disk.check()  # nothing can be built without room: each round says so
            hosts = dict(self._hosts)  # not those this round starts
            due = [name for name, held in list(self._shards.items()) if held.unindexed >= self._due]
            started_again: list[str] = []

            def build(collection: str) -> bool:
                host = hosts.get(collection)
                if host is None:
                    return self._index_beside(collection, operation_of=operation_of)
                if not host.alive:
                    host = self.revive(collection, host)
                    started_again.append(collection)
                return self._index_hosted(collection, host)

            swapped = _each([*due, *hosts], build)
            # Only a copy loaded here stopped the turns: a host's load stops none.
            loads = [held.load_ms for name in swapped if (held := self._shards.get(name))]
            return IndexBuilds(
                tuple(swapped), round(max(loads, default=0.0), 1), len(started_again)
            )

    def _optimize_open(self, collection: str) -> bool:
        held = self.open(collection)
        self.disk.check(allocated_bytes(held.path))  # new segments, then the old ones go
        with held.writes, engine_errors(collection):
            return held.shard.optimize()

    def optimize_directory(self, path: Path) -> bool:
        """Build the indexes of the shard in `path` (not open elsewhere), in this process;
        whether anything changed. The build child's work (`ingest.edge_build`)."""
        held = self._load_or_create(path)
        try:
            with engine_errors(path.name):
                built = held.shard.optimize()
                held.shard.flush()
        finally:
            held.shard.close()
        return built

    def _index_beside(
        self, collection: str, *, operation_of: Callable[[Write], UpdateOperation]
    ) -> bool:
        held = self.existing(collection)
        if held is None:
            return False
        copy = edge_build.next_generation(self._root, collection)
        with held.writes:
            if self._let_go(held):
                return False
            with engine_errors(collection):
                held.shard.flush()
            self.disk.check(allocated_bytes(held.path))
            edge_build.copy_shard(held.path, copy)
            held.journal, written = [], held.unindexed
        fresh = self._built_and_loaded(
            copy,
            written,
            load=lambda: self._serve_copy(collection, held, copy),
            forget=lambda indexed: self._forget_copy(held, copy, indexed),
            gone=lambda: self._let_go(held),
        )
        if fresh is None:
            return False
        swapped = False
        try:
            if isinstance(fresh, EdgeHost):
                swapped = self._swap_to_host(collection, held, fresh, copy)
            else:
                swapped = self._swap(collection, held, fresh, written, operation_of)
        finally:
            if not swapped:
                if isinstance(fresh, EdgeHost):
                    fresh.stop()
                else:
                    fresh.shard.close()
                shutil.rmtree(copy, ignore_errors=True)
        if not swapped:
            return False
        # A reader may have taken the old shard just before the swap: it is closed only
        # once any such call is long done.
        time.sleep(_RETIRED_GRACE_S)
        with engine_errors(collection):
            held.shard.close()
        shutil.rmtree(held.path, ignore_errors=True)
        return True

    def _built_and_loaded(
        self,
        copy: Path,
        written: int,
        *,
        load: Callable[[], _Loaded],
        forget: Callable[[int], None],
        gone: Callable[[], bool],
    ) -> _Loaded | None:
        """The copy indexed by a child and then `load`ed; None when there was nothing large
        enough to index (`forget` the copy, its `written` points counted as indexed: not
        tried again until more writes) or the collection is `gone` (dropped or closed
        meanwhile). On any failure the copy is forgotten, no point counted."""
        try:
            built = self._builds.build(copy, self._dense_dim, self._indexing_threshold_kb)
            fresh = load() if built else None
        except BaseException as error:
            forget(0)
            if isinstance(error, IndexUnavailableError) and gone():
                return None
            raise
        if fresh is None:
            forget(written)
        return fresh

    def _index_hosted(self, collection: str, host: EdgeHost) -> bool:
        """Build a hosted collection's indexes beside its host, and hand the collection to
        a new host loaded with the indexed copy: neither host stops for a load."""
        copy = edge_build.next_generation(self._root, collection)
        self.disk.check(allocated_bytes(host.path))
        try:
            written: int | None = host.call("copy_for_build", collection, copy)
        except IndexUnavailableError:
            if self._hosts.get(collection) is not host:
                return False  # dropped or closed meanwhile: nothing to build
            raise
        if written is None:  # too few writes since the last build, or gone
            return False
        fresh = self._built_and_loaded(
            copy,
            written,
            load=lambda: self._host(collection, copy),
            forget=lambda indexed: self._forget_hosted_copy(host, copy, indexed),
            gone=lambda: self._hosts.get(collection) is not host,
        )
        if fresh is None:
            return False
        swapped = False
        try:
            swapped = self._rehost(collection, host, fresh, copy)
        finally:
            if not swapped:
                fresh.stop()
                shutil.rmtree(copy, ignore_errors=True)
        if swapped:
            time.sleep(_RETIRED_GRACE_S)  # for calls already sent to the old host
            host.stop()
            shutil.rmtree(host.path, ignore_errors=True)
        return swapped

    def _rehost(self, collection: str, old: EdgeHost, fresh: EdgeHost, copy: Path) -> bool:
        """Replay onto `fresh` the writes `old` took since the copy, then route the
        collection's calls to it; False (nothing changed) when the collection was dropped
        or the index closed meanwhile. The collection's writes wait meanwhile (`old`
        refuses them, `moved_from` waits for this lock)."""
        with self._lock:
            if self._closed or self._hosts.get(collection) is not old:
                return False
            journal, points = old.call("hand_over", collection)
            try:
                self._catch_up(collection, fresh, journal, points)
                edge_build.point_to(self._root, collection, copy)
            except BaseException:
                try:
                    old.call("take_back", collection)
                except IndexUnavailableError:
                    old.stop()  # started again on its directory, which holds every write
                raise
            self._hosts[collection] = fresh
        return True

    @staticmethod
    def _catch_up(collection: str, fresh: EdgeHost, journal: list[Write], points: int) -> None:
        if fresh.call("apply", collection, journal) != points:
            raise IndexUnavailableError(f"the indexed copy of {collection!r} differs")

    @staticmethod
    def _forget_hosted_copy(host: EdgeHost, copy: Path, written: int) -> None:
        with contextlib.suppress(IndexUnavailableError):  # a host gone has nothing to forget
            host.call("forget_build", host.collection, written)
        shutil.rmtree(copy, ignore_errors=True)

    def copy_for_build(self, collection: str, copy: Path) -> int | None:
        """A host's side of a build beside it: the shard copied to `copy`, and its writes
        journalled from then on; the points written since it was last indexed (None: too
        few to build, or the collection is gone)."""
        held = self.existing(collection)
        if held is None or held.unindexed < self._due:
            return None
        with held.writes:
            if self._let_go(held) or held.moved:
                return None
            with engine_errors(collection):
                held.shard.flush()
            edge_build.copy_shard(held.path, copy)
            held.journal = []
            return held.unindexed

    def forget_build(self, collection: str, written: int) -> None:
        """The build given up: no journal kept; `written` points count as indexed."""
        held = self.existing(collection)
        if held is not None:
            self._forget_copy(held, None, written)

    def hand_over(self, collection: str) -> tuple[list[Write], int]:
        """The writes journalled since the copy, and the points the collection holds; from
        then on the shard refuses writes (`CollectionMovedError`) and answers reads."""
        held = self.existing(collection)
        if held is None:
            raise IndexUnavailableError(f"collection {collection!r} is gone")
        with held.writes, engine_errors(collection):
            journal, held.journal = held.journal or [], None
            held.moved = True
            return journal, held.shard.info().points_count

    def take_back(self, collection: str) -> None:
        """The hand-over given up: the shard takes writes again."""
        held = self.existing(collection)
        if held is not None:
            with held.writes:
                held.moved = False

    def _serve_copy(self, collection: str, held: Shard, copy: Path) -> Shard | EdgeHost:
        """The indexed copy loaded: here, or by a host process when the collection is
        large enough for its load to stop turns for long."""
        if self._host_from_points is not None:
            with engine_errors(collection):
                points = held.shard.info().points_count
            if points >= self._host_from_points:
                return self._host(collection, copy)
        return self._load_copy(collection, copy)

    def _swap_to_host(self, collection: str, held: Shard, host: EdgeHost, copy: Path) -> bool:
        """Replay onto the host the writes `held` took since it was copied, then route the
        collection's calls to it; False (nothing changed) when the collection was dropped
        or the index closed meanwhile."""
        with held.writes:
            journal, held.journal = held.journal or [], None
            with self._lock:
                if self._closed or self._shards.get(collection) is not held:
                    return False
                points = host.call("apply", collection, journal)
                with engine_errors(collection):
                    if points != held.shard.info().points_count:
                        raise IndexUnavailableError(f"the indexed copy of {collection!r} differs")
                edge_build.point_to(self._root, collection, copy)
                self._hosts[collection] = host
                del self._shards[collection]
            held.retired = True
        return True

    def _let_go(self, held: Shard) -> bool:
        """Whether the shard was dropped or swapped, or the index closed (by other threads)."""
        return held.retired or held.dropped or self._closed

    def _load_copy(self, collection: str, copy: Path) -> Shard:
        if not (copy / EDGE_CONFIG_FILE).is_file():  # never create an empty one instead
            raise IndexUnavailableError(f"the indexed copy of {collection!r} is gone")
        try:
            with engine_errors(collection):
                return self._load_or_create(copy)
        except ValueError as error:
            raise IndexUnavailableError(f"the indexed copy of {collection!r}: {error}") from error

    @staticmethod
    def _forget_copy(held: Shard, copy: Path | None, written: int) -> None:
        with held.writes:
            held.journal = None
            held.unindexed -= written
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)

    def _swap(
        self,
        collection: str,
        held: Shard,
        fresh: Shard,
        written: int,
        operation_of: Callable[[Write], UpdateOperation],
    ) -> bool:
        """Replay onto `fresh` the writes `held` took since it was copied, then put it in
        `held`'s place; False (nothing changed) when the collection was dropped or the
        index closed meanwhile."""
        with held.writes:
            journal, held.journal = held.journal or [], None
            with self._lock:
                if self._closed or self._shards.get(collection) is not held:
                    return False
                with engine_errors(collection):
                    for write in journal:
                        fresh.shard.update(operation_of(write))
                    fresh.shard.flush()
                    if fresh.shard.info().points_count != held.shard.info().points_count:
                        raise IndexUnavailableError(f"the indexed copy of {collection!r} differs")
                edge_build.point_to(self._root, collection, fresh.path)
                self._shards[collection] = fresh
            held.retired = True
            fresh.unindexed = held.unindexed - written
        return True

    @contextmanager
    def writing(self, collection: str, *, create: bool = False) -> Iterator[Shard | None]:
        """The collection's shard with its write lock held; None when it has none and
        `create` is not asked. A shard swapped for its indexed copy while the caller
        waited for the lock hands the write to the copy."""
        while True:
            held = self.open(collection) if create else self.existing(collection)
            if held is None:
                yield None
                return
            with held.writes:
                if held.retired:
                    continue
                if held.moved:
                    raise CollectionMovedError(collection)
                if held.dropped:
                    raise IndexUnavailableError(f"collection {collection!r} was dropped")
                with engine_errors(collection):
                    yield held
                return

    def _collections_on_disk(self) -> list[str]:
        if not self._root.is_dir():
            return []
        names = {path.name for path in self._root.iterdir() if path.is_dir()}
        names |= set(edge_build.swapped_collections(self._root))
        # a hosted collection's directory is its host's
        return sorted(
            name for name in names if is_collection_name(name) and name not in self._hosts
        )

    def _on_disk(self, collection: str) -> bool:
        return (self._root / collection).exists() or edge_build.pointer_file(
            self._root, collection
        ).exists()

    def _live_directory(self, collection: str) -> Path:
        return edge_build.live_directory(self._root, checked_collection(collection))

    def close(self) -> None:
        self._builds.stop()
        with self._lock:
            self._closed = True
            shards, self._shards = self._shards, {}
            hosts, self._hosts = self._hosts, {}
        for host in hosts.values():  # all asked first: they flush and close side by side
            host.ask_to_stop()
        for host in hosts.values():
            host.wait()
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


def _each(collections: Iterable[str], build: Callable[[str], bool]) -> list[str]:
    """`build` each collection (index, host or start its host again), one failing not
    keeping the others from it; the collections it changed. IndexUnavailableError after all
    were tried if any failed."""
    changed: list[str] = []
    failures: list[IndexUnavailableError] = []
    for collection in collections:
        try:
            if build(collection):
                changed.append(collection)
        except IndexUnavailableError as error:
            failures.append(error)
    if len(failures) == 1:
        raise failures[0]  # as it was: a DiskFullError stays one
    if failures:
        raise IndexUnavailableError("; ".join(map(str, failures))) from failures[0]
    return changed


def _search_threads_default() -> int:
    """One search thread per core the process may use. Edge's own default (eight threads
    on two cores here) took 1.3 ms more CPU a turn and served eight callers fewer turns a
    second; one thread (searching in the calling thread, on the question model's core)
    made one caller's turn about 1 ms slower (docs/benchmarks.md). Edge holds the GIL
    for a whole call, so the gateway never runs two searches at once: the pool only
    spreads one call's segments."""
    return len(os.sched_getaffinity(0))


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
    it would be read whole at every load of the shard, which turns wait for
    (docs/decisions/edge-index-builds.md)."""
    tenant = key == TENANT_KEY
    memory = Memory.Cold if key == ON_DISK_KEY else None
    return KeywordIndexParams(is_tenant=tenant, enable_hnsw=tenant, memory=memory)


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


def _has_document_keywords(path: Path) -> bool:
    """Whether an existing shard was created with the whole-document BM25 vector, as the
    config Edge keeps in its directory says. A directory without that file was left
    half-created by a crash (Edge writes it first): it is created afresh, with it."""
    try:
        config = json.loads((path / EDGE_CONFIG_FILE).read_text())
    except FileNotFoundError:
        return True
    return DOCUMENT_SPARSE_VECTOR in config.get("sparse_vectors", {})
