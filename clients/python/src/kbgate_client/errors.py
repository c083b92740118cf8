"""What a call can raise: the gateway's problem details as typed exceptions, and
`TransportError` when no answer came. No message ever holds the key."""

from __future__ import annotations

import msgspec

from kbgate_client.models import ProblemDetails


class KbgateError(Exception):
    """Anything this client raises."""


class TransportError(KbgateError):
    """No answer: nothing listens at the URL, the connection dropped, or it timed out
    (`timed_out`)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class ProblemError(KbgateError):
    """The gateway refused: `problem` is its RFC 9457 problem details."""

    status_code: int = 0

    def __init__(self, problem: ProblemDetails, retry_after_s: float | None = None) -> None:
        super().__init__(problem.status, problem.detail or problem.title)
        self.problem = problem
        #: what the answer's Retry-After asked for (429, 503), in seconds
        self.retry_after_s = retry_after_s

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def field(self) -> str | None:
        """The offending input field (400, 404, 409, 413, 422)."""
        return self.problem.field

    def __str__(self) -> str:
        where = f" ({self.problem.field})" if self.problem.field else ""
        return f"HTTP {self.problem.status}: {self.problem.detail or self.problem.title}{where}"


class BadRequestError(ProblemError):
    status_code = 400


class UnauthorizedError(ProblemError):
    """No valid key (401)."""

    status_code = 401


class ForbiddenError(ProblemError):
    """The key lacks a role or reaches outside its workspace (403)."""

    status_code = 403


class NotFoundError(ProblemError):
    status_code = 404


class ConflictError(ProblemError):
    status_code = 409


class PayloadTooLargeError(ProblemError):
    status_code = 413


class InvalidInputError(ProblemError):
    """The body is not what the operation takes (422): `field` names where."""

    status_code = 422


class RateLimitedError(ProblemError):
    """Over the key's or workspace's budget (429), still after the retries allowed."""

    status_code = 429


class UnavailableError(ProblemError):
    """A dependency is down (503; 502 and 504 from a proxy): `dependency` names it."""

    status_code = 503

    @property
    def dependency(self) -> str | None:
        return self.problem.dependency


_BY_STATUS: dict[int, type[ProblemError]] = {
    kind.status_code: kind
    for kind in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        PayloadTooLargeError,
        InvalidInputError,
        RateLimitedError,
        UnavailableError,
    )
}
_BY_STATUS[502] = _BY_STATUS[504] = UnavailableError


def problem_error(
    status: int, body: bytes, reason: str, retry_after_s: float | None
) -> ProblemError:
    """The exception for an error answer; a body that is no problem details keeps its status."""
    try:
        problem = msgspec.json.decode(body, type=ProblemDetails)
    except (msgspec.DecodeError, msgspec.ValidationError):
        text = body[:200].decode("utf-8", "replace").strip()
        problem = ProblemDetails(status=status, title=reason or "error", detail=text or None)
    kind = _BY_STATUS.get(status, ProblemError)
    return kind(problem, retry_after_s)
