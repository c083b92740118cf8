"""Workspace export and import over HTTP, between two deployments (each its own data dir,
store and index): Qdrant Edge with SQLite, and qdrant-client local mode with a real Redis
(one database each)."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from ingest.embedder.embedding import Embedder
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Passage
from ingest.sync import Target
from settings.golden import GoldenQuestion, GoldenSet
from tests.api.conftest import Gateway, flush_redis, serving
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

QUESTION = "Which beacon guides ships past the reef?"
CANARY = "zephyr-canary-4411"
DOCS = {
    "org-kb": [
        ("lighthouse", "The lighthouse beacon guides ships past the reef at night.", "internal"),
        ("keeper", f"The keeper's ledger {CANARY} records each storm.", "restricted"),
    ],
    "shared-kb": [("tides", "Tide tables tell pilots when ships may cross the bar.", "public")],
}


@pytest.fixture(params=["edge+sqlite", "local+redis"])
async def deployments(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[tuple[Gateway, Gateway]]:
    """Two deployments: the one a customer leaves and the one it moves to."""
    async with AsyncExitStack() as stack:
        pair = []
        for number in (0, 1):
            overrides: dict[str, object] = {}
            engine = "edge"
            if request.param == "local+redis":
                engine = "local"
                base: str = request.getfixturevalue("redis_url")
                overrides["redis_url"] = base.rsplit("/", 1)[0] + f"/{number}"
                await flush_redis(cast(str, overrides["redis_url"]))
            gw = await stack.enter_async_context(
                serving(tmp_path / f"d{number}", embedder, engine, **overrides)
            )
            pair.append(gw)
        yield pair[0], pair[1]


async def _stocked(gw: Gateway, org_id: str, tenant_id: str) -> Tenant:
    tenant = await provision(gw, org_id, tenant_id)
    await tenant.kb("org-kb", top_k=4, name="Harbour")
    await tenant.kb("shared-kb", storage="shared")
    for kb_id, docs in DOCS.items():
        for doc_id, text, label in docs:
            await tenant.doc(kb_id, doc_id, text, classification=label, title=doc_id.title())
    await tenant.agent("bot", ["org-kb", "shared-kb"], top_k=3)
    await tenant.settings(max_knowledge_bases_per_agent=5, turn_retention_s=600)
    await gw.services.store.put_golden_set(
        GoldenSet(
            tenant_id=tenant_id,
            kb_id="org-kb",
            questions=[GoldenQuestion(question=QUESTION, document_ids=["lighthouse"])],
            off_topic=["What is the price of tea?"],
        )
    )
    return tenant


async def _export(gw: Gateway, path: str, headers: dict[str, str]) -> httpx.Response:
    return await gw.client.get(path, headers=headers)


async def _import(gw: Gateway, org_id: str, tenant_id: str, archive: bytes) -> httpx.Response:
    return await gw.client.post(
        f"/v1/orgs/{org_id}/workspaces/{tenant_id}/import",
        content=archive,
        headers={**gw.platform, "Content-Type": "application/gzip"},
    )


async def _knowledge(tenant: Tenant) -> dict[str, Any]:
    """What a workspace holds, as its admin sees it, and a turn's results."""
    client, headers = tenant.gw.client, tenant.headers()
    seen: dict[str, Any] = {}
    for kb_id in DOCS:
        kb = (await client.get(f"/v1/knowledge-bases/{kb_id}", headers=headers)).json()
        # the collection is the org's own (`kb_org_<org id>`), or kb_shared for both
        kb["collection"] = kb["collection"].replace(tenant.org_id, "<org>")
        stats = (await client.get(f"/v1/knowledge-bases/{kb_id}/stats", headers=headers)).json()
        listed = await client.get(f"/v1/knowledge-bases/{kb_id}/documents", headers=headers)
        seen[kb_id] = {"kb": kb, "stats": stats, "documents": listed.json()}
    seen["agent"] = (await client.get("/v1/agents/bot", headers=headers)).json()
    settings = (await client.get("/v1/workspace/settings", headers=headers)).json()
    seen["settings"] = {name: settings[name] for name in ("settings", "effective", "created_at")}
    turn = (await tenant.retrieve("bot", QUESTION)).json()
    # sorted: equal scores are ordered by point id, which the import derives anew
    seen["turn"] = sorted(
        (p["document_id"], p["knowledge_base_id"], p["title"], p["text"], round(p["score"], 5))
        for p in turn["passages"]
    )
    return seen


