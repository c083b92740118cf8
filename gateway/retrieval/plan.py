"""Planning a turn: which of an agent's knowledge bases are searched, under which Scope
and with which limits, read from the settings cache (`settings.resolve` holds the rules).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.access.auth import Principal
from gateway.errors import NotFoundError
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.off_topic_line import OffTopicLines
from ingest.embedder.models import vector_of
from ingest.index import collection_for
from ingest.payload import Scope
from settings.cache import CachedSettings
from settings.config import Config
from settings.effective import knowledge_base_effective
from settings.records import Agent, KnowledgeBase, Workspace
from settings.resolve import (
    Resolved,
    measured_score_threshold,
    resolve_drop_copies,
    resolve_fusion,
    resolve_kb_cap,
    resolve_keyword_floor,
    resolve_redaction,
    resolve_score_threshold,
    resolve_strict_isolation,
    resolve_top_k,
)

#: Under a low reach (`KbPlan.low_reach`) and the platform's fusion, the keyword channel
#: weighs as the dense one, and the passage and whole-document keyword legs alike
#: (docs/decisions/low-reach-fusion.md).
LOW_REACH_KEYWORD_WEIGHT = 1.0
LOW_REACH_DOCUMENT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Planning:
    """What planning a turn reads: agents, KBs and workspaces through the settings cache,
    the platform's bounds and defaults, and each Scope's measured off-topic lines."""

    settings: CachedSettings
    config: Config
    lines: OffTopicLines


@dataclass(slots=True)
class TurnContext:
    """What the settings say for this principal and agent (shared with grounding)."""

    principal: Principal
    agent: Agent
    workspace: Workspace | None
    plans: list[KbPlan]
    skipped: list[str]
    strict: Resolved[bool]
    redaction: Resolved[bool]
    cap: Resolved[int]


async def plan_turn(planning: Planning, principal: Principal, agent_id: str) -> TurnContext:
    """Load settings through the cache and decide which KBs are queried under which Scope."""
    agent = await planning.settings.agent(principal.tenant_id, agent_id)
    if agent is None:
        raise NotFoundError("no such agent")
    workspace = await planning.settings.workspace_or_none(principal.tenant_id)
    workspace_settings = workspace.settings if workspace else None
    bounds, defaults = planning.config.bounds, planning.config.defaults
    cap = resolve_kb_cap(workspace_settings, bounds, defaults)
    strict = resolve_strict_isolation(workspace_settings, workspace.created_at if workspace else "")
    redaction = resolve_redaction(workspace_settings, agent.settings)
    plans: list[KbPlan] = []
    for kb_id in agent.knowledge_base_ids[: cap.value]:
        kb = await planning.settings.knowledge_base(principal.tenant_id, kb_id)
        if kb is None:
            continue  # detached since: nothing to search, and nothing to reveal
        plans.append(
            plan_knowledge_base(planning.config, principal, kb, agent.settings, strict.value)
        )
    return TurnContext(
        principal=principal,
        agent=agent,
        workspace=workspace,
        plans=plans,
        skipped=agent.knowledge_base_ids[cap.value :],
        strict=strict,
        redaction=redaction,
        cap=cap,
    )


def plan_knowledge_base(
    config: Config,
    principal: Principal,
    kb: KnowledgeBase,
    agent_settings: Mapping[str, Any] | None,
    strict: bool,
) -> KbPlan:
    """One KB's part of a turn for the principal: its own Scope, and its settings (then the
    agent's, then the platform's) through `settings.resolve`. An evaluation plans a KB
    under candidate settings with it too (`gateway.calibration`)."""
    bounds, defaults = config.bounds, config.defaults
    fusion = resolve_fusion(kb.settings)
    return KbPlan(
        kb=kb,
        scope=Scope.of(
            org_id=principal.org_id,
            tenant_id=principal.tenant_id,
            kb_ids=[kb.kb_id],
            clearance=principal.clearance,
            strict=strict,
        ),
        collection=collection_for(kb.storage, kb.org_id),
        top_k=resolve_top_k(kb.settings, agent_settings, bounds, defaults),
        score_threshold=resolve_score_threshold(kb.settings, agent_settings, bounds, defaults),
        keyword_floor=resolve_keyword_floor(kb.settings, defaults).value,
        dense_weight=fusion.value.dense,
        keyword_weight=fusion.value.keyword,
        platform_fusion=fusion.source == "platform",
        drop_copies=resolve_drop_copies(kb.settings).value,
        dense_model=kb.embedding_model,
        dense_vector=vector_of(kb.embedding_model),
    )


def with_measured_lines(plan: KbPlan, line: Resolved[float], joint: float) -> KbPlan:
    """The plan under measured lines instead of the platform's `score_threshold`: the
    lines decide whether the KB answers; dense passages the platform default keeps still
    count."""
    cut = min(line.value, plan.score_threshold.value)
    return dataclasses.replace(plan, score_threshold=line, dense_cut=cut, joint_line=joint)


async def with_lines(
    planning: Planning, plans: Sequence[KbPlan], *, wait: bool = False
) -> list[KbPlan]:
    """The plans, each whose `score_threshold` only the platform default sets under its
    Scope's measured off-topic line instead (`gateway.retrieval.off_topic_line`), and each
    whose fusion only the platform sets with its Scope's reach (`with_reach`), unless the
    operator turned lines off. A line not measured yet leaves the defaults in force, or,
    with `wait`, is waited for."""
    if not planning.config.defaults.off_topic_line:
        return list(plans)
    return [await _lined(planning, plan, wait) for plan in plans]


async def settle_lines(planning: Planning, principal: Principal, agent_id: str) -> None:
    """Wait until the agent's KBs' lines for this principal are measured: for one-off
    tools (`kbgate ask` on a data dir, `kbgate eval`) whose first turns count."""
    await with_lines(planning, (await plan_turn(planning, principal, agent_id)).plans, wait=True)


def with_reach(plan: KbPlan, reach: float | None, identifiers: float | None) -> KbPlan:
    """The plan with its Scope's measured reach and identifier share, and the channel
    weights of a low reach in technical text (`KbPlan.low_reach`): the keyword channel
    weighs as the dense one where the platform's weights are in force."""
    plan = dataclasses.replace(plan, reach=reach, identifiers=identifiers)
    if not plan.platform_fusion or not plan.low_reach:
        return plan
    return dataclasses.replace(
        plan,
        keyword_weight=LOW_REACH_KEYWORD_WEIGHT * plan.dense_weight,
        document_keyword_share=LOW_REACH_DOCUMENT_SHARE,
    )


