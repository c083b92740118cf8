"""What both Index adapters do alike, whatever the engine: point ids, vector checks,
reading points back, and paging through a scroll.

Nothing here names an engine's types: points are read through `StoredPoint` and
`ScoredPoint`, which both engines' records and scored points satisfy.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ingest.index import Hit, RankedPoint, SparseVector, StoredPassage
from ingest.payload import from_payload, ref_from_payload

Item = TypeVar("Item")

#: Points read per page while scrolling.
SCROLL_PAGE = 256


class StoredPoint(Protocol):
    """A point as an engine returns it: its id and (when asked for) its payload."""

    @property
    def id(self) -> object: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...


class ScoredPoint(StoredPoint, Protocol):
    """A point found by a search, with its score."""

    @property
    def score(self) -> float: ...


def checked_point_id(value: str) -> str:
    """The canonical form of a point id; point ids are UUIDs, anything else is a caller bug."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(f"point ids must be UUIDs, got {value!r}") from None


def dense_values(vector: Sequence[float], dimensions: int) -> list[float]:
    """A dense vector's values, refused unless it has the collection's `dimensions`."""
    if len(vector) != dimensions:
        raise ValueError(f"dense vector has {len(vector)} dimensions, not {dimensions}")
    return list(vector)


def sparse_values(vector: SparseVector) -> tuple[list[int], list[float]]:
    """A sparse vector's (indices, values), refused unless they pair up."""
    if len(vector.indices) != len(vector.values):
        raise ValueError("a sparse vector needs as many values as indices")
    return list(vector.indices), list(vector.values)


def hit(point: ScoredPoint) -> Hit:
    return Hit(str(point.id), point.score, from_payload(point.payload or {}))


def ranked_point(point: ScoredPoint) -> RankedPoint:
    return RankedPoint(str(point.id), point.score, ref_from_payload(point.payload or {}))


def stored_passages(records: Iterable[StoredPoint]) -> list[StoredPassage]:
    """Scrolled points with their payloads, ordered by passage index (then point id)."""
    passages = [StoredPassage(str(r.id), from_payload(r.payload or {})) for r in records]
    return sorted(passages, key=lambda p: (p.payload.passage_index, p.point_id))


def scroll_all(read_page: Callable[[Any], tuple[Sequence[Item], Any]]) -> list[Item]:
    """Every item of a scroll: `read_page(offset)` returns a page and the next page's
    offset (None after the last), starting from None. The offset is the engine's own,
    handed back as it came."""
    items: list[Item] = []
    offset: Any = None
    while True:
        page, offset = read_page(offset)
        items.extend(page)
        if offset is None:
            return items
