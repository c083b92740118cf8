"""Pure rules that turn stored settings into the values a turn uses.

Stored values are JSON as written by any release, so every rule first checks the
value's type: a malformed value at one level is ignored (the result names its level
in `malformed`, which the console shows) and the next level is used. Values of the
right type but beyond platform bounds are clamped, and the result says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar, get_args

from settings.config import Bounds, Defaults
from settings.pii_allow_list import is_allow_list

T = TypeVar("T")
Source = Literal["knowledge_base", "agent", "measured", "platform", "workspace", "created_at"]

#: Workspaces created on or after this instant default to strict isolation.
STRICT_BY_DEFAULT_FROM = datetime(2026, 5, 25, tzinfo=UTC)

TOP_K = "top_k"
SCORE_THRESHOLD = "score_threshold"
KEYWORD_FLOOR = "keyword_floor"
FUSION = "fusion"
GROUNDING_FLOOR = "grounding_floor"
DROP_COPIES = "drop_copies"
KB_CAP = "max_knowledge_bases_per_agent"
STRICT_ISOLATION = "strict_rag_isolation"
WORKSPACE_REDACTION = "rag_pii_redaction"
AGENT_REDACTION = "pii_redaction"
PII_ENTITIES = "pii_entities"
PII_ALLOW_LIST = "pii_allow_list"
PII_OPERATORS = "pii_operators"
TURN_RETENTION = "turn_retention_s"

#: Entity types a workspace may ask to redact (presidio's names, plus kbgate's own
#: URL_WITH_CREDENTIALS). PERSON, LOCATION and ORGANIZATION take effect only where a
#: spaCy NER pipeline is installed.
PiiEntityName = Literal[
    "CREDIT_CARD",
    "CRYPTO",
    "EMAIL_ADDRESS",
    "IBAN_CODE",
    "IP_ADDRESS",
    "LOCATION",
    "MAC_ADDRESS",
    "ORGANIZATION",
    "PERSON",
    "PHONE_NUMBER",
    "UK_NHS",
    "URL",
    "URL_WITH_CREDENTIALS",
    "US_ITIN",
    "US_SSN",
]
KNOWN_PII_ENTITIES: frozenset[str] = frozenset(get_args(PiiEntityName))
#: Redacted when the workspace sets nothing (or something unreadable). Plain URLs
#: are left out: links are what evidence cites; credentials inside them are not.
DEFAULT_PII_ENTITIES: tuple[str, ...] = (
    "CREDIT_CARD",
    "CRYPTO",
    "EMAIL_ADDRESS",
    "IBAN_CODE",
    "IP_ADDRESS",
    "PERSON",
    "PHONE_NUMBER",
    "URL_WITH_CREDENTIALS",
    "US_SSN",
)

#: How a redacted value is replaced (`gateway.safety.operators`): `replace` by `<TYPE>`,
#: `mask` every character by `*`, `pseudonym` by `<TYPE_xxxxxx>` (the same value, the same
#: token within one workspace).
PiiOperatorName = Literal["replace", "mask", "pseudonym"]
KNOWN_PII_OPERATORS: frozenset[str] = frozenset(get_args(PiiOperatorName))
#: The operator of every type a workspace's `pii_operators` does not name.
DEFAULT_PII_OPERATOR = "replace"


@dataclass(frozen=True, slots=True)
class Resolved(Generic[T]):
    """A value in force, the level that set it, and whether a bound changed it."""

    value: T
    source: Source
    clamped: bool = False
    malformed: tuple[str, ...] = field(default_factory=tuple)


# ---- type checks: what a well-formed stored value looks like ----------------


def is_count(value: Any) -> bool:
    """A whole number >= 0 (bools are not numbers here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_positive_count(value: Any) -> bool:
    return is_count(value) and value >= 1


def is_unit_interval(value: Any) -> bool:
    """A finite number in [0, 1]."""
    return is_finite_number(value) and 0.0 <= float(value) <= 1.0


def is_finite_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def is_non_negative_number(value: Any) -> bool:
    return is_finite_number(value) and float(value) >= 0.0


# ---- precedence and clamping -------------------------------------------------


def _first_well_formed(
    levels: tuple[tuple[Source, Mapping[str, Any] | None], ...],
    key: str,
    check: Any,
) -> tuple[Any, Source | None, tuple[str, ...]]:
    malformed: list[str] = []
    for source, settings in levels:
        if settings is None or key not in settings or settings[key] is None:
            continue
        if check(settings[key]):
            return settings[key], source, tuple(malformed)
        malformed.append(source)
    return None, None, tuple(malformed)


def _clamp(value: float, low: float, high: float) -> tuple[float, bool]:
    bounded = min(max(value, low), high)
    return bounded, bounded != value


def resolve_top_k(
    kb: Mapping[str, Any] | None,
    agent: Mapping[str, Any] | None,
    bounds: Bounds,
    defaults: Defaults,
) -> Resolved[int]:
    """KB override, then agent, then platform default; clamped to the top_k bounds."""
    raw, source, malformed = _first_well_formed(
        (("knowledge_base", kb), ("agent", agent)), TOP_K, is_positive_count
    )
    value = defaults.top_k if source is None else raw
    bounded, clamped = _clamp(value, bounds.top_k_min, bounds.top_k_max)
    return Resolved(int(bounded), source or "platform", clamped, malformed)


def resolve_score_threshold(
    kb: Mapping[str, Any] | None,
    agent: Mapping[str, Any] | None,
    bounds: Bounds,
    defaults: Defaults,
) -> Resolved[float]:
    """KB override, then agent, then platform default; clamped to the threshold bounds."""
    raw, source, malformed = _first_well_formed(
        (("knowledge_base", kb), ("agent", agent)), SCORE_THRESHOLD, is_unit_interval
    )
    value = defaults.score_threshold if source is None else float(raw)
    bounded, clamped = _clamp(value, bounds.score_threshold_min, bounds.score_threshold_max)
    return Resolved(bounded, source or "platform", clamped, malformed)


def measured_score_threshold(line: float, bounds: Bounds) -> Resolved[float]:
    """A KB's measured off-topic line (`gateway.retrieval.off_topic_line`) in force where
    neither the KB nor the agent sets `score_threshold`; clamped to the threshold bounds."""
    bounded, clamped = _clamp(line, bounds.score_threshold_min, bounds.score_threshold_max)
    return Resolved(bounded, "measured", clamped)


def resolve_keyword_floor(kb: Mapping[str, Any] | None, defaults: Defaults) -> Resolved[float]:
    """The KB's keyword floor, else the platform's: a share (0..1) of the question's
    attainable BM25 score (`ingest.keyword_scale`). A stored value above 1 (a raw BM25
    floor of an earlier release) is ignored for the platform's."""
    raw, source, malformed = _first_well_formed(
        (("knowledge_base", kb),), KEYWORD_FLOOR, is_unit_interval
    )
    if source is None:
        return Resolved(defaults.keyword_floor, "platform", malformed=malformed)
    return Resolved(float(raw), source, malformed=malformed)


def resolve_grounding_floor(kb: Mapping[str, Any] | None, defaults: Defaults) -> Resolved[float]:
    """The KB's grounding floor, else the platform's (0.7 unless configured)."""
    raw, source, malformed = _first_well_formed(
        (("knowledge_base", kb),), GROUNDING_FLOOR, is_unit_interval
    )
    if source is None:
        return Resolved(defaults.grounding_floor, "platform", malformed=malformed)
    return Resolved(float(raw), source, malformed=malformed)


def resolve_drop_copies(kb: Mapping[str, Any] | None) -> Resolved[bool]:
    """Whether a turn drops this KB's passages that copy a better-ranked one (on unless the
    KB turns it off: `gateway.retrieval.diversity`)."""
    raw, source, malformed = _first_well_formed(
        (("knowledge_base", kb),), DROP_COPIES, lambda v: isinstance(v, bool)
    )
    if source is None:
        return Resolved(True, "platform", malformed=malformed)
    return Resolved(bool(raw), source, malformed=malformed)


#: The channel weights of a KB that sets none (or leaves one out): measured on three
#: golden sets together (docs/decisions/fusion-and-floors.md).
DEFAULT_DENSE_WEIGHT = 1.0
DEFAULT_KEYWORD_WEIGHT = 0.4


@dataclass(frozen=True, slots=True)
class FusionWeights:
    dense: float = DEFAULT_DENSE_WEIGHT
    keyword: float = DEFAULT_KEYWORD_WEIGHT


def is_fusion(value: Any) -> bool:
    """`{dense, keyword}`: finite non-negative weights, not both zero, nothing else."""
    if not isinstance(value, Mapping) or set(value) - {"dense", "keyword"}:
        return False
    weights = [
        value.get("dense", DEFAULT_DENSE_WEIGHT),
        value.get("keyword", DEFAULT_KEYWORD_WEIGHT),
    ]
    return all(is_non_negative_number(w) for w in weights) and any(float(w) > 0 for w in weights)


def resolve_fusion(kb: Mapping[str, Any] | None) -> Resolved[FusionWeights]:
    """The KB's channel weights for fusion (`DEFAULT_DENSE_WEIGHT`, `DEFAULT_KEYWORD_WEIGHT`
    for those it leaves out)."""
    raw, source, malformed = _first_well_formed((("knowledge_base", kb),), FUSION, is_fusion)
    if source is None:
        return Resolved(FusionWeights(), "platform", malformed=malformed)
    weights = FusionWeights(
        float(raw.get("dense", DEFAULT_DENSE_WEIGHT)),
        float(raw.get("keyword", DEFAULT_KEYWORD_WEIGHT)),
    )
    return Resolved(weights, source, malformed=malformed)


def resolve_kb_cap(
    workspace: Mapping[str, Any] | None, bounds: Bounds, defaults: Defaults
) -> Resolved[int]:
    """How many attached KBs a turn queries.

    The workspace's value clamped to the bounds; the default (3) when unset, and
    also when the settings cannot be read (`workspace` None) or the value is corrupt.
    """
    raw, source, malformed = _first_well_formed((("workspace", workspace),), KB_CAP, is_count)
    if source is None:
        return Resolved(defaults.kb_cap, "platform", malformed=malformed)
    bounded, clamped = _clamp(raw, bounds.kb_cap_min, bounds.kb_cap_max)
    return Resolved(int(bounded), source, clamped, malformed)


def resolve_strict_isolation(
    workspace: Mapping[str, Any] | None, created_at: str
) -> Resolved[bool]:
    """The stored toggle; unset means on for workspaces created on or after 2026-05-25."""
    raw, source, malformed = _first_well_formed(
        (("workspace", workspace),), STRICT_ISOLATION, lambda v: isinstance(v, bool)
    )
    if source is not None:
        return Resolved(bool(raw), source, malformed=malformed)
    return Resolved(_created_on_or_after_cutover(created_at), "created_at", malformed=malformed)


def _created_on_or_after_cutover(created_at: str) -> bool:
    try:
        created = datetime.fromisoformat(created_at)
    except ValueError:
        return True  # unreadable creation date: the safe side is strict
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created >= STRICT_BY_DEFAULT_FROM


def resolve_redaction(
    workspace: Mapping[str, Any] | None, agent: Mapping[str, Any] | None
) -> Resolved[bool]:
    """Two gates, both on by default: off only when both are explicitly False."""
    workspace_off = workspace is not None and workspace.get(WORKSPACE_REDACTION) is False
    agent_off = agent is not None and agent.get(AGENT_REDACTION) is False
    if workspace_off and agent_off:
        return Resolved(False, "workspace")
    if not workspace_off and workspace is not None and workspace.get(WORKSPACE_REDACTION) is True:
        return Resolved(True, "workspace")
    if not agent_off and agent is not None and agent.get(AGENT_REDACTION) is True:
        return Resolved(True, "agent")
    return Resolved(True, "platform")


def is_pii_entity_list(value: Any) -> bool:
    """A non-empty list of known entity type names.

    Empty is refused: it would turn redaction off through one setting, where the
    two-gate rule wants both gates explicitly off.
    """
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(name, str) and name in KNOWN_PII_ENTITIES for name in value)
    )