async def _points(gw: Gateway, tenant: Tenant, kb_id: str, storage: str) -> list[Passage]:
    target = Target(tenant.org_id, tenant.tenant_id, kb_id, storage)
    index = gw.services.index
    page, offset = await index.passages_page(target.collection, target.write_scope(), None, 100)
    assert offset is None
    return sorted(page, key=lambda p: (p.payload.document_id, p.payload.passage_index))


async def test_a_workspace_exported_from_one_deployment_is_imported_into_another(
    deployments: tuple[Gateway, Gateway],
) -> None:
    """The archive (gzip, served as a download) holds the workspace's KBs, agent, settings,
    golden set and every passage with its vectors; importing it under another org and
    tenant id answers the counts, and the new workspace shows the same KBs, documents,
    stats, agent, settings and golden set, stores the same vectors (nothing re-embedded)
    and answers a turn with the same documents, texts and scores."""
    source, target = deployments
    alpha = await _stocked(source, "acme", "alpha")

    exported = await _export(source, "/v1/orgs/acme/workspaces/alpha/export", source.platform)

    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"] == "application/gzip"
    assert "alpha.kbgate.ndjson.gz" in exported.headers["content-disposition"]
    await target.client.post("/v1/orgs", json={"org_id": "beta"}, headers=target.platform)
    imported = await _import(target, "beta", "alpha2", exported.content)
    assert imported.status_code == 201, imported.text
    passages = sum([len(await _points(source, alpha, kb, s)) for kb, s in _STORAGE.items()])
    assert imported.json() == {
        "tenant_id": "alpha2",
        "org_id": "beta",
        "imported": {
            "knowledge_bases": 2,
            "agents": 1,
            "golden_sets": 1,
            "passages": passages,
            # an unsigned archive: every passage analysed for PII again at import
            "pii_analysed": passages,
        },
        "signature": "unsigned",
    }
    moved = Tenant(target, "beta", "alpha2")
    await moved.issue("all", ["admin", "ingest", "retrieve"], "restricted")

    assert await _knowledge(moved) == await _knowledge(alpha)
    for kb_id, storage in _STORAGE.items():
        before = await _points(source, alpha, kb_id, storage)
        after = await _points(target, moved, kb_id, storage)
        assert [p.dense for p in after] == [p.dense for p in before]
        assert [_sparse(p) for p in after] == [_sparse(p, approx=True) for p in before]
        assert {(p.payload.tenant_id, p.payload.org_id) for p in after} == {("alpha2", "beta")}
    golden = await target.services.store.get_golden_set("alpha2", "org-kb")
    assert golden is not None
    assert golden.questions[0].document_ids == ["lighthouse"]
    assert CANARY not in source.logs.getvalue() + target.logs.getvalue()


_STORAGE = {"org-kb": "org", "shared-kb": "shared"}


def _sparse(passage: Passage, *, approx: bool = False) -> list[Any]:
    """A passage's BM25 vectors; with `approx`, weights to float32 precision (what a Qdrant
    server keeps; qdrant-client's local mode keeps float64)."""
    return [
        None
        if vector is None
        else (vector.indices, pytest.approx(vector.values, rel=1e-6) if approx else vector.values)
        for vector in (passage.sparse, passage.document_sparse)
    ]


async def test_who_may_export(deployments: tuple[Gateway, Gateway]) -> None:
    """The workspace's own admin key may export it; another workspace's admin, a wrong
    org and an unknown workspace all answer the same 404; ingest and retrieve keys 403;
    no key 401; a workspace being deleted 404."""
    gw, _ = deployments
    alpha = await _stocked(gw, "acme", "alpha")
    other = await provision(gw, "acme", "other")
    ingest = await alpha.issue("ingest", ["ingest"])
    reader = await alpha.issue("reader", ["retrieve"], "restricted")
    path = "/v1/orgs/acme/workspaces/alpha/export"

    own = await _export(gw, path, alpha.headers())
    assert own.status_code == 200
    assert gzip.decompress(own.content).startswith(b'{"kind":"manifest"')
    missing = [
        await _export(gw, path, other.headers()),
        await _export(gw, "/v1/orgs/globex/workspaces/alpha/export", alpha.headers()),
        await _export(gw, "/v1/orgs/acme/workspaces/nope/export", gw.platform),
    ]
    assert {r.status_code for r in missing} == {404}
    assert len({r.json()["detail"] for r in missing}) == 1
    for key in (ingest, reader):
        denied = await _export(gw, path, {"Authorization": f"Bearer {key}"})
        assert denied.status_code == 403
    assert (await _export(gw, path, {})).status_code == 401
    await gw.services.store.mark_workspace_deleting("alpha")
    assert (await _export(gw, path, gw.platform)).status_code == 404


