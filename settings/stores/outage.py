"""Fail fast while a dependency is down, instead of waiting out a timeout on every call.

A Redis that blackholes traffic makes every call wait its full timeout; a turn makes
several settings reads, so a few seconds of timeout per call become tens of seconds
per request. `FailFast` remembers a failure: for `hold_s` afterwards callers are
told at once that the dependency is unavailable (and use their fallbacks). Then one
call is let through as a probe while the others keep failing fast; its outcome
either closes the gate (the dependency is back) or holds it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_HOLD_S = 1.0


class FailFast:
    """Per-dependency outage memory; single event loop, no locking needed."""

    def __init__(
        self,
        *,
        hold_s: float = DEFAULT_HOLD_S,
        probe_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if hold_s < 0 or probe_s <= 0:
            raise ValueError("hold_s must be >= 0 and probe_s > 0")
        self._hold_s = hold_s
        self._probe_s = probe_s  # how long one probe may take before another is let through
        self._clock = clock
        self._until: float | None = None  # None: healthy

    @property
    def healthy(self) -> bool:
        return self._until is None

    def admit(self) -> bool:
        """Whether a call may go to the dependency now."""
        if self._until is None:
            return True
        now = self._clock()
        if now < self._until:
            return False
        self._until = now + self._probe_s  # this caller probes; the rest keep failing fast
        return True

    def failed(self) -> None:
        self._until = self._clock() + self._hold_s

    def succeeded(self) -> None:
        self._until = None
