"""A document's own fields, a KB's schema of filterable fields, and the filter grammar.

Pure rules, no I/O: what a document's `metadata` may hold (`check_metadata`), what a KB
may declare (`check_schema`), and a turn's `filter` compiled against the schemas in force
into a `Narrowing` (`compile_filter`), which the Scope carries and each engine adapter
AND-s with the Scope's own conditions in its `_scope_filter`.

The grammar (JSON, after MongoDB's and Pinecone's):

    filter    := { clause, ... }                  every clause holds (AND)
    clause    := "$and": [filter, ...] | "$or": [filter, ...] | "$not": filter
               | <field>: <value>                 shorthand for {"$eq": <value>}
               | <field>: { <op>: <value>, ... }  every operator holds
    op        := $eq $ne $in $nin $gt $gte $lt $lte $exists

A field is a declared one (the KB's `metadata_fields`) or a built-in (`document_id`,
`knowledge_base_id`, `language`). `$gt $gte $lt $lte` apply to numbers and datetimes;
`$eq $ne $in $nin` to every type (on a list of strings: any item); `$exists` takes a
boolean. Bounds: `MAX_DEPTH` levels of `$and`/`$or`/`$not`, `MAX_CONDITIONS` field
conditions, `MAX_VALUES` values in one `$in`/`$nin`.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ingest.payload import (
    RESERVED_NAMES,
    AllOf,
    AnyOf,
    HasValue,
    IndexKind,
    InRange,
    IsAnyOf,
    Missing,
    Narrowing,
    NoneOf,
    PayloadKey,
    boolean_keyword,
    field_path,
    normalized_datetime,
)


class FieldType(enum.StrEnum):
    """A declared field's type."""

    STRING = "string"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATETIME = "datetime"
    STRING_LIST = "string_list"

    @property
    def index_kind(self) -> IndexKind:
        return _KIND[self]


_KIND = {
    FieldType.STRING: IndexKind.KEYWORD,
    FieldType.STRING_LIST: IndexKind.KEYWORD,
    FieldType.NUMBER: IndexKind.NUMBER,
    FieldType.BOOLEAN: IndexKind.BOOLEAN,
    FieldType.DATETIME: IndexKind.DATETIME,
}

#: A field name: a letter or underscore, then letters, digits, underscores (a dot would
#: reach into another path).
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Fields one KB may declare (each is a payload index in its collection).
MAX_DECLARED_FIELDS = 32
#: Fields one document may carry, a string's characters, a list's strings, and the
#: whole `metadata` object's encoded bytes.
MAX_DOCUMENT_FIELDS = 64
MAX_STRING_CHARS = 1024
MAX_LIST_ITEMS = 100
MAX_METADATA_BYTES = 16 * 1024
#: The largest number a field holds (every integer up to it is exact as a float).
MAX_NUMBER = 2**53
#: The filter grammar's bounds.
MAX_DEPTH = 6
MAX_CONDITIONS = 64
MAX_VALUES = 100

OPERATORS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists")
_RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")

#: Fields every KB has: names of payload keys a filter may narrow by (never the Scope's
#: tenant, org or clearance, which the key alone decides).
BUILT_IN_FIELDS: Mapping[str, str] = {
    "document_id": PayloadKey.DOCUMENT_ID.value,
    "knowledge_base_id": PayloadKey.KNOWLEDGE_BASE_ID.value,
    "language": PayloadKey.LANGUAGE.value,
}


_RESERVED_FOLDED = frozenset(name.lower() for name in RESERVED_NAMES)


