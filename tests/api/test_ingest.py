"""The ingest API over HTTP on both engines: KBs, document writes, held-back items, deletes,
bad input (4xx, nothing written) and an embedder outage (503, nothing written)."""

from __future__ import annotations

import pytest

from ingest.index import org_collection
from ingest.payload import Classification, Scope
from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision
from tests.support.fake_embedder import FailingEmbedder

pytestmark = pytest.mark.anyio

MANUAL = (
    "The pump room is on level two. Each pump is inspected every month by the on-call "
    "engineer. A pump that fails inspection is tagged and taken out of service."
)


async def _tenant(gw: Gateway, org: str = "acme", tenant: str = "acme-support") -> Tenant:
    workspace = await provision(gw, org, tenant)
    await workspace.kb("manuals")
    await workspace.agent("bot", ["manuals"])
    return workspace


async def _stats(tenant: Tenant, kb_id: str = "manuals") -> dict[str, int]:
    response = await tenant.gw.client.get(
        f"/v1/knowledge-bases/{kb_id}/stats", headers=tenant.headers()
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _put(tenant: Tenant, path: str, **body: object) -> tuple[int, dict[str, object]]:
    response = await tenant.gw.client.put(path, json=body, headers=tenant.headers())
    return response.status_code, dict(response.json())


async def test_knowledge_base_storage_org_by_default_or_shared(engine_gateway: Gateway) -> None:
    """PUT creates a KB (201) in the org's collection unless `storage: "shared"`; a second
    PUT replaces it (200); an unknown storage is refused with 422."""
    tenant = await provision(engine_gateway, "acme", "acme-support")
    created = await engine_gateway.client.put(
        "/v1/knowledge-bases/handbook", json={"name": "Handbook"}, headers=tenant.headers()
    )
    assert (created.status_code, created.json()["storage"]) == (201, "org")
    replaced = await engine_gateway.client.put(
        "/v1/knowledge-bases/handbook", json={"storage": "shared"}, headers=tenant.headers()
    )
    assert (replaced.status_code, replaced.json()["storage"]) == (200, "shared")
    status, body = await _put(tenant, "/v1/knowledge-bases/other", storage="cloud")
    assert status == 422
    assert body["field"] == "storage"


async def test_indexed_then_unchanged_then_changed(engine_gateway: Gateway) -> None:
    """A new document answers `indexed` with its passage count, the same content again
    `unchanged` (the stats do not move), and a changed text `indexed` again."""
    tenant = await _tenant(engine_gateway)
    first = await tenant.doc("manuals", "pumps.txt", MANUAL)
    assert first["status"] == "indexed"
    assert int(first["passages"]) >= 1
    before = await _stats(tenant)
    assert (await tenant.doc("manuals", "pumps.txt", MANUAL))["status"] == "unchanged"
    assert await _stats(tenant) == before
    changed = await tenant.doc("manuals", "pumps.txt", MANUAL + " Spare pumps are in bay 4.")
    assert changed["status"] == "indexed"
    assert (await _stats(tenant))["documents"] == 1


@pytest.mark.parametrize("label", [None, "secret", "", "unclassified"])
async def test_unlabelled_documents_are_held_back_counted_and_absent(
    engine_gateway: Gateway, label: str | None
) -> None:
    """A document without a classification, or with an unknown one, answers `held_back`
    with a reason, is counted in the KB's stats and in /metrics, and no retrieval finds it."""
    tenant = await _tenant(engine_gateway)
    body: dict[str, object] = {"text": "The canary zebra-4471 lives in the pump room."}
    if label is not None:
        body["classification"] = label
    status, answer = await _put(tenant, "/v1/knowledge-bases/manuals/documents/canary.txt", **body)
    assert status == 200, answer
    assert answer["status"] == "held_back"
    assert answer["reason"]
    stats = await _stats(tenant)
    assert (stats["held_back"], stats["documents"], stats["passages"]) == (1, 0, 0)
    metrics = (await engine_gateway.client.get("/metrics", headers=engine_gateway.platform)).text
    assert 'kbgate_events_total{event="documents_held_back"} 1.0' in metrics
    turn = await tenant.retrieve("bot", "Where does the canary zebra-4471 live?")
    assert turn.status_code == 200
    assert "zebra-4471" not in turn.text


async def test_delete_removes_the_document_from_retrieval_and_stats(
    engine_gateway: Gateway,
) -> None:
    """DELETE answers the passages removed; the document is gone from stats, listings and
    turns; deleting it again answers 404."""
    tenant = await _tenant(engine_gateway)
    await tenant.doc("manuals", "pumps.txt", MANUAL)
    path = "/v1/knowledge-bases/manuals/documents/pumps.txt"
    deleted = await engine_gateway.client.delete(path, headers=tenant.headers())
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted_passages"] >= 1
    assert (await _stats(tenant))["passages"] == 0
    listing = await engine_gateway.client.get(
        "/v1/knowledge-bases/manuals/documents", headers=tenant.headers()
    )
    assert "pumps.txt" not in listing.text
    turn = (await tenant.retrieve("bot", "How often is each pump inspected?")).json()
    assert all(p["document_id"] != "pumps.txt" for p in turn["passages"])
    again = await engine_gateway.client.delete(path, headers=tenant.headers())
    assert again.status_code == 404


async def test_bad_input_is_4xx_and_writes_nothing(gateway: Gateway) -> None:
    """Empty text, text over the size limit, an invalid document id, an unknown KB, another
    workspace's KB, invalid UTF-8 and malformed JSON: clear 4xx problem details, and the
    KB's stats are exactly as before."""
    tenant = await _tenant(gateway)
    other = await _tenant(gateway, "globex", "globex-support")
    await tenant.doc("manuals", "pumps.txt", MANUAL)
    before = await _stats(tenant)
    documents = "/v1/knowledge-bases/manuals/documents"
    limit = gateway.config.max_document_bytes
    cases: list[tuple[str, dict[str, object], int, str | None]] = [
        (f"{documents}/empty.txt", {"text": "  ", "classification": "internal"}, 422, "text"),
        (
            f"{documents}/big.txt",
            {"text": "x" * (limit + 1), "classification": "internal"},
            413,
            None,
        ),
        (f"{documents}/bad%20id", {"text": MANUAL, "classification": "internal"}, 422, None),
        (
            "/v1/knowledge-bases/nope/documents/a.txt",
            {"text": MANUAL, "classification": "internal"},
            404,
            None,
        ),
        (f"{documents}/a.txt", {"text": MANUAL, "classification": "internal", "x": 1}, 422, "x"),
        (f"{documents}/a.txt", {"text": 5, "classification": "internal"}, 422, "text"),
    ]
    for path, body, expected, field in cases:
        response = await gateway.client.put(path, json=body, headers=tenant.headers())
        assert response.status_code == expected, (path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        if field is not None:
            assert response.json()["field"] == field
    foreign = await gateway.client.put(
        f"{documents}/a.txt",
        json={"text": MANUAL, "classification": "internal"},
        headers=other.headers(),
    )
    assert foreign.status_code in {200, 404}
    if foreign.status_code == 200:  # the other workspace has its own KB of that id
        assert (await _stats(other))["documents"] == 1
    headers = {**tenant.headers(), "content-type": "application/json"}
    for raw in (b'{"text": "caf\xe9", "classification": "internal"}', b'{"text": '):
        response = await gateway.client.put(f"{documents}/raw.txt", content=raw, headers=headers)
        assert response.status_code == 400, response.text
    assert await _stats(tenant) == before


async def test_another_workspaces_knowledge_base_is_404(gateway: Gateway) -> None:
    """A KB id that exists only in another workspace answers 404 to writes and deletes, and
    that workspace's KB is untouched."""
    owner = await _tenant(gateway)
    await owner.doc("manuals", "pumps.txt", MANUAL)
    stranger = await provision(gateway, "globex", "globex-support")
    path = "/v1/knowledge-bases/manuals/documents/pumps.txt"
    body = {"text": "overwritten", "classification": "internal"}
    assert (
        await gateway.client.put(path, json=body, headers=stranger.headers())
    ).status_code == 404
    assert (await gateway.client.delete(path, headers=stranger.headers())).status_code == 404
    assert (await _stats(owner))["documents"] == 1


async def test_embedder_failure_during_ingest_is_503_and_writes_nothing(gateway: Gateway) -> None:
    """When the model fails while a changed document is indexed, the answer is 503 with
    Retry-After; the previous version stays whole and retrievable; re-sending the same
    document once the model is back indexes it."""
    tenant = await _tenant(gateway)
    await tenant.doc("manuals", "pumps.txt", MANUAL)
    before = await _stats(tenant)
    real = gateway.services.documents.writer._embedder
    gateway.services.documents.writer._embedder = FailingEmbedder()
    try:
        status, body = await _put(
            tenant,
            "/v1/knowledge-bases/manuals/documents/pumps.txt",
            text=MANUAL + " New paragraph.",
            classification="internal",
        )
    finally:
        gateway.services.documents.writer._embedder = real
    assert status == 503, body
    assert body["dependency"] == "embedder"
    assert await _stats(tenant) == before
    turn = (await tenant.retrieve("bot", "How often is each pump inspected?")).json()
    assert [p["document_id"] for p in turn["passages"]] == ["pumps.txt"]
    retried = await tenant.doc("manuals", "pumps.txt", MANUAL + " New paragraph.")
    assert retried["status"] == "indexed"


async def test_an_overlong_word_is_cut_into_bounded_passages_never_a_5xx(
    gateway: Gateway,
) -> None:
    """Issue 57 #6: an over-long word is indexed in passages of at most MAX_PASSAGE_CHARS
    characters, the PII around it analysed; never a 5xx, never one huge passage. Put again,
    it is unchanged. (A text past what the PII analyzer reads at once, a million
    characters, is `tests/integration/test_redaction.py`'s: here 40,001 keep it quick.)"""
    from ingest.chunking import MAX_PASSAGE_CHARS

    tenant = await _tenant(gateway)
    text = "Mail jane@example.com first. " + "Zq" * 20_000 + "x"
    path = "/v1/knowledge-bases/manuals/documents/huge.txt"
    status, answer = await _put(tenant, path, text=text, classification="internal")
    assert status == 200, answer
    passages = answer["passages"]
    assert isinstance(passages, int)
    assert passages >= 40_001 // MAX_PASSAGE_CHARS, answer
    scope = Scope(
        org_id="acme",
        tenant_id=tenant.tenant_id,
        kb_ids=frozenset({"manuals"}),
        clearance=Classification.RESTRICTED,
    )
    stored = await gateway.services.index.scroll_document(org_collection("acme"), scope, "huge.txt")
    assert len(stored) == passages
    assert max(len(passage.payload.text) for passage in stored) <= MAX_PASSAGE_CHARS
    assert stored[0].payload.text == "Mail jane@example.com first."
    assert all(passage.payload.pii is not None for passage in stored)
    again, answer = await _put(tenant, path, text=text, classification="internal")
    assert (again, answer["status"]) == (200, "unchanged")
