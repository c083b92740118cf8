"""The Index port called from a thread that is not an event loop's: the document
writer in the gateway's worker threads, command-line tools and benchmarks.

Each call is the port's own coroutine, run on an event loop (the gateway's, or one
this object starts on a thread of its own) and waited for: the adapter's deadline
bounds it as it bounds a call made on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ingest.index import (
    HeldTerms,
    Index,
    Leg,
    Passage,
    QueryResult,
    RankResult,
    StoredPassage,
)
from ingest.payload import PassagePayload, PiiAnalysis, Scope

T = TypeVar("T")


class BlockingIndex:
    """`index`'s calls, each waited for; never call it from `loop`'s own thread."""

    def __init__(self, index: Index, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """`loop`: the running loop the index's calls belong on (a server adapter's
        connections are the loop's); None: a loop of this object's own, on a thread."""
        self.index = index
        self._thread: threading.Thread | None = None
        if loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=loop.run_forever, name="blocking-index", daemon=True
            )
            self._thread.start()
        self._loop = loop
        self._closed = False
        #: this object's own loop stopped (closed)
        self._loop_gone = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the index's calls on `loop` from now on (the loop that serves, when the
        index was opened on another); not for an object running a loop of its own."""
        if self._thread is not None:
            raise RuntimeError("this BlockingIndex runs a loop of its own")
        self._loop = loop

    @classmethod
    def opening(cls, open_index: Callable[[], Awaitable[Index]]) -> BlockingIndex:
        """An index made by `open_index` on a loop of this object's own (a server
        adapter's connections belong to the loop that opens them)."""
        blocking = cls(_NotOpenYet())
        blocking.index = blocking.run(_awaited(open_index))
        return blocking

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        """`call` run on the index's loop, waited for: one of the port's calls, or a
        coroutine making several (a turn's ranking of one KB, for an evaluation)."""
        if self._thread is None and _running_loop() is self._loop:
            call.close()
            raise RuntimeError("BlockingIndex called from its own event loop: await the port")
        if self._loop_gone:  # the closed index still answers, on a loop of the moment
            with ThreadPoolExecutor(1) as once:
                return once.submit(asyncio.run, call).result()
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def ensure_collection(self, collection: str) -> None:
        self.run(self.index.ensure_collection(collection))

    def ensure_field_indexes(self, collection: str, fields: Mapping[str, str]) -> int:
        return self.run(self.index.ensure_field_indexes(collection, fields))

    def upsert(self, collection: str, passages: Sequence[Passage]) -> None:
        self.run(self.index.upsert(collection, passages))

    def document_keywords(self, collection: str) -> bool:
        return self.run(self.index.document_keywords(collection))

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        return self.run(self.index.query(collection, scope, legs))

    def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        return self.run(self.index.rank(collection, scope, legs))

    def keyword_idf(
        self, collection: str, scope: Scope, legs: Sequence[Leg]
    ) -> tuple[tuple[float, ...], ...]:
        return self.run(self.index.keyword_idf(collection, scope, legs))

    def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        return self.run(self.index.fetch(collection, scope, point_ids))

    def held_terms(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, HeldTerms]:
        return self.run(self.index.held_terms(collection, scope, point_ids))

    def count(self, collection: str, scope: Scope, document_id: str | None = None) -> int:
        return self.run(self.index.count(collection, scope, document_id))

    def scroll_document(
        self, collection: str, scope: Scope, document_id: str
    ) -> list[StoredPassage]:
        return self.run(self.index.scroll_document(collection, scope, document_id))

    def document_ids(self, collection: str, scope: Scope) -> set[str]:
        return self.run(self.index.document_ids(collection, scope))

    def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        return self.run(self.index.delete_points(collection, scope, point_ids))

    def delete_document(self, collection: str, scope: Scope, document_id: str) -> int:
        return self.run(self.index.delete_document(collection, scope, document_id))

    def delete_scope(self, collection: str, scope: Scope) -> int:
        return self.run(self.index.delete_scope(collection, scope))

    def passages_page(
        self, collection: str, scope: Scope, offset: str | None, limit: int
    ) -> tuple[list[Passage], str | None]:
        return self.run(self.index.passages_page(collection, scope, offset, limit))

    def drop_collection(self, collection: str) -> int | None:
        return self.run(self.index.drop_collection(collection))

    def backfill_org(self, collection: str, scope: Scope) -> int:
        return self.run(self.index.backfill_org(collection, scope))

    def stale_pii_page(
        self, collection: str, scope: Scope, analyzer: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        return self.run(self.index.stale_pii_page(collection, scope, analyzer, offset, limit))

    def set_pii(self, collection: str, scope: Scope, analyses: Mapping[str, PiiAnalysis]) -> int:
        return self.run(self.index.set_pii(collection, scope, analyses))

    def add_dense_vector(self, collection: str, vector: str, dim: int) -> None:
        return self.run(self.index.add_dense_vector(collection, vector, dim))

    def missing_vector_page(
        self, collection: str, scope: Scope, vector: str, offset: str | None, limit: int
    ) -> tuple[list[StoredPassage], str | None]:
        return self.run(self.index.missing_vector_page(collection, scope, vector, offset, limit))

    def set_dense_vectors(
        self, collection: str, scope: Scope, vector: str, vectors: Mapping[str, Sequence[float]]
    ) -> int:
        return self.run(self.index.set_dense_vectors(collection, scope, vector, vectors))

    def count_vector(self, collection: str, scope: Scope, vector: str) -> int:
        return self.run(self.index.count_vector(collection, scope, vector))

    def drop_dense_vectors(self, collection: str, scope: Scope, vector: str) -> int:
        return self.run(self.index.drop_dense_vectors(collection, scope, vector))

    def optimize(self) -> list[str]:
        return self.run(self.index.optimize())

    def ping(self) -> None:
        self.run(self.index.ping())

    def close(self) -> None:
        """Close the index, then this object's own loop if it has one (once)."""
        if self._closed:
            return
        try:
            self.run(self.index.close())
        finally:
            self._closed = True
            if self._thread is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
                self._loop.close()
                self._loop_gone = True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _awaited(open_index: Callable[[], Awaitable[Index]]) -> Index:
    return await open_index()


class _NotOpenYet:
    """Stands for the index `BlockingIndex.opening` is still opening."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("the index is not open yet")
