"""The SQLite store's tables: `SCHEMA`, created on open when missing, at `SCHEMA_VERSION`.

Records are kept as msgspec JSON in a `record` column beside the key columns used for
lookups and uniqueness. A workspace's pseudonym key is a column of its row, outside the
record. `migrate` brings a file of an earlier version to this one.
"""

from __future__ import annotations

import sqlite3

from settings.stores.sqlite.calibration import CALIBRATION_SCHEMA

#: 2: `workspaces.pseudonym_key`
SCHEMA_VERSION = 2

_CORE = """
CREATE TABLE IF NOT EXISTS orgs (
    org_id TEXT PRIMARY KEY,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workspaces (
    tenant_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs (org_id),
    record TEXT NOT NULL,
    pseudonym_key BLOB
);
CREATE TABLE IF NOT EXISTS settings_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL REFERENCES workspaces (tenant_id),
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS settings_history_by_tenant ON settings_history (tenant_id, seq);
CREATE TABLE IF NOT EXISTS admin_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS admin_history_by_tenant ON admin_history (tenant_id, seq);
CREATE TABLE IF NOT EXISTS knowledge_bases (
    tenant_id TEXT NOT NULL REFERENCES workspaces (tenant_id),
    kb_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kb_id)
);
CREATE TABLE IF NOT EXISTS agents (
    tenant_id TEXT NOT NULL REFERENCES workspaces (tenant_id),
    agent_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant_id, agent_id)
);
CREATE TABLE IF NOT EXISTS held_back (
    tenant_id TEXT NOT NULL,
    kb_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, kb_id)
);
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_key_use (
    key_id TEXT PRIMARY KEY,
    last_used_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS key_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deletions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    expires_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_expiry ON turns (expires_at);
"""

SCHEMA = _CORE + CALIBRATION_SCHEMA


def migrate(conn: sqlite3.Connection) -> None:
    """Add what `SCHEMA` has and an earlier version's tables lack (its CREATE TABLE IF NOT
    EXISTS leaves an existing table as it was): version 1's workspaces get an empty
    `pseudonym_key`, filled on first need (`SqliteStore.pseudonym_key`)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(workspaces)")}
    if "pseudonym_key" not in columns:
        conn.execute("ALTER TABLE workspaces ADD COLUMN pseudonym_key BLOB")
