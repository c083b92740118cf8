"""Knowledge bases, agents and documents of the caller's workspace."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import msgspec
from litestar import Controller, Request, Response, delete, get, post, put
from litestar.datastructures import State
from litestar.openapi.spec import OpenAPIType, Reference, Schema
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from gateway.access.auth import Principal
from gateway.admin import knowledge as admin
from gateway.admin.bulk import open_bulk_write
from gateway.admin.knowledge import Documents, Knowledge
from gateway.errors import PayloadTooLargeError
from gateway.http.bodies import agent_settings, knowledge_base_settings
from gateway.http.dependencies import Injected
from gateway.http.knowledge_schemas import (
    AgentDeletedOut,
    AgentEffective,
    AgentList,
    AgentOut,
    BulkDocumentResult,
    DeletedOut,
    DocumentList,
    DocumentOut,
    DocumentStatus,
    DocumentSummary,
    HeldBackReason,
    KnowledgeBaseDeletedOut,
    KnowledgeBaseEffective,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    KnowledgeBaseRemoved,
    PutAgent,
    PutDocument,
    PutKnowledgeBase,
    StatsOut,
)
from gateway.http.ndjson import encode_results, read_body, read_lines
from gateway.http.openapi import (
    BEARER,
    BODY,
    KEYED,
    NDJSON_MEDIA_TYPE,
    created,
    ndjson_lines,
    ndjson_response,
    problems,
)
from gateway.http.security import requires
from gateway.retrieval.plan import Planning, knowledge_base_in_force
from ingest.index import Index, collection_for
from settings.config import Config
from settings.records import Agent, KnowledgeBase, Role
from settings.resolve import Resolved, resolve_score_threshold, resolve_top_k
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]
DOCUMENT_PATH = "/knowledge-bases/{kb_id:str}/documents/{document_id:path}"
#: a bulk write's request line: `PutDocument` and the document's id (`BulkDocument`)
BULK_LINE = Schema(
    all_of=[
        Reference(ref="#/components/schemas/PutDocument"),
        Schema(
            type=OpenAPIType.OBJECT,
            required=["document_id"],
            properties={"document_id": Schema(type=OpenAPIType.STRING)},
        ),
    ]
)
S = TypeVar("S", bound=msgspec.Struct)


def effective_out(values: dict[str, Resolved[Any]], kind: type[S]) -> S:
    """Settings in force as the API answers them: each its value, source and clamping."""
    found = {
        name: {"value": value.value, "source": value.source, "clamped": value.clamped}
        for name, value in values.items()
    }
    return msgspec.convert(found, type=kind)


async def knowledge_base_out(
    planning: Planning, principal: Principal, kb: KnowledgeBase
) -> KnowledgeBaseOut:
    """A KB as the API answers it to `principal` (`effective.score_threshold`: the line its
    turns use, once measured). Shared with the evaluations' apply and the CLI."""
    return KnowledgeBaseOut(
        kb_id=kb.kb_id,
        name=kb.name,
        storage=kb.storage,
        collection=collection_for(kb.storage, kb.org_id),
        settings=kb.settings,
        effective=effective_out(
            await knowledge_base_in_force(planning, principal, kb), KnowledgeBaseEffective
        ),
    )


def _created_or_ok(body: Any, created: bool) -> Response[Any]:
    return Response(body, status_code=201 if created else 200)


def _document_id(raw: str) -> str:
    return raw.lstrip("/")


