"""Keep a knowledge base in step with its documents: add, replace, leave alone, delete.

A document's `documentVersion` is a hash of everything that shapes its points
(text, title, classification, source, chunking and model). Point ids are derived
from tenant, KB, document, version and passage index, so a new version never
overwrites the old one in place. Replacement writes the new version first, then
deletes the old points; readers keep only the newest version of each document
(`gateway.retrieval.versions`), so no reader sees both versions or neither.

Each passage's text and its document's title are analysed for PII as they are written
(`PassageAnalyzer`, on a thread of its own while the embedder runs): the spans are stored
with the passage (`pii`), so that no recognizer runs when the passage is returned. A
short write (`INLINE_PASSAGES`: a single document of a few passages, as an interactive
PUT sends) is embedded and analysed in the calling thread instead: it then waits for no
runner behind another workspace's bulk write, and runs at the caller's priority.

Several documents of one KB can be written as one (`put_many`): their passages go to the
model in one pass (spread over the embedder's workers with no gap between documents) and
to the index in one upsert, so one durable flush serves them all.

Everything here is synchronous and CPU- or engine-bound: the gateway runs it in
worker threads, which call the index through `BlockingIndex` (each call bounded by the
index's deadline). A write takes a `pause` callable, called between two units of work
(`EMBED_SLICE` passages embedded, `ANALYSIS_SLICE` passages analysed, from either
thread): the gateway's expensive-work pool lends the write's run slot to another
workspace there. A write is never stopped half-way: `pause` only waits.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from ingest.background import lower_priority
from ingest.chunking import ChunkingParams, char_bound_applies, chunk_sections
from ingest.embedder.embedding import Embedder
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from ingest.index import DENSE_VECTOR, Passage, SparseVector, StoredPassage, collection_for
from ingest.keyword_terms import KEYWORD_ANALYSIS_VERSION, keyword_analysis_applies
from ingest.language import LanguageDetector
from ingest.pages import passage_pages
from ingest.payload import (
    Classification,
    PassagePayload,
    PiiAnalysis,
    PiiSpan,
    Scope,
    heading_path,
    text_checksum,
)
from ingest.structure import STRUCTURE_VERSION, structure_applies

_POINT_NAMESPACE = uuid.UUID("6f1c1f0e-4b7a-5c3e-9d2a-6b1e8a4c2d10")
SyncStatus = Literal["indexed", "unchanged"]


class EmbeddingFailedError(RuntimeError):
    """The model failed while a document was being indexed (before anything was written)."""


class AnalysisFailedError(RuntimeError):
    """The PII analyzer failed while a document was being indexed (nothing was written)."""


class PassageAnalyzer(Protocol):
    """Finds PII in texts as they are written (`gateway.safety.redaction.Redactor`)."""

    #: names the recognizers and their versions; stored with every analysis
    analyzer_version: str

    def analyze_texts(self, texts: Sequence[str]) -> list[tuple[PiiSpan, ...]]:
        """Every entity of every type it knows, in each text (offsets into that text)."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """The knowledge base a document belongs to, as the writer needs it: `models` are the
    dense models its passages are embedded with ("": the deployment's, the `dense`
    vectors), two while it migrates from one to the other."""

    org_id: str
    tenant_id: str
    kb_id: str
    storage: str
    models: tuple[str, ...] = ("",)

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
    """A document to write. `metadata`: its own fields, checked (`ingest.metadata`);
    `valid_from` / `valid_until`: when it answers (normalized RFC 3339, UTC)."""

    document_id: str
    text: str
    classification: Classification
    title: str = ""
    source: str = ""
    metadata: Mapping[str, Any] | None = None
    valid_from: str | None = None
    valid_until: str | None = None

    def described(self) -> dict[str, Any]:
        """What the document carries beside its text, as its version's checksum reads it
        (only what is set, so a document without any keeps its version)."""
        shape: dict[str, Any] = {}
        if self.metadata:
            shape["metadata"] = dict(self.metadata)
        if self.valid_from is not None:
            shape["valid_from"] = self.valid_from
        if self.valid_until is not None:
            shape["valid_until"] = self.valid_until
        return shape


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    status: SyncStatus
    passages: int
    removed: int = 0


#: Passages sent to the embedder between two pauses of a write.
EMBED_SLICE = 32
#: Passages analysed for PII between two pauses of a write.
ANALYSIS_SLICE = 16
#: A write of at most this many passages is embedded and analysed in the calling thread
#: (`DocumentWriter._passages`): a single short document, as an interactive PUT sends.
INLINE_PASSAGES = 4


def _go_on() -> None:
    """The default pause: never wait."""


class Stage(Protocol):
    """Wraps one stage of a write (a trace's span): its name and counts."""

    def __call__(self, name: str, **counts: int) -> AbstractContextManager[object]: ...


def _untimed(name: str, **counts: int) -> AbstractContextManager[object]:
    """The default stage: nothing around it."""
    return nullcontext()


def embedding_input(title: str, passage: str) -> str:
    """What is embedded for a passage: the title is part of what is indexed."""
    return f"{title}\n{passage}" if title else passage


@dataclass(frozen=True, slots=True)
class _Plan:
    """One document's write, as decided before any model runs."""

    document: Document
    version: str
    texts: list[str]
    #: each passage's bounded heading path (`heading_path`; None: none)
    headings: list[tuple[str, ...] | None]
    existing: Sequence[StoredPassage]

    @property
    def unchanged(self) -> bool:
        return _is_current(self.existing, self.version, len(self.texts))

    def stale(self, fresh: Sequence[Passage]) -> list[str]:
        """Stored points of this document that the fresh passages do not replace."""
        kept = {passage.point_id for passage in fresh}
        return [stored.point_id for stored in self.existing if stored.point_id not in kept]


class DocumentWriter:
    """Writes documents of one index through one embedder."""

    def __init__(
        self,
        index: BlockingIndex,
        embedder: Embedder,
        *,
        chunking: ChunkingParams | None = None,
        model_id: str = "default",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        analyzer: PassageAnalyzer | None = None,
        stage: Stage = _untimed,
        languages: LanguageDetector | None = None,
        models: DenseModels | None = None,
    ) -> None:
        """Without an `analyzer`, passages are written with no PII analysis (as before it
        existed): the gateway then analyses them when they are first returned. `stage`
        wraps each stage of a write (`ingest.plan`, `ingest.embed`, `ingest.write`): the
        gateway's traces. `models` gives the other dense models a target may name (None:
        only `embedder`)."""
        self._stage = stage
        #: the index the writer's calls go to, from the thread it runs in
        self.index = index
        self._embedder = embedder
        self._models = models
        self._analyzer = analyzer
        #: detects each passage's language as it is written (None: none recorded)
        self._languages = languages
        self._chunking = chunking or ChunkingParams()
        self._model_id = model_id
        self._clock = clock

    def version_of(self, document: Document) -> str:
        """The content checksum that decides `unchanged`."""
        shape: dict[str, object] = {
            "text": document.text,
            "title": document.title,
            "classification": document.classification.value,
            "source": document.source,
            "chunking": self._chunking_shape(document.text),
            "model": self._model_id,
            **document.described(),
        }
        if keyword_analysis_applies(f"{document.title}\n{document.text}"):
            shape["keywords"] = KEYWORD_ANALYSIS_VERSION
        encoded = json.dumps(shape, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(encoded).hexdigest()

    def _chunking_shape(self, text: str) -> list[int]:
        """The chunking parameters that decide the text's passages: the character bound
        and the structure's version only where they apply, so a document neither changes
        stays `unchanged`."""
        shape = [self._chunking.max_words, self._chunking.overlap_words]
        if char_bound_applies(text, self._chunking):
            shape.append(self._chunking.max_chars)
        if structure_applies(text):
            shape.append(-STRUCTURE_VERSION)
        return shape

    def put(
        self,
        target: Target,
        document: Document,
        *,
        legacy: bool = False,
        pause: Callable[[], None] = _go_on,
    ) -> SyncOutcome:
        """Index a new or changed document; leave an unchanged one alone.

        `legacy=True` writes points without `orgId`, as releases before org ids did
        (tests and migrations only; the HTTP API never sets it). `pause` is called
        between units of work (see the module's docstring).
        """
        (outcome,) = self.put_many(target, [document], legacy=legacy, pause=pause)
        return outcome

    def put_many(
        self,
        target: Target,
        documents: Sequence[Document],
        *,
        legacy: bool = False,
        pause: Callable[[], None] = _go_on,
    ) -> list[SyncOutcome]:
        """`put` for several documents of one KB (distinct ids), as one write: every new or
        changed document's passages embedded in one pass and upserted in one index call,
        then the points of their old versions deleted in one call. Outcomes in input order.
        A model or analyzer failure writes none of them.
        """
        if len({document.document_id for document in documents}) != len(documents):
            raise ValueError("a document id is given twice")
        scope = target.write_scope()
        with self._stage("ingest.plan", documents=len(documents)):
            plans = [self._plan(target, scope, document) for document in documents]
            for plan in plans:
                if plan.unchanged:
                    self._refresh_analyses(target, plan.document, plan.existing, pause)
        changed = [plan for plan in plans if not plan.unchanged]
        written: dict[str, SyncOutcome] = {}
        if changed:
            self.index.ensure_collection(target.collection)
            passages = sum(len(plan.texts) for plan in changed)
            with self._stage("ingest.embed", documents=len(changed), passages=passages):
                points = self._passages(target, changed, legacy=legacy, pause=pause)
            with self._stage("ingest.write", passages=passages):
                self.index.upsert(target.collection, [p for group in points for p in group])
                stale = [plan.stale(group) for plan, group in zip(changed, points, strict=True)]
                if any(stale):
                    old = [point for gone in stale for point in gone]
                    self.index.delete_points(target.collection, scope, old)
            for plan, group, gone in zip(changed, points, stale, strict=True):
                written[plan.document.document_id] = SyncOutcome("indexed", len(group), len(gone))
        return [
            written.get(plan.document.document_id) or SyncOutcome("unchanged", len(plan.existing))
            for plan in plans
        ]

    def delete(self, target: Target, document_id: str) -> int:
        """Remove every passage of the document from both legs; returns how many."""
        return self.index.delete_document(target.collection, target.write_scope(), document_id)

    def _plan(self, target: Target, scope: Scope, document: Document) -> _Plan:
        existing = self.index.scroll_document(target.collection, scope, document.document_id)
        chunks = chunk_sections(document.text, self._chunking)
        return _Plan(
            document=document,
            version=self.version_of(document),
            texts=[chunk.text for chunk in chunks],
            headings=[heading_path(chunk.path) for chunk in chunks],
            existing=existing,
        )

    def _refresh_analyses(
        self,
        target: Target,
        document: Document,
        existing: Sequence[StoredPassage],
        pause: Callable[[], None],
    ) -> None:
        """Analyse an unchanged document's passages again when their analysis is missing or
        another analyzer's (nothing is embedded again)."""
        analyzer = self._analyzer
        if analyzer is None or all(
            stored.payload.pii is not None
            and stored.payload.pii.analyzer == analyzer.analyzer_version
            for stored in existing
        ):
            return
        texts = [stored.payload.text for stored in existing]
        headings = [stored.payload.headings for stored in existing]
        analyses = _analyses(analyzer, document.title, texts, headings, pause)
        self.index.set_pii(
            target.collection,
            target.write_scope(),
            {stored.point_id: found for stored, found in zip(existing, analyses, strict=True)},
        )

    def _passages(
        self, target: Target, plans: Sequence[_Plan], *, legacy: bool, pause: Callable[[], None]
    ) -> list[list[Passage]]:
        """Each plan's points: every passage embedded and analysed, nothing written yet."""
        if sum(len(plan.texts) for plan in plans) <= INLINE_PASSAGES:
            # A short write (a single document of a few passages: an interactive PUT) runs
            # in the calling thread at its priority: no runner or analysis thread to wait
            # for behind another workspace's bulk write, no hop between threads.
            embeddings, wholes = self._embed(plans, pause, target, inline=True)
            analyses = self._analyse_inline(plans, pause)
        else:
            embeddings, wholes, analyses = self._embed_and_analyse(plans, pause, target)
        indexed_at = self._clock().isoformat()
        return [
            self._points(
                target,
                plan,
                embeddings[number],
                wholes[number],
                analyses[number] if analyses is not None else None,
                indexed_at=indexed_at,
                legacy=legacy,
            )
            for number, plan in enumerate(plans)
        ]

    def _embed_and_analyse(
        self, plans: Sequence[_Plan], pause: Callable[[], None], target: Target
    ) -> tuple[list[list[_Embedded]], list[SparseVector], list[list[PiiAnalysis]] | None]:
        """`_embed` on the embedder's runners, and the analysis beside it."""
        # The per-passage PII analysis runs on its own thread while the embedder runs: the
        # model spends much of a call outside the GIL, and the analysis keeps a core busy
        # meanwhile. Background priority, as the model's runners: turns come first.
        with ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="pii-analysis", initializer=lower_priority
        ) as pool:
            analysing: Future[list[list[PiiAnalysis]]] | None = None
            if self._analyzer is not None:
                analysing = pool.submit(_analyse_plans, self._analyzer, plans, pause)
            embeddings, wholes = self._embed(plans, pause, target)
            try:
                analyses = analysing.result() if analysing is not None else None
            except Exception as error:  # any analyzer failure: nothing has been written yet
                raise AnalysisFailedError("the PII analyzer failed; nothing was written") from error
        return embeddings, wholes, analyses

    def _analyse_inline(
        self, plans: Sequence[_Plan], pause: Callable[[], None]
    ) -> list[list[PiiAnalysis]] | None:
        """`_analyse_plans` in the calling thread (None without an analyzer)."""
        if self._analyzer is None:
            return None
        try:
            return _analyse_plans(self._analyzer, plans, pause)
        except Exception as error:  # any analyzer failure: nothing has been written yet
            raise AnalysisFailedError("the PII analyzer failed; nothing was written") from error

    def _embed(
        self,
        plans: Sequence[_Plan],
        pause: Callable[[], None],
        target: Target,
        *,
        inline: bool = False,
    ) -> tuple[list[list[_Embedded]], list[SparseVector]]:
        """Every plan's passages, `EMBED_SLICE` per embedder call with a pause between
        calls, in the workspace's lane of each of the target's models, and the whole
        documents' keyword vectors in one call; the passages' embeddings grouped back by
        plan."""
        inputs = [
            embedding_input(plan.document.title, text) for plan in plans for text in plan.texts
        ]
        whole_inputs = [embedding_input(plan.document.title, plan.document.text) for plan in plans]
        models = self._dense_models(target)
        try:
            flat: list[_Embedded] = []
            for start in range(0, len(inputs), EMBED_SLICE):
                pause()
                piece = inputs[start : start + EMBED_SLICE]
                flat.extend(_embedded_piece(models, piece, target.tenant_id, inline=inline))
            pause()
            wholes = self._embedder.embed_document_keywords(whole_inputs)
        except Exception as error:  # any model failure: nothing has been written yet
            raise EmbeddingFailedError("the embedder failed; nothing was written") from error
        grouped: list[list[_Embedded]] = []
        start = 0
        for plan in plans:
            grouped.append(flat[start : start + len(plan.texts)])
            start += len(plan.texts)
        return grouped, wholes

    def _dense_models(self, target: Target) -> list[tuple[str, Embedder]]:
        """(vector name, model) of each of the target's models, the deployment's first."""
        found: list[tuple[str, Embedder]] = []
        for model_id in sorted(set(target.models), key=lambda m: m != ""):
            if model_id == "" or (self._models and model_id == self._models.default_id):
                found.insert(0, (DENSE_VECTOR, self._embedder))
            elif self._models is None:
                raise EmbeddingFailedError(f"no model {model_id!r} here; nothing was written")
            else:
                found.append((self._models.vector(model_id), self._models.get(model_id)))
        if not found:
            raise ValueError("a target names no model")
        return list(dict(found).items())

    def _points(
        self,
        target: Target,
        plan: _Plan,
        embeddings: Sequence[_Embedded],
        whole: SparseVector,
        analyses: Sequence[PiiAnalysis] | None,
        *,
        indexed_at: str,
        legacy: bool,
    ) -> list[Passage]:
        document, version, texts = plan.document, plan.version, plan.texts
        detector = self._languages
        languages = [None] * len(texts) if detector is None else detector.detect_many(texts)
        pages = passage_pages(document.text, texts)
        return [
            Passage(
                point_id=point_id(target, document.document_id, version, position),
                dense=embedding.dense,
                sparse=embedding.sparse,
                dense_sets=embedding.dense_sets,
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
                    pii=analyses[position] if analyses is not None else None,
                    metadata=dict(document.metadata) if document.metadata else None,
                    valid_from=document.valid_from,
                    valid_until=document.valid_until,
                    language=languages[position],
                    page=pages[position],
                    headings=plan.headings[position],
                ),
                document_sparse=whole if position == 0 else None,
            )
            for position, (text, embedding) in enumerate(zip(texts, embeddings, strict=True))
        ]


