"""What a found entity is to the code that selects and replaces it."""

from __future__ import annotations

from typing import Protocol


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
