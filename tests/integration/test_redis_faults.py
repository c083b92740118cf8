"""A real gateway behind a TCP fault proxy in front of a real redis-server.

One `kbgate serve` process keeps its settings in Redis through `FaultProxy`. For each
fault — delay beyond the Redis timeout, blackhole (drop), TCP reset — the proxy is
switched at run time and the gateway must: answer turns with the last known settings
(or the documented KB cap of 3 when nothing is known about the workspace), each one
complete and scoped to the caller; refuse admin writes with 503, `Retry-After` and
problem details; report the store down on `/health/ready`; answer within a bound,
never 500; and recover without a restart once the proxy passes traffic again.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.fault_proxy import FaultProxy, Mode
from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import RedisServer

PLATFORM_KEY = "fault-proxy-platform-key-000001"
REDIS_TIMEOUT_S = 0.3
STALENESS_S = 1.0
# Under a fault the first request waits out one Redis timeout for settings and one for
# the rate limit; after that the store fails fast (settings/stores/outage.py). Noisy machines:
# allow a margin.
TURN_BOUND_S = 2.0
KBS = ("k1", "k2", "k3", "k4")
QUESTION = "When does the harbour ferry leave for the island?"
# Two workspaces in two orgs with the same KB, agent and document ids; each
# document carries its workspace's canary.
TENANTS = {"ws-a": ("org-a", 2), "ws-b": ("org-b", 4)}


def _canary(tenant: str, kb: str) -> str:
    return f"CANARY{tenant.replace('-', '').upper()}{kb.upper()}"


def _document(tenant: str, kb: str) -> str:
    return (
        f"Reference {_canary(tenant, kb)}. The harbour ferry leaves for the island at "
        f"{kb[-1]} o'clock every morning, weather permitting; tickets are sold on board."
    )


ALL_CANARIES = {_canary(tenant, kb) for tenant in (*TENANTS, "ws-fresh") for kb in KBS}


@dataclass
class World:
    redis: RedisServer
    proxy: FaultProxy
    gateway: GatewayProcess
    keys: dict[str, dict[str, str]]

    def client(self) -> httpx.Client:
        return self.gateway.client()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[World]:
    """Redis, the proxy in front of it and one gateway on the proxy, with two workspaces."""
    root = tmp_path_factory.mktemp("faults")
    with RedisServer(root / "redis") as server, FaultProxy(server.port) as proxy:
        env = {
            "KBGATE_REDIS_URL": proxy.url,
            "KBGATE_REDIS_TIMEOUT_S": str(REDIS_TIMEOUT_S),
            "KBGATE_SETTINGS_STALENESS_S": str(STALENESS_S),
            "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE_MODEL_CACHE_DIR": str(model_dir),
            "KBGATE_RATE_LIMIT_PER_S": "1000",
            "KBGATE_RATE_LIMIT_BURST": "1000",
        }
        with GatewayProcess(root / "data", env) as gateway:
            keys: dict[str, dict[str, str]] = {}
            with gateway.client() as client:
                for tenant, (org, cap) in TENANTS.items():
                    keys[tenant] = _provision(client, org, tenant, cap)
            yield World(server, proxy, gateway, keys)
            log = gateway.log_path.read_text(errors="replace")
    _assert_clean_log(log, keys)


def _platform() -> dict[str, str]:
    return {"Authorization": f"Bearer {PLATFORM_KEY}"}


def _provision(client: httpx.Client, org: str, tenant: str, cap: int) -> dict[str, str]:
    """Org (if new), workspace with a KB cap, four KBs with one canary document each, an agent;
    answers the workspace key's headers."""
    client.post("/v1/orgs", json={"org_id": org}, headers=_platform())
    created = client.post(
        f"/v1/orgs/{org}/workspaces", json={"tenant_id": tenant}, headers=_platform()
    )
    assert created.status_code == 201, created.text
    key = client.post(
        "/v1/keys",
        json={"org_id": org, "tenant_id": tenant, "roles": ["admin", "ingest", "retrieve"]},
        headers=_platform(),
    ).json()["key"]
    headers = {"Authorization": f"Bearer {key}"}
    for kb in KBS:
        put = client.put(
            f"/v1/knowledge-bases/{kb}", json={"score_threshold": 0.0}, headers=headers
        )
        assert put.status_code == 201, put.text
        doc = client.put(
            f"/v1/knowledge-bases/{kb}/documents/ferry",
            json={"title": "Ferry", "text": _document(tenant, kb), "classification": "internal"},
            headers=headers,
        )
        assert doc.json()["status"] == "indexed", doc.text
    agent = client.put("/v1/agents/bot", json={"knowledge_base_ids": list(KBS)}, headers=headers)
    assert agent.status_code == 201, agent.text
    patched = client.patch(
        "/v1/workspace/settings", json={"max_knowledge_bases_per_agent": cap}, headers=headers
    )
    assert patched.status_code == 200, patched.text
    return headers


