"""Document writes wait their workspace's turn on the expensive pool; other work is refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from gateway.access.expensive import ExpensiveWork, Stop
from gateway.errors import RateLimitedError


def test_writes_past_the_limit_wait_in_order_while_other_work_is_refused() -> None:
    """With one slot per workspace, three waiting writes all run, one after another and
    in arrival order; a non-waiting call meanwhile gets RateLimitedError; another
    workspace is not held up; a cancelled waiter gives its place up."""

    async def scenario() -> None:
        work = ExpensiveWork(threads=2, per_workspace=1)
        order: list[int] = []
        gate = threading.Event()

        def write(number: int) -> Callable[[Stop], int]:
            def run(_: Stop) -> int:
                gate.wait(5)
                order.append(number)
                return number

            return run

        writes = [asyncio.create_task(work.run("a", write(n), wait=True)) for n in range(3)]
        await asyncio.sleep(0.05)
        assert work.held("a") == 1
        with pytest.raises(RateLimitedError):
            await work.run("a", lambda _: 0)
        cancelled = asyncio.create_task(work.run("a", lambda _: -1, wait=True))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        started = time.perf_counter()
        assert await work.run("b", lambda _: "other") == "other"
        assert time.perf_counter() - started < 1
        gate.set()
        assert await asyncio.gather(*writes) == [0, 1, 2]
        assert order == [0, 1, 2]
        await asyncio.sleep(0.05)
        assert work.held("a") == 0
        work.close()

    asyncio.run(scenario())
