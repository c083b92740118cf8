"""The question micro-batcher and the per-partition embedding cache, with a fake model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import pytest

from gateway.retrieval.query_embedding import QueryBatcher, QueryEmbeddings
from gateway.runtime.inflight import TurnsInFlight
from ingest.embedding import Embedding
from ingest.lru import LruCache
from tests.support.fake_embedder import FakeEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class GatedModel:
    """A fake model that records each call's texts; while `gate` is closed, calls block."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.batches: list[list[str]] = []
        self.fail_on: str | None = None
        self._inner = FakeEmbedder()

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        self.batches.append(list(texts))
        self.gate.wait(timeout=10)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("model failed")
        return self._inner.embed_queries(texts)

    def expected(self, texts: Sequence[str]) -> list[Embedding]:
        return FakeEmbedder().embed_queries(texts)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


async def test_a_lone_request_is_embedded_at_once_in_its_own_call() -> None:
    """With nothing in flight, a request starts a model call immediately (no batching window)."""
    model = GatedModel()
    batcher = QueryBatcher(model.embed_queries, max_texts=32)
    result = await asyncio.wait_for(batcher.embed(["one question", "a variation"]), timeout=5)
    assert result == model.expected(["one question", "a variation"])
    assert model.batches == [["one question", "a variation"]]


async def test_requests_arriving_during_a_call_share_the_next_call() -> None:
    """Requests queued behind a running call go together in one call; each gets its own
    embeddings in its own order, and a text asked by several is embedded once."""
    model = GatedModel()
    model.gate.clear()
    batcher = QueryBatcher(model.embed_queries, max_texts=32)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    queued = [asyncio.create_task(batcher.embed([f"q{i}", "shared"])) for i in range(5)]
    await asyncio.sleep(0.01)
    model.gate.set()
    results = await asyncio.gather(first, *queued)
    assert model.batches == [["first"], ["q0", "shared", "q1", "q2", "q3", "q4"]]
    assert results[0] == model.expected(["first"])
    for i, result in enumerate(results[1:]):
        assert result == model.expected([f"q{i}", "shared"])


async def test_each_lane_runs_a_batch_at_the_same_time_and_the_rest_queue() -> None:
    """With two lanes, two requests start two model calls at once; a third, arriving while
    both run, waits and goes in the next call a lane starts."""
    model = GatedModel()
    model.gate.clear()
    batcher = QueryBatcher(model.embed_queries, max_texts=32, lanes=2)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    second = asyncio.create_task(batcher.embed(["second"]))
    await _until(lambda: len(model.batches) == 2)
    third = asyncio.create_task(batcher.embed(["third"]))
    fourth = asyncio.create_task(batcher.embed(["fourth"]))
    await asyncio.sleep(0.01)
    assert len(model.batches) == 2
    model.gate.set()
    results = await asyncio.gather(first, second, third, fourth)
    assert model.batches == [["first"], ["second"], ["third", "fourth"]]
    for text, result in zip(["first", "second", "third", "fourth"], results, strict=True):
        assert result == model.expected([text])


def test_lanes_must_be_at_least_one() -> None:
    """A batcher without a lane could never embed: refused when built."""
    with pytest.raises(ValueError, match="lanes"):
        QueryBatcher(FakeEmbedder().embed_queries, max_texts=32, lanes=0)


async def test_a_batch_holds_whole_requests_up_to_max_texts() -> None:
    """Queued requests are never split; a batch stops before exceeding max_texts."""
    model = GatedModel()
    model.gate.clear()
    batcher = QueryBatcher(model.embed_queries, max_texts=4)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    queued = [asyncio.create_task(batcher.embed([f"a{i}", f"b{i}"])) for i in range(3)]
    await asyncio.sleep(0.01)
    model.gate.set()
    await asyncio.gather(first, *queued)
    assert model.batches == [["first"], ["a0", "b0", "a1", "b1"], ["a2", "b2"]]


async def test_a_failed_call_fails_every_caller_in_it_and_the_next_call_works() -> None:
    """The model's error reaches every request of that batch; the batcher keeps serving."""
    model = GatedModel()
    model.gate.clear()
    model.fail_on = "boom"
    batcher = QueryBatcher(model.embed_queries, max_texts=32)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    doomed = [asyncio.create_task(batcher.embed([text])) for text in ("boom", "innocent")]
    await asyncio.sleep(0.01)
    model.gate.set()
    assert await first == model.expected(["first"])
    for task in doomed:
        with pytest.raises(RuntimeError, match="model failed"):
            await task
    assert await batcher.embed(["later"]) == model.expected(["later"])


async def test_a_caller_that_gives_up_does_not_disturb_the_others() -> None:
    """A request cancelled while queued (a turn's timeout) is dropped; the rest are answered."""
    model = GatedModel()
    model.gate.clear()
    batcher = QueryBatcher(model.embed_queries, max_texts=32)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    gives_up = asyncio.create_task(batcher.embed(["impatient"]))
    stays = asyncio.create_task(batcher.embed(["patient"]))
    await asyncio.sleep(0.01)
    gives_up.cancel()
    model.gate.set()
    assert await stays == model.expected(["patient"])
    assert await first == model.expected(["first"])
    assert model.batches == [["first"], ["patient"]]


