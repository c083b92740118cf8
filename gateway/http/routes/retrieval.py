"""Retrieval turns and citation checks (retrieve role)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import msgspec
from litestar import Controller, Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from gateway.access.auth import Principal
from gateway.errors import InvalidInputError
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.retrieval_schemas import (
    AbstentionReason,
    BudgetIn,
    CitationRejection,
    CitationVerdict,
    PassageOut,
    RetrieveIn,
    RetrieveOut,
    TurnCounts,
    TurnEffective,
    VerifyIn,
    VerifyOut,
)
from gateway.http.security import requires
from gateway.retrieval import turn
from gateway.retrieval.budget import BudgetUnit, ContextBudget
from gateway.retrieval.citations import Citations, verify_citations
from gateway.retrieval.evidence import Citation
from gateway.retrieval.turn import Retrieval
from settings.records import Role

AnyRequest = Request[Principal, str, State]


def retrieve_out(result: turn.TurnResult) -> RetrieveOut:
    """A turn as the API answers it. Shared with the CLI's embedded `kbgate ask`."""
    return RetrieveOut(
        turn_id=result.turn_id,
        abstained=result.abstained,
        passages=[
            PassageOut(
                passage_id=c.point_id,
                document_id=c.hit.payload.document_id,
                knowledge_base_id=c.hit.payload.knowledge_base_id,
                title=result.titles.get(c.point_id, ""),
                text=result.texts[c.point_id],
                score=round(c.score, 6),
                dense_score=c.dense_score,
                keyword_score=c.keyword_score,
                metadata=result.fields.get(c.point_id),
                page=c.hit.payload.page,
                headings=_listed(result.headings.get(c.point_id)),
            )
            for c in result.candidates
        ],
        context=result.context,
        effective=msgspec.convert(result.effective, TurnEffective),
        reason=cast(AbstentionReason | None, result.reason),  # one of them by construction
        counts=TurnCounts(**{"passages_expired": 0, **result.counts}),
    )


def _listed(headings: Sequence[str] | None) -> list[str] | None:
    return list(headings) if headings else None


def context_budget(data: BudgetIn | None) -> ContextBudget | None:
    """A request's budget; 422 `budget` unless it names exactly one unit."""
    if data is None:
        return None
    units = ((BudgetUnit.TOKENS, data.tokens), (BudgetUnit.CHARACTERS, data.characters))
    given = [(unit, limit) for unit, limit in units if limit is not None]
    if len(given) != 1:
        raise InvalidInputError("give exactly one of tokens, characters", field="budget")
    unit, limit = given[0]
    return ContextBudget(unit, limit)


class RetrievalController(Controller):
    path = "/v1"
    guards = [requires(Role.RETRIEVE)]  # noqa: RUF012 — Litestar configuration
    tags = ["retrieval"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        "/retrieve",
        status_code=200,
        operation_id="retrieve",
        summary="Retrieve evidence for an agent's question",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def retrieve(
        self, request: AnyRequest, retrieval: Injected[Retrieval], data: JSONBody[RetrieveIn]
    ) -> RetrieveOut:
        result = await turn.retrieve(
            retrieval,
            request.user,
            data.agent_id,
            data.question,
            data.variations,
            asks=turn.TurnAsks(
                filter=data.filter, as_of=data.as_of, budget=context_budget(data.budget)
            ),
        )
        return retrieve_out(result)

    @post(
        "/citations/verify",
        status_code=200,
        operation_id="verifyCitations",
        summary="Check citations against a turn",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def verify(
        self, request: AnyRequest, citations: Injected[Citations], data: JSONBody[VerifyIn]
    ) -> VerifyOut:
        verdicts = await verify_citations(
            citations,
            request.user,
            data.turn_id,
            [Citation(c.passage_id, c.quote) for c in data.citations],
        )
        return VerifyOut(
            valid=[
                CitationVerdict(
                    passage_id=v.passage_id,
                    document_id=v.document_id,
                    page=v.page,
                    headings=_listed(v.headings),
                )
                for v in verdicts
                if v.valid
            ],
            invalid=[
                CitationVerdict(passage_id=v.passage_id, reason=cast(CitationRejection, v.reason))
                for v in verdicts
                if not v.valid
            ],
        )