class KnowledgeBaseController(Controller):
    path = "/v1"
    tags = ["knowledge bases"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @put(
        "/knowledge-bases/{kb_id:str}",
        guards=[requires(Role.ADMIN)],
        operation_id="putKnowledgeBase",
        summary="Create (201) or replace (200) a KB",
        responses={**created(KnowledgeBaseOut), **problems(*KEYED, *BODY, 409)},
    )
    async def put_knowledge_base(
        self,
        request: AnyRequest,
        knowledge: Injected[Knowledge],
        planning: Injected[Planning],
        kb_id: FromPath[str],
        data: JSONBody[PutKnowledgeBase],
    ) -> Response[KnowledgeBaseOut]:
        kb, created = await admin.put_knowledge_base(
            knowledge,
            request.user,
            kb_id,
            name=data.name,
            storage=data.storage,
            settings=knowledge_base_settings(data),
        )
        return _created_or_ok(await knowledge_base_out(planning, request.user, kb), created)

    @get(
        "/knowledge-bases",
        guards=[requires(Role.ADMIN, Role.INGEST)],
        operation_id="listKnowledgeBases",
        summary="The workspace's KBs, by id",
        responses=problems(*KEYED),
    )
    async def list_knowledge_bases(
        self, request: AnyRequest, store: Injected[SettingsStore], planning: Injected[Planning]
    ) -> KnowledgeBaseList:
        found = await admin.knowledge_bases(store, request.user)
        return KnowledgeBaseList(
            knowledge_bases=[await knowledge_base_out(planning, request.user, kb) for kb in found]
        )

    @get(
        "/knowledge-bases/{kb_id:str}",
        guards=[requires(Role.ADMIN, Role.INGEST)],
        operation_id="getKnowledgeBase",
        summary="A KB",
        responses=problems(*KEYED, 404),
    )
    async def get_knowledge_base(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        planning: Injected[Planning],
        kb_id: FromPath[str],
    ) -> KnowledgeBaseOut:
        kb = await admin.knowledge_base_of(store, request.user, kb_id)
        return await knowledge_base_out(planning, request.user, kb)

    @delete(
        "/knowledge-bases/{kb_id:str}",
        guards=[requires(Role.ADMIN)],
        status_code=200,
        operation_id="deleteKnowledgeBase",
        summary="Delete a KB: its passages, its place in agents, its record",
        responses=problems(*KEYED, 404),
    )
    async def delete_knowledge_base(
        self, request: AnyRequest, knowledge: Injected[Knowledge], kb_id: FromPath[str]
    ) -> KnowledgeBaseDeletedOut:
        removal = await admin.delete_knowledge_base(knowledge, request.user, kb_id)
        return KnowledgeBaseDeletedOut(
            kb_id=kb_id,
            deleted=KnowledgeBaseRemoved(
                passages=removal.passages,
                documents=removal.documents,
                agents_detached=removal.agents_detached,
            ),
        )

    @get(
        "/knowledge-bases/{kb_id:str}/stats",
        guards=[requires(Role.ADMIN, Role.INGEST)],
        operation_id="getKnowledgeBaseStats",
        summary="Documents, passages and held-back counts of a KB",
        responses=problems(*KEYED, 404),
    )
    async def stats(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        index: Injected[Index],
        kb_id: FromPath[str],
    ) -> StatsOut:
        documents, passages, held_back = await admin.knowledge_base_stats(
            store, index, request.user, kb_id
        )
        return StatsOut(documents=documents, passages=passages, held_back=held_back)

    @get(
        "/knowledge-bases/{kb_id:str}/documents",
        guards=[requires(Role.ADMIN, Role.INGEST)],
        operation_id="listDocuments",
        summary="Ids of the documents indexed in a KB",
        responses=problems(*KEYED, 404),
    )
    async def list_documents(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        index: Injected[Index],
        kb_id: FromPath[str],
    ) -> DocumentList:
        ids = await admin.list_documents(store, index, request.user, kb_id)
        return DocumentList(documents=[DocumentSummary(document_id=doc) for doc in ids])

    @put(
        DOCUMENT_PATH,
        guards=[requires(Role.INGEST)],
        operation_id="putDocument",
        summary="Index or update a document",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def put_document(
        self,
        request: AnyRequest,
        documents: Injected[Documents],
        kb_id: FromPath[str],
        document_id: FromPath[str],
        data: JSONBody[PutDocument],
    ) -> DocumentOut:
        status, passages, reason = await admin.put_document(
            documents,
            request.user,
            kb_id,
            _document_id(document_id),
            text=data.text,
            classification=data.classification,
            title=data.title,
            source=data.source,
            metadata=data.metadata,
            valid_from=data.valid_from,
            valid_until=data.valid_until,
        )
        # The core answers these literals' values by construction.
        return DocumentOut(
            status=cast(DocumentStatus, status),
            passages=passages,
            reason=cast(HeldBackReason | None, reason),
        )

    @post(
        "/knowledge-bases/{kb_id:str}/documents",
        guards=[requires(Role.INGEST)],
        status_code=200,
        request_max_body_size=None,  # bounded as it is read, by `read_body`
        operation_id="putDocuments",
        operation_class=ndjson_lines(
            BULK_LINE, "one document per line; each line decoded on its own"
        ),
        summary="Index or update many documents, one per line; one result per line, streamed",
        responses={
            200: ndjson_response(
                BulkDocumentResult, "one result per request line, in order, once it is durable"
            ),
            **problems(*KEYED, 404, 413),
        },
    )
    async def put_documents(
        self, request: AnyRequest, documents: Injected[Documents], kb_id: FromPath[str]
    ) -> Stream:
        limit = documents.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise PayloadTooLargeError(f"the body is over {limit} bytes", field="body")
        bulk = await open_bulk_write(documents, request.user, kb_id)
        # Read whole before the answer starts: a streamed answer listens for the client's
        # disconnect on the same channel the body arrives on.
        body = await read_body(request.stream(), limit)
        results = bulk.results(read_lines(body))
        return Stream(encode_results(results), media_type=NDJSON_MEDIA_TYPE)

    @delete(
        DOCUMENT_PATH,
        guards=[requires(Role.INGEST)],
        status_code=200,
        operation_id="deleteDocument",
        summary="Delete a document",
        responses=problems(*KEYED, 404, 422),
    )
    async def delete_document(
        self,
        request: AnyRequest,
        documents: Injected[Documents],
        kb_id: FromPath[str],
        document_id: FromPath[str],
    ) -> DeletedOut:
        deleted = await admin.delete_document(
            documents, request.user, kb_id, _document_id(document_id)
        )
        return DeletedOut(deleted_passages=deleted)


class AgentController(Controller):
    path = "/v1/agents"
    guards = [requires(Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["agents"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @put(
        "/{agent_id:str}",
        operation_id="putAgent",
        summary="Create (201) or replace (200) an agent",
        responses={**created(AgentOut), **problems(*KEYED, *BODY)},
    )
    async def put_agent(
        self,
        request: AnyRequest,
        knowledge: Injected[Knowledge],
        agent_id: FromPath[str],
        data: JSONBody[PutAgent],
    ) -> Response[AgentOut]:
        agent, created = await admin.put_agent(
            knowledge, request.user, agent_id, data.knowledge_base_ids, agent_settings(data)
        )
        out = await agent_out(knowledge.store, knowledge.config, request.user, agent)
        return _created_or_ok(out, created)

    @get(
        "/",
        operation_id="listAgents",
        summary="The workspace's agents, by id",
        responses=problems(*KEYED),
    )
    async def list_agents(
        self, request: AnyRequest, store: Injected[SettingsStore], config: Injected[Config]
    ) -> AgentList:
        found = await admin.agents(store, request.user)
        return AgentList(
            agents=[await agent_out(store, config, request.user, agent) for agent in found]
        )

    @get(
        "/{agent_id:str}",
        operation_id="getAgent",
        summary="An agent, with the KBs a turn would query",
        responses=problems(*KEYED, 404),
    )
    async def get_agent(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        config: Injected[Config],
        agent_id: FromPath[str],
    ) -> AgentOut:
        agent = await admin.agent_of(store, request.user, agent_id)
        return await agent_out(store, config, request.user, agent)

    @delete(
        "/{agent_id:str}",
        status_code=200,
        operation_id="deleteAgent",
        summary="Delete an agent (its KBs stay)",
        responses=problems(*KEYED, 404),
    )
    async def delete_agent(
        self, request: AnyRequest, knowledge: Injected[Knowledge], agent_id: FromPath[str]
    ) -> AgentDeletedOut:
        agent = await admin.delete_agent(knowledge, request.user, agent_id)
        return AgentDeletedOut(agent_id=agent.agent_id, deleted=True)


async def agent_out(
    store: SettingsStore, config: Config, principal: Principal, agent: Agent
) -> AgentOut:
    """An agent as the API answers it, with the KBs a turn would query. Shared with the CLI."""
    queried, skipped, cap = await admin.capped_knowledge_bases(store, config, principal, agent)
    bounds, defaults = config.bounds, config.defaults
    return AgentOut(
        agent_id=agent.agent_id,
        knowledge_base_ids=agent.knowledge_base_ids,
        settings=agent.settings,
        knowledge_bases_queried=queried,
        knowledge_bases_skipped=skipped,
        effective=effective_out(
            {
                "max_knowledge_bases_per_agent": cap,
                "top_k": resolve_top_k(None, agent.settings, bounds, defaults),
                "score_threshold": resolve_score_threshold(None, agent.settings, bounds, defaults),
            },
            AgentEffective,
        ),
    )
