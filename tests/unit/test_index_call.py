"""How a turn calls its index: in a worker thread under the index timeout, or, for an
engine that holds the GIL throughout (Qdrant Edge), directly and without a bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.retrieval.index_calls import call_index

pytestmark = pytest.mark.anyio


def _answer_after(delay_s: float, answer: str) -> str:
    time.sleep(delay_s)
    return answer


async def test_the_event_loop_serves_others_while_a_server_call_waits() -> None:
    """While a server engine waits on the network, other tasks keep running."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    beside = asyncio.create_task(ticker())
    try:
        assert await call_index(False, 1.0, _answer_after, 0.1, answer="found") == "found"
    finally:
        beside.cancel()
    assert ticks >= 5


async def test_a_server_call_past_the_timeout_raises_timeout() -> None:
    """A server engine slower than the index timeout ends the wait with TimeoutError (the
    turn answers 503), without waiting for the engine."""
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        await call_index(False, 0.05, _answer_after, 0.5, answer="late")
    assert time.perf_counter() - started < 0.4


async def test_an_engine_holding_the_gil_is_not_bounded() -> None:
    """An engine that holds the GIL throughout is called without a bound: a call slower
    than the index timeout still answers (no timeout could fire during it anyway)."""
    assert await call_index(True, 0.01, _answer_after, 0.05, answer="slow") == "slow"
