"""Knowledge bases, agents and documents of the caller's workspace.

Every function takes the Principal and acts only inside its workspace: a KB or
agent id is always looked up together with the principal's tenant, so another
workspace's objects read as unknown (404 alike).

Managing documents (listing, counting, writing, deleting) works on every document of
a KB whatever its label, so it needs a key whose clearance admits every label
(`restricted`): a key below it is refused with 403 before anything is looked up, so
the answer says nothing about which documents exist. Retrieval is what clearance
limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, pause_point
from gateway.admin import write_guard
from gateway.admin.write_guard import KeyedLocks
from gateway.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
)
from gateway.retrieval.narrowing import AGENT_FILTER, check_agent_filter, checked_metadata
from gateway.retrieval.off_topic_line import OffTopicLines
from gateway.telemetry import Telemetry
from ingest.index import SHARED_COLLECTION, Index, Storage, collection_for, org_collection
from ingest.language import LANGUAGES
from ingest.metadata import (
    check_metadata,
    check_moment,
    check_schema,
    field_indexes,
    schema_of,
)
from ingest.payload import is_valid_id
from ingest.screening import screen
from ingest.sync import Document, DocumentWriter, SyncOutcome, Target
from settings.cache import CachedSettings
from settings.config import Config
from settings.records import AdminChange, Agent, KnowledgeBase
from settings.resolve import Resolved, resolve_kb_cap
from settings.store import SettingsStore


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What managing a workspace's KBs and agents uses: their records and history in the
    store, the settings cache their changes invalidate, the index their passages live in,
    the measured off-topic lines a deleted KB's Scopes drop, counts and the platform's
    config."""

    store: SettingsStore
    settings: CachedSettings
    index: Index
    lines: OffTopicLines
    telemetry: Telemetry
    config: Config


@dataclass(frozen=True, slots=True)
class Documents:
    """What writing and deleting documents uses: the KB and workspace records in the
    store, the writer (model and index), one lock per document, the expensive-work pool
    embedding runs on, counts and the platform's config (the document size limit)."""

    store: SettingsStore
    writer: DocumentWriter
    locks: KeyedLocks
    expensive: ExpensiveWork
    telemetry: Telemetry
    config: Config


def _now() -> str:
    return datetime.now(UTC).isoformat()


def check_id(value: str, field: str) -> None:
    if not is_valid_id(value):
        raise InvalidInputError(
            "must be 1-256 characters of letters, digits and ._:@/- (starting with a letter "
            "or digit)",
            field=field,
        )


@dataclass(frozen=True, slots=True)
class DocumentFields:
    """What a document carries beside its text, checked against its KB's schema."""

    metadata: dict[str, Any] | None = None
    valid_from: str | None = None
    valid_until: str | None = None


def document_fields(
    kb: KnowledgeBase,
    metadata: Mapping[str, Any] | None,
    valid_from: str | None,
    valid_until: str | None,
) -> DocumentFields:
    """A document's fields and validity, checked: names (reserved ones refused), each
    declared field's type, sizes, RFC 3339 moments in order. InvalidInputError naming the
    field."""
    fields = DocumentFields(
        metadata=checked_metadata(lambda: check_metadata(metadata, schema_of(kb.settings)))
        if metadata
        else None,
        valid_from=None
        if valid_from is None
        else checked_metadata(lambda: check_moment(valid_from, "valid_from")),
        valid_until=None
        if valid_until is None
        else checked_metadata(lambda: check_moment(valid_until, "valid_until")),
    )
    if fields.valid_from and fields.valid_until and fields.valid_until <= fields.valid_from:
        raise InvalidInputError("must be after valid_from", field="valid_until")
    return fields


def require_full_clearance(principal: Principal) -> None:
    """ForbiddenError unless the key may manage every document (clearance `restricted`)."""
    if not principal.manages_all_content:
        raise ForbiddenError(
            "managing documents needs a key with clearance 'restricted' (the clearance every "
            "admin and ingest key is issued with)"
        )


