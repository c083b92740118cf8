"""The bounded LRU map behind the gateway's speed caches."""

from __future__ import annotations

import pytest

from ingest.lru import LruCache


def test_the_least_recently_used_entry_is_evicted_beyond_the_bound() -> None:
    """With room for two, a third put evicts the entry used longest ago; a get counts as use."""
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the newest
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert cache.get("a") == 1
    assert cache.get("c") == 3


def test_putting_an_existing_key_replaces_it_without_growing() -> None:
    """A second put under the same key replaces the value and keeps one entry."""
    cache: LruCache[str, int] = LruCache(3)
    cache.put("a", 1)
    cache.put("a", 2)
    assert len(cache) == 1
    assert cache.get("a") == 2


def test_size_zero_stores_nothing() -> None:
    """A cache built with 0 entries is off: every get misses."""
    cache: LruCache[str, int] = LruCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None
    assert len(cache) == 0


def test_hits_and_misses_are_counted() -> None:
    """`hits` and `misses` count lookups (for benchmarks), not values."""
    cache: LruCache[str, int] = LruCache(4)
    cache.put("a", 1)
    cache.get("a")
    cache.get("b")
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_negative_bound_is_refused() -> None:
    """A negative size is a programming error, refused at construction."""
    with pytest.raises(ValueError, match="max_entries"):
        LruCache(-1)
