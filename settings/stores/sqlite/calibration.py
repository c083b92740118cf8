"""The SQLite store's golden sets, evaluations, evaluation leases and measured off-topic
lines (`settings.golden`).

`SqliteStore` inherits these methods; they run through its connection and lock like
every other statement. One lease row per workspace marks its running evaluation until
`expires_at` (wall-clock seconds): an evaluation whose process died stops blocking the
next one once its lease has run out.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from settings.golden import (
    EVALUATIONS_KEPT,
    Evaluation,
    EvaluationStatus,
    GoldenSet,
    MeasuredLines,
)
from settings.migration import MigrationStatus, ModelMigration
from settings.records import SettingChange
from settings.store_rules import RecordDecoder, encode, no_workspace
from settings.stores.sqlite.connection import transaction

T = TypeVar("T")

CALIBRATION_SCHEMA = """
CREATE TABLE IF NOT EXISTS golden_sets (
    tenant_id TEXT NOT NULL,
    kb_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kb_id)
);
CREATE TABLE IF NOT EXISTS evaluations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    kb_id TEXT NOT NULL,
    evaluation_id TEXT NOT NULL,
    record TEXT NOT NULL,
    UNIQUE (tenant_id, evaluation_id)
);
CREATE INDEX IF NOT EXISTS evaluations_by_kb ON evaluations (tenant_id, kb_id, seq);
CREATE TABLE IF NOT EXISTS measured_lines (
    tenant_id TEXT NOT NULL,
    kb_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kb_id, scope)
);
CREATE TABLE IF NOT EXISTS model_migrations (
    tenant_id TEXT NOT NULL,
    kb_id TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kb_id)
);
CREATE TABLE IF NOT EXISTS evaluation_leases (
    tenant_id TEXT PRIMARY KEY,
    evaluation_id TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""


class SqliteCalibration:
    """Golden sets and evaluations on the store's connection (see the module docstring)."""

    _decode: RecordDecoder

    if TYPE_CHECKING:  # defined by the store this is mixed into

        async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

    async def put_golden_set(self, golden: GoldenSet) -> None:
        """Create or replace the KB's golden set. NotFoundError if the workspace is unknown."""

        def work(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                if not _workspace_exists(conn, golden.tenant_id):
                    raise no_workspace(golden.tenant_id)
                conn.execute(
                    "INSERT INTO golden_sets (tenant_id, kb_id, record) VALUES (?, ?, ?) "
                    "ON CONFLICT (tenant_id, kb_id) DO UPDATE SET record = excluded.record",
                    (golden.tenant_id, golden.kb_id, encode(golden).decode()),
                )

        await self._run(work)

    async def get_golden_set(self, tenant_id: str, kb_id: str) -> GoldenSet | None:
        def work(conn: sqlite3.Connection) -> GoldenSet | None:
            row = conn.execute(
                "SELECT record FROM golden_sets WHERE tenant_id = ? AND kb_id = ?",
                (tenant_id, kb_id),
            ).fetchone()
            return None if row is None else self._decode.one(GoldenSet, row[0])

        return await self._run(work)

    async def start_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> str | None:
        """Store a running evaluation under the workspace's lease, or name the one holding it."""
        tenant_id = evaluation.tenant_id

        def work(conn: sqlite3.Connection) -> str | None:
            now = time.time()
            with transaction(conn):
                if not _workspace_exists(conn, tenant_id):
                    raise no_workspace(tenant_id)
                holder = conn.execute(
                    "SELECT evaluation_id FROM evaluation_leases "
                    "WHERE tenant_id = ? AND expires_at > ?",
                    (tenant_id, now),
                ).fetchone()
                if holder is not None:
                    return str(holder[0])
                conn.execute(
                    "INSERT OR REPLACE INTO evaluation_leases (tenant_id, evaluation_id, "
                    "expires_at) VALUES (?, ?, ?)",
                    (tenant_id, evaluation.evaluation_id, now + lease_s),
                )
                conn.execute(
                    "INSERT INTO evaluations (tenant_id, kb_id, evaluation_id, record) "
                    "VALUES (?, ?, ?, ?)",
                    (tenant_id, evaluation.kb_id, evaluation.evaluation_id, _text(evaluation)),
                )
                conn.execute(
                    "DELETE FROM evaluations WHERE tenant_id = ? AND kb_id = ? AND seq NOT IN "
                    "(SELECT seq FROM evaluations WHERE tenant_id = ? AND kb_id = ? "
                    "ORDER BY seq DESC LIMIT ?)",
                    (tenant_id, evaluation.kb_id, tenant_id, evaluation.kb_id, EVALUATIONS_KEPT),
                )
            return None

        return await self._run(work)

    async def update_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> bool:
        """Replace it; renew (running) or give back (finished) its lease. False: it is gone."""
        tenant_id, evaluation_id = evaluation.tenant_id, evaluation.evaluation_id
        running = evaluation.status is EvaluationStatus.RUNNING

        def work(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                updated = conn.execute(
                    "UPDATE evaluations SET record = ? WHERE tenant_id = ? AND evaluation_id = ?",
                    (_text(evaluation), tenant_id, evaluation_id),
                )
                if updated.rowcount == 0:
                    return False
                if running:
                    conn.execute(
                        "UPDATE evaluation_leases SET expires_at = ? "
                        "WHERE tenant_id = ? AND evaluation_id = ?",
                        (time.time() + lease_s, tenant_id, evaluation_id),
                    )
                else:
                    _release(conn, tenant_id, evaluation_id)
            return True

        return await self._run(work)

    async def get_evaluation(self, tenant_id: str, evaluation_id: str) -> Evaluation | None:
        def work(conn: sqlite3.Connection) -> Evaluation | None:
            row = conn.execute(
                "SELECT record FROM evaluations WHERE tenant_id = ? AND evaluation_id = ?",
                (tenant_id, evaluation_id),
            ).fetchone()
            return None if row is None else self._decode.one(Evaluation, row[0])

        return await self._run(work)

    async def list_evaluations(self, tenant_id: str, kb_id: str) -> list[Evaluation]:
        """The KB's evaluations, newest first."""

        def work(conn: sqlite3.Connection) -> list[Evaluation]:
            rows = conn.execute(
                "SELECT record FROM evaluations WHERE tenant_id = ? AND kb_id = ? "
                "ORDER BY seq DESC",
                (tenant_id, kb_id),
            ).fetchall()
            return self._decode.each(Evaluation, (row[0] for row in rows))

        return await self._run(work)

    async def delete_calibration(self, tenant_id: str, kb_id: str | None = None) -> int:
        """Remove golden sets and evaluations (one KB's, or all the tenant's) and their lease."""
        where = "tenant_id = ?" if kb_id is None else "tenant_id = ? AND kb_id = ?"
        params: tuple[str, ...] = (tenant_id,) if kb_id is None else (tenant_id, kb_id)

        def work(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                ids = f"SELECT evaluation_id FROM evaluations WHERE {where}"  # noqa: S608 — fixed clauses
                leases = f"DELETE FROM evaluation_leases WHERE evaluation_id IN ({ids})"  # noqa: S608 — fixed clauses
                conn.execute(leases + " AND tenant_id = ?", (*params, tenant_id))
                removed = conn.execute(f"DELETE FROM golden_sets WHERE {where}", params).rowcount  # noqa: S608 — fixed clauses
                removed += conn.execute(f"DELETE FROM evaluations WHERE {where}", params).rowcount  # noqa: S608 — fixed clauses
                conn.execute(f"DELETE FROM measured_lines WHERE {where}", params)  # noqa: S608 — fixed clauses
                conn.execute(f"DELETE FROM model_migrations WHERE {where}", params)  # noqa: S608 — fixed clauses
            return int(removed)

        return await self._run(work)

    async def put_measured_lines(self, lines: MeasuredLines) -> None:
        """Keep the KB's lines for their Scope; nothing when the workspace is unknown."""

        def work(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                if _workspace_exists(conn, lines.tenant_id):
                    conn.execute(
                        "INSERT OR REPLACE INTO measured_lines (tenant_id, kb_id, scope, record) "
                        "VALUES (?, ?, ?, ?)",
                        (lines.tenant_id, lines.kb_id, lines.scope, encode(lines).decode()),
                    )

        await self._run(work)

    async def get_measured_lines(
        self, tenant_id: str, kb_id: str, scope: str
    ) -> MeasuredLines | None:
        def work(conn: sqlite3.Connection) -> MeasuredLines | None:
            row = conn.execute(
                "SELECT record FROM measured_lines WHERE tenant_id = ? AND kb_id = ? AND scope = ?",
                (tenant_id, kb_id, scope),
            ).fetchone()
            return None if row is None else self._decode.one(MeasuredLines, row[0])

        return await self._run(work)

    async def put_migration(self, migration: ModelMigration) -> bool:
        """Create or replace the KB's migration; False when the workspace is unknown."""

        def work(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                if not _workspace_exists(conn, migration.tenant_id):
                    return False
                conn.execute(
                    "INSERT OR REPLACE INTO model_migrations (tenant_id, kb_id, status, record) "
                    "VALUES (?, ?, ?, ?)",
                    (
                        migration.tenant_id,
                        migration.kb_id,
                        migration.status.value,
                        encode(migration).decode(),
                    ),
                )
                return True

        return await self._run(work)

    async def get_migration(self, tenant_id: str, kb_id: str) -> ModelMigration | None:
        def work(conn: sqlite3.Connection) -> ModelMigration | None:
            row = conn.execute(
                "SELECT record FROM model_migrations WHERE tenant_id = ? AND kb_id = ?",
                (tenant_id, kb_id),
            ).fetchone()
            return None if row is None else self._decode.one(ModelMigration, row[0])

        return await self._run(work)

    async def building_migrations(self) -> list[ModelMigration]:
        def work(conn: sqlite3.Connection) -> list[ModelMigration]:
            rows = conn.execute(
                "SELECT record FROM model_migrations WHERE status = ? ORDER BY tenant_id, kb_id",
                (MigrationStatus.BUILDING.value,),
            ).fetchall()
            return self._decode.each(ModelMigration, (row[0] for row in rows))

        return await self._run(work)

    async def append_settings_history(
        self, tenant_id: str, changes: Sequence[SettingChange]
    ) -> None:
        """Append changes stored elsewhere to the workspace's settings history."""

        def work(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.executemany(
                    "INSERT INTO settings_history (tenant_id, record) VALUES (?, ?)",
                    [(tenant_id, encode(change).decode()) for change in changes],
                )

        await self._run(work)


def _text(record: Evaluation) -> str:
    return encode(record).decode()


def _workspace_exists(conn: sqlite3.Connection, tenant_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM workspaces WHERE tenant_id = ?", (tenant_id,))
    return found.fetchone() is not None


def _release(conn: sqlite3.Connection, tenant_id: str, evaluation_id: str) -> None:
    conn.execute(
        "DELETE FROM evaluation_leases WHERE tenant_id = ? AND evaluation_id = ?",
        (tenant_id, evaluation_id),
    )
