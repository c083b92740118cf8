"""Browser sessions of the admin console, kept server-side.

The browser holds only a random session token in an HttpOnly, SameSite=Strict
cookie (Secure over https), scoped to `/console` and without an expiry date, so it
ends with the browser session. The server keeps, under the sha256 of that token,
the sha256 of the admin key (the same hash the key store is looked up by — never
the key itself), a CSRF token and an optional one-shot notice. A new token is
issued at every sign-in (no session fixation); a session ends after
`IDLE_S` without use or `ABSOLUTE_S` after sign-in, whichever comes first.

Embedded, sessions live in this process's memory (Litestar's `MemoryStore`): a
restart signs everyone out, and replicas behind a load balancer would each know only
their own sessions. With `KBGATE_REDIS_URL` set they live in Redis (Litestar's
`RedisStore`) on the process's one Redis client, shared by every replica.

Litestar's own session middleware is not used: it cannot choose the cookie's
`Secure` flag per request, keeps the session id unchanged across sign-in, stores
sessions under the cookie value itself and would run on every API route.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import msgspec
from litestar.datastructures import State
from litestar.stores.base import Store
from litestar.stores.memory import MemoryStore

from settings.store import StoreUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")

COOKIE = "kbgate_console"
COOKIE_PATH = "/console"
IDLE_S = 8 * 3600
ABSOLUTE_S = 24 * 3600
_NAMESPACE = "kbgate_console_sessions"


class ConsoleSession(msgspec.Struct, kw_only=True):
    key_hash: str
    csrf: str
    started_at: float
    notice: str | None = None


class ConsoleSessions:
    """Start, load, update and end console sessions in a Litestar store."""

    def __init__(
        self,
        store: Store,
        *,
        engine: str,
        failures: tuple[type[BaseException], ...] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.engine = engine
        self._failures = failures
        self._clock = clock
        self._decoder = msgspec.json.Decoder(ConsoleSession)

    @classmethod
    def build(cls, redis: Redis | None) -> ConsoleSessions:
        """In memory when embedded; in Redis (shared by replicas) on the process's Redis
        client when there is one. The client stays its owner's to close."""
        if redis is None:
            return cls(MemoryStore(), engine="memory")
        from litestar.stores.redis import RedisStore
        from redis.exceptions import RedisError

        return cls(
            RedisStore(redis, namespace=_NAMESPACE, handle_client_shutdown=False),
            engine="redis",
            failures=(RedisError, OSError, TimeoutError),
        )

    async def start(self, key_hash: str) -> tuple[str, ConsoleSession]:
        """A new session for a verified key: (token for the cookie, session)."""
        token = secrets.token_urlsafe(32)
        session = ConsoleSession(
            key_hash=key_hash, csrf=secrets.token_urlsafe(32), started_at=self._clock()
        )
        await self.save(token, session)
        return token, session

    async def load(self, token: str | None) -> ConsoleSession | None:
        if not token or len(token) > 100:
            return None
        raw = await self._guard(self._store.get(_storage_key(token), renew_for=IDLE_S))
        if raw is None:
            return None
        try:
            session = self._decoder.decode(raw)
        except msgspec.DecodeError:
            return None
        if self._clock() - session.started_at > ABSOLUTE_S:
            await self.end(token)
            return None
        return session

    async def save(self, token: str, session: ConsoleSession) -> None:
        await self._guard(
            self._store.set(_storage_key(token), msgspec.json.encode(session), expires_in=IDLE_S)
        )

    async def end(self, token: str) -> None:
        await self._guard(self._store.delete(_storage_key(token)))

    async def _guard(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except self._failures as error:
            raise StoreUnavailableError("console session store unavailable") from error


def sessions_of(state: State) -> ConsoleSessions:
    """The console's sessions, built by the app's lifespan on the process's Redis client."""
    sessions: ConsoleSessions = state.console_sessions
    return sessions


def _storage_key(token: str) -> str:
    """Sessions are stored under a hash of the cookie value: a leaked store holds no cookie."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
