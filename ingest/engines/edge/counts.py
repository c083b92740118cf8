"""Counts kept between writes: `EdgeIndex.count`'s answers and `keyword_idf`'s N (how
many of a Scope's points hold each keyword vector), each served again until a write that
may change it begins.

Exact because this process is the data dir's only writer (`gateway.runtime.data_dir`
locks it) and every write goes through `EdgeIndex`. A write names what it may change:
the (tenant, KB, label) cells of the passages it writes, the cells of the Scope it
deletes or updates through, or the whole collection (a schema change, its removal). A
kept count lapses when a write that touches one of its Scope's cells begins, and again
when that write ends; a count made while such a write is under way is never kept.

So a Scope's kept counts lapse only by writes inside the cells it reads: another
workspace's writes, or the same workspace's at a label or in a KB outside the Scope,
leave them, and the time a turn takes tells nothing of them. A turn asks the same count
once per KB (whether the Scope holds dated documents: `gateway.retrieval.narrowing`), and
a turn whose dense legs keep nothing asks the Scope's N for its keyword floor
(`gateway.retrieval.answering`): between writes neither costs an engine call.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable

from ingest.index import Passage
from ingest.lru import LruCache
from ingest.payload import Scope

#: Counts kept at most (the least recently used goes first).
COUNTS_KEPT = 4096

#: (tenant, KB, label): the smallest part of a collection a Scope reads whole or not at all.
Cell = tuple[str, str, str]
#: What a write may change: its cells, or None for the whole collection.
Touched = frozenset[Cell] | None

#: A Scope's state when a count is made: the collection's generation and its cells'.
_Mark = tuple[int, tuple[int, ...]]


def scope_cells(scope: Scope) -> frozenset[Cell]:
    """The cells a Scope reads (its org and narrowing only narrow within them)."""
    return frozenset((scope.tenant_id, kb, label) for kb in scope.kb_ids for label in scope.labels)


def passage_cells(passages: Iterable[Passage]) -> frozenset[Cell]:
    """The cells these passages are written into."""
    return frozenset(
        (p.payload.tenant_id, p.payload.knowledge_base_id, p.payload.classification)
        for p in passages
    )


class CountsBetweenWrites:
    """Kept counts per (collection, key), each for a Scope, lapsed by the writes that touch
    the Scope's cells. Thread-safe: writes end in the engine's worker threads."""

    def __init__(self, max_entries: int = COUNTS_KEPT) -> None:
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}
        self._writing: dict[str, int] = {}
        self._cell_generation: dict[tuple[str, Cell], int] = {}
        self._cells_writing: dict[tuple[str, Cell], int] = {}
        self._kept: LruCache[tuple[str, Hashable], tuple[_Mark, int]] = LruCache(max_entries)

    def write_begins(self, collection: str, touched: Touched) -> None:
        self._step(collection, touched, 1)

    def write_ends(self, collection: str, touched: Touched) -> None:
        self._step(collection, touched, -1)

    def _step(self, collection: str, touched: Touched, writing: int) -> None:
        """A write's start (`writing` 1) or end (-1): a new generation either way."""
        with self._lock:
            if touched is None:
                self._generation[collection] = self._generation.get(collection, 0) + 1
                self._writing[collection] = self._writing.get(collection, 0) + writing
                return
            for cell in touched:
                at = (collection, cell)
                self._cell_generation[at] = self._cell_generation.get(at, 0) + 1
                self._cells_writing[at] = self._cells_writing.get(at, 0) + writing

    def mark(self, collection: str, scope: Scope) -> _Mark | None:
        """The Scope's state before a count, or None while a write touching it is under way
        (that count is not kept)."""
        ats = [(collection, cell) for cell in sorted(scope_cells(scope))]
        with self._lock:
            if self._writing.get(collection, 0) or any(self._cells_writing.get(at) for at in ats):
                return None
            cells = tuple(self._cell_generation.get(at, 0) for at in ats)
            return self._generation.get(collection, 0), cells

    def kept(self, collection: str, scope: Scope, key: Hashable) -> int | None:
        """The count kept for `key` (made over `scope`), if no write touching the Scope
        began since it was made."""
        found = self._kept.get((collection, key))
        if found is None or found[0] != self.mark(collection, scope):
            return None
        return found[1]

    def keep(
        self, collection: str, scope: Scope, key: Hashable, mark: _Mark | None, count: int
    ) -> None:
        """Keep `count` if no write touching the Scope began since `mark` was taken."""
        if mark is not None and self.mark(collection, scope) == mark:
            self._kept.put((collection, key), (mark, count))
