"""One workspace's expensive requests cannot stall the others, and abandoned work stops."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from gateway.access.expensive import ExpensiveWork
from gateway.errors import RateLimitedError
from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, start_gateway
from tests.api.tenants import Tenant, tea_workspace

pytestmark = pytest.mark.anyio

#: The audit's flood: about 20,000 characters in 2,800 short sentences.
AUDIT_ANSWER = "Tea ok. " * 2480
#: Within the default budget (200 sentences, 20,000 characters): about 18,000 characters.
BUDGET_ANSWER = " ".join(
    f"Green tea number {n} holds some caffeine and catechins." for n in range(200)
)


#: 2,000 sentences, for a gateway whose budget allows them (about 32,000 characters).
LONG_ANSWER = " ".join(f"Tea {n} is fine." for n in range(2000))


async def _gateway(tmp_path: Path, embedder: Embedder, **overrides: Any) -> AsyncIterator[Gateway]:
    services, logs, config = await start_gateway(tmp_path, embedder, **overrides)
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


@pytest.fixture
async def flood_gateway(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway whose workspaces may each run eight expensive requests at once, of up to
    2,000 sentences each."""
    async for gateway in _gateway(
        tmp_path,
        embedder,
        expensive_per_workspace=8,
        grounding_max_sentences=2000,
        grounding_max_chars=40_000,
    ):
        yield gateway


def _grounding(tenant: Tenant, answer: str) -> Any:
    return tenant.gw.client.post(
        "/v1/grounding/check",
        json={"agent_id": "bot", "answer": answer, "mode": "sentences"},
        headers=tenant.headers(),
    )


async def _settings_read_s(tenant: Tenant) -> float:
    started = time.perf_counter()
    response = await tenant.gw.client.get("/v1/workspace/settings", headers=tenant.headers())
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


async def test_an_answer_beyond_the_sentence_budget_is_422(gateway: Gateway) -> None:
    """The audit's 2,800-sentence answer (within the character budget) answers 422 naming
    `answer`, at once; in whole mode the same text is one unit and is checked."""
    tenant = await tea_workspace(gateway, "alpha")
    started = time.perf_counter()
    response = await _grounding(tenant, AUDIT_ANSWER)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "answer"
    assert "200 sentences" in response.json()["detail"]
    assert time.perf_counter() - started < 2.0
    whole = await tenant.gw.client.post(
        "/v1/grounding/check",
        json={"agent_id": "bot", "answer": AUDIT_ANSWER},
        headers=tenant.headers(),
    )
    assert whole.status_code == 200, whole.text


async def test_the_audit_flood_does_not_stall_another_workspace(gateway: Gateway) -> None:
    """Eight concurrent 20,000-character sentence-mode checks from one workspace leave
    another workspace's settings read under a second."""
    alpha, beta = await tea_workspace(gateway, "alpha"), await tea_workspace(gateway, "beta")
    flood = [asyncio.ensure_future(_grounding(alpha, AUDIT_ANSWER)) for _ in range(8)]
    await asyncio.sleep(0.05)
    assert await _settings_read_s(beta) < 1.0
    statuses = {response.status_code for response in await asyncio.gather(*flood)}
    assert statuses <= {422, 429}


@pytest.mark.ci
async def test_settings_reads_do_not_queue_behind_expensive_work(
    flood_gateway: Gateway,
) -> None:
    """While eight 2,000-sentence checks of one workspace hold and queue on the expensive
    pool, another workspace's settings reads (SQLite, on the shared pool) stay under a
    second each."""
    alpha, beta = (
        await tea_workspace(flood_gateway, "alpha"),
        await tea_workspace(flood_gateway, "beta"),
    )
    flood = asyncio.gather(*(_grounding(alpha, LONG_ANSWER) for _ in range(8)))
    reads: list[float] = []
    while not flood.done() or len(reads) < 5:
        reads.append(await _settings_read_s(beta))
        await asyncio.sleep(0.05)
    responses = await flood
    assert all(response.status_code == 200 for response in responses)
    assert max(reads) < 1.0, reads


async def test_a_workspace_over_its_limit_is_refused_and_others_go_on() -> None:
    """Past its limit a workspace's expensive work is refused at once (RateLimitedError:
    429 with Retry-After at the edge) while another workspace's is still accepted; the
    slot comes back when the work is done."""
    work = ExpensiveWork(threads=2, per_workspace=2)
    release = threading.Event()
    try:
        held = [
            asyncio.ensure_future(work.run("alpha", lambda _: release.wait(5))) for _ in range(2)
        ]
        await asyncio.sleep(0.05)
        with pytest.raises(RateLimitedError) as refused:
            await work.run("alpha", lambda _: True)
        assert refused.value.retry_after_s >= 1
        other = asyncio.ensure_future(work.run("beta", lambda _: "done"))
        release.set()
        assert await other == "done"
        assert await asyncio.gather(*held) == [True, True]
        await asyncio.sleep(0.05)
        assert work.held("alpha") == 0
        assert await work.run("alpha", lambda _: "again") == "again"
    finally:
        release.set()
        work.close()


async def test_a_check_whose_caller_timed_out_stops(tmp_path: Path, embedder: Embedder) -> None:
    """A sentence-mode check past its timeout answers `skipped`, and its thread stops
    between sentences soon after (its workspace's slot is free again within a second),
    rather than working through the rest of its 2,000 sentences."""
    async for gateway in _gateway(
        tmp_path,
        embedder,
        embed_timeout_s=0.2,
        qdrant_timeout_s=0.1,
        grounding_max_sentences=2000,
        grounding_max_chars=40_000,
    ):
        tenant = await tea_workspace(gateway, "alpha")
        answer = "Tea is fine. " * 2000
        response = await _grounding(tenant, answer)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "skipped"
        gave_up = time.perf_counter()
        while gateway.services.expensive.held("alpha") and time.perf_counter() - gave_up < 1.0:  # noqa: ASYNC110 — polls a count no event signals
            await asyncio.sleep(0.01)
        assert gateway.services.expensive.held("alpha") == 0
