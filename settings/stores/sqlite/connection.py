"""One SQLite connection shared by a store's calls: statements in a thread of its own,
one at a time, never on the event loop.

The thread is the connection's alone: a statement never queues behind other work sent to
worker threads (question embeddings, index calls), which under load takes tens of
milliseconds.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from settings.store import StoreUnavailableError

T = TypeVar("T")

#: how long a statement waits for another connection's lock on the file (SQLite's busy timeout)
BUSY_TIMEOUT_S = 5.0


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection to the file, usable from another thread than its maker's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as error:
        raise StoreUnavailableError(f"cannot open {path}: {error}") from error


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


class SerialConnection:
    """A connection whose calls run one after another in its own thread, in the order
    sent (a cancelled caller's call still runs to its end before the next starts); SQLite
    errors and calls after `close` raise StoreUnavailableError."""

    def __init__(self, connection: sqlite3.Connection, name: str) -> None:
        self._conn: sqlite3.Connection | None = connection
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kbgate-{name}")

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` in the connection's thread."""
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._thread, self._call, work)
        except RuntimeError as error:  # the thread was shut down by `close`
            raise StoreUnavailableError("the settings store is closed") from error
        return await future

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            raise StoreUnavailableError("the settings store is closed")
        try:
            return work(self._conn)
        except sqlite3.Error as error:
            raise StoreUnavailableError(f"sqlite: {error}") from error

    async def close(self) -> None:
        """Close the connection after the calls sent before; later calls raise."""

        def work() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, work)
        except RuntimeError:  # closed before
            return
        self._thread.shutdown(wait=False)
