"""What each console page shows, read through the core functions the JSON API uses.

Nothing here reads the store or the index directly: workspace settings come from
`gateway.admin.workspace`, KBs and agents from `gateway.admin.knowledge`, a question from
`gateway.retrieval.turn.retrieve`, always with the signed-in key's Principal. This module only
arranges their results for the templates and explains each effective value.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, get_args

import msgspec

from gateway.access.auth import Principal
from gateway.admin import knowledge, workspace
from gateway.admin.knowledge import Knowledge
from gateway.admin.workspace import WorkspaceSettings
from gateway.retrieval.plan import Planning, knowledge_base_in_force
from gateway.retrieval.turn import TurnResult
from gateway.safety.spans import Detection
from settings.config import Config
from settings.records import AdminChange, Agent, KnowledgeBase, SettingChange, Workspace
from settings.resolve import (
    DEFAULT_PII_ENTITIES,
    KNOWN_PII_ENTITIES,
    STRICT_BY_DEFAULT_FROM,
    PiiOperatorName,
    Resolved,
    resolve_pii_entities,
    resolve_pii_operators,
    resolve_redaction,
    resolve_score_threshold,
    resolve_top_k,
)
from settings.store import SettingsStore

#: `<PERSON>` (replace) or `<PERSON_7f3a12>` (pseudonym); group 1 is the entity type
_PLACEHOLDER = re.compile(r"<([A-Z][A-Z_]*?)(?:_[0-9a-f]{6})?>")


def shown(value: Any) -> str:
    """A stored or effective value as text: on/off for booleans, lists and maps spelled out."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ", ".join(shown(item) for item in value) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{key}: {shown(item)}" for key, item in value.items()) or "none"
    return msgspec.json.encode(value).decode()


def moment(at: str) -> str:
    """An ISO 8601 instant as `YYYY-MM-DD HH:MM:SS UTC` (as stored when unreadable)."""
    try:
        parsed = datetime.fromisoformat(at)
    except ValueError:
        return at
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def field_text(value: Any) -> str:
    """A stored value prefilled into a form field ("" when unset)."""
    return "" if value is None else shown(value)


# ---- workspace settings ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingView:
    name: str
    label: str
    kind: str  # "bool", "count", "entities", "allow_list" or "operators"
    stored: Any
    effective: Resolved[Any]
    rule: str


@dataclass(frozen=True, slots=True)
class GateView:
    agent_id: str
    agent_gate: Any
    redaction: Resolved[bool]


@dataclass(frozen=True, slots=True)
class SettingsPage:
    workspace: Workspace
    settings: list[SettingView]
    gates: list[GateView]
    known_entities: list[str]
    default_entities: list[str]
    #: the workspace's entity types as configured, and those a loaded recognizer finds
    configured_entities: list[str] = field(default_factory=list)
    loaded_entities: list[str] = field(default_factory=list)
    #: the operators to choose from (replace, mask, pseudonym) and each type's in force
    known_operators: list[str] = field(default_factory=list)
    operators: dict[str, str] = field(default_factory=dict)


_LABELS = {
    "strict_rag_isolation": ("Strict isolation", "bool"),
    "rag_pii_redaction": ("PII redaction (workspace gate)", "bool"),
    "max_knowledge_bases_per_agent": ("Knowledge bases per agent", "count"),
    "pii_entities": ("PII entity types", "entities"),
    "pii_allow_list": ("PII allow-list", "allow_list"),
    "pii_operators": ("PII replacement per type", "operators"),
}


async def settings_page(workspaces: WorkspaceSettings, principal: Principal) -> SettingsPage:
    found = await workspace.workspace_of(workspaces.store, principal)
    effective = workspace.effective(workspaces, found)
    views = [
        SettingView(
            name=name,
            label=label,
            kind=kind,
            stored=found.settings.get(name),
            effective=effective[name],
            rule=explain(name, effective[name], found, workspaces.config),
        )
        for name, (label, kind) in _LABELS.items()
    ]
    gates = [
        GateView(
            agent_id=agent.agent_id,
            agent_gate=agent.settings.get("pii_redaction"),
            redaction=resolve_redaction(found.settings, agent.settings),
        )
        for agent in await knowledge.agents(workspaces.store, principal)
    ]
    return SettingsPage(
        workspace=found,
        settings=views,
        gates=gates,
        known_entities=sorted(KNOWN_PII_ENTITIES),
        default_entities=list(DEFAULT_PII_ENTITIES),
        configured_entities=list(resolve_pii_entities(found.settings).value),
        loaded_entities=sorted(workspaces.loaded_entities),
        known_operators=list(get_args(PiiOperatorName)),
        operators=resolve_pii_operators(found.settings).value,
    )


