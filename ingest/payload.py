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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
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
    #: the document's own fields, as given (`ingest.metadata`): returned, not searched
    METADATA = "metadata"
    #: the same fields by the kind of index that searches them (`typed_fields`): what a
    #: filter names, `fields.<kind>.<name>`
    FIELDS = "fields"
    #: when the document starts and stops answering (RFC 3339, UTC)
    VALID_FROM = "validFrom"
    VALID_UNTIL = "validUntil"
    #: the passage's detected language (ISO 639-1)
    LANGUAGE = "language"
    #: the page (PDF) or slide (PPTX) the passage starts on, from 1
    PAGE = "page"
    #: the headings above the passage, outermost first, its own section's last
    #: (`heading_path`: at most `MAX_HEADINGS`, each at most `MAX_HEADING_CHARS`)
    HEADINGS = "headings"


#: Keys that carry a keyword payload index, with `tenantId` as the tenant key.
INDEXED_KEYS: tuple[PayloadKey, ...] = (
    PayloadKey.TENANT_ID,
    PayloadKey.KNOWLEDGE_BASE_ID,
    PayloadKey.ORG_ID,
    PayloadKey.DOCUMENT_ID,
    PayloadKey.CLASSIFICATION,
)
TENANT_KEY = PayloadKey.TENANT_ID
#: Keys a turn's filters and validity search, with the kind of index each carries (no
#: graph links: only the tenant key has them).
TYPED_INDEXED_KEYS: tuple[tuple[PayloadKey, str], ...] = (
    (PayloadKey.VALID_FROM, "datetime"),
    (PayloadKey.VALID_UNTIL, "datetime"),
    (PayloadKey.LANGUAGE, "keyword"),
)
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


#: The most headings a passage's path keeps (the innermost), and the most characters
#: each keeps: headings are the document's own untrusted text.
MAX_HEADINGS = 6
MAX_HEADING_CHARS = 200


def heading_path(path: Iterable[str]) -> tuple[str, ...] | None:
    """A passage's headings as stored (`PayloadKey.HEADINGS`): each whitespace-normalised
    and cut to `MAX_HEADING_CHARS`, blank ones left out, the innermost `MAX_HEADINGS`
    kept; None when none is left."""
    kept = [" ".join(" ".join(heading.split())[:MAX_HEADING_CHARS].split()) for heading in path]
    bounded = tuple(heading for heading in kept if heading)[-MAX_HEADINGS:]
    return bounded or None


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
    #: what a turn's filter and validity keep of it (`Narrowing`): AND-ed with the rest,
    #: so it can only leave points out
    narrowing: Narrowing | None = None

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
        narrowing: Narrowing | None = None,
    ) -> Scope:
        """Build a Scope from any iterable of KB ids."""
        return cls(
            org_id, tenant_id, frozenset(kb_ids), Classification(clearance), strict, narrowing
        )

    def narrowed(self, narrowing: Narrowing | None) -> Scope:
        """This Scope keeping only what `narrowing` also admits (None: the same Scope)."""
        if narrowing is None:
            return self
        both = narrowing if self.narrowing is None else AllOf((self.narrowing, narrowing))
        return Scope(self.org_id, self.tenant_id, self.kb_ids, self.clearance, self.strict, both)

    @property
    def unnarrowed(self) -> Scope:
        """The Scope without its narrowing: what the key may see, whatever a turn asks."""
        return Scope(self.org_id, self.tenant_id, self.kb_ids, self.clearance, self.strict)

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
        if self.strict and payload.get(PayloadKey.ORG_ID) != self.org_id:
            return False
        return self.narrowing is None or narrowing_admits(self.narrowing, payload)


# ---- metadata fields and narrowing -------------------------------------------------


class IndexKind(enum.StrEnum):
    """The kinds of index a document's fields are searched by: each field is stored under
    `fields.<kind>.<name>` by its value's kind, so the same name in two workspaces of one
    collection never needs two kinds of index on one path."""

    KEYWORD = "keyword"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATETIME = "datetime"


def field_path(kind: IndexKind | str, name: str) -> str:
    """The payload path a filter on a document field of this kind searches."""
    return f"{PayloadKey.FIELDS.value}.{IndexKind(kind).value}.{name}"


_DATETIME_SHAPE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:?\d{2})?$"
)


