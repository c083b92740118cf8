"""Deleting above the document level over HTTP: knowledge bases, agents, workspaces and
organizations, on real engines (Qdrant Edge + SQLite, qdrant-client local mode + Redis)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ingest.embedder.embedding import Embedder
from ingest.index import SHARED_COLLECTION, org_collection
from ingest.payload import Scope
from tests.api.conftest import Gateway, serving_stack
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

QUESTION = "Which beacon guides ships past the reef?"
TEXTS = {
    "org-kb": ("lighthouse", "The lighthouse beacon guides ships past the reef at night."),
    "shared-kb": ("tides", "Tide tables tell harbour pilots when ships may cross the bar."),
}


@pytest.fixture(params=["edge+sqlite", "local+redis"])
async def stack_gateway(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Gateway]:
    """The gateway on Qdrant Edge with SQLite, and on qdrant-client local mode with Redis
    (flushed first)."""
    async with serving_stack(request, tmp_path, embedder) as gw:
        yield gw


async def _stocked(gw: Gateway, tenant_id: str, org_id: str = "acme") -> Tenant:
    """A workspace with an org-storage KB and a shared-storage KB, one document in each,
    an agent over both, and one settings change."""
    tenant = await provision(gw, org_id, tenant_id)
    await tenant.kb("org-kb")
    await tenant.kb("shared-kb", storage="shared")
    for kb_id, (doc_id, text) in TEXTS.items():
        await tenant.doc(kb_id, doc_id, text)
    await tenant.agent("bot", ["org-kb", "shared-kb"])
    await tenant.settings(max_knowledge_bases_per_agent=5)
    return tenant


async def _passages(gw: Gateway, tenant: Tenant, collection: str) -> int:
    """The tenant's passages of both KBs in a collection, counted under its own Scope."""
    scope = Scope.of(
        org_id=tenant.org_id,
        tenant_id=tenant.tenant_id,
        kb_ids=list(TEXTS),
        clearance="restricted",
        strict=False,
    )
    return await gw.services.index.count(collection, scope)


async def _view(tenant: Tenant) -> dict[str, Any]:
    """What the tenant sees: its documents per KB and a turn's passage ids."""
    listed = {}
    for kb_id in TEXTS:
        response = await tenant.gw.client.get(
            f"/v1/knowledge-bases/{kb_id}/documents", headers=tenant.headers()
        )
        assert response.status_code == 200, response.text
        listed[kb_id] = response.json()
    turn = await tenant.retrieve("bot", QUESTION)
    assert turn.status_code == 200, turn.text
    return {"documents": listed, "passages": [p["passage_id"] for p in turn.json()["passages"]]}


async def test_workspace_deletion_removes_everything_it_owns_and_spares_its_neighbour(
    stack_gateway: Gateway,
) -> None:
    """Deleting a workspace answers 200 with what went (passages in its org collection and
    kb_shared, KBs, agents, keys, turns, settings changes); afterwards its key answers 401,
    none of its passages is left under its Scope in either collection, its key history went
    with it (the deletion's audit record counts its keys), a second DELETE answers 404, and
    the tenant id can be created again, empty. A neighbour in the same org and collections
    keeps its passage counts in both and sees exactly what it saw before (documents, a
    turn's results)."""
    gw = stack_gateway
    gone = await _stocked(gw, "gone")
    stay = await _stocked(gw, "stay")
    assert (await gone.retrieve("bot", QUESTION)).status_code == 200
    before = await _view(stay)
    counts = [await _passages(gw, stay, c) for c in (org_collection("acme"), SHARED_COLLECTION)]
    in_org = await _passages(gw, gone, org_collection("acme"))
    in_shared = await _passages(gw, gone, SHARED_COLLECTION)
    assert in_org > 0
    assert in_shared > 0

    response = await gw.client.delete("/v1/orgs/acme/workspaces/gone", headers=gw.platform)

    assert response.status_code == 200, response.text
    assert response.json() == {
        "tenant_id": "gone",
        "org_id": "acme",
        "deleted": {
            "passages": in_org + in_shared,
            "knowledge_bases": 2,
            "agents": 1,
            "keys": 1,
            "turns": 1,
            "settings_changes": 1,
        },
    }
    assert (
        await gw.client.get("/v1/knowledge-bases/org-kb", headers=gone.headers())
    ).status_code == 401
    assert await _passages(gw, gone, org_collection("acme")) == 0
    assert await _passages(gw, gone, SHARED_COLLECTION) == 0
    history = await gw.client.get("/v1/keys/history?tenant_id=gone", headers=gw.platform)
    assert history.json()["events"] == []  # issue 57 #7: it goes with the workspace
    audit = (await gw.client.get("/v1/deletions", headers=gw.platform)).json()["deletions"]
    assert [(d["tenant_id"], d["counts"]["keys"]) for d in audit] == [("gone", 1)]
    again = await gw.client.delete("/v1/orgs/acme/workspaces/gone", headers=gw.platform)
    assert again.status_code == 404
    assert await _view(stay) == before
    assert [
        await _passages(gw, stay, c) for c in (org_collection("acme"), SHARED_COLLECTION)
    ] == counts

    reborn = await provision(gw, "acme", "gone")
    assert (
        await gw.client.get("/v1/knowledge-bases/org-kb", headers=reborn.headers())
    ).status_code == 404
    assert (await gw.client.get("/v1/agents/bot", headers=reborn.headers())).status_code == 404


