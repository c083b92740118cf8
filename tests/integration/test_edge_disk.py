"""The free disk the embedded engine keeps (`ingest.engines.edge.disk`): at its reserve,
writes and index builds are refused with `DiskFullError` and change nothing, while reads and
deletions go on. Real Qdrant Edge shards on the real disk (a reserve above what is free),
and on a small ext4 disk that really fills (root only: it is mounted for the test; CI
requires it)."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.disk import DiskReserve, allocated_bytes
from ingest.engines.edge.engine import EdgeEngine
from ingest.engines.edge.index import EDGE_DIR, EdgeIndex
from ingest.index import DiskFullError, Passage, org_collection
from ingest.payload import PiiAnalysis
from tests.integration.test_index_contract import (
    DIM,
    dense_leg,
    hit_ids,
    passage,
    random_unit,
    scope,
)
from tests.support.services import missing_service

_MIB = 1024 * 1024
COLLECTION = org_collection("acme")


def _passages(start: int, count: int, rng: random.Random) -> list[Passage]:
    return [
        passage(idx=i, doc=f"doc{i}", dense=random_unit(rng)) for i in range(start, start + count)
    ]


def _more_than_free(path: Path) -> int:
    """A reserve (MiB) over what the disk holding `path` has free: every write refused."""
    return DiskReserve(path, 0).free_bytes() // _MIB + 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB ext4 file system of its own (a loop-mounted image), which the test alone
    fills (skipped without one on a developer machine, failed in CI). Not tmpfs: there even
    reading a hole of a mapped file takes memory."""
    image, mount = tmp_path / "disk.img", tmp_path / "disk"
    mount.mkdir()
    with open(image, "wb") as file:
        file.truncate(64 * _MIB)
    steps = (["mkfs.ext4", "-q", "-F", str(image)], ["mount", "-o", "loop", str(image), str(mount)])
    for step in steps:
        done = subprocess.run(step, capture_output=True, check=False)  # noqa: S603 — the system's tools
        if done.returncode != 0:
            reason = done.stderr.decode().strip()
            missing_service(f"a small disk to fill (mkfs.ext4, mount -o loop as root): {reason}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # noqa: S603, S607 — the system's umount


def test_writes_at_the_reserve_are_refused_and_change_nothing(tmp_path: Path) -> None:
    """With less free disk than the reserve, every kind of write is refused and changes
    nothing (no point, no payload, no new collection); searches, counts and deletions
    go on."""
    data_dir = tmp_path / "data"
    rng = random.Random(41)
    written = _passages(0, 20, rng)
    with closing(BlockingIndex(EdgeIndex(data_dir, dense_dim=DIM))) as index:
        index.upsert(COLLECTION, written)
    with closing(
        BlockingIndex(EdgeIndex(data_dir, dense_dim=DIM, min_free_mb=_more_than_free(data_dir)))
    ) as index:
        with pytest.raises(DiskFullError):
            index.upsert(COLLECTION, _passages(20, 5, rng))
        with pytest.raises(DiskFullError):
            index.ensure_collection(org_collection("newcomer"))
        with pytest.raises(DiskFullError):
            index.set_pii(COLLECTION, scope(), {written[0].point_id: PiiAnalysis(analyzer="x")})
        assert sorted(p.name for p in (data_dir / EDGE_DIR).iterdir()) == [COLLECTION]
        assert index.count(COLLECTION, scope()) == 20
        assert hit_ids(index, COLLECTION, scope(), dense_leg(written[3].dense, limit=1)) == [
            [written[3].point_id]
        ]
        first_document = written[0].payload.document_id
        assert index.delete_document(COLLECTION, scope(), first_document) > 0
        assert index.count(COLLECTION, scope(), first_document) == 0


def test_no_reserve_refuses_nothing(tmp_path: Path) -> None:
    """A reserve of 0 checks nothing: writes go through on any disk."""
    with closing(
        BlockingIndex(EdgeIndex(tmp_path / "data", dense_dim=DIM, min_free_mb=0))
    ) as index:
        index.upsert(COLLECTION, _passages(0, 3, random.Random(42)))
        assert index.count(COLLECTION, scope()) == 3


_FILL = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from ingest.engines.blocking import BlockingIndex
    from ingest.engines.edge.index import EdgeIndex
    from ingest.index import DiskFullError
    from tests.integration.test_edge_disk import COLLECTION, _passages
    from tests.integration.test_index_contract import DIM, scope

    data_dir, reserve_mb = Path(sys.argv[1]), int(sys.argv[2])
    index = BlockingIndex(
        EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=0, min_free_mb=reserve_mb)
    )
    rng, written = random.Random(43), 0
    while True:
        try:
            index.upsert(COLLECTION, _passages(written, 500, rng))
        except DiskFullError:
            break
        written += 500
    deleted = index.delete_document(COLLECTION, scope(), "doc0")
    index.close()
    again = BlockingIndex(EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=0))
    print(written, deleted, again.count(COLLECTION, scope()))
    again.close()
    """
)


@pytest.mark.ci
def test_a_disk_that_fills_refuses_writes_instead_of_ending_the_process(small_disk: Path) -> None:
    """Writes into a small disk until it is down to its reserve: the process goes on (Edge
    ends it with SIGBUS when a memory-mapped page finds no room), every acknowledged point
    is there after a restart, and a deletion still works at the reserve."""
    filled = subprocess.run(  # noqa: S603 — this interpreter, the script above
        [sys.executable, "-c", _FILL, str(small_disk / "data"), "16"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert filled.returncode == 0, filled.stderr[-2000:]
    written, deleted, counted = map(int, filled.stdout.split())
    assert written >= 5000
    assert deleted > 0
    assert counted == written - deleted


def test_an_index_build_without_room_for_its_segments_is_refused(small_disk: Path) -> None:
    """`optimize` (a start's build) first checks there is room for the collection's new
    segments above the reserve: without it the build fails with DiskFullError and the
    collection serves on, exactly; with room, the same call builds it."""
    engine = EdgeEngine(small_disk / "data", dense_dim=DIM, indexing_threshold_kb=1)
    with closing(engine):
        engine.upsert(COLLECTION, _passages(0, 200, random.Random(44)))
        shard = allocated_bytes(small_disk / "data" / EDGE_DIR / COLLECTION)
        engine.disk.reserve_bytes = engine.disk.free_bytes() - shard // 2
        with pytest.raises(DiskFullError):
            engine.optimize()
        assert engine.count(COLLECTION, scope()) == 200
        engine.disk.reserve_bytes = engine.disk.free_bytes() - 2 * shard - 4 * _MIB
        assert engine.optimize() == [COLLECTION]
        assert engine.count(COLLECTION, scope()) == 200
