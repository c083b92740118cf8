"""The probe's lifecycle check bites: a workspace created again under a deleted one's id
that is shown a record of its predecessor is reported as a leak (`kbgate probe`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gateway.access.auth import issue_key
from gateway.admin.keys import key_event
from gateway.admin.provisioning import PLATFORM
from gateway.safety.redaction import Redactor
from gateway.tools.probe.campaign import Campaign
from gateway.tools.probe.world import ProbeKey, Workspace
from ingest.embedder.embedding import Embedder
from tests.isolation.conftest import PLATFORM_KEY, live_gateway, probe_transport

pytestmark = pytest.mark.anyio


async def test_the_lifecycle_check_reports_a_predecessors_key_history(
    embedder: Embedder, redactor: Redactor, fast_root: Path
) -> None:
    """On a real gateway, the check passes; with a key (and its creation event) of the
    deleted workspace put back into the store, as a store that kept them would show
    them, it reports leaks on the key history and key list."""
    data_dir = Path(tempfile.mkdtemp(prefix="lifecycle-", dir=fast_root))
    async with live_gateway("edge", data_dir, embedder, redactor) as gw:
        platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
        for run in ("clean", "kept"):
            campaign = Campaign(probe_transport(gw.client), PLATFORM_KEY, run=f"probe-{run}")
            org_id, tenant_id = f"probe-{run}-oa", f"probe-{run}-oa-w1"
            assert (
                await gw.client.post("/v1/orgs", json={"org_id": org_id}, headers=platform)
            ).status_code == 201
            made = await gw.client.post(
                f"/v1/orgs/{org_id}/workspaces", json={"tenant_id": tenant_id}, headers=platform
            )
            assert made.status_code == 201
            owner = ProbeKey("oa-w1/owner", "oa-w1", frozenset({"admin"}))
            campaign.world.workspaces.append(Workspace("oa-w1", org_id, tenant_id, 0, owner))
            assert (
                await gw.client.delete(f"/v1/orgs/{org_id}", headers=platform)
            ).status_code == 200
            if run == "kept":
                _, record = issue_key(
                    org_id=org_id, tenant_id=tenant_id, roles=["retrieve"], clearance=None
                )
                await gw.services.store.create_api_key(
                    record, key_event("created", record, PLATFORM)
                )
            await campaign.recreated_check([org_id])
            leaks = {f.endpoint for f in campaign.report.leaks}
            lifecycle = [r for r in campaign.report.records if r.mode.startswith("lifecycle")]
            assert len(lifecycle) >= 9
            if run == "clean":
                assert campaign.report.findings == [], campaign.report.findings
            else:
                assert {"GET /v1/keys/history", "GET /v1/keys"} <= leaks, campaign.report.findings
