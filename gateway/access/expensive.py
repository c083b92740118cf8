"""Expensive work apart from everything else: its own pool, fair shares between workspaces.

Grounding checks, call-time redaction (`/v1/redact`), the embedding and PII analysis of
ingested documents, an import's reading and analysis and an evaluation's units take
from milliseconds to seconds of CPU each. They run on threads of their own, never on
the shared pool that the settings store, the index's cheap calls and retrieval turns
use, so a flood of them cannot make those queue.

Admission. A workspace may have `KBGATE_EXPENSIVE_PER_WORKSPACE` such requests running
or queued at once; one more answers 429 with Retry-After at once (RateLimitedError),
rather than queue work nobody bounds. Document writes, imports and evaluation units are
the exception: they wait for their workspace's turn (in order, `wait=True`), so a
connector that sends several documents at once is slowed, never refused. That wait is
behind the workspace's own work only.

Fair shares. Admitted work runs on `KBGATE_EXPENSIVE_THREADS` run slots (one per core
by default), handed out by `FairShares`: each workspace with work waiting has a queue,
and a free slot goes to the waiting workspace that has had the least slot time (its
virtual time; a workspace that was idle starts level with the least-served busy one,
so idleness earns no credit to spend later). Long work gives its slot up between two
units (`stop_point`, `pause_point`) once another workspace's work waits and it has run
`TURN_S`, or once its own workspace's work waits and it has run `SLICE_S`; it then
queues again behind that work. So a workspace's burst queues behind its own work, and
another workspace's next job waits at most one unit of work per slot. A job keeps its
thread while it waits for a slot again; threads are bounded by admission (at most
`per_workspace` jobs of each workspace) and by `max_threads`.

Work whose caller gives up (its timeout passes, or the client disconnects) is told so
through its `Stop` flag, which the long loops check between units (`stop_point`): an
abandoned thread stops within one unit of work; one not started yet never starts. Its
admission slot is given back when the thread is done, not when the caller leaves, so
abandoned work still counts against its workspace until it has stopped.

Waiting shows in /metrics as `kbgate_expensive_wait_seconds` by kind of work and queue
(`own`: admission, behind the workspace's own work; `shared`: for a run slot, summed
over a job's slices), never by workspace.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from gateway.errors import RateLimitedError

T = TypeVar("T")

#: What a workspace over its limit is told to wait before retrying.
RETRY_AFTER_S = 1.0
#: Slot time after which work gives its slot up to another workspace's waiting work.
TURN_S = 0.005
#: Slot time after which work gives its slot up to its own workspace's waiting work.
SLICE_S = 0.1
#: How long a workspace that used the pool counts as present: while one other than a
#: burst's is, the burst holds one slot fewer than all (`FairShares._cap`).
SHARED_MEMORY_S = 10.0
#: Threads that may hold started jobs, per run slot (at least `MIN_THREADS` in all).
THREADS_PER_SLOT = 8
MIN_THREADS = 32


class WaitMetrics(Protocol):
    """Where the waiting times go (`gateway.telemetry.Telemetry`)."""

    def observe_expensive_wait(self, kind: str, queue: str, seconds: float) -> None: ...

    def count(self, event: str, amount: float = 1) -> None: ...


class Stop:
    """A flag the caller sets when it gives up; the work reads it between units. The
    pool binds it to the job's turn, so the same points may give the slot up."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._pause: Callable[[], None] | None = None

    def set(self) -> None:
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def bind(self, pause: Callable[[], None] | None) -> None:
        """What `pause` does: give the run slot up if the job's turn is over (the pool)."""
        self._pause = pause

    def pause(self) -> None:
        """Give the run slot up if the job's turn is over, and wait for it again."""
        if self._pause is not None:
            self._pause()


class WorkStopped(Exception):
    """Raised inside expensive work when its caller gave up, between two units of work."""


def stop_point(stop: Stop | None) -> None:
    """Where a long loop may stop: raises WorkStopped once the caller gave up; else it
    may give its run slot up for a while (`pause_point`)."""
    if stop is None:
        return
    if stop.requested:
        raise WorkStopped
    stop.pause()


def pause_point(stop: Stop | None) -> None:
    """Where a long loop that must not stop (a document write) may give its run slot up
    for a while; from another thread of the same job, wait while the job has none."""
    if stop is not None:
        stop.pause()


@dataclass(eq=False)
class _Job:
    """One admitted call on its way through the run slots."""

    tenant_id: str
    kind: str
    body: Callable[[], None]
    #: what a job that never starts does instead (its caller is told it was cancelled)
    cancel: Callable[[], object]
    #: set while the job holds a run slot
    running: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    done: bool = False
    thread: int | None = None
    slice_began: float = 0.0
    queued_at: float = 0.0
    waited_s: float = 0.0


