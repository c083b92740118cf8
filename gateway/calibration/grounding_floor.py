"""Answers a KB's grounding floor is calibrated on, scored by the real grounding check.

For a golden question whose expected document the KB holds: a supported answer restates
it (two consecutive sentences of the document's first passage), an other-domain answer
is two statements from another field (`builtin.other_domain_statements`), and a mixed
answer is the supported answer's first sentence followed by one such statement. Each is
scored by `grounding.check.check` against the KB alone, in the caller's Scope. Blocking:
an evaluation runs it on the expensive-work pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from gateway.access.expensive import Stop, stop_point
from gateway.calibration.builtin import other_domain_statements
from gateway.calibration.measure import KbUnderTest
from grounding.check import Target, check
from ingest.chunking import split_sentences
from settings.golden import GoldenQuestion
from settings.resolve import resolve_grounding_floor

#: golden questions (the first ones) that answers are built for
GROUNDING_QUESTIONS = 60


@dataclass(frozen=True, slots=True)
class ScoredAnswers:
    """The grounding check's score of each kind of answer built for one question."""

    supported: float | None
    other_domain: float | None
    mixed: float | None


def score_answers(
    kb: KbUnderTest, question: GoldenQuestion, position: int, stop: Stop
) -> ScoredAnswers | None:
    """Build and score the three answers for one question (None: the KB holds none of its
    expected documents)."""
    text = _expected_text(kb, question.document_ids, stop)
    if text is None:
        return None
    sentences = split_sentences(text) or [text]
    restated = " ".join(sentences[1:3] if len(sentences) >= 3 else sentences[:2])
    statements = other_domain_statements()
    count = len(statements)
    other = f"{statements[(2 * position) % count]} {statements[(2 * position + 1) % count]}"
    mixed = f"{split_sentences(restated)[0]} {statements[(3 * position + 7) % count]}"
    return ScoredAnswers(
        supported=_score(kb, restated, stop),
        other_domain=_score(kb, other, stop),
        mixed=_score(kb, mixed, stop),
    )


def _expected_text(kb: KbUnderTest, document_ids: Sequence[str], stop: Stop) -> str | None:
    """The first passage of the first expected document the KB holds, in the caller's Scope."""
    plan = kb.plan({})
    for document_id in document_ids:
        stop_point(stop)
        passages = kb.index.scroll_document(plan.collection, plan.scope, document_id)
        if passages and passages[0].payload.text.strip():
            return passages[0].payload.text
    return None


def _score(kb: KbUnderTest, answer: str, stop: Stop) -> float | None:
    plan = kb.plan({})
    defaults = kb.search.config.defaults
    floor = resolve_grounding_floor(kb.kb.settings, defaults).value
    found = check(
        answer,
        # `kb.embedder` is the model the KB answers from: its vector set is searched
        [
            Target(
                collection=plan.collection,
                scope=plan.scope,
                floor=floor,
                vector=plan.dense_vector,
            )
        ],
        kb.index,
        kb.embedder,
        default_floor=defaults.grounding_floor,
        checkpoint=partial(stop_point, stop),
    )
    return found.score
