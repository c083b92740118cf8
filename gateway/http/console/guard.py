"""Who may reach the console's pages, and how they arrive.

Authentication: the bearer-key middleware skips `/console` (see
`gateway.http.security.PUBLIC_PATHS`); every page but sign-in and the static files
depends on `signed_in`, which turns the session cookie into the Principal of the key
that signed in, requires the admin role and spends the key's rate-limit budget like
an API call. Every change is a POST carrying the session's CSRF token and coming from
this origin (`_checked_form`). Every response carries a strict Content-Security-Policy
(no inline script or style), nosniff, no-referrer and `Cache-Control: no-store`
(`ConsoleHeaders`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from litestar import Request
from litestar.datastructures import Cookie, FormMultiDict, MutableScopeHeaders, State
from litestar.di import NamedDependency
from litestar.enums import ScopeType
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from gateway.access.admission import Admission, Authentication
from gateway.access.auth import Principal, is_usable, principal_of
from gateway.admin import knowledge as admin
from gateway.http.console.sessions import (
    COOKIE,
    COOKIE_PATH,
    ConsoleSession,
    ConsoleSessions,
    sessions_of,
)
from gateway.http.dependencies import Injected, telemetry_of
from settings.records import KnowledgeBase, Role
from settings.store import SettingsStore

ConsoleRequest = Request[Any, Any, State]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
SIGN_IN = "/console/login"
HOME = "/console/settings"


class SignInRequired(NotAuthorizedException):
    """No valid console session: the browser is sent to the sign-in page."""


class CsrfRefused(PermissionDeniedException):
    """A change without this session's CSRF token, or from another site."""


class ConsoleHeaders:
    """Adds the console's security headers to every response it sends, errors included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The signed-in admin: the Principal of their key and their console session."""

    principal: Principal
    token: str
    session: ConsoleSession


def _sessions(request: ConsoleRequest) -> ConsoleSessions:
    return sessions_of(request.app.state)


async def signed_in(
    request: ConsoleRequest,
    authentication: Injected[Authentication],
    admission: Injected[Admission],
) -> SignedIn:
    """The session's key as a Principal with the admin role, or SignInRequired."""
    sessions = _sessions(request)
    token = request.cookies.get(COOKIE)
    session = await sessions.load(token)
    if token is None or session is None:
        raise SignInRequired
    record = await authentication.credential(session.key_hash)
    principal = principal_of(record) if record is not None and is_usable(record) else None
    if principal is None or Role.ADMIN not in principal.roles or not principal.tenant_id:
        await sessions.end(token)  # a revoked or expired key ends its sessions
        raise SignInRequired
    authentication.used(principal.key_id)
    await admission.admit(principal)
    return SignedIn(principal=principal, token=token, session=session)


def _same_origin(request: ConsoleRequest) -> bool:
    """Whether a POST comes from a page of this origin (Fetch metadata, else Origin)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in {"same-origin", "none"}
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


async def _checked_form(request: ConsoleRequest, who: NamedDependency[SignedIn]) -> FormMultiDict:
    """The posted form, once its CSRF token and origin are this session's."""
    form = await request.form()
    token = form.get("csrf_token")
    if (
        not isinstance(token, str)
        or not hmac.compare_digest(token.encode(), who.session.csrf.encode())
        or not _same_origin(request)
    ):
        telemetry_of(request.app.state).count("console_csrf_refused")
        raise CsrfRefused(detail="this form did not come from this console session")
    return form


async def _posted_kb(
    request: ConsoleRequest, who: NamedDependency[SignedIn], store: SettingsStore
) -> tuple[FormMultiDict, KnowledgeBase]:
    """The checked form and the knowledge base its `kb_id` names (NotFoundError when the
    workspace has none)."""
    form = await _checked_form(request, who)
    kb = await admin.knowledge_base_of(store, who.principal, _text(form, "kb_id"))
    return form, kb


def _text(form: FormMultiDict, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _session_cookie(request: ConsoleRequest, token: str, *, clear: bool = False) -> Cookie:
    """HttpOnly, SameSite=Strict, Secure over https; no expiry: it ends with the browser."""
    return Cookie(
        key=COOKIE,
        value="" if clear else token,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=0 if clear else None,
    )
