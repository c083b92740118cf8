"""What a found entity is to the code that selects and replaces it: the protocol every
finding reads as, and the detections kbgate makes of them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol


class Span(Protocol):
    """A found entity, as presidio's results, stored spans and detections all read:
    [start, end) of a text, its entity type and the recognizer's score."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def entity_type(self) -> str: ...

    @property
    def score(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Detection:
    """One span to replace: [start, end) of the input text, and the recognizer that found
    it (where known)."""

    start: int
    end: int
    entity_type: str
    score: float
    recognizer: str = ""


def overlaps_any(span: Span, others: Iterable[tuple[int, int]]) -> bool:
    """Whether `span` overlaps one of the [start, end) ranges `others`."""
    return any(span.start < end and start < span.end for start, end in others)


def recognizer_of(result: Any) -> str:
    """The name of the recognizer that found `result` (a presidio result or a Detection)."""
    if isinstance(result, Detection):
        return result.recognizer
    return str((result.recognition_metadata or {}).get("recognizer_name", ""))
