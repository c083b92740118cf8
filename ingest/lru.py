"""A bounded least-recently-used map, safe to share between threads.

The gateway's caches (question embeddings, redaction results) are instances of it,
built in the composition root with sizes from the config; a size of 0 turns one off.
Each cache decides its own key: anything that depends on a tenant carries the tenant
in the key, so one tenant's entries are never served to another.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most `max_entries` entries; a hit makes an entry the newest, a put evicts the oldest."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value stored under `key` (now the newest), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> None:
        """Store `value` as the newest entry, evicting the oldest beyond the bound."""
        if self.max_entries == 0:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def discard_where(self, doomed: Callable[[K], bool]) -> int:
        """Remove every entry whose key `doomed` holds for; how many went."""
        with self._lock:
            keys = [key for key in self._entries if doomed(key)]
            for key in keys:
                del self._entries[key]
        return len(keys)
