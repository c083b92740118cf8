"""Many documents of one knowledge base in one request, written in groups.

The same rules as one document's PUT (`gateway.admin.knowledge.put_document`): a key
with clearance `restricted`, the caller's own KB, a live workspace (all checked before any
line is read), then per document its id, its text and its label; an unlabelled document
is held back. What differs is how the documents are written: up to `GROUP_DOCUMENTS` of
them (or `GROUP_TEXT_BYTES` of text) at once through `DocumentWriter.put_many`, one model
pass and one durable index write for the whole group, `GROUPS_IN_FLIGHT` groups at a
time. The results stream back as groups finish.

Every line read gets exactly one result, in input order. A document's result is sent only
once its write is durable: `indexed`, `unchanged` and `held_back` are acknowledgements. A
`failed` result (a bad line, a refused document, or its group's write failing on a
dependency) means nothing of that document was written, or what was written was taken
back. Lines after a dependency failure are answered `failed` with the same error and not
written. A line with no result (the answer was cut off, the client left) was not
acknowledged: sending it again is safe, as an unchanged document answers `unchanged`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from gateway.access.auth import Principal
from gateway.access.expensive import pause_point
from gateway.admin import write_guard
from gateway.admin.knowledge import (
    Documents,
    check_id,
    check_text,
    document_fields,
    knowledge_base_of,
    require_full_clearance,
    target_of,
    write_target,
)
from gateway.errors import GatewayError, NotFoundError
from ingest.index import IndexUnavailableError
from ingest.screening import screen
from ingest.sync import AnalysisFailedError, Document, EmbeddingFailedError, SyncOutcome
from settings.records import KnowledgeBase
from settings.store import StoreUnavailableError

#: Documents written as one: one model pass, one index write (one flush).
GROUP_DOCUMENTS = 32
#: ... or fewer, once their texts reach this many bytes.
GROUP_TEXT_BYTES = 2 * 1024 * 1024
#: Results held back per group before it is sent on (lines that need no write).
GROUP_LINES = 256
#: Groups of one request being written at once. Two (one embedding while the other is
#: flushed) measured no faster than one (docs/decisions/ingest-speed.md).
GROUPS_IN_FLIGHT = 1

ResultStatus = Literal["indexed", "unchanged", "held_back", "failed"]
#: What a group's write can meet that is no fault of its documents.
DEPENDENCY_ERRORS = (
    IndexUnavailableError,
    StoreUnavailableError,
    EmbeddingFailedError,
    AnalysisFailedError,
)


@dataclass(frozen=True, slots=True)
class IncomingDocument:
    """One line that decoded into a document."""

    line: int
    document_id: str
    text: str
    classification: str | None = None
    title: str = ""
    source: str = ""
    metadata: dict[str, Any] | None = None
    valid_from: str | None = None
    valid_until: str | None = None


@dataclass(frozen=True, slots=True)
class BadLine:
    """One line that did not decode; `error` says why (mapped to problem details at the edge)."""

    line: int
    error: GatewayError


Line = IncomingDocument | BadLine


@dataclass(frozen=True, slots=True)
class LineResult:
    """What became of one line."""

    line: int
    document_id: str | None
    status: ResultStatus
    passages: int = 0
    #: why a document was held back (`held_back`)
    reason: str | None = None
    #: why it failed (`failed`): a GatewayError or a dependency's error
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class _Pending:
    """A line whose document passed screening and waits for its group's write."""

    line: int
    document: Document


@dataclass(slots=True)
class _Group:
    """Lines in input order; those holding a document are written together."""

    results: list[LineResult | _Pending] = field(default_factory=list)
    text_bytes: int = 0

    @property
    def pending(self) -> list[_Pending]:
        return [entry for entry in self.results if isinstance(entry, _Pending)]

    def ids(self) -> set[str]:
        return {entry.document.document_id for entry in self.pending}

    def full(self) -> bool:
        return (
            len(self.pending) >= GROUP_DOCUMENTS
            or self.text_bytes >= GROUP_TEXT_BYTES
            or len(self.results) >= GROUP_LINES
        )


async def open_bulk_write(documents: Documents, principal: Principal, kb_id: str) -> BulkWrite:
    """The caller's bulk write into `kb_id`, once the key, the KB and the workspace pass
    (ForbiddenError, NotFoundError: before any line is read)."""
    require_full_clearance(principal)
    kb = await knowledge_base_of(documents.store, principal, kb_id)
    await write_guard.require_live_workspace(documents.store, principal.tenant_id)
    return BulkWrite(documents, kb)


