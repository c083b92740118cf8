"""The grounding post-check over HTTP, on Qdrant Edge and qdrant-client local mode."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from grounding.check import Reason, Status, Target, check
from ingest.embedder.embedding import Embedder
from ingest.engines.blocking import BlockingIndex
from ingest.index import Leg, QueryResult, org_collection
from ingest.payload import Scope
from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision
from tests.support.fake_embedder import FailingEmbedder

pytestmark = pytest.mark.anyio

TEA = "Green tea contains catechins and a moderate amount of caffeine."
TEA_MORE = (
    "A cup of green tea holds about thirty milligrams of caffeine and many catechins.",
    "Catechins are antioxidants found in green tea, alongside a little caffeine.",
)
VOLCANO = "Volcanic eruptions release lava, ash and sulfur dioxide into the atmosphere."
CATS = "Domestic cats purr when they are content and often hunt mice at night."


async def _check(tenant: Tenant, answer: str, agent: str = "bot", **extra: Any) -> dict[str, Any]:
    response = await tenant.gw.client.post(
        "/v1/grounding/check",
        json={"agent_id": agent, "answer": answer, **extra},
        headers=tenant.headers(),
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _tenant(gw: Gateway, org: str = "acme", name: str = "ws") -> Tenant:
    tenant = await provision(gw, org, name)
    await tenant.kb("kb")
    corpus = (("tea", TEA), ("tea2", TEA_MORE[0]), ("tea3", TEA_MORE[1]))
    for doc_id, text in (*corpus, ("volcano", VOLCANO), ("cats", CATS)):
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    return tenant


async def test_supported_answer_finds_what_the_indexer_wrote(engine_gateway: Gateway) -> None:
    """The check finds the indexer's passages (matches > 0)
    and supports an answer restating one; were filter and payload keys to drift, matches
    would be 0 and this fails."""
    tenant = await _tenant(engine_gateway)
    body = await _check(tenant, "Green tea has catechins and some caffeine.")
    assert body["matches"] == 3
    assert body["status"] == "supported"
    assert body["score"] >= body["floor"] == 0.7


async def test_unsupported_answer_is_flagged(engine_gateway: Gateway) -> None:
    """An answer about something the KB never mentions is flagged, with its low score."""
    tenant = await _tenant(engine_gateway)
    body = await _check(tenant, "The Treaty of Westphalia ended the Thirty Years' War in 1648.")
    assert body["status"] == "flagged"
    assert body["matches"] == 3
    assert body["score"] < 0.7


async def test_fewer_than_three_matches_are_averaged(engine_gateway: Gateway) -> None:
    """With only two passages in scope, the average is over two and matches says so."""
    tenant = await provision(engine_gateway, "acme", "small")
    await tenant.kb("kb")
    await tenant.doc("kb", "tea", TEA)
    await tenant.doc("kb", "cats", CATS)
    await tenant.agent("bot", ["kb"])
    body = await _check(tenant, "Green tea contains caffeine.")
    assert body["matches"] == 2


async def test_no_knowledge_base_is_skipped(engine_gateway: Gateway) -> None:
    """An agent with no KB: skipped with reason no_knowledge_base, never an error."""
    tenant = await provision(engine_gateway, "acme", "ws")
    await tenant.agent("empty", [])
    body = await _check(tenant, "anything", agent="empty")
    assert (body["status"], body["reason"]) == ("skipped", "no_knowledge_base")


async def test_empty_knowledge_base_is_skipped_no_matches(engine_gateway: Gateway) -> None:
    """KBs attached but nothing in them: skipped with reason no_matches."""
    tenant = await provision(engine_gateway, "acme", "ws")
    await tenant.kb("kb")
    await tenant.agent("bot", ["kb"])
    body = await _check(tenant, "Green tea contains caffeine.")
    assert (body["status"], body["reason"], body["matches"]) == ("skipped", "no_matches", 0)


async def test_embedding_failure_is_skipped_not_5xx(gateway: Gateway) -> None:
    """With the embedder failing, the check answers 200 skipped/embedding_failed."""
    tenant = await _tenant(gateway)
    wired = gateway.services.grounding
    gateway.services.grounding = dataclasses.replace(wired, embedder=FailingEmbedder())
    try:
        body = await _check(tenant, "Green tea contains caffeine.")
    finally:
        gateway.services.grounding = wired
    assert (body["status"], body["reason"]) == ("skipped", "embedding_failed")


class RecordingIndex:
    """Delegates to a real index and records every query (to prove none happened)."""

    def __init__(self, inner: BlockingIndex) -> None:
        self.inner = inner
        self.queries = 0

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        self.queries += 1
        return self.inner.query(collection, scope, legs)


async def test_a_call_without_scope_never_searches(gateway: Gateway, embedder: Embedder) -> None:
    """An internal call with a target lacking a Scope is skipped (no_scope) and searches nothing."""
    await _tenant(gateway)
    recording = RecordingIndex(gateway.services.documents.writer.index)
    unscoped = [Target(collection=org_collection("acme"), scope=None, floor=0.7)]
    for targets in (unscoped, None):
        result = check(
            TEA,
            targets,
            recording,  # type: ignore[arg-type]  # only `query` is needed, and recorded
            embedder,
            default_floor=0.7,
        )
        assert (result.status, result.reason) == (Status.SKIPPED, Reason.NO_SCOPE)
    assert recording.queries == 0


async def test_another_workspaces_text_is_never_supported(engine_gateway: Gateway) -> None:
    """An answer copied verbatim from another workspace's document is flagged or skipped."""
    alpha = await provision(engine_gateway, "acme", "alpha")
    await alpha.kb("kb")
    await alpha.doc("kb", "cats", CATS)
    await alpha.agent("bot", ["kb"])
    beta = await provision(engine_gateway, "globex", "beta")
    await beta.kb("kb")
    beta_secret = "Project Nightjar ships the quantum ledger to Zurich on the third of March."
    await beta.doc("kb", "secret", beta_secret)
    await beta.agent("bot", ["kb"])
    body = await _check(alpha, beta_secret)
    assert body["status"] in {"flagged", "skipped"}
    assert body["status"] != "supported"


async def test_sentence_mode_lists_the_unsupported_sentence(engine_gateway: Gateway) -> None:
    """In sentence mode a fabricated sentence beside a supported one is flagged and named."""
    tenant = await _tenant(engine_gateway)
    body = await _check(
        tenant,
        "Green tea contains catechins and caffeine. The Eiffel Tower was moved to Berlin in 1990.",
        mode="sentences",
    )
    assert body["status"] == "flagged"
    statuses = [(s["index"], s["status"]) for s in body["sentences"]]
    assert statuses == [(0, "supported"), (1, "flagged")]


async def test_unknown_agent_is_404_and_empty_answer_422(gateway: Gateway) -> None:
    """Another workspace's or an unknown agent is 404; an empty answer is 422."""
    tenant = await _tenant(gateway)
    other = await provision(gateway, "globex", "other")
    response = await gateway.client.post(
        "/v1/grounding/check", json={"agent_id": "bot", "answer": "x"}, headers=other.headers()
    )
    assert response.status_code == 404
    empty = await gateway.client.post(
        "/v1/grounding/check", json={"agent_id": "bot", "answer": " "}, headers=tenant.headers()
    )
    assert empty.status_code == 422