def explain(name: str, resolved: Resolved[Any], found: Workspace, config: Config) -> str:
    """The rule that produced an effective workspace setting, in a sentence."""
    ignored = (
        "The stored value is malformed and ignored. " if "workspace" in resolved.malformed else ""
    )
    rule = _RULES.get(name)
    return ignored + rule(resolved, found, config) if rule else resolved.source


def _strict_rule(resolved: Resolved[Any], found: Workspace, _: Config) -> str:
    if resolved.source == "workspace":
        return "Set by this workspace."
    side = "on or after" if resolved.value else "before"
    cutover = STRICT_BY_DEFAULT_FROM.date().isoformat()
    return (
        f"Not set: {shown(resolved.value)} because this workspace was created {side} "
        f"{cutover} (created {moment(found.created_at)})."
    )


def _redaction_rule(_: Resolved[Any], found: Workspace, __: Config) -> str:
    gate = found.settings.get("rag_pii_redaction")
    if gate is False:
        return (
            "Off here. Redaction still applies to every agent whose own pii_redaction gate "
            "is not also off: it is off only when both gates are off."
        )
    set_here = "Set on by this workspace" if gate is True else "Not set: on by default"
    return f"{set_here}. Redaction is off only when this and the agent's gate are both off."


def _cap_rule(resolved: Resolved[Any], found: Workspace, config: Config) -> str:
    bounds = f"bounds {config.bounds.kb_cap_min}..{config.bounds.kb_cap_max}"
    if resolved.source != "workspace":
        return (
            f"Not set: the platform default {resolved.value} (also used when the setting "
            f"cannot be read)."
        )
    if resolved.clamped:
        stored = shown(found.settings.get("max_knowledge_bases_per_agent"))
        return f"Stored {stored}, clamped to {resolved.value} ({bounds})."
    return f"Set by this workspace ({bounds})."


def _entities_rule(resolved: Resolved[Any], _: Workspace, __: Config) -> str:
    rule = (
        "Set by this workspace." if resolved.source == "workspace" else "Not set: the default set."
    )
    if resolved.clamped:
        rule += " Only the types a loaded recognizer finds are in force."
    return rule


def _allow_list_rule(resolved: Resolved[Any], _: Workspace, __: Config) -> str:
    if resolved.source != "workspace":
        return "Not set: every detected value of the types above is redacted."
    return (
        "Set by this workspace: detected values matching an entry are kept (exact values, "
        "CIDR ranges such as 127.0.0.0/8, re: patterns)."
    )


def _operators_rule(resolved: Resolved[Any], _: Workspace, __: Config) -> str:
    how = (
        "replace: <PERSON>; mask: every character as *; pseudonym: <PERSON_7f3a12>, the same "
        "value the same token in this workspace only."
    )
    if resolved.source != "workspace":
        return f"Not set: every type is replaced by <TYPE>. ({how})"
    return f"Set by this workspace; a type not listed is replaced by <TYPE>. ({how})"


_RULES: dict[str, Callable[[Resolved[Any], Workspace, Config], str]] = {
    "strict_rag_isolation": _strict_rule,
    "rag_pii_redaction": _redaction_rule,
    "max_knowledge_bases_per_agent": _cap_rule,
    "pii_entities": _entities_rule,
    "pii_allow_list": _allow_list_rule,
    "pii_operators": _operators_rule,
}


# ---- knowledge bases ---------------------------------------------------------------

KB_FIELDS = (
    "top_k",
    "score_threshold",
    "keyword_floor",
    "grounding_floor",
    "fusion_dense",
    "fusion_keyword",
)


@dataclass(frozen=True, slots=True)
class KnowledgeBaseView:
    kb: KnowledgeBase
    documents: int
    passages: int
    held_back: int
    effective: dict[str, Resolved[Any]]
    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)


def kb_form_values(kb: KnowledgeBase) -> dict[str, str]:
    """The stored settings of a KB as form field values."""
    fusion = kb.settings.get("fusion")
    weights = fusion if isinstance(fusion, dict) else {}
    values = {name: field_text(kb.settings.get(name)) for name in KB_FIELDS[:4]}
    values["fusion_dense"] = field_text(weights.get("dense"))
    values["fusion_keyword"] = field_text(weights.get("keyword"))
    values["drop_copies"] = toggle_text(kb.settings.get("drop_copies"))
    values["name"] = kb.name
    values["metadata_fields"] = field_types_text(kb.settings.get("metadata_fields"))
    return values


