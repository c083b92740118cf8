"""Tell expensive work when its client has gone away.

While a handler awaits expensive work, a task waits for the ASGI `http.disconnect`
message (the body has been read by then, so the next message can only be that) and
sets the work's `Stop` flag when it comes: the work stops at its next unit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from litestar import Request

from gateway.access.expensive import Stop


@asynccontextmanager
async def stop_on_disconnect(request: Request[Any, Any, Any]) -> AsyncIterator[Stop]:
    """A Stop flag, set if the client disconnects before the block ends."""
    stop = Stop()

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                stop.set()
                return

    watcher = asyncio.create_task(watch())
    try:
        yield stop
    finally:
        watcher.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await watcher
