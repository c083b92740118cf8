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
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, Stop, stop_point
from gateway.admin import archive, lifecycle, provisioning
from gateway.admin.knowledge import require_full_clearance, target_of
from gateway.admin.write_guard import require_live_workspace
from gateway.errors import (
    ConflictError,
    GatewayError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
)
from gateway.retrieval.narrowing import AGENT_FILTER, check_agent_filter
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import MINILM_MODEL_NAME, Embedder, ModelUnavailableError
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from ingest.index import Index, IndexUnavailableError, Passage
from ingest.language import LANGUAGES
from ingest.metadata import (
    MetadataError,
    check_metadata,
    check_moment,
    field_indexes,
    schema_of,
)
from ingest.payload import (
    MAX_HEADING_CHARS,
    MAX_HEADINGS,
    Classification,
    PassagePayload,
    PiiSpan,
    analysed_strings,
    analysis_of,
    heading_path,
    is_valid_id,
    text_checksum,
)
from ingest.sync import Target, point_id
from settings.cache import CachedSettings
from settings.config import Config
from settings.golden import GoldenQuestion, GoldenSet
from settings.records import Agent, KnowledgeBase, Workspace
from settings.store import SettingsStore, StoreUnavailableError

if TYPE_CHECKING:
    from gateway.safety.redaction import Redactor

_T = TypeVar("_T")

#: passages read from the index per call
_PAGE = 256
#: passages written to the index per call: each write is made durable (Qdrant Edge flushes
#: to disk), so larger batches import faster
_WRITE_BATCH = 2048
#: Strings analysed for PII between two stop points (about 0.1 s of CPU)
_ANALYSIS_SLICE = 8


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
#: a passage's position in its document, at most (a document at the size limit makes
#: tens of thousands)
_MAX_PASSAGE_INDEX = 1_000_000
#: a document's passages overlap (neighbours share up to 30 of 120 words, or a short
#: sentence): their texts together are at most this many times the document's size limit
_OVERLAP_ALLOWANCE = 3
#: a passage's title and source at most, as a document's (`PutDocument`)
_MAX_TITLE_CHARS = 1000
_MAX_SOURCE_CHARS = 2000


