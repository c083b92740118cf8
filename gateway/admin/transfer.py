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
dense size) is refused with 409, before anything is written.

An archive is untrusted input, whoever made it. It is read as a stream within bounds
(`limits`: expanded size, expansion ratio, one record's length: 413 `archive` past one),
and every record goes through the API's own write rules before anything is written
(`RecordRules`: settings as the PATCH and PUT bodies take them, ids, golden sets; each
passage's ids, classification, text within the document size limit, title and source
within a document's, finite non-zero vectors of this deployment's dimensions): one bad
record and nothing is written (422 `archive`, 413 for content over a size limit). The
PII analyses stored in an archive are kept only when it is signed with this deployment's
archive key (KBGATE_ARCHIVE_KEY, or the previous one): every other archive's passages are
analysed here, as a document write analyses them, before they are written. An import
that fails midway deletes the workspace it created. Logs carry counts only.

The records are checked by `gateway.admin.archive_check` and written by
`gateway.admin.archive_load`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

import msgspec

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, Stop
from gateway.admin import archive, lifecycle, provisioning
from gateway.admin.archive_check import Checker, Contents, RecordRules
from gateway.admin.archive_load import put_records, write_passages
from gateway.admin.knowledge import require_full_clearance, target_of
from gateway.admin.write_guard import require_live_workspace
from gateway.errors import (
    ConflictError,
    GatewayError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
)
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import MINILM_MODEL_NAME, Embedder, ModelUnavailableError
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from ingest.index import Index, IndexUnavailableError, Passage
from ingest.metadata import field_indexes, schema_of
from ingest.sync import Target
from settings.cache import CachedSettings
from settings.config import Config
from settings.golden import GoldenSet
from settings.records import Agent, KnowledgeBase, Workspace
from settings.store import SettingsStore, StoreUnavailableError

if TYPE_CHECKING:
    from gateway.safety.redaction import Redactor

#: passages read from the index per call
_PAGE = 256


@dataclass(frozen=True, slots=True)
class Transfer:
    """What export and import use: the workspace's records in the store (and the cache an
    import invalidates), the index its passages are read from and written to, the model
    (its dense size), the redactor an unsigned archive's passages are analysed with, the
    deletion a failed import undoes itself with, counts, the platform's config and the
    expensive-work pool an import's reading and analysis run on."""

    store: SettingsStore
    settings: CachedSettings
    index: Index
    embedder: Embedder
    redactor: Redactor
    deletions: lifecycle.Deletions
    telemetry: Telemetry
    config: Config
    expensive: ExpensiveWork
    #: the dense models KBs answer from or migrate to (None: the deployment's only)
    models: DenseModels | None = None


def model_id(config: Config) -> str:
    """The embedding model this deployment writes with (as document versions name it)."""
    return config.embedding_model or MINILM_MODEL_NAME


# ---- export ---------------------------------------------------------------------------


async def exportable(
    store: SettingsStore, principal: Principal, org_id: str, tenant_id: str
) -> Workspace:
    """The workspace the caller may export; NotFoundError for another's or an unknown one,
    ForbiddenError for an admin key below `restricted`."""
    if not principal.is_platform:
        require_full_clearance(principal)
        if (principal.org_id, principal.tenant_id) != (org_id, tenant_id):
            raise NotFoundError("no such workspace in this organization")
    workspace = await store.get_workspace(tenant_id)
    if workspace is None or workspace.org_id != org_id:
        raise NotFoundError("no such workspace in this organization")
    await require_live_workspace(store, tenant_id)
    return workspace


async def export_chunks(transfer: Transfer, workspace: Workspace) -> AsyncIterator[bytes]:
    """The archive of the workspace, as gzip chunks (one per page of passages)."""
    keys = signing_keys(transfer.config)
    writer = archive.Writer(keys[0] if keys else None)
    tenant_id = workspace.tenant_id
    kbs = await transfer.store.list_knowledge_bases(tenant_id)
    agents = await transfer.store.list_agents(tenant_id)
    goldens = [g for kb in kbs if (g := await transfer.store.get_golden_set(tenant_id, kb.kb_id))]
    vector_sets = await _vector_sets(transfer, kbs)
    yield writer.add(
        [
            _manifest(transfer, workspace, vector_sets),
            archive.WorkspaceEntry(created_at=workspace.created_at, settings=workspace.settings),
            *map(_kb_entry, kbs),
            *map(_agent_entry, agents),
            *map(_golden_entry, goldens),
        ]
    )
    for kb in kbs:
        async for page in _passage_pages(transfer.index, target_of(kb)):
            # encoding and compressing a page is CPU work: off the event loop
            yield await asyncio.to_thread(_encoded, writer, kb.kb_id, page)
    yield writer.finish()
    transfer.telemetry.log.info("workspace_exported", **writer.counts)


async def _vector_sets(
    transfer: Transfer, kbs: list[KnowledgeBase]
) -> dict[str, archive.VectorSetEntry]:
    """The dense vector sets besides `dense` the KBs' passages carry, with their models:
    the one each KB answers from and, while a migration keeps both, the other."""
    models = transfer.models
    if models is None:
        return {}
    used: set[str] = set()
    for kb in kbs:
        used.add(models.named(kb.embedding_model))
        migration = await transfer.store.get_migration(kb.tenant_id, kb.kb_id)
        if migration is not None and migration.both_sets:
            used |= {migration.source_model, migration.target_model}
    found: dict[str, archive.VectorSetEntry] = {}
    for model in sorted(used - {models.default_id}):
        embedder = await asyncio.to_thread(models.get, model)
        found[models.vector(model)] = archive.VectorSetEntry(
            model=model, dense_dim=embedder.dense_dim
        )
    return found


def _manifest(
    transfer: Transfer, workspace: Workspace, vector_sets: dict[str, archive.VectorSetEntry]
) -> archive.Manifest:
    return archive.Manifest(
        format=archive.FORMAT,
        version=archive.VERSION,
        embedding_model=model_id(transfer.config),
        dense_dim=transfer.embedder.dense_dim,
        payload_keys=archive.payload_keys(),
        exported_at=datetime.now(UTC).isoformat(),
        org_id=workspace.org_id,
        tenant_id=workspace.tenant_id,
        vector_sets=vector_sets,
    )


def _kb_entry(kb: KnowledgeBase) -> archive.KnowledgeBaseEntry:
    return archive.KnowledgeBaseEntry(
        kb_id=kb.kb_id,
        name=kb.name,
        storage=kb.storage,
        created_at=kb.created_at,
        settings=kb.settings,
        embedding_model=kb.embedding_model,
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
        page, offset = await index.passages_page(
            target.collection, target.write_scope(), offset, _PAGE
        )
        if page:
            yield page
        if offset is None:
            return


# ---- import ---------------------------------------------------------------------------

#: An archive expands to at most this many times KBGATE_MAX_IMPORT_BYTES (kbgate's own
#: expand about 1.6 times: their vectors hardly compress).
EXPANSION = 4


def limits(config: Config) -> archive.Limits:
    """How far an archive may expand on this deployment: EXPANSION times the import cap in
    all; one line at most four documents at the size limit (JSON escapes, vectors) and
    8 MiB besides."""
    return archive.Limits(
        max_expanded_bytes=EXPANSION * config.max_import_bytes,
        max_line_bytes=4 * config.max_document_bytes + 8 * 1024 * 1024,
    )


def signing_keys(config: Config) -> list[bytes]:
    """The keys this deployment signs archives with (first) and still trusts."""
    secrets = (config.archive_key, config.archive_key_previous)
    return [archive.signing_key(secret) for secret in secrets if secret is not None]


@dataclass(frozen=True, slots=True)
class Imported:
    """What an import wrote: counts only, and whether the archive's PII analyses were
    trusted (`signature`: verified, unsigned or unverified)."""

    knowledge_bases: int
    agents: int
    golden_sets: int
    passages: int
    pii_analysed: int
    signature: str


async def import_workspace(
    transfer: Transfer,
    org_id: str,
    tenant_id: str,
    spooled: IO[bytes],
    rules: RecordRules,
) -> Imported:
    """Check the whole archive (each record as the API checks its writes), then create
    the workspace and write what it holds. Passages are written with PII analyses made
    here, unless the archive is signed with this deployment's archive key. A write that
    fails half-way (a dependency down, the index's disk at its reserve) deletes the
    workspace again before the error is answered, so the import can simply be repeated."""
    contents = await transfer.expensive.run(
        tenant_id,
        lambda stop: _read_contents(transfer, spooled, rules, stop),
        kind="import",
        wait=True,
    )
    _require_same_model(transfer, contents.manifest)
    await _require_vector_sets(transfer, contents.manifest)
    await provisioning.create_workspace(
        transfer.store, org_id, tenant_id, contents.workspace_created_at
    )
    try:
        written, analysed = await _fill(transfer, org_id, tenant_id, contents, spooled)
    except BaseException:
        await _undo_import(transfer, org_id, tenant_id)
        raise
    transfer.settings.invalidate(tenant_id)
    imported = Imported(
        knowledge_bases=len(contents.kbs),
        agents=len(contents.agents),
        golden_sets=len(contents.goldens),
        passages=written,
        pii_analysed=analysed,
        signature=_signature(contents),
    )
    transfer.telemetry.count("pii_analysed_at_import", analysed)
    transfer.telemetry.log.info("workspace_imported", **dataclasses.asdict(imported))
    return imported


def _signature(contents: Contents) -> str:
    if contents.verified:
        return "verified"
    return "unverified" if contents.signed else "unsigned"


async def _fill(
    transfer: Transfer, org_id: str, tenant_id: str, contents: Contents, spooled: IO[bytes]
) -> tuple[int, int]:
    """Write the new workspace's settings, records and passages; the passages written and
    those analysed for PII here."""
    if contents.workspace_settings:
        await transfer.store.update_workspace_settings(
            tenant_id,
            contents.workspace_settings,
            key_id=provisioning.PLATFORM.key_id,
            at=datetime.now(UTC).isoformat(),
        )
    targets = await put_records(transfer.store, org_id, tenant_id, contents)
    for kb_id, entry in contents.kbs.items():
        schema = schema_of(entry.settings)
        if schema:  # each declared field's index, as a KB's PUT makes it
            await transfer.index.ensure_field_indexes(
                targets[kb_id].collection, field_indexes(schema)
            )
    spooled.seek(0)
    redactor = None if contents.verified else transfer.redactor
    bounds = limits(transfer.config)
    index = BlockingIndex(transfer.index, asyncio.get_running_loop())
    return await transfer.expensive.run(
        tenant_id,
        lambda stop: write_passages(index, spooled, targets, redactor, bounds, stop=stop),
        kind="import",
        wait=True,
    )


async def _undo_import(transfer: Transfer, org_id: str, tenant_id: str) -> None:
    """Delete what a failed import created. If that fails too, the workspace stays marked
    for deletion: a DELETE, or the next start, finishes it (`gateway.admin.upkeep`)."""
    try:
        await lifecycle.delete_workspace(
            transfer.deletions, org_id, tenant_id, provisioning.PLATFORM
        )
    except (GatewayError, IndexUnavailableError, StoreUnavailableError):
        transfer.telemetry.log.warning("workspace_import_undo_failed")
        return
    transfer.telemetry.log.info("workspace_import_undone")


async def _require_vector_sets(transfer: Transfer, manifest: archive.Manifest) -> None:
    """ConflictError (`embedding_model`) unless this deployment loads each other vector
    set's model, with its dimensions, under the same vector name."""
    for name, entry in manifest.vector_sets.items():
        loaded = await _vector_set_model(transfer.models, name, entry.model)
        if loaded is None or loaded.dense_dim != entry.dense_dim:
            raise ConflictError(
                f"the archive's vector set {name[:100]!r} comes from {entry.model[:200]!r}, "
                "which this deployment cannot load with those dimensions",
                field="embedding_model",
            )


async def _vector_set_model(models: DenseModels | None, name: str, model: str) -> Embedder | None:
    """The model of an archive's vector set, when this deployment loads it under `name`."""
    try:
        if models is None or models.vector(model) != name:
            return None
        return await asyncio.to_thread(models.get, model)
    except (ModelUnavailableError, ValueError):
        return None


def _require_same_model(transfer: Transfer, manifest: archive.Manifest) -> None:
    ours = model_id(transfer.config)
    if manifest.embedding_model != ours or manifest.dense_dim != transfer.embedder.dense_dim:
        raise ConflictError(
            f"the archive's vectors come from {manifest.embedding_model!r} "
            f"({manifest.dense_dim} dimensions); this deployment embeds with {ours!r} "
            f"({transfer.embedder.dense_dim}): import it into a deployment of that model",
            field="embedding_model",
        )


def _read_contents(
    transfer: Transfer, spooled: IO[bytes], rules: RecordRules, stop: Stop
) -> Contents:
    """Read the archive once through, checking every line (on the expensive pool: `stop`
    is checked every `_PAGE` lines of `Checker`); on the first fault
    PayloadTooLargeError (`archive`: past a bound of `limits`, or content over the API's
    size limits) or InvalidInputError (`archive`: anything else)."""
    config = transfer.config
    spooled.seek(0)
    reader = archive.Reader(spooled, limits(config), signing_keys(config))
    checker = Checker(config, transfer.embedder.dense_dim, rules)
    try:
        contents = checker.collect(iter(reader), stop)
    except archive.ArchiveTooLargeError as error:
        raise PayloadTooLargeError(str(error), field="archive") from None
    except archive.ArchiveError as error:
        raise InvalidInputError(str(error), field="archive") from None
    contents.verified = reader.verified
    return contents
