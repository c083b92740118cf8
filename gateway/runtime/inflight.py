"""How many retrieval turns this process runs at this moment.

A turn's question is embedded in a worker thread so that other turns can use the event
loop meanwhile (the model releases the GIL). A turn running alone has nobody to share the
loop with, and the hop to a worker thread and back costs two thread wake-ups (about
0.5 ms on these machines): the lone turn embeds in its own thread instead
(`gateway.retrieval.query_embedding`; docs/benchmarks.md). A request arriving during that model
run waits for it, about 4 ms at most.
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
