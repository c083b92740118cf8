"""kbgate_client against the real app (real model, Qdrant Edge, SQLite), in process over
httpx's ASGI transport: typed answers, problem details as typed exceptions, Retry-After
honoured within bounds, and the key never in a log line, a repr or an error."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from kbgate_client import (
    AsyncClient,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    RateLimitedError,
    Retries,
    UnauthorizedError,
    UnavailableError,
)
from kbgate_client.models import (
    BulkDocument,
    CitationIn,
    CreateKey,
    PatchWorkspaceSettings,
    PutAgent,
    PutKnowledgeBase,
    RedactIn,
    TurnEffective,
)

from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
from tests.api.conftest import PLATFORM_KEY, Gateway, start_gateway
from tests.support.asgi import asgi_lifespan

pytestmark = pytest.mark.anyio

DOCUMENTS = [
    BulkDocument(
        document_id="guides/beacon",
        text="The lighthouse beacon guides ships past the reef at night.",
        title="Beacon",
        classification="internal",
    ),
    BulkDocument(document_id="unlabelled", text="A note without a label."),
]


class CountingTransport(httpx.AsyncBaseTransport):
    """The app's ASGI transport, counting the requests it carries."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return await self.inner.handle_async_request(request)


def _transport(gateway: Gateway) -> CountingTransport:
    return CountingTransport(httpx.ASGITransport(app=gateway.client.app))


async def _workspace(platform: AsyncClient) -> str:
    """An org, a workspace and an all-roles key; the key."""
    await platform.create_org("acme")
    await platform.create_workspace("acme", "ws")
    roles = ["admin", "ingest", "retrieve"]
    issued = await platform.create_key(CreateKey(org_id="acme", tenant_id="ws", roles=roles))
    return issued.key


@pytest.fixture
async def platform(gateway: Gateway) -> AsyncIterator[AsyncClient]:
    async with AsyncClient("http://kbgate", PLATFORM_KEY, transport=_transport(gateway)) as client:
        yield client


async def test_a_chat_backend_s_calls_answer_typed_structs(platform: AsyncClient) -> None:
    """Provisioning, a KB written in one bulk request (a document id with `/` included), an
    agent, then a turn: typed passages and `effective`, citations verified (one valid, one
    not returned), the grounding check, and redaction of a text."""
    kbgate = platform.with_key(await _workspace(platform))
    created = await kbgate.put_knowledge_base("kb", PutKnowledgeBase(name="Lights"))
    assert created.kb_id == "kb"
    results = [result async for result in kbgate.put_documents("kb", DOCUMENTS)]
    assert [(r.document_id, r.status) for r in results] == [
        ("guides/beacon", "indexed"),
        ("unlabelled", "held_back"),
    ]
    assert results[1].reason == "missing_classification"
    await kbgate.put_agent("bot", PutAgent(knowledge_base_ids=["kb"]))
    listed = await kbgate.list_documents("kb")
    assert [d.document_id for d in listed.documents] == ["guides/beacon"]

    turn = await kbgate.retrieve("bot", "What guides ships past the reef?")
    assert not turn.abstained
    assert isinstance(turn.effective, TurnEffective)
    assert turn.effective.knowledge_bases_queried == ["kb"]
    assert turn.effective.per_knowledge_base["kb"].fusion.dense > 0
    passage = turn.passages[0]
    assert (passage.document_id, passage.title) == ("guides/beacon", "Beacon")
    assert passage.passage_id in turn.context

    verdicts = await kbgate.verify_citations(
        turn.turn_id,
        [
            CitationIn(passage_id=passage.passage_id, quote="guides ships"),
            CitationIn(passage_id="never-returned"),
        ],
    )
    assert [v.passage_id for v in verdicts.valid] == [passage.passage_id]
    assert [v.reason for v in verdicts.invalid] == ["not_returned_in_turn"]
    grounded = await kbgate.check_grounding("bot", "A beacon guides ships past the reef.")
    assert grounded.status in {"supported", "flagged"}
    assert grounded.floor > 0
    redacted = await kbgate.redact(RedactIn(agent_id="bot", text="Mail jane.doe@example.com"))
    assert redacted.text == "Mail <EMAIL_ADDRESS>"

    settings = await kbgate.patch_workspace_settings(
        PatchWorkspaceSettings(max_knowledge_bases_per_agent=3)
    )
    assert settings.effective.max_knowledge_bases_per_agent.value == 3
    assert (await kbgate.delete_document("kb", "guides/beacon")).deleted_passages >= 1


