"""Keep a knowledge base in step with its documents: add, replace, leave alone, delete.

A document's `documentVersion` is a hash of everything that shapes its points
(text, title, classification, source, chunking and model). Point ids are derived
from tenant, KB, document, version and passage index, so a new version never
overwrites the old one in place. Replacement writes the new version first, then
deletes the old points; readers keep only the newest version of each document
(`gateway.retrieval.versions`), so no reader sees both versions or neither.

Everything here is synchronous and CPU- or engine-bound: the gateway runs it in
worker threads.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedding import Embedder
from ingest.index import Index, Passage, StoredPassage, collection_for
from ingest.payload import Classification, PassagePayload, Scope, text_checksum

_POINT_NAMESPACE = uuid.UUID("6f1c1f0e-4b7a-5c3e-9d2a-6b1e8a4c2d10")
SyncStatus = Literal["indexed", "unchanged"]


class EmbeddingFailedError(RuntimeError):
    """The model failed while a document was being indexed (before anything was written)."""


@dataclass(frozen=True, slots=True)
class Target:
    """The knowledge base a document belongs to, as the writer needs it."""

    org_id: str
    tenant_id: str
    kb_id: str
    storage: str

    @property
    def collection(self) -> str:
        return collection_for(self.storage, self.org_id)

    def write_scope(self) -> Scope:
        """Everything of this KB, legacy points included: the writer's own view."""
        return Scope.of(
            org_id=self.org_id,
            tenant_id=self.tenant_id,
            kb_ids=[self.kb_id],
            clearance=Classification.RESTRICTED,
            strict=False,
        )


@dataclass(frozen=True, slots=True)
class Document:
    document_id: str
    text: str
    classification: Classification
    title: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    status: SyncStatus
    passages: int
    removed: int = 0


def embedding_input(title: str, passage: str) -> str:
    """What is embedded for a passage: the title is part of what is indexed."""
    return f"{title}\n{passage}" if title else passage


class DocumentWriter:
    """Writes documents of one index through one embedder."""

    def __init__(
        self,
        index: Index,
        embedder: Embedder,
        *,
        chunking: ChunkingParams | None = None,
        model_id: str = "default",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._index = index
        self._embedder = embedder
        self._chunking = chunking or ChunkingParams()
        self._model_id = model_id
        self._clock = clock

    def version_of(self, document: Document) -> str:
        """The content checksum that decides `unchanged`."""
        shape = {
            "text": document.text,
            "title": document.title,
            "classification": document.classification.value,
            "source": document.source,
            "chunking": [self._chunking.max_words, self._chunking.overlap_words],
            "model": self._model_id,
        }
        encoded = json.dumps(shape, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(encoded).hexdigest()

    def put(self, target: Target, document: Document, *, legacy: bool = False) -> SyncOutcome:
        """Index a new or changed document; leave an unchanged one alone.

        `legacy=True` writes points without `orgId`, as releases before org ids did
        (tests and migrations only; the HTTP API never sets it).
        """
        scope = target.write_scope()
        version = self.version_of(document)
        existing = self._index.scroll_document(target.collection, scope, document.document_id)
        texts = chunk_text(document.text, self._chunking)
        if _is_current(existing, version, len(texts)):
            return SyncOutcome("unchanged", len(existing))
        self._index.ensure_collection(target.collection)
        passages = self._passages(target, document, version, texts, legacy=legacy)
        self._index.upsert(target.collection, passages)
        fresh = {passage.point_id for passage in passages}
        stale = [stored.point_id for stored in existing if stored.point_id not in fresh]
        removed = self._index.delete_points(target.collection, scope, stale) if stale else 0
        return SyncOutcome("indexed", len(passages), removed)

    def delete(self, target: Target, document_id: str) -> int:
        """Remove every passage of the document from both legs; returns how many."""
        return self._index.delete_document(target.collection, target.write_scope(), document_id)

    def _passages(
        self,
        target: Target,
        document: Document,
        version: str,
        texts: Sequence[str],
        *,
        legacy: bool,
    ) -> list[Passage]:
        try:
            embeddings = self._embedder.embed_documents(
                [embedding_input(document.title, text) for text in texts]
            )
            (whole,) = self._embedder.embed_document_keywords(
                [embedding_input(document.title, document.text)]
            )
        except Exception as error:  # any model failure: nothing has been written yet
            raise EmbeddingFailedError("the embedder failed; nothing was written") from error
        indexed_at = self._clock().isoformat()
        return [
            Passage(
                point_id=point_id(target, document.document_id, version, position),
                dense=embedding.dense,
                sparse=embedding.sparse,
                payload=PassagePayload(
                    tenant_id=target.tenant_id,
                    knowledge_base_id=target.kb_id,
                    org_id=None if legacy else target.org_id,
                    document_id=document.document_id,
                    document_version=version,
                    passage_index=position,
                    classification=document.classification.value,
                    text=text,
                    title=document.title,
                    source=document.source,
                    checksum=text_checksum(text),
                    indexed_at=indexed_at,
                ),
                document_sparse=whole if position == 0 else None,
            )
            for position, (text, embedding) in enumerate(zip(texts, embeddings, strict=True))
        ]


def point_id(target: Target, document_id: str, version: str, position: int) -> str:
    """Deterministic: the same passage of the same version always has the same id."""
    name = "\x1f".join([target.tenant_id, target.kb_id, document_id, version, str(position)])
    return str(uuid.uuid5(_POINT_NAMESPACE, name))


def _is_current(existing: Sequence[StoredPassage], version: str, expected: int) -> bool:
    """Unchanged only if exactly the expected passages of this version are stored."""
    return (
        len(existing) == expected
        and expected > 0
        and all(stored.payload.document_version == version for stored in existing)
        and all(stored.payload.org_id is not None for stored in existing)
    )
