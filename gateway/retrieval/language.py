"""A KB's language rules in a turn: `restrict` keeps only passages in the listed
languages (and those whose language could not be told: too short or unclear, or written
before detection), `prefer` ranks a KB's passages in one language (a code, or
`"question"`: the question's detected language) ahead of its others, each group in
score order. Passages' languages are detected as they are written
(`ingest.language`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.retrieval.fusion import Candidate
from gateway.retrieval.kb_plan import KbPlan
from ingest.index import RankedPoint
from ingest.payload import AnyOf, IsAnyOf, Missing, Narrowing, PayloadKey

#: The KB setting holding `{restrict?: [codes], prefer?: code | "question"}`.
LANGUAGE_SETTING = "language"
#: `prefer`'s value naming the question's own language.
QUESTION = "question"


def _rules(settings: Mapping[str, Any] | None) -> Mapping[str, Any]:
    found = (settings or {}).get(LANGUAGE_SETTING)
    return found if isinstance(found, Mapping) else {}


def restriction(settings: Mapping[str, Any] | None) -> Narrowing | None:
    """The narrowing a KB's `restrict` asks for (None: no restriction)."""
    codes = [code for code in _rules(settings).get("restrict") or () if isinstance(code, str)]
    if not codes:
        return None
    key = PayloadKey.LANGUAGE.value
    return AnyOf((IsAnyOf(key, tuple(codes)), Missing(key)))


def preferred(
    candidates: Sequence[Candidate[RankedPoint]],
    plans: Sequence[KbPlan],
    question_language: str | None,
) -> list[Candidate[RankedPoint]]:
    """The candidates with each preferring KB's passages in its language first (a stable
    reorder: the order within each group is kept)."""
    wanted: dict[str, str] = {}
    for plan in plans:
        prefer = _rules(plan.kb.settings).get("prefer")
        code = question_language if prefer == QUESTION else prefer
        if isinstance(code, str):
            wanted[plan.kb.kb_id] = code
    if not wanted:
        return list(candidates)

    def late(candidate: Candidate[RankedPoint]) -> bool:
        ref = candidate.hit.ref
        code = wanted.get(ref.knowledge_base_id)
        return code is not None and ref.language != code

    return sorted(candidates, key=late)
