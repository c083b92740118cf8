"""Workspace settings: read fresh from the store, changed with an audit trail (their
effective values are `settings.effective`'s rules)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.access.auth import Principal
from gateway.errors import InvalidInputError, NotFoundError
from gateway.runtime.services import Services
from settings.pii_allow_list import AllowListError, parse_allow_list
from settings.records import SettingChange, Workspace
from settings.resolve import PII_ALLOW_LIST
from settings.store import NotFoundError as StoreNotFoundError


async def workspace_of(services: Services, principal: Principal) -> Workspace:
    """The caller's workspace, read fresh from the store (admins see what is stored now)."""
    workspace = await services.store.get_workspace(principal.tenant_id)
    if workspace is None:
        raise NotFoundError("no such workspace")
    return workspace


def check_allow_list(entries: Any) -> None:
    """InvalidInputError (`pii_allow_list`) when an entry of an allow-list does not parse."""
    if entries is not None:
        try:
            parse_allow_list(entries)
        except AllowListError as error:
            raise InvalidInputError(str(error), field=PII_ALLOW_LIST) from None


async def change_settings(
    services: Services, principal: Principal, changes: Mapping[str, Any]
) -> Workspace:
    """Apply and audit (key id, never the key); in force here at once, elsewhere within 30 s.

    An allow-list with an unusable entry is InvalidInputError, and nothing changes."""
    check_allow_list(changes.get(PII_ALLOW_LIST))
    try:
        updated = await services.store.update_workspace_settings(
            principal.tenant_id,
            changes,
            key_id=principal.key_id,
            at=datetime.now(UTC).isoformat(),
        )
    except StoreNotFoundError:
        raise NotFoundError("no such workspace") from None
    services.settings.invalidate(principal.tenant_id)
    services.telemetry.count("settings_changes", len(changes))
    return updated


async def history(services: Services, principal: Principal) -> list[SettingChange]:
    await workspace_of(services, principal)
    return await services.store.settings_history(principal.tenant_id)