class MetadataError(ValueError):
    """A document's fields, a schema or a filter breaks a rule; `field` names the input
    (`metadata.<name>`, `metadata_fields.<name>`, `filter.<name>`)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


Schema = Mapping[str, FieldType]


def check_field_name(name: str, where: str) -> None:
    """MetadataError unless `name` may name a document field."""
    if not FIELD_NAME.fullmatch(name):
        raise MetadataError(
            "a field name is a letter or _ then up to 63 letters, digits or _",
            field=f"{where}.{name}",
        )
    if name.lower() in _RESERVED_FOLDED:
        raise MetadataError(
            f"{name!r} is reserved: the payload contract uses it", field=f"{where}.{name}"
        )


def check_schema(declared: Mapping[str, str]) -> dict[str, FieldType]:
    """A KB's `metadata_fields` ({name: type}), checked: names, types, how many."""
    if len(declared) > MAX_DECLARED_FIELDS:
        raise MetadataError(
            f"at most {MAX_DECLARED_FIELDS} fields may be declared", field="metadata_fields"
        )
    schema: dict[str, FieldType] = {}
    for name, kind in declared.items():
        check_field_name(name, "metadata_fields")
        try:
            schema[name] = FieldType(kind)
        except ValueError:
            types = ", ".join(t.value for t in FieldType)
            raise MetadataError(
                f"unknown type {kind!r}; one of {types}", field=f"metadata_fields.{name}"
            ) from None
    return schema


def field_indexes(schema: Schema) -> dict[str, str]:
    """The payload indexes a schema's fields are searched by: {path: index kind}."""
    return {
        field_path(kind.index_kind, name): kind.index_kind.value for name, kind in schema.items()
    }


def schema_of(settings: Mapping[str, Any] | None) -> dict[str, FieldType]:
    """The schema a KB's stored settings declare (an unreadable entry is left out)."""
    declared = (settings or {}).get("metadata_fields") or {}
    if not isinstance(declared, Mapping):
        return {}
    return {
        name: FieldType(kind)
        for name, kind in declared.items()
        if isinstance(name, str) and kind in FieldType.__members__.values()
    }


