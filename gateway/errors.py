"""Domain errors, raised in the core and mapped to problem details only at the edge.

`routes/errors.py` owns the HTTP mapping; nothing here knows about status codes.
Messages must never carry a question, passage, title or key.
"""

from __future__ import annotations


class GatewayError(Exception):
    """Base class: an expected failure with a message fit for the caller."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class UnauthenticatedError(GatewayError):
    """No credential, or one that matches no key."""


class ForbiddenError(GatewayError):
    """A valid credential without the role the operation needs."""


class NotFoundError(GatewayError):
    """Unknown, or another tenant's: the two are never told apart."""


class ConflictError(GatewayError):
    """The id is taken."""


class InvalidInputError(GatewayError):
    """The request is well-formed JSON but breaks a rule; `field` names the culprit."""


class PayloadTooLargeError(GatewayError):
    """A document or body above the configured size."""


class DependencyUnavailableError(GatewayError):
    """Qdrant, Redis or the embedder failed or timed out; try again later."""

    def __init__(self, dependency: str, *, retry_after_s: int = 5) -> None:
        super().__init__(f"{dependency} is unavailable; retry later")
        self.dependency = dependency
        self.retry_after_s = retry_after_s


class RateLimitedError(GatewayError):
    """A request budget is used up (the key's, its workspace's, or the client address's
    for failed authentications); retry after `retry_after_s`."""

    def __init__(
        self, retry_after_s: float, *, workspace: bool = False, message: str | None = None
    ) -> None:
        default = (
            "rate limit exceeded for this workspace; retry later"
            if workspace
            else "rate limit exceeded for this key; retry later"
        )
        super().__init__(message or default)
        self.retry_after_s = retry_after_s
