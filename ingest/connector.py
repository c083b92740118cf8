"""The filesystem connector: keep one knowledge base in step with one directory.

Every supported file under the directory (see `ingest.extract`) is a document whose
id is its path relative to the directory, with `/` separators. A run

1. lists the document ids the KB holds now (to tell `added` from `changed`);
2. puts every file (text, title, classification, source = its relative path), many per
   request (`BATCH_DOCUMENTS` files or `BATCH_BYTES` of text): the gateway answers each
   `indexed`, `unchanged` (same content: nothing is re-embedded) or `held_back`;
3. deletes the documents whose files are gone, after the puts, so a renamed file is
   never missing from retrieval in between.

Files that cannot be read, decoded or parsed, that hold no text, and files the gateway
refuses, are counted as failed and reported with the reason; the run goes on, and a
failed file's document is never deleted (its file is still there). Files of other types
(and anything that is not a regular file) are skipped and reported with the reason;
hidden files and folders (name starting with `.`) are not visited.

The connector talks to a `DocumentSink`: `HttpSink` (here; a running gateway, over
the HTTP API with kbgate_client) or the gateway's own in-process
sink for an embedded data dir (in `gateway.cli`, which owns the gateway imports).
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ingest.extract import Extracted, ExtractionError, extract, is_supported
from ingest.metadata import MAX_DOCUMENT_FIELDS, Schema, schema_of
from ingest.payload import Classification, is_valid_id
from ingest.properties import declared_fields, merged_fields, property_fields

if TYPE_CHECKING:
    from kbgate_client import ProblemError, TransportError
    from kbgate_client.models import BulkDocument, BulkDocumentResult

T = TypeVar("T")

#: Told after every file: files done, files in the run, passages indexed so far.
Progress = Callable[[int, int, int], None]
#: Files sent in one request, or fewer once their texts reach `BATCH_BYTES` (a file
#: larger than that goes alone). The gateway writes a request's documents in groups, one
#: group embedding while the previous one is stored, so a request holds several groups.
BATCH_DOCUMENTS = 128
BATCH_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    """One document as the connector sends it."""

    document_id: str
    text: str
    title: str
    source: str
    classification: Classification
    #: the document's own fields: its front matter's, the file's `modified_at` and its
    #: document properties (`file_fields`)
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PutAnswer:
    status: str  # "indexed" | "unchanged" | "held_back"
    passages: int


@dataclass(frozen=True, slots=True)
class PutResult:
    """What the sink answered for one upload: its answer, or why it refused it."""

    upload: Upload
    answer: PutAnswer | None
    refused: str | None = None


class DocumentRejectedError(Exception):
    """The sink refused one document (bad input); the run goes on."""


class SinkUnavailableError(Exception):
    """The sink cannot be used at all (unreachable, unauthorised, locked): the run stops."""


class DocumentSink(Protocol):
    """Where documents go: one knowledge base of one workspace."""

    async def list_document_ids(self) -> set[str]:
        """Ids of the documents the KB holds now."""
        ...

    async def field_schema(self) -> Schema:
        """The fields the KB declares ({name: type}): a file's properties that do not fit
        them are left out (`ingest.properties`)."""
        ...

    def put_documents(self, uploads: Sequence[Upload]) -> AsyncIterator[PutResult]:
        """Index, leave unchanged or hold back each document: one result per upload, as
        each is acknowledged. SinkUnavailableError stops the run."""
        ...

    async def delete_document(self, document_id: str) -> int:
        """Remove a document; how many passages went (0 when it was already gone)."""
        ...


@dataclass(slots=True)
class Summary:
    """What a run did. `failures` pairs a document id (or path) with the reason, and
    `skips` a skipped file's path with the reason."""

    files: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    held_back: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    skips: list[tuple[str, str]] = field(default_factory=list)
    aborted: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.aborted is None

    def fail(self, name: str, reason: str) -> None:
        self.failed += 1
        self.failures.append((name, reason))

    def skip(self, path: str, reason: str) -> None:
        self.skipped += 1
        self.skips.append((path, reason))

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "added": self.added,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "held_back": self.held_back,
            "failed": self.failed,
            "skipped": self.skipped,
            "failures": [{"document": name, "reason": reason} for name, reason in self.failures],
            "skipped_files": [{"path": path, "reason": reason} for path, reason in self.skips],
            "aborted": self.aborted,
        }

    def render(self, *, max_skipped_lines: int = 20) -> str:
        """The human summary: one counts line, one line per failure, then skipped files
        (the first `max_skipped_lines`; `--json` lists them all)."""
        counts = (
            f"{self.files} files: added {self.added}, changed {self.changed}, "
            f"unchanged {self.unchanged}, deleted {self.deleted}, held back {self.held_back}, "
            f"failed {self.failed}"
        )
        if self.skipped:
            counts += f", skipped {self.skipped}"
        lines = [counts]
        lines.extend(f"  failed: {name}: {reason}" for name, reason in self.failures)
        shown = self.skips[:max_skipped_lines]
        lines.extend(f"  skipped: {path}: {reason}" for path, reason in shown)
        if len(self.skips) > len(shown):
            lines.append(f"  ... and {len(self.skips) - len(shown)} more skipped (see --json)")
        if self.aborted:
            lines.append(f"  stopped early: {self.aborted}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: Path
    document_id: str


@dataclass(slots=True)
class Scan:
    """The files a run reads, names unusable as ids, and skipped paths with the reason."""

    files: list[SourceFile] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def scan(directory: Path) -> Scan:
    """Supported files under `directory` (sorted by id), invalid names and skipped files.

    Hidden files and folders are not visited; symlinked folders are not followed.
    """
    found = Scan()
    for root, folders, names in os.walk(directory):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            reason = _skip_reason(path)
            if reason is not None:
                found.skipped.append((relative, reason))
            elif is_valid_id(relative):
                found.files.append(SourceFile(path, relative))
            else:
                found.invalid.append(relative)
    found.files.sort(key=lambda item: item.document_id)
    found.skipped.sort()
    return found


def _skip_reason(path: Path) -> str | None:
    """Why the connector does not read `path`, or None when it does."""
    if not is_supported(path):
        return f"unsupported file type {path.suffix or '(no extension)'!r}"
    if not path.is_file():
        return "not a regular file"
    return None


async def sync_directory(
    directory: Path,
    sink: DocumentSink,
    classification: Classification,
    *,
    progress: Progress | None = None,
    allow_empty: bool = False,
) -> Summary:
    """One run of the connector (see the module docstring).

    Raises `SinkUnavailableError` when the KB cannot be listed (nothing was done);
    a sink failure later stops the run and is recorded in `Summary.aborted`.
    """
    found = scan(directory)
    files, invalid = found.files, found.invalid
    existing = await sink.list_document_ids()
    schema = await sink.field_schema()
    summary = Summary(files=len(files) + len(invalid))
    for path, reason in found.skipped:
        summary.skip(path, reason)
    for name in invalid:
        summary.fail(name, "the path is not a valid document id (letters, digits and ._:@/- only)")
    if not files and not invalid and existing and not allow_empty:
        summary.aborted = (
            f"{directory} holds no supported files; refusing to delete all "
            f"{len(existing)} documents of the knowledge base (pass --allow-empty to do so)"
        )
        return summary
    run = _Run(sink, existing, schema, summary, len(files), progress)
    try:
        await run.put_all(files, classification)
        present = {item.document_id for item in files} | set(invalid)
        for document_id in sorted(existing - present):
            try:
                await sink.delete_document(document_id)
            except DocumentRejectedError as error:
                summary.fail(document_id, f"delete refused: {error}")
                continue
            summary.deleted += 1
    except SinkUnavailableError as error:
        summary.aborted = str(error)
    return summary


@dataclass(slots=True)
class _Run:
    """The puts of one run: files read and sent in batches, each answer counted."""

    sink: DocumentSink
    existing: set[str]
    schema: Schema
    summary: Summary
    total: int
    progress: Progress | None
    done: int = 0
    passages: int = 0

    async def put_all(self, files: Iterable[SourceFile], classification: Classification) -> None:
        batch: list[Upload] = []
        size = 0
        for item in files:
            upload = await self._read(item, classification)
            if upload is None:
                self._step()
                continue
            if batch and size + len(upload.text) > BATCH_BYTES:
                await self._send(batch)
                batch, size = [], 0
            batch.append(upload)
            size += len(upload.text)
            if len(batch) >= BATCH_DOCUMENTS:
                await self._send(batch)
                batch, size = [], 0
        if batch:
            await self._send(batch)

    async def _read(self, item: SourceFile, classification: Classification) -> Upload | None:
        """The file as an upload, or None once its failure is counted."""
        try:
            extracted = await asyncio.to_thread(extract, item.path)
        except ExtractionError as error:
            self.summary.fail(item.document_id, str(error))
            return None
        if not extracted.text.strip():
            self.summary.fail(
                item.document_id, "no text to index (empty, or only images or markup)"
            )
            return None
        return Upload(
            document_id=item.document_id,
            text=extracted.text,
            title=extracted.title,
            source=item.document_id,
            classification=classification,
            metadata=file_fields(item.path, extracted, self.schema),
        )

    async def _send(self, batch: Sequence[Upload]) -> None:
        async for result in self.sink.put_documents(batch):
            self._count(result)
            self._step()

    def _count(self, result: PutResult) -> None:
        document_id, answer, summary = result.upload.document_id, result.answer, self.summary
        if answer is None:
            summary.fail(document_id, result.refused or "refused")
        elif answer.status == "held_back":
            summary.held_back += 1
        elif document_id not in self.existing:
            # `unchanged` here means an earlier attempt of this run wrote it (its answer was
            # lost to a timeout or a 503 and the put was retried): still an addition.
            summary.added += 1
        elif answer.status == "unchanged":
            summary.unchanged += 1
        else:
            summary.changed += 1
        if answer is not None and answer.status == "indexed":
            self.passages += answer.passages

    def _step(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total, self.passages)


# ---- a running gateway, over HTTP -----------------------------------------------------


class HttpSink:
    """One KB of a running gateway, through kbgate_client's async client.

    Busy or unreachable gateways (429, 502-504, refused connections) are retried with
    backoff, honouring Retry-After; other 4xx/5xx answers to a document reject that
    document only, and so does a dropped connection while the gateway stays live (it
    drops bodies over its size limit unread). 401/403, and 404 on the KB, stop the run.
    Use it as an async context manager: it holds the connections.
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        kb_id: str,
        *,
        timeout_s: float = 300.0,
        retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        from kbgate_client import AsyncClient, Retries

        self._base = check_gateway_url(base_url).rstrip("/")
        self._kb_id = kb_id
        self._retries = retries
        policy = Retries(
            attempts=retries + 1,
            backoff_s=backoff_s,
            max_wait_s=30.0,
            statuses=frozenset({429, 502, 503, 504}),
        )
        self._client = AsyncClient(self._base, key, timeout_s=timeout_s, retries=policy)

    async def __aenter__(self) -> HttpSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._client.aclose()

    async def list_document_ids(self) -> set[str]:
        from kbgate_client import NotFoundError, ProblemError

        try:
            listed = await _unusable(self._client.list_documents(self._kb_id), self._base)
        except NotFoundError:
            raise SinkUnavailableError(
                f"no knowledge base {self._kb_id!r} in this key's workspace; "
                "create it first (PUT /v1/knowledge-bases/{kb_id} with an admin key)"
            ) from None
        except ProblemError as error:
            raise SinkUnavailableError(f"listing the documents failed: {error}") from None
        return {entry.document_id for entry in listed.documents}

    async def field_schema(self) -> Schema:
        from kbgate_client import ProblemError

        try:
            kb = await _unusable(self._client.get_knowledge_base(self._kb_id), self._base)
        except ProblemError as error:
            raise SinkUnavailableError(f"reading the knowledge base failed: {error}") from None
        return schema_of(kb.settings)

    async def put_documents(self, uploads: Sequence[Upload]) -> AsyncIterator[PutResult]:
        """One bulk write (`POST .../documents`, one NDJSON line per upload); each result
        is yielded as the gateway sends it. Uploads it sent no result for (the answer was
        cut off) are refused with the reason: sending them again is safe."""
        from kbgate_client import NotFoundError, ProblemError, TransportError

        lines = [_bulk_line(upload) for upload in uploads]
        answered: set[int] = set()
        reason = "the gateway sent no result"
        for attempt in range(self._retries + 1):
            try:
                async for result in _unusable_stream(
                    self._client.put_documents(self._kb_id, lines)
                ):
                    if 1 <= result.line <= len(uploads) and result.line not in answered:
                        answered.add(result.line)
                        yield _put_result(uploads[result.line - 1], result)
                break
            except NotFoundError:
                raise SinkUnavailableError(f"the knowledge base {self._kb_id!r} is gone") from None
            except ProblemError as error:
                reason = str(error)  # the whole request was refused: every upload with it
                break
            except TransportError as error:
                retry = not answered and error.timed_out and attempt < self._retries
                if retry:
                    continue  # nothing answered yet: the same documents again
                reason = await self._lost(error, bool(answered), lines)
                break
        for number, upload in enumerate(uploads, start=1):
            if number not in answered:
                yield PutResult(upload, None, reason)

    async def _lost(self, error: TransportError, answered: bool, lines: list[BulkDocument]) -> str:
        """Why a bulk write's uploads without a result failed, when its answer was lost;
        SinkUnavailableError when the gateway is gone."""
        if answered:
            return f"the answer was cut off: {error}"
        if not error.timed_out and await self._alive():
            # The gateway is up but dropped this request: it refuses a body over its size
            # limit by closing the connection before reading it.
            size = sum(len(line.text) for line in lines) / 1e6
            return (
                f"the gateway closed the connection while receiving this document "
                f"({size:.1f} MB of text): probably over its size limit"
            )
        raise SinkUnavailableError(f"cannot reach the gateway at {self._base}: {error}")

    async def delete_document(self, document_id: str) -> int:
        from kbgate_client import NotFoundError, ProblemError

        try:
            deleted = await _unusable(
                self._client.delete_document(self._kb_id, document_id), self._base
            )
        except NotFoundError:
            return 0  # already gone
        except ProblemError as error:
            raise DocumentRejectedError(str(error)) from None
        return deleted.deleted_passages

    async def _alive(self) -> bool:
        """Whether the gateway answers its liveness probe right now."""
        from kbgate_client import KbgateError

        try:
            await self._client.live()
        except KbgateError:
            return False
        return True


async def _unusable(call: Awaitable[T], base: str) -> T:
    """The call's answer; a refused key, or a gateway that stays busy, unreachable or
    silent, as SinkUnavailableError (other refusals pass as they are)."""
    from kbgate_client import ProblemError, TransportError

    try:
        return await call
    except ProblemError as error:
        raise _unusable_error(error) or error from None
    except TransportError as error:
        raise SinkUnavailableError(f"cannot reach the gateway at {base}: {error}") from None


def file_fields(path: Path, extracted: Extracted, schema: Schema) -> dict[str, Any]:
    """A file's fields as a document's: those it declares (`declared_fields`), when it was
    last modified (`modified_at`, UTC), then its document properties that fit the KB's
    `schema` and name no field already given (`ingest.properties`)."""
    fields = declared_fields(extracted.fields)
    try:
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        pass
    else:
        fields["modified_at"] = modified.isoformat().replace("+00:00", "Z")
        fields = dict(list(fields.items())[-MAX_DOCUMENT_FIELDS:])
    return merged_fields(fields, property_fields(extracted.properties, schema))


async def _unusable_stream(call: AsyncIterator[T]) -> AsyncIterator[T]:
    """`_unusable` for a streamed answer (its transport errors pass as they are)."""
    from kbgate_client import ProblemError

    try:
        async for item in call:
            yield item
    except ProblemError as error:
        raise _unusable_error(error) or error from None


def _unusable_error(error: ProblemError) -> SinkUnavailableError | None:
    if error.status in {401, 403}:
        return SinkUnavailableError(f"the gateway refused the key: {error}")
    if error.status in {429, 502, 503, 504}:
        return SinkUnavailableError(f"the gateway stayed unavailable: {error}")
    return None


def _bulk_line(upload: Upload) -> BulkDocument:
    from kbgate_client.models import BulkDocument

    return BulkDocument(
        document_id=upload.document_id,
        text=upload.text,
        title=upload.title,
        source=upload.source,
        classification=upload.classification.value,
        metadata=upload.metadata or None,
    )


def _put_result(upload: Upload, line: BulkDocumentResult) -> PutResult:
    """One result line of a bulk write, as the connector counts it."""
    if line.status != "failed":
        return PutResult(upload, PutAnswer(status=line.status, passages=line.passages))
    problem = line.problem
    reason = None if problem is None else _detail(problem.status, problem.detail, problem.field)
    return PutResult(upload, None, reason or f"the gateway answered {line.status!r}")


def check_gateway_url(url: str) -> str:
    """The URL, if it is http(s) with a host; ValueError otherwise."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return url


def _detail(status: int, detail: str | None, field: str | None) -> str:
    where = f" ({field})" if field else ""
    return f"HTTP {status}: {detail or 'no detail'}{where}"
