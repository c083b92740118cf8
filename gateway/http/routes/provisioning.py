"""Platform provisioning endpoints (platform role)."""

from __future__ import annotations

from litestar import Controller, post
from litestar.params import FromPath, JSONBody

from gateway.admin import provisioning
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.schemas import (
    CreateOrg,
    CreateWorkspace,
    OrgOut,
    WorkspaceOut,
)
from gateway.http.security import requires
from gateway.runtime.services import Services
from ingest.index import org_collection
from settings.records import Role


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
    async def create_org(self, services: Injected[Services], data: JSONBody[CreateOrg]) -> OrgOut:
        org = await provisioning.create_org(services, data.org_id)
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
        self, services: Injected[Services], org_id: FromPath[str], data: JSONBody[CreateWorkspace]
    ) -> WorkspaceOut:
        workspace = await provisioning.create_workspace(
            services, org_id, data.tenant_id, data.created_at
        )
        return WorkspaceOut(
            tenant_id=workspace.tenant_id, org_id=workspace.org_id, created_at=workspace.created_at
        )
