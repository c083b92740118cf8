"""One index call from the event loop: bounded in a worker thread, or direct where the
engine holds the GIL throughout (`Index.holds_the_gil`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def call_index(
    holds_the_gil: bool, timeout_s: float, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """One index call: in a worker thread, waited for `timeout_s` at most (TimeoutError);
    directly, with no bound, when the engine holds the GIL throughout (`Index`).

    Such an engine (Qdrant Edge) keeps the event loop from running for the whole call
    either way, so a timeout could not fire before the call returns, and a turn's KBs are
    searched one after another; a worker thread would only add two thread hops a call
    (eight callers served about 8% fewer turns a second, docs/decisions/edge-in-event-loop.md)."""
    if holds_the_gil:
        return call(*args, **kwargs)
    async with asyncio.timeout(timeout_s):
        return await asyncio.to_thread(call, *args, **kwargs)
