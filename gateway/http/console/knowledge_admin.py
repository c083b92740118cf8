"""The console's administration of knowledge bases, agents and documents.

Creating and deleting KBs and agents, attaching, detaching and ordering an agent's KBs,
listing, uploading and deleting documents: each form is one call of the core function
the JSON admin API calls (`gateway.admin.knowledge`), as the signed-in key, so the same
rules, roles and history apply (documents need the key's ingest role, as on the API).
Sessions, CSRF, headers and error pages are `ConsoleController`'s.

Uploads take one or more files per request (`files`); a request that accepts JSON gets
each file's outcome as JSON (the console's script sends one file per request to show
progress), any other gets the documents page with the outcomes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from litestar import Controller, Response, get, post
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Redirect, Template

from gateway.access.auth import Principal
from gateway.admin import knowledge as admin
from gateway.admin.knowledge import Documents, Knowledge
from gateway.errors import InvalidInputError, NotFoundError
from gateway.http.console import views
from gateway.http.console.controller import ConsoleController
from gateway.http.console.forms import FormErrors, convert, form_errors
from gateway.http.console.guard import ConsoleRequest, SignedIn, _checked_form, _posted_kb, _text
from gateway.http.console.pages import _after_change, _notice, _page
from gateway.http.console.uploads import UploadOutcome, upload_document
from gateway.http.dependencies import Injected
from gateway.http.knowledge_schemas import PutKnowledgeBase
from gateway.retrieval.plan import Planning
from ingest.index import Index
from ingest.payload import Classification
from settings.records import Role
from settings.store import SettingsStore

KNOWLEDGE_BASES = "/console/knowledge-bases"
AGENTS = "/console/agents"
_MOVES = {"up": -1, "down": 1}


def documents_path(kb_id: str) -> str:
    return f"/console/documents?kb_id={quote(kb_id, safe='')}"


class KnowledgeAdminController(Controller):
    path = "/console"
    include_in_schema = False
    middleware = ConsoleController.middleware
    dependencies = ConsoleController.dependencies
    exception_handlers = ConsoleController.exception_handlers

    # -- knowledge bases -----------------------------------------------------------

    @post("/knowledge-bases/new", status_code=303)
    async def create_knowledge_base(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
        planning: Injected[Planning],
    ) -> Response[Any]:
        """A PUT of a KB that does not exist yet, with no settings of its own."""
        form = await _checked_form(request, who)
        values = {name: _text(form, name).strip() for name in ("kb_id", "name", "storage")}
        kb_id = values["kb_id"]
        try:
            data = convert(
                PutKnowledgeBase, {"name": values["name"], "storage": values["storage"] or "org"}
            )
            await _refuse_taken(knowledge.store, who.principal, "knowledge_base", kb_id)
            await admin.put_knowledge_base(
                knowledge, who.principal, kb_id, name=data.name, storage=data.storage, settings={}
            )
        except (FormErrors, InvalidInputError) as error:
            rows = await views.knowledge_base_views(knowledge, planning, who.principal)
            return _page(
                "knowledge_bases.html",
                who,
                active="knowledge-bases",
                status_code=422,
                rows=rows,
                create_values=values,
                create_errors=form_errors(error).errors,
            )
        return await _after_change(
            request,
            who,
            f"Created the knowledge base {kb_id}. Add its documents below.",
            documents_path(kb_id),
        )

    @post("/knowledge-bases/delete", status_code=303)
    async def delete_knowledge_base(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
    ) -> Redirect:
        form = await _checked_form(request, who)
        removal = await admin.delete_knowledge_base(knowledge, who.principal, _text(form, "kb_id"))
        return await _after_change(
            request,
            who,
            f"Deleted the knowledge base {_text(form, 'kb_id')}: {removal.documents} documents, "
            f"{removal.passages} passages; taken out of {removal.agents_detached} agents.",
            KNOWLEDGE_BASES,
        )

    # -- documents -----------------------------------------------------------------

    @get("/documents")
    async def documents_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
        index: Injected[Index],
        kb_id: FromQuery[str],
    ) -> Template:
        notice = await _notice(request, who)
        return await _documents(who, store, index, kb_id, notice=notice)

    @post("/documents/upload", status_code=200)
    async def upload(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        documents: Injected[Documents],
        index: Injected[Index],
    ) -> Response[Any]:
        """Each file read and written as a document of the KB; one outcome per file."""
        form, kb = await _posted_kb(request, who, documents.store)
        classification = _text(form, "classification")
        outcomes: list[UploadOutcome] = []
        for item in form.getall("files", []):
            if isinstance(item, UploadFile) and item.filename:
                content = await item.read()
                outcomes.append(
                    await upload_document(
                        documents,
                        who.principal,
                        kb.kb_id,
                        file_name=item.filename,
                        content=content,
                        classification=classification,
                    )
                )
        if "application/json" in request.headers.get("accept", ""):
            return Response(
                {"results": [outcome.as_json() for outcome in outcomes]},
                status_code=200 if outcomes else 422,
            )
        return await _documents(
            who,
            documents.store,
            index,
            kb.kb_id,
            outcomes=outcomes,
            status_code=200 if outcomes else 422,
            upload_error=None if outcomes else "Choose at least one file.",
        )

    @post("/documents/delete", status_code=303)
    async def delete_document(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        documents: Injected[Documents],
    ) -> Redirect:
        form = await _checked_form(request, who)
        kb_id, document_id = _text(form, "kb_id"), _text(form, "document_id")
        who.principal.require(Role.INGEST)  # as DELETE /v1/knowledge-bases/.../documents/...
        deleted = await admin.delete_document(documents, who.principal, kb_id, document_id)
        return await _after_change(
            request, who, f"Deleted {document_id} ({deleted} passages).", documents_path(kb_id)
        )

    # -- agents --------------------------------------------------------------------

    @post("/agents/new", status_code=303)
    async def create_agent(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
    ) -> Response[Any]:
        """A PUT of an agent that does not exist yet, with the KBs ticked, in page order."""
        form = await _checked_form(request, who)
        agent_id = _text(form, "agent_id").strip()
        kb_ids = [
            value for value in form.getall("knowledge_base_ids", []) if isinstance(value, str)
        ]
        try:
            await _refuse_taken(knowledge.store, who.principal, "agent", agent_id)
            await admin.put_agent(knowledge, who.principal, agent_id, kb_ids, {})
        except (FormErrors, InvalidInputError) as error:
            return await _agents_page(
                who,
                knowledge,
                status_code=422,
                create_values={"agent_id": agent_id, "knowledge_base_ids": kb_ids},
                create_errors=form_errors(error).errors,
            )
        attached = ", ".join(kb_ids) if kb_ids else "no knowledge base yet"
        return await _after_change(
            request, who, f"Created the agent {agent_id} ({attached}).", AGENTS
        )

    @post("/agents/knowledge-bases", status_code=303)
    async def arrange(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
    ) -> Redirect:
        """Attach a KB at the end, detach one, or move one up or down: a PUT of the agent
        with its settings unchanged."""
        form = await _checked_form(request, who)
        agent = await admin.agent_of(knowledge.store, who.principal, _text(form, "agent_id"))
        kb_id, action = _text(form, "kb_id"), _text(form, "action")
        kb_ids = _arranged(agent.knowledge_base_ids, kb_id, action)
        await admin.put_agent(knowledge, who.principal, agent.agent_id, kb_ids, agent.settings)
        done = {"attach": "Attached", "detach": "Detached"}.get(action, "Moved")
        order = ", ".join(kb_ids) if kb_ids else "none"
        return await _after_change(
            request, who, f"{done} {kb_id}: {agent.agent_id} now uses {order}.", AGENTS
        )

    @post("/agents/delete", status_code=303)
    async def delete_agent(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        knowledge: Injected[Knowledge],
    ) -> Redirect:
        form = await _checked_form(request, who)
        agent = await admin.delete_agent(knowledge, who.principal, _text(form, "agent_id"))
        return await _after_change(
            request,
            who,
            f"Deleted the agent {agent.agent_id} (its knowledge bases stay).",
            AGENTS,
        )


def _arranged(kb_ids: list[str], kb_id: str, action: str) -> list[str]:
    """The agent's KB ids after one attach, detach or move; InvalidInputError otherwise."""
    order = list(kb_ids)
    if action == "attach" and kb_id not in order:
        return [*order, kb_id]  # put_agent checks that it is one of the workspace's
    if kb_id not in order:
        raise InvalidInputError("the agent has no such knowledge base", field="kb_id")
    if action == "detach":
        return [item for item in order if item != kb_id]
    step = _MOVES.get(action)
    if step is None:
        raise InvalidInputError("unknown action", field="action")
    at = order.index(kb_id)
    to = min(max(at + step, 0), len(order) - 1)
    order[at], order[to] = order[to], order[at]
    return order


