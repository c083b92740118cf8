"""Question embeddings for retrieval turns: a bounded cache in front of the model.

`QueryEmbeddings` keeps recent question embeddings in an `LruCache` keyed by
(partition, exact text); the turn passes the tenant id as the partition. An
embedding holds no tenant data, but a shared entry would let one tenant tell by
timing whether another asked the same question, so entries are never shared.
Questions not in the cache are embedded one call per turn in the question threads (the
model releases the GIL), one fewer than the cores: concurrent turns' questions run side
by side while the event loop, which runs every turn's index calls, keeps a core rather
than waiting its turn among model runs (docs/decisions/query-batching.md).

A turn running alone (`TurnsInFlight`) may instead embed its question in its own thread
while its keyword legs are searched in another: `start(..., here=True)` makes the BM25
vectors at once and leaves the model's run to `PendingEmbeddings.embeddings`, which then
blocks the event loop for the run (the model releases the GIL) while nothing else waits
for it (docs/decisions/search-while-embedding.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from ingest.embedder.embedding import Embedding, PreparedQuestions
from ingest.embedder.models import DenseModels
from ingest.index import SparseVector
from ingest.lru import LruCache

EmbedFn = Callable[[Sequence[str]], list[Embedding]]


class QuestionModel(Protocol):
    """A question's two vectors made apart (`ingest.embedder.embedding.FastEmbedder`)."""

    def query_sparse(self, texts: Sequence[str]) -> list[SparseVector]: ...

    def prepare_questions(self, texts: Sequence[str]) -> PreparedQuestions: ...

    def run_questions(self, prepared: PreparedQuestions) -> list[tuple[float, ...]]: ...


@dataclass(slots=True)
class PendingEmbeddings:
    """A turn's question embeddings on their way. When `here`, `sparse` (every text's BM25
    vector, in order) is known now and `embeddings()` runs the model in the calling thread;
    otherwise `embeddings()` waits for the question threads."""

    here: bool
    sparse: list[SparseVector]
    _waiting: Awaitable[list[Embedding]]

    async def embeddings(self) -> list[Embedding]:
        return await self._waiting


