"""Deleting, continued: an organization's collection is dropped, writes racing a deletion
leave nothing behind, and deletions left unfinished are completed when the gateway
starts. On Qdrant Edge with SQLite and on qdrant-client local mode with a real Redis."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.admin.transfer import model_id
from ingest.embedder.embedding import Embedder
from ingest.index import SHARED_COLLECTION, org_collection
from ingest.sync import Document, DocumentWriter, SyncOutcome, Target
from settings.records import Workspace
from tests.api.conftest import Gateway, serving
from tests.api.tenants import Tenant, provision
from tests.api.test_deletion import (  # the deletion suite's stacks and workspace
    _passages,
    _stocked,
    _view,
    stack_gateway,
)

__all__ = ["stack_gateway"]  # a fixture, used by name

pytestmark = pytest.mark.anyio

TEXT = "The harbour master logs every ship that crosses the bar at dawn."


class _HeldWriter(DocumentWriter):
    """The real writer, held at the start of `put` until the test releases it: a write
    caught in the middle of its embedding while something else happens."""

    def __init__(self, gw: Gateway) -> None:
        services = gw.services
        super().__init__(
            services.documents.writer.index, services.embedder, model_id=model_id(services.config)
        )
        self.entered = threading.Event()
        self.release = threading.Event()

    def put(
        self,
        target: Target,
        document: Document,
        *,
        legacy: bool = False,
        pause: Callable[[], None] = lambda: None,
    ) -> SyncOutcome:
        self.entered.set()
        if not self.release.wait(60):
            raise TimeoutError("the test never released the write")
        return super().put(target, document, legacy=legacy, pause=pause)


async def _held_write(gw: Gateway, tenant: Tenant, kb_id: str) -> tuple[_HeldWriter, Any]:
    """Start a document write into `kb_id` and wait until it is inside the writer."""
    writer = _HeldWriter(gw)
    gw.services.documents = dataclasses.replace(gw.services.documents, writer=writer)
    write = asyncio.create_task(
        gw.client.put(
            f"/v1/knowledge-bases/{kb_id}/documents/late",
            json={"text": TEXT, "classification": "internal"},
            headers=tenant.headers(),
        )
    )
    assert await asyncio.to_thread(writer.entered.wait, 30)
    return writer, write


async def _counts(gw: Gateway, tenant: Tenant) -> tuple[int, int]:
    return await _passages(gw, tenant, org_collection(tenant.org_id)), await _passages(
        gw, tenant, SHARED_COLLECTION
    )


async def test_org_deletion_drops_its_collection_and_spares_another_org(
    stack_gateway: Gateway,
) -> None:
    """Deleting an org answers that its collection was dropped; its workspaces' passages
    are gone from kb_shared too, and a workspace of another org using kb_shared keeps
    exactly its counts and a turn's results. The org id can then be created again with
    an empty collection."""
    gw = stack_gateway
    gone = await _stocked(gw, "t1")
    other = await _stocked(gw, "t9", org_id="other")
    counts_before, view_before = await _counts(gw, other), await _view(other)

    response = await gw.client.delete("/v1/orgs/acme", headers=gw.platform)

    assert response.status_code == 200, response.text
    assert response.json()["collection_dropped"] is True
    assert await _counts(gw, gone) == (0, 0)
    assert await _counts(gw, other) == counts_before
    assert await _view(other) == view_before
    again = await provision(gw, "acme", "t1")
    listed = await gw.client.get("/v1/knowledge-bases/org-kb/documents", headers=again.headers())
    assert listed.status_code == 404


async def test_a_write_into_a_workspace_being_deleted_answers_404_and_writes_nothing(
    stack_gateway: Gateway,
) -> None:
    """While a workspace is marked `deleting`, a document write with a key that still
    authenticates answers 404, like an unknown knowledge base, and writes no passage."""
    gw = stack_gateway
    tenant = await _stocked(gw, "t1")
    before = await _counts(gw, tenant)
    await gw.services.store.mark_workspace_deleting("t1")

    response = await gw.client.put(
        "/v1/knowledge-bases/org-kb/documents/late",
        json={"text": TEXT, "classification": "internal"},
        headers=tenant.headers(),
    )

    assert response.status_code == 404, response.text
    assert await _counts(gw, tenant) == before


async def test_a_write_that_lands_after_its_kb_was_deleted_and_made_again_is_taken_back(
    stack_gateway: Gateway,
) -> None:
    """A write caught embedding while its KB is deleted and created again under the same
    id answers 404 once it lands, and the new KB holds none of it."""
    gw = stack_gateway
    tenant = await _stocked(gw, "t1")
    writer, write = await _held_write(gw, tenant, "org-kb")

    deleted = await gw.client.delete("/v1/knowledge-bases/org-kb", headers=tenant.headers())
    assert deleted.status_code == 200, deleted.text
    await tenant.kb("org-kb")
    writer.release.set()
    response = await write

    assert response.status_code == 404, response.text
    listed = await gw.client.get("/v1/knowledge-bases/org-kb/documents", headers=tenant.headers())
    assert listed.json() == {"documents": []}


async def test_a_write_that_lands_while_its_workspace_is_deleted_leaves_nothing(
    stack_gateway: Gateway,
) -> None:
    """A write caught embedding while its workspace is deleted answers 404 once it lands;
    no passage of the workspace is left in either collection, and a neighbour's counts
    and turn are as before."""
    gw = stack_gateway
    tenant = await _stocked(gw, "t1")
    neighbour = await _stocked(gw, "t2")
    counts_before, view_before = await _counts(gw, neighbour), await _view(neighbour)
    writer, write = await _held_write(gw, tenant, "org-kb")

    deleted = await gw.client.delete("/v1/orgs/acme/workspaces/t1", headers=gw.platform)
    assert deleted.status_code == 200, deleted.text
    writer.release.set()
    response = await write

    assert response.status_code == 404, response.text
    assert await _counts(gw, tenant) == (0, 0)
    assert await _counts(gw, neighbour) == counts_before
    assert await _view(neighbour) == view_before


async def test_deletions_left_marked_are_finished_when_the_gateway_starts(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A workspace and an org left marked `deleting` (a crash right after marking) are
    deleted by the next start without any call: their keys answer 401, their passages
    are gone, the ids are free again, and a neighbour keeps its counts and turn."""
    async with serving(tmp_path, embedder) as gw:
        gone = await _stocked(gw, "t1")
        neighbour = await _stocked(gw, "t2")
        doomed = await _stocked(gw, "t3", org_id="doomed")
        before = (await _counts(gw, neighbour), await _view(neighbour))
        await gw.services.store.mark_workspace_deleting("t1")
        await gw.services.store.mark_org_deleting("doomed")

    async with serving(tmp_path, embedder) as gw:
        await _until_nothing_pending(gw)
        for tenant in (gone, neighbour, doomed):
            tenant.gw = gw
        for tenant in (gone, doomed):
            assert await _counts(gw, tenant) == (0, 0)
            denied = await gw.client.get("/v1/agents/bot", headers=tenant.headers())
            assert denied.status_code == 401
        assert (await _counts(gw, neighbour), await _view(neighbour)) == before
        await provision(gw, "doomed", "t1")


