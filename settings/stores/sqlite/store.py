"""The embedded SettingsStore: one SQLite file in the data dir.

Open it with `await SqliteStore.open(path)`. One connection (WAL, foreign keys on,
every commit fully synchronous) is shared by every call; its statements run one at a
time in its own thread, never on the event loop (`settings.stores.sqlite.connection`). Turn
records have a connection of their own (`settings.stores.sqlite.turns`). Records are kept as
msgspec JSON in a `record` column beside the key columns used for lookups and uniqueness.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from settings.records import (
    AdminChange,
    Agent,
    ApiKey,
    KeyEvent,
    KnowledgeBase,
    Org,
    SettingChange,
    TurnRecord,
    Workspace,
)
from settings.store import StoreUnavailableError
from settings.store_rules import (
    RecordDecoder,
    changed_workspace,
    encode,
    key_taken,
    marked_deleting,
    new_pseudonym_key,
    no_org,
    no_workspace,
    org_not_empty,
    org_taken,
    with_last_use,
    workspace_taken,
)
from settings.stores.sqlite.calibration import SqliteCalibration
from settings.stores.sqlite.connection import SerialConnection, connect, transaction
from settings.stores.sqlite.schema import SCHEMA, SCHEMA_VERSION, migrate
from settings.stores.sqlite.turns import SqliteTurns
from settings.stores.sqlite.upkeep import SqliteUpkeep

T = TypeVar("T")


def _encode(record: msgspec.Struct) -> str:
    return encode(record).decode()


class SqliteStore(SqliteUpkeep, SqliteCalibration):
    """SettingsStore on one SQLite file; see the module docstring (its upkeep:
    `settings.stores.sqlite.upkeep`)."""

    def __init__(self, connection: sqlite3.Connection, turns: sqlite3.Connection) -> None:
        """Wrap connections prepared by `open` (use `await SqliteStore.open(path)`)."""
        self._conn = SerialConnection(connection, "sqlite")
        self._decode = RecordDecoder()
        self._turns = SqliteTurns(SerialConnection(turns, "sqlite-turns"), self._decode)

    @classmethod
    async def open(cls, path: Path) -> SqliteStore:
        """Open (creating if needed) the database file and its schema."""
        return cls(*await asyncio.to_thread(cls._connect, path))

    @staticmethod
    def _connect(path: Path) -> tuple[sqlite3.Connection, sqlite3.Connection]:
        conn = connect(path)
        try:
            _prepare(conn, path)
            return conn, SqliteTurns.connect(path)
        except BaseException:
            conn.close()
            raise

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._conn.run(work)

    # organizations and workspaces

    async def create_org(self, org: Org) -> None:
        """Raises AlreadyExistsError if the org id is taken."""

        def work(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO orgs (org_id, record) VALUES (?, ?)", (org.org_id, _encode(org))
                )
            except sqlite3.IntegrityError:
                raise org_taken(org.org_id) from None

        await self._run(work)

    async def get_org(self, org_id: str) -> Org | None:
        def work(conn: sqlite3.Connection) -> Org | None:
            row = conn.execute("SELECT record FROM orgs WHERE org_id = ?", (org_id,)).fetchone()
            return self._decode.one_or_none(Org, _record(row))

        return await self._run(work)

    async def create_workspace(self, workspace: Workspace) -> None:
        """AlreadyExistsError if the tenant id is taken in any org, ignoring case;
        NotFoundError if no org."""

        def work(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                if not _exists(conn, "SELECT 1 FROM orgs WHERE org_id = ?", workspace.org_id):
                    raise no_org(workspace.org_id)
                # ids are ASCII (ingest.payload.is_valid_id): lower() folds all their letters
                if _exists(
                    conn,
                    "SELECT 1 FROM workspaces WHERE lower(tenant_id) = lower(?)",
                    workspace.tenant_id,
                ):
                    raise workspace_taken(workspace.tenant_id)
                try:
                    conn.execute(
                        "INSERT INTO workspaces (tenant_id, org_id, record, pseudonym_key) "
                        "VALUES (?, ?, ?, ?)",
                        (
                            workspace.tenant_id,
                            workspace.org_id,
                            _encode(workspace),
                            new_pseudonym_key(),
                        ),
                    )
                except sqlite3.IntegrityError:
                    raise workspace_taken(workspace.tenant_id) from None

        await self._run(work)

    async def get_workspace(self, tenant_id: str) -> Workspace | None:
        def work(conn: sqlite3.Connection) -> Workspace | None:
            return self._read_workspace(conn, tenant_id)

        return await self._run(work)

    async def pseudonym_key(self, tenant_id: str) -> bytes | None:
        """The workspace's key; one stored without (made by version 1) gets one, written
        only where the column is still empty."""

        def read(conn: sqlite3.Connection) -> tuple[bytes | None] | None:
            row = conn.execute(
                "SELECT pseudonym_key FROM workspaces WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()
            return None if row is None else (None if row[0] is None else bytes(row[0]),)

        def work(conn: sqlite3.Connection) -> bytes | None:
            found = read(conn)
            if found is None or found[0] is not None:
                return None if found is None else found[0]
            with transaction(conn):
                conn.execute(
                    "UPDATE workspaces SET pseudonym_key = ? "
                    "WHERE tenant_id = ? AND pseudonym_key IS NULL",
                    (new_pseudonym_key(), tenant_id),
                )
                found = read(conn)
            return None if found is None else found[0]

        return await self._run(work)

    def _read_workspace(self, conn: sqlite3.Connection, tenant_id: str) -> Workspace | None:
        row = conn.execute(
            "SELECT record FROM workspaces WHERE tenant_id = ?", (tenant_id,)
        ).fetchone()
        return self._decode.one_or_none(Workspace, _record(row))

    async def list_workspaces(self, org_id: str) -> list[Workspace]:
        """The org's workspaces, ordered by tenant id."""

        def work(conn: sqlite3.Connection) -> list[Workspace]:
            rows = conn.execute(
                "SELECT record FROM workspaces WHERE org_id = ? ORDER BY tenant_id", (org_id,)
            ).fetchall()
            return self._decode.each(Workspace, map(_record, rows))

        return await self._run(work)

    # deletion

    async def mark_org_deleting(self, org_id: str) -> Org | None:
        """Set the org's state to `deleting` (None: no such org)."""

        def work(conn: sqlite3.Connection) -> Org | None:
            with transaction(conn):
                row = conn.execute("SELECT record FROM orgs WHERE org_id = ?", (org_id,)).fetchone()
                found = self._decode.one_or_none(Org, _record(row))
                if found is None:
                    return None
                marked = marked_deleting(found)
                conn.execute(
                    "UPDATE orgs SET record = ? WHERE org_id = ?", (_encode(marked), org_id)
                )
                return marked

        return await self._run(work)

    async def mark_workspace_deleting(self, tenant_id: str) -> Workspace | None:
        """Set the workspace's state to `deleting` (None: no such workspace)."""

        def work(conn: sqlite3.Connection) -> Workspace | None:
            with transaction(conn):
                found = self._read_workspace(conn, tenant_id)
                if found is None:
                    return None
                marked = marked_deleting(found)
                conn.execute(
                    "UPDATE workspaces SET record = ? WHERE tenant_id = ?",
                    (_encode(marked), tenant_id),
                )
                return marked

        return await self._run(work)

    async def delete_workspace(self, tenant_id: str) -> bool:
        """Remove the workspace (its pseudonym key with its row), its settings, admin and
        key histories, KBs, agents and held-back counters at once."""

        def work(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                conn.execute(
                    "DELETE FROM key_history WHERE json_extract(record, '$.tenant_id') = ?",
                    (tenant_id,),
                )
                for table in (
                    "settings_history",
                    "admin_history",
                    "knowledge_bases",
                    "agents",
                    "held_back",
                ):
                    conn.execute(f"DELETE FROM {table} WHERE tenant_id = ?", (tenant_id,))  # noqa: S608 — fixed names
                deleted = conn.execute("DELETE FROM workspaces WHERE tenant_id = ?", (tenant_id,))
                return deleted.rowcount > 0

        return await self._run(work)

    async def delete_org(self, org_id: str) -> bool:
        """Remove the org record; NotEmptyError while it has a workspace."""

        def work(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                if _exists(conn, "SELECT 1 FROM workspaces WHERE org_id = ?", org_id):
                    raise org_not_empty(org_id)
                return conn.execute("DELETE FROM orgs WHERE org_id = ?", (org_id,)).rowcount > 0

        return await self._run(work)

    async def update_workspace_settings(
        self, tenant_id: str, changes: Mapping[str, Any], *, key_id: str, at: str
    ) -> Workspace:
        """Apply changes and record one SettingChange per changed key, in one transaction."""

        def work(conn: sqlite3.Connection) -> Workspace:
            with transaction(conn):
                updated, history = changed_workspace(
                    self._read_workspace(conn, tenant_id), tenant_id, changes, key_id=key_id, at=at
                )
                if not history:
                    return updated
                conn.execute(
                    "UPDATE workspaces SET record = ? WHERE tenant_id = ?",
                    (_encode(updated), tenant_id),
                )
                conn.executemany(
                    "INSERT INTO settings_history (tenant_id, record) VALUES (?, ?)",
                    [(tenant_id, _encode(change)) for change in history],
                )
                return updated

        return await self._run(work)

    async def settings_history(self, tenant_id: str) -> list[SettingChange]:
        """Changes of one workspace, oldest first."""

        def work(conn: sqlite3.Connection) -> list[SettingChange]:
            rows = conn.execute(
                "SELECT record FROM settings_history WHERE tenant_id = ? ORDER BY seq",
                (tenant_id,),
            ).fetchall()
            return self._decode.each(SettingChange, map(_record, rows))

        return await self._run(work)

    async def record_admin_change(self, change: AdminChange) -> None:
        """Append one change of a KB or agent to its workspace's history."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO admin_history (tenant_id, record) VALUES (?, ?)",
                (change.tenant_id, _encode(change)),
            )

        await self._run(work)

    async def admin_history(self, tenant_id: str) -> list[AdminChange]:
        """KB and agent changes of one workspace, oldest first."""

        def work(conn: sqlite3.Connection) -> list[AdminChange]:
            rows = conn.execute(
                "SELECT record FROM admin_history WHERE tenant_id = ? ORDER BY seq",
                (tenant_id,),
            ).fetchall()
            return self._decode.each(AdminChange, map(_record, rows))

        return await self._run(work)

    # knowledge bases and agents

    async def put_knowledge_base(self, kb: KnowledgeBase) -> bool:
        """Create or replace; True when created. NotFoundError if the workspace is unknown."""
        return await self._run(
            lambda conn: _put_scoped(
                conn,
                "knowledge_bases",
                "kb_id",
                tenant_id=kb.tenant_id,
                record_id=kb.kb_id,
                record=kb,
            )
        )

    async def get_knowledge_base(self, tenant_id: str, kb_id: str) -> KnowledgeBase | None:
        raw = await self._run(
            lambda conn: _get_scoped(conn, "knowledge_bases", "kb_id", tenant_id, kb_id)
        )
        return self._decode.one_or_none(KnowledgeBase, raw)

    async def list_knowledge_bases(self, tenant_id: str) -> list[KnowledgeBase]:
        """The tenant's KBs, ordered by id."""
        rows = await self._run(
            lambda conn: _list_scoped(conn, "knowledge_bases", "kb_id", tenant_id)
        )
        return self._decode.each(KnowledgeBase, rows)

    async def put_agent(self, agent: Agent) -> bool:
        """Create or replace; True when created. NotFoundError if the workspace is unknown."""
        return await self._run(
            lambda conn: _put_scoped(
                conn,
                "agents",
                "agent_id",
                tenant_id=agent.tenant_id,
                record_id=agent.agent_id,
                record=agent,
            )
        )

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent | None:
        raw = await self._run(
            lambda conn: _get_scoped(conn, "agents", "agent_id", tenant_id, agent_id)
        )
        return self._decode.one_or_none(Agent, raw)

    async def list_agents(self, tenant_id: str) -> list[Agent]:
        """The tenant's agents, ordered by id."""
        rows = await self._run(lambda conn: _list_scoped(conn, "agents", "agent_id", tenant_id))
        return self._decode.each(Agent, rows)

    async def delete_knowledge_base(self, tenant_id: str, kb_id: str) -> bool:
        """Remove the KB record and its held-back counter; False when there was none."""

        def work(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                conn.execute(
                    "DELETE FROM held_back WHERE tenant_id = ? AND kb_id = ?", (tenant_id, kb_id)
                )
                return _delete_scoped(conn, "knowledge_bases", "kb_id", tenant_id, kb_id)

        return await self._run(work)

    async def delete_agent(self, tenant_id: str, agent_id: str) -> bool:
        """Remove the agent record; False when there was none."""
        return await self._run(
            lambda conn: _delete_scoped(conn, "agents", "agent_id", tenant_id, agent_id)
        )

    # held-back counters

    async def add_held_back(self, tenant_id: str, kb_id: str, count: int = 1) -> int:
        """Increment and return the KB's held-back count."""

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "INSERT INTO held_back (tenant_id, kb_id, count) VALUES (?, ?, ?) "
                "ON CONFLICT (tenant_id, kb_id) DO UPDATE SET count = count + excluded.count "
                "RETURNING count",
                (tenant_id, kb_id, count),
            ).fetchone()
            return int(row[0])

        return await self._run(work)

    async def held_back(self, tenant_id: str, kb_id: str) -> int:
        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT count FROM held_back WHERE tenant_id = ? AND kb_id = ?",
                (tenant_id, kb_id),
            ).fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(work)

    # credentials

    async def create_api_key(self, key: ApiKey, event: KeyEvent | None = None) -> None:
        """Raises AlreadyExistsError on a duplicate key id or hash; `event` in the same
        transaction."""

        def work(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                try:
                    conn.execute(
                        "INSERT INTO api_keys (key_id, key_hash, record) VALUES (?, ?, ?)",
                        (key.key_id, key.key_hash, _encode(key)),
                    )
                except sqlite3.IntegrityError:
                    raise key_taken(key.key_id) from None
                if event is not None:
                    _append_key_event(conn, event)

        await self._run(work)

    async def get_api_key(self, key_id: str) -> ApiKey | None:
        def work(conn: sqlite3.Connection) -> ApiKey | None:
            row = conn.execute("SELECT record FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
            return self._decode.one_or_none(ApiKey, _record(row))

        return await self._run(work)

    async def list_api_keys(self) -> list[ApiKey]:
        """Every stored key, ordered by id, with `last_used_at` filled in."""

        def work(conn: sqlite3.Connection) -> list[ApiKey]:
            rows = conn.execute(
                "SELECT k.record, u.last_used_at FROM api_keys AS k "
                "LEFT JOIN api_key_use AS u ON u.key_id = k.key_id ORDER BY k.key_id"
            ).fetchall()
            return [with_last_use(self._decode.one(ApiKey, record), used) for record, used in rows]

        return await self._run(work)

    async def revoke_api_key(self, key_id: str, event: KeyEvent | None = None) -> ApiKey | None:
        """Delete the key and its use record and append `event`, in one transaction."""

        def work(conn: sqlite3.Connection) -> ApiKey | None:
            with transaction(conn):
                row = conn.execute(
                    "DELETE FROM api_keys WHERE key_id = ? RETURNING record", (key_id,)
                ).fetchone()
                if row is None:
                    return None
                conn.execute("DELETE FROM api_key_use WHERE key_id = ?", (key_id,))
                if event is not None:
                    _append_key_event(conn, event)
                return self._decode.one(ApiKey, row[0])

        return await self._run(work)

    async def record_key_use(self, key_id: str, at: str) -> None:
        """Remember when a key was last used (a revoked key's use is ignored)."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO api_key_use (key_id, last_used_at) "
                "SELECT key_id, ? FROM api_keys WHERE key_id = ?",
                (at, key_id),
            )

        await self._run(work)

    async def key_history(self) -> list[KeyEvent]:
        """Every key creation and revocation, oldest first."""

        def work(conn: sqlite3.Connection) -> list[KeyEvent]:
            rows = conn.execute("SELECT record FROM key_history ORDER BY seq").fetchall()
            return self._decode.each(KeyEvent, map(_record, rows))

        return await self._run(work)

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        def work(conn: sqlite3.Connection) -> ApiKey | None:
            row = conn.execute(
                "SELECT record FROM api_keys WHERE key_hash = ?", (key_hash,)
            ).fetchone()
            return self._decode.one_or_none(ApiKey, _record(row))

        return await self._run(work)

    # turn records

    async def put_turn(self, turn: TurnRecord, ttl_s: int) -> None:
        """Keep the turn for ttl_s seconds."""
        if ttl_s < 1:
            raise ValueError("ttl_s must be at least 1")
        await self._turns.put(turn, ttl_s)

    async def get_turn(self, tenant_id: str, turn_id: str) -> TurnRecord | None:
        """The tenant's turn if it exists and has not expired."""
        return await self._turns.get(tenant_id, turn_id)

    async def delete_turns(self, tenant_id: str) -> int:
        """Remove every turn record of the tenant."""
        return await self._turns.delete_tenant(tenant_id)

    async def purge_expired_turns(self) -> int:
        """Delete expired turn records now; returns how many went."""
        return await self._turns.purge()

    # operations

    async def ping(self) -> None:
        """Raise StoreUnavailableError when the file cannot be read."""
        await self._run(lambda conn: conn.execute("SELECT 1 FROM orgs LIMIT 1").fetchall())

    async def close(self) -> None:
        """Close both connections; later calls raise StoreUnavailableError."""
        await self._turns.close()
        await self._conn.close()


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    """WAL, foreign keys, schema; refuses a file written by a newer schema."""
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        conn.execute("PRAGMA synchronous=FULL")  # every commit durable
        conn.execute("PRAGMA foreign_keys=ON")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version <= SCHEMA_VERSION:
            conn.executescript(SCHEMA)
            migrate(conn)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except sqlite3.Error as error:
        raise StoreUnavailableError(f"cannot prepare {path}: {error}") from error
    if str(mode).lower() != "wal":
        raise StoreUnavailableError(f"{path}: WAL journal mode refused ({mode})")
    if version > SCHEMA_VERSION:
        raise StoreUnavailableError(
            f"{path}: schema version {version} is newer than this release's ({SCHEMA_VERSION})"
        )


def _append_key_event(conn: sqlite3.Connection, event: KeyEvent) -> None:
    conn.execute("INSERT INTO key_history (record) VALUES (?)", (_encode(event),))


def _record(row: tuple[Any, ...] | None) -> str | None:
    """The `record` column of a row that selects it first (None: no row)."""
    return None if row is None else str(row[0])


def _exists(conn: sqlite3.Connection, query: str, *params: str) -> bool:
    return conn.execute(query, params).fetchone() is not None


# Table and column names below come from this module only, never from callers.


def _put_scoped(
    conn: sqlite3.Connection,
    table: str,
    id_column: str,
    *,
    tenant_id: str,
    record_id: str,
    record: msgspec.Struct,
) -> bool:
    with transaction(conn):
        if not _exists(conn, "SELECT 1 FROM workspaces WHERE tenant_id = ?", tenant_id):
            raise no_workspace(tenant_id)
        created = not _exists(
            conn,
            f"SELECT 1 FROM {table} WHERE tenant_id = ? AND {id_column} = ?",  # noqa: S608 — fixed names
            tenant_id,
            record_id,
        )
        conn.execute(
            f"INSERT INTO {table} (tenant_id, {id_column}, record) VALUES (?, ?, ?) "  # noqa: S608 — fixed names
            f"ON CONFLICT (tenant_id, {id_column}) DO UPDATE SET record = excluded.record",
            (tenant_id, record_id, _encode(record)),
        )
    return created


def _get_scoped(
    conn: sqlite3.Connection, table: str, id_column: str, tenant_id: str, record_id: str
) -> str | None:
    row = conn.execute(
        f"SELECT record FROM {table} WHERE tenant_id = ? AND {id_column} = ?",  # noqa: S608 — fixed names
        (tenant_id, record_id),
    ).fetchone()
    return _record(row)


def _list_scoped(conn: sqlite3.Connection, table: str, id_column: str, tenant_id: str) -> list[str]:
    rows = conn.execute(
        f"SELECT record FROM {table} WHERE tenant_id = ? ORDER BY {id_column}",  # noqa: S608 — fixed names
        (tenant_id,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def _delete_scoped(
    conn: sqlite3.Connection, table: str, id_column: str, tenant_id: str, record_id: str
) -> bool:
    deleted = conn.execute(
        f"DELETE FROM {table} WHERE tenant_id = ? AND {id_column} = ?",  # noqa: S608 — fixed names
        (tenant_id, record_id),
    )
    return deleted.rowcount > 0
