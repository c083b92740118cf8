"""Workspace settings, their history and the history of its knowledge bases and agents
(admin role, own workspace only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get, patch
from litestar.datastructures import State
from litestar.params import JSONBody, QueryParameter

from gateway.access.auth import Principal
from gateway.admin import knowledge, workspace
from gateway.admin.workspace import WorkspaceSettings
from gateway.http.bodies import settings_changes
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.security import requires
from gateway.http.workspace_schemas import (
    AdminChangeOut,
    AdminChangesOut,
    ChangedKind,
    HistoryOut,
    PatchWorkspaceSettings,
    SettingChangeOut,
    WorkspaceEffective,
    WorkspaceSettingsOut,
)
from settings.records import AdminChange, Role, SettingChange, Workspace
from settings.resolve import Resolved
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]
KindFilter = Annotated[
    ChangedKind | None, QueryParameter(description="only changes to knowledge bases or to agents")
]
ObjectFilter = Annotated[
    str | None, QueryParameter(description="only changes to the knowledge base or agent of this id")
]


def workspace_settings_out(workspaces: WorkspaceSettings, found: Workspace) -> WorkspaceSettingsOut:
    """A workspace's settings as the API answers them. Shared with the CLI."""
    return WorkspaceSettingsOut(
        tenant_id=found.tenant_id,
        org_id=found.org_id,
        created_at=found.created_at,
        settings=found.settings,
        effective=_effective(workspace.effective(workspaces, found)),
    )


def _effective(values: dict[str, Resolved[Any]]) -> WorkspaceEffective:
    return msgspec.convert(
        {
            name: {"value": found.value, "source": found.source, "clamped": found.clamped}
            for name, found in values.items()
        },
        WorkspaceEffective,
    )


class WorkspaceController(Controller):
    path = "/v1/workspace"
    guards = [requires(Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["workspace"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @get(
        "/settings",
        operation_id="getWorkspaceSettings",
        summary="Stored and effective workspace settings",
        responses=problems(*KEYED, 404),
    )
    async def get_settings(
        self, request: AnyRequest, workspaces: Injected[WorkspaceSettings]
    ) -> WorkspaceSettingsOut:
        found = await workspace.workspace_of(workspaces.store, request.user)
        return workspace_settings_out(workspaces, found)

    @patch(
        "/settings",
        operation_id="patchWorkspaceSettings",
        summary="Change workspace settings (null resets to the default)",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def patch_settings(
        self,
        request: AnyRequest,
        workspaces: Injected[WorkspaceSettings],
        data: JSONBody[PatchWorkspaceSettings],
    ) -> WorkspaceSettingsOut:
        updated = await workspace.change_settings(workspaces, request.user, settings_changes(data))
        return workspace_settings_out(workspaces, updated)

    @get(
        "/settings/history",
        operation_id="getWorkspaceSettingsHistory",
        summary="Every settings change: who (key id), when, old, new",
        responses=problems(*KEYED, 404),
    )
    async def get_history(self, request: AnyRequest, store: Injected[SettingsStore]) -> HistoryOut:
        return history_out(await workspace.history(store, request.user))

    @get(
        "/changes",
        operation_id="getWorkspaceChanges",
        summary="Every knowledge-base and agent change: who (key id), when, which fields",
        responses=problems(*KEYED, 422),
    )
    async def get_changes(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        kind: KindFilter = None,
        object_id: ObjectFilter = None,
    ) -> AdminChangesOut:
        changes = await knowledge.admin_history(store, request.user, kind=kind, object_id=object_id)
        return admin_changes_out(changes)


def admin_changes_out(changes: Sequence[AdminChange]) -> AdminChangesOut:
    """KB and agent changes as the API answers them, oldest first. Shared with the CLI."""
    return AdminChangesOut(
        changes=[
            msgspec.convert(msgspec.structs.asdict(change), AdminChangeOut) for change in changes
        ]
    )


def history_out(changes: Sequence[SettingChange]) -> HistoryOut:
    """Settings changes as the API answers them, oldest first. Shared with the CLI."""
    return HistoryOut(
        changes=[
            SettingChangeOut(
                at=c.at,
                key_id=c.key_id,
                setting=c.setting,
                old=c.old,
                new=c.new,
                knowledge_base_id=c.knowledge_base_id,
                evaluation_id=c.evaluation_id,
            )
            for c in changes
        ]
    )