async def _until_nothing_pending(gw: Gateway) -> None:
    for _ in range(300):
        pending = await gw.services.store.pending_deletions()
        if pending == ([], []) and await gw.services.store.get_org("doomed") is None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the deletions left marked were not finished at start")


async def test_each_deletion_leaves_an_audit_record_and_logs_counts_only(
    stack_gateway: Gateway,
) -> None:
    """`GET /v1/deletions` (platform only) lists each completed deletion, oldest first:
    kind, ids, the actor's key id and the counts the DELETE answered, never a text; the
    log lines of the deletions name no tenant or org."""
    gw = stack_gateway
    tenant = await _stocked(gw, "t1")
    await _stocked(gw, "t2", org_id="other")
    one = await gw.client.delete("/v1/orgs/acme/workspaces/t1", headers=gw.platform)
    org = await gw.client.delete("/v1/orgs/other", headers=gw.platform)
    assert (one.status_code, org.status_code) == (200, 200)

    listed = await gw.client.get("/v1/deletions", headers=gw.platform)

    assert listed.status_code == 200, listed.text
    records = listed.json()["deletions"]
    assert [(r["kind"], r["org_id"], r["tenant_id"]) for r in records] == [
        ("workspace", "acme", "t1"),
        ("workspace", "other", "t2"),
        ("organization", "other", ""),
    ]
    assert records[0]["counts"] == one.json()["deleted"]
    assert records[2]["counts"] == {"workspaces": 1, **org.json()["deleted"]}
    assert {r["actor_key_id"] for r in records} == {"platform"}
    assert "lighthouse" not in listed.text
    denied = await gw.client.get("/v1/deletions", headers=tenant.headers())
    assert denied.status_code in {401, 403}
    deletion_logs = [line for line in gw.logs.getvalue().splitlines() if "_deleted" in line]
    assert deletion_logs
    assert not [line for line in deletion_logs if "t1" in line or "acme" in line]


