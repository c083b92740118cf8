"""Authentication at the edge: a middleware that sets `request.user`, and role guards.

A key that verifies is always served: the key is checked first (a hash lookup; the
platform keys compared in constant time) and the failed-authentication limit applies only
to requests whose key does not verify. Failures are counted per client address (the peer;
behind a proxy named in `KBGATE_TRUSTED_PROXIES`, the address it forwards,
`gateway.http.forwarding`); past the budget a failing request from that address gets 429
with Retry-After instead of 401 for the rest of the minute. So a misconfigured client, or
one guessing keys, slows only itself and whoever fails from its address: never a caller
with a valid key, whatever address it shares.
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
    """The client's address: the peer's, or the one a trusted proxy forwarded
    (`gateway.http.forwarding.ForwardedClientMiddleware` set it in the scope)."""
    client = connection.client
    return client.host if client is not None else "unknown"


async def authenticate_counted(
    services: Services, authorization: str | None, address: str
) -> Principal:
    """`authenticate`; a failure is counted against `address`, and answered 429 (not 401)
    once the address is past its budget. A key that verifies is served whatever the count.

    A request without credentials is not counted (it guesses nothing).
    """

    async def lookup(key_hash: str) -> ApiKey | None:
        known = services.settings.fresh_api_key(key_hash)
        return known if known is not None else await services.settings.api_key(key_hash)

    config = services.config
    try:
        principal = await authenticate(
            lookup, (config.platform_key, config.platform_key_previous), authorization
        )
    except UnauthenticatedError:
        if authorization:
            await _failed(services, address)
        raise
    services.key_usage.used(principal.key_id)
    return principal


async def _failed(services: Services, address: str) -> None:
    """Count a failed authentication; RateLimitedError when the address is past its budget."""
    wait_s = await services.auth_failures.blocked(address)
    await services.auth_failures.failed(address)
    if wait_s is not None:
        services.telemetry.count("auth_failures_limited")
        raise RateLimitedError(
            wait_s, message="too many failed authentications from this address; retry later"
        )


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
