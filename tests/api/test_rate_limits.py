"""Rate limits: per key, per workspace and per address for failed authentications;
429 with Retry-After, never leaking the key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from litestar.testing import AsyncTestClient

from gateway.access.ratelimit import InProcessLimiter
from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
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


@pytest.fixture
async def guarded(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway allowing 5 failed authentications per address a minute, and a workspace
    budget (burst 6) below what its keys may use each (burst 100)."""
    services, logs, config = await start_gateway(
        tmp_path,
        embedder,
        auth_failures_per_min=5,
        rate_limit_workspace_per_s=0.1,
        rate_limit_workspace_burst=6,
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


def _from(gw: Gateway, address: str) -> httpx.AsyncClient:
    """A client of the same running app whose requests come from `address`."""
    transport = httpx.ASGITransport(app=gw.client.app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def test_failed_authentications_are_limited_per_address(guarded: Gateway) -> None:
    """Past the failure budget an address gets 429 (Retry-After, problem details) even for
    a key it has not tried, while another address keeps working; console sign-in guesses
    count too."""
    tenant = await provision(guarded, "acme", "alpha")
    async with _from(guarded, "203.0.113.7") as guesser, _from(guarded, "198.51.100.2") as other:
        statuses = [
            (
                await guesser.get("/v1/keys", headers={"Authorization": f"Bearer kbg_guess{n}"})
            ).status_code
            for n in range(8)
        ]
        assert statuses[:5] == [401] * 5
        assert statuses[5:] == [429] * 3
        refused = await guesser.get("/v1/keys", headers={"Authorization": "Bearer kbg_other"})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "kbg_other" not in refused.text
        fine = await other.get("/v1/workspace/settings", headers=tenant.headers())
        assert fine.status_code == 200

        signins = [
            (await other.post("/console/login", data={"key": f"kbg_wrong{n}"})).status_code
            for n in range(7)
        ]
        assert signins[:5] == [401] * 5
        assert 429 in signins[5:]


async def test_a_workspace_budget_is_shared_by_all_its_keys(guarded: Gateway) -> None:
    """The keys of one workspace share its budget (each key's own is far larger): past it
    any of them gets 429 naming the workspace; another workspace is unaffected."""
    alpha = await provision(guarded, "acme", "alpha")
    beta = await provision(guarded, "acme", "beta")
    await alpha.issue("second", ["admin"])
    statuses = [
        (await guarded.client.get("/v1/workspace/settings", headers=alpha.headers(key))).status_code
        for key in ("all", "second") * 5
    ]
    assert statuses.count(429) >= 3
    refused = await guarded.client.get("/v1/workspace/settings", headers=alpha.headers("second"))
    assert refused.status_code == 429
    assert "workspace" in refused.json()["detail"]
    other = await guarded.client.get("/v1/workspace/settings", headers=beta.headers())
    assert other.status_code == 200


async def _fail(client: httpx.AsyncClient, count: int, **headers: str) -> list[int]:
    """`count` requests with unknown keys; their statuses."""
    return [
        (
            await client.get(
                "/v1/keys", headers={"Authorization": f"Bearer kbg_guess{n}", **headers}
            )
        ).status_code
        for n in range(count)
    ]


async def test_a_valid_key_is_served_however_many_failures_its_address_made(
    guarded: Gateway,
) -> None:
    """Issue 57 #5: past the failure budget an address's failing requests get 429, yet a
    workspace key no process has verified yet, and the platform key, are served from that
    same address (the key is checked before the failure limit applies)."""
    tenant = await provision(guarded, "acme", "alpha")
    fresh = await tenant.issue("fresh", ["admin"])
    async with _from(guarded, "203.0.113.7") as shared:
        statuses = await _fail(shared, 30)
        assert statuses[:5] == [401] * 5
        assert set(statuses[5:]) == {429}
        guarded.services.settings.invalidate_credentials()  # no key verified by this process
        served = [
            ("/v1/workspace/settings", tenant.headers("fresh")),
            ("/v1/workspace/settings", tenant.headers()),
            ("/v1/deletions", guarded.platform),
        ]
        for path, headers in served:
            answer = await shared.get(path, headers=headers)
            assert answer.status_code == 200, answer.text
        assert fresh not in (await shared.get("/v1/keys", headers=tenant.headers())).text
        assert await _fail(shared, 1) == [429]  # failures are still refused


@pytest.fixture
async def proxied(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """The `guarded` gateway behind a proxy it trusts, 192.0.2.10 (and 10.1.0.0/16)."""
    services, logs, config = await start_gateway(
        tmp_path,
        embedder,
        auth_failures_per_min=5,
        trusted_proxies=("192.0.2.10/32", "10.1.0.0/16"),
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


async def test_forwarded_for_is_ignored_from_any_peer_by_default(guarded: Gateway) -> None:
    """Issue 57 #5: with no trusted proxy configured (the default), X-Forwarded-For is
    ignored even from loopback: rotating it does not evade the failure limit."""
    async with _from(guarded, "127.0.0.1") as local:
        statuses = [
            (
                await local.get(
                    "/v1/keys",
                    headers={
                        "Authorization": f"Bearer kbg_guess{n}",
                        "X-Forwarded-For": f"198.51.100.{n}",
                    },
                )
            ).status_code
            for n in range(8)
        ]
    assert statuses == [401] * 5 + [429] * 3


async def test_forwarded_for_is_honoured_from_a_named_proxy_only(proxied: Gateway) -> None:
    """Issue 57 #5: behind a trusted proxy each client is counted apart, by the right-most
    address that is no trusted proxy (what the client put left of it is never taken);
    from an untrusted peer the header is ignored."""
    async with _from(proxied, "192.0.2.10") as proxy, _from(proxied, "203.0.113.9") as direct:
        # one client behind the proxy, spoofing the left-most entry each time
        spoofed = [
            (
                await proxy.get(
                    "/v1/keys",
                    headers={
                        "Authorization": f"Bearer kbg_guess{n}",
                        "X-Forwarded-For": f"198.51.100.{n}, 203.0.113.50, 10.1.2.3",
                    },
                )
            ).status_code
            for n in range(7)
        ]
        assert spoofed == [401] * 5 + [429] * 2
        # another client behind the same proxy is not blocked
        other = await _fail(proxy, 1, **{"X-Forwarded-For": "203.0.113.51"})
        assert other == [401]
        # an untrusted peer's header is ignored: its own address is counted
        ignored = await _fail(direct, 7, **{"X-Forwarded-For": "203.0.113.77"})
        assert ignored == [401] * 5 + [429] * 2
        assert await _fail(proxy, 1, **{"X-Forwarded-For": "203.0.113.77"}) == [401]
        assert await _fail(proxy, 1, **{"X-Forwarded-For": "203.0.113.9"}) == [429]
