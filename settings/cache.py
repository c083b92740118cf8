"""The cached reader turns use: settings at most `staleness_s` old, last known on outage.

Reads within `staleness_s` of the last fetch are served from memory. After that
(or once invalidated) the store is asked again; if it cannot answer, the last
known value is served (and the outage counted), so turns keep resolving while
Redis is down. Invalidation therefore marks entries stale and never drops them. Writes
through this process invalidate at once; other replicas learn through the
store's invalidation channel, with the staleness bound as the fallback.
Absent records are not cached, so a new agent is usable at once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from settings.records import Agent, ApiKey, KnowledgeBase, Workspace
from settings.store import SettingsStore, StoreUnavailableError

T = TypeVar("T")

#: the cache partition of credentials, and what a revocation announces (no tenant id is
#: empty; the Redis store publishes the same value,
#: `settings.stores.redis.store.CREDENTIALS_CHANGED`)
CREDENTIALS = ""


@dataclass(slots=True)
class _Entry:
    value: Any
    fetched_at: float


class CachedSettings:
    """Per-process cache of workspace, agent and KB records (and workspaces' pseudonym
    keys)."""

    def __init__(
        self,
        store: SettingsStore,
        staleness_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_stale_read: Callable[[], None] | None = None,
        on_fallback: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._staleness_s = staleness_s
        self._clock = clock
        self._on_stale_read = on_stale_read
        self._on_fallback = on_fallback
        self._entries: dict[tuple[str, Hashable], _Entry] = {}

    async def workspace(self, tenant_id: str) -> Workspace | None:
        return await self._read(
            (tenant_id, "workspace"), lambda: self._store.get_workspace(tenant_id)
        )

    async def workspace_or_none(self, tenant_id: str) -> Workspace | None:
        """The workspace, or None when the store cannot be read and nothing is cached
        (`on_fallback` is called): the settings rules then fall back to their safe defaults."""
        try:
            return await self.workspace(tenant_id)
        except StoreUnavailableError:
            if self._on_fallback is not None:
                self._on_fallback()
            return None

    async def pseudonym_key(self, tenant_id: str) -> bytes | None:
        """The workspace's pseudonym key, cached beside its record (and made stale with it)."""
        return await self._read(
            (tenant_id, "pseudonym_key"), lambda: self._store.pseudonym_key(tenant_id)
        )

    async def agent(self, tenant_id: str, agent_id: str) -> Agent | None:
        return await self._read(
            (tenant_id, ("agent", agent_id)), lambda: self._store.get_agent(tenant_id, agent_id)
        )

    async def knowledge_base(self, tenant_id: str, kb_id: str) -> KnowledgeBase | None:
        return await self._read(
            (tenant_id, ("kb", kb_id)), lambda: self._store.get_knowledge_base(tenant_id, kb_id)
        )

    async def api_key(self, key_hash: str) -> ApiKey | None:
        """A credential by the hash of its secret (cached like the rest).

        Credentials are cached under `CREDENTIALS`, which no tenant id can be: a
        revocation announces it, and every cached credential is checked again.
        """
        return await self._read(
            (CREDENTIALS, ("key", key_hash)), lambda: self._store.get_api_key_by_hash(key_hash)
        )

    def fresh_api_key(self, key_hash: str) -> ApiKey | None:
        """The credential if it is cached and within the staleness bound; never asks the store."""
        entry = self._entries.get((CREDENTIALS, ("key", key_hash)))
        if entry is None or self._clock() - entry.fetched_at >= self._staleness_s:
            return None
        return entry.value  # type: ignore[no-any-return]  # entries are keyed by record kind

    def invalidate_credentials(self) -> None:
        """Make every cached credential stale (after a key was revoked)."""
        self.invalidate(CREDENTIALS)

    def invalidate(self, tenant_id: str) -> None:
        """Make one tenant's records stale: refetched on next read, kept as last known."""
        for key, entry in self._entries.items():
            if key[0] == tenant_id:
                entry.fetched_at = -math.inf

    def invalidate_all(self) -> None:
        """Make every record stale (credentials too, so they are re-checked)."""
        for entry in self._entries.values():
            entry.fetched_at = -math.inf

    async def _read(
        self, key: tuple[str, Hashable], fetch: Callable[[], Awaitable[T | None]]
    ) -> T | None:
        entry = self._entries.get(key)
        now = self._clock()
        if entry is not None and now - entry.fetched_at < self._staleness_s:
            return entry.value  # type: ignore[no-any-return]  # entries are keyed by record kind
        try:
            value = await fetch()
        except StoreUnavailableError:
            if entry is None:
                raise
            if self._on_stale_read is not None:
                self._on_stale_read()
            return entry.value  # type: ignore[no-any-return]  # as above
        if value is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = _Entry(value, now)
        return value


@runtime_checkable
class InvalidationSource(Protocol):
    """A store that announces changed tenants to every replica (Redis pub/sub)."""

    def invalidations(self) -> AsyncIterator[str]: ...


async def follow_invalidations(
    source: InvalidationSource, cache: CachedSettings, *, retry_s: float = 1.0
) -> None:
    """Invalidate the cache for every announced tenant, until cancelled.

    Whenever the subscription is (re)established everything is dropped, since
    announcements made while it was down were missed.
    """
    while True:
        cache.invalidate_all()
        try:
            async for tenant_id in source.invalidations():
                cache.invalidate(tenant_id)
        except StoreUnavailableError:
            await asyncio.sleep(retry_s)
