"""Qdrant Edge's indexes built beside a serving process (`EdgeIndex.index_written`,
`ingest.edge_build`): on a copy of the shard, in a child process, swapped in with every
write made meanwhile. Real Edge shards, small synthetic vectors (8-d) and an indexing
threshold of 1 KB, so that a few dozen points are enough to build a graph."""

from __future__ import annotations

import pickle
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from qdrant_edge import CountRequest

from ingest import edge_build
from ingest.edge_shards import Shard
from ingest.edge_writes import DeleteWhere, Upsert
from ingest.index import IndexBuilds, IndexUnavailableError, Passage, org_collection
from ingest.qdrant_edge import EDGE_DIR, EdgeIndex
from tests.integration.test_index_contract import (  # the contract suite's data
    DIM,
    dense_leg,
    hit_ids,
    passage,
    random_unit,
    scope,
)

COLLECTION = org_collection("acme")
#: 1 KB of 8-d vectors: 32 points written make a collection due for a build
THRESHOLD_KB = 1


def _passages(start: int, count: int, rng: random.Random) -> list[Passage]:
    return [
        passage(idx=i, doc=f"doc{i}", dense=random_unit(rng)) for i in range(start, start + count)
    ]


def _count(index: EdgeIndex) -> int:
    held = index._existing(COLLECTION)
    assert held is not None
    return held.shard.count(CountRequest(exact=True))


def _indexed(index: EdgeIndex) -> int:
    """Vectors in a search index: the sparse ones always, the dense ones once in a graph."""
    held = index._existing(COLLECTION)
    assert held is not None
    return held.shard.info().indexed_vectors_count


class _DuringBuild(EdgeIndex):
    """Edge whose build runs `during` between the copy and the swap (after the child
    built the copy, before it is loaded): what the gateway does meanwhile."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir, dense_dim=DIM, indexing_threshold_kb=THRESHOLD_KB)
        self.during: Callable[[EdgeIndex], object] = lambda index: None
        load_copy = self._shards._load_copy

        def hooked(collection: str, copy: Path) -> Shard:
            self.during(self)
            return load_copy(collection, copy)

        self._shards._load_copy = hooked  # type: ignore[method-assign]  # the test's hook


def build_on_a_thread(
    index: EdgeIndex,
) -> tuple[threading.Thread, threading.Event, list[tuple[str, ...]]]:
    """`index_written` started on a thread of its own; the event is set once it is done,
    and the list then holds the collections it swapped."""
    done = threading.Event()
    outcome: list[tuple[str, ...]] = []

    def build() -> None:
        outcome.append(index.index_written().collections)
        done.set()

    builder = threading.Thread(target=build)
    builder.start()
    return builder, done, outcome


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def index(data_dir: Path) -> Iterator[_DuringBuild]:
    built = _DuringBuild(data_dir)
    yield built
    built.close()


def test_a_written_collection_is_indexed_and_keeps_every_write_made_meanwhile(
    index: _DuringBuild, data_dir: Path
) -> None:
    """A collection written past the threshold is indexed beside the process: the swapped
    shard has graph-indexed vectors, holds the points written before the copy and those
    written and deleted while the child built it (journalled in kbgate's own picklable
    form), and searches find the latest writes."""
    rng = random.Random(7)
    index.upsert(COLLECTION, _passages(0, 200, rng))
    assert _indexed(index) == 200  # BM25 only
    late = _passages(200, 20, rng)

    def meanwhile(during: EdgeIndex) -> None:
        during.upsert(COLLECTION, late)
        during.delete_document(COLLECTION, scope(), "doc0")
        held = during._existing(COLLECTION)
        assert held is not None
        assert held.journal is not None
        # kbgate's own descriptions, which another process could replay
        assert [type(write) for write in held.journal] == [Upsert, DeleteWhere]
        assert pickle.loads(pickle.dumps(held.journal)) == held.journal  # noqa: S301 — our own bytes

    index.during = meanwhile
    builds = index.index_written()
    assert builds.collections == (COLLECTION,)
    assert builds.longest_load_ms > 0  # the indexed copy's load, timed
    assert _indexed(index) >= 2 * 199  # the dense vectors too
    assert _count(index) == 219
    assert hit_ids(index, COLLECTION, scope(), dense_leg(late[-1].dense, limit=1)) == [
        [late[-1].point_id]
    ]
    assert index.index_written() == IndexBuilds()  # nothing written since


def test_the_swapped_generation_is_the_collection_after_a_restart(data_dir: Path) -> None:
    """After a swap the collection lives in a generation directory named by a pointer;
    the next process opens it, folds it back into `<root>/<collection>` and finds every
    point, indexed."""
    rng = random.Random(8)
    first = EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=THRESHOLD_KB)
    first.upsert(COLLECTION, _passages(0, 100, rng))
    assert first.index_written().collections == (COLLECTION,)
    root = data_dir / EDGE_DIR
    assert (root / f"{COLLECTION}.live").read_text() == f"{COLLECTION}~1"
    assert not (root / COLLECTION).exists()  # the old directory went after the swap
    first.upsert(COLLECTION, _passages(100, 5, rng))  # written to the swapped shard
    first.close()

    again = EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=THRESHOLD_KB)
    try:
        assert _count(again) == 105
        assert _indexed(again) >= 200 + 5
        assert sorted(p.name for p in root.iterdir()) == [COLLECTION]
    finally:
        again.close()


def _disk_bytes(directory: Path) -> tuple[int, int]:
    """The files' allocated bytes and their sizes, summed."""
    files = [path.stat() for path in directory.rglob("*") if path.is_file()]
    return sum(f.st_blocks * 512 for f in files), sum(f.st_size for f in files)


