"""Runner threads shared fairly between lanes (workspaces).

The embedder's passage runs are one passage each, a few milliseconds of CPU. Callers of
several workspaces queue them at once; in one queue, first come first served, a
workspace's single document would wait behind every run another workspace's bulk write
has queued. Here each lane has a queue of its own, and a free runner takes the next call
of the lane that has had the least runner time (its virtual time). A lane that was idle
starts level with the least-served busy lane, so idleness earns no credit to spend later.
A caller then waits for the runs in progress, not for another lane's backlog.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Call:
    future: Future[Any]
    run: Callable[[], Any]


class LaneRunner:
    """`workers` threads, started on the first calls, that run submitted calls lane by
    lane, least-served lane first; thread-safe."""

    def __init__(
        self,
        workers: int,
        *,
        thread_name_prefix: str,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._workers = workers
        self._prefix = thread_name_prefix
        self._initializer = initializer
        self._ready = threading.Condition(threading.Lock())
        self._queues: dict[str, deque[_Call]] = {}
        #: per lane with calls queued or running: runner seconds had
        self._vtime: dict[str, float] = {}
        self._running: dict[str, int] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, lane: str, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue `fn(*args)` in `lane`; its future holds the outcome."""
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the runner is closed")
            if lane not in self._vtime:
                self._vtime[lane] = min(self._vtime.values(), default=0.0)
            self._queues.setdefault(lane, deque()).append(_Call(future, lambda: fn(*args)))
            if len(self._threads) < self._workers:
                self._start_thread()
            self._ready.notify()
        return future

    def shutdown(self, wait: bool = True) -> None:
        """Take no more calls; the queued ones still run. With `wait`, return once all ran."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._serve, name=f"{self._prefix}_{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while (taken := self._take()) is not None:
            lane, call = taken
            began = time.perf_counter()
            if call.future.set_running_or_notify_cancel():
                try:
                    call.future.set_result(call.run())
                except BaseException as error:
                    call.future.set_exception(error)
            self._done(lane, time.perf_counter() - began)

    def _take(self) -> tuple[str, _Call] | None:
        """The next call of the least-served lane, waiting for one; None once closed and
        drained."""
        with self._ready:
            while not self._queues:
                if self._closed:
                    return None
                self._ready.wait()
            lane = min(self._queues, key=self._vtime.__getitem__)
            queue = self._queues[lane]
            call = queue.popleft()
            if not queue:
                del self._queues[lane]
            self._running[lane] = self._running.get(lane, 0) + 1
            return lane, call

    def _done(self, lane: str, ran_s: float) -> None:
        with self._ready:
            self._vtime[lane] += ran_s
            self._running[lane] -= 1
            if not self._running[lane]:
                del self._running[lane]
                if lane not in self._queues:
                    del self._vtime[lane]
