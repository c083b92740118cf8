"""The admin console's routes: server-rendered pages over the admin API's core functions.

Authentication: the bearer-key middleware skips `/console` (see
`gateway.http.security.PUBLIC_PATHS`); every page but sign-in and the static files
depends on `signed_in`, which turns the session cookie into the Principal of the key
that signed in, requires the admin role and spends the key's rate-limit budget like
an API call. Every change is a POST carrying the session's CSRF token and coming from
this origin. Every response carries a strict Content-Security-Policy (no inline
script or style), nosniff, no-referrer and `Cache-Control: no-store`.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import Cookie, FormMultiDict, MutableScopeHeaders, State
from litestar.di import NamedDependency, Provide
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, NotAuthorizedException, PermissionDeniedException
from litestar.middleware import DefineMiddleware
from litestar.params import FromPath
from litestar.response import Redirect, Template
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from gateway.access.admission import Admission, Authentication
from gateway.access.auth import Principal, hash_key, is_usable, principal_of
from gateway.admin import knowledge as admin
from gateway.admin import workspace
from gateway.admin.knowledge import Knowledge
from gateway.admin.workspace import WorkspaceSettings
from gateway.errors import (
    ForbiddenError,
    GatewayError,
    InvalidInputError,
    NotFoundError,
    UnauthenticatedError,
)
from gateway.http.bodies import agent_settings, knowledge_base_settings, settings_changes
from gateway.http.console import views
from gateway.http.console.forms import FormErrors, convert, domain_errors, form_errors, scalar
from gateway.http.console.sessions import (
    COOKIE,
    COOKIE_PATH,
    ConsoleSession,
    ConsoleSessions,
    sessions_of,
)
from gateway.http.dependencies import Injected, telemetry_of
from gateway.http.knowledge_schemas import PutAgent, PutKnowledgeBase
from gateway.http.problems import gateway_problem
from gateway.http.retrieval_schemas import RetrieveIn
from gateway.http.security import client_address
from gateway.http.workspace_schemas import PatchWorkspaceSettings
from gateway.retrieval import turn
from gateway.retrieval.plan import Planning
from gateway.retrieval.turn import Retrieval
from gateway.safety.egress import Egress, explain_texts
from gateway.safety.spans import Detection
from gateway.telemetry import Telemetry
from ingest.index import IndexUnavailableError
from settings.config import Config
from settings.pii_allow_list import allow_list_entry
from settings.records import KnowledgeBase, Role
from settings.resolve import PII_ALLOW_LIST, resolve_pii_allow_list
from settings.store import SettingsStore, StoreUnavailableError

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
_STATIC = {"console.css": "text/css", "console.js": "text/javascript"}
_KB_ERROR_FIELDS = {
    "fusion": "fusion_dense",
    "fusion.dense": "fusion_dense",
    "fusion.keyword": "fusion_keyword",
}


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


def _filter_of(text: str) -> Any:
    """A form's filter (JSON), None when blank; FormErrors naming `filter` when it is not
    a JSON object."""
    if not text.strip():
        return None
    try:
        found = json.loads(text)
    except ValueError:
        raise FormErrors({"filter": 'not JSON: write an object such as {"region": "eu"}'}) from None
    if not isinstance(found, dict):
        raise FormErrors({"filter": "a filter is a JSON object"})
    return found


def _text(form: FormMultiDict, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


#: the settings form's field of one entity type's operator: `operator-PERSON`
_OPERATOR_FIELD = "operator-"


def _operators(form: FormMultiDict) -> dict[str, str]:
    """The operator chosen per entity type, as sent; `replace` (the default) left out. An
    unknown type or operator is kept, and refused by the API's own rule."""
    return {
        name.removeprefix(_OPERATOR_FIELD): value
        for name, value in form.items()
        if name.startswith(_OPERATOR_FIELD) and isinstance(value, str) and value != "replace"
    }


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


async def _explained(
    egress: Egress, principal: Principal, outcome: turn.TurnResult
) -> dict[str, list[Detection]]:
    """For an admin key, why each returned passage's spans were hidden; nothing otherwise."""
    if Role.ADMIN not in principal.roles or not outcome.effective.get("redaction"):
        return {}
    ids = [candidate.point_id for candidate in outcome.candidates]
    texts = [candidate.hit.payload.text for candidate in outcome.candidates]
    explained = await explain_texts(egress, principal, texts)
    return dict(zip(ids, explained, strict=True))


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