def _turn(world: World, tenant: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    with world.client() as client:
        response = client.post(
            "/v1/retrieve",
            json={"agent_id": "bot", "question": QUESTION},
            headers=world.keys[tenant],
        )
    return response, time.monotonic() - started


def _assert_complete_and_scoped(body: dict[str, Any], tenant: str, queried: list[str]) -> None:
    """Exactly the KBs expected were queried, each one's document came back, and nothing in the
    answer belongs to another workspace."""
    assert body["effective"]["knowledge_bases_queried"] == queried
    assert body["abstained"] is False
    by_kb = {p["knowledge_base_id"]: p for p in body["passages"]}
    assert sorted(by_kb) == sorted(queried), "a queried KB is missing: partial answer"
    for kb, passage in by_kb.items():
        assert _canary(tenant, kb) in passage["text"]
    raw = str(body)
    foreign = {c for c in ALL_CANARIES if c in raw} - {_canary(tenant, kb) for kb in KBS}
    assert not foreign, f"another workspace's canary in the answer: {foreign}"


def _assert_clean_log(log: str, keys: dict[str, dict[str, str]]) -> None:
    """The gateway logged no unhandled error, no question, passage or key."""
    assert "unhandled_error" not in log
    assert not re.search(r'"status": ?500', log)
    assert "harbour" not in log.lower()
    assert not re.search(r"CANARYWS", log)
    for headers in keys.values():
        assert headers["Authorization"].removeprefix("Bearer ") not in log
    assert PLATFORM_KEY not in log


def _wait_stale() -> None:
    """Let every cached settings entry pass its staleness bound, so turns must ask Redis."""
    time.sleep(STALENESS_S + 0.3)


def _recover(world: World) -> None:
    """Back to pass-through: admin writes succeed again within a bound, with no restart."""
    world.proxy.passthrough()
    deadline = time.monotonic() + 15
    status = 0
    while time.monotonic() < deadline:
        with world.client() as client:
            status = client.patch(
                "/v1/workspace/settings",
                json={"max_knowledge_bases_per_agent": 3},
                headers=world.keys["ws-a"],
            ).status_code
        if status == 200:
            break
        time.sleep(0.2)
    assert status == 200, "admin writes did not recover after the fault"
    with world.client() as client:
        assert client.get("/health/ready").status_code == 200
    response, _ = _turn(world, "ws-a")  # written through this process: in force at once
    _assert_complete_and_scoped(response.json(), "ws-a", ["k1", "k2", "k3"])
    _restore_cap(world, "ws-a")


def _hidden_workspace(world: World, tenant: str) -> dict[str, str]:
    """A workspace (KB cap 1) whose record this gateway has never read: it is provisioned, then
    its record is renamed away in Redis (straight to the server, not through the gateway) while
    one turn caches the key, the agent and the KBs, then put back."""
    with world.client() as client:
        headers = _provision(client, "org-a", tenant, 1)
    direct = redis.Redis(host="127.0.0.1", port=world.redis.port)
    try:
        direct.rename(f"kbgate:ws:{tenant}", f"kbgate:hidden:{tenant}")
        with world.client() as client:
            seen = client.post(
                "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
            )
        assert seen.status_code == 200, seen.text
        direct.rename(f"kbgate:hidden:{tenant}", f"kbgate:ws:{tenant}")
    finally:
        direct.close()
    return headers


FAULTS = {
    "delay": lambda proxy: proxy.delay(REDIS_TIMEOUT_S * 1000 * 4),
    "drop": FaultProxy.drop,
    "reset": FaultProxy.reset,
}


def test_proxy_modes_on_a_plain_redis_client(tmp_path: Path) -> None:
    """The proxy itself: pass-through answers, delay adds its latency, drop answers nothing (the
    client times out), reset breaks connections at once, and pass-through heals."""
    with RedisServer(tmp_path / "redis") as server, FaultProxy(server.port) as proxy:

        def ping() -> tuple[bool | str, float]:
            client = redis.Redis(
                host="127.0.0.1", port=proxy.port, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
            )
            started = time.monotonic()
            try:
                outcome: bool | str = bool(client.ping())
            except redis.exceptions.TimeoutError:
                outcome = "timeout"
            except redis.exceptions.ConnectionError:
                outcome = "connection_error"
            finally:
                client.close()
            return outcome, time.monotonic() - started

        assert ping()[0] is True
        proxy.delay(150)
        answered, took = ping()
        assert answered is True
        assert took >= 0.3  # both ways
        proxy.drop()
        assert ping()[0] == "timeout"
        assert proxy.mode is Mode.DROP
        proxy.reset()
        outcome, took = ping()
        assert outcome == "connection_error"
        assert took < 0.5
        proxy.passthrough()
        assert ping()[0] is True

        # a connection open across a reset is torn down with an RST
        held = socket.create_connection(("127.0.0.1", proxy.port), timeout=1)
        try:
            held.sendall(b"PING\r\n")
            assert held.recv(64) == b"+PONG\r\n"
            proxy.reset()
            with pytest.raises(ConnectionResetError):
                held.recv(64)
        finally:
            held.close()
        proxy.passthrough()


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_gateway_under_redis_fault(world: World, fault: str) -> None:
    """Under the fault: turns answer 200 within a bound with the last known KB cap (2 and 4),
    complete and scoped to the caller; a workspace never read falls back to cap 3; grounding
    answers; admin writes and citation checks answer 503 with Retry-After and problem details;
    a key never seen answers 503, not 401; readiness is 503 naming the store. Back to
    pass-through, everything works again without a restart."""
    fresh_tenant = f"ws-fresh-{fault}"
    fresh = _hidden_workspace(world, fresh_tenant)
    for tenant in TENANTS:
        response, _ = _turn(world, tenant)
        assert response.status_code == 200
    turn_id = _turn(world, "ws-a")[0].json()["turn_id"]
    with world.client() as client:
        unseen_key = client.post(
            "/v1/keys",
            json={"org_id": "org-a", "tenant_id": "ws-a", "roles": ["retrieve"]},
            headers=_platform(),
        ).json()["key"]
    _wait_stale()

    FAULTS[fault](world.proxy)
    try:
        _turns_use_last_known_settings(world, fault)
        _unknown_workspace_falls_back_to_cap_3(world, fresh_tenant, fresh)
        _writes_and_uncached_reads_answer_503(world, turn_id, unseen_key)
        _readiness_names_the_store(world)
    finally:
        world.proxy.passthrough()

    _recover(world)
    with world.client() as client:
        metrics = client.get("/metrics", headers=_platform()).text
    assert not re.search(r'status="50[0-2]"', metrics)


def _turns_use_last_known_settings(world: World, fault: str) -> None:
    for tenant, (_, cap) in TENANTS.items():
        response, took = _turn(world, tenant)
        assert response.status_code == 200, response.text
        assert took < TURN_BOUND_S, f"turn took {took:.1f} s under {fault}"
        _assert_complete_and_scoped(response.json(), tenant, list(KBS[:cap]))
    with world.client() as client:
        grounding = client.post(
            "/v1/grounding/check",
            json={"agent_id": "bot", "answer": "The ferry leaves in the morning."},
            headers=world.keys["ws-a"],
        )
    assert grounding.status_code == 200, grounding.text
    assert grounding.json()["status"] in {"supported", "flagged", "skipped"}


def _unknown_workspace_falls_back_to_cap_3(
    world: World, tenant: str, headers: dict[str, str]
) -> None:
    with world.client() as client:
        fallback = client.post(
            "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
        )
    assert fallback.status_code == 200, fallback.text
    body = fallback.json()
    assert body["effective"]["knowledge_bases_queried"] == ["k1", "k2", "k3"]
    assert sorted(p["knowledge_base_id"] for p in body["passages"]) == ["k1", "k2", "k3"]
    assert all(_canary(tenant, p["knowledge_base_id"]) in p["text"] for p in body["passages"])


def _writes_and_uncached_reads_answer_503(world: World, turn_id: str, unseen_key: str) -> None:
    started = time.monotonic()
    with world.client() as client:
        refused = [
            client.patch(
                "/v1/workspace/settings",
                json={"max_knowledge_bases_per_agent": 1},
                headers=world.keys["ws-a"],
            ),
            client.put("/v1/knowledge-bases/k9", json={}, headers=world.keys["ws-b"]),
            client.post(
                "/v1/citations/verify",
                json={"turn_id": turn_id, "citations": []},
                headers=world.keys["ws-a"],
            ),
            client.post(
                "/v1/retrieve",
                json={"agent_id": "bot", "question": QUESTION},
                headers={"Authorization": f"Bearer {unseen_key}"},
            ),
        ]
    assert time.monotonic() - started < 2 * TURN_BOUND_S
    for answer in refused:
        assert answer.status_code == 503, answer.text
        assert int(answer.headers["retry-after"]) >= 1
        assert answer.headers["content-type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["status"] == 503
        assert problem["dependency"] == "store"
        assert "harbour" not in answer.text.lower()


def _readiness_names_the_store(world: World) -> None:
    started = time.monotonic()
    with world.client() as client:
        ready = client.get("/health/ready")
    assert time.monotonic() - started < TURN_BOUND_S
    assert ready.status_code == 503
    assert int(ready.headers["retry-after"]) >= 1
    dependencies = ready.json()["dependencies"]
    assert dependencies["store"] == {"status": "down", "engine": "redis"}
    assert dependencies["index"]["status"] == "up"


@pytest.mark.slow
def test_gateway_on_a_slow_redis(world: World) -> None:
    """Redis slower than usual but within its timeout (50 ms each way, timeout 300 ms) is not an
    outage: admin writes succeed and turns use the new value at once, readiness stays 200."""
    world.proxy.delay(50)
    try:
        with world.client() as client:
            changed = client.patch(
                "/v1/workspace/settings",
                json={"max_knowledge_bases_per_agent": 3},
                headers=world.keys["ws-a"],
            )
            assert changed.status_code == 200, changed.text
            assert client.get("/health/ready").status_code == 200
        response, took = _turn(world, "ws-a")
        assert response.status_code == 200
        assert took < TURN_BOUND_S
        _assert_complete_and_scoped(response.json(), "ws-a", ["k1", "k2", "k3"])
        _restore_cap(world, "ws-a")
    finally:
        world.proxy.passthrough()


def _restore_cap(world: World, tenant: str) -> None:
    """Put the workspace's KB cap back to its starting value (later tests rely on it)."""
    with world.client() as client:
        restored = client.patch(
            "/v1/workspace/settings",
            json={"max_knowledge_bases_per_agent": TENANTS[tenant][1]},
            headers=world.keys[tenant],
        )
    assert restored.status_code == 200, restored.text
