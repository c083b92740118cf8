"""Authentication at the edge: a middleware that sets `request.user`, and role guards."""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import Guard

from gateway.auth import Principal, authenticate
from gateway.errors import RateLimitedError
from gateway.services import Services
from settings.records import Role

# The admin console authenticates its own pages with a session (gateway/console).
PUBLIC_PATHS = ("^/health", "^/metrics", "^/schema", "^/console")


class BearerKeyMiddleware(AbstractAuthenticationMiddleware):
    """Turns `Authorization: Bearer <key>` into a Principal, or answers 401."""

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:  # type: ignore[type-arg]  # Litestar's connection generics are not needed here
        services: Services = connection.app.state.services
        principal = await authenticate(
            services.settings.api_key,
            services.config.platform_key,
            connection.headers.get("authorization"),
        )
        wait_s = await services.rate_limiter.hit(principal.key_id)
        if wait_s is not None:
            services.telemetry.count("rate_limited")
            raise RateLimitedError(wait_s)
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
