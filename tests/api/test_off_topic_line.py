"""A KB's measured off-topic line as its turns' dense floor, over HTTP on the real model."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from gateway.retrieval.off_topic_line import LINE_LOWEST, line_from_best, load_probes
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, gateway_config, served, serving
from tests.api.tenants import Tenant, provision
from tests.support.redactor import shared_redactor

pytestmark = pytest.mark.anyio

#: documents on everyday subjects, near several of the probes' topics
EVERYDAY = {
    "salmon": "Bake the salmon fillet at 200 degrees for twelve minutes, skin side down.",
    "sourdough": "Feed the sourdough starter with flour and water the night before baking bread.",
    "puppy": "A puppy needs several small meals a day and short walks until it is six months old.",
    "tomatoes": "Plant tomatoes in full sun after the last frost and water them deeply.",
    "running": "Training for a first marathon takes about sixteen weeks of gradually longer runs.",
    "offside": "A football player is offside when nearer the goal line than the ball and defender.",
    "budget": "Put aside part of every paycheck into a savings account for emergencies.",
    "tyres": "Check your car's tyre pressure once a month and before long drives.",
    "films": "The film won the Academy Award for best picture and best director.",
    "winter": "Winter days are short and cold, and snow often falls in January.",
}
TECHNICAL = {
    "fsync": "fsync flushes a file descriptor's dirty pages to the storage device.",
    "btree": "A B-tree keeps keys sorted in pages so lookups touch few disk blocks.",
    "tls": "The TLS handshake negotiates cipher suites and verifies the server certificate.",
}


def expected_line(embedder: Embedder, texts: list[str]) -> float:
    """The line computed apart from the gateway: exact cosines of probes and passages."""
    probes = load_probes()
    questions = np.array([e.dense for e in embedder.embed_queries([p.text for p in probes])])
    passages = np.array([e.dense for e in embedder.embed_documents(texts)])
    best = (questions @ passages.T).max(axis=1)
    return line_from_best((p.topic, float(b)) for p, b in zip(probes, best, strict=True))


async def _score_threshold(
    tenant: Tenant, key: str = "all", *, settled: bool = True
) -> tuple[float, str]:
    """The KB's dense floor in a turn's `effective`; `settled`: once its line is measured
    (the first turns of a Scope are served the platform default meanwhile)."""
    for _ in range(200):
        body = (await tenant.retrieve("bot", "How do I keep cut flowers fresh?", key=key)).json()
        per_kb = body["effective"]["per_knowledge_base"]["kb"]
        found = per_kb["score_threshold"], per_kb["sources"]["score_threshold"]
        if not settled or found[1] != "platform":
            return found
        await asyncio.sleep(0.05)
    return found


async def _tenant(gw: Gateway, tenant_id: str, documents: dict[str, str], **kb: object) -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    await tenant.kb("kb", **kb)
    for doc_id, text in documents.items():
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    return tenant


async def test_a_kb_with_no_floor_set_uses_its_measured_line(
    gateway: Gateway, embedder: Embedder
) -> None:
    """The line a turn uses is the one the probes' exact cosines give: high for a KB of
    everyday subjects, the lowest for a technical one."""
    everyday = await _tenant(gateway, "home", EVERYDAY)
    technical = await _tenant(gateway, "infra", TECHNICAL)
    line, source = await _score_threshold(everyday)
    assert source == "measured"
    assert line == pytest.approx(expected_line(embedder, list(EVERYDAY.values())), abs=0.002)
    assert line > LINE_LOWEST + 0.05
    assert await _score_threshold(technical) == (LINE_LOWEST, "measured")


async def test_a_set_floor_overrides_the_line(gateway: Gateway) -> None:
    """The KB's own `score_threshold`, else the agent's, wins over the measured line."""
    tenant = await _tenant(gateway, "home", EVERYDAY, score_threshold=0.3)
    assert await _score_threshold(tenant) == (0.3, "knowledge_base")
    await tenant.kb("kb")
    await tenant.agent("bot", ["kb"], score_threshold=0.35)
    assert await _score_threshold(tenant) == (0.35, "agent")


async def test_the_operator_can_turn_lines_off(tmp_path: Path, embedder: Embedder) -> None:
    """With `KBGATE_OFF_TOPIC_LINE=off` the platform default serves, as before lines."""
    lines_off: dict[str, object] = {"defaults.off_topic_line": False}
    async with serving(tmp_path, embedder, "edge", **lines_off) as gw:
        tenant = await _tenant(gw, "home", EVERYDAY)
        assert await _score_threshold(tenant, settled=False) == (0.44, "platform")
        await asyncio.sleep(1)
        assert await _score_threshold(tenant, settled=False) == (0.44, "platform")


async def test_a_line_depends_only_on_what_the_key_may_read(
    gateway: Gateway, embedder: Embedder
) -> None:
    """Restricted everyday documents raise a restricted key's line, never an internal
    key's: its line is the one of a KB holding only the documents it may read."""
    tenant = await _tenant(gateway, "mixed", TECHNICAL)
    for doc_id, text in EVERYDAY.items():
        await tenant.doc("kb", doc_id, text, classification="restricted")
    await tenant.issue("internal", ["retrieve"], clearance="internal")
    low, _ = await _score_threshold(tenant, key="internal")
    high, _ = await _score_threshold(tenant)
    assert low == pytest.approx(expected_line(embedder, list(TECHNICAL.values())), abs=0.002)
    everything = [*TECHNICAL.values(), *EVERYDAY.values()]
    assert high == pytest.approx(expected_line(embedder, everything), abs=0.002)
    assert high > low


