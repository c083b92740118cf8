"""The rate limits' Redis store: fixed windows shared by every replica.

`RedisLimiter` counts calls per key (or per workspace) in one-second windows,
`RedisFailures` failed authentications per client address in one-minute windows
(`gateway.access.ratelimit` holds the rules and their in-process stores). A Redis outage
lets calls through (and is counted): a rate limit protects capacity, it is not an access
rule. After a failed call the limiter stops asking Redis for a moment
(`settings.stores.outage.FailFast`), so a dead or blackholed Redis does not add its timeout to
every request.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from urllib.parse import quote

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.access.ratelimit import FAILURE_WINDOW_S
from settings.stores.outage import FailFast

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
