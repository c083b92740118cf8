"""A workspace deletion killed midway (`kill -9` of a real `kbgate serve`) is completed
when the gateway starts again, with no call: on Qdrant Edge with SQLite, and on Qdrant
Edge with a real redis-server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import SHARED_COLLECTION, org_collection
from ingest.payload import Scope
from settings.records import Lifecycle
from settings.store import SettingsStore
from settings.stores.redis.store import RedisStore
from settings.stores.sqlite.store import SqliteStore
from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import RedisServer
from tests.support.workspace_http import workspace_headers

pytestmark = pytest.mark.ci

PLATFORM_KEY = "crash-platform-key-0000000001"
PLATFORM = {"Authorization": f"Bearer {PLATFORM_KEY}"}
#: knowledge bases of the workspace that is deleted: each is one step of its deletion
KBS = 40
QUESTION = "Which beacon guides ships past the reef?"


@pytest.fixture(params=["sqlite", "redis"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The gateway's store: SQLite in its data dir, or a redis-server of the test's own."""
    if request.param == "sqlite":
        yield {}
        return
    with RedisServer(tmp_path / "redis") as server:
        yield {"KBGATE_REDIS_URL": server.url}


def _open_store(env: dict[str, str], data: Path, runner: asyncio.Runner) -> SettingsStore:
    """The gateway's store, opened by the test (its calls run on `runner`'s loop)."""
    if "KBGATE_REDIS_URL" in env:
        return RedisStore.connect(env["KBGATE_REDIS_URL"], 2.0)
    return runner.run(SqliteStore.open(data / "kbgate.sqlite3"))


def _stock(client: httpx.Client) -> tuple[dict[str, str], dict[str, str]]:
    """`gone`: KBS knowledge bases (half in the org collection, half in kb_shared), one
    document each; `stay`: one KB of each storage with the same ids, and an agent."""
    gone = workspace_headers(client, PLATFORM_KEY, "acme", "gone")
    stay = workspace_headers(client, PLATFORM_KEY, "acme", "stay")
    for n in range(KBS):
        storage = "org" if n % 2 else "shared"
        _put(client, gone, f"/v1/knowledge-bases/kb-{n}", {"storage": storage})
        text = f"Ledger {n}: the lighthouse beacon guided {n} ships past the reef."
        _document(client, gone, f"kb-{n}", text)
    for n, storage in ((0, "shared"), (1, "org")):
        _put(client, stay, f"/v1/knowledge-bases/kb-{n}", {"storage": storage})
        _document(client, stay, f"kb-{n}", "The lighthouse beacon guides ships past the reef.")
    _put(client, stay, "/v1/agents/bot", {"knowledge_base_ids": ["kb-0", "kb-1"]})
    return gone, stay


def _put(client: httpx.Client, headers: dict[str, str], path: str, body: Any) -> None:
    response = client.put(path, json=body, headers=headers)
    assert response.status_code in {200, 201}, response.text


def _document(client: httpx.Client, headers: dict[str, str], kb_id: str, text: str) -> None:
    response = client.put(
        f"/v1/knowledge-bases/{kb_id}/documents/ledger",
        json={"text": text, "classification": "internal"},
        headers=headers,
    )
    assert response.json()["status"] == "indexed", response.text


def _turn(client: httpx.Client, headers: dict[str, str]) -> list[tuple[str, str]]:
    response = client.post(
        "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
    )
    assert response.status_code == 200, response.text
    return [(p["passage_id"], p["text"]) for p in response.json()["passages"]]


def _passages(data: Path, tenant_id: str) -> tuple[int, int]:
    """The tenant's passages in the org collection and in kb_shared (the gateway stopped)."""
    index = BlockingIndex(EdgeIndex(data))
    try:
        scope = Scope.of(
            org_id="acme",
            tenant_id=tenant_id,
            kb_ids=[f"kb-{n}" for n in range(KBS)],
            clearance="restricted",
        )
        return index.count(org_collection("acme"), scope), index.count(SHARED_COLLECTION, scope)
    finally:
        index.close()


def _stats(client: httpx.Client, headers: dict[str, str]) -> list[Any]:
    return [client.get(f"/v1/knowledge-bases/kb-{n}/stats", headers=headers).json() for n in (0, 1)]


def _kill_midway(gateway: GatewayProcess, store: SettingsStore, runner: asyncio.Runner) -> None:
    """DELETE the workspace `gone` and kill the gateway once some of its KBs are gone but
    not all."""

    def delete() -> None:
        try:
            with gateway.client() as client:
                client.delete("/v1/orgs/acme/workspaces/gone", headers=PLATFORM)
        except httpx.HTTPError:
            pass  # the gateway died under it, as meant

    deleting = threading.Thread(target=delete, daemon=True)
    deleting.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = len(runner.run(store.list_knowledge_bases("gone")))
        if 0 < left < KBS:
            gateway.kill()
            deleting.join(timeout=10)
            return
        time.sleep(0.005)
    raise AssertionError("the deletion never got midway")


def test_a_deletion_killed_midway_is_completed_at_the_next_start(
    tmp_path: Path, model_dir: Path, store_env: dict[str, str]
) -> None:
    """Killed with some of its KBs deleted and others not, the workspace is left marked
    `deleting` with passages in the collections; the restarted gateway finishes it on
    its own: its key answers 401, its id answers 404 and is free again, none of its
    passages is left in either collection, and the neighbour's counts and turn are
    exactly as before."""
    data = tmp_path / "data"
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        **store_env,
    }
    with asyncio.Runner() as runner:
        store = _open_store(store_env, data, runner)
        try:
            _crash_then_restart(data, env, store, runner)
        finally:
            runner.run(store.close())
    assert _passages(data, "gone") == (0, 0)


def _crash_then_restart(
    data: Path, env: dict[str, str], store: SettingsStore, runner: asyncio.Runner
) -> None:
    crashed = GatewayProcess(data, env)
    crashed.start()
    try:
        with crashed.client() as client:
            gone, stay = _stock(client)
            before = (_turn(client, stay), _stats(client, stay))
        _kill_midway(crashed, store, runner)
    finally:
        crashed.kill()
    marked = runner.run(store.get_workspace("gone"))
    assert marked is not None
    assert marked.state is Lifecycle.DELETING
    assert 0 < len(runner.run(store.list_knowledge_bases("gone"))) < KBS
    assert any(_passages(data, "gone"))

    restarted = GatewayProcess(data, env)
    restarted.start()
    try:
        _until_gone(store, runner)
        with restarted.client() as client:
            assert client.get("/v1/knowledge-bases/kb-1", headers=gone).status_code == 401
            issued = client.post(
                "/v1/keys",
                json={"org_id": "acme", "tenant_id": "gone", "roles": ["retrieve"]},
                headers=PLATFORM,
            )
            assert issued.status_code == 404
            again = client.delete("/v1/orgs/acme/workspaces/gone", headers=PLATFORM)
            assert again.status_code == 404
            assert (_turn(client, stay), _stats(client, stay)) == before
            reborn = client.post(
                "/v1/orgs/acme/workspaces", json={"tenant_id": "gone"}, headers=PLATFORM
            )
            assert reborn.status_code == 201
    finally:
        restarted.stop()


def _until_gone(store: SettingsStore, runner: asyncio.Runner) -> None:
    """Wait until the start-up upkeep has finished the deletion (read in the store)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if runner.run(store.get_workspace("gone")) is None:
            return
        time.sleep(0.1)
    raise AssertionError("the deletion was not finished after the restart")
