"""Question embeddings for retrieval turns: a bounded cache in front of a micro-batcher.

`QueryBatcher` embeds the questions of concurrent turns in shared model calls. It never
waits on purpose: while fewer than `lanes` batches run, a request starts one at once (a
lone caller pays nothing, and when `alone()` says no other work is in flight its
questions are embedded in the calling thread, without the hop to a worker and back);
requests that arrive while every lane is busy queue up and
go together in the next batch a lane starts, up to `max_texts` distinct texts. Each
batch runs single-threaded in a worker thread, outside the GIL, so lanes are how the
model's work spreads over the cores. One lane left a core idle at eight callers: every
turn's embedding waited behind the one batch in flight while the searches, which hold
the GIL, waited for embeddings (docs/benchmarks.md: two lanes took eight callers from
55 to 71 turns/s, median of four alternated pairs).

`QueryEmbeddings` keeps recent question embeddings in an `LruCache` keyed by
(partition, exact text); the turn passes the tenant id as the partition. An
embedding holds no tenant data, but a shared entry would let one tenant tell by
timing whether another asked the same question, so entries are never shared.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ingest.embedding import Embedding
from ingest.lru import LruCache

EmbedFn = Callable[[Sequence[str]], list[Embedding]]


@dataclass(slots=True)
class _Request:
    texts: tuple[str, ...]
    future: asyncio.Future[list[Embedding]]


class QueryBatcher:
    """Concurrent `embed` calls share model calls; results are exactly the embedder's."""

    def __init__(
        self,
        embed: EmbedFn,
        *,
        max_texts: int,
        lanes: int = 1,
        alone: Callable[[], bool] = lambda: False,
    ) -> None:
        """`embed` is a blocking `Embedder.embed_queries`; it runs in worker threads, at most
        `lanes` calls at a time, or in the calling thread when no batch is queued or
        running and `alone()` is true (the gateway: this is the only turn in flight)."""
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        if lanes < 1:
            raise ValueError("lanes must be at least 1")
        self._embed = embed
        self._max_texts = max_texts
        self._lanes = lanes
        self._alone = alone
        self._queue: deque[_Request] = deque()
        self._drainers: list[asyncio.Task[None]] = []
        #: model calls made and texts sent, for tests and benchmarks
        self.calls = 0
        self.texts_embedded = 0

    async def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """The embeddings of `texts`, in order. Cancelling the caller cancels only its share."""
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if self._idle(loop):
            # Requests already received get to start first: a turn that embedded in place
            # before they could count themselves would keep the loop from them, and each
            # next turn would again find itself alone.
            await asyncio.sleep(0)
            if self._idle(loop):
                return self._embed_here(texts)
        request = _Request(tuple(texts), loop.create_future())
        self._queue.append(request)
        if any(d.get_loop() is not loop for d in self._drainers):
            # A previous event loop's leftovers (tests run one loop per test): drop them.
            self._queue = deque(r for r in self._queue if r.future.get_loop() is loop)
            self._drainers = []
        self._drainers = [d for d in self._drainers if not d.done()]
        if len(self._drainers) < self._lanes:
            self._drainers.append(loop.create_task(self._drain()))
        return await request.future

    async def _drain(self) -> None:
        """One lane: run batches until the queue is empty, one after the other."""
        while self._queue:
            batch = [r for r in self._take() if not r.future.done()]
            if not batch:
                continue
            distinct = list(dict.fromkeys(text for r in batch for text in r.texts))
            try:
                vectors = await asyncio.to_thread(self._embed, distinct)
            except asyncio.CancelledError:
                self._fail([*batch, *self._queue], None)
                self._queue.clear()
                raise
            except Exception as error:  # any failure goes to every caller of the batch
                self._fail(batch, error)
                continue
            self.calls += 1
            self.texts_embedded += len(distinct)
            by_text = dict(zip(distinct, vectors, strict=True))
            for request in batch:
                if not request.future.done():
                    request.future.set_result([by_text[text] for text in request.texts])

    def _idle(self, loop: asyncio.AbstractEventLoop) -> bool:
        """No batch queued or running here, and `alone()`."""
        running = any(not d.done() and d.get_loop() is loop for d in self._drainers)
        return not self._queue and not running and self._alone()

    def _embed_here(self, texts: Sequence[str]) -> list[Embedding]:
        distinct = list(dict.fromkeys(texts))
        vectors = dict(zip(distinct, self._embed(distinct), strict=True))
        self.calls += 1
        self.texts_embedded += len(distinct)
        return [vectors[text] for text in texts]

    def _take(self) -> list[_Request]:
        """Whole requests, oldest first, up to `max_texts` texts (at least one request)."""
        taken = [self._queue.popleft()]
        size = len(taken[0].texts)
        while self._queue and size + len(self._queue[0].texts) <= self._max_texts:
            request = self._queue.popleft()
            size += len(request.texts)
            taken.append(request)
        return taken

    @staticmethod
    def _fail(requests: Sequence[_Request], error: Exception | None) -> None:
        for request in requests:
            if request.future.done():
                continue
            if error is None:
                request.future.cancel()
            else:
                request.future.set_exception(error)


class QueryEmbeddings:
    """Cached, batched question embeddings; the cache never serves one partition to another."""

    def __init__(self, batcher: QueryBatcher, cache: LruCache[tuple[str, str], Embedding]) -> None:
        self._batcher = batcher
        self._cache = cache

    @property
    def batcher(self) -> QueryBatcher:
        return self._batcher

    @property
    def cache(self) -> LruCache[tuple[str, str], Embedding]:
        return self._cache

    async def embed(self, partition: str, texts: Sequence[str]) -> list[Embedding]:
        """The embeddings of `texts` in order: cached ones from `partition`, the rest batched."""
        found = [self._cache.get((partition, text)) for text in texts]
        missing = list(dict.fromkeys(t for t, hit in zip(texts, found, strict=True) if hit is None))
        if not missing:
            return [hit for hit in found if hit is not None]
        fresh = dict(zip(missing, await self._batcher.embed(missing), strict=True))
        for text, embedding in fresh.items():
            self._cache.put((partition, text), embedding)
        return [
            hit if hit is not None else fresh[text] for text, hit in zip(texts, found, strict=True)
        ]