@pytest.fixture
async def clocked(tmp_path: Path, embedder: Embedder) -> AsyncIterator[tuple[Gateway, list[float]]]:
    """A gateway whose measured lines age by the clock `now[0]`, which the test moves on."""
    now = [0.0]
    config, logs = gateway_config(tmp_path / "data"), io.StringIO()
    services = await build_services(
        config,
        Telemetry(build_logger("DEBUG", logs)),
        embedder=embedder,
        redactor=shared_redactor(),
        clock=lambda: now[0],
    )
    async with served(services, logs, config) as gateway:
        yield gateway, now


async def test_a_line_is_measured_again_once_its_kb_changed(
    clocked: tuple[Gateway, list[float]],
) -> None:
    """A known line serves until it is a minute old; then a turn has the KB's points
    counted, and the line measured again in the background when they changed."""
    gateway, now = clocked
    tenant = await _tenant(gateway, "grows", TECHNICAL)
    assert await _score_threshold(tenant) == (LINE_LOWEST, "measured")
    for doc_id, text in EVERYDAY.items():
        await tenant.doc("kb", doc_id, text)
    assert await _score_threshold(tenant) == (LINE_LOWEST, "measured")
    now[0] = 61.0
    assert await _score_threshold(tenant) == (LINE_LOWEST, "measured")
    for _ in range(200):
        line, _ = await _score_threshold(tenant)
        if line > LINE_LOWEST:
            break
        await asyncio.sleep(0.05)
    assert line > LINE_LOWEST


async def test_a_line_is_not_measured_again_for_a_small_change(
    clocked: tuple[Gateway, list[float]],
) -> None:
    """A KB that gained no more than a tenth of its points since its line was measured
    keeps that line when rechecked; once the changes pass a tenth it is measured again."""
    gateway, now = clocked
    tenant = await _tenant(gateway, "steady", EVERYDAY)
    await _score_threshold(tenant)
    measured = await _measurements(gateway)
    await tenant.doc("kb", "fsync", TECHNICAL["fsync"])  # 11 points against 10
    now[0] = 61.0
    await _score_threshold(tenant)
    await asyncio.sleep(2)
    assert await _measurements(gateway) == measured
    for doc_id, text in TECHNICAL.items():
        await tenant.doc("kb", f"more-{doc_id}", text)  # 14 against 10
    now[0] = 122.0
    await _score_threshold(tenant)
    for _ in range(200):
        if await _measurements(gateway) > measured:
            break
        await asyncio.sleep(0.05)
    assert await _measurements(gateway) == measured + 1


async def _measurements(gateway: Gateway) -> float:
    """The gateway's count of line measurements so far (`/metrics`)."""
    metrics = (await gateway.client.get("/metrics", headers=gateway.platform)).text
    prefix = 'kbgate_events_total{event="off_topic_lines_measured"} '
    found = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return float(found[0].removeprefix(prefix)) if found else 0.0


async def test_a_kb_shows_the_line_its_callers_turns_use(gateway: Gateway) -> None:
    """GET /v1/knowledge-bases/{kb_id} shows an unset `score_threshold` as the platform
    default until a turn under the caller's own Scope has measured its line, then as that
    line: a line measured for a key of another clearance never shows; a KB's own setting
    shows as set."""
    tenant = await _tenant(gateway, "home", EVERYDAY)
    await tenant.issue("internal", ["retrieve"], clearance="internal")

    async def shown() -> tuple[float, str]:
        response = await gateway.client.get("/v1/knowledge-bases/kb", headers=tenant.headers())
        assert response.status_code == 200, response.text
        found = response.json()["effective"]["score_threshold"]
        return found["value"], found["source"]

    assert await shown() == (0.44, "platform")
    assert (await _score_threshold(tenant, key="internal"))[1] == "measured"
    assert await shown() == (0.44, "platform")
    line = await _score_threshold(tenant)
    assert line[1] == "measured"
    assert await shown() == line
    await tenant.kb("kb", score_threshold=0.3)
    assert await shown() == (0.3, "knowledge_base")


