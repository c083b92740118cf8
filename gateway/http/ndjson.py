"""Newline-delimited JSON bodies: a bulk write's lines in, its results out.

The body is read whole first, bounded (`KBGATE_MAX_BODY_BYTES`: past it, 413 and nothing
is written); the answer streams while the lines are written. Each line is decoded on its
own, strictly (`BulkDocument`): a line that is not JSON (400) or breaks the schema (422,
naming the field) is answered as that line's failure and the others go on.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from typing import cast

import msgspec

from gateway.admin.bulk import BadLine, IncomingDocument, Line, LineResult
from gateway.errors import GatewayError, InvalidInputError, PayloadTooLargeError
from gateway.http.knowledge_schemas import BulkDocument, BulkDocumentResult, HeldBackReason
from gateway.http.problems import problem_of

_FIELD = re.compile(r"at `\$\.?([^`]*)`")
_NAMED_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")


async def read_body(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """The whole body, read as it streams in; PayloadTooLargeError once it passes `limit`
    (nothing of it is then written)."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise PayloadTooLargeError(f"the body is over {limit} bytes", field="body")
    return bytes(body)


def read_lines(body: bytes) -> Iterator[Line]:
    """The body's non-blank lines, numbered from 1 (blank ones count), each decoded or
    its error."""
    for number, raw in enumerate(body.split(b"\n"), start=1):
        if raw.strip():
            yield decode_line(number, raw)


def decode_line(number: int, raw: bytes) -> Line:
    """One line as a document, or why it is not one."""
    try:
        found = msgspec.json.decode(raw, type=BulkDocument, strict=True)
    except msgspec.ValidationError as error:
        return BadLine(number, InvalidInputError(str(error), field=_field(str(error))))
    except (msgspec.DecodeError, RecursionError):
        return BadLine(number, GatewayError("the line is not valid JSON"))
    return IncomingDocument(
        line=number,
        document_id=found.document_id,
        text=found.text,
        classification=found.classification,
        title=found.title,
        source=found.source,
        metadata=None if found.metadata is None else dict(found.metadata),
        valid_from=found.valid_from,
        valid_until=found.valid_until,
    )


async def encode_results(results: AsyncIterable[LineResult]) -> AsyncIterator[bytes]:
    """Each result as one line of JSON."""
    encoder = msgspec.json.Encoder()
    async for result in results:
        yield encoder.encode(result_out(result)) + b"\n"


def result_out(result: LineResult) -> BulkDocumentResult:
    # The core answers the held-back reasons' values by construction.
    return BulkDocumentResult(
        line=result.line,
        document_id=result.document_id,
        status=result.status,
        passages=result.passages,
        reason=cast(HeldBackReason | None, result.reason),
        problem=None if result.error is None else problem_of(result.error),
    )


def _field(message: str) -> str:
    named = _NAMED_FIELD.search(message)
    if named:
        return named.group(1)
    path = _FIELD.search(message)
    return path.group(1) if path and path.group(1) else "line"
