"""`bench.scale_corpus` filling one KB, as `bench.migration_turns --replay-passages` does:
every passage lands in that KB's Scope of a real Edge store, in documents of a few passages
with distinct ids, each carrying the base's PII analysis; the analysis is cached."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.scale_corpus import Base, Layout, PassageStream, load_pii, plan_documents
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import SparseVector, Storage
from ingest.payload import PiiSpan, Scope
from ingest.sync import DocumentWriter
from tests.support.fake_embedder import FakeEmbedder

DIM = 8
#: passages per base abstract; abstracts 0-1 in topic 5, 2-3 in 9, 4-5 in 40
COUNTS = (1, 2, 3, 2, 1, 3)
TOPICS = (5, 5, 9, 9, 40, 40)


def _base() -> Base:
    rng = np.random.default_rng(1)
    passage_doc = np.repeat(np.arange(len(COUNTS)), COUNTS).astype(np.int64)
    dense = rng.standard_normal((len(passage_doc), DIM)).astype(np.float32)
    counts = np.asarray(COUNTS, dtype=np.int64)
    return Base(
        titles=[f"Ada title {d}" if d == 0 else f"Title {d}" for d in range(len(COUNTS))],
        texts=[f"abstract {d}" for d in range(len(COUNTS))],
        passage_texts=[f"Ada wrote {i}" if i == 0 else f"passage {i}" for i in range(12)],
        passage_doc=passage_doc,
        passage_index=np.concatenate([np.arange(c) for c in COUNTS]).astype(np.int64),
        dense=dense / np.linalg.norm(dense, axis=1, keepdims=True),
        sparse=[SparseVector((i,), (1.0,)) for i in range(len(passage_doc))],
        doc_sparse=[SparseVector((d,), (1.0,)) for d in range(len(COUNTS))],
        doc_start=(np.cumsum(counts) - counts).astype(np.int64),
        doc_count=counts,
        doc_topic=np.asarray(TOPICS, dtype=np.int64),
    )


class _Analyzer:
    """Finds "Ada" at the start of a text; counts the texts it read."""

    analyzer_version = "fake-analyzer-1"

    def __init__(self) -> None:
        self.read = 0

    def analyze_texts(self, texts: Sequence[str]) -> list[tuple[PiiSpan, ...]]:
        self.read += len(texts)
        return [(PiiSpan(0, 3, "PERSON", 0.9),) if t.startswith("Ada") else () for t in texts]


@pytest.fixture
def base() -> Base:
    return _base()


def test_the_pii_of_the_base_is_analysed_once_then_read_from_the_work_dir(
    tmp_path: Path, base: Base
) -> None:
    """Every base passage and title is analysed on the first call; the second call reads
    the cache and analyses nothing."""
    analyzer = _Analyzer()
    first = load_pii(tmp_path, base, analyzer)
    assert analyzer.read == len(base.passage_texts) + len(base.titles)
    again = load_pii(tmp_path, base, analyzer)
    assert analyzer.read == len(base.passage_texts) + len(base.titles)
    assert again == first
    assert first.of(0, 0).text == (PiiSpan(0, 3, "PERSON", 0.9),)
    assert first.of(1, 1).text == ()


def test_a_single_kb_layout_plans_documents_of_its_one_kb_from_every_topic(base: Base) -> None:
    """The plan's passages add up to the size; every document is the one workspace's one
    KB's, a copy of an abstract (its passage count, the last cut short), drawn from the
    base's topics only."""
    layout = Layout.single("acme", "ws-a", "kb1", Storage.ORG, base)
    assert layout.workspace_kbs[0][0].topics == (5, 9, 40)
    plan = plan_documents(200, layout, base, seed=3)
    assert plan.total == 200
    assert set(plan.workspace.tolist()) == {0}
    assert set(plan.kb.tolist()) == {0}
    assert (plan.passages[:-1] == base.doc_count[plan.base_doc[:-1]]).all()
    assert 1 <= plan.passages[-1] <= base.doc_count[plan.base_doc[-1]]


def test_replayed_passages_land_in_the_kbs_scope_with_their_analysis(
    tmp_path: Path, base: Base
) -> None:
    """Written through the Edge adapter: the KB's Scope holds every passage, in documents
    of distinct ids; another workspace's Scope holds none; each passage carries the tenant,
    org, KB and its base passage's PII analysis."""
    layout = Layout.single("acme", "ws-a", "kb1", Storage.ORG, base)
    target = layout.target(0, 0)
    plan = plan_documents(200, layout, base, seed=3)
    pii = load_pii(tmp_path, base, _Analyzer())
    index = BlockingIndex(EdgeIndex(tmp_path / "data", dense_dim=DIM))
    try:
        index.ensure_collection(target.collection)
        writer = DocumentWriter(index, FakeEmbedder(DIM), model_id="test-model")
        for collection, passages in PassageStream(plan, layout, base, writer, 3, pii=pii).batches():
            assert collection == target.collection
            index.upsert(collection, passages)
        scope = target.write_scope()
        assert index.count(target.collection, scope) == 200
        documents = index.document_ids(target.collection, scope)
        assert documents == {f"doc{n:07d}" for n in range(len(plan.passages))}
        other = Scope.of(org_id="acme", tenant_id="ws-b", kb_ids=["kb1"])
        assert index.count(target.collection, other) == 0
        stored = index.scroll_document(target.collection, scope, "doc0000000")
        assert len(stored) == plan.passages[0]
        doc = int(plan.base_doc[0])
        for passage in stored:
            payload = passage.payload
            assert (payload.tenant_id, payload.org_id, payload.knowledge_base_id) == (
                "ws-a",
                "acme",
                "kb1",
            )
            position = int(base.doc_start[doc]) + payload.passage_index
            assert payload.text == base.passage_texts[position]
            assert payload.pii == pii.of(position, doc)
    finally:
        index.close()