async def test_cached_questions_are_not_embedded_again_within_a_partition() -> None:
    """A text embedded for a partition is served from the cache there, in request order."""
    model = GatedModel()
    embeddings = QueryEmbeddings(QueryBatcher(model.embed_queries, max_texts=32), LruCache(16))
    first = await embeddings.embed("tenant-a", ["q1", "q2"])
    again = await embeddings.embed("tenant-a", ["q2", "q3", "q1", "q3"])
    assert first == model.expected(["q1", "q2"])
    assert again == model.expected(["q2", "q3", "q1", "q3"])
    assert model.batches == [["q1", "q2"], ["q3"]]


async def test_the_cache_is_never_shared_between_partitions() -> None:
    """The same question from another tenant is embedded afresh, not served from the cache."""
    model = GatedModel()
    embeddings = QueryEmbeddings(QueryBatcher(model.embed_queries, max_texts=32), LruCache(16))
    await embeddings.embed("tenant-a", ["same question"])
    await embeddings.embed("tenant-b", ["same question"])
    assert model.batches == [["same question"], ["same question"]]


async def test_the_cache_stays_within_its_bound() -> None:
    """Past its size, the cache forgets the oldest questions, which are then embedded again."""
    model = GatedModel()
    cache: LruCache[tuple[str, str], Embedding] = LruCache(2)
    embeddings = QueryEmbeddings(QueryBatcher(model.embed_queries, max_texts=32), cache)
    for text in ("a", "b", "c"):
        await embeddings.embed("t", [text])
    assert len(cache) == 2
    await embeddings.embed("t", ["a"])
    assert model.batches == [["a"], ["b"], ["c"], ["a"]]


def test_one_batcher_serves_successive_event_loops() -> None:
    """A batcher built once (in the composition root) keeps working when a later event loop
    uses it, as tests sharing services across loops do."""
    model = GatedModel()
    batcher = QueryBatcher(model.embed_queries, max_texts=32)
    first = asyncio.run(batcher.embed(["in the first loop"]))
    second = asyncio.run(batcher.embed(["in the second loop"]))
    assert first == model.expected(["in the first loop"])
    assert second == model.expected(["in the second loop"])


class ThreadRecordingModel(GatedModel):
    """A GatedModel that also records the thread each call ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        self.threads.append(threading.get_ident())
        return super().embed_queries(texts)


async def test_a_caller_alone_is_embedded_in_its_own_thread() -> None:
    """When `alone()` says no other turn is in flight, the model runs in the calling thread
    (no hop to a worker); otherwise in a worker thread. The vectors are the same, and a
    text asked twice is embedded once either way."""
    model = ThreadRecordingModel()
    alone = True
    batcher = QueryBatcher(model.embed_queries, max_texts=32, lanes=2, alone=lambda: alone)
    here = await batcher.embed(["a question", "a variation", "a question"])
    alone = False
    away = await batcher.embed(["a question", "a variation", "a question"])
    assert here == away == model.expected(["a question", "a variation", "a question"])
    assert model.threads[0] == threading.get_ident()
    assert model.threads[1] != threading.get_ident()
    assert model.batches == [["a question", "a variation"]] * 2
    assert (batcher.calls, batcher.texts_embedded) == (2, 4)


async def test_a_caller_alone_still_queues_behind_a_batch_in_flight() -> None:
    """A batch running in a worker means the caller is not alone after all: its request
    queues for the next batch instead of blocking the event loop on the model."""
    model = ThreadRecordingModel()
    model.gate.clear()
    alone = False
    batcher = QueryBatcher(model.embed_queries, max_texts=32, alone=lambda: alone)
    first = asyncio.create_task(batcher.embed(["first"]))
    await _until(lambda: len(model.batches) == 1)
    alone = True
    second = asyncio.create_task(batcher.embed(["second"]))
    await asyncio.sleep(0.02)  # the loop still runs: nothing waits on the gate here
    assert not second.done()
    model.gate.set()
    assert await asyncio.wait_for(second, timeout=5) == model.expected(["second"])
    await first
    assert model.batches == [["first"], ["second"]]
    assert threading.get_ident() not in model.threads


async def test_turns_started_together_do_not_each_find_themselves_alone() -> None:
    """Before embedding in place, a caller alone yields to the event loop once: a turn
    started in the same moment counts itself meanwhile, so neither runs the model in the
    loop's thread (each would otherwise keep the other from starting, one after another)."""
    model = ThreadRecordingModel()
    turns = TurnsInFlight()
    batcher = QueryBatcher(model.embed_queries, max_texts=32, lanes=2, alone=turns.alone)

    async def one_turn(text: str) -> list[Embedding]:
        with turns.running():
            return await batcher.embed([text])

    first, second = await asyncio.gather(one_turn("first"), one_turn("second"))
    assert (first, second) == (model.expected(["first"]), model.expected(["second"]))
    assert len(model.threads) >= 1
    assert threading.get_ident() not in model.threads
