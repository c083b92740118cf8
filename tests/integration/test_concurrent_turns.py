"""Concurrent retrieval turns, on the real model and Qdrant Edge."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.retrieval import turn
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import FastEmbedder
from ingest.payload import Classification
from settings.config import load_config
from settings.records import Role

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ORG, TENANT, KB, AGENT = "batch-org", "batch-tenant", "facts", "helper"
#: a second KB of the agent, in the shared collection: turns rank two KBs
SECOND_KB = "office"
SECOND_DOCUMENTS = {
    "printer": "The printer on the second floor prints badges and parking permits on request.",
    "holidays": "Public holidays are listed in the staff calendar; leave requests go to HR.",
}

DOCUMENTS = {
    "leave": "Employees accrue 25 days of paid leave a year. Unused days carry over to March.",
    "laptop": "Every new hire receives a laptop on the first day; replacements take a week.",
    "parking": "Parking permits are issued by the facilities desk on the ground floor.",
    "expenses": "Travel expenses are reimbursed within 30 days when receipts are attached.",
    "security": "Badges must be worn visibly; lost badges are reported to security at once.",
    "canteen": "The canteen serves lunch from noon to two; vegetarian dishes are daily.",
}
QUESTIONS = [
    ("How many days of leave do I get?", []),
    ("When do I get my laptop?", ["new hire equipment"]),
    ("Where do I get a parking permit?", []),
    ("How fast are travel costs paid back?", ["expense reimbursement", "receipts"]),
    ("What if I lose my badge?", []),
    ("When is lunch served?", []),
    ("Can unused holidays be carried over?", []),
    ("Who issues permits for cars?", []),
]


@pytest.fixture
async def services(tmp_path: Path, embedder: FastEmbedder) -> AsyncIterator[Services]:
    """A gateway core with the question cache off, so every turn embeds its questions."""
    config = load_config({}, data_dir=tmp_path / "data", query_cache_size=0)
    built = await build_services(
        config, Telemetry(build_logger("WARNING", io.StringIO())), embedder=embedder
    )
    principal = _principal()
    await provisioning.create_org(built.store, built.index, ORG)
    await provisioning.create_workspace(built.store, ORG, TENANT, None)
    # Floors low enough that every question answers: the comparison needs passages.
    await knowledge.put_knowledge_base(
        built.knowledge,
        principal,
        KB,
        name="Facts",
        storage="org",
        settings={"score_threshold": 0.2},
    )
    await knowledge.put_knowledge_base(
        built.knowledge,
        principal,
        SECOND_KB,
        name="Office",
        storage="shared",
        settings={"score_threshold": 0.2},
    )
    await knowledge.put_agent(built.knowledge, principal, AGENT, [KB, SECOND_KB], {})
    for kb_id, documents in ((KB, DOCUMENTS), (SECOND_KB, SECOND_DOCUMENTS)):
        for document_id, text in documents.items():
            await knowledge.put_document(
                built.documents,
                principal,
                kb_id,
                document_id,
                text=text,
                classification="internal",
                title=document_id,
                source="test",
            )
    yield built
    await built.close()


def _principal() -> Principal:
    return Principal(
        key_id="batch-test",
        roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
        org_id=ORG,
        tenant_id=TENANT,
        clearance=Classification.RESTRICTED,
    )


def _count(services: Services, event: str) -> float:
    value = services.telemetry.registry.get_sample_value("kbgate_events_total", {"event": event})
    return value or 0.0


def _answer(result: turn.TurnResult) -> list[tuple[str, float, float | None, float | None]]:
    return [
        (c.point_id, round(c.score, 6), c.dense_score, c.keyword_score) for c in result.candidates
    ]


async def test_concurrent_turns_answer_as_sequential_ones(services: Services) -> None:
    """Eight turns at once over two KBs (their questions embedded side by side in the
    question threads) return the same passages, in the same order, with the same scores as
    the turns run one by one (each alone: its question embedded in its own thread while its
    KBs' keyword legs are ranked in another)."""
    principal = _principal()
    in_place = _count(services, "turn_embedded_in_place")
    sequential = [
        await turn.retrieve(services.retrieval, principal, AGENT, question, variations)
        for question, variations in QUESTIONS
    ]
    assert _count(services, "turn_embedded_in_place") - in_place == len(QUESTIONS)
    concurrent = await asyncio.gather(
        *(
            turn.retrieve(services.retrieval, principal, AGENT, question, variations)
            for question, variations in QUESTIONS
        )
    )
    for (question, _), one, other in zip(QUESTIONS, sequential, concurrent, strict=True):
        assert not one.abstained, question
        assert [c.point_id for c in other.candidates] == [c.point_id for c in one.candidates]
        for a, b in zip(_answer(one), _answer(other), strict=True):
            assert a[1] == pytest.approx(b[1], abs=1e-6)
            assert (a[2] or 0.0) == pytest.approx(b[2] or 0.0, abs=1e-4)
            assert (a[3] or 0.0) == pytest.approx(b[3] or 0.0, abs=1e-4)
        assert other.texts == one.texts


async def test_concurrent_embeddings_equal_the_embedders_own(services: Services) -> None:
    """Questions embedded for concurrent turns get exactly the vectors the model gives them
    on their own."""
    texts = [question for question, _ in QUESTIONS]
    direct = services.embedder.embed_queries(texts)
    batched = await asyncio.gather(
        *(services.query_embeddings.embed(TENANT, [text]) for text in texts)
    )
    for alone, [together] in zip(direct, batched, strict=True):
        assert together.sparse == alone.sparse
        assert together.dense == alone.dense
