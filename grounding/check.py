"""The grounding post-check: does an answer rest on the agent's knowledge bases?

Re-embed the answer, search the same Scopes a retrieval turn would (dense only,
through `Index.query`: there is no second filter builder), average the top
three similarities, and flag the answer when that average is below the floor.
It is a quality signal that fails open: no KB, an embedding failure, an index
failure or zero matches give `skipped` with a reason, never an error. It never
searches without a Scope: a target without one aborts the check (`no_scope`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ingest.chunking import split_sentences
from ingest.embedder.embedding import Embedder
from ingest.engines.blocking import BlockingIndex
from ingest.index import DENSE_VECTOR, Hit, IndexUnavailableError, Leg, LegKind
from ingest.payload import Scope

TOP_MATCHES = 3
#: Sentences embedded per model call; the check may stop between two such batches.
EMBED_BATCH = 16


def _go_on() -> None:
    """The default checkpoint: never stop."""


class Status(enum.StrEnum):
    SUPPORTED = "supported"
    FLAGGED = "flagged"
    SKIPPED = "skipped"


class Reason(enum.StrEnum):
    NO_KNOWLEDGE_BASE = "no_knowledge_base"
    EMBEDDING_FAILED = "embedding_failed"
    NO_MATCHES = "no_matches"
    NO_SCOPE = "no_scope"
    INDEX_UNAVAILABLE = "index_unavailable"


@dataclass(frozen=True, slots=True)
class Target:
    """One KB to search: its collection, its Scope (None aborts the check), its floor, and
    the dense model ("": the deployment's) and vector set it answers from."""

    collection: str
    scope: Scope | None
    floor: float
    model: str = ""
    vector: str = DENSE_VECTOR


@dataclass(frozen=True, slots=True)
class SentenceVerdict:
    index: int
    text: str
    status: Status
    score: float | None
    matches: int


@dataclass(frozen=True, slots=True)
class Grounding:
    status: Status
    score: float | None
    floor: float
    matches: int
    reason: Reason | None = None
    sentences: list[SentenceVerdict] = field(default_factory=list)


def check(
    answer: str,
    targets: Sequence[Target] | None,
    index: BlockingIndex,
    embedder: Embedder,
    *,
    default_floor: float,
    by_sentence: bool = False,
    checkpoint: Callable[[], None] = _go_on,
    other_models: Callable[[str], Embedder] | None = None,
) -> Grounding:
    """Judge one answer (or each of its sentences) against the targets: embedded once by
    each model the targets answer from (`embedder` for the deployment's, `other_models`
    for the others).

    `checkpoint` is called between units of work (a batch of sentences embedded, one
    sentence searched); whatever it raises stops the check there and propagates.
    """
    if targets is None or any(target.scope is None for target in targets):
        return Grounding(Status.SKIPPED, None, default_floor, 0, Reason.NO_SCOPE)
    if not targets:
        return Grounding(Status.SKIPPED, None, default_floor, 0, Reason.NO_KNOWLEDGE_BASE)
    texts = split_sentences(answer) if by_sentence else [answer]
    texts = texts or [answer]
    try:
        vectors = {
            model: _embedded(texts, _model(model, embedder, other_models), checkpoint)
            for model in sorted({target.model for target in targets})
        }
    except (RuntimeError, ValueError, OSError):
        return Grounding(Status.SKIPPED, None, default_floor, 0, Reason.EMBEDDING_FAILED)
    try:
        found = []
        for position in range(len(texts)):
            checkpoint()
            each = {model: found_vectors[position] for model, found_vectors in vectors.items()}
            found.append(_top_matches(each, targets, index))
    except IndexUnavailableError:
        return Grounding(Status.SKIPPED, None, default_floor, 0, Reason.INDEX_UNAVAILABLE)
    verdicts = [
        _judge(position, text, hits, default_floor)
        for position, (text, hits) in enumerate(zip(texts, found, strict=True))
    ]
    if not by_sentence:
        only = verdicts[0]
        reason = Reason.NO_MATCHES if only.status is Status.SKIPPED else None
        return Grounding(only.status, only.score, only.floor, only.matches, reason)
    return _combine(verdicts, default_floor)


def _model(
    model: str, embedder: Embedder, other_models: Callable[[str], Embedder] | None
) -> Embedder:
    if not model:
        return embedder
    if other_models is None:
        raise RuntimeError(f"no model {model!r} to embed with")
    return other_models(model)


def _embedded(
    texts: Sequence[str], embedder: Embedder, checkpoint: Callable[[], None]
) -> list[tuple[float, ...]]:
    vectors: list[tuple[float, ...]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        checkpoint()
        batch = embedder.embed_queries(list(texts[start : start + EMBED_BATCH]))
        vectors.extend(embedding.dense for embedding in batch)
    return vectors


@dataclass(frozen=True, slots=True)
class _Verdict:
    status: Status
    score: float | None
    floor: float
    matches: int
    sentence: SentenceVerdict


def _top_matches(
    vectors: Mapping[str, tuple[float, ...]], targets: Sequence[Target], index: BlockingIndex
) -> list[tuple[Hit, float]]:
    """The best matches over every target (searched with its own model's vector), each
    with the floor of its KB."""
    scored: list[tuple[Hit, float]] = []
    for target in targets:
        assert target.scope is not None  # noqa: S101 — guarded by check(); keeps mypy honest
        leg = Leg(
            kind=LegKind.DENSE,
            dense=vectors[target.model],
            limit=TOP_MATCHES,
            vector=target.vector,
        )
        result = index.query(target.collection, target.scope, [leg])
        scored.extend((hit, target.floor) for hit in result.legs[0])
    scored.sort(key=lambda pair: -pair[0].score)
    return scored[:TOP_MATCHES]


def _judge(position: int, text: str, hits: list[tuple[Hit, float]], default: float) -> _Verdict:
    if not hits:
        sentence = SentenceVerdict(position, text, Status.SKIPPED, None, 0)
        return _Verdict(Status.SKIPPED, None, default, 0, sentence)
    score = sum(hit.score for hit, _ in hits) / len(hits)
    floor = hits[0][1]  # the floor of the KB holding the best match
    status = Status.SUPPORTED if score >= floor else Status.FLAGGED
    sentence = SentenceVerdict(position, text, status, round(score, 6), len(hits))
    return _Verdict(status, round(score, 6), floor, len(hits), sentence)


def _combine(verdicts: Sequence[_Verdict], default_floor: float) -> Grounding:
    """Sentence mode: flagged if any sentence is; the score is the weakest sentence's."""
    judged = [v for v in verdicts if v.status is not Status.SKIPPED]
    sentences = [v.sentence for v in verdicts]
    if not judged:
        return Grounding(
            Status.SKIPPED, None, default_floor, 0, Reason.NO_MATCHES, sentences=sentences
        )
    weakest = min(judged, key=lambda v: (v.score or 0.0) - v.floor)
    status = Status.FLAGGED if any(v.status is Status.FLAGGED for v in judged) else Status.SUPPORTED
    return Grounding(
        status,
        weakest.score,
        weakest.floor,
        sum(v.matches for v in judged),
        None,
        sentences=sentences,
    )
