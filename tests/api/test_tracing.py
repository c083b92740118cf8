"""OpenTelemetry traces (the SDK's in-memory exporter, the real app, model and engines):
a request continues the caller's W3C trace context; a turn has a span per stage and per
KB search, an ingest its stage's span; no span carries a question, passage, title, id or
key. Without an OTLP endpoint, tracing is off."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.http.app import create_app
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from gateway.tracing import Tracing, build_tracing
from ingest.embedder.embedding import Embedder
from settings.config import load_config
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import provision
from tests.support.redactor import shared_redactor

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
QUESTION = "Which lamp guides ships past the northern reef?"
TEXT = "The northern lamp guides ships past the reef. Keeper Jane Doe lights it at dusk."
TITLE = "Northern lamp"
STAGES = ("plan", "embed", "search", "fuse", "fetch", "redact", "record")


@pytest.fixture
async def traced(tmp_path: Path, embedder: Embedder) -> AsyncIterator[tuple[Gateway, Any]]:
    """A gateway whose telemetry exports spans to memory, one by one."""
    exporter = InMemorySpanExporter()
    config = gateway_config(tmp_path / "data")
    logs = io.StringIO()
    telemetry = Telemetry(build_logger("DEBUG", logs), Tracing.to(exporter, batched=False))
    services = await build_services(
        config, telemetry, embedder=embedder, redactor=shared_redactor()
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config), exporter
    finally:
        await services.close()
        telemetry.tracing.close()


async def test_a_turn_is_traced_per_stage_within_the_caller_s_trace(
    traced: tuple[Gateway, Any],
) -> None:
    """With a `traceparent`, the retrieve request's server span continues the caller's
    trace; under it a `turn` span holds one span per stage (plan, embed, search, fuse,
    fetch, redact, record) and a `turn.search.kb` span per engine call; a document write
    has its `ingest_document` span over `ingest.plan`, `ingest.embed` and `ingest.write`.
    Every attribute is a count, a timing or a name from the code: no question, passage
    text, title, key or id."""
    gateway, exporter = traced
    tenant = await provision(gateway, "acme", "ws")
    await tenant.kb("kb")
    await tenant.agent("bot", ["kb"])
    await tenant.doc("kb", "lamp-doc", TEXT, title=TITLE)
    answer = await gateway.client.post(
        "/v1/retrieve",
        json={"agent_id": "bot", "question": QUESTION},
        headers={**tenant.headers(), "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["passages"]
    spans = cast(list[ReadableSpan], exporter.get_finished_spans())

    server = _one(spans, "POST /v1/retrieve")
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None
    assert format(server.parent.span_id, "016x") == CALLER_SPAN
    assert server.attributes is not None
    assert server.attributes["http.route"] == "/v1/retrieve"
    assert server.attributes["http.response.status_code"] == 200
    turn = _one(spans, "turn")
    assert turn.parent is not None
    assert turn.parent.span_id == server.context.span_id
    for stage in STAGES:
        span = _one(spans, f"turn.{stage}")
        assert span.parent is not None
        assert span.parent.span_id == turn.context.span_id, stage
        assert span.start_time is not None
        assert span.end_time is not None
        assert turn.start_time is not None
        assert turn.end_time is not None
        assert turn.start_time <= span.start_time <= span.end_time <= turn.end_time, stage
    searches = [span for span in spans if span.name == "turn.search.kb"]
    assert searches
    assert all(span.context.trace_id == server.context.trace_id for span in searches)
    assert all(span.parent and span.parent.span_id == turn.context.span_id for span in searches)
    ingest = _one(spans, "ingest_document")
    for stage in ("ingest.plan", "ingest.embed", "ingest.write"):
        span = _one(spans, stage)
        assert span.parent is not None
        assert span.parent.span_id == ingest.context.span_id, stage
    assert _one(spans, "ingest.embed").attributes == {"documents": 1, "passages": 1}

    secrets = [QUESTION, TEXT, TITLE, "lamp-doc", "acme", tenant.keys["all"], "Jane"]
    for span in spans:
        shown = repr(dict(span.attributes or {})) + span.name + repr(span.events)
        for secret in secrets:
            assert secret not in shown, (span.name, secret)


def test_tracing_is_off_without_an_endpoint() -> None:
    """No KBGATE_OTLP_ENDPOINT: tracing is off (every span a no-op); with one, it is on."""
    off = build_tracing(load_config({}))
    assert not off.enabled
    with off.span("turn") as nothing:
        assert nothing is None
    on = build_tracing(load_config({"KBGATE_OTLP_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}))
    assert on.enabled
    on.close()


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]
