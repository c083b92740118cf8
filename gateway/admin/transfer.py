"""Export a workspace's knowledge as one archive (`gateway.admin.archive`), and import
one into this deployment.

Who may export: the platform (any workspace), or an admin key of that very workspace
with clearance `restricted` (the clearance that manages every document; any other
workspace's reads as unknown, 404). The archive holds every document whatever its label,
so a lower clearance is refused (403) rather than given a partial archive. Import is
the platform's: it creates the workspace, so the tenant id must be free (409), in an org
that exists and is not being deleted.

An archive carries each passage's vectors: importing writes them as they are, never
embedding again, into the collections of the target org (point ids derived anew for the
target workspace). That needs the same embedding model: an archive of another model (or
dense size) is refused with 409, before anything is written. An import that fails
midway leaves a partial workspace: delete it and import again. Logs carry counts only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import msgspec

from gateway.access.auth import Principal
from gateway.admin import archive, lifecycle, provisioning
from gateway.admin.knowledge import require_full_clearance, target_of
from gateway.admin.write_guard import require_live_workspace
from gateway.errors import ConflictError, GatewayError, InvalidInputError, NotFoundError
from gateway.runtime.services import Services
from ingest.embedding import MINILM_MODEL_NAME
from ingest.index import Index, IndexUnavailableError, Passage, Storage
from ingest.payload import Classification, is_valid_id
from ingest.sync import Target, point_id
from settings.golden import GoldenSet
from settings.records import Agent, KnowledgeBase, Workspace
from settings.store import StoreUnavailableError

#: passages read from the index per call
_PAGE = 256
#: passages written to the index per call: each write is made durable (Qdrant Edge flushes
#: to disk), so larger batches import faster
_WRITE_BATCH = 2048


def model_id(services: Services) -> str:
    """The embedding model this deployment writes with (as document versions name it)."""
    return services.config.embedding_model or MINILM_MODEL_NAME


# ---- export ---------------------------------------------------------------------------


async def exportable(
    services: Services, principal: Principal, org_id: str, tenant_id: str
) -> Workspace:
    """The workspace the caller may export; NotFoundError for another's or an unknown one,
    ForbiddenError for an admin key below `restricted`."""
    if not principal.is_platform:
        require_full_clearance(principal)
        if (principal.org_id, principal.tenant_id) != (org_id, tenant_id):
            raise NotFoundError("no such workspace in this organization")
    workspace = await services.store.get_workspace(tenant_id)
    if workspace is None or workspace.org_id != org_id:
        raise NotFoundError("no such workspace in this organization")
    await require_live_workspace(services, tenant_id)
    return workspace


async def export_chunks(services: Services, workspace: Workspace) -> AsyncIterator[bytes]:
    """The archive of the workspace, as gzip chunks (one per page of passages)."""
    writer = archive.Writer()
    tenant_id = workspace.tenant_id
    kbs = await services.store.list_knowledge_bases(tenant_id)
    agents = await services.store.list_agents(tenant_id)
    goldens = [g for kb in kbs if (g := await services.store.get_golden_set(tenant_id, kb.kb_id))]
    yield writer.add(
        [
            _manifest(services, workspace),
            archive.WorkspaceEntry(created_at=workspace.created_at, settings=workspace.settings),
            *map(_kb_entry, kbs),
            *map(_agent_entry, agents),
            *map(_golden_entry, goldens),
        ]
    )
    for kb in kbs:
        async for page in _passage_pages(services.index, target_of(kb)):
            # encoding and compressing a page is CPU work: off the event loop
            yield await asyncio.to_thread(_encoded, writer, kb.kb_id, page)
    yield writer.finish()
    services.telemetry.log.info("workspace_exported", **writer.counts)


def _manifest(services: Services, workspace: Workspace) -> archive.Manifest:
    return archive.Manifest(
        format=archive.FORMAT,
        version=archive.VERSION,
        embedding_model=model_id(services),
        dense_dim=services.embedder.dense_dim,
        payload_keys=archive.payload_keys(),
        exported_at=datetime.now(UTC).isoformat(),
        org_id=workspace.org_id,
        tenant_id=workspace.tenant_id,
    )


def _kb_entry(kb: KnowledgeBase) -> archive.KnowledgeBaseEntry:
    return archive.KnowledgeBaseEntry(
        kb_id=kb.kb_id,
        name=kb.name,
        storage=kb.storage,
        created_at=kb.created_at,
        settings=kb.settings,
    )


def _agent_entry(agent: Agent) -> archive.AgentEntry:
    return archive.AgentEntry(
        agent_id=agent.agent_id,
        knowledge_base_ids=agent.knowledge_base_ids,
        created_at=agent.created_at,
        settings=agent.settings,
    )


def _golden_entry(golden: GoldenSet) -> archive.GoldenSetEntry:
    fields: dict[str, Any] = msgspec.to_builtins(golden)
    fields.pop("tenant_id", None)
    return archive.GoldenSetEntry(kb_id=golden.kb_id, golden=fields)


def _encoded(writer: archive.Writer, kb_id: str, page: list[Passage]) -> bytes:
    return writer.add(archive.passage_entry(kb_id, passage) for passage in page)


async def _passage_pages(index: Index, target: Target) -> AsyncIterator[list[Passage]]:
    offset: str | None = None
    while True:
        page, offset = await asyncio.to_thread(
            index.passages_page, target.collection, target.write_scope(), offset, _PAGE
        )
        if page:
            yield page
        if offset is None:
            return


# ---- import ---------------------------------------------------------------------------


@dataclass(slots=True)
class Contents:
    """What an archive holds besides its passages, read and checked before any write."""

    manifest: archive.Manifest
    workspace: archive.WorkspaceEntry | None = None
    kbs: dict[str, archive.KnowledgeBaseEntry] = field(default_factory=dict)
    agents: list[archive.AgentEntry] = field(default_factory=list)
    goldens: list[archive.GoldenSetEntry] = field(default_factory=list)
    passages: int = 0


@dataclass(frozen=True, slots=True)
class Imported:
    """What an import wrote: counts only."""

    knowledge_bases: int
    agents: int
    golden_sets: int
    passages: int


async def import_workspace(
    services: Services, org_id: str, tenant_id: str, spooled: IO[bytes]
) -> Imported:
    """Check the whole archive, then create the workspace and write what it holds. A write
    that fails half-way (a dependency down, the index's disk at its reserve) deletes the
    workspace again before the error is answered, so the import can simply be repeated."""
    contents = await asyncio.to_thread(_read_contents, spooled, services.embedder.dense_dim)
    _require_same_model(services, contents.manifest)
    created_at = contents.workspace.created_at if contents.workspace else None
    await provisioning.create_workspace(services, org_id, tenant_id, created_at)
    try:
        written = await _fill(services, org_id, tenant_id, contents, spooled)
    except BaseException:
        await _undo_import(services, org_id, tenant_id)
        raise
    services.settings.invalidate(tenant_id)
    imported = Imported(
        knowledge_bases=len(contents.kbs),
        agents=len(contents.agents),
        golden_sets=len(contents.goldens),
        passages=written,
    )
    services.telemetry.log.info("workspace_imported", **_counts(imported))
    return imported


async def _fill(
    services: Services, org_id: str, tenant_id: str, contents: Contents, spooled: IO[bytes]
) -> int:
    """Write the new workspace's settings, records and passages; the passages written."""
    if contents.workspace and contents.workspace.settings:
        await services.store.update_workspace_settings(
            tenant_id,
            contents.workspace.settings,
            key_id=provisioning.PLATFORM.key_id,
            at=datetime.now(UTC).isoformat(),
        )
    targets = await _put_records(services, org_id, tenant_id, contents)
    spooled.seek(0)
    return await asyncio.to_thread(_write_passages, services.index, spooled, targets)


async def _undo_import(services: Services, org_id: str, tenant_id: str) -> None:
    """Delete what a failed import created. If that fails too, the workspace stays marked
    for deletion: a DELETE, or the next start, finishes it (`gateway.admin.upkeep`)."""
    try:
        await lifecycle.delete_workspace(services, org_id, tenant_id, provisioning.PLATFORM)
    except (GatewayError, IndexUnavailableError, StoreUnavailableError):
        services.telemetry.log.warning("workspace_import_undo_failed")
        return
    services.telemetry.log.info("workspace_import_undone")


def _counts(imported: Imported) -> dict[str, int]:
    return dataclasses.asdict(imported)


def _require_same_model(services: Services, manifest: archive.Manifest) -> None:
    ours = model_id(services)
    if manifest.embedding_model != ours or manifest.dense_dim != services.embedder.dense_dim:
        raise ConflictError(
            f"the archive's vectors come from {manifest.embedding_model!r} "
            f"({manifest.dense_dim} dimensions); this deployment embeds with {ours!r} "
            f"({services.embedder.dense_dim}): import it into a deployment of that model",
            field="embedding_model",
        )


def _read_contents(spooled: IO[bytes], dense_dim: int) -> Contents:
    """Read the archive once through, checking every line; InvalidInputError (`archive`)
    on the first fault."""
    spooled.seek(0)
    try:
        return _collect(archive.read_entries(spooled), dense_dim)
    except archive.ArchiveError as error:
        raise InvalidInputError(str(error), field="archive") from None


def _collect(entries: Iterator[archive.Entry], dense_dim: int) -> Contents:
    first = next(entries)
    if not isinstance(first, archive.Manifest):  # read_entries refuses that already
        raise archive.ArchiveError("line 1: the archive does not start with its manifest")
    contents = Contents(manifest=first)
    for entry in entries:
        if isinstance(entry, archive.WorkspaceEntry):
            contents.workspace = entry
        elif isinstance(entry, archive.KnowledgeBaseEntry):
            _check_kb(entry, contents)
            contents.kbs[entry.kb_id] = entry
        elif isinstance(entry, archive.AgentEntry):
            _check_agent(entry, contents)
            contents.agents.append(entry)
        elif isinstance(entry, archive.GoldenSetEntry):
            _check_known_kb(entry.kb_id, contents, "a golden set")
            contents.goldens.append(entry)
        elif isinstance(entry, archive.PassageEntry):
            _check_passage(entry, contents, dense_dim)
            contents.passages += 1
    return contents


def _check_kb(entry: archive.KnowledgeBaseEntry, contents: Contents) -> None:
    if not is_valid_id(entry.kb_id) or entry.kb_id in contents.kbs:
        raise archive.ArchiveError(f"knowledge base {entry.kb_id!r}: invalid or repeated id")
    if entry.storage not in set(Storage):
        raise archive.ArchiveError(f"knowledge base {entry.kb_id!r}: unknown storage")


def _check_agent(entry: archive.AgentEntry, contents: Contents) -> None:
    if not is_valid_id(entry.agent_id):
        raise archive.ArchiveError(f"agent {entry.agent_id!r}: invalid id")
    for kb_id in entry.knowledge_base_ids:
        _check_known_kb(kb_id, contents, f"agent {entry.agent_id!r}")


def _check_known_kb(kb_id: str, contents: Contents, what: str) -> None:
    if kb_id not in contents.kbs:
        raise archive.ArchiveError(f"{what} names knowledge base {kb_id!r}, which comes before")


def _check_passage(entry: archive.PassageEntry, contents: Contents, dense_dim: int) -> None:
    payload = entry.payload
    _check_known_kb(entry.kb_id, contents, "a passage")
    if payload.knowledge_base_id != entry.kb_id or not is_valid_id(payload.document_id):
        raise archive.ArchiveError(f"a passage of {entry.kb_id!r}: inconsistent ids")
    if payload.classification not in set(Classification):
        raise archive.ArchiveError(f"a passage of {entry.kb_id!r}: unknown classification")
    dense, _, _ = archive.vectors_of(entry)
    if len(dense) != dense_dim:
        raise archive.ArchiveError(
            f"a passage of {entry.kb_id!r} has {len(dense)} dense dimensions, not {dense_dim}"
        )


async def _put_records(
    services: Services, org_id: str, tenant_id: str, contents: Contents
) -> dict[str, Target]:
    """The KBs, agents and golden sets under the new workspace; each KB's write target."""
    targets: dict[str, Target] = {}
    for entry in contents.kbs.values():
        kb = KnowledgeBase(
            kb_id=entry.kb_id,
            tenant_id=tenant_id,
            org_id=org_id,
            storage=entry.storage,
            name=entry.name,
            created_at=entry.created_at,
            settings=entry.settings,
        )
        await services.store.put_knowledge_base(kb)
        targets[kb.kb_id] = target_of(kb)
    for agent in contents.agents:
        await services.store.put_agent(
            Agent(
                agent_id=agent.agent_id,
                tenant_id=tenant_id,
                knowledge_base_ids=agent.knowledge_base_ids,
                created_at=agent.created_at,
                settings=agent.settings,
            )
        )
    for golden in contents.goldens:
        fields = {**golden.golden, "tenant_id": tenant_id, "kb_id": golden.kb_id}
        await services.store.put_golden_set(msgspec.convert(fields, GoldenSet))
    return targets


def _write_passages(index: Index, spooled: IO[bytes], targets: dict[str, Target]) -> int:
    """Every passage of the archive, under its new owner, in batches; returns how many."""
    written = 0
    batch: dict[str, list[Passage]] = {}
    for entry in archive.read_entries(spooled):
        if not isinstance(entry, archive.PassageEntry):
            continue
        target = targets[entry.kb_id]
        batch.setdefault(target.collection, []).append(_rehomed(entry, target))
        if len(batch[target.collection]) >= _WRITE_BATCH:
            written += _flush(index, target.collection, batch.pop(target.collection))
    for collection, passages in batch.items():
        written += _flush(index, collection, passages)
    return written


def _flush(index: Index, collection: str, passages: list[Passage]) -> int:
    index.ensure_collection(collection)
    index.upsert(collection, passages)
    return len(passages)


def _rehomed(entry: archive.PassageEntry, target: Target) -> Passage:
    """The archived passage as a point of the target workspace (its vectors as they are)."""
    payload = msgspec.structs.replace(
        entry.payload, tenant_id=target.tenant_id, org_id=target.org_id
    )
    dense, sparse, document = archive.vectors_of(entry)
    return Passage(
        point_id=point_id(
            target, payload.document_id, payload.document_version, payload.passage_index
        ),
        dense=dense,
        sparse=sparse,
        payload=payload,
        document_sparse=document,
    )
