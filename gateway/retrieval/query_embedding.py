"""Question embeddings for retrieval turns: a bounded cache in front of the model.

`QueryEmbeddings` keeps recent question embeddings in an `LruCache` keyed by
(partition, exact text); the turn passes the tenant id as the partition. An
embedding holds no tenant data, but a shared entry would let one tenant tell by
timing whether another asked the same question, so entries are never shared.
Questions not in the cache are embedded one call per turn in the question threads (the
model releases the GIL), one fewer than the cores: concurrent turns' questions run side
by side while the event loop, which runs every turn's index calls, keeps a core rather
than waiting its turn among model runs (docs/decisions/query-batching.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ingest.embedding import Embedding
from ingest.lru import LruCache

EmbedFn = Callable[[Sequence[str]], list[Embedding]]


class QueryEmbeddings:
    """Cached question embeddings; the cache never serves one partition to another."""

    def __init__(
        self,
        embed: EmbedFn,
        cache: LruCache[tuple[str, str], Embedding],
        threads: int | None = None,
    ) -> None:
        """`embed` is a blocking `Embedder.embed_queries`; it runs in `threads` threads of
        this object's own (None: `question_threads()`). `close` stops them."""
        self._embed = embed
        self._cache = cache
        self._threads = ThreadPoolExecutor(
            threads or question_threads(), thread_name_prefix="kbgate-question"
        )

    @property
    def cache(self) -> LruCache[tuple[str, str], Embedding]:
        return self._cache

    async def embed(self, partition: str, texts: Sequence[str]) -> list[Embedding]:
        """The embeddings of `texts` in order: cached ones from `partition`, the rest from
        the model, each distinct text once."""
        found = [self._cache.get((partition, text)) for text in texts]
        missing = list(dict.fromkeys(t for t, hit in zip(texts, found, strict=True) if hit is None))
        if not missing:
            return [hit for hit in found if hit is not None]
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._threads, self._embed, missing)
        fresh = dict(zip(missing, vectors, strict=True))
        for text, embedding in fresh.items():
            self._cache.put((partition, text), embedding)
        return [
            hit if hit is not None else fresh[text] for text, hit in zip(texts, found, strict=True)
        ]

    def close(self) -> None:
        """Stop the question threads once the calls sent have finished."""
        self._threads.shutdown(wait=False)


def question_threads() -> int:
    """One fewer than the cores this process may use, at least one."""
    return max(1, len(os.sched_getaffinity(0)) - 1)