async def test_refusals_raise_typed_problem_details(platform: AsyncClient) -> None:
    """401, 403, 404 and 422 raise their own exception class carrying the problem details
    (status, detail, the offending field)."""
    kbgate = platform.with_key(await _workspace(platform))
    with pytest.raises(UnauthorizedError) as unauthorized:
        await platform.with_key("not-a-key").list_knowledge_bases()
    assert unauthorized.value.status == 401
    with pytest.raises(ForbiddenError):
        await kbgate.create_org("other")
    with pytest.raises(NotFoundError) as missing:
        await kbgate.retrieve("ghost", "Anyone there?")
    assert missing.value.problem.status == 404
    with pytest.raises(InvalidInputError) as invalid:
        await kbgate.put_knowledge_base("kb", PutKnowledgeBase(top_k=0))
    assert invalid.value.field == "top_k"
    assert "top_k" in str(invalid.value)


async def test_429_is_retried_after_its_retry_after(tmp_path: Path, embedder: Embedder) -> None:
    """A key over its budget gets 429 with Retry-After (1 s at 2 calls a second): the client
    waits that long and tries again, so the call succeeds; with one attempt allowed, or a
    Retry-After beyond `max_wait_s`, it raises RateLimitedError with the wait asked for."""
    services, _, config = await start_gateway(
        tmp_path, embedder, rate_limit_per_s=1.0, rate_limit_burst=1
    )
    app = create_app(config, services)
    try:
        async with asgi_lifespan(app):
            transport = CountingTransport(
                httpx.ASGITransport(app=app)  # type: ignore[arg-type]  # Litestar types __call__ with its own ASGI event unions
            )
            async with AsyncClient("http://kbgate", PLATFORM_KEY, transport=transport) as client:
                await client.list_deletions()  # the burst
                started = time.monotonic()
                await client.list_deletions()  # 429 first, then after Retry-After
                waited = time.monotonic() - started
                assert transport.sent == 3
                assert waited >= 0.9
                impatient = client.with_key(PLATFORM_KEY)
                impatient.retries = Retries(max_wait_s=0.1)
                with pytest.raises(RateLimitedError) as limited:
                    await impatient.list_deletions()
                assert limited.value.retry_after_s is not None
                assert limited.value.retry_after_s >= 1
                assert transport.sent == 4  # not waited for: raised at once
    finally:
        await services.close()


async def test_503_is_retried_a_bounded_number_of_times(gateway: Gateway) -> None:
    """With the settings store down every call answers 503 with Retry-After: the client
    tries `attempts` times, then raises UnavailableError naming the dependency."""
    transport = _transport(gateway)
    async with AsyncClient(
        "http://kbgate",
        PLATFORM_KEY,
        transport=transport,
        retries=Retries(attempts=2, max_wait_s=5.0),
    ) as client:
        await gateway.services.store.close()
        with pytest.raises(UnavailableError) as unavailable:
            await client.create_org("acme")
    assert transport.sent == 2
    assert unavailable.value.status == 503
    assert unavailable.value.dependency == "store"


async def test_the_key_is_never_logged_shown_or_raised(
    platform: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """With every logger at DEBUG (httpx's and httpcore's included), calls that succeed and
    calls refused leave no trace of the key in a log record, the client's repr or an error."""
    caplog.set_level(logging.DEBUG)
    key = await _workspace(platform)
    kbgate = platform.with_key(key)
    await kbgate.put_knowledge_base("kb")
    errors: list[str] = []
    for call in (kbgate.get_agent("ghost"), kbgate.create_org("x")):
        try:
            await call
        except (NotFoundError, ForbiddenError) as error:
            errors.append(f"{error!s} {error!r} {error.problem!r}")
    assert len(errors) == 2
    shown = " ".join([caplog.text, repr(kbgate), repr(platform), *errors])
    assert key not in shown
    assert PLATFORM_KEY not in shown
