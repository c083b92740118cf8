"""What the sync and async clients share: requests built from an `Operation`, answers
decoded into its type or raised as problem details, and the retry policy. No I/O here."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import msgspec

from kbgate_client._operation import Operation
from kbgate_client.errors import ProblemError, problem_error

R = TypeVar("R")

_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Retries:
    """How answers that ask to be tried again (429, 503 by default) are retried: after
    their Retry-After, or `backoff_s * 2**n` when they name none, `attempts` tries in all.
    A Retry-After longer than `max_wait_s` is not waited for: the error is raised with it."""

    attempts: int = 3
    max_wait_s: float = 30.0
    backoff_s: float = 0.5
    statuses: frozenset[int] = field(default=frozenset({429, 503}))
    #: also retry when no connection could be made (nothing was sent)
    connect_errors: bool = True

    def delay(self, attempt: int, retry_after_s: float | None) -> float | None:
        """Seconds to wait before the try after `attempt` (counted from 0); None: stop."""
        if attempt + 1 >= self.attempts:
            return None
        wait = self.backoff_s * 2**attempt if retry_after_s is None else retry_after_s
        return wait if wait <= self.max_wait_s else None


NO_RETRIES = Retries(attempts=1)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One request ready to send."""

    method: str
    url: str
    content: bytes | None
    headers: dict[str, str]
    query: dict[str, str]


def prepare(
    operation: Operation[Any, Any],
    key: str | None,
    body: Any,
    params: Mapping[str, str],
    query: Mapping[str, str | None] | None,
) -> Prepared:
    headers = {"Accept": "application/json"}
    if key is not None and operation.keyed:
        headers["Authorization"] = f"Bearer {key}"
    content: bytes | None = None
    if isinstance(body, bytes):
        content = body
        headers["Content-Type"] = (
            "application/gzip" if operation.body is bytes else "application/x-ndjson"
        )
    elif body is not None:
        content = _ENCODER.encode(body)
        headers["Content-Type"] = "application/json"
    chosen = {name: value for name, value in (query or {}).items() if value is not None}
    unknown = set(chosen) - set(operation.query)
    if unknown:
        raise ValueError(f"{operation.operation_id} takes no query parameter {sorted(unknown)}")
    return Prepared(operation.method, operation.url(params), content, headers, chosen)


def ndjson(lines: Any) -> bytes:
    """Structs (or dicts) as newline-delimited JSON."""
    return b"".join(_ENCODER.encode(line) + b"\n" for line in lines)


class Decoders:
    """One msgspec decoder per answer type, made on first use (a client holds one)."""

    def __init__(self) -> None:
        self._made: dict[type[Any], msgspec.json.Decoder[Any]] = {}

    def decode(self, kind: type[R], content: bytes) -> R:
        """An answer's body as `kind` (bytes as they came)."""
        if kind is bytes:
            return content  # type: ignore[return-value]  # `kind` is bytes here, so R is
        decoder = self._made.get(kind)
        if decoder is None:
            decoder = self._made[kind] = msgspec.json.Decoder(kind)
        result: R = decoder.decode(content)
        return result


def retry_after_s(response: httpx.Response) -> float | None:
    """The answer's Retry-After in seconds (delta-seconds or an HTTP date), if any."""
    header = response.headers.get("Retry-After")
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def refusal(response: httpx.Response, body: bytes) -> ProblemError:
    return problem_error(
        response.status_code, body, response.reason_phrase, retry_after_s(response)
    )


def should_retry(retries: Retries, response: httpx.Response, attempt: int) -> float | None:
    """The wait before trying again after an error answer, or None."""
    if response.status_code not in retries.statuses:
        return None
    return retries.delay(attempt, retry_after_s(response))
