"""The grounding post-check for an agent: the turn's own plan, handed to `grounding.check`.

It runs on the expensive-work pool (`gateway.access.expensive`) within the size budget
(`KBGATE_GROUNDING_MAX_CHARS`, `KBGATE_GROUNDING_MAX_SENTENCES`), and stops between
sentences once its caller gave up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, Stop, WorkStopped, stop_point
from gateway.errors import InvalidInputError
from gateway.retrieval.narrowing import AGENT_FILTER, turn_narrowing
from gateway.retrieval.plan import Planning, plan_turn
from gateway.telemetry import Telemetry
from grounding.check import Grounding, Reason, Status, Target, check
from ingest.chunking import split_sentences
from ingest.embedder.embedding import Embedder
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from ingest.index import Index
from settings.config import Config
from settings.resolve import resolve_grounding_floor


@dataclass(frozen=True, slots=True)
class GroundingCheck:
    """What the grounding post-check uses: the agent's plan, the index and the model
    `grounding.check` searches with, the expensive-work pool it runs on, counts and the
    platform's config (size budget, floors, timeouts)."""

    planning: Planning
    index: Index
    embedder: Embedder
    expensive: ExpensiveWork
    telemetry: Telemetry
    config: Config
    #: the other dense models KBs answer from (None: only the deployment's)
    models: DenseModels | None = None


async def grounding_check(
    grounding: GroundingCheck,
    principal: Principal,
    agent_id: str,
    answer: str,
    *,
    by_sentence: bool,
    stop: Stop | None = None,
    asked_filter: Any = None,
    as_of: str | None = None,
) -> Grounding:
    """Search exactly the KBs and Scopes a retrieval turn for this agent would, with the
    same filters and moment (`gateway.retrieval.narrowing`)."""
    config, telemetry = grounding.config, grounding.telemetry
    _check_budget(config, answer, by_sentence=by_sentence)
    context = await plan_turn(grounding.planning, principal, agent_id)
    narrowing = turn_narrowing(
        context.plans,
        agent_filter=context.agent.settings.get(AGENT_FILTER),
        asked_filter=asked_filter,
        as_of=as_of,
    )
    context.plans = await narrowing.applied(grounding.index, context.plans)
    defaults = config.defaults
    targets = [
        Target(
            collection=plan.collection,
            scope=plan.scope,
            floor=resolve_grounding_floor(plan.kb.settings, defaults).value,
            model=plan.dense_model,
            vector=plan.dense_vector,
        )
        for plan in context.plans
    ]

    index = BlockingIndex(grounding.index, asyncio.get_running_loop())

    def work(flag: Stop) -> Grounding:
        return check(
            answer,
            targets,
            index,
            grounding.embedder,
            default_floor=defaults.grounding_floor,
            by_sentence=by_sentence,
            checkpoint=partial(stop_point, flag),
            other_models=None if grounding.models is None else grounding.models.get,
        )

    with telemetry.stage("grounding"):
        try:
            result = await grounding.expensive.run(
                principal.tenant_id,
                work,
                kind="grounding",
                timeout_s=config.embed_timeout_s + config.qdrant_timeout_s,
                stop=stop,
            )
        except (TimeoutError, WorkStopped):  # the caller gave up or waited too long
            result = Grounding(
                Status.SKIPPED, None, defaults.grounding_floor, 0, Reason.INDEX_UNAVAILABLE
            )
    telemetry.count(f"grounding_{result.status.value}")
    if result.reason is not None:
        telemetry.count(f"grounding_skipped_{result.reason.value}")
    return result


def _check_budget(config: Config, answer: str, *, by_sentence: bool) -> None:
    """422 for an empty answer or one beyond the size budget, before any work."""
    if not answer.strip():
        raise InvalidInputError("must not be empty", field="answer")
    if len(answer) > config.grounding_max_chars:
        raise InvalidInputError(
            f"must be at most {config.grounding_max_chars} characters", field="answer"
        )
    if by_sentence and len(split_sentences(answer)) > config.grounding_max_sentences:
        raise InvalidInputError(
            f"must be at most {config.grounding_max_sentences} sentences in sentences mode",
            field="answer",
        )
