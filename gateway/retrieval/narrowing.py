"""What a turn keeps of each KB's Scope: the agent's default filter, the turn's `filter`
and validity as of `as_of` (`ingest.metadata`), compiled against the queried KBs'
schemas and carried by the Scope, so every engine call of the turn is narrowed by them
inside the Scope (`_scope_filter` AND-s them with tenant, KBs, clearance and org).

A field must be declared by at least one KB the turn queries; in a KB that declares it
too, its own type is used. A filter that names an undeclared or reserved field, uses a
wrong type or breaks a bound is refused before anything is searched (422 naming it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from gateway.errors import InvalidInputError
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.language import restriction
from ingest.index import Index
from ingest.metadata import (
    FieldType,
    MetadataError,
    check_moment,
    compile_filter,
    dated,
    expired_at,
    schema_of,
    valid_at,
)
from ingest.payload import AllOf, Narrowing, Scope

T = TypeVar("T")

#: The agent setting that holds its default filter.
AGENT_FILTER = "filter"


def checked_metadata(check: Callable[[], T]) -> T:
    """`check()`'s answer; its MetadataError as InvalidInputError naming the field."""
    try:
        return check()
    except MetadataError as error:
        raise InvalidInputError(str(error), field=error.field) from None


def queried_schema(plans: Sequence[KbPlan]) -> dict[str, FieldType]:
    """Every field the queried KBs declare (the first KB's type where two differ)."""
    merged: dict[str, FieldType] = {}
    for plan in reversed(plans):
        merged.update(schema_of(plan.kb.settings))
    return merged


def check_agent_filter(document: Any, schemas: Sequence[Mapping[str, Any] | None]) -> None:
    """An agent's default filter against its KBs' settings: InvalidInputError naming the
    field (`filter.<name>`) unless it compiles."""
    merged: dict[str, FieldType] = {}
    for settings in reversed(schemas):
        merged.update(schema_of(settings))
    checked_metadata(lambda: compile_filter(document, merged))


@dataclass(frozen=True, slots=True)
class TurnNarrowing:
    """A turn's moment and, per KB, the filters it applies (None: no filter)."""

    as_of: str
    filters: Mapping[str, Narrowing | None]

    def in_force(self, plan: KbPlan, *, dated: bool = True) -> KbPlan:
        """The plan searching only what its filters keep of the documents in force
        (`dated`: its Scope holds documents with a validity; without any, every document
        is in force and the plan carries no validity condition)."""
        validity = valid_at(self.as_of) if dated else None
        narrowing = _and(self.filters.get(plan.kb.kb_id), validity)
        return dataclasses.replace(plan, scope=plan.scope.narrowed(narrowing))

    async def applied(self, index: Index, plans: Sequence[KbPlan]) -> list[KbPlan]:
        """Each plan narrowed (`in_force`), after one count per plan of the documents with
        a validity in its Scope (counted from the validity keys' indexes alone: the
        condition would cost a filtered search more than the count does)."""
        narrowed = []
        for plan in plans:
            holding = await index.count(plan.collection, plan.scope.unnarrowed.narrowed(dated()))
            narrowed.append(self.in_force(plan, dated=holding > 0))
        return narrowed

    def dated(self, plan: KbPlan) -> bool:
        """Whether the (narrowed) plan carries the turn's validity condition."""
        found, validity = plan.scope.narrowing, valid_at(self.as_of)
        return found == validity or (isinstance(found, AllOf) and validity in found.parts)

    def expired(self, plan: KbPlan) -> Scope:
        """What the plan's filters keep of its documents whose validity has ended."""
        narrowing = _both(self.filters.get(plan.kb.kb_id), expired_at(self.as_of))
        return plan.scope.unnarrowed.narrowed(narrowing)


def turn_narrowing(
    plans: Sequence[KbPlan],
    *,
    agent_filter: Any,
    asked_filter: Any,
    as_of: str | None,
) -> TurnNarrowing:
    """The filters compiled for each queried KB, and the turn's moment (now when not
    asked). InvalidInputError naming the field for a filter or moment that breaks a rule."""
    moment = (
        datetime.now(UTC).isoformat().replace("+00:00", "Z")
        if as_of is None
        else checked_metadata(lambda: check_moment(as_of, "as_of"))
    )
    merged = queried_schema(plans)
    filters: dict[str, Narrowing | None] = {}
    for plan in plans:
        schema = {**merged, **schema_of(plan.kb.settings)}
        compiled = [
            _compiled(document, schema)
            for document in (agent_filter, asked_filter)
            if document is not None
        ]
        language = restriction(plan.kb.settings)
        if language is not None:
            compiled.append(language)
        filters[plan.kb.kb_id] = (
            None if not compiled else compiled[0] if len(compiled) == 1 else AllOf(tuple(compiled))
        )
    if not plans:  # nothing to search: still refuse a filter no KB could declare
        for document in (agent_filter, asked_filter):
            if document is not None:
                _compiled(document, {})
    return TurnNarrowing(as_of=moment, filters=filters)


def _compiled(document: Any, schema: Mapping[str, FieldType]) -> Narrowing:
    return checked_metadata(lambda: compile_filter(document, schema))


def _both(first: Narrowing | None, second: Narrowing) -> Narrowing:
    return second if first is None else AllOf((first, second))


def _and(first: Narrowing | None, second: Narrowing | None) -> Narrowing | None:
    return first if second is None else _both(first, second)
