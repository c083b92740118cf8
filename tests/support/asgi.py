"""An in-process app served over httpx's ASGI transport, its lifespan running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from litestar import Litestar


@asynccontextmanager
async def asgi_client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `app` whose requests run as concurrent tasks on this loop, the app's
    lifespan (start-up and shutdown hooks) running around it."""
    async with (
        asgi_lifespan(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]  # Litestar types __call__ with its own ASGI event unions
            base_url="http://kbgate.test",
        ) as client,
    ):
        yield client


@asynccontextmanager
async def asgi_lifespan(app: Litestar) -> AsyncIterator[None]:
    """Run the app's ASGI lifespan around a block.

    Litestar's AsyncTestClient serves each request synchronously through a blocking portal,
    so requests never overlap; httpx's ASGI transport runs them as real concurrent tasks on
    this loop, but does not run the lifespan itself.
    """
    incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started, stopped = asyncio.Event(), asyncio.Event()
    failed: list[str] = []

    async def receive() -> dict[str, Any]:
        return await incoming.get()

    async def send(message: Any) -> None:
        kind = str(message["type"])
        if kind.endswith(".failed"):
            failed.append(str(message.get("message", kind)))
        (started if kind.startswith("lifespan.startup") else stopped).set()

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    task = asyncio.create_task(app(scope, receive, send))  # type: ignore[arg-type]  # a plain dict scope
    await incoming.put({"type": "lifespan.startup"})
    await started.wait()
    if failed:
        raise RuntimeError(f"app start-up failed: {failed[0]}")
    try:
        yield
    finally:
        await incoming.put({"type": "lifespan.shutdown"})
        await stopped.wait()
        await task
