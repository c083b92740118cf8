"""Write `kbgate_client`'s models and operations from kbgate's OpenAPI document.

    python clients/python/codegen.py openapi.json models      > src/kbgate_client/models.py
    python clients/python/codegen.py openapi.json operations  > src/kbgate_client/operations.py
    python clients/python/codegen.py src/kbgate_client/_async_client.py sync \
        > src/kbgate_client/_sync_client.py

Each component schema becomes a msgspec Struct (request bodies keep unsent fields unset;
responses are frozen, with absent fields None), each operation an `Operation` naming its
method, path, body and answer; the synchronous client is the asynchronous one with its
`async` and `await` taken out. The test suite runs this on the document a gateway serves
and compares the output with the committed files (`ruff format`ted), so the client and the
document cannot drift. Standard library only.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REF = "#/components/schemas/"
JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
METHODS = ("get", "put", "post", "patch", "delete")
#: the NDJSON line of a bulk write has no component of its own in the document
BULK_LINE = "BulkDocument"


class Schemas:
    """The document's component schemas, and which of them requests use."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.components: dict[str, Any] = dict(document["components"]["schemas"])
        for operation in operations(document):
            line = _ndjson_request(operation)
            if line is not None:
                self.components[BULK_LINE] = line
        self.requests = self._reachable(
            schema for operation in operations(document) for schema in _request_schemas(operation)
        )

    def _reachable(self, roots: Iterator[Any]) -> set[str]:
        found: set[str] = set()
        pending = list(roots)
        while pending:
            schema = pending.pop()
            for name in _refs(schema):
                if name not in found:
                    found.add(name)
                    pending.append(self.components[name])
            if isinstance(schema, dict) and "allOf" in schema:
                found.add(BULK_LINE)
        return found


def operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield {**item[method], "method": method.upper(), "path": path}


def _ndjson_request(operation: dict[str, Any]) -> Any:
    content = (operation.get("requestBody") or {}).get("content", {})
    return content.get("application/x-ndjson", {}).get("schema")


def _request_schemas(operation: dict[str, Any]) -> Iterator[Any]:
    for media in (operation.get("requestBody") or {}).get("content", {}).values():
        yield media.get("schema")


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.removeprefix(REF)
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def annotation(schema: dict[str, Any]) -> str:  # noqa: PLR0911 — one return per JSON Schema form
    """The Python type of a property schema."""
    if "$ref" in schema:
        return str(schema["$ref"]).removeprefix(REF)
    if "oneOf" in schema:
        members = [annotation(member) for member in schema["oneOf"]]
        return " | ".join(dict.fromkeys(members))
    kind = schema.get("type")
    if isinstance(kind, list):
        members = [annotation({**schema, "type": each}) for each in kind]
        return " | ".join(sorted(set(members), key=lambda member: member == "None"))
    if kind == "null" or ("enum" in schema and schema["enum"] == [None]):
        return "None"
    if "enum" in schema:
        values = [value for value in schema["enum"] if value is not None]
        return "Literal[" + ", ".join(json.dumps(value) for value in values) + "]"
    if kind == "array":
        return f"list[{annotation(schema.get('items', {}))}]"
    if kind == "object" or "additionalProperties" in schema:
        values = schema.get("additionalProperties", {})
        return f"dict[str, {annotation(values if isinstance(values, dict) else {})}]"
    if kind in JSON_TYPES:
        return JSON_TYPES[kind]
    return "Any"


def _default(value: Any) -> str:
    if isinstance(value, list | dict):
        factory = "list" if isinstance(value, list) else "dict"
        if value:
            raise ValueError(f"a non-empty default: {value!r}")
        return f"msgspec.field(default_factory={factory})"
    return repr(value)


def _field(name: str, schema: dict[str, Any], required: bool, request: bool) -> str:
    if keyword.iskeyword(name) or not name.isidentifier():
        raise ValueError(f"a property name Python cannot spell: {name!r}")
    kind = annotation(schema)
    if required:
        return f"    {name}: {kind}"
    if "default" in schema:
        return f"    {name}: {kind} = {_default(schema['default'])}"
    if request:
        members = kind.split(" | ")
        unset = [*(m for m in members if m != "None"), "msgspec.UnsetType"]
        return f"    {name}: {' | '.join(unset + ['None'] * ('None' in members))} = msgspec.UNSET"
    if kind != "Any" and "None" not in kind.split(" | "):
        kind += " | None"
    return f"    {name}: {kind} = None"


def _struct(name: str, schema: dict[str, Any], s: Schemas) -> list[str]:
    request = name in s.requests
    base = "msgspec.Struct"
    options = ", kw_only=True, omit_defaults=True" if request else ", kw_only=True, frozen=True"
    if "allOf" in schema:
        parent, own = schema["allOf"]
        base, options = parent["$ref"].removeprefix(REF), ", kw_only=True"
        schema = own
    lines = [f"class {name}({base}{options}):"]
    if schema.get("description"):
        lines += [f'    """{_docstring(schema["description"])}"""', ""]
    required = set(schema.get("required", []))
    for prop, prop_schema in schema.get("properties", {}).items():
        lines.append(_field(prop, prop_schema, prop in required, request))
    return lines


