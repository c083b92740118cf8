"""Per-key rate limits: 429 with Retry-After, per key, never leaking the key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from gateway.app import create_app
from gateway.ratelimit import InProcessLimiter
from ingest.embedding import Embedder
from tests.api.conftest import Gateway, start_gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio


@pytest.fixture
async def limited(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway allowing a burst of 20 calls per key, refilled at 0.5 per second."""
    services, logs, config = await start_gateway(
        tmp_path, embedder, rate_limit_per_s=0.5, rate_limit_burst=20
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


async def test_a_key_over_its_budget_gets_429_with_retry_after(limited: Gateway) -> None:
    """Past the burst, a key is refused with 429 and Retry-After; another key is unaffected."""
    alpha = await provision(limited, "acme", "alpha")
    beta = await provision(limited, "acme", "beta")
    statuses = [
        (await limited.client.get("/v1/workspace/settings", headers=alpha.headers())).status_code
        for _ in range(25)
    ]
    assert statuses.count(429) >= 4
    refused = await limited.client.get("/v1/workspace/settings", headers=alpha.headers())
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert alpha.keys["all"] not in refused.text
    other = await limited.client.get("/v1/workspace/settings", headers=beta.headers())
    assert other.status_code == 200


async def test_token_bucket_refills_at_the_rate() -> None:
    """The in-process bucket allows `burst` at once, then one call per 1/rate seconds."""
    now = [0.0]
    limiter = InProcessLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [await limiter.hit("k") for _ in range(3)] == [None, None, None]
    wait = await limiter.hit("k")
    assert wait == pytest.approx(0.5)
    now[0] += 0.5
    assert await limiter.hit("k") is None
    assert await limiter.hit("other") is None
