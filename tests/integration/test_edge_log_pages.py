"""A Qdrant Edge shard's write-ahead log does not stay resident after the shard loads."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from qdrant_edge import CountRequest, EdgeShard

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EDGE_DIR, EdgeIndex
from ingest.engines.edge.log_pages import mapped_ranges, page_out_log
from ingest.index import org_collection
from tests.integration.test_index_contract import passage, scope

DIM = 384
PASSAGES = 2_000  # about 3 MB of vectors in the log

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="MADV_PAGEOUT is Linux's")


def _resident_kib(prefix: str) -> int:
    """This process's resident KiB of mappings of files under `prefix` (`/proc/self/smaps`)."""
    resident, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
            inside = len(fields) == 6 and fields[5].startswith(prefix)
        elif inside and fields[0] == "Rss:":
            resident += int(fields[1])
    return resident


def _unit(rng: random.Random) -> tuple[float, ...]:
    values = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in values) ** 0.5
    return tuple(v / norm for v in values)


@pytest.fixture
def written(tmp_path: Path) -> Path:
    """A data dir whose one collection holds `PASSAGES` passages in its log, closed."""
    rng = random.Random(3)
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, indexing_threshold_kb=0))
    index.upsert(
        org_collection("acme"),
        [passage(doc=f"doc{n}", dense=_unit(rng)) for n in range(PASSAGES)],
    )
    index.close()
    return tmp_path


def _log(data_dir: Path) -> tuple[Path, str]:
    shard = data_dir / EDGE_DIR / org_collection("acme")
    return shard, str((shard / "wal").resolve()) + os.sep


def test_page_out_frees_the_log_a_load_read(written: Path) -> None:
    """A shard loaded by Edge alone keeps its log resident (megabytes); `page_out_log`
    frees all but a few pages of it, answers the bytes it advised, and the shard still
    holds every passage."""
    shard_dir, log = _log(written)
    shard = EdgeShard.load(str(shard_dir))
    try:
        assert _resident_kib(log) >= PASSAGES * DIM * 4 // 1024
        assert page_out_log(shard_dir) >= PASSAGES * DIM * 4
        assert _resident_kib(log) <= 64
        assert shard.count(CountRequest(exact=True)) == PASSAGES
    finally:
        shard.close()


def test_the_index_pages_out_each_shards_log_when_it_loads(written: Path) -> None:
    """Opening a collection through `EdgeIndex` leaves at most a few pages of its log
    resident, and every passage searchable."""
    _, log = _log(written)
    index = BlockingIndex(EdgeIndex(written, dense_dim=DIM, indexing_threshold_kb=0))
    try:
        index.ensure_collection(org_collection("acme"))
        assert mapped_ranges(log)
        assert _resident_kib(log) <= 64
        assert index.count(org_collection("acme"), scope()) == PASSAGES
    finally:
        index.close()
