"""Fair shares of expensive work: one workspace flooding an expensive endpoint (eight
callers at once) leaves another workspace's grounding check, redaction and document PUT
near their idle times; and the work one call may ask for is bounded (4xx at once)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.safety.egress import MAX_EGRESS_STRINGS
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, serving
from tests.api.tenants import TEA, Tenant, tea_workspace

pytestmark = pytest.mark.anyio

#: The heaviest check the default budget allows: 200 sentences, about 18,000 characters.
BUDGET_ANSWER = " ".join(
    f"Green tea number {n} holds some caffeine and catechins." for n in range(200)
)
#: A big JSON value within the bounds: distinct short strings, each analysed.
BIG_VALUE = [f"note {n} for Jane Doe" for n in range(MAX_EGRESS_STRINGS)]
#: A bulk write of 32 documents of 30 sentences each.
BULK_BODY = b"".join(
    json.dumps(
        {
            "document_id": f"bulk-{n}",
            "text": " ".join(
                f"Tea log {n}-{m}: the pot was warmed and steeped." for m in range(30)
            ),
            "classification": "internal",
        }
    ).encode()
    + b"\n"
    for n in range(32)
)
#: B's calls per phase (each of grounding, redact and PUT).
ROUNDS = 6


@pytest.fixture
async def concurrent_gateway(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway whose requests run concurrently on the test's own event loop (the
    `gateway` fixture's client serves one request at a time)."""
    async with serving(tmp_path, embedder) as gw:
        yield gw


def _flood_call(alpha: Tenant, endpoint: str) -> Callable[[], Awaitable[Any]]:
    client, headers = alpha.gw.client, alpha.headers()
    if endpoint == "redact":
        return lambda: client.post(
            "/v1/redact", json={"agent_id": "bot", "value": BIG_VALUE}, headers=headers
        )
    if endpoint == "grounding":
        return lambda: client.post(
            "/v1/grounding/check",
            json={"agent_id": "bot", "answer": BUDGET_ANSWER, "mode": "sentences"},
            headers=headers,
        )
    return lambda: client.post(
        "/v1/knowledge-bases/kb/documents",
        content=BULK_BODY,
        headers={**headers, "Content-Type": "application/x-ndjson"},
    )


async def _flood(call: Callable[[], Awaitable[Any]], stop: asyncio.Event) -> list[int]:
    """One of A's callers: the call again and again until `stop`; a 429 waits a little."""
    statuses: list[int] = []
    while not stop.is_set():
        response = await call()
        statuses.append(response.status_code)
        if response.status_code == 429:
            await asyncio.sleep(0.2)
    return statuses


async def _b_round(beta: Tenant, n: int) -> dict[str, float]:
    """B's grounding check, redaction and single-document PUT, each timed (seconds)."""
    client, headers = beta.gw.client, beta.headers()
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "grounding": lambda: client.post(
            "/v1/grounding/check",
            json={"agent_id": "bot", "answer": f"Green tea has caffeine. It keeps {n} weeks."},
            headers=headers,
        ),
        "redact": lambda: client.post(
            "/v1/redact",
            json={"agent_id": "bot", "text": f"Call Jane Doe at jane{n}@example.com."},
            headers=headers,
        ),
        "put": lambda: client.put(
            f"/v1/knowledge-bases/kb/documents/note-{n}",
            json={
                "text": f"Tea note {n}: steep green tea for two minutes.",
                "classification": "internal",
            },
            headers=headers,
        ),
    }
    timings: dict[str, float] = {}
    for name, call in calls.items():
        started = time.perf_counter()
        response = await call()
        timings[name] = time.perf_counter() - started
        assert response.status_code == 200, (name, response.text)
    return timings


async def _b_phase(beta: Tenant, offset: int) -> dict[str, list[float]]:
    rounds = [await _b_round(beta, offset + n) for n in range(ROUNDS)]
    return {name: [r[name] for r in rounds] for name in rounds[0]}