def check_metadata(metadata: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """A document's fields, checked: names, value kinds, sizes, and each declared field's
    type (datetimes stored normalized). Undeclared fields are kept as given."""
    if len(metadata) > MAX_DOCUMENT_FIELDS:
        raise MetadataError(f"at most {MAX_DOCUMENT_FIELDS} fields per document", field="metadata")
    checked: dict[str, Any] = {}
    for name, value in metadata.items():
        check_field_name(name, "metadata")
        _check_value(name, value)
        declared = schema.get(name)
        checked[name] = value if declared is None else _typed(name, value, declared)
    if len(repr(checked).encode("utf-8")) > MAX_METADATA_BYTES:
        raise MetadataError(f"at most {MAX_METADATA_BYTES} bytes of fields", field="metadata")
    return checked


def _check_value(name: str, value: Any) -> None:
    where = f"metadata.{name}"
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise MetadataError(f"at most {MAX_STRING_CHARS} characters", field=where)
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise MetadataError(f"numbers must be finite, at most {MAX_NUMBER} across", field=where)
    elif isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS or not all(
            isinstance(item, str) and len(item) <= MAX_STRING_CHARS for item in value
        ):
            raise MetadataError(
                f"a list holds at most {MAX_LIST_ITEMS} strings of at most "
                f"{MAX_STRING_CHARS} characters",
                field=where,
            )
    else:
        raise MetadataError(
            "a field is a string, a number, a boolean, a datetime or a list of strings",
            field=where,
        )


def _typed(name: str, value: Any, declared: FieldType) -> Any:
    where = f"metadata.{name}"
    if declared is FieldType.DATETIME:
        moment = normalized_datetime(value) if isinstance(value, str) else None
        if moment is None:
            raise MetadataError("must be an RFC 3339 date or date-time", field=where)
        return moment
    if not _is_type(value, declared):
        raise MetadataError(f"must be a {declared.value}", field=where)
    return value


def _is_type(value: Any, declared: FieldType) -> bool:
    if declared is FieldType.STRING:
        return isinstance(value, str)
    if declared is FieldType.STRING_LIST:
        return isinstance(value, list)
    if declared is FieldType.BOOLEAN:
        return isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_moment(value: str, field: str) -> str:
    """An RFC 3339 date-time as stored (`normalized_datetime`), or MetadataError."""
    moment = normalized_datetime(value)
    if moment is None:
        raise MetadataError("must be an RFC 3339 date or date-time", field=field)
    return moment


# ---- validity in time ----------------------------------------------------------------


def valid_at(moment: str) -> Narrowing:
    """Documents in force at `moment` (normalized): none whose `validFrom` is after it or
    whose `validUntil` is at or before it (a document without them is always in force).
    Written as one exclusion of two ranges on indexed keys: the engine estimates it as
    keeping nearly everything, so a filter beside it still picks its own index."""
    since = PayloadKey.VALID_FROM.value
    until = PayloadKey.VALID_UNTIL.value
    return NoneOf(
        (AnyOf((InRange(since, gt=moment, dates=True), InRange(until, lte=moment, dates=True))),)
    )


#: Before every moment a document can carry.
_DAWN = "0001-01-01T00:00:00Z"


def dated() -> Narrowing:
    """Documents that carry a `validFrom` or a `validUntil` (as ranges over their indexes:
    an engine counts them from the indexes alone)."""
    return AnyOf(
        (
            InRange(PayloadKey.VALID_FROM.value, gte=_DAWN, dates=True),
            InRange(PayloadKey.VALID_UNTIL.value, gte=_DAWN, dates=True),
        )
    )


def expired_at(moment: str) -> Narrowing:
    """Documents whose validity ended at or before `moment`."""
    return InRange(PayloadKey.VALID_UNTIL.value, lte=moment, dates=True)


# ---- the filter grammar ----------------------------------------------------------------


@dataclass(slots=True)
class _Budget:
    conditions: int = 0


def compile_filter(document: Any, schema: Schema) -> Narrowing:
    """A turn's `filter` as a `Narrowing`, against the declared fields of `schema`;
    MetadataError naming the offending field, operator or bound."""
    return _compile_object(document, schema, depth=0, budget=_Budget(), where="filter")


def _compile_object(
    document: Any, schema: Schema, *, depth: int, budget: _Budget, where: str
) -> Narrowing:
    if depth > MAX_DEPTH:
        raise MetadataError(f"nested deeper than {MAX_DEPTH} levels", field=where)
    if not isinstance(document, Mapping) or not document:
        raise MetadataError("a filter is a non-empty object", field=where)
    parts = [
        _compile_clause(key, value, schema, depth=depth, budget=budget, where=where)
        for key, value in document.items()
    ]
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _compile_clause(
    key: Any, value: Any, schema: Schema, *, depth: int, budget: _Budget, where: str
) -> Narrowing:
    if not isinstance(key, str):
        raise MetadataError("keys are strings", field=where)
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value or len(value) > MAX_CONDITIONS:
            raise MetadataError(
                f"{key} takes a list of 1..{MAX_CONDITIONS} filters", field=f"{where}.{key}"
            )
        parts = tuple(
            _compile_object(item, schema, depth=depth + 1, budget=budget, where=f"{where}.{key}")
            for item in value
        )
        return AllOf(parts) if key == "$and" else AnyOf(parts)
    if key == "$not":
        inner = _compile_object(
            value, schema, depth=depth + 1, budget=budget, where=f"{where}.$not"
        )
        return NoneOf((inner,))
    if key.startswith("$"):
        raise MetadataError(f"unknown operator {key!r}", field=f"{where}.{key}")
    budget.conditions += 1
    if budget.conditions > MAX_CONDITIONS:
        raise MetadataError(f"at most {MAX_CONDITIONS} field conditions", field="filter")
    return _compile_field(key, value, schema)


@dataclass(frozen=True, slots=True)
class _Target:
    path: str
    kind: FieldType


def _target(name: str, schema: Schema) -> _Target:
    built_in = BUILT_IN_FIELDS.get(name)
    if built_in is not None:
        return _Target(built_in, FieldType.STRING)
    declared = schema.get(name)
    if declared is None:
        if name in RESERVED_NAMES:
            raise MetadataError(
                f"{name!r} is reserved: the key decides it, a filter cannot",
                field=f"filter.{name}",
            )
        raise MetadataError(
            f"{name!r} is not a declared field of the knowledge bases queried",
            field=f"filter.{name}",
        )
    return _Target(field_path(declared.index_kind, name), declared)


def _compile_field(name: str, condition: Any, schema: Schema) -> Narrowing:
    target = _target(name, schema)
    where = f"filter.{name}"
    if not isinstance(condition, Mapping):
        return _equals(target, condition, where)
    if not condition:
        raise MetadataError("a condition needs an operator", field=where)
    parts: list[Narrowing] = []
    bounds: dict[str, float | str] = {}
    for operator, value in condition.items():
        if operator not in OPERATORS:
            raise MetadataError(f"unknown operator {operator!r}", field=f"{where}.{operator}")
        if operator in _RANGE_OPERATORS:
            bounds[operator[1:]] = _bound(target, value, f"{where}.{operator}")
        elif operator == "$exists":
            if not isinstance(value, bool):
                raise MetadataError("$exists takes true or false", field=f"{where}.$exists")
            parts.append(HasValue(target.path) if value else Missing(target.path))
        elif operator in ("$eq", "$ne"):
            equal = _equals(target, value, f"{where}.{operator}")
            parts.append(equal if operator == "$eq" else NoneOf((equal,)))
        else:
            one_of = _one_of(target, value, f"{where}.{operator}")
            parts.append(one_of if operator == "$in" else NoneOf((one_of,)))
    if bounds:
        parts.append(
            InRange(
                target.path,
                gt=bounds.get("gt"),
                gte=bounds.get("gte"),
                lt=bounds.get("lt"),
                lte=bounds.get("lte"),
                dates=target.kind is FieldType.DATETIME,
            )
        )
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _scalar(target: _Target, value: Any, where: str) -> str | float:
    """One value compared with the field, of its type."""
    kind = target.kind
    if kind in (FieldType.STRING, FieldType.STRING_LIST):
        if not isinstance(value, str) or len(value) > MAX_STRING_CHARS:
            raise MetadataError(
                f"the field is a {kind.value}: compare it with a string", field=where
            )
        return value
    if kind is FieldType.BOOLEAN:
        if not isinstance(value, bool):
            raise MetadataError(
                "the field is a boolean: compare it with true or false", field=where
            )
        return boolean_keyword(value)
    if kind is FieldType.DATETIME:
        moment = normalized_datetime(value) if isinstance(value, str) else None
        if moment is None:
            raise MetadataError(
                "the field is a datetime: compare it with an RFC 3339 date-time", field=where
            )
        return moment
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or abs(value) > MAX_NUMBER
    ):
        raise MetadataError("the field is a number: compare it with a number", field=where)
    return float(value)


def _equals(target: _Target, value: Any, where: str) -> Narrowing:
    found = _scalar(target, value, where)
    if isinstance(found, str) and target.kind is not FieldType.DATETIME:
        return IsAnyOf(target.path, (found,))
    dates = target.kind is FieldType.DATETIME
    return InRange(target.path, gte=found, lte=found, dates=dates)


def _one_of(target: _Target, values: Any, where: str) -> Narrowing:
    if not isinstance(values, list) or not values or len(values) > MAX_VALUES:
        raise MetadataError(f"takes a list of 1..{MAX_VALUES} values", field=where)
    matched = [_scalar(target, value, where) for value in values]
    keywords = tuple(value for value in matched if isinstance(value, str))
    if target.kind is not FieldType.DATETIME and len(keywords) == len(matched):
        return IsAnyOf(target.path, keywords)
    return AnyOf(tuple(_equals(target, value, where) for value in values))


def _bound(target: _Target, value: Any, where: str) -> float | str:
    if target.kind not in (FieldType.NUMBER, FieldType.DATETIME):
        raise MetadataError(
            f"the field is a {target.kind.value}: ranges apply to numbers and datetimes",
            field=where,
        )
    return _scalar(target, value, where)
