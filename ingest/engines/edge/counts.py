"""Counts kept between writes: `EdgeIndex.count`'s answers, each served again until the
next write to its collection begins.

Exact because this process is the data dir's only writer (`gateway.runtime.data_dir`
locks it) and every write goes through `EdgeIndex`: a write bumps its collection's
generation when it begins and again when it ends, an answer is kept only when no write
to its collection was under way while it was counted, and a kept answer serves only
while its generation is the current one. A turn asks the same count once per KB
(whether the Scope holds dated documents: `gateway.retrieval.narrowing`), so between
writes it costs no engine call.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from ingest.lru import LruCache

#: Counts kept at most (the least recently used goes first).
COUNTS_KEPT = 4096


class CountsBetweenWrites:
    """Kept counts per (collection, key), invalidated by the collection's writes.
    Thread-safe: writes end in the engine's worker threads."""

    def __init__(self, max_entries: int = COUNTS_KEPT) -> None:
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}
        self._writing: dict[str, int] = {}
        self._kept: LruCache[tuple[str, Hashable], tuple[int, int]] = LruCache(max_entries)

    def write_begins(self, collection: str) -> None:
        with self._lock:
            self._generation[collection] = self._generation.get(collection, 0) + 1
            self._writing[collection] = self._writing.get(collection, 0) + 1

    def write_ends(self, collection: str) -> None:
        with self._lock:
            self._generation[collection] = self._generation.get(collection, 0) + 1
            self._writing[collection] -= 1

    def mark(self, collection: str) -> int | None:
        """The collection's generation before a count, or None while a write is under way
        (that count is not kept)."""
        with self._lock:
            if self._writing.get(collection, 0):
                return None
            return self._generation.get(collection, 0)

    def kept(self, collection: str, key: Hashable) -> int | None:
        """The count kept for `key`, if no write to `collection` began since it was made."""
        found = self._kept.get((collection, key))
        if found is None or found[0] != self.mark(collection):
            return None
        return found[1]

    def keep(self, collection: str, key: Hashable, mark: int | None, count: int) -> None:
        """Keep `count` if no write to `collection` began since `mark` was taken."""
        if mark is not None and self.mark(collection) == mark:
            self._kept.put((collection, key), (mark, count))
