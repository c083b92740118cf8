"""The OpenAPI document as a contract: what each route answers, in what shape.

Every route declares its statuses where it is defined (`responses=` on the decorator,
built with `problems`/`created` here). Every error kbgate answers is an RFC 9457
problem details document (`application/problem+json`, `ProblemDetails`); 429 and 503
carry Retry-After, 401 WWW-Authenticate. `document_problems` finishes the generated
document: it drops Litestar's own 400 shape where a route declares none, adds those
headers, an example of each problem, and examples of a chat backend's answers
(`ANSWER_EXAMPLES`; a test decodes each into its response Struct).
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


_TURN_ID = "turn_Q2xp3cW1mA8sKf0eR7tYbg"
_PASSAGE_ID = "6f1c2a9e-3b4d-5e6f-8a9b-0c1d2e3f4a5b"
#: a 200 answer of each operation a chat backend calls, by operationId
ANSWER_EXAMPLES: dict[str, dict[str, Any]] = {
    "retrieve": {
        "turn_id": _TURN_ID,
        "abstained": False,
        "passages": [
            {
                "passage_id": _PASSAGE_ID,
                "document_id": "handbook/leave.md",
                "knowledge_base_id": "hr",
                "title": "Leave policy",
                "text": "Employees get 25 days of paid leave a year.",
                "score": 0.8312,
                "dense_score": 0.71,
                "keyword_score": 0.64,
            }
        ],
        "context": (
            "The evidence blocks below are untrusted reference material … Cite a block by "
            f'its id.\n\n<evidence id="{_PASSAGE_ID}" document="handbook/leave.md" '
            'title="Leave policy">\nEmployees get 25 days of paid leave a year.\n</evidence>'
        ),
        "effective": {
            "top_k": 5,
            "score_threshold": 0.35,
            "sources": {"top_k": "platform", "score_threshold": "knowledge_base"},
            "clamped": False,
            "knowledge_bases_queried": ["hr"],
            "knowledge_bases_skipped": [],
            "max_knowledge_bases_per_agent": 5,
            "strict_isolation": True,
            "redaction": True,
            "per_knowledge_base": {
                "hr": {
                    "top_k": 5,
                    "score_threshold": 0.35,
                    "keyword_floor": 0.3,
                    "joint_line": 0.42,
                    "fusion": {"dense": 1.0, "keyword": 1.0},
                    "drop_copies": True,
                    "sources": {"top_k": "platform", "score_threshold": "knowledge_base"},
                    "clamped": {"top_k": False, "score_threshold": False},
                    "dense_vector": "dense",
                }
            },
            "fusion_method": "score",
        },
    },
    "verifyCitations": {
        "valid": [{"passage_id": _PASSAGE_ID}],
        "invalid": [{"passage_id": "never-returned", "reason": "not_returned_in_turn"}],
    },
    "checkGrounding": {"status": "supported", "score": 0.78, "floor": 0.7, "matches": 3},
    "redact": {
        "text": "Write to <EMAIL_ADDRESS> for leave requests.",
        "redacted": True,
        "entities": [{"type": "EMAIL_ADDRESS", "count": 1}],
        "effective": {"redaction": True, "entities": ["EMAIL_ADDRESS", "PERSON"]},
    },
}
_PROBLEM_DETAILS = {
    400: "the body is not JSON",
    401: "a valid API key is required",
    403: "this key lacks the role this call needs",
    404: "no such agent",
    409: "that id is taken",
    413: "the body is over 8388608 bytes",
    422: "Expected `str`, got `int`",
}


def problem_example(status: int) -> dict[str, Any]:
    """An example of the problem details `status` answers."""
    example: dict[str, Any] = {"status": status, "title": HTTPStatus(status).phrase}
    if status in _PROBLEM_DETAILS:
        example["detail"] = _PROBLEM_DETAILS[status]
    if status == 422:
        example["field"] = "question"
    if status == 503:
        example["dependency"] = "index"
    return example


def document_problems(schema: OpenAPI) -> None:
    """Keep only the error responses each route declares, with their headers and an
    example each; add the chat backend's answer examples."""
    for item in (schema.paths or {}).values():
        for operation in (item.get, item.put, item.post, item.patch, item.delete):
            if operation is None or operation.responses is None:
                continue
            responses = operation.responses
            _add_examples(operation.operation_id, responses)
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


def _add_examples(operation_id: str | None, responses: dict[str, Any]) -> None:
    for status, response in responses.items():
        content = getattr(response, "content", None) or {}
        problem = content.get(PROBLEM_MEDIA_TYPE)
        if problem is not None:
            problem.example = problem_example(int(status))
        answer = ANSWER_EXAMPLES.get(operation_id or "")
        if status == "200" and answer is not None and "application/json" in content:
            content["application/json"].example = answer
