"""Authentication at the edge: a middleware that sets `request.user`, and role guards.

The middleware admits a request as `gateway.access.admission` rules: its key verified
(failures counted per client address: the peer, or behind a proxy named in
`KBGATE_TRUSTED_PROXIES` the address it forwards, `gateway.http.forwarding`), then its
key's and its workspace's rate-limit budgets spent.
"""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import Guard

from gateway.access.auth import Principal
from gateway.http.dependencies import admission_of, authentication_of
from settings.records import Role

# The admin console authenticates its own pages with a session (gateway/console).
PUBLIC_PATHS = ("^/health", "^/metrics", "^/schema", "^/console")


def client_address(connection: ASGIConnection) -> str:  # type: ignore[type-arg]  # Litestar's connection generics are not needed here
    """The client's address: the peer's, or the one a trusted proxy forwarded
    (`gateway.http.forwarding.ForwardedClientMiddleware` set it in the scope)."""
    client = connection.client
    return client.host if client is not None else "unknown"


class BearerKeyMiddleware(AbstractAuthenticationMiddleware):
    """Turns `Authorization: Bearer <key>` into a Principal, or answers 401 (or 429)."""

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:  # type: ignore[type-arg]  # as above
        state = connection.app.state
        principal = await authentication_of(state).authenticate(
            connection.headers.get("authorization"), client_address(connection)
        )
        await admission_of(state).admit(principal)
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