async def test_a_flood_of_each_expensive_endpoint_leaves_the_others_near_idle(
    concurrent_gateway: Gateway,
) -> None:
    """While workspace A floods /v1/redact with big lists, sentence-mode grounding checks
    at the budget and bulk writes (eight callers each, in turn), workspace B's grounding
    check, redaction and document PUT keep a maximum under a second (the audit saw 34 s,
    3.5 s and 55 s), the check and redaction a median within 2x their idle median plus
    50 ms (this test's client shares the gateway's process), the PUT within 2x plus half
    a second; A's own work goes on (it gets answers, not only 429s)."""
    gateway = concurrent_gateway
    alpha, beta = await tea_workspace(gateway, "alpha"), await tea_workspace(gateway, "beta")
    await _b_phase(beta, 1000)  # warm-up
    idle = {name: statistics.median(times) for name, times in (await _b_phase(beta, 0)).items()}
    report: dict[str, dict[str, Any]] = {}
    for phase, endpoint in enumerate(("redact", "grounding", "bulk"), start=1):
        stop = asyncio.Event()
        call = _flood_call(alpha, endpoint)
        callers = [asyncio.ensure_future(_flood(call, stop)) for _ in range(8)]
        await asyncio.sleep(0.5)
        flooded = await _b_phase(beta, 100 * phase)
        stop.set()
        statuses = [status for run in await asyncio.gather(*callers) for status in run]
        report[endpoint] = {
            "a_ok": statuses.count(200),
            **{
                name: (round(statistics.median(times), 3), round(max(times), 3))
                for name, times in flooded.items()
            },
        }
    for endpoint, figures in report.items():
        assert figures["a_ok"] > 0, report
        for name, (median, worst) in ((k, v) for k, v in figures.items() if k != "a_ok"):
            assert worst <= 1.0, (endpoint, name, idle, report)
            # The PUT embeds and analyses beside A's work on two shared cores (and this
            # test's client shares the gateway's GIL): its median is held to half a second.
            slack = 0.5 if name == "put" else 0.05
            assert median <= 2 * idle[name] + slack, (endpoint, name, idle, report)


async def test_many_copies_of_one_string_are_analysed_once(gateway: Gateway) -> None:
    """The audit's value, `["a"] * N` (N up to the bound), answers in well under a second:
    each distinct string is analysed once (it took about 4 ms an element)."""
    tenant = await tea_workspace(gateway, "alpha")
    started = time.perf_counter()
    response = await tenant.gw.client.post(
        "/v1/redact",
        json={"agent_id": "bot", "value": ["a", "Jane Doe", *["a"] * (MAX_EGRESS_STRINGS - 2)]},
        headers=tenant.headers(),
    )
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    value = response.json()["value"]
    assert len(value) == MAX_EGRESS_STRINGS
    assert value[0] == "a"
    assert value[1] != "Jane Doe"
    assert elapsed < 1.0


async def test_a_value_with_more_strings_than_the_bound_is_422_at_once(gateway: Gateway) -> None:
    """60,000 one-letter strings (under the character cap) answer 422 naming `value` and the
    bound, before any analysis (the audit's call ran for over two minutes)."""
    tenant = await tea_workspace(gateway, "alpha")
    for value in (["a"] * 60_000, {"rows": [{"k": "x"}] * (MAX_EGRESS_STRINGS + 1)}):
        started = time.perf_counter()
        response = await tenant.gw.client.post(
            "/v1/redact", json={"agent_id": "bot", "value": value}, headers=tenant.headers()
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "value"
        assert f"at most {MAX_EGRESS_STRINGS} strings" in response.json()["detail"]
        assert time.perf_counter() - started < 1.0


async def test_expensive_waits_show_in_metrics_by_kind_without_workspaces(
    gateway: Gateway,
) -> None:
    """/metrics shows the expensive work's waiting times by kind and queue; no workspace
    id appears."""
    tenant = await tea_workspace(gateway, "alpha")
    await tenant.gw.client.post(
        "/v1/grounding/check", json={"agent_id": "bot", "answer": TEA}, headers=tenant.headers()
    )
    await tenant.gw.client.post(
        "/v1/redact", json={"agent_id": "bot", "value": ["Jane Doe"]}, headers=tenant.headers()
    )
    response = await gateway.client.get("/metrics", headers=gateway.platform)
    assert response.status_code == 200
    text = response.text
    for kind in ("grounding", "redact", "ingest"):
        for queue in ("own", "shared"):
            assert f'kbgate_expensive_wait_seconds_count{{kind="{kind}",queue="{queue}"}}' in text
    assert "alpha" not in text
