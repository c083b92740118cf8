"""Health, readiness, metrics and the OpenAPI schema."""

from __future__ import annotations

import pytest

from tests.api.conftest import Gateway

pytestmark = pytest.mark.anyio


async def test_live_and_ready(gateway: Gateway) -> None:
    """On embedded defaults every dependency is up and readiness is 200."""
    assert (await gateway.client.get("/health/live")).json() == {"status": "ok"}
    ready = await gateway.client.get("/health/ready")
    assert ready.status_code == 200
    deps = ready.json()["dependencies"]
    assert deps["index"] == {"status": "up", "engine": "qdrant-edge"}
    assert deps["store"] == {"status": "up", "engine": "sqlite"}
    assert deps["embedder"]["status"] == "up"


async def test_ready_is_503_when_the_store_is_down(gateway: Gateway) -> None:
    """A closed store makes readiness 503 naming the store, with Retry-After."""
    await gateway.services.store.close()
    ready = await gateway.client.get("/health/ready")
    assert ready.status_code == 503
    assert ready.headers["retry-after"]
    assert ready.json()["dependencies"]["store"]["status"] == "down"
    assert ready.json()["dependencies"]["index"]["status"] == "up"


async def test_metrics_are_prometheus_text(gateway: Gateway) -> None:
    """/metrics answers Prometheus text with request counts by route template."""
    await gateway.client.get("/health/live")
    response = await gateway.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert (
        'kbgate_http_requests_total{method="GET",route="/health/live",status="200"}'
        in response.text
    )


async def test_openapi_schema_is_served(gateway: Gateway) -> None:
    """Litestar serves the OpenAPI document naming the v1 paths."""
    schema = (await gateway.client.get("/schema/openapi.json")).json()
    assert "/v1/orgs" in schema["paths"]
    assert "/v1/keys" in schema["paths"]


async def test_refusals_by_the_authentication_middleware_are_counted_by_their_status(
    gateway: Gateway,
) -> None:
    """A request refused before routing (401 from the key check) is counted in /metrics under the
    status the caller received, never as a 500."""
    refused = await gateway.client.post(
        "/v1/retrieve",
        json={"agent_id": "bot", "question": "anything"},
        headers={"Authorization": "Bearer not-a-key"},
    )
    assert refused.status_code == 401
    metrics = (await gateway.client.get("/metrics")).text
    assert 'method="POST",route="/v1/retrieve",status="401"' in metrics
    assert 'status="500"' not in metrics
