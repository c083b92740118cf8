"""The document writer (`ingest.sync`) on real engines with the real model.

Every test runs on Qdrant Edge (the embedded default) and on qdrant-client local
mode. Corpora are a handful of short documents: the model is the slow part.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from gateway.retrieval.versions import newest_versions
from ingest.chunking import ChunkingParams, split_sentences
from ingest.embedder.embedding import Embedder, Embedding, FastEmbedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Hit, Leg, LegKind, SparseVector
from ingest.payload import Classification, Scope
from ingest.sync import Document, DocumentWriter, Target

pytestmark = pytest.mark.slow

ORG = "acme"
TARGET = Target(org_id=ORG, tenant_id="t-sync", kb_id="manuals", storage="org")
COLLECTION = TARGET.collection


class CountingEmbedder:
    """Delegates to the real embedder and counts what it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.document_calls = 0
        self.document_texts = 0

    @property
    def dense_dim(self) -> int:
        return self._inner.dense_dim

    def embed_documents(self, texts: Sequence[str], *, lane: str = "") -> list[Embedding]:
        self.document_calls += 1
        self.document_texts += len(texts)
        return self._inner.embed_documents(texts, lane=lane)

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        return self._inner.embed_queries(texts)

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return self._inner.embed_document_keywords(texts)


