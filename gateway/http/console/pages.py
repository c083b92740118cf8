"""The console's pages as rendered: a template with the signed-in context, the
one-shot notice a change leaves (post/redirect/get), and the error pages.
"""

from __future__ import annotations

from typing import Any

from litestar import Response
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.response import Redirect, Template

from gateway.errors import GatewayError
from gateway.http.console import views
from gateway.http.console.guard import SIGN_IN, ConsoleRequest, SignedIn, _session_cookie, _sessions
from gateway.http.console.sessions import COOKIE
from gateway.http.problems import gateway_problem
from ingest.index import IndexUnavailableError
from settings.store import StoreUnavailableError


def _page(
    name: str,
    who: SignedIn | None,
    *,
    active: str = "",
    status_code: int = 200,
    notice: str | None = None,
    **context: Any,
) -> Template:
    return Template(
        template_name=name,
        context={
            "who": who.principal if who else None,
            "csrf": who.session.csrf if who else "",
            "active": active,
            "notice": notice,
            "shown": views.shown,
            "moment": views.moment,
            **context,
        },
        status_code=status_code,
    )


async def _notice(request: ConsoleRequest, who: NamedDependency[SignedIn]) -> str | None:
    """The one-shot message left by the last change, cleared once shown."""
    notice = who.session.notice
    if notice is not None:
        who.session.notice = None
        await _sessions(request).save(who.token, who.session)
    return notice


async def _after_change(request: ConsoleRequest, who: SignedIn, notice: str, to: str) -> Redirect:
    """Post/redirect/get: the next page shows `notice` once."""
    who.session.notice = notice
    await _sessions(request).save(who.token, who.session)
    return Redirect(path=to, status_code=303)


# ---- error pages -------------------------------------------------------------------


def _sign_in_again(request: ConsoleRequest, _: Exception) -> Response[Any]:
    token = request.cookies.get(COOKIE)
    cookies = [_session_cookie(request, "", clear=True)] if token else None
    return Redirect(path=SIGN_IN, status_code=303, cookies=cookies)


def _error_page(request: ConsoleRequest, error: Exception) -> Response[Any]:
    headers: dict[str, str] = {}
    if isinstance(error, GatewayError):
        problem = gateway_problem(error)
        status, detail = problem.status_code, problem.detail or ""
        headers = dict(problem.headers or {})
        headers.pop("WWW-Authenticate", None)
    elif isinstance(error, HTTPException):
        status, detail = error.status_code, error.detail
    elif isinstance(error, StoreUnavailableError | IndexUnavailableError):
        status, detail, headers = (
            503,
            "a dependency is unavailable; retry later",
            {"Retry-After": "5"},
        )
    else:  # pragma: no cover — only the types registered below reach here
        status, detail = 500, "internal error"
    return Template(
        template_name="error.html",
        context={
            "status": status,
            "detail": detail,
            "who": None,
            "active": "",
            "csrf": "",
            "notice": None,
            "shown": views.shown,
            "moment": views.moment,
        },
        status_code=status,
        headers=headers,
    )