async def test_the_line_decides_whether_a_kb_answers(gateway: Gateway, embedder: Embedder) -> None:
    """A question whose best passage lies between the platform default (0.44) and the KB's
    line abstains; the same documents under the default floor answer it."""
    tenant = await _tenant(gateway, "home", EVERYDAY, keyword_floor=0.99)
    await tenant.kb("fixed", score_threshold=0.44, keyword_floor=0.99)
    for doc_id, text in EVERYDAY.items():
        await tenant.doc("fixed", doc_id, text)
    await tenant.agent("fixed-bot", ["fixed"])
    question = "What vegetables grow in shade?"
    passages = np.array([e.dense for e in embedder.embed_documents(list(EVERYDAY.values()))])
    best = float((passages @ np.array(embedder.embed_queries([question])[0].dense)).max())
    line, source = await _score_threshold(tenant)
    assert source == "measured"
    assert 0.44 <= best < line
    assert (await tenant.retrieve("bot", question)).json()["abstained"] is True
    assert (await tenant.retrieve("fixed-bot", question)).json()["abstained"] is False


async def test_turns_arriving_together_wait_for_one_measurement(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A Scope's first turns are served the platform default at once, and all of them
    together start one measurement of its line, which later turns then use."""
    async with serving(tmp_path, embedder) as gw:
        tenant = await _tenant(gw, "busy", EVERYDAY)
        first = await asyncio.gather(*(_score_threshold(tenant, settled=False) for _ in range(4)))
        assert set(first) == {(0.44, "platform")}
        line, source = await _score_threshold(tenant)
        assert source == "measured"
        assert line > LINE_LOWEST
        metrics = (await gw.client.get("/metrics", headers=gw.platform)).text
    assert 'kbgate_events_total{event="off_topic_lines_measured"} 1.0' in metrics


async def test_a_restarted_gateway_serves_the_kept_line_from_its_first_turn(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Measured lines are kept in the settings store: the next gateway process on the same
    data dir shows a KB's line before any turn and serves it from the Scope's first turn,
    measuring nothing; a deleted KB's lines go with it."""
    async with serving(tmp_path, embedder) as gw:
        tenant = await _tenant(gw, "home", EVERYDAY)
        line, source = await _score_threshold(tenant)
        assert source == "measured"
        assert line > LINE_LOWEST
    async with serving(tmp_path, embedder) as again:
        restarted = Tenant(again, tenant.org_id, tenant.tenant_id, dict(tenant.keys))
        shown = await again.client.get("/v1/knowledge-bases/kb", headers=tenant.headers())
        assert shown.json()["effective"]["score_threshold"] == {
            **shown.json()["effective"]["score_threshold"],
            "value": line,
            "source": "measured",
        }
        assert await _score_threshold(restarted, settled=False) == (line, "measured")
        await asyncio.sleep(1)  # the recount a kept line is due for: nothing moved
        assert await _measurements(again) == 0.0
        deleted = await again.client.delete("/v1/knowledge-bases/kb", headers=tenant.headers())
        assert deleted.status_code == 200
    async with serving(tmp_path, embedder) as third:
        recreated = Tenant(third, tenant.org_id, tenant.tenant_id, dict(tenant.keys))
        await recreated.kb("kb")
        await recreated.agent("bot", ["kb"])
        for doc_id, text in EVERYDAY.items():
            await recreated.doc("kb", doc_id, text)
        assert await _score_threshold(recreated, settled=False) == (0.44, "platform")


async def test_a_deleted_kbs_line_is_forgotten(gateway: Gateway) -> None:
    """A KB deleted and created again under its id starts without a line: its first turn is
    served the platform default while the new KB's line is measured."""
    tenant = await _tenant(gateway, "home", EVERYDAY)
    assert (await _score_threshold(tenant))[1] == "measured"
    deleted = await gateway.client.delete("/v1/knowledge-bases/kb", headers=tenant.headers())
    assert deleted.status_code == 200
    await tenant.kb("kb")
    await tenant.agent("bot", ["kb"])
    for doc_id, text in EVERYDAY.items():
        await tenant.doc("kb", doc_id, text)
    assert await _score_threshold(tenant, settled=False) == (0.44, "platform")


async def test_the_joint_line_answers_a_question_its_words_bring_over_it(
    gateway: Gateway, embedder: Embedder
) -> None:
    """Under measured lines a question whose best passage lies below the dense line is
    answered when its cosine and its keyword share together reach the joint line; with
    the same dense floor set on the KB (no lines, no joint line) it abstains."""
    tenant = await _tenant(gateway, "home", EVERYDAY, keyword_floor=0.99)
    question = "short walks months"
    passages = np.array([e.dense for e in embedder.embed_documents(list(EVERYDAY.values()))])
    cosine = float((passages @ np.array(embedder.embed_queries([question])[0].dense)).max())
    line, _ = await _score_threshold(tenant)
    body = (await tenant.retrieve("bot", question)).json()
    joint = body["effective"]["per_knowledge_base"]["kb"]["joint_line"]
    assert cosine < line < joint
    assert body["abstained"] is False
    assert body["passages"][0]["document_id"] == "puppy"

    await tenant.kb("kb", keyword_floor=0.99, score_threshold=line)
    pinned = (await tenant.retrieve("bot", question)).json()
    assert pinned["effective"]["per_knowledge_base"]["kb"]["joint_line"] is None
    assert pinned["abstained"] is True