class FairShares:
    """Run slots handed out across workspaces by least slot time; thread-safe."""

    def __init__(self, slots: int, max_threads: int, metrics: WaitMetrics | None) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=max_threads, thread_name_prefix="kbgate-expensive"
        )
        self._lock = threading.Lock()
        self._free = slots
        self._slots = slots
        #: the most slots one workspace holds while another has used the pool lately: one
        #: is left to the others, so their next call starts at once however long a burst
        #: is; a workspace alone has them all
        self._shared_cap = max(1, slots - 1)
        #: per workspace, when it last had work here (for `_cap`)
        self._last_seen: dict[str, float] = {}
        self._max_threads = max_threads
        self._threads = 0
        self._metrics = metrics
        #: per workspace with work waiting, its jobs in order
        self._queues: dict[str, deque[_Job]] = {}
        #: per workspace with work running or waiting: slot seconds had, and jobs held
        self._vtime: dict[str, float] = {}
        self._jobs: Counter[str] = Counter()
        self._running: Counter[str] = Counter()
        self._closed = False

    def submit(self, job: _Job) -> None:
        """Queue a new job; it starts on a thread of its own when given a slot."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the expensive-work pool is closed")
            if not self._jobs[job.tenant_id]:
                busy = [self._vtime[t] for t in self._jobs if self._jobs[t]]
                self._vtime[job.tenant_id] = max(
                    self._vtime.get(job.tenant_id, 0.0), min(busy, default=0.0)
                )
            self._jobs[job.tenant_id] += 1
            self._last_seen[job.tenant_id] = time.perf_counter()
            self._enqueue(job)
            self._dispatch()

    def withdraw(self, job: _Job) -> bool:
        """Take a job that has not started out of its queue; False once it has started."""
        with self._lock:
            if job.started:
                return False
            queue = self._queues.get(job.tenant_id)
            if queue is not None and job in queue:
                queue.remove(job)
                if not queue:
                    del self._queues[job.tenant_id]
            self._forget(job)
            return True

    def pause(self, job: _Job) -> None:
        """In the job's thread: give the slot up if its turn is over, then wait for one
        again. In another thread of the job (a write's analysis): wait while it has none."""
        if threading.get_ident() != job.thread:
            job.running.wait()
            return
        with self._lock:
            ran = time.perf_counter() - job.slice_began
            if not self._turn_over(job, ran):
                return
            self._release(job, ran)
            job.running.clear()
            self._enqueue(job)
            self._dispatch()
            yielded = not job.running.is_set()
        if yielded and self._metrics is not None:
            self._metrics.count("expensive_turns_given_up")
        job.running.wait()

    def finish(self, job: _Job) -> None:
        """In the job's thread, once its work is done: the slot and thread go back."""
        with self._lock:
            self._release(job, time.perf_counter() - job.slice_began)
            self._threads -= 1
            job.done = True
            self._forget(job)
            self._dispatch()
        if self._metrics is not None:
            self._metrics.observe_expensive_wait(job.kind, "shared", job.waited_s)

    def close(self) -> None:
        """Take no more work; jobs not started never start (they are cancelled), started
        ones go on to their end."""
        with self._lock:
            self._closed = True
            unstarted = [job for queue in self._queues.values() for job in queue if not job.started]
            for job in unstarted:
                self._queues[job.tenant_id].remove(job)
                if not self._queues[job.tenant_id]:
                    del self._queues[job.tenant_id]
                self._forget(job)
        for job in unstarted:
            job.cancel()
        self._pool.shutdown(wait=False)

    # ---- under the lock ---------------------------------------------------------------

    def _turn_over(self, job: _Job, ran: float) -> bool:
        others = any(tenant != job.tenant_id for tenant in self._queues)
        if others and ran >= TURN_S:
            return True
        return job.tenant_id in self._queues and ran >= SLICE_S

    def _enqueue(self, job: _Job) -> None:
        job.queued_at = time.perf_counter()
        self._queues.setdefault(job.tenant_id, deque()).append(job)

    def _release(self, job: _Job, ran: float) -> None:
        self._free += 1
        self._running[job.tenant_id] -= 1
        self._vtime[job.tenant_id] = self._vtime.get(job.tenant_id, 0.0) + ran

    def _forget(self, job: _Job) -> None:
        now = time.perf_counter()
        self._last_seen[job.tenant_id] = now
        for tenant in [t for t, seen in self._last_seen.items() if now - seen > SHARED_MEMORY_S]:
            if not self._jobs[tenant]:
                del self._last_seen[tenant]
        self._jobs[job.tenant_id] -= 1
        if self._jobs[job.tenant_id] <= 0:
            del self._jobs[job.tenant_id]
            self._running.pop(job.tenant_id, None)
            # an idle workspace keeps no credit: it comes back level with the busiest
            # (`submit`); with no workspace busy, every record goes
            if not self._jobs:
                self._vtime.clear()
            else:
                self._vtime.pop(job.tenant_id, None)

    def _dispatch(self) -> None:
        while self._free and self._queues:
            job = self._next()
            if job is None:
                return
            self._free -= 1
            self._running[job.tenant_id] += 1
            now = time.perf_counter()
            job.waited_s += now - job.queued_at
            job.slice_began = now
            job.running.set()
            if not job.started:
                job.started = True
                self._threads += 1
                self._pool.submit(job.body)

    def _cap(self, tenant_id: str) -> int:
        """All the slots for a workspace alone; one fewer while another workspace has work
        here or had some within SHARED_MEMORY_S."""
        now = time.perf_counter()
        others = any(
            other != tenant_id and (self._jobs[other] or now - seen < SHARED_MEMORY_S)
            for other, seen in self._last_seen.items()
        )
        return self._shared_cap if others else self._slots

    def _next(self) -> _Job | None:
        """The first startable job of the waiting workspace with the least slot time (then
        the fewest slots held), among those holding fewer than their cap (`_cap`); a new
        job only while a thread is free."""
        order = sorted(self._queues, key=lambda t: (self._vtime.get(t, 0.0), self._running[t]))
        for tenant in order:
            if self._running[tenant] >= self._cap(tenant):
                continue
            queue = self._queues[tenant]
            for job in queue:
                if job.started or self._threads < self._max_threads:
                    queue.remove(job)
                    if not queue:
                        del self._queues[tenant]
                    return job
        return None


class ExpensiveWork:
    """The run slots shared fairly between workspaces, and each workspace's admission."""

    def __init__(
        self,
        threads: int | None,
        per_workspace: int,
        metrics: WaitMetrics | None = None,
    ) -> None:
        slots = threads or len(os.sched_getaffinity(0))
        self._shares = FairShares(slots, max(MIN_THREADS, slots * THREADS_PER_SLOT), metrics)
        self._metrics = metrics
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
        kind: str = "other",
        timeout_s: float | None = None,
        stop: Stop | None = None,
        wait: bool = False,
    ) -> T:
        """`work(stop)` on a run slot for `tenant_id`; past its limit, RateLimitedError, or
        with `wait`, once an earlier request of the workspace is done. `kind` names the
        work in /metrics (`grounding`, `redact`, `ingest`, ...).

        On timeout (TimeoutError) or cancellation (the caller's task is cancelled) the
        stop flag is set and the error propagates; the work stops at its next unit, or
        never starts.
        """
        await self._take(tenant_id, wait, kind)
        flag = stop or Stop()
        loop = asyncio.get_running_loop()
        submitted: Future[T] = Future()
        job = _Job(tenant_id, kind, lambda: None, submitted.cancel)
        # run in the caller's context (its trace's current span, among others)
        context = contextvars.copy_context()
        job.body = lambda: context.run(self._body, job, work, flag, submitted)
        flag.bind(lambda: self._shares.pause(job))
        submitted.add_done_callback(lambda _: self._release_from(loop, tenant_id))
        try:
            self._shares.submit(job)
        except BaseException:
            submitted.cancel()
            raise
        try:
            return await asyncio.wait_for(asyncio.wrap_future(submitted), timeout_s)
        except BaseException:
            flag.set()
            if self._shares.withdraw(job):  # not started yet: never starts
                submitted.cancel()
            raise

    def _body(self, job: _Job, work: Callable[[Stop], T], flag: Stop, out: Future[T]) -> None:
        """The job on its thread: its work, its outcome into `out`, its slot given back."""
        job.thread = threading.get_ident()
        try:
            if not out.set_running_or_notify_cancel():
                return
            try:
                value = work(flag)
            except BaseException as error:
                out.set_exception(error)
            else:
                out.set_result(value)
        finally:
            flag.bind(None)
            self._shares.finish(job)

    def _release_from(self, loop: asyncio.AbstractEventLoop, tenant_id: str) -> None:
        """Give the slot back on the event loop (the count is the loop's alone)."""
        with suppress(RuntimeError):  # the loop has closed: nobody counts any more
            loop.call_soon_threadsafe(self._release, tenant_id)

    async def _take(self, tenant_id: str, wait: bool, kind: str) -> None:
        """Count one more request of the workspace, waiting for a slot if `wait`."""
        if self._held[tenant_id] < self._per_workspace:
            self._held[tenant_id] += 1
            if self._metrics is not None:
                self._metrics.observe_expensive_wait(kind, "own", 0.0)
            return
        if not wait:
            raise RateLimitedError(
                RETRY_AFTER_S,
                message="this workspace already runs its limit of expensive requests; retry later",
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant_id, deque()).append(turn)
        began = time.perf_counter()
        try:
            await turn  # a finished request hands its slot over (`_release`)
            if self._metrics is not None:
                self._metrics.observe_expensive_wait(kind, "own", time.perf_counter() - began)
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
        self._shares.close()
