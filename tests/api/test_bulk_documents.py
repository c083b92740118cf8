"""The bulk write, `POST /v1/knowledge-bases/{kb_id}/documents`: many documents in one
request, one result per line, the same rules as one document's PUT."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from gateway.errors import PayloadTooLargeError
from gateway.http.app import create_app
from gateway.http.ndjson import read_body
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, start_gateway
from tests.api.tenants import Tenant, provision
from tests.api.test_document_clearance import _stored_key
from tests.support.fake_embedder import FailingEmbedder

pytestmark = pytest.mark.anyio

PUMPS = "The pump room is on level two. Each pump is inspected every month."
VALVES = "Valves are turned off before a pump is taken out of service."
BOILER = "The boiler is serviced every spring by an outside contractor."


def _ndjson(*lines: object) -> bytes:
    return b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )


def _doc(document_id: str, text: str, classification: str | None = "internal") -> dict[str, Any]:
    line: dict[str, Any] = {"document_id": document_id, "text": text}
    if classification is not None:
        line["classification"] = classification
    return line


async def _bulk(
    tenant: Tenant, body: bytes, kb_id: str = "manuals", key: str = "all"
) -> tuple[int, list[dict[str, Any]]]:
    response = await tenant.gw.client.post(
        f"/v1/knowledge-bases/{kb_id}/documents",
        content=body,
        headers={**tenant.headers(key), "Content-Type": "application/x-ndjson"},
    )
    if response.status_code != 200:
        return response.status_code, [response.json()]
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return 200, [json.loads(line) for line in response.text.splitlines()]


async def _documents(tenant: Tenant, kb_id: str = "manuals") -> list[str]:
    response = await tenant.gw.client.get(
        f"/v1/knowledge-bases/{kb_id}/documents", headers=tenant.headers()
    )
    assert response.status_code == 200, response.text
    return [entry["document_id"] for entry in response.json()["documents"]]


async def _tenant(gw: Gateway, org: str = "acme", tenant_id: str = "acme-support") -> Tenant:
    tenant = await provision(gw, org, tenant_id)
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    return tenant


async def test_good_lines_are_written_and_each_bad_line_fails_alone(gateway: Gateway) -> None:
    """Every line gets one result, in order: good documents `indexed` (then retrievable),
    an unlabelled one `held_back`, and a line that is not JSON (400), has an unknown field
    (422), a bad id (422) or an empty text (422) `failed` with problem details naming the
    field; the bad lines write nothing, the good ones around them are all written."""
    tenant = await _tenant(gateway)
    body = _ndjson(
        _doc("pumps.txt", PUMPS),
        b"{not json",
        {**_doc("valves.txt", VALVES), "colour": "red"},
        _doc("bad id!", BOILER),
        _doc("empty.txt", "   "),
        _doc("boiler.txt", BOILER, classification=None),
        _doc("valves.txt", VALVES),
    )
    status, results = await _bulk(tenant, body)
    assert status == 200
    assert [(r["line"], r["status"]) for r in results] == [
        (1, "indexed"),
        (2, "failed"),
        (3, "failed"),
        (4, "failed"),
        (5, "failed"),
        (6, "held_back"),
        (7, "indexed"),
    ]
    problems = {r["line"]: r["problem"] for r in results if r["status"] == "failed"}
    assert problems[2]["status"] == 400
    assert (problems[3]["status"], problems[3]["field"]) == (422, "colour")
    assert (problems[4]["status"], problems[4]["field"]) == (422, "document_id")
    assert (problems[5]["status"], problems[5]["field"]) == (422, "text")
    assert results[0]["passages"] >= 1
    assert results[5]["reason"] == "missing_classification"
    assert sorted(await _documents(tenant)) == ["pumps.txt", "valves.txt"]
    turn = await tenant.retrieve("bot", "When are valves turned off?")
    assert turn.json()["passages"][0]["document_id"] == "valves.txt"

    status, again = await _bulk(tenant, _ndjson(_doc("pumps.txt", PUMPS), _doc("v.txt", VALVES)))
    assert [r["status"] for r in again] == ["unchanged", "indexed"]


async def test_the_same_id_twice_keeps_the_later_line(gateway: Gateway) -> None:
    """Two lines with one document id are written in order, as two PUTs would be: the
    stored document is the later line's."""
    tenant = await _tenant(gateway)
    _, results = await _bulk(tenant, _ndjson(_doc("notes.txt", PUMPS), _doc("notes.txt", BOILER)))
    assert [r["status"] for r in results] == ["indexed", "indexed"]
    turn = await tenant.retrieve("bot", "Who services the boiler?")
    assert BOILER in turn.json()["passages"][0]["text"]