@dataclass(frozen=True, slots=True)
class _Embedded:
    """One passage's vectors: `dense` (the deployment model's; empty when the target does
    not name it), BM25, and the other models' (`dense_<slug>` name, vector)."""

    dense: tuple[float, ...]
    sparse: SparseVector
    dense_sets: tuple[tuple[str, tuple[float, ...]], ...]


def _embedded_piece(
    models: Sequence[tuple[str, Embedder]], texts: list[str], lane: str, *, inline: bool
) -> list[_Embedded]:
    """`texts` embedded by every model (BM25 from the first), in `lane` (in the calling
    thread when `inline`)."""
    each = [
        (name, model.embed_documents(texts, lane=lane, inline=inline)) for name, model in models
    ]
    first = each[0][1]
    return [
        _Embedded(
            dense=next((found[i].dense for name, found in each if name == DENSE_VECTOR), ()),
            sparse=first[i].sparse,
            dense_sets=tuple(
                (name, found[i].dense) for name, found in each if name != DENSE_VECTOR
            ),
        )
        for i in range(len(texts))
    ]


def _analyse_plans(
    analyzer: PassageAnalyzer, plans: Sequence[_Plan], pause: Callable[[], None]
) -> list[list[PiiAnalysis]]:
    """The per-passage analysis step of a write: each plan's passages' PII, in order."""
    return [
        _analyses(analyzer, plan.document.title, plan.texts, plan.headings, pause) for plan in plans
    ]


def _analyses(
    analyzer: PassageAnalyzer,
    title: str,
    texts: Sequence[str],
    headings: Sequence[Sequence[str] | None],
    pause: Callable[[], None],
) -> list[PiiAnalysis]:
    """Each passage's analysis: its text's spans, and the title's and each heading's
    (each distinct one found once), in slices of `ANALYSIS_SLICE` texts with a pause
    before each."""
    distinct = list(dict.fromkeys(h for path in headings for h in path or ()))
    everything = [*texts, title, *distinct]
    analysed: list[tuple[PiiSpan, ...]] = []
    for start in range(0, len(everything), ANALYSIS_SLICE):
        pause()
        analysed.extend(analyzer.analyze_texts(everything[start : start + ANALYSIS_SLICE]))
    found, title_spans = analysed[: len(texts)], analysed[len(texts)]
    heading_spans = dict(zip(distinct, analysed[len(texts) + 1 :], strict=True))
    return [
        PiiAnalysis(
            analyzer=analyzer.analyzer_version,
            text=spans,
            title=title_spans,
            headings=tuple(heading_spans[h] for h in path or ()),
        )
        for spans, path in zip(found, headings, strict=True)
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
