"""Strict request bodies: JSON types are taken as sent, never coerced.

Litestar converts bodies leniently (the string "5" becomes 5, the number 0
becomes False). Before a handler runs, every body declared as a `Strict` Struct
is decoded again with msgspec in strict mode; a mismatch is a 422 naming the field.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import ValidationException

from gateway.routes.schemas import Strict

_PATH = re.compile(r"at `\$\.?([^`]*)`")


async def enforce_strict_body(request: Request[Any, Any, Any]) -> None:
    """A `before_request` hook: re-decode `data` strictly, raise on any coercion."""
    parameter = request.route_handler.parsed_fn_signature.parameters.get("data")
    body_type = getattr(parameter, "annotation", None)
    if not (isinstance(body_type, type) and issubclass(body_type, Strict)):
        return
    try:
        msgspec.json.decode(await request.body(), type=body_type, strict=True)
    except msgspec.ValidationError as error:
        message = str(error)
        path = _PATH.search(message)
        key = path.group(1) if path and path.group(1) else "data"
        raise ValidationException(
            detail="Validation failed",
            extra=[{"message": message, "key": key, "source": "body"}],
        ) from None
    except msgspec.DecodeError:
        return  # malformed JSON: Litestar's own decoding answers 400
