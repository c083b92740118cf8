"""A real `redis-server` for tests: loopback, free port, temp dir, append-only file.

`restart()` keeps the port and the directory, so data written before a stop is
there again after it (tests use stop/restart to simulate outages).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import redis

from tests.support.services import missing_service

_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0


def redis_server_binary() -> str:
    """Path of redis-server; skips (or fails in CI) the test when it is missing."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing_service("redis-server not installed")
        raise AssertionError("unreachable: missing_service skips or fails")
    return binary


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process (daemonize no) owned by a test."""

    def __init__(self, directory: Path, *, port: int | None = None) -> None:
        self.directory = directory
        self.port = port if port is not None else free_port()
        self._binary = redis_server_binary()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        if self.running:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        log = self.directory / "redis.log"
        command = [
            self._binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes",
            "--dir", str(self.directory),
            "--daemonize", "no",
            "--logfile", str(log),
        ]  # fmt: skip
        self._process = subprocess.Popen(  # noqa: S603 — fixed argv, binary found on PATH
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._wait_ready(log)

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=0.5)
        try:
            while time.monotonic() < deadline:
                if self._process is None or self._process.poll() is not None:
                    break
                try:
                    if client.ping():
                        return
                except redis.exceptions.BusyLoadingError:
                    pass  # replaying the append-only file
                except redis.exceptions.ConnectionError:
                    pass  # not listening yet
                time.sleep(0.02)
        finally:
            client.close()
        details = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{details}")

    def stop(self) -> None:
        """Terminate (SIGTERM flushes the append-only file), then kill if it lingers."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
            process.terminate()
            try:
                process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=_STOP_TIMEOUT_S)

    def freeze(self) -> None:
        """SIGSTOP: the port still accepts connections but nothing answers (a hung server)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after `freeze`."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start again on the same port and directory."""
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
