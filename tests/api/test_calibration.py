"""Golden sets, evaluations and applying their recommendation, over HTTP on a real
gateway (the real model, Qdrant Edge; SQLite, and Redis where a test says so).

The KB is six short policy documents; each golden question is answered by one of them
in every channel, and one also expects a document the KB does not hold (grade 2), so
its figures can be worked out by hand:

- three questions find their only document first: nDCG@10 1, recall 1;
- the fourth finds `security` (grade 1) first and misses `handbook` (grade 2):
  DCG = 1 / log2(2) = 1, ideal DCG = 2 / log2(2) + 1 / log2(3) = 2.6309, nDCG@10 0.3801,
  recall 1/2;
- means: nDCG@10 (3 + 0.3801) / 4 = 0.8450, recall@10 and @100 3.5 / 4 = 0.875.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, serving
from tests.api.tenants import Tenant, provision
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

DOCUMENTS = {
    "leave-policy": "Employees accrue 25 days of paid annual leave each year. Unused leave "
    "days carry over until the end of March. Requests for leave are approved by the team lead.",
    "parking": "Staff parking is on level two of the east garage. Visitors park on level one "
    "and register at the front desk. Bicycle racks stand next to the main entrance.",
    "expenses": "Travel expenses are reimbursed within thirty days of submitting receipts. "
    "Hotel costs above 150 euros a night need approval from finance. Meals are covered up "
    "to 40 euros a day.",
    "security": "Laptops must use full-disk encryption and lock the screen after five minutes. "
    "Report lost devices to the security team within one hour. Passwords are rotated every "
    "ninety days.",
    "onboarding": "New hires receive their laptop and badge on the first day. The onboarding "
    "course covers company values, tools and the code of conduct. A buddy helps each new hire "
    "during the first month.",
    "payroll": "Salaries are paid on the last working day of each month. Payslips are "
    "available in the HR portal. Overtime is paid at one and a half times the hourly rate.",
}
GOLDEN: dict[str, Any] = {
    "questions": [
        {
            "question": "How many days of paid annual leave do employees get?",
            "document_ids": ["leave-policy"],
        },
        {"question": "Where is staff parking in the garage?", "document_ids": ["parking"]},
        {
            "question": "When are travel expenses reimbursed?",
            "document_ids": ["expenses"],
            "grades": [2],
        },
        {
            "question": "Who do I report lost devices to?",
            "document_ids": ["security", "handbook"],
            "grades": [1, 2],
        },
    ]
}
HAND_NDCG_4 = 1 / (2 / math.log2(2) + 1 / math.log2(3))
HAND_NDCG = round((3 + HAND_NDCG_4) / 4, 4)
HAND_RECALL = 0.875


async def _tenant(gw: Gateway, tenant_id: str = "calibrated") -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    await tenant.kb("policies")
    for doc_id, text in DOCUMENTS.items():
        await tenant.doc("policies", doc_id, text)
    return tenant


async def _put_golden(tenant: Tenant, body: Any, kb_id: str = "policies") -> Any:
    return await tenant.gw.client.put(
        f"/v1/knowledge-bases/{kb_id}/golden-set", json=body, headers=tenant.headers()
    )


async def _start(tenant: Tenant, kb_id: str = "policies") -> Any:
    return await tenant.gw.client.post(
        f"/v1/knowledge-bases/{kb_id}/evaluations", headers=tenant.headers()
    )


async def _finished(tenant: Tenant, evaluation_id: str, kb_id: str = "policies") -> dict[str, Any]:
    """Poll the evaluation until it is no longer running."""
    path = f"/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}"
    for _ in range(600):
        response = await tenant.gw.client.get(path, headers=tenant.headers())
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["status"] != "running":
            return body
        await asyncio.sleep(0.2)
    raise AssertionError("the evaluation did not finish")


async def _evaluated(tenant: Tenant) -> dict[str, Any]:
    assert (await _put_golden(tenant, GOLDEN)).status_code == 200
    started = await _start(tenant)
    assert started.status_code == 202, started.text
    body = await _finished(tenant, started.json()["evaluation_id"])
    assert body["status"] == "done", body
    return body


# ---- golden sets ---------------------------------------------------------------------


async def test_golden_set_round_trips_and_refused_input_changes_nothing(gateway: Gateway) -> None:
    """A stored golden set reads back as sent (with who stored it); each rule broken answers
    422 naming the field and leaves the stored set as it was; an unknown KB is 404, and a
    KB without a golden set reads 404 too."""
    tenant = await _tenant(gateway)
    missing = await tenant.gw.client.get(
        "/v1/knowledge-bases/policies/golden-set", headers=tenant.headers()
    )
    assert missing.status_code == 404
    body = {**GOLDEN, "off_topic": ["What is the capital of Australia?"]}
    stored = await _put_golden(tenant, body)
    assert stored.status_code == 200, stored.text
    read = (
        await tenant.gw.client.get(
            "/v1/knowledge-bases/policies/golden-set", headers=tenant.headers()
        )
    ).json()
    assert read["questions"][3] == {**GOLDEN["questions"][3]}
    assert read["questions"][0] == GOLDEN["questions"][0]
    assert read["off_topic"] == ["What is the capital of Australia?"]
    assert read["updated_by"].startswith("key_")

    question = GOLDEN["questions"][0]
    refused = [
        ({"questions": []}, "questions"),
        ({"questions": [{**question, "grades": [1, 2]}]}, "questions[0].grades"),
        ({"questions": [{**question, "grades": [4]}]}, "questions"),
        ({"questions": [{**question, "document_ids": ["a b"]}]}, "questions[0].document_ids"),
        ({"questions": [{**question, "document_ids": ["a", "a"]}]}, "questions[0].document_ids"),
        ({"questions": [{**question, "question": "   "}]}, "questions[0].question"),
        ({"questions": [{**question, "question": "x" * 1001}]}, "questions"),
        ({"questions": [question] * 501}, "questions"),
        ({"questions": [question], "off_topic": [" "]}, "off_topic[0]"),
        ({"questions": [question], "extra": 1}, "extra"),
    ]
    for wrong, field in refused:
        answer = await _put_golden(tenant, wrong)
        assert answer.status_code == 422, (wrong, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert str(answer.json().get("field", "")).startswith(field), (field, answer.json())
    again = await tenant.gw.client.get(
        "/v1/knowledge-bases/policies/golden-set", headers=tenant.headers()
    )
    assert again.json() == read
    assert (await _put_golden(tenant, GOLDEN, kb_id="nope")).status_code == 404


async def test_an_evaluation_needs_a_golden_set(gateway: Gateway) -> None:
    """Starting an evaluation of a KB without a golden set answers 409 and records nothing."""
    tenant = await _tenant(gateway)
    refused = await _start(tenant)
    assert refused.status_code == 409
    assert refused.json()["field"] == "golden_set"
    listed = await tenant.gw.client.get(
        "/v1/knowledge-bases/policies/evaluations", headers=tenant.headers()
    )
    assert listed.json() == {"evaluations": []}


# ---- an evaluation's figures ---------------------------------------------------------


async def test_an_evaluations_figures_match_the_hand_checked_kb(gateway: Gateway) -> None:
    """The report's nDCG@10 and recall of every channel are the hand-computed ones; the
    built-in off-topic set served; the missing expected document is counted; the abstention
    the measurements predict equals the real turn's; the recommended floors keep answerable
    abstention within 5% and cut at least as many off-topic questions as the defaults; the
    grounding floor it recommends flags every other-domain answer and no more supported ones
    than the platform default; its cautions name a keyword floor of 0.9 or more, and not
    the 50 built-in off-topic questions; the current dense floor is the KB's measured
    line, as a turn's."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["policies"])
    body = await _evaluated(tenant)
    turn = (await tenant.retrieve("bot", "How many days of leave do I get?")).json()
    line = turn["effective"]["per_knowledge_base"]["policies"]
    assert line["sources"]["score_threshold"] == "measured"
    report = body["report"]
    assert body["progress"]["stage"] == "done"
    assert body["progress"]["done"] == body["progress"]["total"] > 0
    assert report["counts"] == {
        "questions": 4,
        "off_topic": 50,
        "off_topic_source": "built_in",
        "missing_documents": 1,
        "grounding_answers": 4,
    }
    for channel in ("dense", "keyword", "fused"):
        figures = report["channels"][channel]
        assert figures["ndcg_10"] == pytest.approx(HAND_NDCG, abs=1e-4), channel
        assert figures["recall_10"] == HAND_RECALL
        assert figures["recall_100"] == HAND_RECALL
    assert all(f["ndcg_10"] == pytest.approx(HAND_NDCG, abs=1e-4) for f in report["fusion"])

    current, recommended = report["current"], report["recommendation"]
    assert current["settings"]["score_threshold"] == line["score_threshold"]
    assert current["settings"]["grounding_floor"] == 0.7
    for outcome in (current, recommended):
        assert outcome["predicted"] == outcome["measured"]
    assert recommended["measured"]["answerable"] <= 0.05
    assert recommended["measured"]["off_topic"] >= current["measured"]["off_topic"]
    measured = recommended["measured"]
    expected_verdict = measured["answerable"] <= 0.05 and measured["off_topic"] >= 0.9
    assert recommended["meets_target"] is expected_verdict
    keyword_caution = [c for c in recommended["cautions"] if c.startswith("keyword_floor")]
    assert bool(keyword_caution) is (recommended["settings"]["keyword_floor"] >= 0.9)
    assert not [c for c in recommended["cautions"] if "off-topic questions" in c]  # 50 built in
    assert recommended["ndcg_10"] == pytest.approx(HAND_NDCG, abs=1e-4)
    assert "fusion" not in recommended["changes"]  # every pair of weights ranks alike here
    assert recommended["grounding"]["other_domain"] == 1.0
    assert recommended["grounding"]["supported"] <= current["grounding"]["supported"]
    for name in ("score_threshold", "keyword_floor"):
        curve = report["curves"][name]
        assert len(curve) > 10
        for key in ("answerable", "off_topic"):
            values = [point[key] for point in curve]
            assert values == sorted(values), (name, key)


