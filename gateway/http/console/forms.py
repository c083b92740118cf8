"""HTML form fields -> the JSON API's request Structs, with the API's own rules.

A form sends strings only. Each value is read as the JSON scalar it spells
("5" -> 5, "0.4" -> 0.4, "true" -> true) or kept as the string it is, and an empty
field means "not set". The result is converted with `msgspec.convert(strict=True)`
into the same Struct the JSON API decodes (`gateway.http.*_schemas`), so a value
the API refuses with 422 is refused here by the same rule, shown at its field in
plain words ("must be at least 1" for the decoder's "Expected `int` >= 1").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from gateway.errors import GatewayError

S = TypeVar("S", bound=msgspec.Struct)

_AT = re.compile(r"\s+-\s+at\s+`\$\.?([^`]*)`$")
_TOP = re.compile(r"[.\[]")
_UNKNOWN = re.compile(r"unknown field `([^`]+)`")
_MISSING = re.compile(r"missing required field `([^`]+)`")
_WRONG_TYPE = re.compile(r"^Expected `([a-z]+)( \| null)?`, got `[a-z]+`$")
_BOUND = re.compile(r"^Expected `([a-z]+)` (>=|>|<=|<) (-?[0-9.e+-]+)$")
_LENGTH = re.compile(r"^Expected `([a-z]+)` of length (>=|<=) ([0-9]+)$")
_KINDS = {
    "int": "a whole number, such as 5",
    "float": "a number, such as 0.4",
    "bool": "on or off",
    "str": "text",
    "array": "a list",
    "object": "a group of fields",
}
_BOUNDS = {">=": "at least", ">": "more than", "<=": "at most", "<": "less than"}
#: The whole form, when an error names no field.
FORM = "form"


def scalar(raw: str | None) -> Any:
    """A form value as the JSON scalar it spells; None when empty; else the string itself."""
    if raw is None or not raw.strip():
        return None
    try:
        value = msgspec.json.decode(raw.strip())
    except (msgspec.DecodeError, RecursionError):  # not JSON, or nested past decoding
        return raw
    if value is None or isinstance(value, bool | int | float):
        return value
    return raw


class FormErrors(Exception):
    """Field name -> message, for every field a form got wrong."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__(", ".join(errors))
        self.errors = dict(errors)


def convert(
    struct_type: type[S], values: Mapping[str, Any], *, fields: Mapping[str, str] | None = None
) -> S:
    """`values` as a `struct_type`, strictly; FormErrors naming every offending field.

    msgspec reports one error at a time: the offending value is dropped and the
    conversion retried, so the form shows all its errors at once. `fields` maps an
    error path ("fusion.dense") to the form field that holds it ("fusion_dense").
    """
    remaining = dict(values)
    errors: dict[str, str] = {}
    while True:
        try:
            converted = msgspec.convert(remaining, type=struct_type, strict=True)
        except msgspec.ValidationError as error:
            path, message = _split(str(error))
            top = _TOP.split(path, maxsplit=1)[0]
            errors[(fields or {}).get(path, top or FORM)] = plain(message)
            if top and top in remaining:
                del remaining[top]
                continue
            raise FormErrors(errors) from None
        if errors:
            raise FormErrors(errors)
        return converted


def _split(message: str) -> tuple[str, str]:
    at = _AT.search(message)
    if at:
        return at.group(1), message[: at.start()]
    named = _UNKNOWN.search(message) or _MISSING.search(message)
    return (named.group(1) if named else ""), message


def plain(message: str) -> str:
    """A decoder's message about one value, in words an admin reads at the field."""
    for pattern, words in _PLAIN:
        found = pattern.search(message)
        if found:
            return words(found)
    return message.replace("`", "")


def _wrong_type(found: re.Match[str]) -> str:
    kind = _KINDS.get(found.group(1), found.group(1))
    return f"must be {kind}" + (", or left empty" if found.group(2) else "")


def _bound(found: re.Match[str]) -> str:
    return f"must be {_BOUNDS[found.group(2)]} {found.group(3).removesuffix('.0')}"


def _length(found: re.Match[str]) -> str:
    kind, bound, limit = found.group(1), found.group(2), int(found.group(3))
    unit = "characters" if kind == "str" else "items"
    if bound == ">=" and limit == 1:
        return "must not be empty" if kind == "str" else "must list at least one"
    if bound == ">=":
        return f"must have at least {limit} {unit}"
    return f"must have at most {limit} {unit}"


def domain_errors(error: GatewayError, default_field: str = FORM) -> FormErrors:
    """A core-function refusal (e.g. an unknown KB, a bad id) as a form error."""
    return FormErrors({error.field or default_field: error.message})


def form_errors(error: FormErrors | GatewayError) -> FormErrors:
    """A form's refusal as it is, or a core-function refusal as a form error."""
    return error if isinstance(error, FormErrors) else domain_errors(error)


#: decoder messages (by pattern) and their plain words; the first match wins
_PLAIN: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_WRONG_TYPE, _wrong_type),
    (_BOUND, _bound),
    (_LENGTH, _length),
    (re.compile("^Invalid enum value"), lambda _: "is not one of the allowed values"),
    (
        re.compile("matching regex"),
        lambda _: "may hold only letters, digits and ._:@/- (starting with a letter or digit)",
    ),
    (_MISSING, lambda _: "must be filled in"),
    (_UNKNOWN, lambda _: "is not a field of this form"),
)
