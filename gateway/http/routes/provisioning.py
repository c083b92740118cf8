"""Platform provisioning endpoints (platform role)."""

from __future__ import annotations

import msgspec
from litestar import Controller, Request, delete, get, post
from litestar.datastructures import State
from litestar.params import FromPath, JSONBody

from gateway.access.auth import Principal
from gateway.admin import lifecycle, provisioning
from gateway.admin.lifecycle import Deletions
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.provisioning_schemas import (
    CreateOrg,
    CreateWorkspace,
    DeletionHistoryOut,
    DeletionOut,
    OrgDeletedOut,
    OrgOut,
    WorkspaceDeletedOut,
    WorkspaceOut,
    WorkspaceRemoved,
)
from gateway.http.security import requires
from ingest.index import Index, org_collection
from settings.records import Role
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]


def workspace_deleted_out(
    org_id: str, tenant_id: str, removal: lifecycle.Removal
) -> WorkspaceDeletedOut:
    """A workspace deletion as the API answers it. Shared with the CLI."""
    return WorkspaceDeletedOut(tenant_id=tenant_id, org_id=org_id, deleted=_removed(removal))


def org_deleted_out(org_id: str, done: lifecycle.OrgRemoval) -> OrgDeletedOut:
    """An organization deletion as the API answers it. Shared with the CLI."""
    return OrgDeletedOut(
        org_id=org_id,
        workspaces=done.workspaces,
        deleted=_removed(done.removal),
        collection_dropped=done.collection_dropped,
    )


def _removed(removal: lifecycle.Removal) -> WorkspaceRemoved:
    return WorkspaceRemoved(
        passages=removal.passages,
        knowledge_bases=removal.knowledge_bases,
        agents=removal.agents,
        keys=removal.keys,
        turns=removal.turns,
        settings_changes=removal.settings_changes,
    )


class ProvisioningController(Controller):
    path = "/v1"
    guards = [requires(Role.PLATFORM)]  # noqa: RUF012 — Litestar configuration
    tags = ["provisioning"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        "/orgs",
        operation_id="createOrg",
        summary="Create an organization (and its collection)",
        responses=problems(*KEYED, *BODY, 409),
    )
    async def create_org(
        self, store: Injected[SettingsStore], index: Injected[Index], data: JSONBody[CreateOrg]
    ) -> OrgOut:
        org = await provisioning.create_org(store, index, data.org_id)
        return OrgOut(
            org_id=org.org_id, created_at=org.created_at, collection=org_collection(org.org_id)
        )

    @post(
        "/orgs/{org_id:str}/workspaces",
        operation_id="createWorkspace",
        summary="Create a workspace in an organization",
        responses=problems(*KEYED, *BODY, 404, 409),
    )
    async def create_workspace(
        self,
        store: Injected[SettingsStore],
        org_id: FromPath[str],
        data: JSONBody[CreateWorkspace],
    ) -> WorkspaceOut:
        workspace = await provisioning.create_workspace(
            store, org_id, data.tenant_id, data.created_at
        )
        return WorkspaceOut(
            tenant_id=workspace.tenant_id, org_id=workspace.org_id, created_at=workspace.created_at
        )

    @delete(
        "/orgs/{org_id:str}/workspaces/{tenant_id:str}",
        status_code=200,
        operation_id="deleteWorkspace",
        summary="Delete a workspace and everything it owns (finishes an interrupted deletion)",
        responses=problems(*KEYED, 404),
    )
    async def delete_workspace(
        self,
        request: AnyRequest,
        deletions: Injected[Deletions],
        org_id: FromPath[str],
        tenant_id: FromPath[str],
    ) -> WorkspaceDeletedOut:
        removal = await lifecycle.delete_workspace(deletions, org_id, tenant_id, request.user)
        return workspace_deleted_out(org_id, tenant_id, removal)

    @get(
        "/deletions",
        operation_id="listDeletions",
        summary="The audit record of every completed deletion (ids and counts, no content)",
        responses=problems(*KEYED),
    )
    async def list_deletions(self, store: Injected[SettingsStore]) -> DeletionHistoryOut:
        records = await lifecycle.deletion_history(store)
        return DeletionHistoryOut(
            deletions=[
                msgspec.convert(record, DeletionOut, from_attributes=True) for record in records
            ]
        )

    @delete(
        "/orgs/{org_id:str}",
        status_code=200,
        operation_id="deleteOrg",
        summary="Delete an organization: each of its workspaces, its collection, its record",
        responses=problems(*KEYED, 404, 409),
    )
    async def delete_org(
        self, request: AnyRequest, deletions: Injected[Deletions], org_id: FromPath[str]
    ) -> OrgDeletedOut:
        done = await lifecycle.delete_org(deletions, org_id, request.user)
        return org_deleted_out(org_id, done)
