"""Synthetic multi-tenant corpora for `bench.scale`, made of SciFact's real passages.

What is real and what is replayed, plainly:

- **Base material, real**: SciFact's abstracts, chunked by kbgate's chunker; each passage
  embedded once by the real model (dense MiniLM and BM25, as `DocumentWriter` embeds
  them) and each abstract's whole-document BM25 vector. Cached in the work dir
  (`base-<docs>.npz` and `.json`), so only the first run pays for the model.
- **Synthetic documents, replayed**: a synthetic document is a copy of one base abstract
  (its title, its passages' texts, their BM25 vectors and the whole-document vector,
  replayed as they are, so the keyword legs see real term statistics) written into one
  knowledge base of one workspace with one classification. Its passages' dense vectors
  are the base passage's vector plus half the vector of another passage of the same
  topic plus isotropic noise (norm 0.25), normalised: copies of one abstract differ, and
  stay on the model's manifold rather than on a random sphere. Questions are embedded
  by the real model.
- **Layout**: 1,000 workspaces over 50 organizations, Zipf-sized (the workspace of rank r
  gets a share proportional to 1/r, so `ws0000` is the largest at every size), 1-5
  knowledge bases each (one in five stored in `kb_shared`, the rest in the org's
  collection; KB ids `kb0`... repeat across workspaces), each KB drawing its abstracts
  from 3 of 64 topics (k-means over the base passages); classifications public,
  internal, confidential, restricted at 40/30/20/10 % per document. `Layout.single` is
  one workspace with one KB drawing from every topic instead (`bench.migration_turns`
  fills a KB made over the HTTP API with it).
- **PII, real when asked for** (`load_pii`, cached in the work dir per analyzer version):
  each base passage's text and each abstract's title analysed by the gateway's
  recognizers; `PassageStream(pii=...)` stores it with every copy, as a write with the
  analyzer does. Without it, passages carry none (the gateway analyses a passage when a
  turn first returns it; `bench.scale` turns redaction off instead).
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedder.embedding import Embedder
from ingest.index import Passage, SparseVector, Storage
from ingest.payload import (
    CLASSIFICATION_ORDER,
    Classification,
    PassagePayload,
    PiiAnalysis,
    PiiSpan,
    text_checksum,
)
from ingest.sync import Document, DocumentWriter, PassageAnalyzer, Target, embedding_input, point_id

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
WORKSPACES = 1000
ORGS = 50
MAX_KBS = 5
SHARED_SHARE = 0.2
TOPICS = 64
TOPICS_PER_KB = 3
LABEL_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
#: how much of another same-topic passage a synthetic passage's dense vector mixes in
MIX = 0.5
NOISE_NORM = 0.25
WRITE_BATCH = 1000
SOURCE = "scale-bench"
INDEXED_AT = "2026-01-01T00:00:00+00:00"

Vectors = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


@dataclass(frozen=True, slots=True)
class Base:
    """The real material: abstracts, their passages and the model's vectors of them."""

    titles: list[str]
    texts: list[str]
    passage_texts: list[str]
    #: per passage: its abstract, and its position in it
    passage_doc: Ints
    passage_index: Ints
    dense: Vectors
    sparse: list[SparseVector]
    #: per abstract: whole-document BM25, and the positions of its passages
    doc_sparse: list[SparseVector]
    doc_start: Ints
    doc_count: Ints
    #: per abstract: its topic; per topic: its abstracts and its passages
    doc_topic: Ints

    def topic_docs(self) -> list[Ints]:
        return [np.flatnonzero(self.doc_topic == t) for t in range(TOPICS)]

    def topic_passages(self) -> list[Ints]:
        passage_topic = self.doc_topic[self.passage_doc]
        return [np.flatnonzero(passage_topic == t) for t in range(TOPICS)]


def load_base(work_dir: Path, embedder: Embedder, docs: int | None) -> Base:
    """SciFact's first `docs` abstracts (all when None), chunked and embedded; cached."""
    corpus = _read_jsonl(DATASET / "corpus.jsonl")[:docs]
    stem = work_dir / f"base-{len(corpus)}"
    if not stem.with_suffix(".npz").exists():
        _embed_base(corpus, embedder, stem)
    return _read_base(stem)


