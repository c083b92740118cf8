"""A process that loads one Qdrant Edge collection and serves its calls, so that the
gateway never holds the GIL for that load.

Edge's binding holds the GIL for the whole of a shard's load, and the load of an indexed
copy takes a fraction of a second on a large collection; every turn of the process waits
for it. A host is started on the copy instead: it loads it (the gateway goes on), replays
the writes journalled meanwhile (by the gateway, or by the host the collection had), and
from then on answers the collection's `Index` calls, which `EdgeIndex` forwards to it. A
start hands each large collection to a host in the same way, once indexed.

The two ends talk over socket pairs made by the gateway and inherited by the host alone
(no socket on disk another process could reach), each carrying one call at a time:
`(method, args)` out, `("ok", value)` or `("error", kind, message)` back, pickled. The
host serves each pair on a thread of its own; Edge runs one call at a time in it, as in
the gateway.

Run as `python -m ingest.edge_host ROOT COLLECTION COPY --dense-dim N --fds 3,4,...`.
"""

from __future__ import annotations

import argparse
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ingest.index import IndexUnavailableError

#: socket pairs to a host: calls in flight to one collection at a time
PIPES = 4
#: how long a host may take to load its collection before the build gives it up
READY_TIMEOUT_S = 600.0
#: how long a stopping host may take to flush and close
STOP_TIMEOUT_S = 30.0


class CollectionHostedError(Exception):
    """The collection is served by (another) host process now: its calls go there."""


class CollectionMovedError(CollectionHostedError):
    """This host handed the collection to the host of its next indexed copy: its writes go
    there (its reads are still answered here until this host stops)."""


_ERRORS: dict[str, type[Exception]] = {
    "value": ValueError,
    "type": TypeError,
    "moved": CollectionHostedError,
    "unavailable": IndexUnavailableError,
}


class EdgeHost:
    """The gateway's end of a host: start it, call it, stop it. Thread-safe."""

    def __init__(
        self,
        root: Path,
        collection: str,
        copy: Path,
        *,
        dense_dim: int,
        threshold_kb: int | None,
        search_threads: int,
    ) -> None:
        """Start a host loading `copy` as `collection` and wait until it serves (or
        IndexUnavailableError: it failed or took longer than READY_TIMEOUT_S)."""
        self.collection = collection
        #: the directory the host serves the collection from
        self.path = copy
        pairs = [socket.socketpair() for _ in range(PIPES)]
        ours = [Connection(mine.detach()) for mine, _ in pairs]
        theirs = [other.detach() for _, other in pairs]
        command = [
            sys.executable,
            *("-m", "ingest.edge_host", str(root), collection, str(copy)),
            f"--dense-dim={dense_dim}",
            f"--search-threads={search_threads}",
            f"--fds={','.join(map(str, theirs))}",
        ]
        if threshold_kb is not None:
            command.append(f"--threshold-kb={threshold_kb}")
        try:
            self._process = subprocess.Popen(command, pass_fds=theirs)  # noqa: S603 — this interpreter, our module
        finally:
            for handle in theirs:
                socket.close(handle)
        self._free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        for connection in ours:
            self._free.put(connection)
        self._stopped = False
        self.load_ms = float(self._ready(ours[0]))

    def _ready(self, first: Connection) -> Any:
        try:
            if first.poll(READY_TIMEOUT_S):
                return self._answer(first)
        except (EOFError, OSError):  # it died before it served
            pass
        except IndexUnavailableError:
            self.stop()
            raise
        self.stop()
        raise IndexUnavailableError(f"the host of {self.collection!r} did not start")

    @property
    def alive(self) -> bool:
        """Whether the host process is still running."""
        return self._process.poll() is None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`method(*args)` of the host's index; its errors raised here as they were there
        (ValueError, TypeError), any other failure as IndexUnavailableError."""
        if self._stopped:
            raise IndexUnavailableError(f"the host of {self.collection!r} is stopped")
        connection = self._free.get()
        try:
            connection.send((method, args, kwargs))
            return self._answer(connection)
        except (EOFError, OSError) as error:
            raise IndexUnavailableError(f"the host of {self.collection!r} stopped") from error
        finally:
            self._free.put(connection)

    def _answer(self, connection: Connection) -> Any:
        reply = connection.recv()
        if reply[0] == "ok":
            return reply[1]
        _, kind, message = reply
        raise _ERRORS.get(kind, IndexUnavailableError)(message)

    def stop(self) -> None:
        """Ask the host to flush, close and exit; kill it if it does not in time."""
        self.ask_to_stop()
        self.wait()

    def ask_to_stop(self) -> None:
        """Ask the host to flush, close and exit, without waiting for it (`wait`)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            connection = self._free.get(timeout=STOP_TIMEOUT_S)
            connection.send(("stop", (), {}))
        except (queue.Empty, EOFError, OSError):
            pass

    def wait(self) -> None:
        """Wait for the host asked to stop to exit; kill it if it does not in time."""
        try:
            self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def serve(index: Any, connections: Sequence[Connection], stop: Callable[[], None]) -> None:
    """Answer calls on every connection, each on a thread, until one asks to stop or all
    are closed; then `stop` (the index's flush and close)."""
    finished = threading.Event()
    open_connections = [len(connections)]
    count = threading.Lock()

    def answer(connection: Connection) -> None:
        try:
            while True:
                try:
                    method, args, kwargs = connection.recv()
                except (EOFError, OSError):
                    return
                if method == "stop":
                    finished.set()
                    return
                connection.send(_reply(index, method, args, kwargs))
        finally:
            with count:
                open_connections[0] -= 1
                if not open_connections[0]:
                    finished.set()

    for connection in connections:
        threading.Thread(target=answer, args=(connection,), daemon=True).start()
    finished.wait()
    stop()