async def _refuse_taken(
    store: SettingsStore, principal: Principal, kind: str, object_id: str
) -> None:
    """FormErrors when the workspace already has a KB (or agent) with this id: creating
    never replaces one."""
    find = admin.knowledge_base_of if kind == "knowledge_base" else admin.agent_of
    field = "kb_id" if kind == "knowledge_base" else "agent_id"
    if not object_id:
        raise FormErrors({field: "must be filled in"})
    try:
        await find(store, principal, object_id)
    except NotFoundError:
        return
    raise FormErrors({field: "is taken: this workspace has one with this id"})


async def _agents_page(
    who: SignedIn, knowledge: Knowledge, *, status_code: int, **context: Any
) -> Template:
    store = knowledge.store
    return _page(
        "agents.html",
        who,
        active="agents",
        status_code=status_code,
        rows=await views.agent_views(store, knowledge.config, who.principal),
        choices=await views.knowledge_base_choices(store, who.principal),
        **context,
    )


async def _documents(
    who: SignedIn,
    store: SettingsStore,
    index: Index,
    kb_id: str,
    *,
    notice: str | None = None,
    outcomes: list[UploadOutcome] | None = None,
    status_code: int = 200,
    upload_error: str | None = None,
) -> Template:
    kb = await admin.knowledge_base_of(store, who.principal, kb_id)
    documents, passages, held_back = await admin.knowledge_base_stats(
        store, index, who.principal, kb.kb_id
    )
    return _page(
        "documents.html",
        who,
        active="knowledge-bases",
        status_code=status_code,
        notice=notice,
        kb=kb,
        stats={"documents": documents, "passages": passages, "held_back": held_back},
        document_ids=await admin.list_documents(store, index, who.principal, kb.kb_id),
        labels=[label.value for label in Classification],
        can_ingest=Role.INGEST in who.principal.roles,
        outcomes=outcomes,
        upload_error=upload_error,
    )
