"""Handing a Qdrant Edge shard's write-ahead log pages back to the kernel once it has loaded.

Edge maps each log segment (a 32 MB file) into the process and reads the log whole when a
shard loads, to replay it. The pages then stay resident, file-backed, although nothing
reads them again before the next load: tens of MB a collection
(docs/decisions/edge-memory.md). `madvise(MADV_PAGEOUT)` on the log's mappings writes back
anything dirty and frees them; a later write faults in only the page it appends to. The
advice never changes what memory holds, so a mapping that changed since `/proc` was read
is at worst paged out to no purpose.

Linux 5.4 or later; elsewhere nothing is paged out and the log stays resident.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

#: `MADV_PAGEOUT` from <linux/mman.h>: reclaim these pages now.
MADV_PAGEOUT = 21
_MAPS = Path("/proc/self/maps")

Madvise = Callable[[int, int, int], int]


def page_out_log(shard_dir: Path) -> int:
    """Page out this process's mappings of the files under `shard_dir`'s `wal` folder.

    Answers the bytes of mapping advised (0 where the platform has no such advice)."""
    ranges = mapped_ranges(str(shard_dir.resolve() / "wal") + os.sep)
    madvise = _libc_madvise() if ranges else None
    if madvise is None:
        return 0
    return sum(
        end - start for start, end in ranges if madvise(start, end - start, MADV_PAGEOUT) == 0
    )


def mapped_ranges(prefix: str) -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of files whose path starts with
    `prefix` (none where `/proc` is not mounted)."""
    try:
        lines = _MAPS.read_text().splitlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix):
            start, end = fields[0].split("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _libc_madvise() -> Madvise | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    advise: Madvise = madvise
    return advise