def _embed_base(corpus: list[dict[str, Any]], embedder: Embedder, stem: Path) -> None:
    titles = [str(doc.get("title", "")) for doc in corpus]
    texts = [str(doc["text"]) for doc in corpus]
    passages: list[tuple[int, int, str]] = []
    for number, text in enumerate(texts):
        chunks = chunk_text(text, ChunkingParams()) or [text]
        passages.extend((number, position, chunk) for position, chunk in enumerate(chunks))
    started = time.perf_counter()
    dense: list[tuple[float, ...]] = []
    sparse: list[SparseVector] = []
    for start in range(0, len(passages), 64):
        batch = passages[start : start + 64]
        found = embedder.embed_documents([embedding_input(titles[d], t) for d, _, t in batch])
        dense.extend(e.dense for e in found)
        sparse.extend(e.sparse for e in found)
        rate = len(dense) / (time.perf_counter() - started)
        print(f"  base: {len(dense)}/{len(passages)} passages ({rate:.0f}/s)", file=sys.stderr)
    whole = embedder.embed_document_keywords(
        [embedding_input(title, text) for title, text in zip(titles, texts, strict=True)]
    )
    doc_topic = _topics(np.asarray(dense, dtype=np.float32), [p[0] for p in passages], len(texts))
    np.savez_compressed(
        stem.with_suffix(".npz"),
        dense=np.asarray(dense, dtype=np.float32),
        doc_topic=doc_topic,
        **_packed("sparse", sparse),
        **_packed("doc_sparse", whole),
    )
    stem.with_suffix(".json").write_text(
        json.dumps(
            {
                "titles": titles,
                "texts": texts,
                "passages": [[d, p, t] for d, p, t in passages],
                "embedded_in_s": round(time.perf_counter() - started, 1),
            }
        )
    )


def _topics(dense: Vectors, passage_doc: Sequence[int], docs: int) -> Ints:
    """Each abstract's topic: k-means (cosine) over the passages, an abstract's topic the
    one most of its passages fall in (the first passage's on a tie)."""
    rng = np.random.default_rng(0)
    centres = dense[rng.choice(len(dense), size=TOPICS, replace=False)]
    for _ in range(15):
        assigned = np.argmax(dense @ centres.T, axis=1)
        for topic in range(TOPICS):
            members = dense[assigned == topic]
            if len(members):
                mean = members.mean(axis=0)
                centres[topic] = mean / np.linalg.norm(mean)
    assigned = np.argmax(dense @ centres.T, axis=1)
    votes: dict[int, list[int]] = defaultdict(list)
    for doc, topic in zip(passage_doc, assigned.tolist(), strict=True):
        votes[doc].append(topic)
    return np.asarray([max(votes[d], key=votes[d].count) for d in range(docs)], dtype=np.int64)


def _packed(name: str, vectors: Sequence[SparseVector]) -> dict[str, Any]:
    lengths = [len(v.indices) for v in vectors]
    return {
        f"{name}_indices": np.asarray([i for v in vectors for i in v.indices], dtype=np.int64),
        f"{name}_values": np.asarray([x for v in vectors for x in v.values], dtype=np.float32),
        f"{name}_offsets": np.cumsum([0, *lengths]).astype(np.int64),
    }


def _unpacked(arrays: Any, name: str) -> list[SparseVector]:
    indices = arrays[f"{name}_indices"].tolist()
    values = arrays[f"{name}_values"].tolist()
    offsets = arrays[f"{name}_offsets"].tolist()
    return [
        SparseVector(tuple(indices[a:b]), tuple(values[a:b]))
        for a, b in itertools.pairwise(offsets)
    ]


def _read_base(stem: Path) -> Base:
    meta = json.loads(stem.with_suffix(".json").read_text())
    arrays = np.load(stem.with_suffix(".npz"))
    passage_doc = np.asarray([p[0] for p in meta["passages"]], dtype=np.int64)
    counts = np.bincount(passage_doc, minlength=len(meta["titles"])).astype(np.int64)
    return Base(
        titles=meta["titles"],
        texts=meta["texts"],
        passage_texts=[p[2] for p in meta["passages"]],
        passage_doc=passage_doc,
        passage_index=np.asarray([p[1] for p in meta["passages"]], dtype=np.int64),
        dense=arrays["dense"],
        sparse=_unpacked(arrays, "sparse"),
        doc_sparse=_unpacked(arrays, "doc_sparse"),
        doc_start=(np.cumsum(counts) - counts).astype(np.int64),
        doc_count=counts,
        doc_topic=arrays["doc_topic"].astype(np.int64),
    )


class BasePii(msgspec.Struct, frozen=True, kw_only=True):
    """The real PII analysis of the base material, as a writer with an analyzer stores it
    (`ingest.sync`): the spans of each base passage's text and of each abstract's title."""

    analyzer: str
    passages: list[tuple[PiiSpan, ...]]
    titles: list[tuple[PiiSpan, ...]]

    def of(self, position: int, doc: int) -> PiiAnalysis:
        """The analysis a passage copied from base passage `position` of abstract `doc`
        carries (its text and title are the base's)."""
        return PiiAnalysis(
            analyzer=self.analyzer, text=self.passages[position], title=self.titles[doc]
        )


