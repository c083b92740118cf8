"""Golden sets and evaluations across workspaces, on SQLite and on a real Redis: another
workspace's KB ids and evaluation ids answer exactly as unknown ones, and a workspace's
golden set, evaluations and their figures are its own.

Two workspaces both own a KB called `kb`; only A has a golden set and an evaluation, and
A alone owns `kb-a-only`. B probes with A's ids; C (no golden set anywhere) gives the
answers of ids that exist nowhere, which B's must equal byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.safety.redaction import Redactor
from ingest.embedder.embedding import Embedder
from tests.isolation.conftest import PLATFORM_KEY, LiveGateway, live_gateway
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

TEXTS = {
    "a": "The A-team canary zebra-7731 lives in the harbour archive of workspace A.",
    "b": "Workspace B keeps its ferry timetable in the harbour office.",
}
GOLDEN = {
    "questions": [{"question": "Where does the canary zebra live?", "document_ids": ["doc"]}],
    "off_topic": ["How long should I rest a steak?"],
}


@pytest.fixture(params=["sqlite", "redis"])
async def gateway(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder, redactor: Redactor
) -> AsyncIterator[LiveGateway]:
    with ExitStack() as stack:
        redis_url = None
        if request.param == "redis":
            redis_url = stack.enter_context(RedisServer(tmp_path / "redis")).url
        async with live_gateway(
            "edge", tmp_path / "data", embedder, redactor, redis_url=redis_url
        ) as live:
            yield live


async def _workspace(client: httpx.AsyncClient, tenant_id: str) -> dict[str, str]:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    await client.post("/v1/orgs", json={"org_id": "iso"}, headers=platform)
    created = await client.post(
        "/v1/orgs/iso/workspaces", json={"tenant_id": tenant_id}, headers=platform
    )
    assert created.status_code == 201, created.text
    key = await client.post(
        "/v1/keys",
        json={"org_id": "iso", "tenant_id": tenant_id, "roles": ["admin", "ingest"]},
        headers=platform,
    )
    assert key.status_code == 201, key.text
    return {"Authorization": f"Bearer {key.json()['key']}"}


async def _evaluated(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    assert (
        await client.put("/v1/knowledge-bases/kb/golden-set", json=GOLDEN, headers=headers)
    ).status_code == 200
    started = await client.post("/v1/knowledge-bases/kb/evaluations", headers=headers)
    assert started.status_code == 202, started.text
    path = f"/v1/knowledge-bases/kb/evaluations/{started.json()['evaluation_id']}"
    for _ in range(600):
        body: dict[str, Any] = (await client.get(path, headers=headers)).json()
        if body["status"] != "running":
            return body
        await asyncio.sleep(0.1)
    raise AssertionError("the evaluation did not finish")


async def test_foreign_golden_sets_and_evaluations_answer_as_unknown_ones(
    gateway: LiveGateway,
) -> None:
    """B's and C's answers for A's KB-only id, A's evaluation id (read and apply) and the
    golden set of the KB id they share are identical to those for ids that exist nowhere;
    B's evaluation list is empty; nothing B does changes A's golden set or evaluation."""
    client = gateway.client
    a, b, c = [await _workspace(client, t) for t in ("iso-a", "iso-b", "iso-c")]
    for headers, text in ((a, TEXTS["a"]), (b, TEXTS["b"]), (c, TEXTS["b"])):
        assert (await client.put("/v1/knowledge-bases/kb", json={}, headers=headers)).is_success
        put = await client.put(
            "/v1/knowledge-bases/kb/documents/doc",
            json={"text": text, "classification": "internal"},
            headers=headers,
        )
        assert put.status_code == 200
    assert (await client.put("/v1/knowledge-bases/kb-a-only", json={}, headers=a)).is_success
    evaluation = await _evaluated(client, a)
    assert evaluation["status"] == "done"
    own = f"/v1/knowledge-bases/kb/evaluations/{evaluation['evaluation_id']}"

    probes: list[tuple[str, str, str, Any]] = [
        ("GET", "/v1/knowledge-bases/kb/golden-set", "/v1/knowledge-bases/kb/golden-set", None),
        ("GET", own, "/v1/knowledge-bases/kb/evaluations/eval_nowhere", None),
        ("POST", own + "/apply", "/v1/knowledge-bases/kb/evaluations/eval_nowhere/apply", None),
    ]
    for method, suffix in (
        ("GET", "/golden-set"),
        ("PUT", "/golden-set"),
        ("POST", "/evaluations"),
        ("GET", "/evaluations"),
    ):
        body = GOLDEN if method == "PUT" else None
        probes.append(
            (
                method,
                f"/v1/knowledge-bases/kb-a-only{suffix}",
                f"/v1/knowledge-bases/kb-nowhere{suffix}",
                body,
            )
        )
    for method, foreign, nowhere, body in probes:
        for headers in (b, c):
            seen = await client.request(method, foreign, json=body, headers=headers)
            unknown = await client.request(method, nowhere, json=body, headers=headers)
            assert seen.status_code == 404, (method, foreign, seen.text)
            assert (seen.status_code, seen.content) == (unknown.status_code, unknown.content)
            assert "zebra" not in seen.text
            assert "iso-a" not in seen.text

    listed = await client.get("/v1/knowledge-bases/kb/evaluations", headers=b)
    assert listed.json() == {"evaluations": []}
    again = await client.get(own, headers=a)
    assert again.json() == evaluation
    golden = await client.get("/v1/knowledge-bases/kb/golden-set", headers=a)
    assert golden.json()["questions"] == GOLDEN["questions"]