def _edited(archive: bytes, edit: Any) -> bytes:
    lines = [json.loads(line) for line in gzip.decompress(archive).splitlines()]
    return gzip.compress(b"".join(json.dumps(x).encode() + b"\n" for x in edit(lines)))


async def test_an_archive_that_cannot_be_imported_as_it_is_changes_nothing(
    deployments: tuple[Gateway, Gateway],
) -> None:
    """Refused before anything is written: vectors of another embedding model (409,
    `embedding_model`), a truncated or garbled archive, a passage of a KB the archive does
    not hold, an edited count (422, `archive`); a taken tenant id (409), an unknown org
    (404), a workspace key (403). The tenant id stays free throughout."""
    source, target = deployments
    await _stocked(source, "acme", "alpha")
    path = "/v1/orgs/acme/workspaces/alpha/export"
    archive = (await _export(source, path, source.platform)).content
    await target.client.post("/v1/orgs", json={"org_id": "beta"}, headers=target.platform)
    taken = await provision(target, "beta", "taken")

    def other_model(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**lines[0], "embedding_model": "BAAI/bge-small-en-v1.5"}, *lines[1:]]

    def stray_passage(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**x, "kb_id": "ghost"} if x["kind"] == "passage" else x for x in lines]

    def miscounted(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for x in lines if x["kind"] != "agent"]

    refusals = [
        (_edited(archive, other_model), 409, "embedding_model"),
        (archive[: len(archive) // 2], 422, "archive"),
        (b"not an archive at all", 422, "archive"),
        (_edited(archive, stray_passage), 422, "archive"),
        (_edited(archive, miscounted), 422, "archive"),
    ]
    for body, status, field in refusals:
        response = await _import(target, "beta", "alpha", body)
        assert (response.status_code, response.json().get("field")) == (status, field), (
            response.text
        )
    assert (await _import(target, "beta", "taken", archive)).status_code == 409
    assert (await _import(target, "nope", "alpha", archive)).status_code == 404
    refused = await target.client.post(
        "/v1/orgs/beta/workspaces/alpha/import", content=archive, headers=taken.headers()
    )
    assert refused.status_code == 403
    created = await target.client.post(
        "/v1/orgs/beta/workspaces", json={"tenant_id": "alpha"}, headers=target.platform
    )
    assert created.status_code == 201


async def test_an_import_that_fails_half_way_leaves_no_workspace_behind(gateway: Gateway) -> None:
    """An import whose passages cannot be written (the index's disk at its reserve, after
    the workspace, its KBs and agents were created) answers 503 and deletes what it made:
    the same import, once there is room, succeeds with everything in it."""
    source = await _stocked(gateway, "acme", "alpha")
    archive = (
        await _export(gateway, "/v1/orgs/acme/workspaces/alpha/export", gateway.platform)
    ).content
    index = gateway.services.index
    assert isinstance(index, EdgeIndex)  # the embedded adapter's disk
    disk = index.engine.disk
    kept = disk.reserve_bytes
    disk.reserve_bytes = disk.free_bytes() + 1024 * 1024 * 1024
    failed = await _import(gateway, "acme", "gamma", archive)
    assert failed.status_code == 503, failed.text
    assert failed.json()["dependency"] == "index"
    assert await gateway.services.store.get_workspace("gamma") is None
    assert await gateway.services.store.list_knowledge_bases("gamma") == []
    disk.reserve_bytes = kept
    again = await _import(gateway, "acme", "gamma", archive)
    assert again.status_code == 201, again.text
    assert again.json()["imported"]["passages"] == sum(len(docs) for docs in DOCS.values())
    assert (await source.retrieve("bot", QUESTION)).status_code == 200