def test_the_swapped_shard_keeps_the_holes_of_its_log(index: _DuringBuild, data_dir: Path) -> None:
    """The copy keeps the holes of the files Edge sizes ahead (its log segments, 32 MB
    each), so the shard swapped in takes about the disk of the one it replaces plus its
    graph, not the log's whole size."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(12)))
    held = index._existing(COLLECTION)
    assert held is not None
    live_log, log_size = _disk_bytes(held.path / "wal")
    assert live_log < log_size / 4  # Edge's own segments are mostly holes
    assert index.index_written().collections == (COLLECTION,)
    swapped = index._existing(COLLECTION)
    assert swapped is not None
    assert swapped.path.name == f"{COLLECTION}~1"
    swapped_log, _ = _disk_bytes(swapped.path / "wal")
    assert swapped_log < log_size / 4


def test_a_collection_dropped_during_the_build_stays_dropped(
    index: _DuringBuild, data_dir: Path
) -> None:
    """Dropping a collection while its copy is built wins: the build swaps nothing in,
    and nothing of the collection is left on disk."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(9)))
    index.during = lambda during: during.drop_collection(COLLECTION)
    assert index.index_written() == IndexBuilds()
    assert index.count(COLLECTION, scope()) == 0
    assert list((data_dir / EDGE_DIR).iterdir()) == []


def test_reads_and_writes_go_on_while_the_child_builds(index: _DuringBuild) -> None:
    """While the child builds, searches answer and writes land in a few milliseconds each
    (the build runs in another process, not under this one's GIL)."""
    rng = random.Random(10)
    index.upsert(COLLECTION, _passages(0, 3000, rng))
    builder, done, outcome = build_on_a_thread(index)
    slowest, calls, written = 0.0, 0, 3000
    while not done.is_set():
        started = time.perf_counter()
        hit_ids(index, COLLECTION, scope(), dense_leg(random_unit(rng), limit=10))
        index.upsert(COLLECTION, _passages(written, 1, rng))
        slowest = max(slowest, time.perf_counter() - started)
        calls, written = calls + 1, written + 1
    builder.join()
    assert outcome == [(COLLECTION,)]
    assert calls > 10
    assert _count(index) == written
    # The loads of the copy and closes of the old shard hold the GIL; at this size they
    # take milliseconds, the build itself (not in this process) far longer.
    assert slowest < 1.0


def test_a_failed_build_leaves_the_collection_as_it_was(
    index: _DuringBuild, data_dir: Path
) -> None:
    """A build whose copy is lost (here: removed once the child built it) raises
    IndexUnavailableError rather than swapping in an empty shard, leaves the shard as it
    was and answering, and is tried again later."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(11)))

    def break_copy(during: EdgeIndex) -> None:
        for copy in (data_dir / EDGE_DIR).glob(f"{COLLECTION}~*"):
            shutil.rmtree(copy)

    index.during = break_copy
    with pytest.raises(IndexUnavailableError):
        index.index_written()
    assert sorted(p.name for p in (data_dir / EDGE_DIR).iterdir()) == [COLLECTION]
    assert _count(index) == 100
    index.during = lambda during: None
    assert index.index_written().collections == (COLLECTION,)


def test_the_layout_folds_back_after_a_crash(tmp_path: Path) -> None:
    """`live_directory` after a crash: with a pointer, its generation becomes the
    collection (replacing the old directory); without one, unfinished copies go and the
    collection's directory stays."""
    root = tmp_path
    (root / "kb_a").mkdir()
    (root / "kb_a~2").mkdir()
    (root / "kb_a~2" / "new").touch()
    (root / "kb_a~3").mkdir()  # a copy being built when the crash came
    edge_build.point_to(root, "kb_a", root / "kb_a~2")
    (root / "kb_b").mkdir()
    (root / "kb_b" / "old").touch()
    (root / "kb_b~1").mkdir()
    assert edge_build.live_directory(root, "kb_a") == root / "kb_a"
    assert edge_build.live_directory(root, "kb_b") == root / "kb_b"
    assert sorted(p.name for p in root.iterdir()) == ["kb_a", "kb_b"]
    assert [p.name for p in (root / "kb_a").iterdir()] == ["new"]
    assert [p.name for p in (root / "kb_b").iterdir()] == ["old"]
