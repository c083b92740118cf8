"""Document writes wait their workspace's turn on the expensive pool; other work is refused;
run slots are shared fairly between workspaces."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Callable

import pytest

from gateway.access.expensive import ExpensiveWork, Stop, stop_point
from gateway.errors import RateLimitedError
from gateway.telemetry import Telemetry, build_logger


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


def _units(count: int, unit_s: float) -> Callable[[Stop], int]:
    """Work of `count` units of `unit_s` each, with a stop point between two units."""

    def run(flag: Stop) -> int:
        for _ in range(count):
            stop_point(flag)
            time.sleep(unit_s)
        return count

    return run


def test_another_workspace_waits_one_unit_not_behind_a_flood() -> None:
    """While one workspace's two long jobs hold both run slots and six more of its writes
    queue, another workspace's short job starts within a few units of work, and the
    flood's jobs give their slot up for it (counted in /metrics as turns given up); the
    waits are in `kbgate_expensive_wait_seconds` by kind and queue, with no workspace."""

    async def scenario() -> None:
        telemetry = Telemetry(build_logger("ERROR", io.StringIO()))
        work = ExpensiveWork(threads=2, per_workspace=2, metrics=telemetry)
        flood = [
            asyncio.create_task(work.run("a", _units(100, 0.01), kind="ingest", wait=True))
            for _ in range(8)
        ]
        await asyncio.sleep(0.1)
        waits = []
        for _ in range(5):
            started = time.perf_counter()
            assert await work.run("b", _units(1, 0.001), kind="grounding") == 1
            waits.append(time.perf_counter() - started)
            await asyncio.sleep(0.02)
        assert max(waits) < 0.1, waits
        assert not any(task.done() for task in flood)
        for task in flood:
            task.cancel()
        await asyncio.gather(*flood, return_exceptions=True)
        work.close()
        text = telemetry.exposition().decode()
        assert 'kbgate_events_total{event="expensive_turns_given_up"}' in text
        assert 'kbgate_expensive_wait_seconds_count{kind="grounding",queue="shared"} 5.0' in text
        assert 'kbgate_expensive_wait_seconds_count{kind="ingest",queue="own"}' in text
        assert '"a"' not in text
        assert '"b"' not in text

    asyncio.run(scenario())


def test_two_busy_workspaces_share_the_slot_time() -> None:
    """Two workspaces each keeping two long jobs on one run slot get about half of its
    time each: the slot goes to the one that has had less."""

    async def scenario() -> None:
        work = ExpensiveWork(threads=1, per_workspace=2)
        done: dict[str, int] = {"a": 0, "b": 0}
        stop_all = threading.Event()

        def job(tenant: str) -> Callable[[Stop], None]:
            def run(flag: Stop) -> None:
                while not stop_all.is_set():
                    stop_point(flag)
                    time.sleep(0.002)
                    done[tenant] += 1

            return run

        tasks = [
            asyncio.create_task(work.run(tenant, job(tenant))) for tenant in ("a", "a", "b", "b")
        ]
        await asyncio.sleep(1.0)
        stop_all.set()
        await asyncio.gather(*tasks)
        work.close()
        share = done["a"] / (done["a"] + done["b"])
        assert 0.35 < share < 0.65, done

    asyncio.run(scenario())


def test_a_workspace_alone_has_every_slot_and_leaves_one_once_another_has_worked() -> None:
    """Alone, a workspace's two long calls run side by side on the two slots; once another
    workspace has used the pool, the burst holds one slot and the other's call starts at
    once while the burst's second call waits its turn."""

    async def scenario() -> None:
        work = ExpensiveWork(threads=2, per_workspace=2)
        running: list[str] = []
        overlap: list[int] = []
        lock = threading.Lock()

        def long(name: str) -> Callable[[Stop], str]:
            def run(_: Stop) -> str:
                with lock:
                    running.append(name)
                    overlap.append(len(running))
                time.sleep(0.2)
                with lock:
                    running.remove(name)
                return name

            return run

        alone = await asyncio.gather(work.run("a", long("a1")), work.run("a", long("a2")))
        assert list(alone) == ["a1", "a2"]
        assert max(overlap) == 2  # alone: both slots

        assert await work.run("b", lambda _: "b") == "b"  # b has now worked here
        overlap.clear()
        burst = [asyncio.create_task(work.run("a", long(f"a{n}"))) for n in (3, 4)]
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        assert await work.run("b", lambda _: "b again") == "b again"
        assert time.perf_counter() - started < 0.1  # a slot was left for b
        assert await asyncio.gather(*burst) == ["a3", "a4"]
        assert max(overlap) == 1  # the burst ran its calls one at a time
        work.close()

    asyncio.run(scenario())
