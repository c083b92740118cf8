"""How a probe reaches a gateway: a transport (kbgate_client, over HTTP or, in the tests,
to the in-process app) and its replies."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kbgate_client import TransportError

if TYPE_CHECKING:
    from kbgate_client import AsyncClient

__all__ = ["ARCHIVE_MEDIA_TYPE", "ClientTransport", "Reply", "Transport", "TransportError"]

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


#: the media type a `bytes` body is sent as (a workspace archive)
ARCHIVE_MEDIA_TYPE = "application/gzip"


class Transport(Protocol):
    """Sends one request; the key goes in `Authorization: Bearer`. A `bytes` body is sent
    as it is (`ARCHIVE_MEDIA_TYPE`), anything else as JSON."""

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply: ...


class ClientTransport:
    """Requests through kbgate_client's raw calls (the probe reads every status and body
    itself, so nothing is retried or raised but a missing answer: `TransportError`). The
    campaign over HTTP and the tests over the in-process app both use it."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    @classmethod
    def at(cls, base_url: str, timeout_s: float = 60.0) -> ClientTransport:
        """Over HTTP(S) to `base_url`; ValueError when it is no http(s) URL."""
        from kbgate_client import AsyncClient

        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        return cls(AsyncClient(base_url, timeout_s=timeout_s))

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply:
        caller = self.client.with_key(key)
        if isinstance(body, bytes):
            headers = {"Content-Type": ARCHIVE_MEDIA_TYPE}
            response = await caller.request(method, path, content=body, headers=headers)
        else:
            response = await caller.request(method, path, json=body)
        return Reply(
            response.status_code,
            response.text,
            retry_after_s(response.headers.get("Retry-After")),
            content=response.content,
        )


def retry_after_s(header: str | None) -> float | None:
    """A Retry-After header in seconds (the HTTP-date form counts as one second)."""
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return 1.0