async def test_a_re_created_workspace_sees_nothing_of_its_predecessor(
    stack_gateway: Gateway,
) -> None:
    """Issue 57 #7: after org `oa` is deleted and `oa`/`oa-w1` created again, the new
    workspace's admin sees no key history, key, settings change, KB or agent change,
    KB, agent or held-back count of the deleted one; another workspace keeps its own."""
    gw = stack_gateway
    old = await _stocked(gw, "oa-w1", org_id="oa")
    for n in range(3):
        await old.issue(f"extra{n}", ["retrieve"])
    await gw.client.put(
        "/v1/knowledge-bases/org-kb/documents/unlabelled",
        json={"text": TEXT},
        headers=old.headers(),
    )
    neighbour = await provision(gw, "ob", "ob-w1")
    deleted = await gw.client.delete("/v1/orgs/oa", headers=gw.platform)
    assert deleted.status_code == 200, deleted.text

    new = await provision(gw, "oa", "oa-w1")
    headers = new.headers()
    history = (await gw.client.get("/v1/keys/history", headers=headers)).json()["events"]
    assert [(e["action"], e["tenant_id"]) for e in history] == [("created", "oa-w1")]
    assert (
        history[0]["key_id"]
        == (await gw.client.get("/v1/keys", headers=headers)).json()["keys"][0]["key_id"]
    )
    empty = {
        "/v1/workspace/settings/history": "changes",
        "/v1/workspace/changes": "changes",
        "/v1/knowledge-bases": "knowledge_bases",
        "/v1/agents": "agents",
    }
    for path, field in empty.items():
        answer = await gw.client.get(path, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()[field] == [], (path, answer.text)
    await new.kb("org-kb")
    stats = (await gw.client.get("/v1/knowledge-bases/org-kb/stats", headers=headers)).json()
    assert stats["held_back"] == 0, stats
    assert stats["documents"] == 0, stats
    platform_history = (await gw.client.get("/v1/keys/history", headers=gw.platform)).json()
    assert {e["tenant_id"] for e in platform_history["events"]} == {"oa-w1", "ob-w1"}
    assert sum(e["tenant_id"] == "ob-w1" for e in platform_history["events"]) == 1
    assert neighbour.keys["all"]


async def test_workspace_ids_differing_only_in_case_cannot_both_exist(
    stack_gateway: Gateway,
) -> None:
    """Issue 57 #8: a new workspace id must be lower case (422 otherwise), and one that
    differs only in case from a stored workspace's id (stored before ids had to be lower
    case) is taken (409); the stored one keeps working under its own id."""
    gw = stack_gateway
    await provision(gw, "oa", "oa-w1")
    upper = await gw.client.post(
        "/v1/orgs/oa/workspaces", json={"tenant_id": "OA-W1"}, headers=gw.platform
    )
    assert upper.status_code == 422, upper.text
    assert upper.json()["field"] == "tenant_id"
    again = await gw.client.post(
        "/v1/orgs/oa/workspaces", json={"tenant_id": "oa-w1"}, headers=gw.platform
    )
    assert again.status_code == 409, again.text

    legacy = Workspace(tenant_id="Legacy-WS", org_id="oa", created_at="2025-01-01T00:00:00+00:00")
    await gw.services.store.create_workspace(legacy)  # as an earlier release let it be made
    clash = await gw.client.post(
        "/v1/orgs/oa/workspaces", json={"tenant_id": "legacy-ws"}, headers=gw.platform
    )
    assert clash.status_code == 409, clash.text
    issued = await gw.client.post(
        "/v1/keys",
        json={"org_id": "oa", "tenant_id": "Legacy-WS", "roles": ["admin"]},
        headers=gw.platform,
    )
    assert issued.status_code == 201, issued.text
    key = {"Authorization": f"Bearer {issued.json()['key']}"}
    settings = await gw.client.get("/v1/workspace/settings", headers=key)
    assert settings.status_code == 200, settings.text
    assert settings.json()["tenant_id"] == "Legacy-WS"