def normalized_datetime(value: str) -> str | None:
    """An RFC 3339 date or date-time as stored: UTC, `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` (a
    date alone is its midnight, a time without an offset is UTC); None when `value` is
    not one."""
    if not _DATETIME_SHAPE.fullmatch(value):
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError):  # not a date, or past the calendar's ends in UTC
        return None


def boolean_keyword(value: bool) -> str:
    """A boolean as its typed copy stores it: `"true"` or `"false"`, a keyword (Qdrant
    Edge's binding reads a boolean match value as the integer 1 or 0)."""
    return "true" if value else "false"


def typed_fields(metadata: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A document's fields by the kind of index that searches them (`PayloadKey.FIELDS`):
    strings and lists of strings as keywords (a date-time string also as a datetime),
    numbers, booleans (as the keywords `"true"`, `"false"`). Other values are kept in
    `metadata` only."""
    typed: dict[str, dict[str, Any]] = {}
    for name, value in metadata.items():
        for kind, stored in _kinds_of(value):
            typed.setdefault(kind.value, {})[name] = stored
    return typed


def _kinds_of(value: Any) -> list[tuple[IndexKind, Any]]:
    if isinstance(value, bool):
        return [(IndexKind.BOOLEAN, boolean_keyword(value))]
    if isinstance(value, int | float):
        return [(IndexKind.NUMBER, value)]
    if isinstance(value, str):
        moment = normalized_datetime(value)
        kinds = [(IndexKind.KEYWORD, value)]
        return kinds if moment is None else [*kinds, (IndexKind.DATETIME, moment)]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return [(IndexKind.KEYWORD, list(value))]
    return []


@dataclass(frozen=True, slots=True)
class IsAnyOf:
    """The value at `path` is one of `values` (a list value: any of its items is)."""

    path: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class InRange:
    """The value at `path` lies within the bounds given: numbers, or (`dates`)
    normalized date-times (`normalized_datetime`)."""

    path: str
    gt: float | str | None = None
    gte: float | str | None = None
    lt: float | str | None = None
    lte: float | str | None = None
    dates: bool = False


@dataclass(frozen=True, slots=True)
class HasValue:
    """`path` holds a value (missing, null and an empty list hold none)."""

    path: str


@dataclass(frozen=True, slots=True)
class Missing:
    """`path` holds no value: the engines' `is_empty`, read from a payload index."""

    path: str


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[Narrowing, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Narrowing, ...]


@dataclass(frozen=True, slots=True)
class NoneOf:
    parts: tuple[Narrowing, ...]


#: What a turn keeps of a Scope: a tree each adapter compiles into its engine's filter
#: inside `_scope_filter`, AND-ed with the Scope's own conditions.
Narrowing = IsAnyOf | InRange | HasValue | Missing | AllOf | AnyOf | NoneOf


def narrowing_admits(narrowing: Narrowing, payload: Mapping[str, Any]) -> bool:
    """Whether a stored payload passes the narrowing: the oracle the engines' filters
    are held to."""
    match narrowing:
        case AllOf(parts):
            return all(narrowing_admits(part, payload) for part in parts)
        case AnyOf(parts):
            return any(narrowing_admits(part, payload) for part in parts)
        case NoneOf(parts):
            return not any(narrowing_admits(part, payload) for part in parts)
    return _field_admits(narrowing, payload)


def _field_admits(narrowing: Narrowing, payload: Mapping[str, Any]) -> bool:
    match narrowing:
        case HasValue(path):
            return _value_at(payload, path) not in (None, [])
        case Missing(path):
            return _value_at(payload, path) in (None, [])
        case IsAnyOf(path, values):
            found = _value_at(payload, path)
            items = found if isinstance(found, list) else [found]
            return any(_same(item, value) for item in items for value in values)
        case InRange():
            return _in_range(narrowing, _value_at(payload, narrowing.path))
    return False  # pragma: no cover - every kind is matched above


def _value_at(payload: Mapping[str, Any], path: str) -> Any:
    found: Any = payload
    for part in path.split("."):
        if not isinstance(found, Mapping):
            return None
        found = found.get(part)
    return found


def _same(item: Any, value: str) -> bool:
    return isinstance(item, str) and item == value


def _in_range(test: InRange, found: Any) -> bool:
    items = found if isinstance(found, list) else [found]
    return any(_item_in_range(test, item) for item in items)


def _item_in_range(test: InRange, item: Any) -> bool:
    if test.dates:
        moment = normalized_datetime(item) if isinstance(item, str) else None
        if moment is None:
            return False
        return _within(test, datetime.fromisoformat(moment), _moment)
    if isinstance(item, bool) or not isinstance(item, int | float):
        return False
    return _within(test, float(item), float)


def _within(test: InRange, at: Any, bound: Any) -> bool:
    return (
        (test.gt is None or at > bound(test.gt))
        and (test.gte is None or at >= bound(test.gte))
        and (test.lt is None or at < bound(test.lt))
        and (test.lte is None or at <= bound(test.lte))
    )


def _moment(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


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
    "metadata": PayloadKey.METADATA.value,
    "valid_from": PayloadKey.VALID_FROM.value,
    "valid_until": PayloadKey.VALID_UNTIL.value,
    "language": PayloadKey.LANGUAGE.value,
    "page": PayloadKey.PAGE.value,
    "headings": PayloadKey.HEADINGS.value,
}

#: Names no document field may take: every payload key, as the contract spells it and
#: as the API does (`tenant_id`, `valid_from`, ...).
RESERVED_NAMES: frozenset[str] = frozenset(
    {key.value for key in PayloadKey} | set(_RENAME) | {"fields", "tenant", "org", "kb_id"}
)

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
    #: each heading's spans, in the order of the passage's `headings`
    headings: tuple[tuple[PiiSpan, ...], ...] = ()

    def fits(self, text: str, title: str, headings: Sequence[str] = ()) -> bool:
        """Whether every span lies inside the string it was found in (a span that does not
        was found in another string, and must not be trusted), with spans for exactly the
        headings given."""
        if len(self.headings) != len(headings):
            return False
        paths = zip(headings, self.headings, strict=True)
        strings = [(text, self.text), (title, self.title), *paths]
        return all(0 <= s.start < s.end <= len(string) for string, spans in strings for s in spans)


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
    #: the document's own fields (`ingest.metadata`); None: it has none
    metadata: dict[str, Any] | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    language: str | None = None
    page: int | None = None
    #: `heading_path`'s bounded path (None: none, or written before paths were recorded)
    headings: tuple[str, ...] | None = None

    @property
    def ref(self) -> PassageRef:
        return PassageRef(
            knowledge_base_id=self.knowledge_base_id,
            document_id=self.document_id,
            document_version=self.document_version,
            passage_index=self.passage_index,
            indexed_at=self.indexed_at,
            language=self.language,
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
    #: the passage's detected language (None: not told, or written before detection)
    language: str | None = None


def analysed_strings(payload: PassagePayload) -> tuple[str, ...]:
    """The strings of a passage its PII analysis covers: its text, its title and each of
    its headings."""
    return (payload.text, payload.title, *(payload.headings or ()))


def analysis_of(
    analyzer: str, payload: PassagePayload, found: Mapping[str, tuple[PiiSpan, ...]]
) -> PiiAnalysis:
    """A passage's analysis from the spans found in each of its `analysed_strings`."""
    return PiiAnalysis(
        analyzer=analyzer,
        text=found[payload.text],
        title=found[payload.title],
        headings=tuple(found[heading] for heading in payload.headings or ()),
    )


#: The payload keys a `PassageRef` is read from.
REF_KEYS: tuple[str, ...] = tuple(_RENAME[name] for name in PassageRef.__struct_fields__)


def to_payload(passage: PassagePayload) -> dict[str, Any]:
    """The dict written to the engine; a legacy passage has no `orgId` key at all, and one
    written before PII analysis no `pii` key. A document's fields are written twice: as
    given (`metadata`) and by kind of index (`fields`, `typed_fields`)."""
    payload: dict[str, Any] = msgspec.to_builtins(passage)
    if passage.pii is not None:
        payload[PayloadKey.PII.value] = pii_payload(passage.pii)
    if passage.metadata:
        payload[PayloadKey.FIELDS.value] = typed_fields(passage.metadata)
    if passage.headings:
        payload[PayloadKey.HEADINGS.value] = list(passage.headings)
    return payload


def pii_payload(analysis: PiiAnalysis) -> dict[str, Any]:
    """A PII analysis as stored: `{analyzer, text, title, headings}`, each span `[start,
    end, type, score]` (JSON arrays all the way down); `headings` only for a passage that
    has some."""
    stored: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(analysis))
    if not analysis.headings:
        del stored["headings"]
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
