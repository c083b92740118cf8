"""The copy of a shard's directory that an index build works on (`edge_build.copy_shard`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.edge_build import copy_shard

MIB = 1 << 20


def _sparse_file(path: Path, size: int, writes: dict[int, bytes]) -> None:
    with path.open("wb") as handle:
        handle.truncate(size)
        for offset, data in writes.items():
            handle.seek(offset)
            handle.write(data)


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


@pytest.fixture
def shard(tmp_path: Path) -> Path:
    """A directory shaped like a shard: a sized-ahead log segment written at its start, in
    its middle and at its end, one ending in a hole, and a plain file in a subfolder."""
    root = tmp_path / "shard"
    (root / "wal").mkdir(parents=True)
    (root / "segments" / "one").mkdir(parents=True)
    _sparse_file(
        root / "wal" / "open-1",
        32 * MIB,
        {0: b"head" * 1024, 12 * MIB: b"middle" * 2000, 32 * MIB - 4096: b"t" * 4096},
    )
    _sparse_file(root / "segments" / "one" / "page_0.dat", 8 * MIB, {MIB: b"x" * 10_000})
    (root / "segments" / "one" / "segment.json").write_text('{"version": 3}')
    if _allocated(root / "wal" / "open-1") >= 16 * MIB:
        pytest.fail("this file system keeps no holes: the copy's holes cannot be checked")
    return root


def test_the_copy_holds_the_same_bytes(shard: Path, tmp_path: Path) -> None:
    """Every file of the copy reads exactly as its original, holes included (as zeros),
    at the same size."""
    target = tmp_path / "copy"
    copy_shard(shard, target)
    originals = sorted(p.relative_to(shard) for p in shard.rglob("*") if p.is_file())
    copies = sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    assert copies == originals
    for name in originals:
        assert (target / name).read_bytes() == (shard / name).read_bytes()


def test_the_copy_keeps_the_holes(shard: Path, tmp_path: Path) -> None:
    """A hole of the original is a hole of the copy: the copy takes no more disk than the
    original, where writing the holes out would take the files' whole size."""
    target = tmp_path / "copy"
    copy_shard(shard, target)
    for original in (p for p in shard.rglob("*") if p.is_file()):
        copied = target / original.relative_to(shard)
        assert _allocated(copied) <= _allocated(original) + 64 * 1024
    assert _allocated(target / "wal" / "open-1") < 4 * MIB  # of 32 MiB


def test_a_file_that_is_all_hole_stays_empty_on_disk(shard: Path, tmp_path: Path) -> None:
    """A sized-ahead file never written (Edge's next log segment) is copied as its size
    alone."""
    _sparse_file(shard / "wal" / "open-2", 32 * MIB, {})
    target = tmp_path / "copy"
    copy_shard(shard, target)
    copied = target / "wal" / "open-2"
    assert copied.stat().st_size == 32 * MIB
    assert _allocated(copied) == 0
    assert os.path.getsize(copied) == os.path.getsize(shard / "wal" / "open-2")


def test_the_copy_goes_through_the_process_where_the_kernel_cannot_copy(
    shard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an in-kernel copy (another platform, or files on two file systems) the
    bytes go through the process, with the same result: same bytes, holes kept."""
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    target = tmp_path / "copy"
    copy_shard(shard, target)
    log = target / "wal" / "open-1"
    assert log.read_bytes() == (shard / "wal" / "open-1").read_bytes()
    assert _allocated(log) < 4 * MIB
