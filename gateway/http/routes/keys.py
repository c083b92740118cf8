"""Key lifecycle endpoints: issue (platform), list, revoke and the key history
(platform, or a workspace admin for its own workspace)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, Request, delete, get, post
from litestar.datastructures import State
from litestar.params import FromPath, JSONBody, QueryParameter

from gateway.access.auth import Principal
from gateway.admin import keys, provisioning
from gateway.http.dependencies import Injected
from gateway.http.key_schemas import (
    CreateKey,
    KeyEventOut,
    KeyHistoryOut,
    KeyInfo,
    KeyList,
    KeyOut,
    RevokedOut,
)
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.security import requires
from gateway.telemetry import Telemetry
from settings.cache import CachedSettings
from settings.records import ApiKey, KeyEvent, Role
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]
OrgFilter = Annotated[str | None, QueryParameter(description="only this organization's")]
TenantFilter = Annotated[str | None, QueryParameter(description="only this workspace's")]


def key_info(key: ApiKey) -> KeyInfo:
    """A key's metadata as the API answers it (never its secret). Shared with the CLI."""
    return KeyInfo(
        key_id=key.key_id,
        org_id=key.org_id,
        tenant_id=key.tenant_id,
        roles=list(key.roles),
        clearance=key.clearance,
        created_at=key.created_at,
        expires_at=key.expires_at,
        last_used_at=key.last_used_at,
    )


def _event(event: KeyEvent) -> KeyEventOut:
    return KeyEventOut(
        at=event.at,
        action=event.action,
        key_id=event.key_id,
        org_id=event.org_id,
        tenant_id=event.tenant_id,
        roles=list(event.roles),
        clearance=event.clearance,
        actor_key_id=event.actor_key_id,
        expires_at=event.expires_at,
    )


class KeyController(Controller):
    path = "/v1/keys"
    guards = [requires(Role.PLATFORM, Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["keys"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        "/",
        guards=[requires(Role.PLATFORM)],
        operation_id="createKey",
        summary="Issue a workspace key (shown once, stored hashed)",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def create_key(
        self, request: AnyRequest, store: Injected[SettingsStore], data: JSONBody[CreateKey]
    ) -> KeyOut:
        secret, record = await provisioning.create_key(
            store,
            org_id=data.org_id,
            tenant_id=data.tenant_id,
            roles=data.roles,
            clearance=data.clearance,
            expires_at=data.expires_at,
            ttl_s=data.ttl_s,
            actor=request.user,
        )
        return KeyOut(
            key=secret,
            key_id=record.key_id,
            org_id=record.org_id,
            tenant_id=record.tenant_id,
            roles=record.roles,
            clearance=record.clearance,
            created_at=record.created_at,
            expires_at=record.expires_at,
        )

    @get(
        "/",
        operation_id="listKeys",
        summary="Keys' metadata (never a secret): all for the platform, else the workspace's",
        responses=problems(*KEYED),
    )
    async def list_keys(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        org_id: OrgFilter = None,
        tenant_id: TenantFilter = None,
    ) -> KeyList:
        found = await keys.list_keys(store, request.user, org_id, tenant_id)
        return KeyList(keys=[key_info(key) for key in found])

    @get(
        "/history",
        operation_id="getKeyHistory",
        summary="Every key created or revoked: when, by which key id",
        responses=problems(*KEYED),
    )
    async def history(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        org_id: OrgFilter = None,
        tenant_id: TenantFilter = None,
    ) -> KeyHistoryOut:
        events = await keys.key_history(store, request.user, org_id, tenant_id)
        return KeyHistoryOut(events=[_event(event) for event in events])

    @delete(
        "/{key_id:str}",
        status_code=200,
        operation_id="revokeKey",
        summary="Revoke a key (in force at once)",
        responses=problems(*KEYED, 404, 409),
    )
    async def revoke(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        settings_cache: Injected[CachedSettings],
        telemetry: Injected[Telemetry],
        key_id: FromPath[str],
    ) -> RevokedOut:
        revoked = await keys.revoke_key(store, settings_cache, telemetry, request.user, key_id)
        return RevokedOut(key_id=revoked.key_id, revoked=True)