def load_pii(work_dir: Path, base: Base, analyzer: PassageAnalyzer) -> BasePii:
    """The base's passages and titles analysed by `analyzer`; cached per analyzer version."""
    path = work_dir / f"pii-{len(base.titles)}-{analyzer.analyzer_version}.json"
    if path.exists():
        return msgspec.json.decode(path.read_bytes(), type=BasePii)
    started = time.perf_counter()
    passages: list[tuple[PiiSpan, ...]] = []
    for start in range(0, len(base.passage_texts), 256):
        passages.extend(analyzer.analyze_texts(base.passage_texts[start : start + 256]))
        rate = len(passages) / (time.perf_counter() - started)
        print(
            f"  pii: {len(passages)}/{len(base.passage_texts)} passages ({rate:.0f}/s)",
            file=sys.stderr,
        )
    found = BasePii(
        analyzer=analyzer.analyzer_version,
        passages=passages,
        titles=analyzer.analyze_texts(base.titles),
    )
    path.write_bytes(msgspec.json.encode(found))
    return found


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    kb_id: str
    storage: Storage
    topics: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """Organizations, workspaces and their knowledge bases; the same at every size."""

    workspace_org: list[str]
    workspace_kbs: list[list[KnowledgeBase]]
    #: each workspace's tenant id (empty: `ws0000`, `ws0001`... by number)
    tenant_ids: tuple[str, ...] = ()

    @staticmethod
    def make(seed: int) -> Layout:
        rng = np.random.default_rng(seed)
        orgs = rng.integers(0, ORGS, size=WORKSPACES)
        kbs: list[list[KnowledgeBase]] = []
        for _ in range(WORKSPACES):
            count = int(rng.integers(1, MAX_KBS + 1))
            kbs.append(
                [
                    KnowledgeBase(
                        kb_id=f"kb{k}",
                        storage=Storage.SHARED if rng.random() < SHARED_SHARE else Storage.ORG,
                        topics=tuple(int(t) for t in rng.choice(TOPICS, TOPICS_PER_KB, False)),
                    )
                    for k in range(count)
                ]
            )
        return Layout([f"org{o:02d}" for o in orgs], kbs)

    @staticmethod
    def single(org_id: str, tenant_id: str, kb_id: str, storage: Storage, base: Base) -> Layout:
        """One workspace with one knowledge base drawing from every topic of the base (a
        KB made elsewhere, e.g. over the HTTP API, filled with the corpus)."""
        topics = tuple(int(t) for t in np.unique(base.doc_topic))
        kb = KnowledgeBase(kb_id=kb_id, storage=storage, topics=topics)
        return Layout([org_id], [[kb]], tenant_ids=(tenant_id,))

    @property
    def orgs(self) -> list[str]:
        return sorted(set(self.workspace_org))

    def tenant(self, workspace: int) -> str:
        return self.tenant_ids[workspace] if self.tenant_ids else f"ws{workspace:04d}"

    def target(self, workspace: int, kb: int) -> Target:
        spec = self.workspace_kbs[workspace][kb]
        return Target(
            org_id=self.workspace_org[workspace],
            tenant_id=self.tenant(workspace),
            kb_id=spec.kb_id,
            storage=spec.storage.value,
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """The synthetic documents of one store: per document its workspace, KB (index in the
    workspace), base abstract, label (index in `CLASSIFICATION_ORDER`) and passages."""

    workspace: Ints
    kb: Ints
    base_doc: Ints
    label: Ints
    passages: Ints
    first_number: int = 0

    @property
    def total(self) -> int:
        return int(self.passages.sum())

    def passages_of(self, workspace: int) -> int:
        return int(self.passages[self.workspace == workspace].sum())

    def in_scope(self, workspace: int, kbs: Sequence[int], clearance: Classification) -> Any:
        level = CLASSIFICATION_ORDER.index(clearance)
        return (self.workspace == workspace) & np.isin(self.kb, list(kbs)) & (self.label <= level)


def plan_documents(size: int, layout: Layout, base: Base, seed: int, first_number: int = 0) -> Plan:
    """Documents whose passages add up to `size` (the last abstract cut short to fit), over
    the layout's workspaces by Zipf share."""
    rng = np.random.default_rng(seed)
    workspaces = len(layout.workspace_kbs)
    weights = 1 / np.arange(1, workspaces + 1)
    expected = math.ceil(size / float(base.doc_count.mean()) * 1.2) + 10
    workspace = rng.choice(workspaces, size=expected, p=weights / weights.sum())
    kb_counts = np.asarray([len(kbs) for kbs in layout.workspace_kbs])
    kb = (rng.random(expected) * kb_counts[workspace]).astype(np.int64)
    topic_docs = base.topic_docs()
    base_doc = np.empty(expected, dtype=np.int64)
    for number in range(expected):
        spec = layout.workspace_kbs[workspace[number]][kb[number]]
        pool = topic_docs[spec.topics[int(rng.integers(0, len(spec.topics)))]]
        base_doc[number] = pool[int(rng.integers(0, len(pool)))]
    label = rng.choice(len(CLASSIFICATION_ORDER), size=expected, p=LABEL_WEIGHTS)
    passages = base.doc_count[base_doc].copy()
    ends = np.cumsum(passages)
    last = int(np.searchsorted(ends, size))
    passages[last] -= int(ends[last] - size)
    keep = slice(0, last + 1)
    return Plan(
        workspace=workspace[keep].astype(np.int64),
        kb=kb[keep],
        base_doc=base_doc[keep],
        label=label[keep].astype(np.int64),
        passages=passages[keep],
        first_number=first_number,
    )


class PassageStream:
    """A plan's passages as the writer would make them (`Passage` with the payload
    contract's `PassagePayload`, `sync.point_id`, the writer's document version), grouped
    by collection in batches of `WRITE_BATCH`. With `pii`, each carries its text's and
    title's analysis, as a writer with an analyzer stores it; without, none (the gateway
    then analyses a passage when a turn first returns it)."""

    def __init__(
        self,
        plan: Plan,
        layout: Layout,
        base: Base,
        writer: DocumentWriter,
        seed: int,
        *,
        pii: BasePii | None = None,
    ) -> None:
        self._plan = plan
        self._pii = pii
        self._layout = layout
        self._base = base
        self._writer = writer
        self._rng = np.random.default_rng(seed)
        self._topic_passages = base.topic_passages()

    def batches(self) -> Iterator[tuple[str, list[Passage]]]:
        pending: dict[str, list[Passage]] = defaultdict(list)
        for number in range(len(self._plan.passages)):
            target = self._layout.target(
                int(self._plan.workspace[number]), int(self._plan.kb[number])
            )
            pending[target.collection].extend(self._document(number, target))
            if len(pending[target.collection]) >= WRITE_BATCH:
                yield target.collection, pending.pop(target.collection)
        yield from pending.items()

    def _document(self, number: int, target: Target) -> list[Passage]:
        base, plan = self._base, self._plan
        doc = int(plan.base_doc[number])
        count = int(plan.passages[number])
        positions = np.arange(base.doc_start[doc], base.doc_start[doc] + count)
        document = Document(
            document_id=f"doc{plan.first_number + number:07d}",
            text=base.texts[doc],
            classification=CLASSIFICATION_ORDER[int(plan.label[number])],
            title=base.titles[doc],
            source=SOURCE,
        )
        version = self._writer.version_of(document)
        dense = self._dense(positions, int(base.doc_topic[doc]))
        return [
            Passage(
                point_id=point_id(target, document.document_id, version, index),
                dense=tuple(dense[index].tolist()),
                sparse=base.sparse[position],
                payload=PassagePayload(
                    tenant_id=target.tenant_id,
                    knowledge_base_id=target.kb_id,
                    org_id=target.org_id,
                    document_id=document.document_id,
                    document_version=version,
                    passage_index=index,
                    classification=document.classification.value,
                    text=base.passage_texts[position],
                    title=document.title,
                    source=SOURCE,
                    checksum=text_checksum(base.passage_texts[position]),
                    indexed_at=INDEXED_AT,
                    pii=self._pii.of(position, doc) if self._pii is not None else None,
                ),
                document_sparse=base.doc_sparse[doc] if index == 0 else None,
            )
            for index, position in enumerate(positions.tolist())
        ]

    def _dense(self, positions: Ints, topic: int) -> Vectors:
        pool = self._topic_passages[topic]
        others = self._base.dense[pool[self._rng.integers(0, len(pool), size=len(positions))]]
        noise = self._rng.standard_normal((len(positions), self._base.dense.shape[1]))
        noise *= NOISE_NORM / np.linalg.norm(noise, axis=1, keepdims=True)
        rows = self._base.dense[positions] + MIX * others + noise.astype(np.float32)
        unit: Vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
        return unit


def scifact_questions() -> list[str]:
    return [str(q["text"]) for q in _read_jsonl(DATASET / "queries.jsonl")]


def own_questions(plan: Plan, base: Base, mask: Any, count: int, seed: int) -> list[str]:
    """Questions a workspace asks of its own documents: the first 12 words of a passage of a
    random document inside the scope (`mask` over the plan's documents)."""
    rng = np.random.default_rng(seed)
    docs = np.flatnonzero(mask)
    if len(docs) == 0:
        return []
    questions = []
    for number in rng.choice(docs, size=count).tolist():
        doc = int(plan.base_doc[number])
        position = int(base.doc_start[doc] + rng.integers(0, plan.passages[number]))
        questions.append(" ".join(base.passage_texts[position].split()[:12]))
    return questions
