"""The cached settings reader: staleness bound, last-known values on outage, invalidation."""

from __future__ import annotations

import pytest

from settings.cache import CachedSettings
from settings.records import Workspace
from settings.store import SettingsStore, StoreUnavailableError

pytestmark = pytest.mark.anyio


class FakeStore:
    """Only what the cache reads: workspaces, with a switch to be 'down'."""

    def __init__(self) -> None:
        self.workspaces: dict[str, Workspace] = {}
        self.down = False
        self.reads = 0

    async def get_workspace(self, tenant_id: str) -> Workspace | None:
        self.reads += 1
        if self.down:
            raise StoreUnavailableError("down")
        return self.workspaces.get(tenant_id)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _ws(cap: int) -> Workspace:
    return Workspace(
        tenant_id="t",
        org_id="o",
        created_at="2026-06-01T00:00:00+00:00",
        settings={"max_knowledge_bases_per_agent": cap},
    )


def _cache(store: FakeStore, clock: Clock, stale: list[int]) -> CachedSettings:
    return CachedSettings(
        store,  # type: ignore[arg-type]  # a fake with only the read the cache uses
        30.0,
        clock=clock,
        on_stale_read=lambda: stale.append(1),
    )


async def test_reads_within_the_bound_are_served_from_memory() -> None:
    """A second read inside the staleness bound does not reach the store; after it, it does."""
    store, clock = FakeStore(), Clock()
    stale: list[int] = []
    store.workspaces["t"] = _ws(2)
    cache = _cache(store, clock, stale)
    assert (await cache.workspace("t")) == _ws(2)
    store.workspaces["t"] = _ws(5)
    clock.now = 29.9
    assert (await cache.workspace("t")) == _ws(2)
    clock.now = 30.0
    assert (await cache.workspace("t")) == _ws(5)
    assert store.reads == 2


async def test_outage_serves_the_last_known_value() -> None:
    """With the store down, a stale entry is served (and counted); with none, the error rises."""
    store, clock = FakeStore(), Clock()
    stale: list[int] = []
    store.workspaces["t"] = _ws(2)
    cache = _cache(store, clock, stale)
    await cache.workspace("t")
    store.down = True
    clock.now = 100.0
    assert (await cache.workspace("t")) == _ws(2)
    assert stale == [1]
    with pytest.raises(StoreUnavailableError):
        await cache.workspace("unknown")


async def test_invalidation_refetches_but_keeps_last_known() -> None:
    """Invalidated entries are refetched at once, yet still serve as last known during an outage."""
    store, clock = FakeStore(), Clock()
    stale: list[int] = []
    store.workspaces["t"] = _ws(2)
    cache = _cache(store, clock, stale)
    await cache.workspace("t")
    store.workspaces["t"] = _ws(7)
    cache.invalidate("t")
    assert (await cache.workspace("t")) == _ws(7)
    cache.invalidate_all()
    store.down = True
    assert (await cache.workspace("t")) == _ws(7)


async def test_absent_records_are_not_cached() -> None:
    """A record created after a miss is visible at once."""
    store, clock = FakeStore(), Clock()
    stale: list[int] = []
    cache = _cache(store, clock, stale)
    assert await cache.workspace("t") is None
    store.workspaces["t"] = _ws(1)
    assert (await cache.workspace("t")) == _ws(1)


def test_the_fake_store_is_a_partial_settings_store() -> None:
    """The fake implements the one method of SettingsStore the cache calls, with its signature."""
    assert FakeStore.get_workspace.__annotations__ == SettingsStore.get_workspace.__annotations__


async def test_workspace_or_none_falls_back_when_nothing_is_known() -> None:
    """`workspace_or_none` serves what `workspace` would; with the store down and nothing
    cached it answers None (the rules' safe defaults then apply) and calls `on_fallback`,
    and a cached workspace is still served stale, never None."""
    store, clock = FakeStore(), Clock()
    fallbacks: list[int] = []
    cache = CachedSettings(
        store,  # type: ignore[arg-type]  # a fake with only the read the cache uses
        30.0,
        clock=clock,
        on_fallback=lambda: fallbacks.append(1),
    )
    store.workspaces["t"] = _ws(2)
    assert (await cache.workspace_or_none("t")) == _ws(2)
    store.down = True
    clock.now = 100.0
    assert (await cache.workspace_or_none("t")) == _ws(2)
    assert (await cache.workspace_or_none("unknown")) is None
    assert fallbacks == [1]
