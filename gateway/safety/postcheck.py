"""The grounding post-check for an agent: the turn's own plan, handed to `grounding.check`.

It runs on the expensive-work pool (`gateway.access.expensive`) within the size budget
(`KBGATE_GROUNDING_MAX_CHARS`, `KBGATE_GROUNDING_MAX_SENTENCES`), and stops between
sentences once its caller gave up.
"""

from __future__ import annotations

import asyncio
from functools import partial

from gateway.access.auth import Principal
from gateway.access.expensive import Stop, WorkStopped, stop_point
from gateway.errors import InvalidInputError
from gateway.retrieval.plan import plan_turn
from gateway.runtime.services import Services
from grounding.check import Grounding, Reason, Status, Target, check
from ingest.chunking import split_sentences
from ingest.engines.blocking import BlockingIndex
from settings.resolve import resolve_grounding_floor


async def grounding_check(
    services: Services,
    principal: Principal,
    agent_id: str,
    answer: str,
    *,
    by_sentence: bool,
    stop: Stop | None = None,
) -> Grounding:
    """Search exactly the KBs and Scopes a retrieval turn for this agent would."""
    _check_budget(services, answer, by_sentence=by_sentence)
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

    index = BlockingIndex(services.index, asyncio.get_running_loop())

    def work(flag: Stop) -> Grounding:
        return check(
            answer,
            targets,
            index,
            services.embedder,
            default_floor=defaults.grounding_floor,
            by_sentence=by_sentence,
            checkpoint=partial(stop_point, flag),
        )

    with services.telemetry.stage("grounding"):
        try:
            result = await services.expensive.run(
                principal.tenant_id,
                work,
                kind="grounding",
                timeout_s=services.config.embed_timeout_s + services.config.qdrant_timeout_s,
                stop=stop,
            )
        except (TimeoutError, WorkStopped):  # the caller gave up or waited too long
            result = Grounding(
                Status.SKIPPED, None, defaults.grounding_floor, 0, Reason.INDEX_UNAVAILABLE
            )
    services.telemetry.count(f"grounding_{result.status.value}")
    if result.reason is not None:
        services.telemetry.count(f"grounding_skipped_{result.reason.value}")
    return result


def _check_budget(services: Services, answer: str, *, by_sentence: bool) -> None:
    """422 for an empty answer or one beyond the size budget, before any work."""
    config = services.config
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
