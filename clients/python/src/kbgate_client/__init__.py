"""A typed client of kbgate's HTTP API: `Client` (sync) and `AsyncClient` (async).

from kbgate_client import Client

with Client("http://localhost:8080", key) as kbgate:
    turn = kbgate.retrieve("support-bot", "How do I rotate a key?")
    prompt_context = turn.context  # the passages, fenced as untrusted evidence
"""

from kbgate_client._async_client import AsyncClient
from kbgate_client._http import NO_RETRIES, Retries
from kbgate_client._sync_client import Client
from kbgate_client.errors import (
    BadRequestError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    KbgateError,
    NotFoundError,
    PayloadTooLargeError,
    ProblemError,
    RateLimitedError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)

__all__ = [
    "NO_RETRIES",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ConflictError",
    "ForbiddenError",
    "InvalidInputError",
    "KbgateError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProblemError",
    "RateLimitedError",
    "Retries",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
