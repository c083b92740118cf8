"""The embedder's runners serve lanes (workspaces) fairly: a lane's backlog never stands
in front of another lane's next call."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from ingest.embedder.lanes import LaneRunner


def _blocked(runner: LaneRunner, lane: str, gate: threading.Event) -> Future[str]:
    """A call in `lane` that runs until `gate` is set."""
    started = threading.Event()

    def hold() -> str:
        started.set()
        gate.wait(5)
        return lane

    future = runner.submit(lane, hold)
    assert started.wait(5)
    return future


def test_a_new_lane_runs_before_another_lanes_backlog() -> None:
    """With one runner busy on workspace A's call and five more of A's queued, B's one
    call runs next, before any of A's queue."""
    runner = LaneRunner(1, thread_name_prefix="test-lanes")
    order: list[str] = []
    lock = threading.Lock()

    def record(name: str) -> None:
        with lock:
            order.append(name)

    gate = threading.Event()
    first = _blocked(runner, "a", gate)
    backlog = [runner.submit("a", record, f"a{n}") for n in range(5)]
    b = runner.submit("b", record, "b")
    gate.set()
    first.result(5)
    for future in [*backlog, b]:
        future.result(5)
    runner.shutdown()
    assert order[0] == "b"
    assert order[1:] == [f"a{n}" for n in range(5)]


def test_an_idle_lane_earns_no_credit() -> None:
    """A lane that comes while another has long been served starts level with it, not at
    zero: their backlogs alternate rather than the newcomer's running all first."""
    runner = LaneRunner(1, thread_name_prefix="test-lanes")
    order: list[str] = []

    def record(name: str) -> None:
        time.sleep(0.01)
        order.append(name)

    gate = threading.Event()
    first = _blocked(runner, "a", gate)
    a_calls = [runner.submit("a", record, f"a{n}") for n in range(4)]
    time.sleep(0.05)  # A's first call has run 50 ms
    gate.set()
    a_calls[0].result(5)
    b_calls = [runner.submit("b", record, f"b{n}") for n in range(4)]
    first.result(5)
    for future in [*a_calls, *b_calls]:
        future.result(5)
    runner.shutdown()
    lanes = "".join(name[0] for name in order)
    assert "bbbb" not in lanes, lanes


def test_errors_reach_the_caller_and_the_runner_goes_on() -> None:
    """A call that raises hands its error to its future; later calls still run."""
    runner = LaneRunner(2, thread_name_prefix="test-lanes")

    def fail() -> None:
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        runner.submit("a", fail).result(5)
    assert runner.submit("a", lambda: 7).result(5) == 7
    runner.shutdown()


def test_shutdown_runs_what_is_queued_and_refuses_more() -> None:
    """Shutting down lets queued calls finish, then submitting raises."""
    runner = LaneRunner(1, thread_name_prefix="test-lanes")
    gate = threading.Event()
    first = _blocked(runner, "a", gate)
    queued = runner.submit("b", lambda: "done")
    closer = threading.Thread(target=runner.shutdown)
    closer.start()
    gate.set()
    closer.join(5)
    assert first.result(0) == "a"
    assert queued.result(0) == "done"
    with pytest.raises(RuntimeError, match="closed"):
        runner.submit("a", lambda: None)