async def test_workspace_deletion_needs_the_platform_and_its_own_org(gateway: Gateway) -> None:
    """A workspace admin cannot delete its workspace (403); the platform naming another org
    or an unknown workspace gets 404, and nothing is removed."""
    tenant = await provision(gateway, "acme", "t1")
    await provision(gateway, "other", "t2")
    denied = await gateway.client.delete("/v1/orgs/acme/workspaces/t1", headers=tenant.headers())
    assert denied.status_code == 403
    for path in ("/v1/orgs/other/workspaces/t1", "/v1/orgs/acme/workspaces/nope"):
        assert (await gateway.client.delete(path, headers=gateway.platform)).status_code == 404
    assert (
        await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    ).status_code == 200


async def test_an_interrupted_workspace_deletion_is_finished_by_the_next_delete(
    gateway: Gateway,
) -> None:
    """A workspace marked `deleting` whose data is still there (a deletion that crashed
    right after marking) cannot be created again (409) nor given a key (404); the next
    DELETE removes everything and answers what it removed, and then the id is free."""
    tenant = await _stocked(gateway, "t1")
    in_index = await _passages(gateway, tenant, org_collection("acme")) + await _passages(
        gateway, tenant, SHARED_COLLECTION
    )
    await gateway.services.store.mark_workspace_deleting("t1")

    recreate = await gateway.client.post(
        "/v1/orgs/acme/workspaces", json={"tenant_id": "t1"}, headers=gateway.platform
    )
    assert recreate.status_code == 409
    key = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "t1", "roles": ["retrieve"]},
        headers=gateway.platform,
    )
    assert key.status_code == 404

    finished = await gateway.client.delete("/v1/orgs/acme/workspaces/t1", headers=gateway.platform)
    assert finished.status_code == 200, finished.text
    assert finished.json()["deleted"]["passages"] == in_index
    assert finished.json()["deleted"]["knowledge_bases"] == 2
    assert await _passages(gateway, tenant, org_collection("acme")) == 0
    assert await _passages(gateway, tenant, SHARED_COLLECTION) == 0
    assert (
        await gateway.client.post(
            "/v1/orgs/acme/workspaces", json={"tenant_id": "t1"}, headers=gateway.platform
        )
    ).status_code == 201


async def test_org_deletion_removes_each_workspace_then_the_org(gateway: Gateway) -> None:
    """Deleting an org answers its workspace count and the totals they held, removes every
    passage of its workspaces (kb_shared included) and their keys (401), leaves another org's
    workspace as it was, and a second DELETE answers 404; the org id is then free. A
    workspace admin cannot delete an org (403)."""
    first = await _stocked(gateway, "t1")
    second = await _stocked(gateway, "t2")
    other = await _stocked(gateway, "t3", org_id="other")
    before = await _view(other)
    denied = await gateway.client.delete("/v1/orgs/acme", headers=first.headers())
    assert denied.status_code == 403

    response = await gateway.client.delete("/v1/orgs/acme", headers=gateway.platform)

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["org_id"], body["workspaces"]) == ("acme", 2)
    assert body["deleted"]["knowledge_bases"] == 4
    assert body["deleted"]["keys"] == 2
    for tenant in (first, second):
        assert await _passages(gateway, tenant, org_collection("acme")) == 0
        assert await _passages(gateway, tenant, SHARED_COLLECTION) == 0
        status = (await gateway.client.get("/v1/agents/bot", headers=tenant.headers())).status_code
        assert status == 401
    assert (
        await gateway.client.delete("/v1/orgs/acme", headers=gateway.platform)
    ).status_code == 404
    assert await _view(other) == before
    recreated = await gateway.client.post(
        "/v1/orgs", json={"org_id": "acme"}, headers=gateway.platform
    )
    assert recreated.status_code == 201


async def test_an_org_marked_deleting_takes_no_workspace_and_is_finished_later(
    gateway: Gateway,
) -> None:
    """While an org is marked `deleting` (an interrupted deletion), creating a workspace in
    it answers 409; the next DELETE finishes it."""
    await provision(gateway, "acme", "t1")
    await gateway.services.store.mark_org_deleting("acme")
    refused = await gateway.client.post(
        "/v1/orgs/acme/workspaces", json={"tenant_id": "t2"}, headers=gateway.platform
    )
    assert refused.status_code == 409
    finished = await gateway.client.delete("/v1/orgs/acme", headers=gateway.platform)
    assert finished.status_code == 200, finished.text
    assert finished.json()["workspaces"] == 1
    assert await gateway.services.store.get_org("acme") is None


