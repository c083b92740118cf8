"""Question embeddings for retrieval turns: a bounded cache in front of the model.

`QueryEmbeddings` keeps recent question embeddings in an `LruCache` keyed by
(partition, exact text); the turn passes the tenant id as the partition. An
embedding holds no tenant data, but a shared entry would let one tenant tell by
timing whether another asked the same question, so entries are never shared.
Questions not in the cache are embedded in a worker thread (the model releases the
GIL), one call per turn, so concurrent turns' questions run on the cores side by side
while the event loop serves other turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ingest.embedding import Embedding
from ingest.lru import LruCache

EmbedFn = Callable[[Sequence[str]], list[Embedding]]


class QueryEmbeddings:
    """Cached question embeddings; the cache never serves one partition to another."""

    def __init__(self, embed: EmbedFn, cache: LruCache[tuple[str, str], Embedding]) -> None:
        """`embed` is a blocking `Embedder.embed_queries`; it runs in worker threads."""
        self._embed = embed
        self._cache = cache

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
        vectors = await asyncio.to_thread(self._embed, missing)
        fresh = dict(zip(missing, vectors, strict=True))
        for text, embedding in fresh.items():
            self._cache.put((partition, text), embedding)
        return [
            hit if hit is not None else fresh[text] for text, hit in zip(texts, found, strict=True)
        ]
