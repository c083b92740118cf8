"""Rate limits: a token bucket in-process, a fixed window in Redis when deployed.

One limiter counts calls per key, another per workspace (a budget all its keys
share); `hit(name)` answers None when the call may proceed, or the seconds to wait
(the 429's Retry-After). Failed authentications are counted per client address
(`InProcessFailures`, `RedisFailures`): past the budget a failing authentication from
that address is answered 429 until the next minute (a key that verifies is always
served: `gateway.http.security`). A Redis outage lets calls through (and is counted):
a rate limit protects capacity, it is not an access rule. After a failed call the
limiter stops asking Redis for a moment (`settings.outage.FailFast`), so a dead or
blackholed Redis does not add its timeout to every request.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from redis.asyncio import Redis
from redis.exceptions import RedisError

from settings.outage import FailFast


class RateLimiter(Protocol):
    async def hit(self, key_id: str) -> float | None:
        """None if allowed, else seconds until the next call would be."""

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class InProcessLimiter:
    """Token bucket per key: `rate` calls per second sustained, `burst` at once."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    async def hit(self, key_id: str) -> float | None:
        now = self._clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self._rate

    async def close(self) -> None:
        self._buckets.clear()


_WINDOW_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count
"""


class RedisLimiter:
    """Fixed one-second windows shared by every replica: at most `rate + burst` per window."""

    def __init__(
        self,
        client: Redis,
        rate: float,
        burst: int,
        *,
        on_outage: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
        gate: FailFast | None = None,
        prefix: str = "kbgate:rate",
    ) -> None:
        self._client = client
        self._prefix = prefix
        # A probe stuck past probe_s (say, a cancelled request) only lets calls through.
        self._gate = gate if gate is not None else FailFast(probe_s=10.0)
        self._limit = math.ceil(rate) + burst
        self._on_outage = on_outage
        self._clock = clock
        self._script = client.register_script(_WINDOW_SCRIPT)

    async def hit(self, key_id: str) -> float | None:
        now = self._clock()
        window = int(now)
        if not self._gate.admit():
            return self._outage()
        try:
            name = f"{self._prefix}:{quote(key_id, safe='')}:{window}"
            count = int(await self._script(keys=[name], args=[2000]))
        except (RedisError, OSError):
            self._gate.failed()
            return self._outage()
        self._gate.succeeded()
        if count <= self._limit:
            return None
        return max(0.001, window + 1 - now)

    def _outage(self) -> float | None:
        """Redis cannot be asked: let the call through, and count it."""
        if self._on_outage is not None:
            self._on_outage()
        return None

    async def close(self) -> None:
        """Nothing to release: the client is the caller's (shared in the process)."""


class FailureCounter(Protocol):
    """Failed authentications per client address, in one-minute windows."""

    async def blocked(self, address: str) -> float | None:
        """None if `address` may try to authenticate, else seconds until it may again."""

    async def failed(self, address: str) -> None:
        """Count one failed authentication from `address`."""

    async def close(self) -> None: ...


FAILURE_WINDOW_S = 60


class InProcessFailures:
    """Counts of this minute's failures per address; earlier minutes are forgotten."""

    def __init__(self, budget: int, *, clock: Callable[[], float] = time.time) -> None:
        self._budget = budget
        self._clock = clock
        self._window = -1
        self._counts: dict[str, int] = {}

    def _current(self) -> tuple[int, float]:
        now = self._clock()
        window = int(now // FAILURE_WINDOW_S)
        if window != self._window:
            self._window = window
            self._counts.clear()
        return window, now

    async def blocked(self, address: str) -> float | None:
        window, now = self._current()
        if self._counts.get(address, 0) < self._budget:
            return None
        return max(0.001, (window + 1) * FAILURE_WINDOW_S - now)

    async def failed(self, address: str) -> None:
        self._current()
        self._counts[address] = self._counts.get(address, 0) + 1

    async def close(self) -> None:
        self._counts.clear()


class RedisFailures:
    """The same counts in Redis, shared by every replica; an outage blocks no one."""

    def __init__(
        self,
        client: Redis,
        budget: int,
        *,
        on_outage: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._budget = budget
        self._on_outage = on_outage
        self._clock = clock
        self._gate = FailFast(probe_s=10.0)
        self._script = client.register_script(_WINDOW_SCRIPT)

    def _name(self, address: str) -> tuple[str, float, int]:
        now = self._clock()
        window = int(now // FAILURE_WINDOW_S)
        return f"kbgate:authfail:{quote(address, safe='')}:{window}", now, window

    async def blocked(self, address: str) -> float | None:
        name, now, window = self._name(address)
        if not self._gate.admit():
            self._outage()
            return None
        try:
            raw = await self._client.get(name)
        except (RedisError, OSError):
            self._gate.failed()
            self._outage()
            return None
        self._gate.succeeded()
        if raw is None or int(raw) < self._budget:
            return None
        return max(0.001, (window + 1) * FAILURE_WINDOW_S - now)

    async def failed(self, address: str) -> None:
        name, _, _ = self._name(address)
        if not self._gate.admit():
            self._outage()
            return
        try:
            await self._script(keys=[name], args=[2 * FAILURE_WINDOW_S * 1000])
        except (RedisError, OSError):
            self._gate.failed()
            self._outage()
            return
        self._gate.succeeded()

    def _outage(self) -> None:
        if self._on_outage is not None:
            self._on_outage()

    async def close(self) -> None:
        """Nothing to release: the client is the caller's (shared in the process)."""