def field_types_text(stored: Any) -> str:
    """A KB's declared fields as the form shows them: `name=type, ...`."""
    if not isinstance(stored, Mapping):
        return ""
    return ", ".join(f"{name}={kind}" for name, kind in stored.items())


def field_types_of(text: str) -> Any:
    """The form's `name=type, ...` as the API's `metadata_fields` (None when blank); an
    entry without `=` is sent as it is, for the API's rules to refuse naming it."""
    fields: dict[str, Any] = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        name, sep, kind = part.partition("=")
        fields[name.strip()] = kind.strip() if sep else None
    return fields or None


#: The console's choice for a KB's yes/no setting: "" leaves it to the default.
TOGGLE_VALUES: dict[str, bool | None] = {"": None, "on": True, "off": False}


def toggle_text(stored: Any) -> str:
    """A stored yes/no setting as its choice in the form ("" when not set)."""
    return next((text for text, value in TOGGLE_VALUES.items() if value is stored), "")


async def knowledge_base_views(
    knowledge_bases: Knowledge,
    planning: Planning,
    principal: Principal,
    *,
    rejected: tuple[str, dict[str, str], dict[str, str]] | None = None,
) -> list[KnowledgeBaseView]:
    """Every KB with its stats and settings; `rejected` = (kb_id, values, errors) to re-show."""
    views = []
    store, index = knowledge_bases.store, knowledge_bases.index
    for kb in await knowledge.knowledge_bases(store, principal):
        documents, passages, held_back = await knowledge.knowledge_base_stats(
            store, index, principal, kb.kb_id
        )
        values, errors = kb_form_values(kb), {}
        if rejected is not None and rejected[0] == kb.kb_id:
            values, errors = {**values, **rejected[1]}, rejected[2]
        views.append(
            KnowledgeBaseView(
                kb=kb,
                documents=documents,
                passages=passages,
                held_back=held_back,
                effective=await knowledge_base_in_force(planning, principal, kb),
                values=values,
                errors=errors,
            )
        )
    return views


# ---- agents ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttachedView:
    position: int
    kb_id: str
    name: str | None
    queried: bool


@dataclass(frozen=True, slots=True)
class AgentView:
    agent: Agent
    attached: list[AttachedView]
    cap: Resolved[int]
    top_k: Resolved[int]
    score_threshold: Resolved[float]
    redaction: Resolved[bool]
    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    #: the workspace's KBs not attached to this agent: (kb_id, name)
    available: list[tuple[str, str]] = field(default_factory=list)


async def knowledge_base_choices(
    store: SettingsStore, principal: Principal
) -> list[tuple[str, str]]:
    """Every KB of the workspace as (kb_id, name), by id: what an agent may attach."""
    return [(kb.kb_id, kb.name) for kb in await knowledge.knowledge_bases(store, principal)]


def agent_form_values(agent: Agent) -> dict[str, str]:
    gate = agent.settings.get("pii_redaction")
    return {
        "top_k": field_text(agent.settings.get("top_k")),
        "score_threshold": field_text(agent.settings.get("score_threshold")),
        "pii_redaction": "" if not isinstance(gate, bool) else ("true" if gate else "false"),
    }


async def agent_views(
    store: SettingsStore,
    config: Config,
    principal: Principal,
    *,
    rejected: tuple[str, dict[str, str], dict[str, str]] | None = None,
) -> list[AgentView]:
    """Every agent with its ordered KBs, which of them the cap leaves out, and its settings."""
    names = {kb.kb_id: kb.name for kb in await knowledge.knowledge_bases(store, principal)}
    found = await workspace.workspace_of(store, principal)
    bounds, defaults = config.bounds, config.defaults
    views = []
    for agent in await knowledge.agents(store, principal):
        queried, _, cap = await knowledge.capped_knowledge_bases(store, config, principal, agent)
        values, errors = agent_form_values(agent), {}
        if rejected is not None and rejected[0] == agent.agent_id:
            values, errors = {**values, **rejected[1]}, rejected[2]
        views.append(
            AgentView(
                agent=agent,
                attached=[
                    AttachedView(
                        position=index + 1,
                        kb_id=kb_id,
                        name=names.get(kb_id),
                        queried=index < len(queried),
                    )
                    for index, kb_id in enumerate(agent.knowledge_base_ids)
                ],
                cap=cap,
                top_k=resolve_top_k(None, agent.settings, bounds, defaults),
                score_threshold=resolve_score_threshold(None, agent.settings, bounds, defaults),
                redaction=resolve_redaction(found.settings, agent.settings),
                values=values,
                errors=errors,
                available=[
                    (kb_id, name)
                    for kb_id, name in names.items()
                    if kb_id not in agent.knowledge_base_ids
                ],
            )
        )
    return views