async def knowledge_base_of(
    store: SettingsStore, principal: Principal, kb_id: str
) -> KnowledgeBase:
    """The caller's KB, or NotFoundError (unknown and foreign alike)."""
    kb = await store.get_knowledge_base(principal.tenant_id, kb_id)
    if kb is None:
        raise NotFoundError("no such knowledge base")
    return kb


async def knowledge_bases(store: SettingsStore, principal: Principal) -> list[KnowledgeBase]:
    """Every KB of the caller's workspace, by id."""
    found = await store.list_knowledge_bases(principal.tenant_id)
    return sorted(found, key=lambda kb: kb.kb_id)


def target_of(kb: KnowledgeBase, models: tuple[str, ...] | None = None) -> Target:
    """Where the KB's passages go; `models`: the dense models they get (None: the one the
    KB answers from)."""
    return Target(
        org_id=kb.org_id,
        tenant_id=kb.tenant_id,
        kb_id=kb.kb_id,
        storage=kb.storage,
        models=models if models is not None else (kb.embedding_model,),
    )


async def write_target(store: SettingsStore, kb: KnowledgeBase) -> Target:
    """`target_of` the KB for a document write: while a model migration keeps both vector
    sets, its passages get both (`settings.migration`)."""
    migration = await store.get_migration(kb.tenant_id, kb.kb_id)
    if migration is None or not migration.both_sets:
        return target_of(kb)
    return target_of(kb, (migration.source_model, migration.target_model))


# ---- the history of KB and agent changes ---------------------------------------------


