"""Request and answer bodies of PII redaction of egress (`POST /v1/redact`)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http.schemas import Identifier, Strict


class RedactIn(Strict):
    """Exactly one of `text` (a string) or `value` (any JSON value, e.g. tool arguments).
    `explain` (admin keys, `text` only) adds why each span was hidden."""

    agent_id: Identifier
    text: str | msgspec.UnsetType = msgspec.UNSET
    value: Any = msgspec.UNSET
    explain: bool = False


class RedactedEntity(msgspec.Struct, kw_only=True):
    type: str
    count: int


class RedactionEffective(msgspec.Struct, kw_only=True):
    """What the two gates decided, and which entity types the workspace redacts."""

    redaction: bool
    entities: list[str]


class ExplainedSpan(msgspec.Struct, kw_only=True):
    """One hidden span of the request's `text`: [start, end) in characters, its entity
    type, the recognizer that found it and the recognizer's score."""

    start: int
    end: int
    type: str
    recognizer: str
    score: float


class RedactOut(msgspec.Struct, kw_only=True):
    """`text` answers a text request, `value` a JSON one; `redacted`: anything replaced;
    `spans` (with `explain`) why each span was hidden."""

    text: str | msgspec.UnsetType = msgspec.UNSET
    value: Any = msgspec.UNSET
    redacted: bool
    entities: list[RedactedEntity]
    effective: RedactionEffective
    spans: list[ExplainedSpan] | msgspec.UnsetType = msgspec.UNSET
