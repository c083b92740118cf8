"""Strict request bodies: JSON types are taken as sent, never coerced.

Litestar converts bodies leniently (the string "5" becomes 5, the number 0
becomes False). Before a handler runs, every body declared as a `Strict` Struct
is decoded again with msgspec in strict mode; a mismatch is a 422 naming the field.
So is a body nested too deeply to decode (msgspec stops at the recursion limit): that
check runs before Litestar's own decoding, which would fail on it with a 500.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import ValidationException

from gateway.http.schemas import Strict

_PATH = re.compile(r"at `\$\.?([^`]*)`")
#: Bodies nesting deeper than this are refused (422) before Litestar reads them: well
#: below the depth at which msgspec stops at the interpreter's recursion limit, so the
#: bound does not depend on how deep the stack happens to be.
MAX_BODY_DEPTH = 200
TOO_DEEP = f"the body nests JSON deeper than {MAX_BODY_DEPTH} levels"


async def enforce_strict_body(request: Request[Any, Any, Any]) -> None:
    """A `before_request` hook: re-decode `data` strictly, raise on any coercion."""
    parameter = request.route_handler.parsed_fn_signature.parameters.get("data")
    body_type = getattr(parameter, "annotation", None)
    if not (isinstance(body_type, type) and issubclass(body_type, Strict)):
        return
    try:
        body = msgspec.json.decode(await request.body(), type=body_type, strict=True)
    except RecursionError:
        # msgspec decodes nested values recursively and gives up at the interpreter's
        # recursion limit: such a body cannot be decoded at all, whatever its type.
        raise _too_deep() from None
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
    if _nesting_depth(body) > MAX_BODY_DEPTH:
        raise _too_deep()


def _too_deep() -> ValidationException:
    return ValidationException(
        detail="Validation failed",
        extra=[{"message": TOO_DEEP, "key": "data", "source": "body"}],
    )


def _nesting_depth(value: Any) -> int:
    """How deeply `value` nests objects and arrays (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, msgspec.Struct):
            children: Any = msgspec.structs.astuple(node)
        elif isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest
