"""Console sessions: in memory (embedded) and in a real Redis shared by replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from litestar.stores.memory import MemoryStore

from gateway.http.console.sessions import ABSOLUTE_S, ConsoleSessions
from settings.stores.redis.store import redis_client
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio


async def test_memory_sessions_end_on_sign_out_and_after_their_absolute_lifetime() -> None:
    """A session loads by its token until signed out, and never past ABSOLUTE_S after sign-in."""
    assert ConsoleSessions.build(None).engine == "memory"
    now = [1_000.0]
    sessions = ConsoleSessions(MemoryStore(), engine="memory", clock=lambda: now[0])
    token, started = await sessions.start("hash-of-key")
    assert (await sessions.load(token)) == started
    assert await sessions.load("not-a-token") is None
    await sessions.end(token)
    assert await sessions.load(token) is None

    token, _ = await sessions.start("hash-of-key")
    now[0] += ABSOLUTE_S + 1
    assert await sessions.load(token) is None


async def test_redis_sessions_are_shared_by_replicas(tmp_path: Path) -> None:
    """On Redis, a session started on one replica is open on another, and a
    sign-out on either ends it everywhere; Redis holds neither the cookie value nor the key."""
    with RedisServer(tmp_path / "redis") as server:
        one, other = redis_client(server.url, 1.0), redis_client(server.url, 1.0)
        first, second = ConsoleSessions.build(one), ConsoleSessions.build(other)
        try:
            assert first.engine == "redis"
            token, started = await first.start("hash-of-key")
            assert (await second.load(token)) == started
            with redis.Redis.from_url(server.url) as client:
                keys = client.keys("*")
            assert keys
            assert not any(token.encode() in key for key in keys)
            await second.end(token)
            assert await first.load(token) is None
        finally:
            await one.aclose()
            await other.aclose()
