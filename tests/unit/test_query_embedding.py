"""The per-partition question embedding cache, with a recording model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import pytest

from gateway.retrieval.query_embedding import QueryEmbeddings
from ingest.embedding import Embedding
from ingest.lru import LruCache
from tests.support.fake_embedder import FakeEmbedder

pytestmark = pytest.mark.anyio


class GatedModel:
    """A fake model that records each call's texts; while `gate` is closed, calls block."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.batches: list[list[str]] = []
        self._inner = FakeEmbedder()

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        self.batches.append(list(texts))
        self.gate.wait(timeout=10)
        return self._inner.embed_queries(texts)

    def expected(self, texts: Sequence[str]) -> list[Embedding]:
        return FakeEmbedder().embed_queries(texts)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


async def test_a_question_asked_twice_in_one_call_is_embedded_once() -> None:
    """Each distinct text goes to the model once; the answer follows the request's order."""
    model = GatedModel()
    embeddings = QueryEmbeddings(model.embed_queries, LruCache(0))
    result = await embeddings.embed("t", ["a question", "a variation", "a question"])
    assert result == model.expected(["a question", "a variation", "a question"])
    assert model.batches == [["a question", "a variation"]]


Question = asyncio.Task[list[Embedding]]
Turns = tuple[GatedModel, QueryEmbeddings, Question, Question]


def _two_gated_turns(threads: int) -> Turns:
    """A closed-gate model behind `threads` question threads, and two turns' questions
    ("first", then "second") sent to it."""
    model = GatedModel()
    model.gate.clear()
    embeddings = QueryEmbeddings(model.embed_queries, LruCache(0), threads=threads)
    first = asyncio.create_task(embeddings.embed("t", ["first"]))
    second = asyncio.create_task(embeddings.embed("t", ["second"]))
    return model, embeddings, first, second


async def test_concurrent_turns_embed_side_by_side_without_blocking_the_loop() -> None:
    """With two question threads, two turns' questions are in the model at the same time,
    and the event loop keeps running while both wait on it."""
    model, embeddings, first, second = _two_gated_turns(threads=2)
    await _until(lambda: len(model.batches) == 2)
    assert not first.done()
    assert not second.done()
    model.gate.set()
    assert await first == model.expected(["first"])
    assert await second == model.expected(["second"])
    embeddings.close()


async def test_questions_beyond_the_question_threads_wait_for_a_free_one() -> None:
    """With one question thread, a second turn's question reaches the model only once the
    first's call has returned: never more model runs at once than threads."""
    model, embeddings, first, second = _two_gated_turns(threads=1)
    await _until(lambda: len(model.batches) == 1)
    await asyncio.sleep(0.05)
    assert model.batches == [["first"]]
    model.gate.set()
    assert await first == model.expected(["first"])
    assert await second == model.expected(["second"])
    assert model.batches == [["first"], ["second"]]
    embeddings.close()


async def test_cached_questions_are_not_embedded_again_within_a_partition() -> None:
    """A text embedded for a partition is served from the cache there, in request order."""
    model = GatedModel()
    embeddings = QueryEmbeddings(model.embed_queries, LruCache(16))
    first = await embeddings.embed("tenant-a", ["q1", "q2"])
    again = await embeddings.embed("tenant-a", ["q2", "q3", "q1", "q3"])
    assert first == model.expected(["q1", "q2"])
    assert again == model.expected(["q2", "q3", "q1", "q3"])
    assert model.batches == [["q1", "q2"], ["q3"]]


async def test_the_cache_is_never_shared_between_partitions() -> None:
    """The same question from another tenant is embedded afresh, not served from the cache."""
    model = GatedModel()
    embeddings = QueryEmbeddings(model.embed_queries, LruCache(16))
    await embeddings.embed("tenant-a", ["same question"])
    await embeddings.embed("tenant-b", ["same question"])
    assert model.batches == [["same question"], ["same question"]]


async def test_the_cache_stays_within_its_bound() -> None:
    """Past its size, the cache forgets the oldest questions, which are then embedded again."""
    model = GatedModel()
    cache: LruCache[tuple[str, str], Embedding] = LruCache(2)
    embeddings = QueryEmbeddings(model.embed_queries, cache)
    for text in ("a", "b", "c"):
        await embeddings.embed("t", [text])
    assert len(cache) == 2
    await embeddings.embed("t", ["a"])
    assert model.batches == [["a"], ["b"], ["c"], ["a"]]