async def _lined(planning: Planning, plan: KbPlan, wait: bool) -> KbPlan:
    lined = plan.score_threshold.source == "platform"
    # Lines and reach are measured on the deployment model's cosines: a KB answering from
    # another model's vectors keeps its own floors and channel weights (a migration's
    # validation recommends floors for its model).
    if plan.dense_model or (not lined and not plan.platform_fusion):
        return plan
    lines = await planning.lines.lines(plan, wait=wait)
    if lines is None:
        return plan
    plan = with_reach(plan, lines.reach, lines.identifiers)
    if not lined:
        return plan
    line = measured_score_threshold(lines.dense, planning.config.bounds)
    return with_measured_lines(plan, line, max(lines.joint, line.value))


async def knowledge_base_in_force(
    planning: Planning, principal: Principal, kb: KnowledgeBase
) -> dict[str, Resolved[Any]]:
    """The KB's settings resolved alone (`knowledge_base_effective`), with an unset
    `score_threshold` shown as the off-topic line the principal's turns use once one of
    them has measured it for the principal's Scope (in this process, or kept in the
    store); never starts a measurement."""
    config = planning.config
    effective = knowledge_base_effective(kb, config.bounds, config.defaults)
    if not config.defaults.off_topic_line or effective["score_threshold"].source != "platform":
        return effective
    workspace = await planning.settings.workspace_or_none(principal.tenant_id)
    strict = resolve_strict_isolation(
        workspace.settings if workspace else None, workspace.created_at if workspace else ""
    )
    plan = plan_knowledge_base(config, principal, kb, None, strict.value)
    lines = await planning.lines.known(plan)
    if lines is None:
        return effective
    line = measured_score_threshold(lines.dense, config.bounds)
    return {**effective, "score_threshold": line}


def effective_settings(context: TurnContext) -> dict[str, Any]:
    """The settings in force, which level set each, and whether a bound changed any."""
    plans = context.plans
    lead = max(plans, key=lambda p: p.top_k.value) if plans else None
    per_kb = {
        plan.kb.kb_id: {
            "top_k": plan.top_k.value,
            "score_threshold": plan.score_threshold.value,
            "keyword_floor": plan.keyword_floor,
            "joint_line": plan.joint_line,
            "fusion": {"dense": plan.dense_weight, "keyword": plan.keyword_weight},
            "drop_copies": plan.drop_copies,
            # the dense vector set its dense leg searched (a model migration's)
            "dense_vector": plan.dense_vector,
            "sources": {"top_k": plan.top_k.source, "score_threshold": plan.score_threshold.source},
            "clamped": {
                "top_k": plan.top_k.clamped,
                "score_threshold": plan.score_threshold.clamped,
            },
        }
        for plan in plans
    }
    clamped = {
        "top_k": any(p.top_k.clamped for p in plans),
        "score_threshold": any(p.score_threshold.clamped for p in plans),
        "max_knowledge_bases_per_agent": context.cap.clamped,
    }
    return {
        "top_k": lead.top_k.value if lead else None,
        "score_threshold": lead.score_threshold.value if lead else None,
        "sources": {
            "top_k": lead.top_k.source if lead else "platform",
            "score_threshold": lead.score_threshold.source if lead else "platform",
        },
        "clamped": clamped if any(clamped.values()) else False,
        "knowledge_bases_queried": [plan.kb.kb_id for plan in plans],
        "knowledge_bases_skipped": list(context.skipped),
        "max_knowledge_bases_per_agent": context.cap.value,
        "strict_isolation": context.strict.value,
        "redaction": context.redaction.value,
        "per_knowledge_base": per_kb,
    }
