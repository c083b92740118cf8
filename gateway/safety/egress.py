"""Redaction of what an agent sends out (tool arguments, other egress): `POST /v1/redact`.

The same two gates as retrieval (`resolve_redaction`: the workspace's
`rag_pii_redaction` and the agent's `pii_redaction`), the same policy (the workspace's
entity types in force, its allow-list and its operators,
`gateway.safety.passages.redaction_policy`) and
the same recognizers, run at call time on the expensive-work pool
(`gateway.access.expensive`). A JSON value's distinct strings are analysed once each, in
batches, and a long text in slices of `TEXT_SLICE_CHARS`; between two batches or slices
the work stops once the caller gave up, or gives its run slot to another workspace's
waiting work. The work a call may ask for is bounded before
any is done: MAX_EGRESS_CHARS characters (413) and MAX_EGRESS_STRINGS strings (422).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, Stop, stop_point
from gateway.errors import (
    DependencyUnavailableError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
)
from gateway.safety.passages import RedactionPolicies, redaction_policy
from gateway.safety.policy import count_redactions
from gateway.safety.spans import Detection
from gateway.telemetry import Telemetry
from settings.cache import CachedSettings
from settings.resolve import resolve_redaction

#: Characters of text (summed over every string of a JSON value) one call may redact.
#: Detection costs a few microseconds per character in a worker thread; the bound keeps
#: one request from holding a thread for seconds.
MAX_EGRESS_CHARS = 100_000
#: Strings (every occurrence, object keys aside) one JSON value may hold. Each distinct
#: string costs about a millisecond of analysis however short it is (the recognizers'
#: per-call work, batched); the bound keeps one call's work near a second or two.
MAX_EGRESS_STRINGS = 2_000


@dataclass(frozen=True, slots=True)
class Egress:
    """What redacting egress uses: the agent and workspace settings through the cache, the
    redaction policies, the expensive-work pool the recognizers run on, and counts."""

    settings: CachedSettings
    policies: RedactionPolicies
    expensive: ExpensiveWork
    telemetry: Telemetry


@dataclass(frozen=True, slots=True)
class EgressRedaction:
    """The (possibly) redacted text or JSON value, and what the gates decided."""

    value: Any
    counts: dict[str, int]
    redaction: bool
    entities: tuple[str, ...]
    #: With `explain`: each hidden span of the text, with the recognizer that found it.
    spans: tuple[Detection, ...] = ()

    @property
    def redacted(self) -> bool:
        """Whether anything was replaced."""
        return bool(self.counts)


async def redact_egress(
    egress: Egress,
    principal: Principal,
    agent_id: str,
    value: Any,
    *,
    is_text: bool,
    stop: Stop | None = None,
    explain: bool = False,
) -> EgressRedaction:
    """Redact `value` (a string when `is_text`, else any JSON value) for the principal's agent;
    with `explain` (text only), also say which recognizer found each hidden span.

    Another workspace's agent is NotFoundError, exactly like an unknown one.
    """
    chars, strings = _strings(value)
    field = "text" if is_text else "value"
    if chars > MAX_EGRESS_CHARS:
        raise PayloadTooLargeError(f"at most {MAX_EGRESS_CHARS} characters", field=field)
    if strings > MAX_EGRESS_STRINGS:
        raise InvalidInputError(
            f"must hold at most {MAX_EGRESS_STRINGS} strings (it holds {strings})", field=field
        )
    agent = await egress.settings.agent(principal.tenant_id, agent_id)
    if agent is None:
        raise NotFoundError("no such agent")
    workspace = await egress.settings.workspace_or_none(principal.tenant_id)  # None: gates on
    workspace_settings = workspace.settings if workspace else None
    gates = resolve_redaction(workspace_settings, agent.settings)
    if not gates.value:
        return EgressRedaction(value, {}, redaction=False, entities=())
    policy = await redaction_policy(egress.policies, principal.tenant_id, workspace_settings)
    entities = tuple(sorted(policy.entities))
    redactor = egress.policies.redactor

    def work(flag: Stop) -> tuple[Any, dict[str, int], tuple[Detection, ...]]:
        if is_text:
            if explain:
                redaction, spans = redactor.redact_explained(
                    value, entities, policy.allow, policy.operators, partial(stop_point, flag)
                )
                return redaction.text, redaction.counts, tuple(spans)
            redaction = redactor.redact(
                value, entities, policy.allow, policy.operators, partial(stop_point, flag)
            )
            return redaction.text, redaction.counts, ()
        redacted, counts = redactor.redact_json(
            value, entities, partial(stop_point, flag), policy.allow, policy.operators
        )
        return redacted, counts, ()

    with egress.telemetry.stage("egress_redact"):
        try:
            redacted, counts, spans = await egress.expensive.run(
                principal.tenant_id, work, kind="redact", stop=stop
            )
        except RateLimitedError:
            raise
        except ValueError as error:
            raise InvalidInputError(str(error), field="value") from None
        except Exception as error:
            # Fail closed: text that could not be redacted is never returned.
            raise DependencyUnavailableError("redactor") from error
    count_redactions(egress.telemetry, counts)
    return EgressRedaction(redacted, counts, redaction=True, entities=entities, spans=spans)


async def explain_texts(
    egress: Egress, principal: Principal, texts: Sequence[str]
) -> list[list[Detection]]:
    """Why each span of each text would be hidden under the workspace's policy: its type,
    the recognizer that found it and its score (the console's *Try a question*)."""
    workspace = await egress.settings.workspace_or_none(principal.tenant_id)
    policy = await redaction_policy(
        egress.policies, principal.tenant_id, workspace.settings if workspace else None
    )
    redactor = egress.policies.redactor

    def work(_: Stop) -> list[list[Detection]]:
        return [redactor.explain(text, policy.entities, policy.allow) for text in texts]

    with egress.telemetry.stage("explain_redaction"):
        try:
            return await egress.expensive.run(principal.tenant_id, work, kind="explain")
        except RateLimitedError:
            raise
        except Exception as error:
            raise DependencyUnavailableError("redactor") from error


def _strings(value: Any) -> tuple[int, int]:
    """Characters in every string of a JSON value, and how many strings (iterative: depth
    is checked later)."""
    total, count, stack = 0, 0, [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            total += len(node)
            count += 1
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return total, count
