"""Request and answer bodies of API keys: created, listed, revoked, and their history."""

from __future__ import annotations

import msgspec

from gateway.http.schemas import Strict


class CreateKey(Strict):
    """`clearance` defaults to `restricted` for admin and ingest keys (the only one they
    may have), `internal` otherwise. At most one of `expires_at` (ISO 8601) or `ttl_s`."""

    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str | None = None
    expires_at: str | None = None
    ttl_s: int | None = None


class KeyOut(msgspec.Struct, kw_only=True):
    """The only response that ever carries a secret: shown once, stored hashed."""

    key: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str = ""
    expires_at: str | None = None


class KeyInfo(msgspec.Struct, kw_only=True):
    """A key's metadata: never its secret nor its hash."""

    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str
    expires_at: str | None
    last_used_at: str | None


class KeyList(msgspec.Struct, kw_only=True):
    keys: list[KeyInfo]


class RevokedOut(msgspec.Struct, kw_only=True):
    key_id: str
    revoked: bool


class KeyEventOut(msgspec.Struct, kw_only=True):
    """One key created or revoked: when, by which key (its id), and the key's metadata."""

    at: str
    action: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    actor_key_id: str
    expires_at: str | None


class KeyHistoryOut(msgspec.Struct, kw_only=True):
    events: list[KeyEventOut]
