"""Make the OpenAPI document tell the truth about errors.

Every error kbgate answers is an RFC 9457 problem details document
(`application/problem+json`); Litestar documents only its own 400 shape. This
rewrites each `/v1` operation's error responses to one shared ProblemDetails
schema, for the statuses any authenticated call can meet.
"""

from __future__ import annotations

from http import HTTPStatus

from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Reference,
    Schema,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 422, 429, 503)

PROBLEM_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    required=["status", "title"],
    properties={
        "status": Schema(type=OpenAPIType.INTEGER),
        "title": Schema(type=OpenAPIType.STRING),
        "detail": Schema(type=OpenAPIType.STRING),
        "field": Schema(type=OpenAPIType.STRING, description="the offending input field"),
        "dependency": Schema(type=OpenAPIType.STRING, description="what is unavailable (503)"),
    },
    description="RFC 9457 problem details",
)


def document_problems(schema: OpenAPI) -> None:
    """Replace every /v1 operation's error responses with problem details."""
    components = schema.components
    components.schemas = {**(components.schemas or {}), "ProblemDetails": PROBLEM_SCHEMA}
    schema.components = components
    reference = Reference(ref="#/components/schemas/ProblemDetails")
    for path, item in (schema.paths or {}).items():
        if not path.startswith("/v1"):
            continue
        for operation in (item.get, item.put, item.post, item.patch, item.delete):
            if operation is None or operation.responses is None:
                continue
            for status in [code for code in operation.responses if int(code) >= 400]:
                del operation.responses[status]
            for code in ERROR_STATUSES:
                operation.responses[str(code)] = OpenAPIResponse(
                    description=HTTPStatus(code).phrase,
                    content={PROBLEM_MEDIA_TYPE: OpenAPIMediaType(schema=reference)},
                )