# ---- the controller ----------------------------------------------------------------


class ConsoleController(Controller):
    path = "/console"
    include_in_schema = False
    middleware = [DefineMiddleware(ConsoleHeaders)]  # noqa: RUF012 — Litestar configuration
    dependencies = {"who": Provide(signed_in)}  # noqa: RUF012 — Litestar configuration
    exception_handlers = {  # noqa: RUF012 — Litestar configuration
        SignInRequired: _sign_in_again,
        CsrfRefused: _error_page,
        GatewayError: _error_page,
        HTTPException: _error_page,
        StoreUnavailableError: _error_page,
        IndexUnavailableError: _error_page,
    }

    # -- sign-in -------------------------------------------------------------------

    @get("/", name="console_home")
    async def home(self, request: ConsoleRequest) -> Redirect:
        session = await _sessions(request).load(request.cookies.get(COOKIE))
        return Redirect(path=HOME if session else SIGN_IN, status_code=303)

    @get("/login")
    async def sign_in_page(self) -> Template:
        return _page("login.html", None)

    @post("/login", status_code=303)
    async def sign_in(
        self,
        request: ConsoleRequest,
        authentication: Injected[Authentication],
        admission: Injected[Admission],
        telemetry: Injected[Telemetry],
    ) -> Response[Any]:
        """Verify the admin key posted in the form; keep only its hash, server-side."""
        if not _same_origin(request):
            raise CsrfRefused(detail="sign-in must come from this console's page")
        form = await request.form()
        secret = _text(form, "key").strip()
        try:
            principal = await authentication.authenticate(
                f"Bearer {secret}", client_address(request)
            )
            principal.require(Role.ADMIN)
        except UnauthenticatedError:
            telemetry.count("console_sign_in_refused")
            return _page("login.html", None, status_code=401, error="Unknown key.")
        except ForbiddenError:
            telemetry.count("console_sign_in_refused")
            return _page(
                "login.html",
                None,
                status_code=403,
                error="This key cannot sign in: the console needs a workspace key "
                "with the admin role.",
            )
        await admission.admit(principal)
        sessions = _sessions(request)
        previous = request.cookies.get(COOKIE)
        if previous:
            await sessions.end(previous)  # a new session id at every sign-in
        token, _ = await sessions.start(hash_key(secret))
        telemetry.count("console_sign_ins")
        return Redirect(path=HOME, status_code=303, cookies=[_session_cookie(request, token)])

    @post("/logout", status_code=303)
    async def sign_out(self, request: ConsoleRequest, who: NamedDependency[SignedIn]) -> Redirect:
        await _checked_form(request, who)
        await _sessions(request).end(who.token)
        return Redirect(
            path=SIGN_IN, status_code=303, cookies=[_session_cookie(request, "", clear=True)]
        )

    # -- workspace settings --------------------------------------------------------

    @get("/settings")
    async def settings_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        workspaces: Injected[WorkspaceSettings],
    ) -> Template:
        page = await views.settings_page(workspaces, who.principal)
        return _page(
            "settings.html",
            who,
            active="settings",
            notice=await _notice(request, who),
            page=page,
            errors={},
        )

    @post("/settings", status_code=303)
    async def change_setting(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        workspaces: Injected[WorkspaceSettings],
    ) -> Response[Any]:
        """One setting per form, as a PATCH of that field (reset = null)."""
        form = await _checked_form(request, who)
        setting = _text(form, "setting")
        reset = _text(form, "action") == "reset"
        value: Any
        if setting == "pii_entities":
            value = (
                None
                if reset
                else [v for v in form.getall("pii_entities", []) if isinstance(v, str)]
            )
        elif setting == "pii_operators":  # one choice per type; `replace` is the default
            value = None if reset else _operators(form)
        elif setting == "pii_allow_list":  # one entry per line
            lines = _text(form, "value").splitlines()
            value = None if reset else [line.strip() for line in lines if line.strip()]
        else:
            value = None if reset else scalar(_text(form, "value"))
        try:
            data = convert(PatchWorkspaceSettings, {setting: value})
            updated = await workspace.change_settings(
                workspaces, who.principal, settings_changes(data)
            )
        except (FormErrors, InvalidInputError) as error:
            errors = form_errors(error)
            page = await views.settings_page(workspaces, who.principal)
            return _page(
                "settings.html",
                who,
                active="settings",
                status_code=422,
                page=page,
                errors=errors.errors,
                typed={setting: _text(form, "value")},
            )
        effective = workspace.effective(workspaces, updated).get(setting)
        now = views.shown(effective.value) if effective else "changed"
        return await _after_change(request, who, f"Saved: {setting} is now {now}.", HOME)

    @get("/history")
    async def history_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
    ) -> Template:
        rows = await views.history_rows(store, who.principal)
        admin_rows = await views.admin_change_rows(store, who.principal)
        return _page("history.html", who, active="history", changes=rows, admin_changes=admin_rows)

    # -- knowledge bases -----------------------------------------------------------

    @get("/knowledge-bases")
    async def knowledge_bases_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
        planning: Injected[Planning],
    ) -> Template:
        rows = await views.knowledge_base_views(knowledge, planning, who.principal)
        return _page(
            "knowledge_bases.html",
            who,
            active="knowledge-bases",
            notice=await _notice(request, who),
            rows=rows,
        )

    @post("/knowledge-bases", status_code=303)
    async def change_knowledge_base(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
        planning: Injected[Planning],
    ) -> Response[Any]:
        """A PUT of the KB: the form's settings, its storage unchanged."""
        form, kb = await _posted_kb(request, who, knowledge.store)
        values = {
            name: _text(form, name)
            for name in ("name", *views.KB_FIELDS, "drop_copies", "metadata_fields")
        }
        weights = {
            "dense": scalar(values["fusion_dense"]),
            "keyword": scalar(values["fusion_keyword"]),
        }
        body: dict[str, Any] = {
            "name": values["name"],
            "storage": kb.storage,
            **{name: scalar(values[name]) for name in views.KB_FIELDS[:4]},
            "fusion": {k: v for k, v in weights.items() if v is not None} or None,
            # an unknown choice is sent as typed, and refused like any other wrong type
            "drop_copies": views.TOGGLE_VALUES.get(values["drop_copies"], values["drop_copies"]),
            # the filterable fields: `name=type, ...` (blank: none)
            "metadata_fields": views.field_types_of(values["metadata_fields"]),
            # edited through the API and the CLI: a console save keeps them
            "language": kb.settings.get("language"),
        }
        try:
            data = convert(PutKnowledgeBase, body, fields=_KB_ERROR_FIELDS)
            await admin.put_knowledge_base(
                knowledge,
                who.principal,
                kb.kb_id,
                name=data.name,
                storage=data.storage,
                settings=knowledge_base_settings(data),
            )
        except (FormErrors, InvalidInputError) as error:
            errors = form_errors(error)
            rows = await views.knowledge_base_views(
                knowledge, planning, who.principal, rejected=(kb.kb_id, values, errors.errors)
            )
            return _page(
                "knowledge_bases.html",
                who,
                active="knowledge-bases",
                status_code=422,
                rows=rows,
            )
        return await _after_change(
            request, who, f"Saved the settings of {kb.kb_id}.", "/console/knowledge-bases"
        )

    # -- agents --------------------------------------------------------------------

    @get("/agents")
    async def agents_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
        config: Injected[Config],
    ) -> Template:
        rows = await views.agent_views(store, config, who.principal)
        choices = await views.knowledge_base_choices(store, who.principal)
        return _page(
            "agents.html",
            who,
            active="agents",
            notice=await _notice(request, who),
            rows=rows,
            choices=choices,
        )

    @post("/agents", status_code=303)
    async def change_agent(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
    ) -> Response[Any]:
        """A PUT of the agent: the form's settings, its knowledge bases unchanged."""
        form = await _checked_form(request, who)
        store, config = knowledge.store, knowledge.config
        agent = await admin.agent_of(store, who.principal, _text(form, "agent_id"))
        values = {name: _text(form, name) for name in ("top_k", "score_threshold", "pii_redaction")}
        body = {
            "knowledge_base_ids": agent.knowledge_base_ids,
            **{name: scalar(value) for name, value in values.items()},
        }
        try:
            data = convert(PutAgent, body)
            await admin.put_agent(
                knowledge,
                who.principal,
                agent.agent_id,
                data.knowledge_base_ids,
                agent_settings(data),
            )
        except (FormErrors, InvalidInputError) as error:
            errors = form_errors(error)
            rows = await views.agent_views(
                store, config, who.principal, rejected=(agent.agent_id, values, errors.errors)
            )
            choices = await views.knowledge_base_choices(store, who.principal)
            return _page(
                "agents.html", who, active="agents", status_code=422, rows=rows, choices=choices
            )
        return await _after_change(
            request, who, f"Saved the settings of {agent.agent_id}.", "/console/agents"
        )

    # -- try a question ------------------------------------------------------------

    @get("/try")
    async def try_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
    ) -> Template:
        agents = await admin.agents(store, who.principal)
        return _page(
            "try.html",
            who,
            active="try",
            notice=await _notice(request, who),
            agents=agents,
            values={},
            errors={},
            result=None,
        )

    @post("/try", status_code=200)
    async def try_question(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
        retrieval: Injected[Retrieval],
        egress: Injected[Egress],
    ) -> Template:
        """One retrieval turn as the signed-in key (needs its retrieve role, like the API)."""
        form = await _checked_form(request, who)
        values = {
            "agent_id": _text(form, "agent_id"),
            "question": _text(form, "question"),
            "filter": _text(form, "filter"),
        }
        agents = await admin.agents(store, who.principal)
        status, result, errors = 200, None, {}
        try:
            who.principal.require(Role.RETRIEVE)  # as POST /v1/retrieve
            data = convert(RetrieveIn, {**values, "filter": _filter_of(values["filter"])})
            outcome = await turn.retrieve(
                retrieval,
                who.principal,
                data.agent_id,
                data.question,
                data.variations,
                asks=turn.TurnAsks(filter=data.filter),
            )
            result = views.try_view(outcome, await _explained(egress, who.principal, outcome))
        except FormErrors as error:
            status, errors = 422, error.errors
        except ForbiddenError as error:
            status, errors = 403, domain_errors(error).errors
        except NotFoundError as error:
            status, errors = 404, domain_errors(error, "agent_id").errors
        except InvalidInputError as error:
            status, errors = 422, domain_errors(error).errors
        return _page(
            "try.html",
            who,
            active="try",
            status_code=status,
            agents=agents,
            values=values,
            errors=errors,
            result=result,
        )

    @post("/try/allow", status_code=303)
    async def allow_value(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        workspaces: Injected[WorkspaceSettings],
    ) -> Response[Any]:
        """Add one value a passage's redaction hid to the workspace's allow-list (admin)."""
        form = await _checked_form(request, who)
        value = _text(form, "value").strip()
        found = await workspaces.settings.workspace_or_none(who.principal.tenant_id)
        entries = list(resolve_pii_allow_list(found.settings if found else None).value)
        entry = allow_list_entry(value)
        if entry and entry not in entries:
            entries.append(entry)
        try:
            data = convert(PatchWorkspaceSettings, {PII_ALLOW_LIST: entries})
            await workspace.change_settings(workspaces, who.principal, settings_changes(data))
        except (FormErrors, InvalidInputError) as error:
            message = next(iter(form_errors(error).errors.values()), "not allowed")
            return await _after_change(request, who, f"Not added: {message}", "/console/try")
        return await _after_change(
            request, who, "Added to the allow-list; the next turn keeps it.", "/console/try"
        )

    # -- static files (no workspace data) ------------------------------------------

    @get("/static/{name:str}")
    async def static(self, name: FromPath[str]) -> Response[bytes]:
        media_type = _STATIC.get(name)
        if media_type is None:
            raise NotFoundError("no such file")
        body = (resources.files("gateway.http.console") / "static" / name).read_bytes()
        return Response(body, media_type=media_type)
