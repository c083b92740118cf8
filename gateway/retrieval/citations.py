"""Citation checks: was this passage returned in that turn to this workspace, and is it
still there, and does the quote occur in what the model was given?"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.access.auth import Principal
from gateway.errors import DependencyUnavailableError, NotFoundError
from gateway.retrieval.evidence import Citation, Verdict, verify
from gateway.retrieval.plan import Planning, plan_turn
from ingest.index import Index, IndexUnavailableError
from settings.records import TurnRecord
from settings.store import TurnRecords


@dataclass(frozen=True, slots=True)
class Citations:
    """What checking citations uses: the turn records, the agent's plan as a turn would
    make it now, and the index (each call bounded by its deadline)."""

    records: TurnRecords
    planning: Planning
    index: Index


async def verify_citations(
    checks: Citations, principal: Principal, turn_id: str, citations: Sequence[Citation]
) -> list[Verdict]:
    """Verdicts in citation order; another workspace's (or an expired) turn is NotFoundError."""
    turn = await checks.records.get_turn(principal.tenant_id, turn_id)
    if turn is None:
        raise NotFoundError("no such turn")
    returned = {passage.passage_id: passage.text for passage in turn.passages}
    cited = {c.passage_id for c in citations if c.passage_id in returned}
    still_indexed = await _still_indexed(checks, principal, turn, cited)
    where = {passage.passage_id: passage for passage in turn.passages}
    return [
        dataclasses.replace(
            verdict,
            document_id=where[verdict.passage_id].document_id,
            page=where[verdict.passage_id].page,
            headings=where[verdict.passage_id].headings,
        )
        if verdict.valid
        else verdict
        for verdict in verify(citations, returned, still_indexed)
    ]


async def _still_indexed(
    checks: Citations, principal: Principal, turn: TurnRecord, cited: set[str]
) -> set[str]:
    """The cited passages that the agent could still retrieve now, under today's Scope."""
    if not cited:
        return set()
    try:
        context = await plan_turn(checks.planning, principal, turn.agent_id)
    except NotFoundError:
        return set()  # the agent is gone: nothing it returned can be relied on
    plans = {plan.kb.kb_id: plan for plan in context.plans}
    documents = {
        (passage.knowledge_base_id, passage.document_id)
        for passage in turn.passages
        if passage.passage_id in cited and passage.knowledge_base_id in plans
    }
    found: set[str] = set()
    try:
        for kb_id, document_id in documents:
            plan = plans[kb_id]
            stored = await checks.index.scroll_document(plan.collection, plan.scope, document_id)
            found.update(passage.point_id for passage in stored)
    except IndexUnavailableError as error:
        raise DependencyUnavailableError("index") from error
    return found & cited