def _reply(
    index: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    if method.startswith("_") or not callable(getattr(index, method, None)):
        return ("error", "value", f"no such call: {method!r}")
    try:
        return ("ok", getattr(index, method)(*args, **kwargs))
    except CollectionHostedError as error:
        return ("error", "moved", str(error))
    except ValueError as error:
        return ("error", "value", str(error))
    except TypeError as error:
        return ("error", "type", str(error))
    except Exception as error:  # anything else is the engine's: the caller answers 503
        return ("error", "unavailable", f"{type(error).__name__}: {error}")


def main(argv: Sequence[str] | None = None) -> int:
    from ingest.qdrant_edge import EdgeIndex

    parser = argparse.ArgumentParser(prog="python -m ingest.edge_host")
    parser.add_argument("root", type=Path)
    parser.add_argument("collection")
    parser.add_argument("copy", type=Path)
    parser.add_argument("--dense-dim", type=int, required=True)
    parser.add_argument("--threshold-kb", type=int, default=None)
    parser.add_argument("--search-threads", type=int, required=True)
    parser.add_argument("--fds", required=True)
    args = parser.parse_args(argv)
    # The gateway stops its hosts itself (a Ctrl-C reaches the whole process group); a
    # gateway gone without stopping them closes their pipes, which ends them too.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connections = [Connection(int(fd)) for fd in args.fds.split(",")]
    try:
        index = EdgeIndex(
            args.root.parent,
            args.dense_dim,
            indexing_threshold_kb=args.threshold_kb,
            search_threads=args.search_threads,
            host_from_points=None,  # the gateway starts the hosts of later copies
            min_free_mb=0,  # the gateway checks the disk before it sends a write or a build
        )
        load_ms = index.adopt(args.collection, args.copy)
    except Exception as error:  # reported to the gateway, which gives the build up
        connections[0].send(("error", "unavailable", f"{type(error).__name__}: {error}"))
        return 1
    connections[0].send(("ok", load_ms))
    serve(index, connections, index.close)
    return 0


if __name__ == "__main__":
    # Run as the module the rest of kbgate imports, so that the errors raised by the
    # index are the classes `_reply` knows, not this `__main__`'s copies of them.
    from ingest import edge_host  # noqa: PLW0406 — on purpose, see above

    raise SystemExit(edge_host.main())
