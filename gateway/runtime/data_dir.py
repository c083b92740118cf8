"""One process per embedded data dir.

Qdrant Edge allows one process per shard and SQLite turn records assume one writer, so
every command that opens a data dir's embedded stores (`serve`, `ingest`, `backfill-org`,
`eval --data-dir`) first takes an exclusive lock on `<data dir>/kbgate.lock` and holds it
until the process exits. A second process is refused before it opens anything (and, for
`serve`, before it binds its port), with a message naming the holder.

The lock is `flock`: the kernel drops it when its holder dies, so a `kill -9` leaves no
stale lock behind. The file keeps the holder's pid and command, for the message only.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from settings.config import Config

LOCK_FILE = "kbgate.lock"


class DataDirInUseError(RuntimeError):
    """Another process holds the data dir."""


class DataDirLock:
    """An exclusive lock on a data dir, held until `release` (or the process's end)."""

    def __init__(self, data_dir: Path, handle: int) -> None:
        self.data_dir = data_dir
        self._handle: int | None = handle

    def release(self) -> None:
        if self._handle is not None:
            os.close(self._handle)  # closing the descriptor drops the flock
            self._handle = None

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()


def needs_lock(config: Config) -> bool:
    """Whether the config keeps a store in the data dir (Qdrant Edge or SQLite).

    Deployed replicas (a Qdrant server and Redis) keep nothing there but the model
    folder, which they only read, so any number of them may share one.
    """
    return not (config.qdrant_url and config.redis_url)


def hold_data_dir(config: Config, command: str) -> DataDirLock | None:
    """Take the data dir for this process; None when the config needs no lock.

    Raises DataDirInUseError, naming the holder, when another process has it.
    """
    if not needs_lock(config):
        return None
    data_dir = config.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    handle = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(handle, 200, 0).decode("utf-8", "replace").strip()
        os.close(handle)
        raise DataDirInUseError(_in_use_message(data_dir, holder or "unknown pid")) from None
    except BaseException:
        os.close(handle)
        raise
    if busy := _edge_shards_in_use(data_dir):
        os.close(handle)
        shards = ", ".join(busy)
        raise DataDirInUseError(_in_use_message(data_dir, f"it holds {shards} open"))
    os.ftruncate(handle, 0)
    os.pwrite(handle, f"pid {os.getpid()}, kbgate {command}\n".encode(), 0)
    return DataDirLock(data_dir, handle)


def _in_use_message(data_dir: Path, holder: str) -> str:
    return (
        f"the data dir {data_dir} is in use by another process ({holder}): one process per "
        "embedded data dir "
        "(Qdrant Edge and SQLite). Stop it, talk to it over HTTP (e.g. `kbgate ingest --url`), "
        "or run several gateways in deployed mode (KBGATE_QDRANT_URL and KBGATE_REDIS_URL)."
    )


def _edge_shards_in_use(data_dir: Path) -> Sequence[str]:
    """Qdrant Edge shards whose WAL another process holds open.

    A gateway that predates the lock file holds only these. A second process must never
    even try `EdgeShard.load` on a held shard: the failed load damages the holder's
    sparse-vector storage before it gives up on the lock (qdrant-edge-py 0.9), so the
    WAL's lock is probed here without opening the shard.
    """
    from ingest.engines.edge.index import EDGE_DIR

    root = data_dir / EDGE_DIR
    busy: list[str] = []
    for wal in sorted(root.glob("*/wal")) if root.is_dir() else []:
        handle = os.open(wal, os.O_RDONLY)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
        except BlockingIOError:
            busy.append(wal.parent.name)
        finally:
            os.close(handle)
    return busy
