"""Retention over HTTP: a workspace's turn records (the texts a turn returned) kept for its
own `turn_retention_s`, settings history purged past `KBGATE_SETTINGS_HISTORY_DAYS`. On
Qdrant Edge with SQLite and on qdrant-client local mode with a real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.admin.upkeep import purge_retained
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, serving_stack
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

QUESTION = "Which beacon guides ships past the reef?"


@pytest.fixture(params=["edge+sqlite", "local+redis"])
async def retaining(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Gateway]:
    """A gateway that keeps settings history 30 days and lets workspaces keep turn
    records up to 10 minutes (platform default: one hour, clamped)."""
    async with serving_stack(
        request, tmp_path, embedder, settings_history_days=30, turn_ttl_max_s=7200
    ) as gw:
        yield gw


async def _turn(tenant: Tenant) -> dict[str, Any]:
    response = await tenant.retrieve("bot", QUESTION)
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["passages"], body
    return body


async def _verify(tenant: Tenant, turn: dict[str, Any]) -> int:
    response = await tenant.gw.client.post(
        "/v1/citations/verify",
        json={
            "turn_id": turn["turn_id"],
            "citations": [{"passage_id": turn["passages"][0]["passage_id"]}],
        },
        headers=tenant.headers(),
    )
    return response.status_code


async def _with_a_document(gw: Gateway, tenant_id: str) -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    await tenant.kb("kb")
    await tenant.doc("kb", "lighthouse", "The lighthouse beacon guides ships past the reef.")
    await tenant.agent("bot", ["kb"])
    return tenant


async def test_a_workspace_keeps_its_turn_records_for_its_own_retention(
    retaining: Gateway,
) -> None:
    """A workspace that sets `turn_retention_s` sees it in force (and a value past the
    platform's bound clamped); its turns can be cited until then and answer 404 after,
    gone from the store after the retention purge, while a neighbour with the default
    (an hour) still has its turn of the same moment."""
    gw = retaining
    short = await _with_a_document(gw, "short")
    default = await _with_a_document(gw, "default")
    clamped = await short.settings(turn_retention_s=999_999)
    assert clamped["effective"]["turn_retention_s"] == {
        "value": 7200,
        "source": "workspace",
        "clamped": True,
    }
    settings = await short.settings(turn_retention_s=1)
    assert settings["effective"]["turn_retention_s"]["value"] == 1
    fallback = await gw.client.get("/v1/workspace/settings", headers=default.headers())
    assert fallback.json()["effective"]["turn_retention_s"] == {
        "value": 3600,
        "source": "platform",
        "clamped": False,
    }

    theirs, mine = await _turn(default), await _turn(short)
    assert await _verify(short, mine) == 200
    await asyncio.sleep(1.2)
    await purge_retained(gw.services.upkeep)

    assert await _verify(short, mine) == 404
    assert await gw.services.store.delete_turns("short") == 0  # nothing was left to keep
    assert await _verify(default, theirs) == 200


async def test_settings_history_older_than_its_retention_is_purged(retaining: Gateway) -> None:
    """The retention sweep removes settings, KB and agent changes older than
    `KBGATE_SETTINGS_HISTORY_DAYS` (here 30) and keeps newer ones, in every workspace."""
    gw = retaining
    tenants = [await provision(gw, "acme", tenant_id) for tenant_id in ("t1", "t2")]
    for tenant in tenants:
        await tenant.settings(max_knowledge_bases_per_agent=4)
        await tenant.settings(max_knowledge_bases_per_agent=5)
        await tenant.kb("handbook")
        await tenant.agent("bot", ["handbook"])

    assert await purge_retained(gw.services.upkeep) == (0, 0)
    assert all([await _history(t) for t in tenants])
    assert all([await _history(t, "/v1/workspace/changes") for t in tenants])
    later = datetime.now(UTC) + timedelta(days=31)
    _, purged = await purge_retained(gw.services.upkeep, now=later)

    assert purged == 8
    assert [await _history(t) for t in tenants] == [[], []]
    assert [await _history(t, "/v1/workspace/changes") for t in tenants] == [[], []]
    await tenants[0].settings(max_knowledge_bases_per_agent=6)
    assert [change["new"] for change in await _history(tenants[0])] == [6]


async def _history(tenant: Tenant, path: str = "/v1/workspace/settings/history") -> list[Any]:
    response = await tenant.gw.client.get(path, headers=tenant.headers())
    assert response.status_code == 200, response.text
    return list(response.json()["changes"])


async def test_turn_retention_refuses_what_is_not_a_positive_whole_number(
    retaining: Gateway,
) -> None:
    """0, negatives, fractions and strings answer 422 naming the field and change nothing;
    null resets to the platform default."""
    tenant = await provision(retaining, "acme", "t1")
    for bad in (0, -5, 1.5, "60"):
        response = await retaining.client.patch(
            "/v1/workspace/settings", json={"turn_retention_s": bad}, headers=tenant.headers()
        )
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["field"] == "turn_retention_s"
    await tenant.settings(turn_retention_s=120)
    reset = await tenant.settings(turn_retention_s=None)
    assert reset["effective"]["turn_retention_s"]["source"] == "platform"