async def test_one_evaluation_runs_per_workspace(gateway: Gateway) -> None:
    """While a workspace's evaluation runs a second one answers 409; another workspace's
    runs meanwhile; once it is done, the next one starts."""
    home, other = await _tenant(gateway, "home"), await _tenant(gateway, "other")
    for tenant in (home, other):
        assert (await _put_golden(tenant, GOLDEN)).status_code == 200
    first = await _start(home)
    assert first.status_code == 202
    assert first.headers["location"].endswith(first.json()["evaluation_id"])
    second = await _start(home)
    assert second.status_code == 409
    assert second.json()["field"] == "evaluation"
    elsewhere = await _start(other)
    assert elsewhere.status_code == 202
    await _finished(home, first.json()["evaluation_id"])
    await _finished(other, elsewhere.json()["evaluation_id"])
    third = await _start(home)
    assert third.status_code == 202
    await _finished(home, third.json()["evaluation_id"])
    listed = await home.gw.client.get(
        "/v1/knowledge-bases/policies/evaluations", headers=home.headers()
    )
    ids = [e["evaluation_id"] for e in listed.json()["evaluations"]]
    assert ids == [third.json()["evaluation_id"], first.json()["evaluation_id"]]


# ---- apply ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
async def store_gateway(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Gateway]:
    """A gateway on each settings store: SQLite, and a real redis-server. Requests run on
    the test's own event loop (httpx's ASGI transport), as the Redis client's connections
    belong to the loop that opened them."""
    with ExitStack() as stack:
        overrides: dict[str, object] = {}
        if request.param == "redis":
            overrides["redis_url"] = stack.enter_context(RedisServer(tmp_path / "redis")).url
        async with serving(tmp_path, embedder, "edge", **overrides) as gw:
            yield gw


