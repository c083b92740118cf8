"""Request and answer bodies of the grounding check of an answer (`POST /v1/grounding/check`)."""

from __future__ import annotations

from typing import Literal

import msgspec

from gateway.http.schemas import Filter, Identifier, Moment, Strict


class GroundingIn(Strict):
    agent_id: Identifier
    answer: str
    mode: Literal["whole", "sentences"] = "whole"
    #: check against the passages a turn with this filter and moment would search
    filter: Filter | None = None
    as_of: Moment | None = None


GroundingStatus = Literal["supported", "flagged", "skipped"]
GroundingSkipReason = Literal[
    "no_knowledge_base", "embedding_failed", "no_matches", "no_scope", "index_unavailable"
]


class SentenceOut(msgspec.Struct, kw_only=True):
    index: int
    text: str
    status: GroundingStatus
    score: float | None
    matches: int


class GroundingOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: GroundingStatus
    score: float | None
    floor: float
    matches: int
    #: why the check was skipped (status `skipped`)
    reason: GroundingSkipReason | None = None
    sentences: list[SentenceOut] | None = None
