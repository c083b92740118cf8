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
#: B's calls per phase (each of grounding, redact, PUT and retrieve).
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
    """B's grounding check, redaction, single-document PUT and retrieve, each timed
    (seconds)."""
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
        "retrieve": lambda: client.post(
            "/v1/retrieve",
            json={"agent_id": "bot", "question": f"How long does green tea steep ({n})?"},
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


async def _flooded(alpha: Tenant, beta: Tenant, endpoint: str, offset: int) -> dict[str, Any]:
    """B's phase while A's eight callers loop `endpoint`; B's timings and A's 200s."""
    stop = asyncio.Event()
    call = _flood_call(alpha, endpoint)
    callers = [asyncio.ensure_future(_flood(call, stop)) for _ in range(8)]
    try:
        await asyncio.sleep(0.5)
        flooded = await _b_phase(beta, offset)
    finally:
        stop.set()
        statuses = [status for run in await asyncio.gather(*callers) for status in run]
    return {"times": flooded, "a_ok": statuses.count(200)}


#: How far B's flooded median may stray from its idle median in this test: RATIO x idle
#: plus SLACK (the PUT: PUT_SLACK, a durable write's flush waits on a shared disk). The
#: targets (2x, retrieve 1.5x, max 1 s) are measured by `bench.fairness` in a process of
#: its own; here B's client shares the gateway's process and GIL, and the test must hold on
#: a 2-core machine loaded several times over. Without fair shares B's calls wait for A's
#: (the audit: 34 s, 3.5 s and 55 s; a first-come pool, medians of seconds), far past these.
RATIO = 3.0
SLACK_S = 0.1
PUT_SLACK_S = 0.5
MAX_S = 2.0


@pytest.mark.ci
async def test_a_flood_of_each_expensive_endpoint_leaves_the_others_near_idle(
    concurrent_gateway: Gateway,
) -> None:
    """While workspace A floods /v1/redact with big lists, sentence-mode grounding checks
    at the budget and bulk writes (eight callers each, in turn), workspace B's grounding
    check, redaction, document PUT and retrieve keep a median within RATIO x their idle
    median (the mean of the idle phases just before and after the flood, so a drift of
    the machine's load affects both alike) plus SLACK_S, and a maximum under MAX_S; A's
    own work goes on (it gets answers, not only 429s)."""
    gateway = concurrent_gateway
    alpha, beta = await tea_workspace(gateway, "alpha"), await tea_workspace(gateway, "beta")
    await _b_phase(beta, 1000)  # warm-up
    idle = [await _b_phase(beta, 0)]
    report: dict[str, dict[str, Any]] = {}
    for phase, endpoint in enumerate(("redact", "grounding", "bulk"), start=1):
        flooded = await _flooded(alpha, beta, endpoint, 100 * phase)
        idle.append(await _b_phase(beta, 100 * phase + 50))
        before, after = idle[-2], idle[-1]
        report[endpoint] = {"a_ok": flooded["a_ok"]}
        for name, times in flooded["times"].items():
            quiet = (statistics.median(before[name]) + statistics.median(after[name])) / 2
            report[endpoint][name] = (
                round(quiet, 3),
                round(statistics.median(times), 3),
                round(max(times), 3),
            )
    for endpoint, figures in report.items():
        assert figures["a_ok"] > 0, report
        for name, (quiet, median, worst) in ((k, v) for k, v in figures.items() if k != "a_ok"):
            slack = PUT_SLACK_S if name == "put" else SLACK_S
            assert median <= RATIO * quiet + slack, (endpoint, name, report)
            assert worst <= MAX_S, (endpoint, name, report)


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


async def test_a_long_text_to_redact_holds_no_run_slot_for_long(
    concurrent_gateway: Gateway,
) -> None:
    """Issue 57: a single string of 100,000 characters (the most /v1/redact takes) was one
    unit of analysis, seconds on a thread. It is read in slices now: while two of them of
    workspace A hold both run slots, workspace B's redaction waits at most a slice (under
    a second, where it waited for one of A's to end); and once A's callers leave, its work
    stops within a slice."""
    gateway = concurrent_gateway
    alpha, beta = await tea_workspace(gateway, "alpha"), await tea_workspace(gateway, "beta")
    record = "Call Jane Doe at +44 20 7946 0958 or jane.doe@example.com today. "
    filler = "The pump seals were checked and the bearings were replaced. "
    text = ((filler * 3 + record) * 500)[:100_000]
    long_calls = [
        asyncio.ensure_future(
            alpha.gw.client.post(
                "/v1/redact", json={"agent_id": "bot", "text": text}, headers=alpha.headers()
            )
        )
        for _ in range(2)
    ]
    try:
        await asyncio.sleep(0.5)
        assert gateway.services.expensive.held("alpha") == 2
        started = time.perf_counter()
        response = await beta.gw.client.post(
            "/v1/redact",
            json={"agent_id": "bot", "text": "Call Jane Doe at jane@example.com."},
            headers=beta.headers(),
        )
        waited = time.perf_counter() - started
        assert response.status_code == 200, response.text
        assert "Jane Doe" not in response.json()["text"]
        assert not any(call.done() for call in long_calls)
        assert waited < 1.0
    finally:
        for call in long_calls:
            call.cancel()
        await asyncio.gather(*long_calls, return_exceptions=True)
    left = time.perf_counter()
    while gateway.services.expensive.held("alpha") and time.perf_counter() - left < 2.0:  # noqa: ASYNC110 — polls a count no event signals
        await asyncio.sleep(0.02)
    assert gateway.services.expensive.held("alpha") == 0
