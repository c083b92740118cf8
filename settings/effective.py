"""Each object's settings in force, and the rule that set each: what the API shows for a
workspace and a KB, and how long a turn keeps its record.

Pure rules over `settings.resolve` and the platform's `Config`: the retrieval turn, the
calibration and the admin API all read effective values here. The PII entity types in
force also depend on the recognizers the process loaded (`loaded`): a type configured but
without a recognizer is shown `clamped`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from settings.config import Bounds, Config, Defaults
from settings.records import KnowledgeBase, Workspace
from settings.resolve import (
    Resolved,
    resolve_drop_copies,
    resolve_fusion,
    resolve_grounding_floor,
    resolve_kb_cap,
    resolve_keyword_floor,
    resolve_pii_allow_list,
    resolve_pii_entities,
    resolve_pii_operators,
    resolve_redaction,
    resolve_score_threshold,
    resolve_strict_isolation,
    resolve_top_k,
    resolve_turn_retention,
)


def knowledge_base_effective(
    kb: KnowledgeBase, bounds: Bounds, defaults: Defaults
) -> dict[str, Resolved[Any]]:
    """The KB's settings resolved alone (no agent override, no Scope): an unset
    `score_threshold` is the platform default here, which a turn replaces with the KB's
    off-topic line for its caller (`gateway.retrieval.plan.with_lines`; what the API
    shows a caller: `gateway.retrieval.plan.knowledge_base_in_force`)."""
    fusion = resolve_fusion(kb.settings)
    return {
        "top_k": resolve_top_k(kb.settings, None, bounds, defaults),
        "score_threshold": resolve_score_threshold(kb.settings, None, bounds, defaults),
        "keyword_floor": resolve_keyword_floor(kb.settings, defaults),
        "grounding_floor": resolve_grounding_floor(kb.settings, defaults),
        "drop_copies": resolve_drop_copies(kb.settings),
        "fusion": Resolved(
            {"dense": fusion.value.dense, "keyword": fusion.value.keyword}, fusion.source
        ),
    }


def workspace_effective(
    workspace: Workspace, config: Config, loaded: Collection[str]
) -> dict[str, Resolved[Any]]:
    """Each workspace setting in force and the rule that produced it; `loaded`: the PII
    entity types a recognizer of this process finds."""
    settings = workspace.settings
    return {
        "strict_rag_isolation": resolve_strict_isolation(settings, workspace.created_at),
        "rag_pii_redaction": resolve_redaction(settings, None),
        "max_knowledge_bases_per_agent": resolve_kb_cap(settings, config.bounds, config.defaults),
        "pii_entities": pii_entities_in_force(settings, loaded),
        "pii_allow_list": resolve_pii_allow_list(settings),
        "pii_operators": resolve_pii_operators(settings),
        "turn_retention_s": turn_retention(workspace, config),
    }


def entities_in_force(configured: Iterable[str], loaded: Collection[str]) -> tuple[str, ...]:
    """The configured entity types for which a recognizer is loaded."""
    return tuple(name for name in configured if name in loaded)


def pii_entities_in_force(
    settings: Mapping[str, Any] | None, loaded: Collection[str]
) -> Resolved[tuple[str, ...]]:
    """The configured entity types that a loaded recognizer finds (`clamped` when some
    configured type has none: PERSON, LOCATION and ORGANIZATION need the NER pipeline)."""
    configured = resolve_pii_entities(settings)
    found = entities_in_force(configured.value, loaded)
    return Resolved(
        found,
        configured.source,
        configured.clamped or found != configured.value,
        configured.malformed,
    )


def turn_retention(workspace: Workspace | None, config: Config) -> Resolved[int]:
    """How long this workspace's turn records are kept (the platform's default when its
    settings could not be read)."""
    return resolve_turn_retention(
        workspace.settings if workspace else None, config.turn_ttl_s, config.turn_ttl_max_s
    )
