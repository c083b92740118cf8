"""The one place domain errors become HTTP problem details (RFC 9457)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from litestar.exceptions import HTTPException, ValidationException
from litestar.plugins.problem_details import (
    ProblemDetailsConfig,
    ProblemDetailsException,
    ProblemDetailsPlugin,
)

from gateway.errors import (
    ConflictError,
    DependencyUnavailableError,
    ForbiddenError,
    GatewayError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    UnauthenticatedError,
)
from gateway.http.schemas import ProblemDetails
from ingest.index import DiskFullError, IndexUnavailableError
from ingest.sync import AnalysisFailedError, EmbeddingFailedError
from settings.store import StoreUnavailableError

_STATUS: dict[type[GatewayError], tuple[int, str]] = {
    UnauthenticatedError: (401, "Unauthorized"),
    ForbiddenError: (403, "Forbidden"),
    NotFoundError: (404, "Not Found"),
    ConflictError: (409, "Conflict"),
    PayloadTooLargeError: (413, "Payload Too Large"),
    InvalidInputError: (422, "Unprocessable Content"),
}
_RETRY_AFTER_S = 5
#: A full disk is an operator's to free: no point retrying at once.
_DISK_FULL_RETRY_AFTER_S = 60
#: What a caller learns of a full disk: not how full, which moves with every workspace's writes.
_DISK_FULL = (
    "the index's disk is nearly full, so writes are refused and nothing was written; "
    "reads and deletions go on. Retry once an operator has freed space"
)
_NAMED_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")
#: msgspec's place of a bad key of a mapping: "... - at `key` in `$.pii_operators`"
_MAPPING_KEY = re.compile(r"at `key` in `\$\.([^`]+)`")


def _problem(status: int, title: str, detail: str, **extra: Any) -> ProblemDetailsException:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return ProblemDetailsException(
        status_code=status,
        title=title,
        detail=detail,
        headers=headers,
        extra={key: value for key, value in extra.items() if value is not None} or None,
    )


def gateway_problem(error: GatewayError) -> ProblemDetailsException:
    if isinstance(error, DependencyUnavailableError):
        return _unavailable(error.dependency, error.retry_after_s)
    if isinstance(error, RateLimitedError):
        return ProblemDetailsException(
            status_code=429,
            title="Too Many Requests",
            detail=error.message,
            headers={"Retry-After": str(max(1, math.ceil(error.retry_after_s)))},
        )
    status, title = next(
        (found for kind, found in _STATUS.items() if isinstance(error, kind)),
        (400, "Bad Request"),
    )
    return _problem(status, title, error.message, field=error.field)


def _unavailable(
    dependency: str, retry_after_s: int, detail: str | None = None
) -> ProblemDetailsException:
    return ProblemDetailsException(
        status_code=503,
        title="Service Unavailable",
        detail=detail or f"{dependency} is unavailable; retry later",
        headers={"Retry-After": str(retry_after_s)},
        extra={"dependency": dependency},
    )


def validation_problem(error: ValidationException) -> ProblemDetailsException:
    """Malformed JSON is 400; JSON that breaks the schema is 422, naming the field."""
    details = error.extra if isinstance(error.extra, list) else []
    first = details[0] if details and isinstance(details[0], dict) else {}
    message = str(first.get("message", error.detail))
    if "malformed" in message.lower() or "decode" in message.lower():
        return _problem(400, "Bad Request", "the body is not valid JSON")
    named = _NAMED_FIELD.search(message) or _MAPPING_KEY.search(message)
    field = named.group(1) if named else first.get("key")
    return _problem(422, "Unprocessable Content", message, field=field)


def http_problem(error: HTTPException) -> ProblemDetailsException:
    return _problem(error.status_code, HTTPStatus(error.status_code).phrase, error.detail)


def _problem_map() -> dict[type[Exception], Callable[[Any], ProblemDetailsException]]:
    return {
        GatewayError: gateway_problem,
        ValidationException: validation_problem,
        HTTPException: http_problem,
        # before IndexUnavailableError, which it is: `problem_of` takes the first match
        DiskFullError: lambda _: _unavailable("index", _DISK_FULL_RETRY_AFTER_S, _DISK_FULL),
        IndexUnavailableError: lambda _: _unavailable("index", _RETRY_AFTER_S),
        StoreUnavailableError: lambda _: _unavailable("store", _RETRY_AFTER_S),
        EmbeddingFailedError: lambda _: _unavailable("embedder", _RETRY_AFTER_S),
        AnalysisFailedError: lambda _: _unavailable("redactor", _RETRY_AFTER_S),
    }


def problem_details_plugin() -> ProblemDetailsPlugin:
    return ProblemDetailsPlugin(
        ProblemDetailsConfig(exception_to_problem_detail_map=_problem_map())
    )


def problem_of(error: Exception) -> ProblemDetails:
    """The problem details of an error answered inside a body (a bulk write's failed
    line), as the same error would be answered alone."""
    for kind, convert in _problem_map().items():
        if isinstance(error, kind):
            found = convert(error)
            extra = found.extra if isinstance(found.extra, dict) else {}
            return ProblemDetails(
                status=found.status_code,
                title=found.title or HTTPStatus(found.status_code).phrase,
                detail=found.detail,
                field=extra.get("field"),
                dependency=extra.get("dependency"),
            )
    return ProblemDetails(status=500, title="Internal Server Error")


def status_of(error: Exception) -> int:
    """The status the caller receives for an error raised outside a handler (e.g. by the
    authentication middleware), for request telemetry; 500 when nothing maps it."""
    for kind, convert in _problem_map().items():
        if isinstance(error, kind):
            return int(convert(error).status_code)
    return 500
