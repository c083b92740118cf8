"""The grounding post-check endpoint (retrieve role)."""

from __future__ import annotations

from litestar import Controller, Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from gateway.access.auth import Principal
from gateway.http.dependencies import Injected
from gateway.http.disconnect import stop_on_disconnect
from gateway.http.grounding_schemas import GroundingIn, GroundingOut, SentenceOut
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.security import requires
from gateway.retrieval.postcheck import GroundingCheck, grounding_check
from settings.records import Role

AnyRequest = Request[Principal, str, State]


class GroundingController(Controller):
    path = "/v1/grounding"
    guards = [requires(Role.RETRIEVE)]  # noqa: RUF012 — Litestar configuration
    tags = ["grounding"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        "/check",
        status_code=200,
        operation_id="checkGrounding",
        summary="Does an answer rest on the agent's knowledge bases?",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def check(
        self, request: AnyRequest, grounding: Injected[GroundingCheck], data: JSONBody[GroundingIn]
    ) -> GroundingOut:
        async with stop_on_disconnect(request) as stop:
            result = await grounding_check(
                grounding,
                request.user,
                data.agent_id,
                data.answer,
                by_sentence=data.mode == "sentences",
                stop=stop,
                asked_filter=data.filter,
                as_of=data.as_of,
            )
        return GroundingOut(
            status=result.status.value,
            score=result.score,
            floor=result.floor,
            matches=result.matches,
            reason=result.reason.value if result.reason else None,
            sentences=[
                SentenceOut(
                    index=s.index,
                    text=s.text,
                    status=s.status.value,
                    score=s.score,
                    matches=s.matches,
                )
                for s in result.sentences
            ]
            if data.mode == "sentences"
            else None,
        )
