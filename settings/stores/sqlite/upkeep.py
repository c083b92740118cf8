"""The SQLite store's upkeep: deletions left unfinished, the deletions' audit, and the
settings history retention purges.

Mixed into `settings.stores.sqlite.store.SqliteStore`, whose `_run` runs each statement in a
worker thread under the connection's lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from settings.records import DeletionRecord, Lifecycle, Org, Workspace
from settings.store_rules import RecordDecoder, encode

T = TypeVar("T")


class SqliteUpkeep:
    """`pending_deletions`, the deletions' audit records and `purge_settings_history`."""

    _decode: RecordDecoder

    if TYPE_CHECKING:  # defined by the store this is mixed into

        async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

    async def pending_deletions(self) -> tuple[list[Org], list[Workspace]]:
        """Orgs and workspaces marked `deleting`, each ordered by id."""

        def work(conn: sqlite3.Connection) -> tuple[list[Org], list[Workspace]]:
            marked = (Lifecycle.DELETING.value,)
            orgs = conn.execute(
                "SELECT record FROM orgs WHERE json_extract(record, '$.state') = ? ORDER BY org_id",
                marked,
            ).fetchall()
            workspaces = conn.execute(
                "SELECT record FROM workspaces WHERE json_extract(record, '$.state') = ? "
                "ORDER BY tenant_id",
                marked,
            ).fetchall()
            return (
                self._decode.each(Org, (str(row[0]) for row in orgs)),
                self._decode.each(Workspace, (str(row[0]) for row in workspaces)),
            )

        return await self._run(work)

    async def record_deletion(self, record: DeletionRecord) -> None:
        """Append the audit record of a completed deletion."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO deletions (record) VALUES (?)", (encode(record).decode(),))

        await self._run(work)

    async def deletion_history(self) -> list[DeletionRecord]:
        """Every completed deletion's audit record, oldest first."""

        def work(conn: sqlite3.Connection) -> list[DeletionRecord]:
            rows = conn.execute("SELECT record FROM deletions ORDER BY seq").fetchall()
            return self._decode.each(DeletionRecord, (str(row[0]) for row in rows))

        return await self._run(work)

    async def purge_settings_history(self, before: str) -> int:
        """Delete every workspace's settings changes made before `before` (ISO 8601, UTC,
        as the changes record it); returns how many went."""
        return await self._purge_before("settings_history", before)

    async def purge_admin_history(self, before: str) -> int:
        """Delete every workspace's KB and agent changes made before `before`, likewise."""
        return await self._purge_before("admin_history", before)

    async def _purge_before(self, table: str, before: str) -> int:
        def work(conn: sqlite3.Connection) -> int:
            return conn.execute(
                f"DELETE FROM {table} WHERE json_extract(record, '$.at') < ?",  # noqa: S608 — a fixed table name
                (before,),
            ).rowcount

        return await self._run(work)