async def test_clearance_and_roles_are_those_of_a_document_put(gateway: Gateway) -> None:
    """An ingest key below clearance `restricted` (as an earlier release could issue it) and
    a retrieve-only key are refused with 403 before any line is read; nothing is written."""
    tenant = await _tenant(gateway)
    tenant.keys["low"] = await _stored_key(gateway, tenant.tenant_id, ["ingest"], "internal")
    await tenant.issue("reader", ["retrieve"])
    for key in ("low", "reader"):
        status, (problem,) = await _bulk(tenant, _ndjson(_doc("pumps.txt", PUMPS)), key=key)
        assert (status, problem["status"]) == (403, 403)
    assert await _documents(tenant) == []


async def test_another_workspaces_kb_reads_as_unknown(gateway: Gateway) -> None:
    """A KB id that exists only in another workspace answers 404, as an unknown id does,
    and the other workspace's KB is untouched; the same id in the caller's own workspace
    is written there only."""
    owner = await _tenant(gateway, "acme", "acme-support")
    await owner.doc("manuals", "pumps.txt", PUMPS)
    other = await provision(gateway, "globex", "globex-ops")
    status, (problem,) = await _bulk(other, _ndjson(_doc("pumps.txt", BOILER)))
    assert (status, problem["status"]) == (404, 404)
    assert (await _bulk(other, _ndjson(_doc("x", BOILER)), kb_id="nowhere"))[0] == 404
    await other.kb("manuals")
    status, results = await _bulk(other, _ndjson(_doc("boiler.txt", BOILER)))
    assert [r["status"] for r in results] == ["indexed"]
    assert await _documents(owner) == ["pumps.txt"]
    assert await _documents(other) == ["boiler.txt"]


async def test_an_embedder_outage_fails_every_document_and_writes_nothing(
    gateway: Gateway,
) -> None:
    """When the model fails, each document's result is `failed` with a 503 problem naming
    the embedder, and nothing is written; lines that need no model keep their results."""
    tenant = await _tenant(gateway)
    real = gateway.services.documents.writer._embedder
    gateway.services.documents.writer._embedder = FailingEmbedder()
    try:
        status, results = await _bulk(
            tenant,
            _ndjson(_doc("a.txt", PUMPS), _doc("b.txt", VALVES, classification=None)),
        )
    finally:
        gateway.services.documents.writer._embedder = real
    assert status == 200
    assert [r["status"] for r in results] == ["failed", "held_back"]
    assert (results[0]["problem"]["status"], results[0]["problem"]["dependency"]) == (
        503,
        "embedder",
    )
    assert await _documents(tenant) == []


@pytest.fixture
async def small(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway with a 2,000-byte body limit and a burst of 4 calls per key (refilled at
    one call per 100 s)."""
    services, logs, config = await start_gateway(
        tmp_path,
        embedder,
        max_body_bytes=2000,
        rate_limit_per_s=0.01,
        rate_limit_burst=4,
        rate_limit_workspace_burst=100,
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


async def test_one_request_takes_one_rate_limit_slot(small: Gateway) -> None:
    """A request of several documents spends one call of the key's budget: with a burst of
    4, a bulk write of 5 documents leaves the key 3 more calls before 429."""
    workspace = await provision(small, "acme", "acme-support")
    writer = await workspace.issue("writer", ["ingest"])
    await workspace.kb("manuals")
    lines = [_doc(f"d{number}.txt", f"Pump {number} is on level {number}.") for number in range(5)]
    _, results = await _bulk(workspace, _ndjson(*lines), key="writer")
    assert [r["status"] for r in results] == ["indexed"] * 5
    headers = {"Authorization": f"Bearer {writer}"}
    statuses = [
        (await small.client.get("/v1/knowledge-bases/manuals", headers=headers)).status_code
        for _ in range(4)
    ]
    assert statuses == [200, 200, 200, 429]


async def test_a_body_over_the_limit_writes_nothing(small: Gateway) -> None:
    """A body over the limit is refused whole with 413, and none of its documents is
    written; a body with no declared size is cut off as it streams past the limit."""
    tenant = await _tenant(small)
    big = _doc("big.txt", "word " * 500)
    status, (problem,) = await _bulk(tenant, _ndjson(_doc("a.txt", PUMPS), big))
    assert (status, problem["status"], problem["field"]) == (413, 413, "body")
    assert await _documents(tenant) == []

    received: list[bytes] = []

    async def chunks() -> AsyncIterator[bytes]:
        for line in (_doc("a.txt", PUMPS), big, _doc("c.txt", BOILER)):
            received.append(_ndjson(line))
            yield received[-1]

    with pytest.raises(PayloadTooLargeError):
        await read_body(chunks(), 2000)
    assert len(received) == 2  # nothing read past the chunk that crossed the limit
