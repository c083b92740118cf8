"""Authentication at the edge: a middleware that sets `request.user`, and role guards.

Failed authentications are counted per client address (the peer address; behind a
trusted proxy, the one uvicorn takes from its forwarding headers): past the budget
an address gets 429 for the rest of the minute, whatever key it presents, unless the
key is one this process has recently verified (so its valid callers keep working
while it is being guessed at).
"""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import Guard

from gateway.access.auth import Principal, authenticate
from gateway.errors import RateLimitedError, UnauthenticatedError
from gateway.http.dependencies import services_of
from gateway.runtime.services import Services
from settings.records import ApiKey, Role

# The admin console authenticates its own pages with a session (gateway/console).
PUBLIC_PATHS = ("^/health", "^/metrics", "^/schema", "^/console")


def client_address(connection: ASGIConnection) -> str:  # type: ignore[type-arg]  # Litestar's connection generics are not needed here
    client = connection.client
    return client.host if client is not None else "unknown"


async def authenticate_counted(
    services: Services, authorization: str | None, address: str
) -> Principal:
    """`authenticate`, with failures counted against `address` and refused past its budget.

    A request without credentials is not counted (it guesses nothing).
    """

    async def lookup(key_hash: str) -> ApiKey | None:
        known = services.settings.fresh_api_key(key_hash)
        if known is not None:
            return known
        wait_s = await services.auth_failures.blocked(address)
        if wait_s is not None:
            services.telemetry.count("auth_failures_limited")
            raise RateLimitedError(
                wait_s, message="too many failed authentications from this address; retry later"
            )
        return await services.settings.api_key(key_hash)

    config = services.config
    try:
        principal = await authenticate(
            lookup, (config.platform_key, config.platform_key_previous), authorization
        )
    except UnauthenticatedError:
        if authorization:
            await services.auth_failures.failed(address)
        raise
    services.key_usage.used(principal.key_id)
    return principal


class BearerKeyMiddleware(AbstractAuthenticationMiddleware):
    """Turns `Authorization: Bearer <key>` into a Principal, or answers 401 (or 429)."""

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:  # type: ignore[type-arg]  # as above
        services = services_of(connection.app.state)
        principal = await authenticate_counted(
            services, connection.headers.get("authorization"), client_address(connection)
        )
        await services.admit(principal)
        return AuthenticationResult(user=principal, auth=principal.key_id)


def requires(*roles: Role) -> Guard:
    """A guard admitting only principals with one of `roles` (403 otherwise).

    A coroutine function on purpose: Litestar runs a plain function guard in a worker
    thread, a thread hop (and a wait for the GIL) on every request for a set lookup.
    """

    async def guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:  # type: ignore[type-arg]  # as above
        principal: Principal = connection.user
        principal.require(*roles)

    return guard
