"""The admin console's routes: server-rendered pages over the admin API's core functions.

Sign-in, workspace settings and their history, knowledge bases, agents and the try
page. Who may reach them (sessions, CSRF, security headers) is
`gateway.http.console.guard`'s; how they are rendered, errors included,
`gateway.http.console.pages`'.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from litestar import Controller, Response, get, post
from litestar.datastructures import FormMultiDict
from litestar.di import NamedDependency, Provide
from litestar.exceptions import HTTPException
from litestar.middleware import DefineMiddleware
from litestar.params import FromPath
from litestar.response import Redirect, Template

from gateway.access.admission import Admission, Authentication
from gateway.access.auth import Principal, hash_key
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
from gateway.http.console.guard import (
    HOME,
    SIGN_IN,
    ConsoleHeaders,
    ConsoleRequest,
    CsrfRefused,
    SignedIn,
    SignInRequired,
    _checked_form,
    _posted_kb,
    _same_origin,
    _session_cookie,
    _sessions,
    _text,
    signed_in,
)
from gateway.http.console.pages import _after_change, _error_page, _notice, _page, _sign_in_again
from gateway.http.console.sessions import COOKIE
from gateway.http.dependencies import Injected
from gateway.http.knowledge_schemas import PutAgent, PutKnowledgeBase
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
from settings.records import Role
from settings.resolve import PII_ALLOW_LIST, resolve_pii_allow_list
from settings.store import SettingsStore, StoreUnavailableError

_STATIC = {"console.css": "text/css", "console.js": "text/javascript"}
_KB_ERROR_FIELDS = {
    "fusion": "fusion_dense",
    "fusion.dense": "fusion_dense",
    "fusion.keyword": "fusion_keyword",
}


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
