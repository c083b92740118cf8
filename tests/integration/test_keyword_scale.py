"""The keyword floor's scale (`ingest.keyword_scale`) on a small real KB: the share of the
question's attainable BM25 score a passage reaches does not move with the KB's size or the
question's length, where the raw BM25 score does (the real BM25 model, Qdrant Edge).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.retrieval.answering import keyword_share
from ingest.embedder.embedding import FastEmbedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Leg, LegKind, Passage, org_collection
from ingest.payload import PassagePayload, Scope, text_checksum

pytestmark = pytest.mark.slow

DOCUMENTS = {
    "harbour": "The ferry to the island leaves the harbour every morning at seven and "
    "returns at dusk.",
    "tea": "Green tea holds catechins and a moderate amount of caffeine, less than coffee.",
    "bread": "Sourdough bread rises overnight with a culture of wild yeast and lactic bacteria.",
    "volcano": "Volcanic eruptions release lava, ash and sulfur dioxide into the atmosphere.",
    "rust": "The Rust language guarantees memory safety without a garbage collector.",
    "cats": "Domestic cats purr when content and often hunt mice and birds at night.",
    "bees": "Honey bees dance to tell the hive where flowers with nectar grow, at night too.",
    "glacier": "Glaciers carve deep valleys as the ice flows slowly downhill under its weight.",
}
#: Sizes of the KB: the documents alone, then with this many unrelated documents more.
PADDING = (0, 40, 160)
SCOPE = Scope.of(org_id="acme", tenant_id="t", kb_ids=["kb"])
COLLECTION = org_collection("acme")
WORDS = sorted({word.strip(".,").lower() for text in DOCUMENTS.values() for word in text.split()})


def _unrelated(count: int) -> dict[str, str]:
    """Documents of made-up words no question holds."""
    rng = random.Random(count)
    syllables = ["ka", "lo", "mi", "ter", "sun", "vra", "pel", "dor", "quin", "zu", "bex"]
    return {
        f"filler-{n}": " ".join("".join(rng.choices(syllables, k=3)) for _ in range(18))
        for n in range(count)
    }


def _passages(embedder: FastEmbedder, documents: Mapping[str, str]) -> list[Passage]:
    texts = list(documents.values())
    embeddings = embedder.embed_documents(texts)
    whole = embedder.embed_document_keywords(texts)
    return [
        Passage(
            point_id=str(uuid.uuid5(uuid.NAMESPACE_URL, doc)),
            dense=embedding.dense,
            sparse=embedding.sparse,
            document_sparse=document_sparse,
            payload=PassagePayload(
                tenant_id="t",
                knowledge_base_id="kb",
                org_id="acme",
                document_id=doc,
                document_version="v1",
                passage_index=0,
                classification="internal",
                text=text,
                title="",
                source="",
                checksum=text_checksum(text),
                indexed_at="2026-01-01T00:00:00+00:00",
            ),
        )
        for (doc, text), embedding, document_sparse in zip(
            documents.items(), embeddings, whole, strict=True
        )
    ]


@pytest.fixture(scope="module")
def knowledge_bases(
    embedder: FastEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, BlockingIndex]]:
    """The same documents in KBs of 8, 48 and 168 documents (by padding)."""
    indexes: dict[int, BlockingIndex] = {}
    for padding in PADDING:
        index = BlockingIndex(EdgeIndex(tmp_path_factory.mktemp(f"kb-{padding}")))
        index.upsert(COLLECTION, _passages(embedder, {**DOCUMENTS, **_unrelated(padding)}))
        indexes[padding] = index
    yield indexes
    for opened in indexes.values():
        opened.close()


def _best(index: BlockingIndex, embedder: FastEmbedder, question: str) -> list[tuple[float, float]]:
    """(raw BM25, share of the attainable score) of the best hit of each keyword leg."""
    sparse = embedder.embed_queries([question])[0].sparse
    legs = [
        Leg(kind=LegKind.KEYWORD, sparse=sparse, limit=3),
        Leg(kind=LegKind.DOCUMENT_KEYWORD, sparse=sparse, limit=3),
    ]
    ranked = index.rank(COLLECTION, SCOPE, legs)
    idf = index.keyword_idf(COLLECTION, SCOPE, legs)
    return [
        (hits[0].score, keyword_share(hits[0].score, leg, term_idf))
        for leg, hits, term_idf in zip(legs, ranked.legs, idf, strict=True)
    ]


@settings(max_examples=25, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=8, unique=True))
def test_the_share_does_not_move_with_the_size_of_the_kb(
    knowledge_bases: dict[int, BlockingIndex], embedder: FastEmbedder, words: list[str]
) -> None:
    """For any question made of the KB's words, the best hit's share of the attainable
    score stays within 0.05 whether the KB holds 8, 48 or 168 documents: unrelated
    documents raise every term's IDF, and the attainable score with it."""
    question = " ".join(words)
    if not embedder.embed_queries([question])[0].sparse.indices:
        return  # only stopwords: no keyword leg runs
    found = [_best(index, embedder, question) for index in knowledge_bases.values()]
    for leg in range(2):
        shares = [best[leg][1] for best in found]
        assert max(shares) - min(shares) <= 0.05, (question, found)
        assert all(0.0 < share < 1.0 for share in shares)


def test_raw_scores_move_with_size_and_length_where_the_share_does_not(
    knowledge_bases: dict[int, BlockingIndex], embedder: FastEmbedder
) -> None:
    """Questions of 2, 4 and 6 words the harbour note alone holds: the raw BM25 of its
    passage grows with the question's length and with the KB's size (a fixed BM25 floor
    would mean something else in each KB and for each question), its share is the same."""
    questions = ["ferry harbour", "ferry harbour island morning",
                 "ferry harbour island morning dusk returns"]  # fmt: skip
    raw: dict[tuple[int, str], float] = {}
    shares: set[float] = set()
    for padding, index in knowledge_bases.items():
        for question in questions:
            (score, share), _ = _best(index, embedder, question)
            raw[(padding, question)] = score
            shares.add(round(share, 4))
    assert len(shares) == 1
    assert raw[(0, questions[2])] > 2.5 * raw[(0, questions[0])]
    assert raw[(160, questions[0])] > 2 * raw[(0, questions[0])]


def test_a_question_about_something_else_matches_little_of_its_weight(
    knowledge_bases: dict[int, BlockingIndex], embedder: FastEmbedder
) -> None:
    """Words the KB lacks count in the attainable score and in no passage's: a question
    half about the harbour and half about chess reaches a much lower share than the
    harbour question alone, in every KB."""
    for index in knowledge_bases.values():
        (_, alone), _ = _best(index, embedder, "ferry harbour island")
        (_, mixed), _ = _best(index, embedder, "ferry harbour island chess grandmaster opening")
        assert mixed < 0.6 * alone
