"""PII redaction of egress: text or tool arguments (retrieve role)."""

from __future__ import annotations

import msgspec
from litestar import Controller, Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from gateway.access.auth import Principal
from gateway.errors import ForbiddenError, InvalidInputError
from gateway.http.dependencies import Injected
from gateway.http.disconnect import stop_on_disconnect
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.redaction_schemas import (
    ExplainedSpan,
    RedactedEntity,
    RedactIn,
    RedactionEffective,
    RedactOut,
)
from gateway.http.security import requires
from gateway.safety.egress import Egress, redact_egress
from settings.records import Role

AnyRequest = Request[Principal, str, State]


class RedactionController(Controller):
    path = "/v1"
    guards = [requires(Role.RETRIEVE)]  # noqa: RUF012 — Litestar configuration
    tags = ["redaction"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        "/redact",
        status_code=200,
        operation_id="redact",
        summary="Redact PII from text or a JSON value under the agent's two gates",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def redact(
        self, request: AnyRequest, egress: Injected[Egress], data: JSONBody[RedactIn]
    ) -> RedactOut:
        has_text = data.text is not msgspec.UNSET
        has_value = data.value is not msgspec.UNSET
        if has_text == has_value:
            raise InvalidInputError("send exactly one of text or value", field="text")
        if data.explain and not has_text:
            raise InvalidInputError("explain works on text, not on a JSON value", field="explain")
        if data.explain and Role.ADMIN not in request.user.roles:
            raise ForbiddenError("explain needs an admin key")
        async with stop_on_disconnect(request) as stop:
            result = await redact_egress(
                egress,
                request.user,
                data.agent_id,
                data.text if has_text else data.value,
                is_text=has_text,
                stop=stop,
                explain=data.explain,
            )
        entities = [RedactedEntity(type=name, count=n) for name, n in result.counts.items()]
        effective = RedactionEffective(redaction=result.redaction, entities=list(result.entities))
        if has_text:
            spans = [
                ExplainedSpan(
                    start=d.start,
                    end=d.end,
                    type=d.entity_type,
                    recognizer=d.recognizer,
                    score=round(d.score, 2),
                )
                for d in result.spans
            ]
            return RedactOut(
                text=result.value,
                redacted=result.redacted,
                entities=entities,
                effective=effective,
                spans=spans if data.explain else msgspec.UNSET,
            )
        return RedactOut(
            value=result.value, redacted=result.redacted, entities=entities, effective=effective
        )
