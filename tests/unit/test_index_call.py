"""How a turn calls its index: directly for an engine that holds the GIL throughout, in a
worker thread under the index timeout otherwise."""

from __future__ import annotations

import threading
import time

import pytest

from gateway.retrieval.legs import call_index

pytestmark = pytest.mark.anyio


def _thread_after(delay_s: float) -> int:
    time.sleep(delay_s)
    return threading.get_ident()


async def test_an_engine_holding_the_gil_is_called_in_the_calling_thread() -> None:
    """Qdrant Edge's calls hold the GIL from start to end, so a worker thread would only add
    hops: the call runs in the event loop's own thread, to the end (no timeout can fire
    inside such a call, so none is set)."""
    ran_in = await call_index(True, 0.01, _thread_after, 0.05)
    assert ran_in == threading.get_ident()


async def test_an_engine_waiting_without_the_gil_runs_in_a_worker_thread() -> None:
    """A server engine's calls wait on the network: they run in a worker thread, so the
    event loop serves other turns meanwhile."""
    ran_in = await call_index(False, 1.0, _thread_after, 0.0)
    assert ran_in != threading.get_ident()


async def test_a_worker_thread_call_past_the_timeout_raises_timeout() -> None:
    """A server engine slower than the index timeout ends the wait with TimeoutError (the
    turn answers 503), without waiting for the engine."""
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        await call_index(False, 0.05, _thread_after, 0.5)
    assert time.perf_counter() - started < 0.4
