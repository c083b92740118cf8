"""A TCP fault proxy on loopback, switchable at run time, for tests of dependency faults.

One `FaultProxy` listens on a free loopback port and forwards every connection to
an upstream (a real redis-server in the tests). Its event loop runs on a thread of
its own, so synchronous tests drive it with plain calls:

- `passthrough()`: bytes flow both ways unchanged;
- `delay(ms)`: every chunk, both ways, is held `ms` milliseconds before it is sent on
  (order kept), as on a slow or congested link;
- `drop()`: a blackhole — new connections are accepted but never connected upstream,
  and bytes on existing ones are read and discarded, both ways; nothing is answered
  and nothing is closed, so a caller only learns of it through its own timeouts;
- `reset()`: every open connection is aborted with a TCP RST (SO_LINGER 0), both
  towards the caller and upstream, and new connections are reset as soon as accepted.

Returning to `passthrough()` heals the link for connections opened from then on;
existing connections that survived a delay or a drop carry on (bytes dropped
meanwhile stay lost, as they would behind a blackholing firewall).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

_CHUNK_BYTES = 65536
_CALL_TIMEOUT_S = 10.0


class Mode(enum.Enum):
    PASSTHROUGH = "passthrough"
    DELAY = "delay"
    DROP = "drop"
    RESET = "reset"


@dataclass(eq=False)
class _Link:
    """One accepted connection and, unless blackholed from the start, its upstream."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close the socket so the peer sees a TCP RST, not an orderly FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """A loopback TCP proxy in front of `upstream_host:upstream_port`; see the module docstring."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.port = 0
        self._mode = Mode.PASSTHROUGH
        self._delay_s = 0.0
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.accepted = 0
        self.resets = 0

    # the synchronous face, for tests

    @property
    def url(self) -> str:
        """A Redis URL through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> None:
        """Start the loop thread and listen on a free loopback port."""
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._call(self._listen())

    def stop(self) -> None:
        """Close the listener and every connection, then end the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._call(self._shutdown())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_CALL_TIMEOUT_S)
        loop.close()
        self._loop, self._thread = None, None

    def passthrough(self) -> None:
        self._call(self._set(Mode.PASSTHROUGH, 0.0))

    def delay(self, milliseconds: float) -> None:
        self._call(self._set(Mode.DELAY, milliseconds / 1000))

    def drop(self) -> None:
        self._call(self._set(Mode.DROP, 0.0))

    def reset(self) -> None:
        self._call(self._set(Mode.RESET, 0.0))

    def open_connections(self) -> int:
        return self._call(self._count())

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            work.close()
            raise RuntimeError("the proxy is not started")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(_CALL_TIMEOUT_S)

    # the loop's side

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _count(self) -> int:
        return len(self._links)

    async def _set(self, mode: Mode, delay_s: float) -> None:
        self._mode, self._delay_s = mode, delay_s
        if mode is Mode.RESET:
            for link in list(self._links):
                self._reset(link)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._reset(link)
        if self._server is not None:
            await self._server.wait_closed()

    def _reset(self, link: _Link) -> None:
        self.resets += 1
        _abort_with_rst(link.client)
        if link.upstream is not None:
            _abort_with_rst(link.upstream)
        for task in link.tasks:
            task.cancel()
        self._links.discard(link)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(client=writer)
        self._links.add(link)
        if self._mode is Mode.RESET:
            self._reset(link)
            return
        if self._mode is Mode.DROP:
            # Blackholed for its whole life: read and discard until the caller gives up.
            await self._pump(reader, None, link, blackholed=True)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            self._reset(link)  # upstream refuses: so does the proxy
            return
        link.upstream = up_writer
        link.tasks = [
            asyncio.create_task(self._pump(reader, up_writer, link)),
            asyncio.create_task(self._pump(up_reader, writer, link)),
        ]

    async def _pump(
        self,
        source: asyncio.StreamReader,
        target: asyncio.StreamWriter | None,
        link: _Link,
        *,
        blackholed: bool = False,
    ) -> None:
        """Copy one direction until EOF, applying the mode in force to every chunk."""
        try:
            while True:
                chunk = await source.read(_CHUNK_BYTES)
                if not chunk:
                    break
                if blackholed or target is None or self._mode is Mode.DROP:
                    continue
                if self._mode is Mode.DELAY and self._delay_s > 0:
                    await asyncio.sleep(self._delay_s)
                if self._mode is Mode.RESET:
                    break  # `_set` has reset the link already
                target.write(chunk)
                await target.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._close(link)

    def _close(self, link: _Link) -> None:
        """Orderly close of both sides after EOF or an error on either."""
        if link not in self._links:
            return
        self._links.discard(link)
        for writer in (link.client, link.upstream):
            if writer is not None and not writer.is_closing():
                writer.close()
        current = asyncio.current_task()
        for task in link.tasks:
            if task is not current:
                task.cancel()
