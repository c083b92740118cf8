"""A data dir whose disk is down to the free space kept (`KBGATE_MIN_FREE_DISK_MB`): writes
answer 503 with problem details that say so, and change nothing; turns, listings and
deletions go on. The real gateway on Qdrant Edge; the reserve raised above what the disk
has free (tests/integration/test_edge_disk.py fills a real small disk)."""

from __future__ import annotations

import json

import pytest

from ingest.engines.edge.disk import DiskReserve
from ingest.engines.edge.index import EdgeIndex
from tests.api.conftest import Gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

_MIB = 1024 * 1024


def _disk(gateway: Gateway) -> DiskReserve:
    index = gateway.services.index
    assert isinstance(index, EdgeIndex)  # the embedded adapter's
    return index.engine.disk


def _disk_full(gateway: Gateway) -> None:
    disk = _disk(gateway)
    disk.reserve_bytes = disk.free_bytes() + 1024 * _MIB


async def test_writes_on_a_full_disk_answer_503_and_change_nothing(gateway: Gateway) -> None:
    """At the reserve, a document PUT and every line of a bulk write answer 503 (index,
    Retry-After, a detail saying the disk is nearly full and nothing was written, no
    figures); nothing is written; a turn still finds the earlier document, and deleting
    it still works."""
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    await tenant.doc("manuals", "pumps.txt", "Each pump is inspected every month.")
    _disk_full(gateway)

    refused = await gateway.client.put(
        "/v1/knowledge-bases/manuals/documents/valves.txt",
        json={"text": "Relief valves are replaced every five years.", "classification": "internal"},
        headers=tenant.headers(),
    )
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "60"
    problem = refused.json()
    assert problem["dependency"] == "index"
    assert "disk is nearly full" in problem["detail"]
    assert "nothing was written" in problem["detail"]
    assert "MiB" not in problem["detail"]

    lines = "\n".join(
        json.dumps({"document_id": name, "text": text, "classification": "internal"})
        for name, text in (("a.txt", "Boilers are tested weekly."), ("b.txt", "Fans are oiled."))
    )
    bulk = await gateway.client.post(
        "/v1/knowledge-bases/manuals/documents",
        content=lines,
        headers={**tenant.headers(), "Content-Type": "application/x-ndjson"},
    )
    assert bulk.status_code == 200, bulk.text
    results = [json.loads(line) for line in bulk.text.splitlines() if line.strip()]
    assert [(r["status"], r["problem"]["status"]) for r in results] == [("failed", 503)] * 2

    listed = await gateway.client.get(
        "/v1/knowledge-bases/manuals/documents", headers=tenant.headers()
    )
    assert [d["document_id"] for d in listed.json()["documents"]] == ["pumps.txt"]
    turn = await tenant.retrieve("bot", "How often is each pump inspected?")
    assert turn.status_code == 200, turn.text
    assert turn.json()["passages"][0]["document_id"] == "pumps.txt"
    deleted = await gateway.client.delete(
        "/v1/knowledge-bases/manuals/documents/pumps.txt", headers=tenant.headers()
    )
    assert deleted.status_code == 200, deleted.text


async def test_an_org_whose_collection_cannot_be_made_is_not_created(gateway: Gateway) -> None:
    """Creating an organization at the reserve answers 503 and leaves no org behind (its
    collection could not be made); with room, the same call creates it (201, not 409)."""
    disk = _disk(gateway)
    kept = disk.reserve_bytes
    _disk_full(gateway)
    refused = await gateway.client.post(
        "/v1/orgs", json={"org_id": "initech"}, headers=gateway.platform
    )
    assert refused.status_code == 503, refused.text
    assert await gateway.services.store.get_org("initech") is None
    disk.reserve_bytes = kept
    created = await gateway.client.post(
        "/v1/orgs", json={"org_id": "initech"}, headers=gateway.platform
    )
    assert created.status_code == 201, created.text
