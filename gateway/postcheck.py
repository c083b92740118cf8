"""The grounding post-check for an agent: the turn's own plan, handed to `grounding.check`."""

from __future__ import annotations

import asyncio

from gateway.auth import Principal
from gateway.errors import InvalidInputError
from gateway.services import Services
from gateway.turn import plan_turn
from grounding.check import Grounding, Reason, Status, Target, check
from settings.resolve import resolve_grounding_floor

MAX_ANSWER_CHARS = 20_000


async def grounding_check(
    services: Services, principal: Principal, agent_id: str, answer: str, *, by_sentence: bool
) -> Grounding:
    """Search exactly the KBs and Scopes a retrieval turn for this agent would."""
    if not answer.strip():
        raise InvalidInputError("must not be empty", field="answer")
    if len(answer) > MAX_ANSWER_CHARS:
        raise InvalidInputError(f"must be at most {MAX_ANSWER_CHARS} characters", field="answer")
    context = await plan_turn(services, principal, agent_id)
    defaults = services.config.defaults
    targets = [
        Target(
            collection=plan.collection,
            scope=plan.scope,
            floor=resolve_grounding_floor(plan.kb.settings, defaults).value,
        )
        for plan in context.plans
    ]
    with services.telemetry.stage("grounding"):
        try:
            result = await asyncio.wait_for(
                asyncio.to_thread(
                    check,
                    answer,
                    targets,
                    services.index,
                    services.embedder,
                    default_floor=defaults.grounding_floor,
                    by_sentence=by_sentence,
                ),
                timeout=services.config.embed_timeout_s + services.config.qdrant_timeout_s,
            )
        except TimeoutError:
            result = Grounding(
                Status.SKIPPED, None, defaults.grounding_floor, 0, Reason.INDEX_UNAVAILABLE
            )
    services.telemetry.count(f"grounding_{result.status.value}")
    if result.reason is not None:
        services.telemetry.count(f"grounding_skipped_{result.reason.value}")
    return result
