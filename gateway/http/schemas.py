"""The bodies every area of the HTTP contract shares: msgspec Structs, strict (unknown
fields are refused).

The strict base of request bodies, problem details, the field types several areas take
(ids, moments, filters), a setting in force and where it came from, and health. Each
area's own bodies sit beside this module (`*_schemas.py`).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every request body: unknown fields are an error, not silently dropped."""


class ProblemDetails(msgspec.Struct, kw_only=True, omit_defaults=True):
    """RFC 9457 problem details: the body of every error kbgate answers."""

    status: int
    title: str
    detail: str | None = None
    #: the offending input field (400, 404, 409, 413, 422)
    field: str | None = None
    #: what is unavailable (503): index, store or embedder
    dependency: str | None = None


Identifier = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
#: an RFC 3339 date or date-time (`2026-05-01`, `2026-05-01T12:00:00Z`; no offset: UTC)
Moment = Annotated[str, msgspec.Meta(min_length=10, max_length=40)]

#: A filter on document fields (`ingest.metadata`): an object whose keys are field names
#: (declared in the queried KBs' `metadata_fields`, or `document_id`,
#: `knowledge_base_id`, `language`) or `$and` / `$or` (a list of filters) / `$not` (a
#: filter); a field's value is a value to equal, or an object of operators, all of which
#: must hold: `$eq $ne $in $nin` (every type; on a list of strings: any item), `$gt $gte
#: $lt $lte` (numbers, datetimes as RFC 3339), `$exists` (true, false). At most 6 levels
#: of `$and`/`$or`/`$not`, 64 field conditions, 100 values in one `$in`/`$nin`. It narrows
#: the turn inside what the key may see (tenant, KBs, clearance, org): it never widens it.
#: An undeclared or reserved field, a wrong type or an unknown operator answers 422 naming
#: it (`field`: `filter.<name>`).
Filter = Annotated[
    dict[str, Any],
    msgspec.Meta(
        description="a filter on document fields: {field: value | {$op: value}}, "
        "$and/$or/$not; operators $eq $ne $in $nin $gt $gte $lt $lte $exists",
        examples=[{"region": "eu", "year": {"$gte": 2024}, "$or": [{"tags": "pumps"}]}],
    ),
]


# ---- a setting in force ------------------------------------------------------------


class EffectiveFlag(msgspec.Struct, kw_only=True):
    value: bool
    source: str
    clamped: bool = False


class EffectiveCount(msgspec.Struct, kw_only=True):
    value: int
    source: str
    clamped: bool = False


class EffectiveNumber(msgspec.Struct, kw_only=True):
    value: float
    source: str
    clamped: bool = False


class FusionWeights(msgspec.Struct, kw_only=True):
    dense: float
    keyword: float


# ---- health ------------------------------------------------------------------------


class Live(msgspec.Struct, kw_only=True):
    status: str


class Ready(msgspec.Struct, kw_only=True):
    status: str
    dependencies: dict[str, dict[str, Any]]