# ---- history -----------------------------------------------------------------------


async def history_rows(store: SettingsStore, principal: Principal) -> list[SettingChange]:
    """Every settings change, newest first."""
    return list(reversed(await workspace.history(store, principal)))


_KINDS = {"knowledge_base": "knowledge base", "agent": "agent"}


@dataclass(frozen=True, slots=True)
class AdminChangeView:
    change: AdminChange
    what: str  # "knowledge base handbook"
    detail: str  # which fields, and an agent's knowledge bases afterwards


async def admin_change_rows(store: SettingsStore, principal: Principal) -> list[AdminChangeView]:
    """Every KB and agent change of the workspace, newest first, described for a table."""
    return [
        AdminChangeView(
            change=change,
            what=f"{_KINDS.get(change.kind, change.kind)} {change.object_id}",
            detail=_change_detail(change),
        )
        for change in reversed(await knowledge.admin_history(store, principal))
    ]


def _change_detail(change: AdminChange) -> str:
    parts = []
    if change.fields and change.action != "deleted":
        parts.append("fields: " + ", ".join(change.fields))
    if change.knowledge_base_ids is not None and "knowledge_base_ids" in change.fields:
        parts.append("knowledge bases now: " + shown(change.knowledge_base_ids))
    return "; ".join(parts)


# ---- try a question ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HiddenView:
    """One span a passage's redaction hid, for an admin: the value, its type, the
    recognizer that found it and its score."""

    value: str
    entity_type: str
    recognizer: str
    score: float


@dataclass(frozen=True, slots=True)
class PassageView:
    rank: int
    passage_id: str
    knowledge_base_id: str
    document_id: str
    title: str
    segments: list[tuple[str, bool]]  # (text, is a redaction placeholder)
    redacted: dict[str, int]
    score: float
    dense_score: float | None
    keyword_score: float | None
    hidden: tuple[HiddenView, ...] = ()
    #: the document's own fields, as stored
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TryView:
    turn_id: str
    abstained: bool
    reason: str | None
    passages: list[PassageView]
    effective: dict[str, Any]
    redacted: dict[str, int]


def try_view(
    result: TurnResult, explained: Mapping[str, Sequence[Detection]] | None = None
) -> TryView:
    """A turn's result as the panel shows it: the texts returned, placeholders marked, and
    (`explained`, for admins) why each span of a passage was hidden."""
    explained = explained or {}
    passages = []
    total: Counter[str] = Counter()
    for rank, candidate in enumerate(result.candidates, start=1):
        text = result.texts[candidate.point_id]
        redacted = _placeholders(text) - _placeholders(candidate.hit.payload.text)
        total.update(redacted)
        passages.append(
            PassageView(
                rank=rank,
                passage_id=candidate.point_id,
                knowledge_base_id=candidate.hit.payload.knowledge_base_id,
                document_id=candidate.hit.payload.document_id,
                title=result.titles.get(candidate.point_id, ""),
                segments=_segments(text),
                redacted=dict(sorted(redacted.items())),
                score=candidate.score,
                dense_score=candidate.dense_score,
                keyword_score=candidate.keyword_score,
                hidden=_hidden(candidate.hit.payload.text, explained.get(candidate.point_id, ())),
                metadata=dict(result.fields.get(candidate.point_id) or {}),
            )
        )
    return TryView(
        turn_id=result.turn_id,
        abstained=result.abstained,
        reason=result.reason,
        passages=passages,
        effective=result.effective,
        redacted=dict(sorted(total.items())),
    )


def _hidden(text: str, spans: Sequence[Detection]) -> tuple[HiddenView, ...]:
    return tuple(
        HiddenView(text[s.start : s.end], s.entity_type, s.recognizer or "?", round(s.score, 2))
        for s in spans
    )


def _placeholders(text: str) -> Counter[str]:
    return Counter(m for m in _PLACEHOLDER.findall(text) if m in KNOWN_PII_ENTITIES)


def _segments(text: str) -> list[tuple[str, bool]]:
    """Split text around redaction placeholders so the page can mark them (escaped alike)."""
    parts: list[tuple[str, bool]] = []
    last = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) not in KNOWN_PII_ENTITIES:
            continue
        if match.start() > last:
            parts.append((text[last : match.start()], False))
        parts.append((match.group(0), True))
        last = match.end()
    if last < len(text):
        parts.append((text[last:], False))
    return parts