async def test_apply_writes_the_recommendation_and_records_who_and_which(
    store_gateway: Gateway,
) -> None:
    """Applying a finished evaluation writes its recommended settings to the KB (in force
    for the next turn: abstention through an agent equals the report's), records each
    changed setting in the settings history with the applying key and the evaluation id,
    and marks the evaluation applied; an unknown evaluation id is 404."""
    tenant = await _tenant(store_gateway)
    body = await _evaluated(tenant)
    changes = body["report"]["recommendation"]["changes"]
    assert changes, "the platform defaults are not this KB's best floors"
    path = f"/v1/knowledge-bases/policies/evaluations/{body['evaluation_id']}"
    applied = await tenant.gw.client.post(f"{path}/apply", headers=tenant.headers())
    assert applied.status_code == 200, applied.text
    answer = applied.json()
    settings = answer["knowledge_base"]["settings"]
    for name, value in changes.items():
        assert settings[name] == value
        assert answer["knowledge_base"]["effective"][name]["source"] == "knowledge_base", (
            name,
            answer["knowledge_base"]["effective"],
        )
    history = (
        await tenant.gw.client.get("/v1/workspace/settings/history", headers=tenant.headers())
    ).json()["changes"]
    recorded = [c for c in history if c.get("evaluation_id") == body["evaluation_id"]]
    assert {c["setting"] for c in recorded} == set(changes)
    assert all(c["knowledge_base_id"] == "policies" for c in recorded)
    assert all(c["key_id"] == body["key_id"] for c in recorded)
    assert recorded == answer["changes"]
    marked = (await tenant.gw.client.get(path, headers=tenant.headers())).json()
    assert marked["applied_by"] == body["key_id"]

    await tenant.agent("helper", ["policies"])
    questions = [q["question"] for q in GOLDEN["questions"]]
    abstained = [
        (await tenant.retrieve("helper", question)).json()["abstained"] for question in questions
    ]
    assert (
        sum(abstained) / len(abstained)
        == body["report"]["recommendation"]["measured"]["answerable"]
    )
    unknown = await tenant.gw.client.post(
        "/v1/knowledge-bases/policies/evaluations/eval_unknown/apply", headers=tenant.headers()
    )
    assert unknown.status_code == 404


