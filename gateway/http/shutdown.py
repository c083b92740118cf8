"""Graceful shutdown: on SIGTERM, finish what is in flight and refuse what is new.

The first SIGTERM (or SIGINT) puts the gateway in drain: requests already running go
on; every new request, readiness included, answers 503 with `Retry-After` and
`Connection: close`, so a proxy retries it on another replica and takes this one out
of rotation; `/health/live` still answers 200. The server exits once nothing is in
flight, or when `KBGATE_SHUTDOWN_TIMEOUT_S` has passed (what still runs then is
cancelled). A second signal exits at once.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable
from types import FrameType

import uvicorn
from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPResponseStartEvent, Receive, Scope, Send

LIVE_PATH = "/health/live"
_RETRY_AFTER_S = 1


class Drain:
    """Whether the process is draining, and how many requests it is still serving."""

    def __init__(self) -> None:
        self.draining = False
        self.in_flight = 0

    def begin(self) -> None:
        self.draining = True


class DrainMiddleware:
    """Counts requests in flight; while draining, refuses new ones with 503."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        if self.drain.draining and scope["path"] != LIVE_PATH:
            await _refuse(send)
            return
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1


async def _refuse(send: Send) -> None:
    body = json.dumps(
        {
            "type": "about:blank",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "this gateway is shutting down: retry on another replica",
        }
    ).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 503,
        "headers": [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(_RETRY_AFTER_S).encode()),
            (b"connection", b"close"),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


class GracefulServer(uvicorn.Server):
    """uvicorn's server, draining for up to `timeout_s` before it stops; `on_listening`
    runs once the app has started and the socket accepts connections."""

    def __init__(
        self,
        config: uvicorn.Config,
        drain: Drain,
        timeout_s: float,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._drain = drain
        self._timeout_s = timeout_s
        self._deadline: float | None = None
        self._on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit and self._on_listening is not None:
            self._on_listening()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._deadline is None and sig in (signal.SIGTERM, signal.SIGINT):
            self._deadline = time.monotonic() + self._timeout_s
            self._drain.begin()
            return
        super().handle_exit(sig, frame)  # a second signal: stop now

    async def on_tick(self, counter: int) -> bool:
        if await super().on_tick(counter):
            return True
        if self._deadline is None:
            return False
        return self._drain.in_flight == 0 or time.monotonic() >= self._deadline
