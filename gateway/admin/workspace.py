"""Workspace settings: read with effective values, change with an audit trail, and read
through the cache where a turn or an egress check needs them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.access.auth import Principal
from gateway.errors import InvalidInputError, NotFoundError
from gateway.runtime.services import Services
from gateway.safety.passages import in_force
from settings.pii_allow_list import AllowListError, parse_allow_list
from settings.records import SettingChange, Workspace
from settings.resolve import (
    PII_ALLOW_LIST,
    Resolved,
    resolve_kb_cap,
    resolve_pii_allow_list,
    resolve_pii_entities,
    resolve_pii_operators,
    resolve_redaction,
    resolve_strict_isolation,
    resolve_turn_retention,
)
from settings.store import NotFoundError as StoreNotFoundError
from settings.store import StoreUnavailableError


async def workspace_of(services: Services, principal: Principal) -> Workspace:
    """The caller's workspace, read fresh from the store (admins see what is stored now)."""
    workspace = await services.store.get_workspace(principal.tenant_id)
    if workspace is None:
        raise NotFoundError("no such workspace")
    return workspace


async def workspace_or_none(services: Services, tenant_id: str) -> Workspace | None:
    """The workspace from the settings cache, or None when the store cannot be read (counted
    as `settings_fallback`): the settings rules then fall back to their safe defaults."""
    try:
        return await services.settings.workspace(tenant_id)
    except StoreUnavailableError:
        services.telemetry.count("settings_fallback")
        return None


def effective_settings(services: Services, workspace: Workspace) -> dict[str, Resolved[Any]]:
    """Each workspace setting in force and the rule that produced it."""
    settings = workspace.settings
    return {
        "strict_rag_isolation": resolve_strict_isolation(settings, workspace.created_at),
        "rag_pii_redaction": resolve_redaction(settings, None),
        "max_knowledge_bases_per_agent": resolve_kb_cap(
            settings, services.config.bounds, services.config.defaults
        ),
        "pii_entities": pii_entities_in_force(services, settings),
        "pii_allow_list": resolve_pii_allow_list(settings),
        "pii_operators": resolve_pii_operators(settings),
        "turn_retention_s": turn_retention(services, workspace),
    }


def pii_entities_in_force(
    services: Services, settings: Mapping[str, Any] | None
) -> Resolved[tuple[str, ...]]:
    """The configured entity types that a loaded recognizer finds (`clamped` when some
    configured type has none: PERSON, LOCATION and ORGANIZATION need the NER pipeline)."""
    configured = resolve_pii_entities(settings)
    loaded = in_force(services.redactor, configured.value)
    return Resolved(
        loaded,
        configured.source,
        configured.clamped or loaded != configured.value,
        configured.malformed,
    )


def turn_retention(services: Services, workspace: Workspace | None) -> Resolved[int]:
    """How long this workspace's turn records are kept (the platform's default when its
    settings could not be read)."""
    return resolve_turn_retention(
        workspace.settings if workspace else None,
        services.config.turn_ttl_s,
        services.config.turn_ttl_max_s,
    )


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
