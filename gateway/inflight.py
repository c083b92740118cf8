"""How many retrieval turns this process runs at this moment.

A turn's blocking calls (its question's model run, its turn record's SQLite write) go to
worker threads so that other turns can use the event loop meanwhile. A turn running
alone has nobody to share the loop with, and each hop to a worker thread and back costs
two thread wake-ups (about 0.2-0.3 ms each on these machines): the lone turn makes those
calls in its own thread instead (README, "Benchmarks"). A request arriving during such a
call waits for it, one model run (about 4 ms) at most.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TurnsInFlight:
    """A counter the event loop alone reads and writes (no lock needed)."""

    def __init__(self) -> None:
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    @contextmanager
    def running(self) -> Iterator[None]:
        """Count one turn for the duration of the block, however it ends."""
        self._count += 1
        try:
            yield
        finally:
            self._count -= 1

    def alone(self) -> bool:
        """Whether at most one turn runs now (the caller's own)."""
        return self._count <= 1