def _docstring(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace('"""', "'''").strip()


def render_models(document: dict[str, Any]) -> str:
    s = Schemas(document)
    out = [
        '"""kbgate\'s request and response bodies, written by `clients/python/codegen.py` from',
        "the OpenAPI document (do not edit: regenerate; a test compares the two).",
        "",
        "Request bodies leave unsent fields unset (`msgspec.UNSET`); answers are frozen, and a",
        'field the gateway left out is None."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal",
        "",
        "import msgspec",
        "",
        "__all__ = [",
    ]
    names = sorted(s.components)
    out += [f'    "{name}",' for name in names]
    out += ["]", ""]
    # a class built on another (`allOf`) after every other, so its base is defined
    for name in sorted(names, key=lambda name: "allOf" in s.components[name]):
        schema = s.components[name]
        out.append("")
        if "properties" in schema or "allOf" in schema:
            out += _struct(name, schema, s)
        else:
            out.append(f"{name} = {annotation(schema)}")
        out.append("")
    return "\n".join(out)


def _answer(operation: dict[str, Any]) -> tuple[int, str, str]:
    """The success status, its media type and the answer's type."""
    for status, response in sorted(operation["responses"].items()):
        if status.startswith("2"):
            for media, content in (response.get("content") or {"": {}}).items():
                schema = content.get("schema") or {}
                kind = "bytes" if media.startswith(("text/", "application/gzip")) else None
                if kind is None:
                    kind = annotation(schema) if schema else "None"
                return int(status), media, kind
    raise ValueError(f"{operation['operationId']}: no success response")


def _body(operation: dict[str, Any]) -> str:
    """The request body's type: a model, bytes (an archive) or None."""
    if operation["path"].endswith("/import"):
        return "bytes"
    body = "None"
    for schema in _request_schemas(operation):
        body = BULK_LINE if "allOf" in (schema or {}) else annotation(schema or {})
    return body


def _types(operation: dict[str, Any]) -> tuple[str, str]:
    return _body(operation), _answer(operation)[2]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def render_operations(document: dict[str, Any]) -> str:
    out = [
        '"""Every operation of kbgate\'s HTTP API: method, path, body and answer, written by',
        "`clients/python/codegen.py` from the OpenAPI document (do not edit: regenerate).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from kbgate_client._operation import Operation",
    ]
    found = sorted(operations(document), key=lambda operation: operation["operationId"])
    named = sorted({kind for operation in found for kind in _types(operation)} - {"None", "bytes"})
    out += ["from kbgate_client.models import (", *[f"    {name}," for name in named], ")", ""]
    for operation in found:
        status, media, answer = _answer(operation)
        body = _body(operation)
        query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        keyed = "security" in operation
        name = _snake(operation["operationId"])
        out += [
            "",
            f"{name}: Operation[{body}, {answer}] = Operation(",
            f'    "{operation["operationId"]}",',
            f'    "{operation["method"]}",',
            f'    "{operation["path"]}",',
            f"    body={body},",
            f"    answer={answer},",
            f"    status={status},",
            f'    media_type="{media}",',
            f"    query={tuple(query)!r},",
            f"    keyed={keyed},",
            ")",
        ]
    return "\n".join(out) + "\n"


#: the asynchronous client's words and their synchronous counterparts, in this order
UNASYNC = (
    (
        '"""The asynchronous client. `_sync_client.py` is written from this file by\n'
        '`clients/python/codegen.py` (do not edit that one; a test compares them)."""',
        '"""The synchronous client, written by `clients/python/codegen.py` from\n'
        '`_async_client.py` (do not edit: regenerate; a test compares them)."""',
    ),
    ("asynccontextmanager", "contextmanager"),
    ("async def ", "def "),
    ("async with ", "with "),
    ("async for ", "for "),
    ("await ", ""),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("aclose", "close"),
    ("aread()", "read()"),
    ("aiter_bytes", "iter_bytes"),
    ("aiter_lines", "iter_lines"),
    ("import anyio", "import time"),
    ("anyio.sleep", "time.sleep"),
    ("Async", ""),
)


def render_sync(source: str) -> str:
    for asynchronous, synchronous in UNASYNC:
        source = source.replace(asynchronous, synchronous)
    return source


def main() -> int:
    source = Path(sys.argv[1]).read_text("utf-8")
    if sys.argv[2] == "sync":
        sys.stdout.write(render_sync(source))
        return 0
    render = render_models if sys.argv[2] == "models" else render_operations
    sys.stdout.write(render(json.loads(source)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