class CrashBeforeCleanup:
    """An Index whose next `delete_points` fails, as if the process died mid-replacement."""

    def __init__(self, inner: BlockingIndex) -> None:
        self._inner = inner
        self.armed = True

    def delete_points(self, collection: str, scope: Scope, point_ids: Sequence[str]) -> int:
        if self.armed:
            self.armed = False
            raise RuntimeError("simulated crash between writing and cleaning up")
        return self._inner.delete_points(collection, scope, point_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture(params=["edge", "local"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlockingIndex]:
    """A fresh, empty index: Qdrant Edge in a temp dir, or qdrant-client in memory."""
    engine: BlockingIndex = (
        BlockingIndex(EdgeIndex(tmp_path / "data"))
        if request.param == "edge"
        else BlockingIndex(ServerIndex.local(None))
    )
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def counting(embedder: FastEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


def scope(*, strict: bool = True) -> Scope:
    return Scope.of(
        org_id=ORG,
        tenant_id=TARGET.tenant_id,
        kb_ids=[TARGET.kb_id],
        clearance=Classification.RESTRICTED,
        strict=strict,
    )


def both_legs(
    index: BlockingIndex, embedder: Embedder, question: str, where: Scope
) -> list[list[Hit]]:
    """The dense and the keyword leg's hits for one question, no floors."""
    query = embedder.embed_queries([question])[0]
    legs = [
        Leg(LegKind.DENSE, dense=query.dense, limit=100),
        Leg(LegKind.KEYWORD, sparse=query.sparse, limit=100),
    ]
    result = index.query(COLLECTION, where, legs)
    return [list(hits) for hits in result.legs]


def manual(release: int, sections: int) -> str:
    """A document whose versions share vocabulary, so both legs always match every version."""
    return " ".join(
        f"Release {release} of the pump maintenance manual, section {part}, says to check "
        f"the seals and bearings of pump number {part} every {release + part} weeks."
        for part in range(sections)
    )


# ---- unchanged documents ----------------------------------------------------------------


def test_unchanged_document_is_not_reembedded(
    index: BlockingIndex, counting: CountingEmbedder
) -> None:
    """Putting the same document again answers `unchanged` and embeds nothing; any change
    to the text or the label is a new version and is embedded once."""
    writer = DocumentWriter(index, counting)
    doc = Document("pumps.txt", manual(1, 12), Classification.INTERNAL, title="Pumps")

    first = writer.put(TARGET, doc)
    assert first.status == "indexed"
    assert first.passages > 1
    assert (counting.document_calls, counting.document_texts) == (1, first.passages)

    again = writer.put(TARGET, doc)
    assert again.status == "unchanged"
    assert again.passages == first.passages
    assert (counting.document_calls, counting.document_texts) == (1, first.passages)

    changed = writer.put(TARGET, Document("pumps.txt", manual(2, 12), Classification.INTERNAL))
    assert changed.status == "indexed"
    assert counting.document_calls == 2
    relabelled = writer.put(
        TARGET, Document("pumps.txt", manual(2, 12), Classification.CONFIDENTIAL)
    )
    assert relabelled.status == "indexed"
    assert counting.document_calls == 3
    assert (
        writer.put(TARGET, Document("pumps.txt", manual(2, 12), Classification.CONFIDENTIAL)).status
        == "unchanged"
    )
    assert counting.document_calls == 3
    assert index.count(COLLECTION, scope()) == relabelled.passages


# ---- replacement ---------------------------------------------------------------------


def test_replacement_never_shows_both_versions_or_neither(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """While a writer replaces a document again and again, a concurrent reader querying both
    legs always sees exactly one version of it once superseded hits are dropped with
    `newest_versions` — never a mix, never nothing."""
    writer = DocumentWriter(
        index, embedder, chunking=ChunkingParams(max_words=40, overlap_words=10)
    )
    versions = [manual(release, 4 + release % 3) for release in range(1, 9)]
    writer.put(TARGET, Document("pumps.txt", versions[0], Classification.INTERNAL))
    query = embedder.embed_queries(["pump maintenance manual seals bearings"])[0]
    legs = [
        Leg(LegKind.DENSE, dense=query.dense, limit=100),
        Leg(LegKind.KEYWORD, sparse=query.sparse, limit=100),
    ]
    where = scope()
    done = threading.Event()
    problems: list[str] = []
    observations = 0
    raw_overlaps = 0

    def reader() -> None:
        nonlocal observations, raw_overlaps
        try:
            while not done.is_set():
                result = index.query(COLLECTION, where, legs)
                hits = [hit for leg in result.legs for hit in leg]
                seen = {hit.payload.document_version for hit in newest_versions(hits)}
                raw_overlaps += len({hit.payload.document_version for hit in hits}) > 1
                observations += 1
                if len(seen) != 1 or any(not leg for leg in result.legs):
                    problems.append(f"observation {observations}: versions {sorted(seen)}")
        except Exception as error:  # a dead reader must fail the test, not pass it quietly
            problems.append(f"reader failed: {error!r}")

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for text in [*versions[1:], versions[0], versions[3]]:
            outcome = writer.put(TARGET, Document("pumps.txt", text, Classification.INTERNAL))
            assert outcome.status == "indexed"
            time.sleep(0.01)
    finally:
        done.set()
        thread.join(timeout=60)
    assert not problems, problems[:5]
    assert observations >= 10, "the reader barely ran; the test proved nothing"
    final = index.scroll_document(COLLECTION, where, "pumps.txt")
    assert {stored.payload.document_version for stored in final} == {
        writer.version_of(Document("pumps.txt", versions[3], Classification.INTERNAL))
    }
    # How often the reader caught the replacement mid-way (informative, timing-dependent).
    print(f"{observations} observations, {raw_overlaps} saw two versions before filtering")  # noqa: T201


def test_half_finished_replacement_converges_on_reput(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """A replacement that wrote the new version but died before removing the old one leaves
    both stored; putting the document again removes the stale points and answers `indexed`,
    and a further put is `unchanged`."""
    old = Document("pumps.txt", manual(1, 10), Classification.INTERNAL)
    new = Document("pumps.txt", manual(2, 6), Classification.INTERNAL)
    writer = DocumentWriter(index, embedder)
    writer.put(TARGET, old)

    crashing = DocumentWriter(cast(BlockingIndex, CrashBeforeCleanup(index)), embedder)
    with pytest.raises(RuntimeError, match="simulated crash"):
        crashing.put(TARGET, new)
    stored = index.scroll_document(COLLECTION, scope(), "pumps.txt")
    assert {s.payload.document_version for s in stored} == {
        writer.version_of(old),
        writer.version_of(new),
    }
    # Readers are still safe while it is half done: the newest version wins.
    hits = both_legs(index, embedder, "pump manual", scope())
    assert {h.payload.document_version for h in newest_versions(hits[0] + hits[1])} == {
        writer.version_of(new)
    }

    healed = writer.put(TARGET, new)
    assert healed.status == "indexed"
    assert healed.removed == len(stored) - healed.passages
    after = index.scroll_document(COLLECTION, scope(), "pumps.txt")
    assert {s.payload.document_version for s in after} == {writer.version_of(new)}
    assert len(after) == healed.passages
    assert writer.put(TARGET, new).status == "unchanged"


# ---- deletes -------------------------------------------------------------------------


def test_deleted_document_is_gone_from_both_legs(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """After a delete, neither the dense nor the keyword leg returns any passage of the
    document, counts and scrolls see none, and the other document is untouched."""
    writer = DocumentWriter(index, embedder)
    gone = Document(
        "volcanoes.md",
        "Basaltic lava flows from shield volcanoes travel far. Stratovolcanoes erupt "
        "explosively and build steep cones of ash and pumice.",
        Classification.PUBLIC,
        title="Volcanoes",
    )
    stays = Document(
        "glaciers.md",
        "Glaciers carve U-shaped valleys as they advance. Meltwater from retreating "
        "glaciers leaves moraines and kettle lakes behind.",
        Classification.PUBLIC,
        title="Glaciers",
    )
    writer.put(TARGET, gone)
    writer.put(TARGET, stays)
    question = "Which volcanoes erupt explosively with ash and pumice?"
    dense, keyword = both_legs(index, embedder, question, scope())
    assert dense[0].payload.document_id == "volcanoes.md"
    assert keyword[0].payload.document_id == "volcanoes.md"

    deleted = writer.delete(TARGET, "volcanoes.md")
    assert deleted >= 1
    for leg in both_legs(index, embedder, question, scope()):
        assert {hit.payload.document_id for hit in leg} <= {"glaciers.md"}
    glacier_legs = both_legs(index, embedder, "glaciers moraines kettle lakes", scope())
    assert all(leg and leg[0].payload.document_id == "glaciers.md" for leg in glacier_legs)
    assert index.count(COLLECTION, scope(), "volcanoes.md") == 0
    assert index.scroll_document(COLLECTION, scope(), "volcanoes.md") == []
    assert index.document_ids(COLLECTION, scope()) == {"glaciers.md"}
    assert writer.delete(TARGET, "volcanoes.md") == 0


# ---- boundaries ----------------------------------------------------------------------


def test_boundary_sentences_are_found_whole(index: BlockingIndex, embedder: FastEmbedder) -> None:
    """In a long document cut into many overlapping passages, every sentence is stored whole
    in at least one passage, and a keyword search for a word that only one sentence has
    returns only passages that hold that sentence whole."""
    sentences = [
        f"Inspection note {n}: valve marker zq{n}x on the northern pipeline showed "
        f"{['steady', 'rising', 'falling'][n % 3]} pressure, so the crew logged it."
        for n in range(60)
    ]
    text = " ".join(sentences)
    writer = DocumentWriter(index, embedder)
    outcome = writer.put(TARGET, Document("pipeline.txt", text, Classification.INTERNAL))
    assert outcome.passages >= 5  # about 1,200 words: several windows, several boundaries
    assert split_sentences(text) == sentences

    stored = [s.payload.text for s in index.scroll_document(COLLECTION, scope(), "pipeline.txt")]
    assert len(stored) == outcome.passages
    for sentence in sentences:
        assert any(sentence in passage for passage in stored), sentence

    for n in (0, 13, 27, 41, 59):
        sentence = sentences[n]
        _, keyword = both_legs(index, embedder, f"zq{n}x", scope())
        assert keyword, sentence
        assert all(sentence in hit.payload.text for hit in keyword), sentence


def test_a_documents_words_are_found_whole_on_its_first_passage(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """The writer gives a document's first passage the BM25 vector of the whole document:
    the document keyword leg finds the document by words that only its later passages hold,
    once per document, and a new version carries the new text's words."""
    sentences = [
        f"Inspection note {n}: the crew checked pump {n} on the northern pipeline."
        for n in range(40)
    ]
    text = " ".join([*sentences, "The last note mentions a zebrafish in the intake."])
    writer = DocumentWriter(index, embedder)
    assert writer.put(TARGET, Document("notes.txt", text, Classification.INTERNAL)).passages >= 3
    writer.put(TARGET, Document("other.txt", "Pumps and pipelines.", Classification.INTERNAL))

    def whole_document_hits(question: str) -> list[tuple[str, int]]:
        query = embedder.embed_queries([question])[0]
        leg = Leg(LegKind.DOCUMENT_KEYWORD, sparse=query.sparse, limit=100)
        [hits] = index.query(COLLECTION, scope(), [leg]).legs
        return [(hit.payload.document_id, hit.payload.passage_index) for hit in hits]

    assert whole_document_hits("zebrafish") == [("notes.txt", 0)]
    assert sorted(whole_document_hits("pipeline")) == [("notes.txt", 0), ("other.txt", 0)]
    replaced = text.replace("zebrafish", "heron")
    writer.put(TARGET, Document("notes.txt", replaced, Classification.INTERNAL))
    assert whole_document_hits("zebrafish") == []
    assert whole_document_hits("heron") == [("notes.txt", 0)]


# ---- legacy points -------------------------------------------------------------------


def test_legacy_points_hidden_by_strict_scope_until_backfill(
    index: BlockingIndex, counting: CountingEmbedder
) -> None:
    """Points written without `orgId` are invisible to a strict Scope (queries and counts)
    but visible to a non-strict one; `backfill_org` sets the org on all of them, after which
    the strict Scope finds them, a second backfill changes nothing, and the document is
    `unchanged`."""
    writer = DocumentWriter(index, counting)
    doc = Document(
        "legacy.txt",
        "The archive room keeps the original blueprints of the lighthouse. "
        "Visitors must sign the ledger before handling them.",
        Classification.INTERNAL,
    )
    written = writer.put(TARGET, doc, legacy=True)
    assert written.status == "indexed"
    question = "Where are the lighthouse blueprints kept?"

    assert index.count(COLLECTION, scope(strict=True)) == 0
    assert all(not leg for leg in both_legs(index, counting, question, scope(strict=True)))
    assert index.count(COLLECTION, scope(strict=False)) == written.passages
    assert all(leg for leg in both_legs(index, counting, question, scope(strict=False)))

    assert index.backfill_org(COLLECTION, scope(strict=False)) == written.passages
    assert index.count(COLLECTION, scope(strict=True)) == written.passages
    strict_legs = both_legs(index, counting, question, scope(strict=True))
    assert all(leg and leg[0].payload.org_id == ORG for leg in strict_legs)
    assert index.backfill_org(COLLECTION, scope(strict=False)) == 0

    calls = counting.document_calls
    assert writer.put(TARGET, doc).status == "unchanged"
    assert counting.document_calls == calls


def test_backfill_touches_only_the_scoped_tenant(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """A backfill for one workspace leaves another workspace's legacy points without an org."""
    other = Target(org_id=ORG, tenant_id="t-other", kb_id="manuals", storage="org")
    writer = DocumentWriter(index, embedder)
    doc = Document("same-id.txt", "Shared words about pumps and seals.", Classification.PUBLIC)
    writer.put(TARGET, doc, legacy=True)
    writer.put(other, doc, legacy=True)

    assert index.backfill_org(COLLECTION, scope(strict=False)) >= 1
    assert index.count(COLLECTION, scope(strict=True)) >= 1

    def other_scope(*, strict: bool) -> Scope:
        return Scope.of(org_id=ORG, tenant_id="t-other", kb_ids=["manuals"], strict=strict)

    assert index.count(COLLECTION, other_scope(strict=True)) == 0
    assert index.count(COLLECTION, other_scope(strict=False)) >= 1


def test_passages_are_stored_with_their_pii_analysis(
    index: BlockingIndex, embedder: FastEmbedder
) -> None:
    """With an analyzer, every passage carries the spans found in its text and in the
    document's title, offsets into the stored strings; re-putting an unchanged document
    whose analysis is another analyzer's stores the current one without re-embedding."""
    from ingest.payload import PiiAnalysis
    from tests.support.redactor import shared_redactor

    analyzer = shared_redactor()
    counting = CountingEmbedder(embedder)
    writer = DocumentWriter(index, counting, analyzer=analyzer)
    text = "Margaret Thompson approved it. " + "Filler words keep going here. " * 40
    document = Document("memo", text, Classification.INTERNAL, title="Memo for jo@example.com")
    assert writer.put(TARGET, document).status == "indexed"
    stored = index.scroll_document(COLLECTION, TARGET.write_scope(), "memo")
    assert len(stored) > 1
    for passage in stored:
        pii = passage.payload.pii
        assert pii is not None
        assert pii.analyzer == analyzer.analyzer_version
        assert pii.fits(passage.payload.text, passage.payload.title)
        (email,) = [span for span in pii.title if span.entity_type == "EMAIL_ADDRESS"]
        assert passage.payload.title[email.start : email.end] == "jo@example.com"
    first = stored[0].payload
    assert first.pii is not None
    person = [s for s in first.pii.text if s.entity_type == "PERSON"]
    assert [first.text[s.start : s.end] for s in person] == ["Margaret Thompson"]

    older = {p.point_id: PiiAnalysis(analyzer="pii-0-older") for p in stored}
    index.set_pii(COLLECTION, TARGET.write_scope(), older)
    calls = counting.document_calls
    assert writer.put(TARGET, document).status == "unchanged"
    assert counting.document_calls == calls
    again = index.scroll_document(COLLECTION, TARGET.write_scope(), "memo")
    assert [p.payload.pii for p in again] == [p.payload.pii for p in stored]