async def test_knowledge_base_deletion(gateway: Gateway) -> None:
    """Deleting a KB answers its passage and document counts and how many agents lost it;
    the KB then reads 404, agents keep their other KBs, a KB re-created with the same id is
    empty, and a second DELETE, an unknown id and another workspace's id all answer the
    same 404. Another workspace's KB of the same id keeps its documents; an ingest-only key
    is refused (403)."""
    tenant = await provision(gateway, "acme", "t1")
    neighbour = await provision(gateway, "acme", "t2")
    ingest_only = await tenant.issue("ingest", ["ingest"])
    for owner in (tenant, neighbour):
        await owner.kb("docs")
        await owner.doc("docs", "a", "Anchors hold ships at rest in the harbour.")
        await owner.doc("docs", "b", "Buoys mark the channel for incoming ships.")
    await tenant.kb("more")
    await neighbour.kb("theirs")
    await tenant.agent("bot", ["docs", "more"])
    await tenant.agent("other", ["more"])
    passages = await gateway.services.index.count(
        org_collection("acme"),
        Scope.of(org_id="acme", tenant_id="t1", kb_ids=["docs"], clearance="restricted"),
    )
    assert (
        await gateway.client.delete(
            "/v1/knowledge-bases/docs", headers={"Authorization": f"Bearer {ingest_only}"}
        )
    ).status_code == 403

    response = await gateway.client.delete("/v1/knowledge-bases/docs", headers=tenant.headers())

    assert response.status_code == 200, response.text
    assert response.json() == {
        "kb_id": "docs",
        "deleted": {"passages": passages, "documents": 2, "agents_detached": 1},
    }
    assert (
        await gateway.client.get("/v1/knowledge-bases/docs", headers=tenant.headers())
    ).status_code == 404
    bot = await gateway.client.get("/v1/agents/bot", headers=tenant.headers())
    assert bot.json()["knowledge_base_ids"] == ["more"]
    await tenant.kb("docs")
    listed = await gateway.client.get(
        "/v1/knowledge-bases/docs/documents", headers=tenant.headers()
    )
    assert listed.json() == {"documents": []}
    await gateway.client.delete("/v1/knowledge-bases/docs", headers=tenant.headers())
    missing = [
        await gateway.client.delete(f"/v1/knowledge-bases/{kb_id}", headers=tenant.headers())
        for kb_id in ("docs", "nope", "theirs")
    ]
    assert {(r.status_code, r.text) for r in missing} == {(missing[0].status_code, missing[0].text)}
    assert missing[0].status_code == 404
    kept = await gateway.client.get(
        "/v1/knowledge-bases/docs/documents", headers=neighbour.headers()
    )
    assert kept.json() == {"documents": [{"document_id": "a"}, {"document_id": "b"}]}


async def test_agent_deletion(gateway: Gateway) -> None:
    """Deleting an agent answers 200; it then reads 404 and a turn on it answers 404, its
    KBs stay, and a second DELETE, an unknown id and another workspace's id all answer the
    same 404 (the other workspace's agent stays)."""
    tenant = await provision(gateway, "acme", "t1")
    neighbour = await provision(gateway, "acme", "t2")
    await tenant.kb("docs")
    await tenant.agent("bot", ["docs"])
    await neighbour.kb("docs")
    await neighbour.agent("theirs", ["docs"])

    response = await gateway.client.delete("/v1/agents/bot", headers=tenant.headers())

    assert response.status_code == 200, response.text
    assert response.json() == {"agent_id": "bot", "deleted": True}
    assert (await gateway.client.get("/v1/agents/bot", headers=tenant.headers())).status_code == 404
    assert (await tenant.retrieve("bot", QUESTION)).status_code == 404
    assert (
        await gateway.client.get("/v1/knowledge-bases/docs", headers=tenant.headers())
    ).status_code == 200
    missing = [
        await gateway.client.delete(f"/v1/agents/{agent_id}", headers=tenant.headers())
        for agent_id in ("bot", "nope", "theirs")
    ]
    assert {(r.status_code, r.text) for r in missing} == {(404, missing[0].text)}
    assert (
        await gateway.client.get("/v1/agents/theirs", headers=neighbour.headers())
    ).status_code == 200


async def test_deleted_workspaces_keys_fail_at_once_even_when_cached(gateway: Gateway) -> None:
    """A key used just before its workspace is deleted (so its credential is cached)
    answers 401 on the very next request."""
    tenant = await provision(gateway, "acme", "t1")
    assert (
        await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    ).status_code == 200
    deleted = await gateway.client.delete("/v1/orgs/acme/workspaces/t1", headers=gateway.platform)
    assert deleted.status_code == 200
    assert (
        await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    ).status_code == 401
