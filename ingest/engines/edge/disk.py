"""Free disk kept for Qdrant Edge, so that a full disk refuses writes instead of ending
the process.

Edge writes its shards through memory maps. A page it cannot back once the disk is full
ends the whole process with SIGBUS, not an error: every workspace's turns would stop
with it, and a restart on the same full disk could end alike. So the data dir keeps a
reserve free: a write that would start below it is refused (`DiskFullError`, answered
503) and changes nothing, while reads and deletions go on (deleting is how space comes
back). An index build first checks there is room for its copy of the shard.
"""

from __future__ import annotations

import os
from pathlib import Path

from ingest.index import DiskFullError

_MIB = 1024 * 1024


class DiskReserve:
    """The free space kept on the disk that holds `path` (which need not exist yet). The
    platform's default (`KBGATE_MIN_FREE_DISK_MB`, 512) is well over what one write grows
    a shard by: a log segment and a storage page are 32 MB each, allocated as they fill."""

    def __init__(self, path: Path, reserve_mb: int) -> None:
        if reserve_mb < 0:
            raise ValueError("the reserve must be 0 MB or more")
        self._path = path
        self.reserve_bytes = reserve_mb * _MIB

    def free_bytes(self) -> int:
        """Bytes an unprivileged writer may still allocate on the disk."""
        existing = self._path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        stats = os.statvfs(existing)
        return stats.f_bavail * stats.f_frsize

    def check(self, needed_bytes: int = 0) -> None:
        """DiskFullError unless `needed_bytes` more would leave the reserve free."""
        if self.reserve_bytes == 0 and needed_bytes == 0:
            return
        free = self.free_bytes()
        if free - needed_bytes < self.reserve_bytes:
            raise DiskFullError(
                free_mb=free // _MIB,
                needed_mb=-(-needed_bytes // _MIB),
                reserve_mb=self.reserve_bytes // _MIB,
            )


def allocated_bytes(directory: Path) -> int:
    """The disk a directory's files take (their holes left out): what a copy keeping its
    holes (`edge_build.copy_shard`) allocates."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total
