"""The OpenAPI document as a contract: what each route answers, in what shape.

Every route declares its statuses where it is defined (`responses=` on the decorator,
built with `problems`/`created` here). Every error kbgate answers is an RFC 9457
problem details document (`application/problem+json`, `ProblemDetails`); 429 and 503
carry Retry-After, 401 WWW-Authenticate. `document_problems` finishes the generated
document: it drops Litestar's own 400 shape where a route declares none, and adds
those headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
    SecurityScheme,
)

from gateway.http.schemas import ProblemDetails

PROBLEM_MEDIA_TYPE = "application/problem+json"
NDJSON_MEDIA_TYPE = "application/x-ndjson"

BEARER_SCHEME = SecurityScheme(
    type="http",
    scheme="bearer",
    description="An API key (or the platform key) as `Authorization: Bearer <key>`",
)
#: the security requirement of every route that needs a key
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]

#: what every call with a key can meet: no valid key (401), a role or scope it lacks
#: (403), a spent budget (429), the settings store down while checking the key (503)
KEYED = (401, 403, 429, 503)
#: what a JSON body can meet: not JSON (400), over the size limit (413), not the schema (422)
BODY = (400, 413, 422)

_HEADERS = {
    "Retry-After": (
        (429, 503),
        Schema(type=OpenAPIType.INTEGER),
        "seconds to wait before trying again",
    ),
    "WWW-Authenticate": ((401,), Schema(type=OpenAPIType.STRING), "the scheme: Bearer"),
}


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    """Problem-details responses for `statuses` (for a decorator's `responses=`)."""
    return {
        status: ResponseSpec(
            data_container=ProblemDetails,
            description=HTTPStatus(status).phrase,
            media_type=PROBLEM_MEDIA_TYPE,
            generate_examples=False,
        )
        for status in sorted(set(statuses))
    }


def created(body: type[Any]) -> dict[int, ResponseSpec]:
    """A 201 answering with `body`, for a PUT that creates (its 200 replaces)."""
    return {201: ResponseSpec(data_container=body, description="Created", generate_examples=False)}


def ndjson_lines(line: Schema, description: str) -> type[Operation]:
    """An operation whose request body is newline-delimited JSON, one `line` per line (the
    handler reads the body as a stream, so Litestar cannot describe it)."""

    @dataclass
    class NdjsonOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = RequestBody(
                content={NDJSON_MEDIA_TYPE: OpenAPIMediaType(schema=line)},
                description=description,
                required=True,
            )

    return NdjsonOperation


def ndjson_response(line: type[Any], description: str) -> ResponseSpec:
    """A 200 answering newline-delimited JSON, one `line` per line."""
    return ResponseSpec(
        data_container=line,
        description=description,
        media_type=NDJSON_MEDIA_TYPE,
        generate_examples=False,
    )


def document_problems(schema: OpenAPI) -> None:
    """Keep only the error responses each route declares, with their headers."""
    for item in (schema.paths or {}).values():
        for operation in (item.get, item.put, item.post, item.patch, item.delete):
            if operation is None or operation.responses is None:
                continue
            responses = operation.responses
            validation = responses.get("400")
            if validation is not None and PROBLEM_MEDIA_TYPE not in (
                getattr(validation, "content", None) or {}
            ):
                del responses["400"]  # Litestar's own shape, on a route that declares no 400
            for name, (statuses, header_schema, description) in _HEADERS.items():
                for status in statuses:
                    response = responses.get(str(status))
                    if response is not None and hasattr(response, "headers"):
                        response.headers = {
                            **(response.headers or {}),
                            name: OpenAPIHeader(schema=header_schema, description=description),
                        }