class RecordRules(Protocol):
    """The API's own write validation, applied to an archive's records (the HTTP edge
    provides it: its request Structs and rules, `gateway.http.archive_records`). Each
    returns the settings as the API would store them, or raises InvalidInputError naming
    the first offending field."""

    def workspace_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]: ...

    def knowledge_base_settings(
        self, name: str, storage: str, settings: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def agent_settings(
        self, knowledge_base_ids: list[str], settings: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def golden_set(self, golden: Mapping[str, Any]) -> tuple[list[GoldenQuestion], list[str]]: ...


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
class _Kb:
    name: str
    storage: str
    created_at: str
    settings: dict[str, Any]
    embedding_model: str = ""


@dataclass(frozen=True, slots=True)
class _Agent:
    agent_id: str
    knowledge_base_ids: list[str]
    created_at: str
    settings: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Golden:
    kb_id: str
    questions: list[GoldenQuestion]
    off_topic: list[str]
    updated_at: str


@dataclass(slots=True)
class Contents:
    """What an archive holds besides its passages, read and checked (as the API checks
    its writes) before any write; its settings as the API would store them."""

    manifest: archive.Manifest
    workspace_created_at: str | None = None
    workspace_settings: dict[str, Any] = field(default_factory=dict)
    kbs: dict[str, _Kb] = field(default_factory=dict)
    agents: dict[str, _Agent] = field(default_factory=dict)
    goldens: list[_Golden] = field(default_factory=list)
    passages: int = 0
    #: signed with this deployment's archive key: its PII analyses may be kept
    verified: bool = False
    signed: bool = False
    #: a document version's passage text bytes so far
    document_bytes: dict[tuple[str, str, str], int] = field(default_factory=dict)


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
    targets = await _put_records(transfer.store, org_id, tenant_id, contents)
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
        lambda stop: _write_passages(index, spooled, targets, redactor, bounds, stop=stop),
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
    is checked every `_PAGE` lines); on the first fault
    PayloadTooLargeError (`archive`: past a bound of `limits`, or content over the API's
    size limits) or InvalidInputError (`archive`: anything else)."""
    config = transfer.config
    spooled.seek(0)
    reader = archive.Reader(spooled, limits(config), signing_keys(config))
    checker = _Checker(config, transfer.embedder.dense_dim, rules)
    try:
        contents = checker.collect(iter(reader), stop)
    except archive.ArchiveTooLargeError as error:
        raise PayloadTooLargeError(str(error), field="archive") from None
    except archive.ArchiveError as error:
        raise InvalidInputError(str(error), field="archive") from None
    contents.verified = reader.verified
    return contents


class _Checker:
    """Every record of an archive through the API's write rules."""

    def __init__(self, config: Config, dense_dim: int, rules: RecordRules) -> None:
        self._dense_dim = dense_dim
        self._rules = rules
        self._max_text = config.max_document_bytes
        self._number = 0

    def collect(self, entries: Iterator[archive.Entry], stop: Stop) -> Contents:
        first = next(entries)
        if not isinstance(first, archive.Manifest):  # the reader refuses that already
            raise archive.ArchiveError("line 1: the archive does not start with its manifest")
        contents = Contents(manifest=first)
        for self._number, entry in enumerate(entries, start=2):
            if self._number % _PAGE == 0:
                stop_point(stop)
            if isinstance(entry, archive.WorkspaceEntry):
                self._workspace(entry, contents)
            elif isinstance(entry, archive.KnowledgeBaseEntry):
                self._kb(entry, contents)
            elif isinstance(entry, archive.AgentEntry):
                self._agent(entry, contents)
            elif isinstance(entry, archive.GoldenSetEntry):
                self._golden(entry, contents)
            elif isinstance(entry, archive.PassageEntry):
                self._passage(entry, contents)
                contents.passages += 1
            elif isinstance(entry, archive.End):
                contents.signed = entry.signature is not None
        contents.document_bytes.clear()
        return contents

    def _fault(self, what: str, message: str) -> archive.ArchiveError:
        return archive.ArchiveError(f"line {self._number}: {what}: {message}")

    def _too_large(self, what: str, message: str) -> archive.ArchiveTooLargeError:
        return archive.ArchiveTooLargeError(f"line {self._number}: {what}: {message}")

    def _ruled(self, what: str, rule: Callable[[], _T]) -> _T:
        """A rule of the API's applied; its InvalidInputError as an archive fault."""
        try:
            return rule()
        except GatewayError as error:
            where = f"{error.field}: " if error.field else ""
            raise self._fault(what, where + error.message) from None

    def _instant(self, what: str, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise self._fault(what, f"{value[:40]!r} is not an ISO 8601 date-time") from None
        return value

    def _workspace(self, entry: archive.WorkspaceEntry, contents: Contents) -> None:
        if contents.workspace_created_at is not None:
            raise self._fault("the workspace", "a second workspace record")
        contents.workspace_created_at = self._instant("the workspace", entry.created_at)
        contents.workspace_settings = self._ruled(
            "the workspace settings", lambda: self._rules.workspace_settings(entry.settings)
        )

    def _kb(self, entry: archive.KnowledgeBaseEntry, contents: Contents) -> None:
        what = f"knowledge base {entry.kb_id[:300]!r}"
        if not is_valid_id(entry.kb_id) or entry.kb_id in contents.kbs:
            raise self._fault(what, "invalid or repeated id")
        settings = self._ruled(
            what,
            lambda: self._rules.knowledge_base_settings(entry.name, entry.storage, entry.settings),
        )
        answering = {set_.model for set_ in contents.manifest.vector_sets.values()}
        if entry.embedding_model and entry.embedding_model not in answering:
            raise self._fault(what, "embedding_model: no vector set of the archive has it")
        contents.kbs[entry.kb_id] = _Kb(
            name=entry.name,
            storage=entry.storage,
            created_at=self._instant(what, entry.created_at),
            settings=settings,
            embedding_model=entry.embedding_model,
        )

    def _agent(self, entry: archive.AgentEntry, contents: Contents) -> None:
        what = f"agent {entry.agent_id[:300]!r}"
        if not is_valid_id(entry.agent_id) or entry.agent_id in contents.agents:
            raise self._fault(what, "invalid or repeated id")
        settings = self._ruled(
            what, lambda: self._rules.agent_settings(entry.knowledge_base_ids, entry.settings)
        )
        if len(set(entry.knowledge_base_ids)) != len(entry.knowledge_base_ids):
            raise self._fault(what, "knowledge_base_ids: a knowledge base is listed twice")
        for kb_id in entry.knowledge_base_ids:
            self._known_kb(kb_id, contents, what)
        if settings.get(AGENT_FILTER) is not None:
            kbs = [contents.kbs[kb_id].settings for kb_id in entry.knowledge_base_ids]
            self._ruled(what, lambda: check_agent_filter(settings[AGENT_FILTER], kbs))
        contents.agents[entry.agent_id] = _Agent(
            agent_id=entry.agent_id,
            knowledge_base_ids=list(entry.knowledge_base_ids),
            created_at=self._instant(what, entry.created_at),
            settings=settings,
        )

    def _golden(self, entry: archive.GoldenSetEntry, contents: Contents) -> None:
        what = f"the golden set of {entry.kb_id[:300]!r}"
        self._known_kb(entry.kb_id, contents, what)
        if any(golden.kb_id == entry.kb_id for golden in contents.goldens):
            raise self._fault(what, "a second golden set of this knowledge base")
        questions, off_topic = self._ruled(what, lambda: self._rules.golden_set(entry.golden))
        updated_at = entry.golden.get("updated_at")
        contents.goldens.append(
            _Golden(
                kb_id=entry.kb_id,
                questions=questions,
                off_topic=off_topic,
                updated_at=self._instant(what, updated_at)
                if isinstance(updated_at, str) and updated_at
                else datetime.now(UTC).isoformat(),
            )
        )

    def _known_kb(self, kb_id: str, contents: Contents, what: str) -> None:
        if kb_id not in contents.kbs:
            raise self._fault(what, f"names knowledge base {kb_id[:300]!r}, which comes before")

    def _passage(self, entry: archive.PassageEntry, contents: Contents) -> None:
        payload = entry.payload
        what = f"a passage of {entry.kb_id[:300]!r}"
        self._known_kb(entry.kb_id, contents, what)
        if payload.knowledge_base_id != entry.kb_id:
            raise self._fault(what, "inconsistent ids")
        for name, value in (
            ("document_id", payload.document_id),
            ("document_version", payload.document_version),
        ):
            if not is_valid_id(value):
                raise self._fault(what, f"{name}: not a valid id")
        if not 0 <= payload.passage_index <= _MAX_PASSAGE_INDEX:
            raise self._fault(what, "passage_index: out of range")
        if payload.classification not in set(Classification):
            raise self._fault(what, "classification: unknown")
        if len(payload.title) > _MAX_TITLE_CHARS or len(payload.source) > _MAX_SOURCE_CHARS:
            raise self._fault(
                what,
                f"title over {_MAX_TITLE_CHARS} or source over {_MAX_SOURCE_CHARS} characters",
            )
        self._instant(what, payload.indexed_at)
        self._described(payload, contents.kbs[entry.kb_id].settings, what)
        self._text(payload, contents, what)
        try:
            dense, _, _ = archive.vectors_of(entry)
            others = archive.dense_sets_of(entry)
        except archive.ArchiveError as error:
            raise self._fault(what, str(error)) from None
        if dense and len(dense) != self._dense_dim:
            raise self._fault(
                what, f"{len(dense)} dense dimensions, where this deployment has {self._dense_dim}"
            )
        sets = contents.manifest.vector_sets
        for name, values in others:
            if name not in sets or len(values) != sets[name].dense_dim:
                raise self._fault(what, f"{name[:100]!r}: not a vector set the manifest names")

    def _described(
        self, payload: PassagePayload, kb_settings: Mapping[str, Any], what: str
    ) -> None:
        """The document's fields as a document write checks them against its KB's schema,
        validity moments as stored (normalized), a language the detector knows, a page
        from 1, a heading path as `heading_path` bounds it."""
        try:
            _stored_as_written(payload, kb_settings)
        except MetadataError as error:
            raise self._fault(what, f"{error.field}: {error}") from None
        if payload.language is not None and payload.language not in LANGUAGES:
            raise self._fault(what, "language: unknown")
        if payload.page is not None and not 1 <= payload.page <= _MAX_PASSAGE_INDEX:
            raise self._fault(what, "page: out of range")
        if payload.headings is not None and heading_path(payload.headings) != payload.headings:
            raise self._fault(
                what,
                f"headings: not as a write stores them (at most {MAX_HEADINGS}, each non-blank, "
                f"single-spaced and at most {MAX_HEADING_CHARS} characters)",
            )

    def _text(self, payload: PassagePayload, contents: Contents, what: str) -> None:
        """Not blank; within the document size limit, alone and with the rest of its
        document's passages (their overlaps allowed for)."""
        if not payload.text.strip():
            raise self._fault(what, "text: must not be empty")
        size = len(payload.text.encode("utf-8"))
        if size > self._max_text:
            raise self._too_large(what, f"text is over {self._max_text} bytes")
        document = (payload.knowledge_base_id, payload.document_id, payload.document_version)
        total = contents.document_bytes.get(document, 0) + size
        if total > _OVERLAP_ALLOWANCE * self._max_text:
            raise self._too_large(
                what,
                f"document {payload.document_id[:300]!r}: its passages hold more text than a "
                f"document of {self._max_text} bytes makes",
            )
        contents.document_bytes[document] = total


def _stored_as_written(payload: PassagePayload, kb_settings: Mapping[str, Any]) -> None:
    """MetadataError unless the passage's fields and validity are as a document write
    stores them under the KB's schema."""
    if payload.metadata is not None and (
        check_metadata(payload.metadata, schema_of(kb_settings)) != payload.metadata
    ):
        raise MetadataError("not as a document write stores it", field="metadata")
    for name, moment in (("valid_from", payload.valid_from), ("valid_until", payload.valid_until)):
        if moment is not None and check_moment(moment, name) != moment:
            raise MetadataError("not as a document write stores it", field=name)


async def _put_records(
    store: SettingsStore, org_id: str, tenant_id: str, contents: Contents
) -> dict[str, Target]:
    """The KBs, agents and golden sets under the new workspace; each KB's write target."""
    targets: dict[str, Target] = {}
    for kb_id, entry in contents.kbs.items():
        kb = KnowledgeBase(
            kb_id=kb_id,
            tenant_id=tenant_id,
            org_id=org_id,
            storage=entry.storage,
            name=entry.name,
            created_at=entry.created_at,
            settings=entry.settings,
            embedding_model=entry.embedding_model,
        )
        await store.put_knowledge_base(kb)
        targets[kb.kb_id] = target_of(kb)
    for agent in contents.agents.values():
        await store.put_agent(
            Agent(
                agent_id=agent.agent_id,
                tenant_id=tenant_id,
                knowledge_base_ids=agent.knowledge_base_ids,
                created_at=agent.created_at,
                settings=agent.settings,
            )
        )
    for golden in contents.goldens:
        await store.put_golden_set(
            GoldenSet(
                tenant_id=tenant_id,
                kb_id=golden.kb_id,
                questions=golden.questions,
                off_topic=golden.off_topic,
                updated_at=golden.updated_at,
                updated_by=provisioning.PLATFORM.key_id,
            )
        )
    return targets


def _write_passages(
    index: BlockingIndex,
    spooled: IO[bytes],
    targets: dict[str, Target],
    redactor: Redactor | None,
    bounds: archive.Limits,
    *,
    stop: Stop,
) -> tuple[int, int]:
    """Every passage of the archive, under its new owner, in batches, each analysed for
    PII by `redactor` first (None: the archive's analyses kept); returns how many were
    written and how many analysed. On the expensive pool: `stop` is checked between
    slices of the analysis and before each write."""
    written = analysed = 0
    batch: dict[str, list[Passage]] = {}

    def flush(collection: str, passages: list[Passage]) -> None:
        nonlocal written, analysed
        if redactor is not None:
            passages = _analysed(redactor, passages, stop)
            analysed += len(passages)
        stop_point(stop)
        index.ensure_collection(collection)
        for name in sorted({name for p in passages for name, _ in p.dense_sets}):
            index.add_dense_vector(collection, name, _dim_of(passages, name))
        index.upsert(collection, passages)
        written += len(passages)

    for entry in archive.Reader(spooled, bounds):
        if not isinstance(entry, archive.PassageEntry):
            continue
        target = targets[entry.kb_id]
        batch.setdefault(target.collection, []).append(
            _rehomed(entry, target, keep_pii=redactor is None)
        )
        if len(batch[target.collection]) >= _WRITE_BATCH:
            flush(target.collection, batch.pop(target.collection))
    for collection, passages in batch.items():
        flush(collection, passages)
    return written, analysed


def _dim_of(passages: list[Passage], name: str) -> int:
    """The dimensions of the dense vector set `name`, as the first passage holding it has."""
    return next(len(values) for p in passages for found, values in p.dense_sets if found == name)


def _analysed(redactor: Redactor, passages: list[Passage], stop: Stop) -> list[Passage]:
    """The passages with their PII analysed by this deployment's analyzer (each distinct
    text, title and heading once, `_ANALYSIS_SLICE` at a time), as a document write
    analyses them."""
    strings = list(dict.fromkeys(s for p in passages for s in analysed_strings(p.payload)))
    found: dict[str, tuple[PiiSpan, ...]] = {}
    for start in range(0, len(strings), _ANALYSIS_SLICE):
        stop_point(stop)
        piece = strings[start : start + _ANALYSIS_SLICE]
        found.update(zip(piece, redactor.analyze_texts(piece), strict=True))
    return [
        dataclasses.replace(
            passage,
            payload=msgspec.structs.replace(
                passage.payload,
                pii=analysis_of(redactor.analyzer_version, passage.payload, found),
            ),
        )
        for passage in passages
    ]


def _rehomed(entry: archive.PassageEntry, target: Target, *, keep_pii: bool) -> Passage:
    """The archived passage as a point of the target workspace (its vectors as they are,
    its checksum computed again, its PII analysis kept only when `keep_pii`)."""
    payload = msgspec.structs.replace(
        entry.payload,
        tenant_id=target.tenant_id,
        org_id=target.org_id,
        checksum=text_checksum(entry.payload.text),
        pii=entry.payload.pii if keep_pii else None,
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
        dense_sets=archive.dense_sets_of(entry),
    )
