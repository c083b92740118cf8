"""The embedded Index adapter: Qdrant Edge in this process, each call in a worker thread
and awaited with a deadline.

`EdgeEngine` (`ingest.engines.edge.engine`) makes the calls; this class is the `Index`
port over it. A call that has not answered within `timeout_s` (a write, or a
collection's creation or removal: `WRITE_TIMEOUT_S`) raises `IndexTimeoutError` for the
request that made it, while the event loop serves every other request; the
worker goes on with the call (a thread cannot be stopped), so a pool of several workers
keeps other calls going beside a stuck one.

What the deadline cannot bound: Edge's binding holds the GIL for the whole of every call
(`bench.edge_gil`), so a call that spins inside the engine keeps the event loop, and so
the deadline, from running until it returns. The deadline bounds a call that waits: on
a shard's write lock, on the disk, or on the pool behind other calls.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ingest.engines.common import WRITE_TIMEOUT_S, keyword_terms
from ingest.engines.edge.counts import (
    Cell,
    CountsBetweenWrites,
    Touched,
    passage_cells,
    scope_cells,
)
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine
from ingest.index import (
    HeldTerms,
    IndexTimeoutError,
    IndexUnavailableError,
    Leg,
    Passage,
    QueryResult,
    RankResult,
    StoredPassage,
)
from ingest.payload import PassagePayload, PiiAnalysis, Scope

__all__ = ["EDGE_DIR", "EdgeIndex"]

P = ParamSpec("P")
T = TypeVar("T")

#: Worker threads for engine calls. Edge runs one call at a time anyway (it holds the
#: GIL); the others are there so that a call stuck waiting does not hold up the rest.
WORKERS = 4
#: The kept counts' tag for `keyword_idf`'s N, apart from `count`'s (scope, document_id).
_HOLDERS = "keyword holders"


class EdgeIndex:
    """Qdrant Edge shards under `data_dir / "qdrant-edge"`, as the `Index` port."""

    def __init__(
        self,
        data_dir: Path,
        dense_dim: int = 384,
        *,
        timeout_s: float = 5.0,
        indexing_threshold_kb: int | None = None,
        search_threads: int | None = None,
        min_free_mb: int = 0,
    ) -> None:
        """`timeout_s`: each call's deadline (`optimize` has none: a start's work). The
        other settings are `EdgeEngine`'s."""
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.engine = EdgeEngine(
            data_dir,
            dense_dim,
            indexing_threshold_kb=indexing_threshold_kb,
            search_threads=search_threads,
            min_free_mb=min_free_mb,
        )
        #: each call's deadline, in seconds
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="edge-call")
        self._counts = CountsBetweenWrites()
        self._closed = False

    async def _call(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`call` in a worker, awaited for `timeout_s` at most (`IndexTimeoutError`)."""
        return await self._bounded(self.timeout_s, call, *args, **kwargs)

    async def _write(
        self,
        touched: Touched,
        call: Callable[Concatenate[str, P], T],
        collection: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """A write to `collection` that may change the `touched` cells (None: any), bounded
        by `WRITE_TIMEOUT_S` (or `timeout_s` if that is longer). The counts kept for
        Scopes reading those cells lapse when it begins and again when the worker ends it
        (after its deadline too: the worker goes on)."""

        def write() -> T:
            try:
                return call(collection, *args, **kwargs)
            finally:
                self._counts.write_ends(collection, touched)

        if self._closed:
            raise IndexUnavailableError("the Qdrant Edge index is closed")
        self._counts.write_begins(collection, touched)  # submitted at once: the worker ends it
        return await self._bounded(max(self.timeout_s, WRITE_TIMEOUT_S), write)

    async def _bounded(
        self, timeout_s: float, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        if self._closed:
            raise IndexUnavailableError("the Qdrant Edge index is closed")
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._pool, functools.partial(call, *args, **kwargs))
        try:
            async with asyncio.timeout(timeout_s):
                return await running
        except TimeoutError as error:
            raise IndexTimeoutError(f"Qdrant Edge did not answer within {timeout_s:g} s") from error

    async def ensure_collection(self, collection: str) -> None:
        await self._write(None, self.engine.ensure_collection, collection)

    async def ensure_field_indexes(self, collection: str, fields: Mapping[str, str]) -> int:
        return await self._write(None, self.engine.ensure_field_indexes, collection, fields)

    async def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        overwritten: list[frozenset[Cell]] = []

        def overwriting(cells: frozenset[Cell]) -> None:
            self._counts.write_begins(collection, cells)
            overwritten.append(cells)

        def write(collection: str) -> None:
            try:
                self.engine.upsert(collection, passages, overwriting)
            finally:
                for cells in overwritten:
                    self._counts.write_ends(collection, cells)

        # A point written again may have been in other cells (another label): those lapse
        # too, from before the page that moves it is written.
        await self._write(passage_cells(passages), write, collection)

    async def document_keywords(self, collection: str) -> bool:
        known = self.engine.open_document_keywords(collection)  # no engine call: no worker
        if known is not None:
            return known
        return await self._call(self.engine.document_keywords, collection)

    async def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        return await self._call(self.engine.query, collection, scope, legs)

    async def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        return await self._call(self.engine.rank, collection, scope, legs)

    async def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        """The IDFs' N (how many of the Scope's points hold each keyword vector) is a
        count like `count`'s, kept between writes; the terms' own counts are not."""
        holders = await self._keyword_holders(collection, scope, tuple(keyword_terms(legs)))
        return await self._call(self.engine.keyword_idf, collection, scope, legs, holders)

    async def _keyword_holders(
        self, collection: str, scope: Scope, names: tuple[str, ...]
    ) -> dict[str, int]:
        holders: dict[str, int] = {}
        for name in names:
            kept = self._counts.kept(collection, scope, (_HOLDERS, scope, name))
            if kept is not None:
                holders[name] = kept
        missing = [name for name in names if name not in holders]
        if missing:
            mark = self._counts.mark(collection, scope)
            counted = await self._call(self.engine.keyword_holders, collection, scope, missing)
            for name, number in counted.items():
                self._counts.keep(collection, scope, (_HOLDERS, scope, name), mark, number)
            holders.update(counted)
        return holders

    async def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        return await self._call(self.engine.fetch, collection, scope, point_ids)

    async def held_terms(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, HeldTerms]:
        return await self._call(self.engine.held_terms, collection, scope, point_ids)

    async def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        key = (scope, document_id)
        kept = self._counts.kept(collection, scope, key)
        if kept is not None:
            return kept
        mark = self._counts.mark(collection, scope)
        counted = await self._call(self.engine.count, collection, scope, document_id)
        self._counts.keep(collection, scope, key, mark, counted)
        return counted

    async def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        return await self._call(self.engine.scroll_document, collection, scope, document_id)

    async def document_ids(self, collection: str, scope: Scope) -> set[str]:
        return await self._call(self.engine.document_ids, collection, scope)

    async def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        return await self._write(
            scope_cells(scope), self.engine.delete_points, collection, scope, point_ids
        )

    async def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        return await self._write(
            scope_cells(scope), self.engine.delete_document, collection, scope, document_id
        )

    async def delete_scope(self, collection: str, scope: Scope) -> int:
        return await self._write(scope_cells(scope), self.engine.delete_scope, collection, scope)

    async def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        return await self._call(self.engine.passages_page, collection, scope, offset, limit)

    async def drop_collection(self, collection: str) -> int | None:
        return await self._write(None, self.engine.drop_collection, collection)

    async def backfill_org(self, collection: str, scope: Scope) -> int:
        return await self._write(scope_cells(scope), self.engine.backfill_org, collection, scope)

    async def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        return await self._call(
            self.engine.stale_pii_page, collection, scope, analyzer, offset, limit
        )

    async def set_pii(
        self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]
    ) -> int:
        return await self._write(
            scope_cells(scope), self.engine.set_pii, collection, scope, analyses
        )

    async def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        await self._write(None, self.engine.add_dense_vector, collection, vector, dim)

    async def missing_vector_page(
        self, collection: str, scope: Scope, vector: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        return await self._call(
            self.engine.missing_vector_page, collection, scope, vector, offset, limit
        )

    async def set_dense_vectors(
        self, collection: str, scope: Scope, vector: str, vectors: Mapping[str, Sequence[float]]
    ) -> int:
        return await self._write(
            scope_cells(scope), self.engine.set_dense_vectors, collection, scope, vector, vectors
        )

    async def count_vector(self, collection: str, scope: Scope, vector: str) -> int:
        return await self._call(self.engine.count_vector, collection, scope, vector)

    async def drop_dense_vectors(self, collection: str, scope: Scope, vector: str) -> int:
        return await self._write(
            scope_cells(scope), self.engine.drop_dense_vectors, collection, scope, vector
        )

    async def optimize(self) -> list[str]:
        if self._closed:
            raise IndexUnavailableError("the Qdrant Edge index is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.engine.optimize)

    async def ping(self) -> None:
        await self._call(self.engine.ping)

    async def close(self) -> None:
        """Flush and close every shard (waiting for calls under way), then the workers."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._pool, self.engine.close)
        self._pool.shutdown(wait=False)