def resolve_pii_entities(workspace: Mapping[str, Any] | None) -> Resolved[tuple[str, ...]]:
    """Which entity types redaction replaces: the workspace's list, else the default set.

    The result is sorted and free of duplicates. A malformed list (not a list, empty,
    or naming an unknown type) is ignored whole.
    """
    raw, source, malformed = _first_well_formed(
        (("workspace", workspace),), PII_ENTITIES, is_pii_entity_list
    )
    if source is None:
        return Resolved(DEFAULT_PII_ENTITIES, "platform", malformed=malformed)
    return Resolved(tuple(sorted(set(raw))), source, malformed=malformed)


def resolve_pii_allow_list(workspace: Mapping[str, Any] | None) -> Resolved[tuple[str, ...]]:
    """The values and patterns redaction keeps (`settings.pii_allow_list`): the workspace's
    list, else none. A malformed list is ignored whole, so more is redacted, never less."""
    raw, source, malformed = _first_well_formed(
        (("workspace", workspace),), PII_ALLOW_LIST, is_allow_list
    )
    if source is None:
        return Resolved((), "platform", malformed=malformed)
    return Resolved(tuple(raw), source, malformed=malformed)


def is_pii_operator_map(value: Any) -> bool:
    """A mapping of known entity type names to known operator names (empty: all `replace`)."""
    return isinstance(value, Mapping) and all(
        isinstance(name, str)
        and name in KNOWN_PII_ENTITIES
        and isinstance(operator, str)
        and operator in KNOWN_PII_OPERATORS
        for name, operator in value.items()
    )


def resolve_pii_operators(workspace: Mapping[str, Any] | None) -> Resolved[dict[str, str]]:
    """How each entity type's values are replaced: the workspace's `pii_operators`, sorted by
    type; a type it does not name is `replace`d. A malformed mapping is ignored whole, so
    every type is `replace`d: a value is never shown more than the workspace asked for."""
    raw, source, malformed = _first_well_formed(
        (("workspace", workspace),), PII_OPERATORS, is_pii_operator_map
    )
    if source is None:
        return Resolved({}, "platform", malformed=malformed)
    return Resolved(dict(sorted(raw.items())), source, malformed=malformed)


def resolve_turn_retention(
    workspace: Mapping[str, Any] | None, default_s: int, max_s: int
) -> Resolved[int]:
    """How long a turn record (which holds the texts a turn returned) is kept: the
    workspace's `turn_retention_s` clamped to 1..max_s, else the platform's default."""
    raw, source, malformed = _first_well_formed(
        (("workspace", workspace),), TURN_RETENTION, is_positive_count
    )
    if source is None:
        return Resolved(default_s, "platform", malformed=malformed)
    bounded, clamped = _clamp(raw, 1, max_s)
    return Resolved(int(bounded), source, clamped, malformed)
