"""An archive's records read and checked before an import writes anything
(`gateway.admin.transfer`).

Every record goes through the API's own write rules (`RecordRules`, provided by the
HTTP edge) and the payload contract's: ids, creation times, settings, golden sets, each
passage's ids, classification, text, fields and vectors. What passes is the archive's
`Contents` as the API would store them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from gateway.access.expensive import Stop, stop_point
from gateway.admin import archive
from gateway.errors import GatewayError
from gateway.retrieval.narrowing import AGENT_FILTER, check_agent_filter
from ingest.language import LANGUAGES
from ingest.metadata import MetadataError, check_metadata, check_moment, schema_of
from ingest.payload import (
    MAX_HEADING_CHARS,
    MAX_HEADINGS,
    Classification,
    PassagePayload,
    heading_path,
    is_valid_id,
)
from settings.config import Config
from settings.golden import GoldenQuestion

_T = TypeVar("_T")

#: lines read between two stop points
_PAGE = 256
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


class Checker:
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
