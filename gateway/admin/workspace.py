"""Workspace settings: read fresh from the store, changed with an audit trail, shown with
their effective values (`settings.effective`'s rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.access.auth import Principal
from gateway.errors import InvalidInputError, NotFoundError
from gateway.telemetry import Telemetry
from settings.cache import CachedSettings
from settings.config import Config
from settings.effective import workspace_effective
from settings.pii_allow_list import AllowListError, parse_allow_list
from settings.records import SettingChange, Workspace
from settings.resolve import PII_ALLOW_LIST, Resolved
from settings.store import NotFoundError as StoreNotFoundError
from settings.store import SettingsStore


@dataclass(frozen=True, slots=True)
class WorkspaceSettings:
    """What a workspace's settings use: its record and history in the store, the cache a
    change invalidates, counts, and what effective values are resolved against (the
    platform's config, the PII entity types a loaded recognizer finds)."""

    store: SettingsStore
    settings: CachedSettings
    telemetry: Telemetry
    config: Config
    loaded_entities: frozenset[str]


def effective(workspaces: WorkspaceSettings, workspace: Workspace) -> dict[str, Resolved[Any]]:
    """Each of the workspace's settings in force and the rule that produced it."""
    return workspace_effective(workspace, workspaces.config, workspaces.loaded_entities)


async def workspace_of(store: SettingsStore, principal: Principal) -> Workspace:
    """The caller's workspace, read fresh from the store (admins see what is stored now)."""
    workspace = await store.get_workspace(principal.tenant_id)
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
    workspaces: WorkspaceSettings, principal: Principal, changes: Mapping[str, Any]
) -> Workspace:
    """Apply and audit (key id, never the key); in force here at once, elsewhere within 30 s.

    An allow-list with an unusable entry is InvalidInputError, and nothing changes."""
    check_allow_list(changes.get(PII_ALLOW_LIST))
    try:
        updated = await workspaces.store.update_workspace_settings(
            principal.tenant_id,
            changes,
            key_id=principal.key_id,
            at=datetime.now(UTC).isoformat(),
        )
    except StoreNotFoundError:
        raise NotFoundError("no such workspace") from None
    workspaces.settings.invalidate(principal.tenant_id)
    workspaces.telemetry.count("settings_changes", len(changes))
    return updated


async def history(store: SettingsStore, principal: Principal) -> list[SettingChange]:
    await workspace_of(store, principal)
    return await store.settings_history(principal.tenant_id)
