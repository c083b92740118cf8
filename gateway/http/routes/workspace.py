"""Workspace settings and their history (admin role, own workspace only)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, get, patch
from litestar.datastructures import State
from litestar.params import JSONBody

from gateway.access.auth import Principal
from gateway.admin import workspace
from gateway.http.routes.knowledge import effective_out
from gateway.http.schemas import (
    HistoryOut,
    PatchWorkspaceSettings,
    SettingChangeOut,
    WorkspaceSettingsOut,
)
from gateway.http.security import requires
from gateway.runtime.services import Services
from settings.records import Role, Workspace

AnyRequest = Request[Principal, str, State]


def settings_changes(data: PatchWorkspaceSettings) -> dict[str, Any]:
    """The fields a PATCH sent (None resets). Shared with the admin console."""
    return {
        name: value
        for name, value in msgspec.structs.asdict(data).items()
        if value is not msgspec.UNSET
    }


def _out(services: Services, found: Workspace) -> WorkspaceSettingsOut:
    return WorkspaceSettingsOut(
        tenant_id=found.tenant_id,
        org_id=found.org_id,
        created_at=found.created_at,
        settings=found.settings,
        effective=effective_out(workspace.effective_settings(services, found)),
    )


class WorkspaceController(Controller):
    path = "/v1/workspace"
    guards = [requires(Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["workspace"]  # noqa: RUF012 — Litestar configuration

    @get("/settings", summary="Stored and effective workspace settings")
    async def get_settings(self, request: AnyRequest, state: State) -> WorkspaceSettingsOut:
        services: Services = state.services
        return _out(services, await workspace.workspace_of(services, request.user))

    @patch("/settings", summary="Change workspace settings (null resets to the default)")
    async def patch_settings(
        self, request: AnyRequest, state: State, data: JSONBody[PatchWorkspaceSettings]
    ) -> WorkspaceSettingsOut:
        services: Services = state.services
        updated = await workspace.change_settings(services, request.user, settings_changes(data))
        return _out(services, updated)

    @get("/settings/history", summary="Every settings change: who (key id), when, old, new")
    async def get_history(self, request: AnyRequest, state: State) -> HistoryOut:
        changes = await workspace.history(state.services, request.user)
        return HistoryOut(
            changes=[
                SettingChangeOut(at=c.at, key_id=c.key_id, setting=c.setting, old=c.old, new=c.new)
                for c in changes
            ]
        )
