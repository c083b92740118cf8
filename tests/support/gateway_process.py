"""A real `kbgate serve` process on a free loopback port, for tests that need one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.support.redis_server import free_port

_READY_TIMEOUT_S = 60.0


class GatewayProcess:
    """One gateway process; its output goes to a log file in its data dir."""

    def __init__(self, data_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.extra_env = dict(env or {})
        self._process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-gateway.log"

    @property
    def pid(self) -> int:
        """The process id (for RSS readings in /proc)."""
        if self._process is None:
            raise RuntimeError("the gateway is not started")
        return self._process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
            "KBGATE_DATA_DIR": str(self.data_dir),
            "KBGATE_PORT": str(self.port),
            "KBGATE_HOST": "127.0.0.1",
            **self.extra_env,
        }
        kbgate = Path(sys.executable).with_name("kbgate")
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(  # noqa: S603 — our own console script, fixed arguments
                [str(kbgate), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"gateway exited early: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health/live", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gateway not live in time: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flush."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=10)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 30.0)
        return httpx.Client(base_url=self.url, **kwargs)

    def __enter__(self) -> GatewayProcess:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
