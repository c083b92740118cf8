"""A stand-in Qdrant HTTP endpoint that reports a chosen version, for start-up tests.

It answers the few calls a gateway makes before its first write (`GET /` for the version,
`GET /collections` for readiness, `GET /collections/{name}/exists`) and records the
body of every collection creation (`PUT /collections/{name}`). Anything else answers
404, as a server would for a collection it does not hold. Where a Docker engine runs,
the real server is tested too (testcontainers).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.support.redis_server import free_port


class FakeQdrant:
    """A loopback HTTP server speaking just enough of Qdrant's REST API."""

    def __init__(self, version: str, *, port: int | None = None) -> None:
        self.version = version
        self.port = port if port is not None else free_port()
        self.created: dict[str, dict[str, Any]] = {}
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0].rstrip("/")
                if path == "":
                    fake._answer(self, {"title": "qdrant", "version": fake.version})
                elif path == "/collections":
                    fake._answer(self, {"result": {"collections": []}, "status": "ok"})
                elif path.startswith("/collections/") and path.endswith("/exists"):
                    name = path.split("/")[2]
                    exists = {"exists": name in fake.created}
                    fake._answer(self, {"result": exists, "status": "ok"})
                else:
                    fake._answer(self, {"status": {"error": "Not found"}}, status=404)

            def do_PUT(self) -> None:
                parts = self.path.split("?")[0].strip("/").split("/")
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if len(parts) == 2 and parts[0] == "collections":
                    fake.created[parts[1]] = body
                    fake._answer(self, {"result": True, "status": "ok"})
                else:
                    fake._answer(self, {"status": {"error": "Not found"}}, status=404)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, body: Any, status: int = 200) -> None:
        data = json.dumps({"time": 0.0, **body}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeQdrant:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
