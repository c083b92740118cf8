"""How a probe reaches a gateway: a transport (urllib over HTTP here; the tests pass
the in-process app) and its replies."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

# ---- transport -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer: status and raw body text (what the leak scan reads)."""

    status: int
    text: str
    retry_after: float | None = None  # seconds, from a 429's Retry-After header
    #: the body's bytes (an archive download); the text is their UTF-8 reading
    content: bytes = b""

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None


class TransportError(RuntimeError):
    """The gateway could not be reached."""


#: the media type a `bytes` body is sent as (a workspace archive)
ARCHIVE_MEDIA_TYPE = "application/gzip"


class Transport(Protocol):
    """Sends one request; the key goes in `Authorization: Bearer`. A `bytes` body is sent
    as it is (`ARCHIVE_MEDIA_TYPE`), anything else as JSON."""

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply: ...


class UrllibTransport:
    """HTTP(S) through the standard library, off the event loop."""

    def __init__(self, base_url: str, timeout_s: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply:
        return await asyncio.to_thread(self._send, method, path, key, body)

    def _send(self, method: str, path: str, key: str | None, body: Any) -> Reply:
        headers = {"Accept": "application/json"}
        data = None
        if isinstance(body, bytes):
            data = body
            headers["Content-Type"] = ARCHIVE_MEDIA_TYPE
        elif body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(  # noqa: S310 — the scheme was checked to be http(s)
            self.base_url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # noqa: S310 — as above
                raw = answer.read()
                return Reply(answer.status, raw.decode("utf-8", "replace"), content=raw)
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            return Reply(error.code, text, retry_after_s(error.headers.get("Retry-After")))
        except (urllib.error.URLError, OSError) as error:
            raise TransportError(f"{method} {path}: {error}") from error


def retry_after_s(header: str | None) -> float | None:
    """A Retry-After header in seconds (the HTTP-date form counts as one second)."""
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return 1.0
