"""The policy step of redaction: which of a text's stored spans a workspace replaces,
made disjoint, and with what (`gateway.safety.redaction` finds the spans).

The spans of the types the workspace redacts (`pii_entities`) whose value its
allow-list (`pii_allow_list`) does not keep are made disjoint (`resolve_overlaps`) and
each is replaced by its type's operator (`pii_operators`, `gateway.safety.operators`).
No recognizer runs here: a turn applies the policy to stored spans in microseconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from gateway.safety.operators import Operators
from gateway.safety.recognizers import NER_ENTITIES
from gateway.safety.spans import Detection, Span
from gateway.telemetry import Telemetry
from ingest.payload import PiiSpan
from settings.pii_allow_list import NO_ALLOW_LIST, AllowList


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted text and how many spans of each entity type were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        return bool(self.counts)


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """What a workspace redacts: these entity types, except values its allow-list keeps;
    and how (`operators`)."""

    entities: frozenset[str]
    allow: AllowList = NO_ALLOW_LIST
    operators: Operators = field(kw_only=True)

    def select(self, text: str, spans: Iterable[Span]) -> list[Detection]:
        """The disjoint spans of `text` to replace, in text order.

        Pattern recognizers (which check what they find) win over the NER model where
        they overlap: a name, place or organisation keeps only what lies outside them.
        """
        kept = [
            span
            for span in spans
            if span.entity_type in self.entities
            and not (self.allow and self.allow.allows(text[span.start : span.end]))
        ]
        if not kept:
            return []
        patterns = resolve_overlaps(text, [s for s in kept if s.entity_type not in NER_ENTITIES])
        taken = [(d.start, d.end) for d in patterns]
        names = [
            Detection(start, end, d.entity_type, d.score)
            for d in resolve_overlaps(text, [s for s in kept if s.entity_type in NER_ENTITIES])
            for start, end in uncovered(d.start, d.end, taken)
            if any(ch.isalnum() for ch in text[start:end])
        ]
        return sorted([*patterns, *names], key=lambda d: d.start)

    def apply(self, text: str, spans: Iterable[Span]) -> Redaction:
        """`text` with each selected span replaced by its type's operator (presidio-
        anonymizer); a text with nothing selected is returned as it is, unanonymized."""
        detections = self.select(text, spans)
        if not detections:
            return Redaction(text, {})
        counts = Counter(detection.entity_type for detection in detections)
        return Redaction(self.operators.replace(text, detections), dict(sorted(counts.items())))


def count_redactions(telemetry: Telemetry, counts: dict[str, int]) -> None:
    """Telemetry gets how many of each entity type were replaced, never what."""
    for entity_type, amount in counts.items():
        telemetry.count(f"redacted_{entity_type}", amount)


def spans_of(found: Iterable[Span]) -> tuple[PiiSpan, ...]:
    """Analyzer results as stored spans: overlapping results of one type merged into their
    union, sorted by position; results of different types may overlap (the policy settles
    them once it knows which types it redacts)."""
    merged = _merge_same_type(
        [Detection(r.start, r.end, r.entity_type, round(float(r.score), 2)) for r in found]
    )
    return tuple(
        PiiSpan(d.start, d.end, d.entity_type, d.score)
        for d in sorted(merged, key=lambda d: (d.start, d.end, d.entity_type))
    )


def resolve_overlaps(text: str, found: Iterable[Span]) -> list[Detection]:
    """Make analyzer results disjoint so every character is replaced at most once.

    Overlapping results of one type merge into their union; a result inside another
    is dropped (the outer one covers it); where two results still overlap, the higher
    score keeps the overlap and the other keeps what is left of it, if that holds a
    letter or digit. The union of what was detected is always covered.
    """
    merged = _merge_same_type(
        [Detection(r.start, r.end, r.entity_type, float(r.score)) for r in found]
    )
    outermost = [
        d
        for d in merged
        if not any(_contains(other, d) and _outranks(other, d) for other in merged if other != d)
    ]
    taken: list[tuple[int, int]] = []
    kept: list[Detection] = []
    for d in sorted(outermost, key=lambda d: (-d.score, d.start - d.end, d.start, d.entity_type)):
        for start, end in uncovered(d.start, d.end, taken):
            if any(ch.isalnum() for ch in text[start:end]):
                kept.append(Detection(start, end, d.entity_type, d.score))
        taken.append((d.start, d.end))
    return sorted(kept, key=lambda d: d.start)


def _merge_same_type(spans: list[Detection]) -> list[Detection]:
    merged: list[Detection] = []
    for d in sorted(spans, key=lambda d: (d.entity_type, d.start, d.end)):
        last = merged[-1] if merged else None
        if last is not None and last.entity_type == d.entity_type and d.start < last.end:
            merged[-1] = Detection(
                last.start, max(last.end, d.end), d.entity_type, max(last.score, d.score)
            )
        else:
            merged.append(d)
    return merged


def _contains(outer: Detection, inner: Detection) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _outranks(outer: Detection, inner: Detection) -> bool:
    """Strictly longer wins; the same span goes to the higher score, then the type name."""
    if (outer.start, outer.end) != (inner.start, inner.end):
        return True
    return (outer.score, inner.entity_type) > (inner.score, outer.entity_type)


def uncovered(start: int, end: int, taken: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces = [(start, end)]
    for t_start, t_end in taken:
        next_pieces: list[tuple[int, int]] = []
        for p_start, p_end in pieces:
            if t_end <= p_start or p_end <= t_start:
                next_pieces.append((p_start, p_end))
                continue
            if p_start < t_start:
                next_pieces.append((p_start, t_start))
            if t_end < p_end:
                next_pieces.append((t_end, p_end))
        pieces = next_pieces
    return pieces
