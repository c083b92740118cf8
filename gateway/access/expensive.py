"""Expensive work apart from everything else: its own bounded pool, a per-workspace limit.

Grounding checks, call-time redaction (`/v1/redact`) and the embedding of ingested
documents take from milliseconds to seconds of CPU each. They run on a pool of their own
(`KBGATE_EXPENSIVE_THREADS`, one thread per core by default), never on the shared pool
that the settings store, the index's cheap calls and retrieval turns use, so a flood of
them cannot make those queue. A workspace may have `KBGATE_EXPENSIVE_PER_WORKSPACE`
such requests running or queued at once; one more answers 429 with Retry-After at once
(RateLimitedError), rather than queue work nobody bounds. Document writes are the
exception: a write waits for its workspace's turn (in order), so a connector or an
import that sends several documents at once is slowed, never refused.

Work whose caller gives up (its timeout passes, or the client disconnects) is told so
through its `Stop` flag, which the long loops (per sentence, per string) check between
units: an abandoned thread stops within one unit of work. Its slot is given back when
the thread is done, not when the caller leaves, so abandoned work still counts against
its workspace until it has stopped.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from typing import TypeVar

from gateway.errors import RateLimitedError

T = TypeVar("T")

#: What a workspace over its limit is told to wait before retrying.
RETRY_AFTER_S = 1.0


class Stop:
    """A flag the caller sets when it gives up; the work reads it between units."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()


class WorkStopped(Exception):
    """Raised inside expensive work when its caller gave up, between two units of work."""


def stop_point(stop: Stop | None) -> None:
    """Where a long loop may stop: raises WorkStopped once the caller gave up."""
    if stop is not None and stop.requested:
        raise WorkStopped


class ExpensiveWork:
    """The bounded pool and the per-workspace count of requests it holds."""

    def __init__(self, threads: int | None, per_workspace: int) -> None:
        workers = threads or len(os.sched_getaffinity(0))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kbgate-expensive")
        self._per_workspace = per_workspace
        self._held: Counter[str] = Counter()
        #: per workspace, the callers waiting for a slot, first come first served
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def held(self, tenant_id: str) -> int:
        """Requests of this workspace now running or queued on the pool."""
        return self._held[tenant_id]

    async def run(
        self,
        tenant_id: str,
        work: Callable[[Stop], T],
        *,
        timeout_s: float | None = None,
        stop: Stop | None = None,
        wait: bool = False,
    ) -> T:
        """`work(stop)` on the pool for `tenant_id`; past its limit, RateLimitedError, or
        with `wait`, once an earlier request of the workspace is done.

        On timeout (TimeoutError) or cancellation (the caller's task is cancelled) the
        stop flag is set and the error propagates; the work stops at its next unit.
        """
        await self._take(tenant_id, wait)
        flag = stop or Stop()
        loop = asyncio.get_running_loop()
        try:
            submitted: Future[T] = self._pool.submit(work, flag)
        except BaseException:
            self._release(tenant_id)
            raise
        submitted.add_done_callback(lambda _: self._release_from(loop, tenant_id))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(submitted), timeout_s)
        except BaseException:
            flag.set()
            submitted.cancel()  # not started yet: never starts
            raise

    def _release_from(self, loop: asyncio.AbstractEventLoop, tenant_id: str) -> None:
        """Give the slot back on the event loop (the count is the loop's alone)."""
        with suppress(RuntimeError):  # the loop has closed: nobody counts any more
            loop.call_soon_threadsafe(self._release, tenant_id)

    async def _take(self, tenant_id: str, wait: bool) -> None:
        """Count one more request of the workspace, waiting for a slot if `wait`."""
        if self._held[tenant_id] < self._per_workspace:
            self._held[tenant_id] += 1
            return
        if not wait:
            raise RateLimitedError(
                RETRY_AFTER_S,
                message="this workspace already runs its limit of expensive requests; retry later",
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant_id, deque()).append(turn)
        try:
            await turn  # a finished request hands its slot over (`_release`)
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._release(tenant_id)  # handed over just as this caller left
            elif turn in (queue := self._waiting.get(tenant_id, deque())):
                queue.remove(turn)
            raise

    def _release(self, tenant_id: str) -> None:
        waiting = self._waiting.get(tenant_id)
        while waiting:
            turn = waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes on: the count stays
                return
        self._waiting.pop(tenant_id, None)
        self._held[tenant_id] -= 1
        if self._held[tenant_id] <= 0:
            del self._held[tenant_id]

    def close(self) -> None:
        """Stop taking work; threads finish what they run (each stops at its next unit)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
