"""Health, readiness, metrics and the OpenAPI schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
from tests.api.conftest import PLATFORM_KEY, Gateway, start_gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

METRICS_KEY = "metrics-scrape-key-0123456789"


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
    response = await gateway.client.get("/metrics", headers=gateway.platform)
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
    metrics = (await gateway.client.get("/metrics", headers=gateway.platform)).text
    assert 'method="POST",route="/v1/retrieve",status="401"' in metrics
    assert 'status="500"' not in metrics


async def test_metrics_answer_only_to_the_platform_key_by_default(gateway: Gateway) -> None:
    """Without KBGATE_METRICS_KEY, /metrics answers 401 (problem details, WWW-Authenticate)
    to anonymous callers, unknown tokens and workspace keys, and 200 to the platform key."""
    tenant = await provision(gateway, "acme", "support")
    refused = [
        await gateway.client.get("/metrics"),
        await gateway.client.get("/metrics", headers={"Authorization": "Bearer not-a-key"}),
        await gateway.client.get("/metrics", headers=tenant.headers()),
    ]
    for response in refused:
        assert response.status_code == 401, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.headers["www-authenticate"] == "Bearer"
        assert "kbgate_" not in response.text
    assert (await gateway.client.get("/metrics", headers=gateway.platform)).status_code == 200


async def test_metrics_answer_to_their_own_key(tmp_path: Path, embedder: Embedder) -> None:
    """With KBGATE_METRICS_KEY set, that bearer token reads /metrics (as does the platform
    key); anonymous callers still get 401."""
    services, _, config = await start_gateway(tmp_path, embedder, metrics_key=METRICS_KEY)
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            assert (await client.get("/metrics")).status_code == 401
            scraped = await client.get(
                "/metrics", headers={"Authorization": f"Bearer {METRICS_KEY}"}
            )
            assert scraped.status_code == 200
            assert "kbgate_http_requests_total" in scraped.text
            platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
            assert (await client.get("/metrics", headers=platform)).status_code == 200
    finally:
        await services.close()


@pytest.mark.parametrize("path", ["/schema", "/schema/", "/schema/scalar", "/schema/swagger"])
async def test_no_api_reference_page_loads_third_party_script(gateway: Gateway, path: str) -> None:
    """No HTML page is served under /schema (the reference page would load its script from a
    public CDN on the console's origin), while /schema/openapi.json stays available."""
    response = await gateway.client.get(path)
    if response.headers.get("content-type", "").startswith("text/html"):
        assert response.status_code == 404
    assert "<script" not in response.text
    assert "://" not in response.text  # no origin of any kind is referenced
    document = await gateway.client.get("/schema/openapi.json")
    assert document.status_code == 200
    assert document.headers["content-type"].startswith("application/")
    assert "<script" not in document.text
