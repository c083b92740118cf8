"""The per-partition question embedding cache, with a recording model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import pytest

from gateway.retrieval.query_embedding import QueryEmbeddings, TurnsInFlight
from ingest.embedder.embedding import Embedding, PreparedQuestions
from ingest.index import SparseVector
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


class SplitModel:
    """A fake model whose question vectors come apart (`QuestionModel`), recording in which
    thread each dense run happened."""

    def __init__(self) -> None:
        self._inner = FakeEmbedder()
        self.dense_threads: list[int] = []

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        self.dense_threads.append(threading.get_ident())
        return self._inner.embed_queries(texts)

    def query_sparse(self, texts: Sequence[str]) -> list[SparseVector]:
        return [embedding.sparse for embedding in self._inner.embed_queries(texts)]

    def prepare_questions(self, texts: Sequence[str]) -> PreparedQuestions:
        return PreparedQuestions(tuple(texts), ())

    def run_questions(self, prepared: PreparedQuestions) -> list[tuple[float, ...]]:
        self.dense_threads.append(threading.get_ident())
        return [embedding.dense for embedding in self._inner.embed_queries(prepared.texts)]


async def test_a_lone_turns_question_is_embedded_in_its_own_thread_with_its_bm25_at_once() -> None:
    """`start(here=True)` gives every text's BM25 vector before any model run, then runs the
    model in the awaiting thread; the embeddings equal the question threads' and are cached."""
    model = SplitModel()
    embeddings = QueryEmbeddings(model.embed_queries, LruCache(16), model=model)
    await embeddings.embed("t", ["known"])
    pending = embeddings.start("t", ["new", "known", "new"], here=True)
    assert pending.here
    expected = FakeEmbedder().embed_queries(["new", "known", "new"])
    assert pending.sparse == [embedding.sparse for embedding in expected]
    assert len(model.dense_threads) == 1  # only "known", earlier, in a question thread
    assert await pending.embeddings() == expected
    assert model.dense_threads[1] == threading.get_ident()
    again = embeddings.start("t", ["new"], here=True)
    assert not again.here  # cached: nothing to run
    assert await again.embeddings() == expected[:1]
    assert len(model.dense_threads) == 2
    embeddings.close()


async def test_a_turn_not_alone_embeds_in_the_question_threads() -> None:
    """Without `here`, or without a model that splits, `start` embeds as `embed` does."""
    model = SplitModel()
    for embeddings, here in (
        (QueryEmbeddings(model.embed_queries, LruCache(0), model=model), False),
        (QueryEmbeddings(model.embed_queries, LruCache(0)), True),
    ):
        pending = embeddings.start("t", ["question"], here=here)
        assert not pending.here
        assert await pending.embeddings() == FakeEmbedder().embed_queries(["question"])
        assert model.dense_threads[-1] != threading.get_ident()
        embeddings.close()


def test_turns_in_flight_tell_a_lone_turn() -> None:
    """A turn is alone only while no other is inside; the count falls back when a turn
    leaves, also on an error."""
    turns = TurnsInFlight()
    seen: list[bool] = []
    with turns.entered():
        seen.append(turns.alone)
        with turns.entered():
            seen.append(turns.alone)
        seen.append(turns.alone)
    with pytest.raises(RuntimeError), turns.entered():
        raise RuntimeError("turn failed")
    seen.append(turns.alone)
    with turns.entered():
        seen.append(turns.alone)
    assert seen == [True, False, True, False, True]
