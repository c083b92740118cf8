"""Key lifecycle: list, revoke and audit workspace keys.

The platform sees every key (and may filter by org or workspace); a workspace admin
sees only its own workspace's. Another workspace's key reads as unknown (404 alike).
A revocation deletes the key: this process re-checks its cached credentials at once,
other replicas on the announcement of a shared store or within the settings
staleness bound, and console sessions of the key end at their next request.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.access.auth import Principal
from gateway.errors import ConflictError, InvalidInputError, NotFoundError
from gateway.telemetry import Telemetry
from settings.cache import CachedSettings
from settings.records import ApiKey, KeyEvent, Role
from settings.store import SettingsStore

#: the longest lifetime a key may be given through `ttl_s` (ten years)
MAX_TTL_S = 10 * 365 * 24 * 3600


def expiry(expires_at: str | None, ttl_s: int | None, now: datetime) -> str | None:
    """The ISO 8601 instant a new key expires at (UTC), or None for no expiry."""
    if expires_at is not None and ttl_s is not None:
        raise InvalidInputError("give expires_at or ttl_s, not both", field="ttl_s")
    if ttl_s is not None:
        if not 1 <= ttl_s <= MAX_TTL_S:
            raise InvalidInputError(f"must be 1..{MAX_TTL_S} seconds", field="ttl_s")
        return (now + timedelta(seconds=ttl_s)).isoformat()
    if expires_at is None:
        return None
    try:
        parsed = datetime.fromisoformat(expires_at)
    except ValueError:
        raise InvalidInputError("must be an ISO 8601 date-time", field="expires_at") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if parsed <= now:
        raise InvalidInputError("must be in the future", field="expires_at")
    return parsed.astimezone(UTC).isoformat()


def key_event(action: str, key: ApiKey, actor: Principal) -> KeyEvent:
    return KeyEvent(
        at=datetime.now(UTC).isoformat(),
        action=action,
        key_id=key.key_id,
        org_id=key.org_id,
        tenant_id=key.tenant_id,
        roles=list(key.roles),
        clearance=key.clearance,
        actor_key_id=actor.key_id,
        expires_at=key.expires_at,
    )


def _sees(principal: Principal, org_id: str, tenant_id: str) -> bool:
    """Whether the caller may see a key (or event) of this workspace."""
    if principal.is_platform:
        return True
    return bool(principal.tenant_id) and (org_id, tenant_id) == (
        principal.org_id,
        principal.tenant_id,
    )


def _matches(org_id: str, tenant_id: str, org: str | None, tenant: str | None) -> bool:
    return (org is None or org == org_id) and (tenant is None or tenant == tenant_id)


async def list_keys(
    store: SettingsStore, principal: Principal, org_id: str | None, tenant_id: str | None
) -> list[ApiKey]:
    """The keys the caller may see, filtered by org and workspace, ordered by id."""
    keys = await store.list_api_keys()
    return [
        key
        for key in keys
        if _sees(principal, key.org_id, key.tenant_id)
        and _matches(key.org_id, key.tenant_id, org_id, tenant_id)
    ]


async def revoke_key(
    store: SettingsStore,
    settings: CachedSettings,
    telemetry: Telemetry,
    principal: Principal,
    key_id: str,
) -> ApiKey:
    """Delete a key the caller may see; NotFoundError for unknown and foreign ids alike."""
    found = await store.get_api_key(key_id)
    if found is None or not _sees(principal, found.org_id, found.tenant_id):
        raise NotFoundError("no such key")
    if Role.PLATFORM.value in found.roles:
        raise ConflictError(
            "the platform key is rotated by setting KBGATE_PLATFORM_KEY", field="key_id"
        )
    revoked = await store.revoke_api_key(key_id, key_event("revoked", found, principal))
    if revoked is None:
        raise NotFoundError("no such key")
    settings.invalidate_credentials()
    telemetry.count("keys_revoked")
    return revoked


async def key_history(
    store: SettingsStore, principal: Principal, org_id: str | None, tenant_id: str | None
) -> list[KeyEvent]:
    """Key creations and revocations the caller may see, oldest first."""
    events = await store.key_history()
    return [
        event
        for event in events
        if _sees(principal, event.org_id, event.tenant_id)
        and _matches(event.org_id, event.tenant_id, org_id, tenant_id)
    ]