# ---- deletion ------------------------------------------------------------------------


async def test_deleting_a_kb_or_its_workspace_deletes_golden_sets_and_evaluations(
    gateway: Gateway,
) -> None:
    """A KB deleted and created again has no golden set and no evaluations; a deleted
    workspace leaves none in the store."""
    tenant = await _tenant(gateway)
    body = await _evaluated(tenant)
    deleted = await tenant.gw.client.delete(
        "/v1/knowledge-bases/policies", headers=tenant.headers()
    )
    assert deleted.status_code == 200
    await tenant.kb("policies")
    golden = await tenant.gw.client.get(
        "/v1/knowledge-bases/policies/golden-set", headers=tenant.headers()
    )
    assert golden.status_code == 404
    gone = await tenant.gw.client.get(
        f"/v1/knowledge-bases/policies/evaluations/{body['evaluation_id']}",
        headers=tenant.headers(),
    )
    assert gone.status_code == 404

    assert (await _put_golden(tenant, GOLDEN)).status_code == 200
    started = await _start(tenant)
    assert started.status_code == 202
    removed = await gateway.client.delete(
        "/v1/orgs/acme/workspaces/calibrated", headers=gateway.platform
    )
    assert removed.status_code == 200, removed.text
    store = gateway.services.store
    assert await store.get_golden_set("calibrated", "policies") is None
    assert await store.get_evaluation("calibrated", started.json()["evaluation_id"]) is None
    assert await store.list_evaluations("calibrated", "policies") == []
