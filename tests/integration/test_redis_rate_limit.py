"""The Redis-backed rate limiter against a real redis-server."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.access.redis_limits import RedisFailures, RedisLimiter
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio


async def test_window_is_shared_by_limiters_and_fails_open(redis: RedisServer) -> None:
    """Two limiters (two replicas) share one budget per key and window; with Redis down,
    calls are let through and the outage is counted."""
    outages: list[int] = []
    now = [1_000_000.25]
    one, other = (Redis.from_url(redis.url, socket_timeout=0.5) for _ in range(2))
    first = RedisLimiter(one, rate=2, burst=1, clock=lambda: now[0])
    second = RedisLimiter(
        other,
        rate=2,
        burst=1,
        clock=lambda: now[0],
        on_outage=lambda: outages.append(1),
    )
    results = [await limiter.hit("key_a") for limiter in (first, second, first, second)]
    assert results[:3] == [None, None, None]
    assert results[3] == pytest.approx(0.75)
    assert await first.hit("key_b") is None
    now[0] += 1.0
    assert await second.hit("key_a") is None
    redis.stop()
    assert await second.hit("key_a") is None
    assert outages == [1]
    for client in (one, other):  # the limiters share their clients: the owner closes them
        await client.aclose()


async def test_workspace_budgets_and_auth_failures_are_shared_through_redis(
    redis: RedisServer,
) -> None:
    """A workspace limiter (its own prefix) counts apart from the per-key limiter of the same
    name; failed authentications counted by one replica block that address on another,
    not other addresses, until the minute ends; with Redis down nothing is blocked."""
    now = [6_000_000.5]
    clients = [Redis.from_url(redis.url) for _ in range(4)]
    per_key = RedisLimiter(clients[0], rate=1, burst=0, clock=lambda: now[0])
    per_workspace = RedisLimiter(
        clients[1], rate=1, burst=0, clock=lambda: now[0], prefix="kbgate:wsrate"
    )
    assert await per_key.hit("alpha") is None
    assert await per_workspace.hit("alpha") is None
    assert await per_workspace.hit("alpha") is not None

    first = RedisFailures(clients[2], 3, clock=lambda: now[0])
    second = RedisFailures(clients[3], 3, clock=lambda: now[0])
    for replica in (first, second, first):
        assert await replica.blocked("203.0.113.7") is None
        await replica.failed("203.0.113.7")
    wait = await second.blocked("203.0.113.7")
    assert wait is not None
    assert 0 < wait <= 60
    assert await second.blocked("198.51.100.2") is None
    now[0] += 60
    assert await first.blocked("203.0.113.7") is None
    redis.stop()
    assert await first.blocked("203.0.113.7") is None
    for client in clients:
        await client.aclose()