def _changed_fields(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """Names of the stored fields that differ (all set ones when there was no record)."""
    if before is None:
        return sorted(name for name, value in after.items() if value not in (None, "", {}))
    names = set(before) | set(after)
    return sorted(name for name in names if before.get(name) != after.get(name))


def _kb_fields(kb: KnowledgeBase) -> dict[str, Any]:
    return {"name": kb.name, "storage": kb.storage, **kb.settings}


def _agent_fields(agent: Agent) -> dict[str, Any]:
    return {"knowledge_base_ids": agent.knowledge_base_ids, **agent.settings}


async def _audit(
    store: SettingsStore,
    principal: Principal,
    kind: str,
    object_id: str,
    action: str,
    *,
    fields: list[str],
    knowledge_base_ids: list[str] | None = None,
) -> None:
    await store.record_admin_change(
        AdminChange(
            at=_now(),
            key_id=principal.key_id,
            tenant_id=principal.tenant_id,
            kind=kind,
            object_id=object_id,
            action=action,
            fields=fields,
            knowledge_base_ids=knowledge_base_ids,
        )
    )


async def record_change(
    store: SettingsStore, principal: Principal, kb_id: str, action: str
) -> None:
    """A change of which model the KB's passages are embedded with, or answer from (a
    model migration's step), in the workspace's history."""
    await _audit(store, principal, "knowledge_base", kb_id, action, fields=["embedding_model"])


async def admin_history(
    store: SettingsStore,
    principal: Principal,
    *,
    kind: str | None = None,
    object_id: str | None = None,
) -> list[AdminChange]:
    """The caller's workspace's KB and agent changes, oldest first; only those of `kind`
    ("knowledge_base" or "agent") and `object_id` when given."""
    return [
        change
        for change in await store.admin_history(principal.tenant_id)
        if kind in (None, change.kind) and object_id in (None, change.object_id)
    ]


# ---- knowledge bases ----------------------------------------------------------------


async def put_knowledge_base(
    knowledge: Knowledge,
    principal: Principal,
    kb_id: str,
    *,
    name: str,
    storage: str,
    settings: Mapping[str, Any],
) -> tuple[KnowledgeBase, bool]:
    """Create or replace a KB of the caller's workspace; True when created.

    Moving an existing KB to another storage is refused while it holds passages:
    they would be left behind in the old collection.
    """
    check_id(kb_id, "kb_id")
    schema = checked_metadata(lambda: check_schema(settings.get("metadata_fields") or {}))
    _check_languages(settings.get("language") or {})
    existing = await knowledge.store.get_knowledge_base(principal.tenant_id, kb_id)
    if existing is not None and existing.storage != storage:
        require_full_clearance(principal)
        passages = await knowledge.index.count(
            collection_for(existing.storage, existing.org_id),
            target_of(existing).write_scope(),
        )
        if passages:
            raise ConflictError(
                "storage cannot change while the knowledge base holds documents", field="storage"
            )
    kb = KnowledgeBase(
        kb_id=kb_id,
        tenant_id=principal.tenant_id,
        org_id=principal.org_id,
        storage=Storage(storage).value,
        name=name,
        created_at=existing.created_at if existing else _now(),
        settings={key: value for key, value in settings.items() if value not in (None, {})},
        # only a model migration changes it (`gateway.admin.migration`)
        embedding_model=existing.embedding_model if existing else "",
    )
    if schema:  # indexed before the KB says they are filterable
        await knowledge.index.ensure_field_indexes(
            collection_for(kb.storage, kb.org_id), field_indexes(schema)
        )
    created = await knowledge.store.put_knowledge_base(kb)
    knowledge.settings.invalidate(principal.tenant_id)
    fields = _changed_fields(_kb_fields(existing) if existing else None, _kb_fields(kb))
    if created or fields:
        action = "created" if created else "changed"
        await _audit(knowledge.store, principal, "knowledge_base", kb_id, action, fields=fields)
    return kb, created


def _check_languages(rules: Mapping[str, Any]) -> None:
    """InvalidInputError naming a language code the detector does not know."""
    prefer = rules.get("prefer")
    for code in [*(rules.get("restrict") or ()), *([prefer] if prefer != "question" else [])]:
        if code is not None and code not in LANGUAGES:
            raise InvalidInputError(
                f"{code!r} is not a language the detector knows", field="language"
            )


@dataclass(frozen=True, slots=True)
class KnowledgeBaseRemoval:
    """What deleting one KB removed."""

    passages: int
    documents: int
    agents_detached: int


async def delete_knowledge_base(
    knowledge: Knowledge, principal: Principal, kb_id: str
) -> KnowledgeBaseRemoval:
    """Delete a KB of the caller's workspace: its passages, its place in the workspace's
    agents, then its record. NotFoundError for unknown and foreign ids alike."""
    require_full_clearance(principal)
    kb = await knowledge_base_of(knowledge.store, principal, kb_id)
    target = target_of(kb)
    documents = await knowledge.index.document_ids(target.collection, target.write_scope())
    passages = await purge_passages(knowledge.index, kb)
    detached = await detach_from_agents(knowledge.store, kb, principal)
    await knowledge.store.delete_knowledge_base(kb.tenant_id, kb.kb_id)
    # Its golden set, evaluations and measured lines; a running evaluation stops at its
    # next progress write.
    knowledge.lines.forget(kb.tenant_id, kb.kb_id)
    await knowledge.store.delete_calibration(kb.tenant_id, kb.kb_id)
    knowledge.settings.invalidate(kb.tenant_id)
    await _audit(knowledge.store, principal, "knowledge_base", kb.kb_id, "deleted", fields=[])
    # Again once the record is gone: a document write that began before it may have landed.
    passages += await purge_passages(knowledge.index, kb)
    knowledge.telemetry.count("knowledge_bases_deleted")
    return KnowledgeBaseRemoval(
        passages=passages, documents=len(documents), agents_detached=detached
    )


async def purge_passages(index: Index, kb: KnowledgeBase) -> int:
    """Delete the KB's passages from every collection it can have written to (its
    storage may have changed while it was empty), each through the KB's own Scope."""
    scope = target_of(kb).write_scope()
    collections = sorted(
        {collection_for(kb.storage, kb.org_id), SHARED_COLLECTION, org_collection(kb.org_id)}
    )
    removed = 0
    for collection in collections:
        removed += await index.delete_scope(collection, scope)
    return removed


async def detach_from_agents(store: SettingsStore, kb: KnowledgeBase, principal: Principal) -> int:
    """Take the KB out of every agent of its workspace that lists it (each change in the
    history, by `principal`); returns how many."""
    detached = 0
    for agent in await store.list_agents(kb.tenant_id):
        if kb.kb_id not in agent.knowledge_base_ids:
            continue
        kept = [kb_id for kb_id in agent.knowledge_base_ids if kb_id != kb.kb_id]
        await store.put_agent(msgspec.structs.replace(agent, knowledge_base_ids=kept))
        await _audit(
            store,
            principal,
            "agent",
            agent.agent_id,
            "changed",
            fields=["knowledge_base_ids"],
            knowledge_base_ids=kept,
        )
        detached += 1
    return detached


async def knowledge_base_stats(
    store: SettingsStore, index: Index, principal: Principal, kb_id: str
) -> tuple[int, int, int]:
    """Documents, passages and held-back documents of one KB."""
    require_full_clearance(principal)
    kb = await knowledge_base_of(store, principal, kb_id)
    target = target_of(kb)
    scope = target.write_scope()
    documents = await index.document_ids(target.collection, scope)
    passages = await index.count(target.collection, scope)
    held_back = await store.held_back(principal.tenant_id, kb_id)
    return len(documents), passages, held_back


async def list_documents(
    store: SettingsStore, index: Index, principal: Principal, kb_id: str
) -> list[str]:
    require_full_clearance(principal)
    kb = await knowledge_base_of(store, principal, kb_id)
    target = target_of(kb)
    ids = await index.document_ids(target.collection, target.write_scope())
    return sorted(ids)


# ---- agents -------------------------------------------------------------------------


async def put_agent(
    knowledge: Knowledge,
    principal: Principal,
    agent_id: str,
    kb_ids: list[str],
    settings: Mapping[str, Any],
) -> tuple[Agent, bool]:
    """Create or replace an agent; every attached KB must be the caller's own."""
    check_id(agent_id, "agent_id")
    if len(set(kb_ids)) != len(kb_ids):
        raise InvalidInputError("a knowledge base is listed twice", field="knowledge_base_ids")
    attached: list[KnowledgeBase] = []
    for kb_id in kb_ids:
        kb = await knowledge.store.get_knowledge_base(principal.tenant_id, kb_id)
        if kb is None:
            raise InvalidInputError(
                "lists a knowledge base that does not exist in this workspace",
                field="knowledge_base_ids",
            )
        attached.append(kb)
    if settings.get(AGENT_FILTER) is not None:
        check_agent_filter(settings[AGENT_FILTER], [kb.settings for kb in attached])
    existing = await knowledge.store.get_agent(principal.tenant_id, agent_id)
    agent = Agent(
        agent_id=agent_id,
        tenant_id=principal.tenant_id,
        knowledge_base_ids=list(kb_ids),
        created_at=existing.created_at if existing else _now(),
        settings={key: value for key, value in settings.items() if value is not None},
    )
    created = await knowledge.store.put_agent(agent)
    knowledge.settings.invalidate(principal.tenant_id)
    fields = _changed_fields(_agent_fields(existing) if existing else None, _agent_fields(agent))
    if created or fields:
        action = "created" if created else "changed"
        await _audit(
            knowledge.store,
            principal,
            "agent",
            agent_id,
            action,
            fields=fields,
            knowledge_base_ids=agent.knowledge_base_ids,
        )
    return agent, created


async def agents(store: SettingsStore, principal: Principal) -> list[Agent]:
    """Every agent of the caller's workspace, by id."""
    found = await store.list_agents(principal.tenant_id)
    return sorted(found, key=lambda agent: agent.agent_id)


async def agent_of(store: SettingsStore, principal: Principal, agent_id: str) -> Agent:
    agent = await store.get_agent(principal.tenant_id, agent_id)
    if agent is None:
        raise NotFoundError("no such agent")
    return agent


async def delete_agent(knowledge: Knowledge, principal: Principal, agent_id: str) -> Agent:
    """Delete an agent of the caller's workspace (its KBs stay); NotFoundError for unknown
    and foreign ids alike."""
    agent = await agent_of(knowledge.store, principal, agent_id)
    if not await knowledge.store.delete_agent(principal.tenant_id, agent_id):
        raise NotFoundError("no such agent")
    knowledge.settings.invalidate(principal.tenant_id)
    await _audit(knowledge.store, principal, "agent", agent_id, "deleted", fields=[])
    knowledge.telemetry.count("agents_deleted")
    return agent


async def capped_knowledge_bases(
    store: SettingsStore, config: Config, principal: Principal, agent: Agent
) -> tuple[list[str], list[str], Resolved[int]]:
    """The agent's KBs a turn queries (first N by the cap rule) and those it skips."""
    workspace = await store.get_workspace(principal.tenant_id)
    cap = resolve_kb_cap(
        workspace.settings if workspace else None,
        config.bounds,
        config.defaults,
    )
    kb_ids = agent.knowledge_base_ids
    return kb_ids[: cap.value], kb_ids[cap.value :], cap


# ---- documents ----------------------------------------------------------------------


def check_text(config: Config, text: str) -> None:
    """A document's text must hold something and stay within the size limit."""
    if len(text.encode("utf-8")) > config.max_document_bytes:
        raise PayloadTooLargeError(f"text is over {config.max_document_bytes} bytes", field="text")
    if not text.strip():
        raise InvalidInputError("must not be empty", field="text")


async def put_document(
    documents: Documents,
    principal: Principal,
    kb_id: str,
    document_id: str,
    *,
    text: str,
    classification: str | None,
    title: str,
    source: str,
    metadata: Mapping[str, Any] | None = None,
    valid_from: str | None = None,
    valid_until: str | None = None,
) -> tuple[str, int, str | None]:
    """Screen, then index or leave unchanged. Returns (status, passages, held-back reason).
    NotFoundError also while the workspace or the KB is being deleted (`write_guard`)."""
    require_full_clearance(principal)
    kb = await knowledge_base_of(documents.store, principal, kb_id)
    check_id(document_id, "document_id")
    await write_guard.require_live_workspace(documents.store, principal.tenant_id)
    check_text(documents.config, text)
    fields = document_fields(kb, metadata, valid_from, valid_until)
    verdict = screen(classification)
    if verdict.classification is None:
        await documents.store.add_held_back(principal.tenant_id, kb_id)
        documents.telemetry.count("documents_held_back")
        return "held_back", 0, verdict.reason
    document = Document(
        document_id=document_id,
        text=text,
        classification=verdict.classification,
        title=title,
        source=source,
        metadata=fields.metadata,
        valid_from=fields.valid_from,
        valid_until=fields.valid_until,
    )
    async with documents.locks.hold((principal.tenant_id, kb_id, document_id)):
        target = await write_target(documents.store, kb)
        with documents.telemetry.stage("ingest_document"):
            # On the expensive-work pool: embedding a document is seconds of CPU. A write
            # is never stopped half-way: its Stop flag is read only to pause there.
            outcome: SyncOutcome = await documents.expensive.run(
                principal.tenant_id,
                lambda flag: documents.writer.put(
                    target, document, pause=partial(pause_point, flag)
                ),
                kind="ingest",
                wait=True,
            )
        await write_guard.take_back_if_gone(
            documents.store,
            documents.writer,
            documents.telemetry,
            kb,
            target_of(kb),
            document_id=document_id,
        )
    documents.telemetry.count(f"documents_{outcome.status}")
    if outcome.status == "indexed":
        documents.telemetry.count("passages_written", outcome.passages)
    return outcome.status, outcome.passages, None


async def delete_document(
    documents: Documents, principal: Principal, kb_id: str, document_id: str
) -> int:
    """Remove every passage of a document; NotFoundError when it has none here."""
    require_full_clearance(principal)
    kb = await knowledge_base_of(documents.store, principal, kb_id)
    check_id(document_id, "document_id")
    async with documents.locks.hold((principal.tenant_id, kb_id, document_id)):
        deleted = await asyncio.to_thread(documents.writer.delete, target_of(kb), document_id)
    if deleted == 0:
        raise NotFoundError("no such document")
    documents.telemetry.count("documents_deleted")
    return deleted
