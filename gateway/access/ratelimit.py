"""Rate limits: a token bucket in-process (here), a fixed window in Redis when deployed
(`gateway.access.redis_limits`).

One limiter counts calls per key, another per workspace (a budget all its keys
share); `hit(name)` answers None when the call may proceed, or the seconds to wait
(the 429's Retry-After); `gateway.access.admission.Admission` asks both. Failed
authentications are counted per client address (`InProcessFailures`, `RedisFailures`):
past the budget a failing authentication from that address is answered 429 until the
next minute (a key that verifies is always served: `gateway.access.admission`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


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