class TurnsInFlight:
    """How many retrieval turns this process is running."""

    def __init__(self) -> None:
        self._count = 0

    @property
    def alone(self) -> bool:
        """Whether one turn, the caller's own, is running."""
        return self._count == 1

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Count a turn while inside."""
        self._count += 1
        try:
            yield
        finally:
            self._count -= 1


class QueryEmbeddings:
    """Cached question embeddings; the cache never serves one partition to another."""

    def __init__(
        self,
        embed: EmbedFn,
        cache: LruCache[tuple[str, str], Embedding],
        threads: int | None = None,
        *,
        model: QuestionModel | None = None,
    ) -> None:
        """`embed` is a blocking `Embedder.embed_queries`; it runs in `threads` threads of
        this object's own (None: `question_threads()`). `close` stops them. With `model`
        (the same model's two vectors apart), `start` can leave the model's run to the
        caller's thread."""
        self._embed = embed
        self._model = model
        self._cache = cache
        self._threads = ThreadPoolExecutor(
            threads or question_threads(), thread_name_prefix="kbgate-question"
        )

    @property
    def cache(self) -> LruCache[tuple[str, str], Embedding]:
        return self._cache

    @property
    def threads(self) -> ThreadPoolExecutor:
        """The question threads (other models' questions run on them too)."""
        return self._threads

    async def embed(self, partition: str, texts: Sequence[str]) -> list[Embedding]:
        """The embeddings of `texts` in order: cached ones from `partition`, the rest from
        the model, each distinct text once."""
        found = [self._cache.get((partition, text)) for text in texts]
        missing = list(dict.fromkeys(t for t, hit in zip(texts, found, strict=True) if hit is None))
        if not missing:
            return [hit for hit in found if hit is not None]
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._threads, self._embed, missing)
        return self._keep(partition, texts, found, dict(zip(missing, vectors, strict=True)))

    def start(
        self, partition: str, texts: Sequence[str], *, here: bool = False
    ) -> PendingEmbeddings:
        """The embeddings of `texts` as `embed` gives them. With `here` (and a model run
        needed), the BM25 vectors are made now and the model runs in the thread that awaits
        `embeddings()`; otherwise `embeddings()` is `embed`."""
        if not here or self._model is None:
            return PendingEmbeddings(here=False, sparse=[], _waiting=self.embed(partition, texts))
        found = [self._cache.get((partition, text)) for text in texts]
        missing = list(dict.fromkeys(t for t, hit in zip(texts, found, strict=True) if hit is None))
        if not missing:
            cached = self.embed(partition, texts)
            return PendingEmbeddings(here=False, sparse=[], _waiting=cached)
        model = self._model
        sparse = dict(zip(missing, model.query_sparse(missing), strict=True))
        prepared = model.prepare_questions(missing)

        async def run() -> list[Embedding]:  # awaited, it runs the model in the awaiting thread
            vectors = dict(zip(missing, model.run_questions(prepared), strict=True))
            fresh = {text: Embedding(vectors[text], sparse[text]) for text in missing}
            return self._keep(partition, texts, found, fresh)

        every = [
            hit.sparse if hit is not None else sparse[text]
            for text, hit in zip(texts, found, strict=True)
        ]
        return PendingEmbeddings(here=True, sparse=every, _waiting=run())

    def keywords_only(self, texts: Sequence[str]) -> PendingEmbeddings | None:
        """The texts' BM25 vectors alone (their dense vectors empty), made in this thread:
        for a turn none of whose KBs answers from this model; None without a `model` to
        make them apart."""
        if self._model is None:
            return None
        sparse = self._model.query_sparse(list(texts))

        async def ready() -> list[Embedding]:
            return [Embedding((), vector) for vector in sparse]

        return PendingEmbeddings(here=False, sparse=[], _waiting=ready())

    def _keep(
        self,
        partition: str,
        texts: Sequence[str],
        found: list[Embedding | None],
        fresh: dict[str, Embedding],
    ) -> list[Embedding]:
        """Cache the fresh embeddings; all of them in the order of `texts`."""
        for text, embedding in fresh.items():
            self._cache.put((partition, text), embedding)
        return [
            hit if hit is not None else fresh[text] for text, hit in zip(texts, found, strict=True)
        ]

    def close(self) -> None:
        """Stop the question threads once the calls sent have finished."""
        self._threads.shutdown(wait=False)


class OtherModelQuestions:
    """Questions embedded by the dense models KBs migrated to (`ingest.embedder.models`),
    cached by (partition, model, text) as `QueryEmbeddings` caches the deployment's, in
    its question threads."""

    def __init__(
        self,
        models: DenseModels,
        cache: LruCache[tuple[str, str, str], tuple[float, ...]],
        threads: ThreadPoolExecutor,
    ) -> None:
        self._models = models
        self._cache = cache
        self._threads = threads

    async def dense(
        self, partition: str, model_id: str, texts: Sequence[str]
    ) -> list[tuple[float, ...]]:
        """The dense vectors of `texts` by `model_id`, in order, each distinct text once."""
        found = [self._cache.get((partition, model_id, text)) for text in texts]
        missing = list(dict.fromkeys(t for t, hit in zip(texts, found, strict=True) if hit is None))
        fresh: dict[str, tuple[float, ...]] = {}
        if missing:
            loop = asyncio.get_running_loop()
            vectors = await loop.run_in_executor(self._threads, self._embed, model_id, missing)
            fresh = dict(zip(missing, vectors, strict=True))
            for text, vector in fresh.items():
                self._cache.put((partition, model_id, text), vector)
        return [hit if hit is not None else fresh[t] for t, hit in zip(texts, found, strict=True)]

    def _embed(self, model_id: str, texts: list[str]) -> list[tuple[float, ...]]:
        return [embedding.dense for embedding in self._models.get(model_id).embed_queries(texts)]


def question_threads() -> int:
    """One fewer than the cores this process may use, at least one."""
    return max(1, len(os.sched_getaffinity(0)) - 1)
