"""A Scope's narrowing (a turn's filters, validity and language restriction,
`ingest.payload.Narrowing`) as a Qdrant Edge condition: a part of the Scope's filter,
which `ingest.engines.edge.engine._scope_filter` alone builds and AND-s it into."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qdrant_edge import (
    FieldCondition,
    Filter,
    IsEmptyCondition,
    MatchAny,
    RangeDateTime,
    RangeFloat,
)

from ingest.payload import AllOf, AnyOf, HasValue, InRange, IsAnyOf, Missing, Narrowing, NoneOf

if TYPE_CHECKING:
    from qdrant_edge import ConditionType


def narrowing_condition(node: Narrowing) -> ConditionType:
    """A Scope's narrowing as an Edge condition; `_scope_filter` (`engine.py`) AND-s it
    with the Scope's own conditions, the only caller."""
    match node:
        case AllOf(parts):
            return Filter(must=[narrowing_condition(part) for part in parts])
        case AnyOf(parts):
            return Filter(should=[narrowing_condition(part) for part in parts])
        case NoneOf(parts):
            return Filter(must_not=[narrowing_condition(part) for part in parts])
    return _field_test(node)


def _field_test(node: Narrowing) -> ConditionType:
    match node:
        case HasValue(path):
            return Filter(must_not=[IsEmptyCondition(key=path)])
        case Missing(path):
            return IsEmptyCondition(key=path)
        case IsAnyOf(path, values):
            return FieldCondition(key=path, match=MatchAny(list(values)))
        case InRange(path, gt, gte, lt, lte, dates):
            if dates:
                moments = RangeDateTime(gt=_text(gt), gte=_text(gte), lt=_text(lt), lte=_text(lte))
                return FieldCondition(key=path, range=moments)
            numbers = RangeFloat(gt=_number(gt), gte=_number(gte), lt=_number(lt), lte=_number(lte))
            return FieldCondition(key=path, range=numbers)
    raise ValueError(f"not a narrowing: {node!r}")  # pragma: no cover - every kind above


def _text(value: float | str | None) -> str | None:
    return None if value is None else str(value)


def _number(value: float | str | None) -> float | None:
    return None if value is None else float(value)
