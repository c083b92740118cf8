"""Turn records on the embedded store: a connection of their own to the same SQLite file.

A record is written on every retrieval turn and read back by citation checks for its
time to live. Its connection commits without an fsync (WAL with `synchronous=NORMAL`):
a record survives a crash of the process; an OS crash may lose the last ones, and those
turns' later citation checks answer 404. The store's other connection keeps every
settings write fully synchronous; neither waits in the process for the other's calls,
and SQLite's file lock orders their writes.

A write is one autocommit statement: each statement a worker thread runs costs it the
GIL again when SQLite returns, which under load means waiting for whichever thread holds
it. Expired records are left to `purge` (the retention sweep); reads skip them.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from settings.records import TurnRecord
from settings.store import StoreUnavailableError
from settings.store_rules import RecordDecoder, encode, own_turn
from settings.stores.sqlite.connection import SerialConnection, connect


class SqliteTurns:
    """Put, get, delete and purge turn records through their own connection."""

    def __init__(self, connection: SerialConnection, decode: RecordDecoder) -> None:
        """Wrap a connection made by `open` (the store's file, schema already made)."""
        self._conn = connection
        self._decode = decode

    @staticmethod
    def connect(path: Path) -> sqlite3.Connection:
        """A connection to the store's file whose commits skip the fsync."""
        conn = connect(path)
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as error:
            conn.close()
            raise StoreUnavailableError(f"cannot prepare {path}: {error}") from error
        return conn

    async def put(self, turn: TurnRecord, ttl_s: int) -> None:
        """Keep the turn for ttl_s seconds."""
        record = encode(turn).decode()

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO turns (turn_id, expires_at, record) VALUES (?, ?, ?)",
                (turn.turn_id, time.time() + ttl_s, record),
            )

        await self._conn.run(work)

    async def get(self, tenant_id: str, turn_id: str) -> TurnRecord | None:
        """The tenant's turn if it exists and has not expired."""

        def work(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT record FROM turns WHERE turn_id = ? AND expires_at > ?",
                (turn_id, time.time()),
            ).fetchone()
            return None if row is None else str(row[0])

        raw = await self._conn.run(work)
        return own_turn(self._decode.one_or_none(TurnRecord, raw), tenant_id)

    async def delete_tenant(self, tenant_id: str) -> int:
        """Remove every turn record of the tenant (the tenant id is inside the record)."""

        def work(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "DELETE FROM turns WHERE json_extract(record, '$.tenant_id') = ?", (tenant_id,)
            ).rowcount

        return await self._conn.run(work)

    async def purge(self) -> int:
        """Delete expired turn records now; returns how many went."""

        def work(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM turns WHERE expires_at <= ?", (time.time(),)).rowcount

        return await self._conn.run(work)

    async def close(self) -> None:
        await self._conn.close()
