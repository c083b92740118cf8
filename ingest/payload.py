"""The payload contract and the Scope: the only place a payload key is spelled.

Every passage point carries a `PassagePayload`. Writers serialise it with
`to_payload`; every adapter's filter builder reads the same `PayloadKey` names,
so the indexer and the filters cannot drift apart.

Importing this module must stay cheap: no fastembed, presidio or Qdrant client.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec


class PayloadKey(enum.StrEnum):
    """The payload keys of a passage point, camelCase exactly."""

    TENANT_ID = "tenantId"
    KNOWLEDGE_BASE_ID = "knowledgeBaseId"
    ORG_ID = "orgId"
    DOCUMENT_ID = "documentId"
    DOCUMENT_VERSION = "documentVersion"
    PASSAGE_INDEX = "passageIndex"
    CLASSIFICATION = "classification"
    TEXT = "text"
    TITLE = "title"
    SOURCE = "source"
    CHECKSUM = "checksum"
    INDEXED_AT = "indexedAt"
    PII = "pii"


#: Keys that carry a keyword payload index, with `tenantId` as the tenant key.
INDEXED_KEYS: tuple[PayloadKey, ...] = (
    PayloadKey.TENANT_ID,
    PayloadKey.KNOWLEDGE_BASE_ID,
    PayloadKey.ORG_ID,
    PayloadKey.DOCUMENT_ID,
    PayloadKey.CLASSIFICATION,
)
TENANT_KEY = PayloadKey.TENANT_ID
#: The indexed key kept on disk rather than in memory: only a document's own operations
#: filter on it, never a search.
ON_DISK_KEY = PayloadKey.DOCUMENT_ID


class Classification(enum.StrEnum):
    """Access labels, lowest first. A clearance admits its own label and those below."""

    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"


CLASSIFICATION_ORDER: tuple[Classification, ...] = tuple(Classification)
DEFAULT_CLEARANCE = Classification.INTERNAL


def labels_up_to(clearance: Classification | str) -> tuple[str, ...]:
    """The labels a holder of `clearance` may read, lowest first."""
    level = CLASSIFICATION_ORDER.index(Classification(clearance))
    return tuple(label.value for label in CLASSIFICATION_ORDER[: level + 1])


_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,255}$")
_ORG_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_TENANT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._:@/-]{0,255}$")


def is_valid_id(value: str) -> bool:
    """Tenant, KB, agent and document ids: 1-256 printable ASCII characters, no spaces."""
    return bool(_ID_PATTERN.fullmatch(value))


def is_valid_tenant_id(value: str) -> bool:
    """A new workspace's id: an id (`is_valid_id`) in lower case, so that two workspaces
    never differ only in case. Workspaces stored earlier under an id with capitals keep
    it (ids are compared exactly; a new one equal to it but for case is refused)."""
    return bool(_TENANT_ID_PATTERN.fullmatch(value))


def is_valid_org_id(value: str) -> bool:
    """Org ids name a collection, so they are held to `[a-z0-9][a-z0-9_-]{0,62}`."""
    return bool(_ORG_ID_PATTERN.fullmatch(value))


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


class ScopeError(ValueError):
    """A Scope was asked for without what every search must carry."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What one index call may see: one tenant, some of its KBs, up to a clearance.

    The only way to ask the index anything. Each adapter turns it into its
    engine's filter in exactly one function:
    tenant equals, KB in set, classification up to clearance, and org equals
    when strict isolation is in force.
    """

    org_id: str
    tenant_id: str
    kb_ids: frozenset[str]
    clearance: Classification = DEFAULT_CLEARANCE
    strict: bool = True

    def __post_init__(self) -> None:
        # Checked at run time too: a Scope is the isolation boundary, and callers
        # outside the type checker's sight (JSON, tests, plugins) must not slip by.
        if not _non_empty_str(self.tenant_id):
            raise ScopeError("a Scope needs a tenant")
        kb_ids: object = self.kb_ids
        if not isinstance(kb_ids, frozenset) or not kb_ids:
            raise ScopeError("a Scope needs at least one knowledge base")
        if not all(_non_empty_str(kb) for kb in kb_ids):
            raise ScopeError("knowledge base ids in a Scope must be non-empty strings")
        if self.strict and not _non_empty_str(self.org_id):
            raise ScopeError("a strict Scope needs an organization")
        object.__setattr__(self, "clearance", Classification(self.clearance))

    @classmethod
    def of(
        cls,
        *,
        org_id: str,
        tenant_id: str,
        kb_ids: Iterable[str],
        clearance: Classification | str = DEFAULT_CLEARANCE,
        strict: bool = True,
    ) -> Scope:
        """Build a Scope from any iterable of KB ids."""
        return cls(org_id, tenant_id, frozenset(kb_ids), Classification(clearance), strict)

    @property
    def labels(self) -> tuple[str, ...]:
        return labels_up_to(self.clearance)

    def admits(self, payload: Mapping[str, Any]) -> bool:
        """Whether a stored payload falls inside this scope (the oracle the filters must match)."""
        if payload.get(PayloadKey.TENANT_ID) != self.tenant_id:
            return False
        if payload.get(PayloadKey.KNOWLEDGE_BASE_ID) not in self.kb_ids:
            return False
        if payload.get(PayloadKey.CLASSIFICATION) not in self.labels:
            return False
        return not self.strict or payload.get(PayloadKey.ORG_ID) == self.org_id


_RENAME = {
    "tenant_id": PayloadKey.TENANT_ID.value,
    "knowledge_base_id": PayloadKey.KNOWLEDGE_BASE_ID.value,
    "org_id": PayloadKey.ORG_ID.value,
    "document_id": PayloadKey.DOCUMENT_ID.value,
    "document_version": PayloadKey.DOCUMENT_VERSION.value,
    "passage_index": PayloadKey.PASSAGE_INDEX.value,
    "classification": PayloadKey.CLASSIFICATION.value,
    "text": PayloadKey.TEXT.value,
    "title": PayloadKey.TITLE.value,
    "source": PayloadKey.SOURCE.value,
    "checksum": PayloadKey.CHECKSUM.value,
    "indexed_at": PayloadKey.INDEXED_AT.value,
    "pii": PayloadKey.PII.value,
}

#: Where a point's PII analysis names the analyzer that made it (a nested payload key).
PII_ANALYZER_PATH = f"{PayloadKey.PII.value}.analyzer"


class PiiSpan(msgspec.Struct, frozen=True, array_like=True):
    """One detected entity: `[start, end)` in code points of the stored string it was found
    in, its entity type (presidio's name) and the recognizer's confidence. Stored as an
    array `[start, end, type, score]`."""

    start: int
    end: int
    entity_type: str
    score: float


class PiiAnalysis(msgspec.Struct, frozen=True, kw_only=True):
    """Every entity the PII recognizers found in a passage's `text` and in its `title`,
    of every type they know (the workspace's policy picks from them when the passage
    leaves), and which analyzer found them: a different analyzer means analyse again."""

    analyzer: str
    text: tuple[PiiSpan, ...] = ()
    title: tuple[PiiSpan, ...] = ()

    def fits(self, text: str, title: str) -> bool:
        """Whether every span lies inside the string it was found in (a span that does not
        was found in another string, and must not be trusted)."""
        return all(0 <= s.start < s.end <= len(text) for s in self.text) and all(
            0 <= s.start < s.end <= len(title) for s in self.title
        )


class PassagePayload(msgspec.Struct, frozen=True, kw_only=True, rename=_RENAME, omit_defaults=True):
    """One passage point's payload. `org_id` is None only on legacy points; `pii` is None on
    points written before PII analysis at ingest (they are analysed when first returned)."""

    tenant_id: str
    knowledge_base_id: str
    document_id: str
    document_version: str
    passage_index: int
    classification: str
    text: str
    title: str
    source: str
    checksum: str
    indexed_at: str
    org_id: str | None = None
    pii: PiiAnalysis | None = None

    @property
    def ref(self) -> PassageRef:
        return PassageRef(
            knowledge_base_id=self.knowledge_base_id,
            document_id=self.document_id,
            document_version=self.document_version,
            passage_index=self.passage_index,
            indexed_at=self.indexed_at,
        )


class PassageRef(msgspec.Struct, frozen=True, kw_only=True, rename=_RENAME):
    """What ranking needs to know of a passage: whose document and which version it is
    part of, not what it says. Ranking reads only these keys (`REF_KEYS`); the full
    payload is fetched for the passages a turn returns."""

    knowledge_base_id: str
    document_id: str
    document_version: str
    passage_index: int
    indexed_at: str


#: The payload keys a `PassageRef` is read from.
REF_KEYS: tuple[str, ...] = tuple(_RENAME[name] for name in PassageRef.__struct_fields__)


def to_payload(passage: PassagePayload) -> dict[str, Any]:
    """The dict written to the engine; a legacy passage has no `orgId` key at all, and one
    written before PII analysis no `pii` key."""
    payload: dict[str, Any] = msgspec.to_builtins(passage)
    if passage.pii is not None:
        payload[PayloadKey.PII.value] = pii_payload(passage.pii)
    return payload


def pii_payload(analysis: PiiAnalysis) -> dict[str, Any]:
    """A PII analysis as stored: `{analyzer, text, title}`, each span `[start, end, type,
    score]` (JSON arrays all the way down)."""
    stored: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(analysis))
    return stored


def from_payload(payload: Mapping[str, Any]) -> PassagePayload:
    """Read a stored payload back; raises `msgspec.ValidationError` if it breaks the contract."""
    return msgspec.convert(dict(payload), PassagePayload)


def ref_from_payload(payload: Mapping[str, Any]) -> PassageRef:
    """Read the `REF_KEYS` of a stored payload (other keys are ignored)."""
    return msgspec.convert(dict(payload), PassageRef)


def text_checksum(text: str) -> str:
    """sha256 of a passage's text, as stored in `checksum`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
