"""Workspace export (platform, or the workspace's own admin at clearance `restricted`)
and import (platform): one gzip archive each way (`gateway.admin.archive`)."""

from __future__ import annotations

import re
import tempfile
from typing import IO, cast

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath
from litestar.response import Stream

from gateway.access.auth import Principal
from gateway.admin import archive
from gateway.admin import transfer as admin
from gateway.admin.transfer import Transfer
from gateway.errors import PayloadTooLargeError
from gateway.http.archive_records import RULES
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, KEYED, problems
from gateway.http.provisioning_schemas import (
    ArchiveSignature,
    WorkspaceImported,
    WorkspaceImportedOut,
)
from gateway.http.security import requires
from settings.records import Role
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]
_UNSAFE_IN_FILENAME = re.compile(r"[^A-Za-z0-9._-]")


def _filename(tenant_id: str) -> str:
    return _UNSAFE_IN_FILENAME.sub("_", tenant_id) + ".kbgate.ndjson.gz"


async def _spool(request: AnyRequest, into: IO[bytes], limit: int) -> None:
    """Copy the request body into `into`; PayloadTooLargeError past `limit` bytes."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"an archive is at most {limit} bytes", field="archive")
        into.write(chunk)


class TransferController(Controller):
    path = "/v1/orgs/{org_id:str}/workspaces/{tenant_id:str}"
    tags = ["provisioning"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @get(
        "/export",
        guards=[requires(Role.PLATFORM, Role.ADMIN)],
        operation_id="exportWorkspace",
        summary="The workspace's knowledge as one archive (gzip NDJSON, vectors included)",
        responses={
            200: ResponseSpec(
                data_container=bytes,
                description="The archive",
                media_type=archive.MEDIA_TYPE,
                generate_examples=False,
            ),
            **problems(*KEYED, 404),
        },
    )
    async def export_workspace(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        transfer: Injected[Transfer],
        org_id: FromPath[str],
        tenant_id: FromPath[str],
    ) -> Stream:
        workspace = await admin.exportable(store, request.user, org_id, tenant_id)
        return Stream(
            admin.export_chunks(transfer, workspace),
            media_type=archive.MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{_filename(tenant_id)}"'},
        )

    @post(
        "/import",
        guards=[requires(Role.PLATFORM)],
        status_code=201,
        request_max_body_size=None,
        operation_id="importWorkspace",
        summary=(
            "Create the workspace from an archive (same embedding model: no re-embedding; "
            "every record checked as the API checks its writes; PII analysed again unless "
            "this deployment signed it)"
        ),
        responses=problems(*KEYED, 404, 409, 413, 422),
    )
    async def import_workspace(
        self,
        request: AnyRequest,
        transfer: Injected[Transfer],
        org_id: FromPath[str],
        tenant_id: FromPath[str],
    ) -> WorkspaceImportedOut:
        with tempfile.TemporaryFile() as spooled:
            await _spool(request, spooled, transfer.config.max_import_bytes)
            imported = await admin.import_workspace(transfer, org_id, tenant_id, spooled, RULES)
        return WorkspaceImportedOut(
            tenant_id=tenant_id,
            org_id=org_id,
            imported=WorkspaceImported(
                knowledge_bases=imported.knowledge_bases,
                agents=imported.agents,
                golden_sets=imported.golden_sets,
                passages=imported.passages,
                pii_analysed=imported.pii_analysed,
            ),
            signature=cast(ArchiveSignature, imported.signature),
        )
