"""HTML form fields -> the JSON API's request Structs, with the API's own rules.

A form sends strings only. Each value is read as the JSON scalar it spells
("5" -> 5, "0.4" -> 0.4, "true" -> true) or kept as the string it is, and an empty
field means "not set". The result is converted with `msgspec.convert(strict=True)`
into the same Struct the JSON API decodes (`gateway.http.schemas`), so a value
the API refuses with 422 is refused here with the same message, shown at its field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from gateway.errors import GatewayError

S = TypeVar("S", bound=msgspec.Struct)

_AT = re.compile(r"\s+-\s+at\s+`\$\.?([^`]*)`$")
_TOP = re.compile(r"[.\[]")
_UNKNOWN = re.compile(r"unknown field `([^`]+)`")
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
            errors[(fields or {}).get(path, top or FORM)] = message.replace("`", "")
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
    unknown = _UNKNOWN.search(message)
    return (unknown.group(1) if unknown else ""), message


def domain_errors(error: GatewayError, default_field: str = FORM) -> FormErrors:
    """A core-function refusal (e.g. an unknown KB, a bad id) as a form error."""
    return FormErrors({error.field or default_field: error.message})
