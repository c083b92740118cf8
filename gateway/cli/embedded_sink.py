"""The connector's sink for an embedded data dir: the gateway's own document functions,
run in the `kbgate ingest` process with no gateway serving the data dir."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from gateway.access.auth import Principal
from gateway.admin import knowledge
from gateway.admin.bulk import IncomingDocument, Line, open_bulk_write
from gateway.admin.knowledge import Documents
from gateway.errors import GatewayError, NotFoundError
from ingest.connector import (
    DocumentRejectedError,
    PutAnswer,
    PutResult,
    SinkUnavailableError,
    Upload,
)
from ingest.index import DiskFullError, Index, IndexUnavailableError
from ingest.metadata import Schema, schema_of
from settings.store import StoreUnavailableError


class EmbeddedSink:
    """The connector's sink for an embedded data dir: the gateway's own document functions."""

    def __init__(
        self, documents: Documents, index: Index, principal: Principal, kb_id: str, data_dir: Path
    ) -> None:
        """`documents` writes and deletes them, `index` lists them, as `principal`."""
        self._documents = documents
        self._index = index
        self._principal = principal
        self._kb_id = kb_id
        self._data_dir = data_dir

    async def list_document_ids(self) -> set[str]:
        try:
            found = await knowledge.list_documents(
                self._documents.store, self._index, self._principal, self._kb_id
            )
            return set(found)
        except NotFoundError:
            raise SinkUnavailableError(
                f"no knowledge base {self._kb_id!r} in workspace {self._principal.tenant_id!r}; "
                "create it first (PUT /v1/knowledge-bases/{kb_id} with an admin key)"
            ) from None
        except IndexUnavailableError as error:
            raise SinkUnavailableError(self._unavailable(error)) from None

    async def field_schema(self) -> Schema:
        try:
            kb = await knowledge.knowledge_base_of(
                self._documents.store, self._principal, self._kb_id
            )
        except NotFoundError:
            raise SinkUnavailableError(f"the knowledge base {self._kb_id!r} is gone") from None
        except StoreUnavailableError as error:
            raise SinkUnavailableError(self._unavailable(error)) from None
        return schema_of(kb.settings)

    async def put_documents(self, uploads: Sequence[Upload]) -> AsyncIterator[PutResult]:
        """The gateway's own bulk write (`gateway.admin.bulk`), one result per upload."""
        try:
            bulk = await open_bulk_write(self._documents, self._principal, self._kb_id)
        except NotFoundError:
            raise SinkUnavailableError(f"the knowledge base {self._kb_id!r} is gone") from None
        async for result in bulk.results(_lines(uploads)):
            upload = uploads[result.line - 1]
            error = result.error
            if isinstance(error, IndexUnavailableError | StoreUnavailableError):
                raise SinkUnavailableError(self._unavailable(error))
            if error is not None:
                reason = _field_message(error) if isinstance(error, GatewayError) else str(error)
                yield PutResult(upload, None, reason)
            else:
                yield PutResult(upload, PutAnswer(status=result.status, passages=result.passages))

    async def delete_document(self, document_id: str) -> int:
        try:
            return await knowledge.delete_document(
                self._documents, self._principal, self._kb_id, document_id
            )
        except NotFoundError:
            return 0
        except GatewayError as error:
            raise DocumentRejectedError(_field_message(error)) from None
        except (IndexUnavailableError, StoreUnavailableError) as error:
            raise SinkUnavailableError(self._unavailable(error)) from None

    def _unavailable(self, error: Exception) -> str:
        return engine_message(error, self._data_dir)


def _lines(uploads: Sequence[Upload]) -> list[Line]:
    return [
        IncomingDocument(
            line=number,
            document_id=upload.document_id,
            text=upload.text,
            classification=upload.classification.value,
            title=upload.title,
            source=upload.source,
            metadata=upload.metadata,
        )
        for number, upload in enumerate(uploads, start=1)
    ]


def _field_message(error: GatewayError) -> str:
    return f"{error.message} ({error.field})" if error.field else error.message


def engine_message(error: Exception, data_dir: Path) -> str:
    """Name the usual cause when Qdrant Edge finds its shard locked by another process,
    and what to do when its disk is down to the free space kept."""
    text = str(error)
    if isinstance(error, DiskFullError):
        return (
            f"the disk of {data_dir} is down to the free space kept ({text}). Free space "
            "there (or lower KBGATE_MIN_FREE_DISK_MB), then run the command again."
        )
    if "WouldBlock" in text or "lock" in text.lower():
        return (
            f"the data dir {data_dir} is in use by another process (a running gateway?): "
            "Qdrant Edge locks its shards. Stop it, or ingest through it with --url."
        )
    return f"the index is unavailable: {text}"
