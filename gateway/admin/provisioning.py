"""Platform provisioning: organizations, workspaces and workspace keys."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from gateway.access.auth import PLATFORM_KEY_ID, Principal, issue_key
from gateway.admin.keys import expiry, key_event
from gateway.errors import ConflictError, InvalidInputError, NotFoundError
from ingest.index import Index, org_collection
from ingest.payload import is_valid_org_id, is_valid_tenant_id
from settings.records import ApiKey, Lifecycle, Org, Role, Workspace
from settings.store import (
    AlreadyExistsError,
    NotEmptyError,
    SettingsStore,
    StoreUnavailableError,
)

#: the actor recorded for keys issued without a caller (the platform's own tools)
PLATFORM = Principal(key_id=PLATFORM_KEY_ID, roles=frozenset({Role.PLATFORM}))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _timestamp(raw: str | None) -> str:
    """An ISO 8601 instant, normalised to UTC; now when absent."""
    if raw is None:
        return _now()
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInputError("must be an ISO 8601 date-time", field="created_at") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat()


async def create_org(store: SettingsStore, index: Index, org_id: str) -> Org:
    if not is_valid_org_id(org_id):
        raise InvalidInputError("must match [a-z0-9][a-z0-9_-]{0,62}", field="org_id")
    org = Org(org_id=org_id, created_at=_now())
    try:
        await store.create_org(org)
    except AlreadyExistsError:
        raise ConflictError("an organization with this id exists", field="org_id") from None
    try:
        await index.ensure_collection(org_collection(org_id))
    except BaseException:
        await _forget_org(store, org_id)
        raise
    return org


async def _forget_org(store: SettingsStore, org_id: str) -> None:
    """Remove the record of an org whose collection could not be made, so that the failed
    call changed nothing. Kept if a workspace joined it meanwhile, or the store is down:
    its collection is then made at its first write, as both engines do."""
    with contextlib.suppress(NotEmptyError, StoreUnavailableError):
        await store.delete_org(org_id)


async def create_workspace(
    store: SettingsStore, org_id: str, tenant_id: str, created_at: str | None
) -> Workspace:
    org = await store.get_org(org_id)
    if org is None:
        raise NotFoundError("no such organization")
    if org.state is Lifecycle.DELETING:
        raise ConflictError("this organization is being deleted", field="org_id")
    if not is_valid_tenant_id(tenant_id):
        raise InvalidInputError(
            "must be 1-256 characters of lower-case letters, digits and ._:@/-, starting "
            "with a letter or digit",
            field="tenant_id",
        )
    workspace = Workspace(tenant_id=tenant_id, org_id=org_id, created_at=_timestamp(created_at))
    try:
        await store.create_workspace(workspace)
    except AlreadyExistsError:
        raise ConflictError(
            "a workspace with this id exists (ids are compared ignoring case)", field="tenant_id"
        ) from None
    return workspace


async def create_key(
    store: SettingsStore,
    *,
    org_id: str,
    tenant_id: str,
    roles: list[str],
    clearance: str | None,
    expires_at: str | None = None,
    ttl_s: int | None = None,
    actor: Principal = PLATFORM,
) -> tuple[str, ApiKey]:
    """Issue a workspace key and record its creation in the key history."""
    workspace = await store.get_workspace(tenant_id)
    if workspace is None or workspace.org_id != org_id or workspace.state is Lifecycle.DELETING:
        raise NotFoundError("no such workspace in this organization")
    secret, record = issue_key(
        org_id=org_id,
        tenant_id=tenant_id,
        roles=roles,
        clearance=clearance,
        expires_at=expiry(expires_at, ttl_s, datetime.now(UTC)),
    )
    await store.create_api_key(record, key_event("created", record, actor))
    return secret, record


async def retire_generated_platform_key(store: SettingsStore) -> bool:
    """Delete the platform key generated on a first start, if one is stored: once
    KBGATE_PLATFORM_KEY is configured, that key is the platform key. True if one went."""
    stored = await store.get_api_key(PLATFORM_KEY_ID)
    if stored is None:
        return False
    return (
        await store.revoke_api_key(PLATFORM_KEY_ID, key_event("revoked", stored, PLATFORM))
        is not None
    )