class BulkWrite:
    """One request's documents into one KB (see the module docstring)."""

    def __init__(self, documents: Documents, kb: KnowledgeBase) -> None:
        self._documents = documents
        self._kb = kb
        #: the first dependency failure; every later document fails with it, unwritten
        self._broken: Exception | None = None

    async def results(self, lines: Iterable[Line]) -> AsyncIterator[LineResult]:
        """One result per line, in input order, each once its document's write is durable."""
        writing: deque[tuple[set[str], asyncio.Task[list[LineResult]]]] = deque()
        group = _Group()
        try:
            for line in lines:
                entry = await self._screen(line)
                if isinstance(entry, _Pending) and entry.document.document_id in group.ids():
                    # The same id again: written after the earlier line, as two PUTs would be.
                    async for result in self._start(group, writing):
                        yield result
                    group = _Group()
                group.results.append(entry)
                if isinstance(entry, _Pending):
                    group.text_bytes += len(entry.document.text)
                if group.full():
                    async for result in self._start(group, writing):
                        yield result
                    group = _Group()
            async for result in self._start(group, writing):
                yield result
            while writing:
                for result in await writing.popleft()[1]:
                    yield result
        finally:
            # A client that leaves does not stop a write half-way: let the groups finish.
            await asyncio.gather(*(task for _, task in writing), return_exceptions=True)

    async def _start(
        self,
        group: _Group,
        writing: deque[tuple[set[str], asyncio.Task[list[LineResult]]]],
    ) -> AsyncIterator[LineResult]:
        """Start writing `group`, first sending the results of the groups it must wait for:
        the oldest while too many are in flight, and any writing one of its ids."""
        if not group.results:
            return
        ids = group.ids()
        while writing and (
            len(writing) >= GROUPS_IN_FLIGHT or any(ids & earlier for earlier, _ in writing)
        ):
            for result in await writing.popleft()[1]:
                yield result
        writing.append((ids, asyncio.create_task(self._write(group))))

    async def _screen(self, line: Line) -> LineResult | _Pending:
        """A line's result when it needs no write (bad, refused, held back), else the document."""
        if isinstance(line, BadLine):
            return LineResult(line.line, None, "failed", error=line.error)
        try:
            check_id(line.document_id, "document_id")
            check_text(self._documents.config, line.text)
            fields = document_fields(self._kb, line.metadata, line.valid_from, line.valid_until)
        except GatewayError as error:
            return LineResult(line.line, line.document_id, "failed", error=error)
        verdict = screen(line.classification)
        if verdict.classification is not None:
            document = Document(
                document_id=line.document_id,
                text=line.text,
                classification=verdict.classification,
                title=line.title,
                source=line.source,
                metadata=fields.metadata,
                valid_from=fields.valid_from,
                valid_until=fields.valid_until,
            )
            return _Pending(line.line, document)
        try:
            await self._documents.store.add_held_back(self._kb.tenant_id, self._kb.kb_id)
        except StoreUnavailableError as error:
            return LineResult(line.line, line.document_id, "failed", error=error)
        self._documents.telemetry.count("documents_held_back")
        return LineResult(line.line, line.document_id, "held_back", reason=verdict.reason)

    async def _write(self, group: _Group) -> list[LineResult]:
        """The group's results in order, its documents written as one."""
        pending = group.pending
        outcomes: dict[int, SyncOutcome | Exception] = {}
        if pending:
            documents = [entry.document for entry in pending]
            written: Sequence[SyncOutcome | Exception]
            try:
                written = await self._write_documents(documents)
            except NotFoundError as error:  # the KB or its workspace went meanwhile
                written = [error] * len(documents)
            except DEPENDENCY_ERRORS as error:
                self._broken = error
                written = [error] * len(documents)
            outcomes = {
                entry.line: outcome for entry, outcome in zip(pending, written, strict=True)
            }
        return [_result(entry, outcomes) for entry in group.results]

    async def _write_documents(self, documents: Sequence[Document]) -> list[SyncOutcome]:
        """Write the documents as one, holding each one's lock; take them back if the KB
        went meanwhile (NotFoundError)."""
        if self._broken is not None:
            raise self._broken
        writes, kb = self._documents, self._kb
        target = await write_target(writes.store, kb)
        async with AsyncExitStack() as locks:
            for document_id in sorted({doc.document_id for doc in documents}):
                key = (kb.tenant_id, kb.kb_id, document_id)
                await locks.enter_async_context(writes.locks.hold(key))
            with writes.telemetry.stage("ingest_documents"):
                # A write is never stopped half-way: its Stop flag is read only to pause
                # there (another workspace's work takes the run slot meanwhile).
                outcomes = await writes.expensive.run(
                    kb.tenant_id,
                    lambda flag: writes.writer.put_many(
                        target, documents, pause=partial(pause_point, flag)
                    ),
                    kind="ingest",
                    wait=True,
                )
            await self._take_back_if_gone(documents)
        for outcome in outcomes:
            writes.telemetry.count(f"documents_{outcome.status}")
            if outcome.status == "indexed":
                writes.telemetry.count("passages_written", outcome.passages)
        return outcomes

    async def _take_back_if_gone(self, documents: Sequence[Document]) -> None:
        """`write_guard.take_back_if_gone` for the group: the KB's check once, and when it
        is gone every document taken back; NotFoundError then."""
        target = target_of(self._kb)
        writes = self._documents
        try:
            await write_guard.take_back_if_gone(
                writes.store,
                writes.writer,
                writes.telemetry,
                self._kb,
                target,
                document_id=documents[0].document_id,
            )
        except NotFoundError:
            for document in documents[1:]:
                await asyncio.to_thread(writes.writer.delete, target, document.document_id)
            raise


def _result(
    entry: LineResult | _Pending, outcomes: dict[int, SyncOutcome | Exception]
) -> LineResult:
    if isinstance(entry, LineResult):
        return entry
    outcome, document_id = outcomes[entry.line], entry.document.document_id
    if isinstance(outcome, Exception):
        return LineResult(entry.line, document_id, "failed", error=outcome)
    return LineResult(entry.line, document_id, outcome.status, passages=outcome.passages)
