"""The SettingsStore contract, run against every adapter.

`sqlite` uses a file under tmp_path; `redis` a real redis-server started by the
tests (one per module, FLUSHDB before each test); `redis-container` the same
through testcontainers, skipped without a Docker engine. Redis-only behaviour
(outages, invalidation messages) is tested at the end of the module.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgspec
import pytest
import redis.asyncio
from testcontainers.community.redis import RedisContainer

from settings.cache import CachedSettings, follow_invalidations
from settings.records import (
    AdminChange,
    Agent,
    ApiKey,
    KeyEvent,
    KnowledgeBase,
    Lifecycle,
    Org,
    SettingChange,
    TurnPassage,
    TurnRecord,
    Workspace,
)
from settings.store import (
    AlreadyExistsError,
    NotEmptyError,
    NotFoundError,
    SettingsStore,
    StoreUnavailableError,
)
from settings.stores.redis.store import CREDENTIALS_CHANGED, INVALIDATION_CHANNEL, RedisStore
from settings.stores.sqlite.store import SqliteStore
from tests.support.redis_server import RedisServer
from tests.support.services import require_docker

pytestmark = pytest.mark.anyio

# Short, so outage tests fail fast; loopback answers in well under a millisecond.
REDIS_TIMEOUT_S = 0.5
AT = "2026-06-01T00:00:00Z"


# --- backends -------------------------------------------------------------------


class Backend(Protocol):
    async def open(self) -> SettingsStore:
        """A fresh, empty store."""

    async def reopen(self, store: SettingsStore) -> SettingsStore:
        """Simulate a restart of the backing service; return the store to go on with."""


@dataclass
class SqliteBackend:
    path: Path

    async def open(self) -> SettingsStore:
        return await SqliteStore.open(self.path)

    async def reopen(self, store: SettingsStore) -> SettingsStore:
        await store.close()
        return await SqliteStore.open(self.path)


@dataclass
class RedisBackend:
    url: str
    server: RedisServer | None

    async def open(self) -> SettingsStore:
        client = redis.asyncio.Redis.from_url(self.url)
        try:
            await client.flushdb()
        finally:
            await client.aclose()
        return RedisStore.connect(self.url, timeout_s=REDIS_TIMEOUT_S)

    async def reopen(self, store: SettingsStore) -> SettingsStore:
        if self.server is None:
            pytest.skip("the container variant is not restarted by these tests")
        self.server.restart()
        return store  # the same object must work again after the restart


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_container_url() -> Iterator[str]:
    require_docker()
    container = RedisContainer("redis:7-alpine")
    container.start()
    try:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(6379)
        yield f"redis://{host}:{port}/0"
    finally:
        container.stop()


SQLITE = pytest.param("sqlite", id="sqlite")
REDIS = pytest.param("redis", id="redis")
REDIS_CONTAINER = pytest.param("redis-container", id="redis-container", marks=pytest.mark.docker)


def _backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    name: str = request.param
    if name == "sqlite":
        return SqliteBackend(tmp_path / "data" / "settings.sqlite3")
    if name == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return RedisBackend(server.url, server)
    url: str = request.getfixturevalue("redis_container_url")
    return RedisBackend(url, None)


@pytest.fixture(params=[SQLITE, REDIS, REDIS_CONTAINER])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _backend(request, tmp_path)


@pytest.fixture(params=[REDIS, REDIS_CONTAINER])
def redis_backend(request: pytest.FixtureRequest, tmp_path: Path) -> RedisBackend:
    chosen = _backend(request, tmp_path)
    assert isinstance(chosen, RedisBackend)
    return chosen


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[SettingsStore]:
    opened = await backend.open()
    try:
        yield opened
    finally:
        await opened.close()


# --- records --------------------------------------------------------------------


def org(org_id: str = "acme") -> Org:
    return Org(org_id=org_id, created_at=AT)


def workspace(tenant_id: str, org_id: str = "acme", **settings: object) -> Workspace:
    return Workspace(tenant_id=tenant_id, org_id=org_id, created_at=AT, settings=dict(settings))


def kb(tenant_id: str, kb_id: str, name: str = "", org_id: str = "acme") -> KnowledgeBase:
    return KnowledgeBase(
        kb_id=kb_id,
        tenant_id=tenant_id,
        org_id=org_id,
        storage="org",
        name=name,
        created_at=AT,
        settings={"top_k": 5, "fusion": {"dense": 1.0, "keyword": 0.5}},
    )


def agent(tenant_id: str, agent_id: str, *kb_ids: str) -> Agent:
    return Agent(
        agent_id=agent_id,
        tenant_id=tenant_id,
        knowledge_base_ids=list(kb_ids),
        created_at=AT,
        settings={"pii_redaction": False},
    )


def api_key(key_id: str, key_hash: str, tenant_id: str = "t1") -> ApiKey:
    return ApiKey(
        key_id=key_id,
        key_hash=key_hash,
        org_id="acme",
        tenant_id=tenant_id,
        roles=["admin", "retrieve"],
        clearance="internal",
        created_at=AT,
    )


TURN_TENANT = "t1"


def turn(turn_id: str, tenant_id: str = TURN_TENANT) -> TurnRecord:
    passage = TurnPassage(
        passage_id="p1",
        document_id="doc1",
        knowledge_base_id="kb",
        checksum="0" * 64,
        text="Evidence with “quotes” and <tags>.",
    )
    return TurnRecord(
        turn_id=turn_id, tenant_id=tenant_id, agent_id="a1", created_at=AT, passages=[passage]
    )


async def provision(store: SettingsStore, *tenant_ids: str, org_id: str = "acme") -> None:
    """An org (if new) and one workspace per tenant id."""
    if await store.get_org(org_id) is None:
        await store.create_org(org(org_id))
    for tenant_id in tenant_ids:
        await store.create_workspace(workspace(tenant_id, org_id))


# --- the contract ---------------------------------------------------------------


async def test_orgs_and_workspaces_round_trip(store: SettingsStore) -> None:
    """Created orgs and workspaces read back equal; unknown ids read as None."""
    await store.create_org(org("acme"))
    ws = workspace("t1", strict_rag_isolation=True)
    await store.create_workspace(ws)

    assert await store.get_org("acme") == org("acme")
    assert await store.get_workspace("t1") == ws
    assert await store.get_org("nope") is None
    assert await store.get_workspace("nope") is None


async def test_duplicate_org_is_rejected(store: SettingsStore) -> None:
    """A second org with a taken id raises AlreadyExistsError and keeps the first."""
    await store.create_org(org("acme"))
    with pytest.raises(AlreadyExistsError):
        await store.create_org(Org(org_id="acme", created_at="2030-01-01T00:00:00Z"))
    assert await store.get_org("acme") == org("acme")


async def test_tenant_id_is_unique_across_orgs(store: SettingsStore) -> None:
    """A workspace id taken in one org cannot be created again, in that org or another."""
    await provision(store, "t1", org_id="acme")
    await store.create_org(org("other"))
    with pytest.raises(AlreadyExistsError):
        await store.create_workspace(workspace("t1", "other"))
    with pytest.raises(AlreadyExistsError):
        await store.create_workspace(workspace("t1", "acme"))
    assert (await store.get_workspace("t1")) == workspace("t1", "acme")


async def test_parents_must_exist(store: SettingsStore) -> None:
    """A workspace needs its org, a KB or agent its workspace: NotFoundError otherwise."""
    with pytest.raises(NotFoundError):
        await store.create_workspace(workspace("t1", "ghost"))
    await provision(store)
    with pytest.raises(NotFoundError):
        await store.put_knowledge_base(kb("ghost", "kb"))
    with pytest.raises(NotFoundError):
        await store.put_agent(agent("ghost", "a1"))
    assert await store.get_workspace("t1") is None
    assert await store.list_knowledge_bases("ghost") == []


async def test_knowledge_bases_put_get_list(store: SettingsStore) -> None:
    """put creates (True) then replaces (False); get and list see the latest record, by id."""
    await provision(store, "t1")
    assert await store.put_knowledge_base(kb("t1", "kb-b", name="first")) is True
    assert await store.put_knowledge_base(kb("t1", "kb-b", name="second")) is False
    assert await store.put_knowledge_base(kb("t1", "kb-a")) is True

    assert await store.get_knowledge_base("t1", "kb-b") == kb("t1", "kb-b", name="second")
    assert await store.get_knowledge_base("t1", "missing") is None
    assert [k.kb_id for k in await store.list_knowledge_bases("t1")] == ["kb-a", "kb-b"]
    assert await store.list_knowledge_bases("t2") == []


async def test_agents_put_get_list(store: SettingsStore) -> None:
    """Agents behave like KBs: created then replaced, ordered KB list kept as given."""
    await provision(store, "t1")
    assert await store.put_agent(agent("t1", "a1", "kb2", "kb1")) is True
    assert await store.put_agent(agent("t1", "a1", "kb3", "kb2", "kb1")) is False
    assert await store.put_agent(agent("t1", "a0")) is True

    got = await store.get_agent("t1", "a1")
    assert got is not None
    assert got.knowledge_base_ids == ["kb3", "kb2", "kb1"]
    assert got == agent("t1", "a1", "kb3", "kb2", "kb1")
    assert await store.get_agent("t1", "missing") is None
    assert [a.agent_id for a in await store.list_agents("t1")] == ["a0", "a1"]


async def test_knowledge_bases_and_agents_are_scoped_per_tenant(store: SettingsStore) -> None:
    """Two tenants may use the same KB and agent ids; neither sees the other's records."""
    await provision(store, "tenant-a", "tenant-b")
    assert await store.put_knowledge_base(kb("tenant-a", "kb", name="A's")) is True
    assert await store.put_knowledge_base(kb("tenant-b", "kb", name="B's")) is True
    assert await store.put_agent(agent("tenant-a", "bot", "kb")) is True
    assert await store.put_agent(agent("tenant-b", "bot")) is True

    kb_a = await store.get_knowledge_base("tenant-a", "kb")
    kb_b = await store.get_knowledge_base("tenant-b", "kb")
    assert kb_a is not None
    assert kb_a.name == "A's"
    assert kb_b is not None
    assert kb_b.name == "B's"
    assert [k.name for k in await store.list_knowledge_bases("tenant-a")] == ["A's"]
    assert (await store.get_agent("tenant-b", "bot")) == agent("tenant-b", "bot")

    await store.put_knowledge_base(kb("tenant-a", "only-a"))
    assert await store.get_knowledge_base("tenant-b", "only-a") is None
    assert [k.kb_id for k in await store.list_knowledge_bases("tenant-b")] == ["kb"]


async def test_settings_update_records_only_changed_keys(store: SettingsStore) -> None:
    """Only keys whose stored JSON value changes are applied and audited; None removes."""
    await provision(store, "t1", "t2")

    ws = await store.update_workspace_settings(
        "t1",
        {"strict_rag_isolation": True, "max_knowledge_bases_per_agent": 3},
        key_id="k1",
        at="2026-06-01T00:00:01Z",
    )
    assert ws.settings == {"strict_rag_isolation": True, "max_knowledge_bases_per_agent": 3}

    # Same value again: no change. New key: one change.
    ws = await store.update_workspace_settings(
        "t1",
        {"strict_rag_isolation": True, "rag_pii_redaction": False},
        key_id="k2",
        at="2026-06-01T00:00:02Z",
    )
    assert ws.settings == {
        "strict_rag_isolation": True,
        "max_knowledge_bases_per_agent": 3,
        "rag_pii_redaction": False,
    }

    # None removes a stored key (audited) and is a no-op for an absent one.
    ws = await store.update_workspace_settings(
        "t1",
        {"max_knowledge_bases_per_agent": None, "never_set": None},
        key_id="k3",
        at="2026-06-01T00:00:03Z",
    )
    assert ws.settings == {"strict_rag_isolation": True, "rag_pii_redaction": False}

    # 0 and False are equal in Python but not as stored JSON: that is a change.
    ws = await store.update_workspace_settings(
        "t1", {"rag_pii_redaction": 0}, key_id="k4", at="2026-06-01T00:00:04Z"
    )
    assert ws.settings["rag_pii_redaction"] == 0
    assert ws.settings["rag_pii_redaction"] is not False

    # Nothing changes: the workspace is returned as stored, no history.
    unchanged = await store.update_workspace_settings(
        "t1", {"strict_rag_isolation": True}, key_id="k5", at="2026-06-01T00:00:05Z"
    )
    assert unchanged == ws
    assert await store.get_workspace("t1") == ws

    assert await store.settings_history("t1") == [
        SettingChange(
            at="2026-06-01T00:00:01Z",
            key_id="k1",
            setting="strict_rag_isolation",
            old=None,
            new=True,
        ),
        SettingChange(
            at="2026-06-01T00:00:01Z",
            key_id="k1",
            setting="max_knowledge_bases_per_agent",
            old=None,
            new=3,
        ),
        SettingChange(
            at="2026-06-01T00:00:02Z", key_id="k2", setting="rag_pii_redaction", old=None, new=False
        ),
        SettingChange(
            at="2026-06-01T00:00:03Z",
            key_id="k3",
            setting="max_knowledge_bases_per_agent",
            old=3,
            new=None,
        ),
        SettingChange(
            at="2026-06-01T00:00:04Z", key_id="k4", setting="rag_pii_redaction", old=False, new=0
        ),
    ]
    assert await store.settings_history("t2") == []
    assert await store.settings_history("nobody") == []


async def test_settings_update_of_unknown_workspace(store: SettingsStore) -> None:
    """Updating a workspace that does not exist raises NotFoundError and audits nothing."""
    with pytest.raises(NotFoundError):
        await store.update_workspace_settings("ghost", {"x": 1}, key_id="k", at=AT)
    assert await store.settings_history("ghost") == []


async def test_settings_history_keeps_order_under_concurrency(store: SettingsStore) -> None:
    """Concurrent updates of one workspace all land, each audited once, oldest first."""
    await provision(store, "t1")
    await asyncio.gather(
        *(
            store.update_workspace_settings(
                "t1", {f"s{i:02d}": i}, key_id=f"k{i}", at=f"2026-06-01T00:00:{i:02d}Z"
            )
            for i in range(20)
        )
    )
    current = await store.get_workspace("t1")
    assert current is not None
    assert current.settings == {f"s{i:02d}": i for i in range(20)}
    history = await store.settings_history("t1")
    assert sorted(change.setting for change in history) == [f"s{i:02d}" for i in range(20)]

    for at in ("2026-06-02T00:00:00Z", "2026-06-03T00:00:00Z", "2026-06-04T00:00:00Z"):
        await store.update_workspace_settings("t1", {"s00": at}, key_id="k", at=at)
    assert [change.at for change in (await store.settings_history("t1"))[-3:]] == [
        "2026-06-02T00:00:00Z",
        "2026-06-03T00:00:00Z",
        "2026-06-04T00:00:00Z",
    ]


async def test_held_back_counters_per_kb(store: SettingsStore) -> None:
    """Counters start at 0, add and return the new total, per tenant and KB."""
    assert await store.held_back("t1", "kb") == 0
    assert await store.add_held_back("t1", "kb") == 1
    assert await store.add_held_back("t1", "kb", 4) == 5
    assert await store.add_held_back("t2", "kb", 2) == 2
    assert await store.add_held_back("t1", "other") == 1
    await asyncio.gather(*(store.add_held_back("t1", "kb") for _ in range(25)))
    assert await store.held_back("t1", "kb") == 30
    assert await store.held_back("t2", "kb") == 2
    assert await store.held_back("t2", "other") == 0


async def test_api_keys_by_hash(store: SettingsStore) -> None:
    """Keys read back by hash; a taken id or hash raises and stores nothing."""
    await store.create_api_key(api_key("key1", "h1"))
    assert await store.get_api_key_by_hash("h1") == api_key("key1", "h1")
    assert await store.get_api_key_by_hash("h2") is None

    with pytest.raises(AlreadyExistsError):
        await store.create_api_key(api_key("key1", "h2"))
    with pytest.raises(AlreadyExistsError):
        await store.create_api_key(api_key("key2", "h1", tenant_id="t2"))
    assert await store.get_api_key_by_hash("h2") is None
    assert await store.get_api_key_by_hash("h1") == api_key("key1", "h1")

    await store.create_api_key(api_key("key2", "h2"))
    assert await store.get_api_key_by_hash("h2") == api_key("key2", "h2")


def key_event(action: str, key: ApiKey, actor: str = "platform") -> KeyEvent:
    return KeyEvent(
        at=AT,
        action=action,
        key_id=key.key_id,
        org_id=key.org_id,
        tenant_id=key.tenant_id,
        roles=key.roles,
        clearance=key.clearance,
        actor_key_id=actor,
    )


async def test_api_keys_list_revoke_and_history(store: SettingsStore) -> None:
    """Keys are found by id and listed in id order with their last use; revoking deletes a
    key (its hash finds nothing, a second revoke returns None) and both changes are in the
    key history, in order; a refused duplicate adds no event."""
    first = msgspec.structs.replace(api_key("key_b", "hb"), expires_at="2030-01-01T00:00:00+00:00")
    second = api_key("key_a", "ha", tenant_id="t2")
    await store.create_api_key(first, key_event("created", first))
    await store.create_api_key(second, key_event("created", second))
    with pytest.raises(AlreadyExistsError):
        await store.create_api_key(first, key_event("created", first))
    assert await store.get_api_key("key_b") == first
    assert await store.get_api_key("nope") is None

    await store.record_key_use("key_b", "2026-06-02T00:00:00+00:00")
    await store.record_key_use("key_b", "2026-06-03T00:00:00+00:00")
    listed = await store.list_api_keys()
    assert [key.key_id for key in listed] == ["key_a", "key_b"]
    assert listed[0].last_used_at is None
    assert listed[1] == msgspec.structs.replace(first, last_used_at="2026-06-03T00:00:00+00:00")

    revoked = await store.revoke_api_key("key_b", key_event("revoked", first, actor="key_a"))
    assert revoked == first
    assert await store.get_api_key_by_hash("hb") is None
    assert await store.get_api_key("key_b") is None
    assert await store.revoke_api_key("key_b", key_event("revoked", first)) is None
    await store.record_key_use("key_b", "2026-06-04T00:00:00+00:00")  # ignored: revoked
    assert [key.key_id for key in await store.list_api_keys()] == ["key_a"]

    history = await store.key_history()
    assert [(e.action, e.key_id, e.actor_key_id) for e in history] == [
        ("created", "key_b", "platform"),
        ("created", "key_a", "platform"),
        ("revoked", "key_b", "key_a"),
    ]


async def test_turns_round_trip_and_expire(store: SettingsStore) -> None:
    """A turn reads back until its TTL passes, then reads as None."""
    await store.put_turn(turn("short"), ttl_s=1)
    await store.put_turn(turn("long"), ttl_s=60)
    assert await store.get_turn(TURN_TENANT, "short") == turn("short")
    assert await store.get_turn(TURN_TENANT, "missing") is None


async def test_another_tenants_turn_reads_as_missing(store: SettingsStore) -> None:
    """A turn id is found only by the tenant it was recorded for."""
    await store.put_turn(turn("t-owned"), ttl_s=60)
    assert await store.get_turn("someone-else", "t-owned") is None
    assert await store.get_turn(TURN_TENANT, "t-owned") == turn("t-owned")


async def test_turns_expire(store: SettingsStore) -> None:
    """A turn with a short TTL reads as None once it passes; a long one survives."""
    await store.put_turn(turn("short"), ttl_s=1)
    await store.put_turn(turn("long"), ttl_s=60)
    await asyncio.sleep(1.2)

    assert await store.get_turn(TURN_TENANT, "short") is None
    assert await store.get_turn(TURN_TENANT, "long") == turn("long")
    with pytest.raises(ValueError, match="ttl_s"):
        await store.put_turn(turn("bad"), ttl_s=0)


async def test_workspaces_listed_per_org(store: SettingsStore) -> None:
    """An org's workspaces are listed by tenant id; another org's are not among them."""
    await provision(store, "t2", "t1")
    await provision(store, "t3", org_id="other")
    assert [ws.tenant_id for ws in await store.list_workspaces("acme")] == ["t1", "t2"]
    assert [ws.tenant_id for ws in await store.list_workspaces("other")] == ["t3"]
    assert await store.list_workspaces("nope") == []


async def test_marking_deleting_keeps_the_id_taken(store: SettingsStore) -> None:
    """A workspace or org marked `deleting` reads back with that state (settings kept),
    its id stays taken, and marking an unknown id writes nothing and answers None."""
    await provision(store, "t1")
    await store.update_workspace_settings("t1", {"top_k": 4}, key_id="k", at=AT)
    marked = await store.mark_workspace_deleting("t1")
    assert marked is not None
    assert marked.state is Lifecycle.DELETING
    assert await store.get_workspace("t1") == marked
    assert marked.settings == {"top_k": 4}
    with pytest.raises(AlreadyExistsError):
        await store.create_workspace(workspace("t1"))
    org_marked = await store.mark_org_deleting("acme")
    assert org_marked == msgspec.structs.replace(org("acme"), state=Lifecycle.DELETING)
    assert await store.get_org("acme") == org_marked
    with pytest.raises(AlreadyExistsError):
        await store.create_org(org("acme"))
    assert await store.mark_workspace_deleting("nope") is None
    assert await store.mark_org_deleting("nope") is None
    assert await store.get_workspace("nope") is None
    assert await store.get_org("nope") is None


async def test_knowledge_base_and_agent_deletion(store: SettingsStore) -> None:
    """Deleting a KB removes its record and held-back counter, deleting an agent its
    record; a second deletion answers False; another tenant's same ids stay."""
    await provision(store, "t1", "t2")
    for tenant_id in ("t1", "t2"):
        await store.put_knowledge_base(kb(tenant_id, "kb"))
        await store.put_knowledge_base(kb(tenant_id, "kb2"))
        await store.put_agent(agent(tenant_id, "a1", "kb"))
        await store.add_held_back(tenant_id, "kb", 3)

    assert await store.delete_knowledge_base("t1", "kb") is True
    assert await store.delete_knowledge_base("t1", "kb") is False
    assert await store.delete_agent("t1", "a1") is True
    assert await store.delete_agent("t1", "a1") is False
    assert await store.get_knowledge_base("t1", "kb") is None
    assert [k.kb_id for k in await store.list_knowledge_bases("t1")] == ["kb2"]
    assert await store.list_agents("t1") == []
    assert await store.held_back("t1", "kb") == 0
    # re-created, it starts afresh
    assert await store.put_knowledge_base(kb("t1", "kb")) is True
    assert await store.held_back("t1", "kb") == 0

    assert await store.get_knowledge_base("t2", "kb") == kb("t2", "kb")
    assert await store.list_agents("t2") == [agent("t2", "a1", "kb")]
    assert await store.held_back("t2", "kb") == 3


async def test_workspace_deletion_removes_what_it_owns(store: SettingsStore) -> None:
    """Deleting a workspace removes its record, settings history, KBs, agents and
    held-back counters; its turns go with `delete_turns`; the tenant id can be created
    again, empty; a neighbour in the same org keeps everything."""
    await provision(store, "t1", "t2")
    for tenant_id in ("t1", "t2"):
        await store.update_workspace_settings(tenant_id, {"top_k": 4}, key_id="k", at=AT)
        await store.put_knowledge_base(kb(tenant_id, "kb"))
        await store.put_agent(agent(tenant_id, "a1", "kb"))
        await store.add_held_back(tenant_id, "kb", 2)
        await store.put_turn(turn(f"turn-{tenant_id}", tenant_id), ttl_s=60)
    await store.put_turn(turn("turn-t1-b", "t1"), ttl_s=60)

    await store.mark_workspace_deleting("t1")
    assert await store.delete_turns("t1") == 2
    assert await store.delete_turns("t1") == 0
    assert await store.delete_workspace("t1") is True
    assert await store.delete_workspace("t1") is False

    assert await store.get_workspace("t1") is None
    assert await store.settings_history("t1") == []
    assert await store.list_knowledge_bases("t1") == []
    assert await store.list_agents("t1") == []
    assert await store.held_back("t1", "kb") == 0
    assert await store.get_turn("t1", "turn-t1") is None
    assert [ws.tenant_id for ws in await store.list_workspaces("acme")] == ["t2"]

    await store.create_workspace(workspace("t1"))
    assert await store.get_workspace("t1") == workspace("t1")
    assert await store.list_knowledge_bases("t1") == []

    assert len(await store.settings_history("t2")) == 1
    assert await store.get_knowledge_base("t2", "kb") == kb("t2", "kb")
    assert await store.list_agents("t2") == [agent("t2", "a1", "kb")]
    assert await store.held_back("t2", "kb") == 2
    assert await store.get_turn("t2", "turn-t2") == turn("turn-t2", "t2")


async def test_a_pseudonym_key_is_made_with_its_workspace_and_goes_with_it(
    store: SettingsStore,
) -> None:
    """Each workspace has its own 32 random bytes from its creation, the same at every read
    and outside its record; an unknown workspace has none; deleting the workspace deletes
    its key, and the same id created again gets a new one."""
    await provision(store, "t1", "t2")
    first = await store.pseudonym_key("t1")
    assert first is not None
    assert len(first) == 32
    assert await store.pseudonym_key("t1") == first
    assert await store.pseudonym_key("t2") not in {None, first}
    assert await store.pseudonym_key("nobody") is None
    record = msgspec.json.encode(await store.get_workspace("t1"))
    assert first.hex().encode() not in record

    await store.mark_workspace_deleting("t1")
    assert await store.delete_workspace("t1") is True
    assert await store.pseudonym_key("t1") is None
    await store.create_workspace(workspace("t1"))
    renewed = await store.pseudonym_key("t1")
    assert renewed is not None
    assert renewed != first


async def _second_store(backend: Backend) -> SettingsStore:
    """Another store on the same data (another replica), nothing flushed."""
    if isinstance(backend, SqliteBackend):
        return await SqliteStore.open(backend.path)
    assert isinstance(backend, RedisBackend)
    return RedisStore.connect(backend.url, timeout_s=REDIS_TIMEOUT_S)


async def _drop_pseudonym_key(backend: Backend, tenant_id: str) -> None:
    """Make the workspace look stored by a release without pseudonym keys."""
    if isinstance(backend, SqliteBackend):
        with contextlib.closing(sqlite3.connect(backend.path, isolation_level=None)) as conn:
            conn.execute(
                "UPDATE workspaces SET pseudonym_key = NULL WHERE tenant_id = ?", (tenant_id,)
            )
        return
    assert isinstance(backend, RedisBackend)
    client = redis.asyncio.Redis.from_url(backend.url)
    try:
        assert await client.delete(f"kbgate:pseudonymkey:{tenant_id}") == 1
    finally:
        await client.aclose()


async def test_a_workspace_stored_without_a_key_gets_one_every_replica_agrees_on(
    backend: Backend, store: SettingsStore
) -> None:
    """A workspace stored before pseudonym keys existed gets one on first need: two stores
    on the same data asking at once all read the one key that was written first."""
    await provision(store, "old")
    await _drop_pseudonym_key(backend, "old")
    other = await _second_store(backend)
    try:
        found = await asyncio.gather(
            *(replica.pseudonym_key("old") for _ in range(8) for replica in (store, other))
        )
        (key,) = set(found)
        assert key is not None
        assert len(key) == 32
        assert await other.pseudonym_key("old") == key
    finally:
        await other.close()


async def test_admin_history_is_per_workspace_in_order_and_goes_with_it(
    store: SettingsStore,
) -> None:
    """KB and agent changes read back per workspace, oldest first, exactly as recorded;
    another workspace's history is its own; deleting a workspace removes its history."""
    await provision(store, "t1", "t2")

    def change(tenant_id: str, object_id: str, action: str) -> AdminChange:
        return AdminChange(
            at=AT,
            key_id="key_1",
            tenant_id=tenant_id,
            kind="agent",
            object_id=object_id,
            action=action,
            fields=["knowledge_base_ids", "top_k"],
            knowledge_base_ids=["kb-b", "kb-a"],
        )

    t1 = [change("t1", "bot", "created"), change("t1", "bot", "changed")]
    for item in (t1[0], change("t2", "other", "created"), t1[1]):
        await store.record_admin_change(item)
    assert await store.admin_history("t1") == t1
    assert [item.object_id for item in await store.admin_history("t2")] == ["other"]
    assert await store.admin_history("t3") == []

    await store.mark_workspace_deleting("t1")
    assert await store.delete_workspace("t1") is True
    assert await store.admin_history("t1") == []
    assert len(await store.admin_history("t2")) == 1


async def test_org_deletion_needs_it_empty(store: SettingsStore) -> None:
    """An org with a workspace is not deleted (NotEmptyError, nothing removed); once its
    workspaces are gone it is, a second time answers False, and its id can be reused."""
    await provision(store, "t1")
    await store.mark_org_deleting("acme")
    with pytest.raises(NotEmptyError):
        await store.delete_org("acme")
    assert await store.get_org("acme") is not None
    assert await store.get_workspace("t1") is not None

    assert await store.delete_workspace("t1") is True
    assert await store.delete_org("acme") is True
    assert await store.delete_org("acme") is False
    assert await store.get_org("acme") is None
    await store.create_org(org("acme"))
    assert await store.get_org("acme") == org("acme")


async def test_odd_ids_do_not_collide(store: SettingsStore) -> None:
    """Ids with `:`, `%`, spaces or non-ASCII stay distinct records in every lookup."""
    # Naively joined with ':' these pairs would share one key: 'a' + 'b:c' and 'a:b' + 'c'.
    tenants = ["a", "a:b", "a%3Ab", "租户 ü", "a:"]
    await provision(store, *tenants)
    await store.put_knowledge_base(kb("a", "b:c", name="a/b:c"))
    await store.put_knowledge_base(kb("a:b", "c", name="a:b/c"))
    await store.put_knowledge_base(kb("a%3Ab", "c", name="a%3Ab/c"))
    await store.put_knowledge_base(kb("租户 ü", "知识:库", name="unicode"))
    await store.put_agent(agent("a", "b:c", "b:c"))
    await store.put_agent(agent("a:b", "c", "c"))

    found = await store.get_knowledge_base("a", "b:c")
    assert found is not None
    assert found.name == "a/b:c"
    found = await store.get_knowledge_base("a:b", "c")
    assert found is not None
    assert found.name == "a:b/c"
    assert await store.get_knowledge_base("a", "b") is None
    assert await store.get_knowledge_base("a:b", "b:c") is None
    assert [k.name for k in await store.list_knowledge_bases("a%3Ab")] == ["a%3Ab/c"]
    assert [k.name for k in await store.list_knowledge_bases("租户 ü")] == ["unicode"]
    assert await store.list_knowledge_bases("a:") == []
    assert await store.get_agent("a", "b:c") == agent("a", "b:c", "b:c")
    assert await store.get_agent("a:b", "c") == agent("a:b", "c", "c")

    assert await store.add_held_back("a", "b:c") == 1
    assert await store.add_held_back("a:b", "c", 7) == 7
    assert await store.held_back("a", "b:c") == 1

    await store.update_workspace_settings("a:b", {"s": 1}, key_id="k", at=AT)
    assert await store.settings_history("a") == []
    workspace_a = await store.get_workspace("a")
    assert workspace_a is not None
    assert workspace_a.settings == {}

    await store.create_api_key(api_key("id:1", "hash:1"))
    await store.create_api_key(api_key("id", "1:hash:1"))
    assert await store.get_api_key_by_hash("hash:1") == api_key("id:1", "hash:1")
    await store.put_turn(turn("turn:1", tenant_id="租户 ü"), ttl_s=60)
    assert await store.get_turn("租户 ü", "turn:1") == turn("turn:1", tenant_id="租户 ü")
    assert await store.get_turn(TURN_TENANT, "turn") is None


async def test_data_survives_reopening(backend: Backend, store: SettingsStore) -> None:
    """Everything written before a restart (SQLite reopen, Redis restart) reads back after."""
    await provision(store, "t1")
    await store.update_workspace_settings("t1", {"strict_rag_isolation": False}, key_id="k", at=AT)
    await store.put_knowledge_base(kb("t1", "kb"))
    await store.put_agent(agent("t1", "a1", "kb"))
    await store.add_held_back("t1", "kb", 3)
    await store.create_api_key(api_key("key1", "h1"))
    await store.put_turn(turn("turn1"), ttl_s=60)
    expected_ws = await store.get_workspace("t1")

    reopened = await backend.reopen(store)
    try:
        await reopened.ping()
        assert await reopened.get_org("acme") == org("acme")
        assert await reopened.get_workspace("t1") == expected_ws
        assert len(await reopened.settings_history("t1")) == 1
        assert await reopened.get_knowledge_base("t1", "kb") == kb("t1", "kb")
        assert await reopened.list_agents("t1") == [agent("t1", "a1", "kb")]
        assert await reopened.held_back("t1", "kb") == 3
        assert await reopened.get_api_key_by_hash("h1") == api_key("key1", "h1")
        assert await reopened.get_turn(TURN_TENANT, "turn1") == turn("turn1")
        # Uniqueness holds across the restart too.
        with pytest.raises(AlreadyExistsError):
            await reopened.create_workspace(workspace("t1"))
    finally:
        if reopened is not store:
            await reopened.close()


async def test_ping_answers_when_up(store: SettingsStore) -> None:
    """ping returns quietly while the store is reachable."""
    await store.ping()


# --- SQLite only ----------------------------------------------------------------


async def test_sqlite_purges_expired_turns_and_refuses_after_close(tmp_path: Path) -> None:
    """An expired turn row stays unreadable until the retention sweep purges it (and only
    it); a closed store is unavailable."""
    store = await SqliteStore.open(tmp_path / "nested" / "settings.sqlite3")
    try:
        await store.put_turn(turn("old"), ttl_s=1)
        await asyncio.sleep(1.1)
        await store.put_turn(turn("new"), ttl_s=60)
        assert await store.get_turn(TURN_TENANT, "old") is None
        assert await store.purge_expired_turns() == 1
        assert await store.purge_expired_turns() == 0
        assert await store.get_turn(TURN_TENANT, "new") == turn("new")
    finally:
        await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.ping()
    with pytest.raises(StoreUnavailableError):
        await store.get_org("acme")


async def test_sqlite_turn_record_never_waits_on_the_event_loop(tmp_path: Path) -> None:
    """While another connection (another process) holds the database's write lock, a turn
    record waits for it off the event loop: the loop keeps running, and the record lands
    once the holder lets go."""
    path = tmp_path / "settings.sqlite3"
    store = await SqliteStore.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writing = asyncio.create_task(store.put_turn(turn("held-by-another"), ttl_s=60))
        started = time.perf_counter()
        await asyncio.sleep(0.2)
        assert time.perf_counter() - started < 1.0  # the loop was not stuck in SQLite
        assert not writing.done()
        other.execute("COMMIT")
        await asyncio.wait_for(writing, timeout=10)
        assert await store.get_turn(TURN_TENANT, "held-by-another") == turn("held-by-another")
    finally:
        other.close()
        await store.close()


async def test_sqlite_file_of_schema_1_gains_pseudonym_keys(tmp_path: Path) -> None:
    """A file written by schema version 1 (workspaces without a key column) is migrated on
    open: its workspace keeps its record and gets a key on first need."""
    path = tmp_path / "settings.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.executescript(
            "CREATE TABLE orgs (org_id TEXT PRIMARY KEY, record TEXT NOT NULL);"
            "CREATE TABLE workspaces (tenant_id TEXT PRIMARY KEY, "
            "org_id TEXT NOT NULL REFERENCES orgs (org_id), record TEXT NOT NULL);"
            "PRAGMA user_version=1;"
        )
        conn.execute(
            "INSERT INTO orgs VALUES (?, ?)", ("acme", msgspec.json.encode(org()).decode())
        )
        conn.execute(
            "INSERT INTO workspaces VALUES (?, ?, ?)",
            ("old", "acme", msgspec.json.encode(workspace("old")).decode()),
        )
    store = await SqliteStore.open(path)
    try:
        assert await store.get_workspace("old") == workspace("old")
        key = await store.pseudonym_key("old")
        assert key is not None
        assert len(key) == 32
        assert await store.pseudonym_key("old") == key
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2


# --- Redis only -----------------------------------------------------------------


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own, free to be stopped without disturbing the others."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def _assert_unavailable_quickly(store: RedisStore) -> None:
    """ping and a read both raise StoreUnavailableError, each within about the timeout."""
    limit = REDIS_TIMEOUT_S * 2 + 0.5
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        await store.ping()
    assert time.monotonic() - started < limit
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        await store.get_org("acme")
    assert time.monotonic() - started < limit


async def test_redis_outage_when_stopped_then_recovers(own_redis: RedisServer) -> None:
    """With the server down, ping and reads fail fast; after restart the same store works."""
    store = RedisStore.connect(own_redis.url, timeout_s=REDIS_TIMEOUT_S)
    try:
        await store.create_org(org())
        own_redis.stop()
        await _assert_unavailable_quickly(store)
        own_redis.start()
        await store.ping()
        assert await store.get_org("acme") == org()
    finally:
        await store.close()


async def test_redis_outage_when_hung_then_recovers(own_redis: RedisServer) -> None:
    """A server that accepts but never answers fails calls within the timeout, not a hang."""
    store = RedisStore.connect(own_redis.url, timeout_s=REDIS_TIMEOUT_S)
    try:
        await store.create_org(org())
        own_redis.freeze()
        try:
            await _assert_unavailable_quickly(store)
        finally:
            own_redis.thaw()
        await store.ping()
        assert await store.get_org("acme") == org()
    finally:
        await store.close()


async def test_redis_settings_updates_from_two_replicas(redis_backend: RedisBackend) -> None:
    """Concurrent updates through two store instances (WATCH conflicts) all land, audited once."""
    first = await redis_backend.open()
    second = RedisStore.connect(redis_backend.url, timeout_s=REDIS_TIMEOUT_S)
    try:
        await provision(first, "t1")
        await asyncio.gather(
            *(
                (first if i % 2 else second).update_workspace_settings(
                    "t1", {f"s{i:02d}": i}, key_id="k", at=AT
                )
                for i in range(20)
            )
        )
        current = await second.get_workspace("t1")
        assert current is not None
        assert current.settings == {f"s{i:02d}": i for i in range(20)}
        assert len(await first.settings_history("t1")) == 20
    finally:
        await second.close()
        await first.close()


async def _wait_for_subscriber(url: str) -> None:
    client = redis.asyncio.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            counts = dict(await client.pubsub_numsub(INVALIDATION_CHANNEL))
            if counts.get(INVALIDATION_CHANNEL.encode(), 0) > 0:
                return
            await asyncio.sleep(0.01)
    finally:
        await client.aclose()
    pytest.fail("the invalidation listener never subscribed")


async def test_redis_invalidations_reach_other_instances(redis_backend: RedisBackend) -> None:
    """Workspace, KB and agent writes on one store reach another store's listener as tenant ids."""
    writer = await redis_backend.open()
    reader = RedisStore.connect(redis_backend.url, timeout_s=REDIS_TIMEOUT_S)
    listener = reader.invalidations()
    try:
        await provision(writer, "t:1", "t2")
        first = asyncio.ensure_future(anext(listener))
        await _wait_for_subscriber(redis_backend.url)

        await writer.put_knowledge_base(kb("t:1", "kb"))
        assert await asyncio.wait_for(first, 2) == "t:1"
        await writer.put_agent(agent("t2", "a1"))
        assert await asyncio.wait_for(anext(listener), 2) == "t2"
        await writer.update_workspace_settings("t:1", {"x": 1}, key_id="k", at=AT)
        assert await asyncio.wait_for(anext(listener), 2) == "t:1"
        await writer.create_workspace(workspace("租户"))
        assert await asyncio.wait_for(anext(listener), 2) == "租户"
    finally:
        await listener.aclose()
        await reader.close()
        await writer.close()


async def test_redis_key_revocations_reach_other_instances(redis_backend: RedisBackend) -> None:
    """Revoking a key on one store announces that credentials changed to another store's
    listener (the empty string, which no tenant id can be)."""
    writer = await redis_backend.open()
    reader = RedisStore.connect(redis_backend.url, timeout_s=REDIS_TIMEOUT_S)
    listener = reader.invalidations()
    try:
        await writer.create_api_key(api_key("key1", "h1"))
        first = asyncio.ensure_future(anext(listener))
        await _wait_for_subscriber(redis_backend.url)
        await writer.revoke_api_key("key1")
        assert await asyncio.wait_for(first, 2) == CREDENTIALS_CHANGED
    finally:
        await listener.aclose()
        await reader.close()
        await writer.close()


async def test_redis_revocation_reaches_another_replicas_cached_keys(
    redis_backend: RedisBackend,
) -> None:
    """A key cached by one replica's settings cache (long staleness bound) reads as gone
    there soon after another replica revokes it, through the invalidation channel."""
    writer = await redis_backend.open()
    reader = RedisStore.connect(redis_backend.url, timeout_s=REDIS_TIMEOUT_S)
    cache = CachedSettings(reader, staleness_s=3600)
    follower = asyncio.create_task(follow_invalidations(reader, cache))
    try:
        await writer.create_api_key(api_key("key1", "h1"))
        await _wait_for_subscriber(redis_backend.url)
        assert await cache.api_key("h1") == api_key("key1", "h1")
        await writer.revoke_api_key("key1")
        deadline = time.monotonic() + 3
        while await cache.api_key("h1") is not None:
            assert time.monotonic() < deadline, "the revocation never reached the cache"
            await asyncio.sleep(0.05)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await reader.close()
        await writer.close()


async def test_workspace_deletion_removes_its_key_history(store: SettingsStore) -> None:
    """Issue 57 #7: deleting a workspace removes every key event of its tenant id (a
    workspace created again with the id starts with no history); the events of other
    workspaces stay, in order."""
    await provision(store, "t1", "t2", "t10")
    keys = [
        api_key(f"key_{n}", f"h{n}", tenant_id=t) for n, t in enumerate(["t1", "t2", "t1", "t10"])
    ]
    for key in keys:
        await store.create_api_key(key, key_event("created", key))
    await store.revoke_api_key("key_0", key_event("revoked", keys[0]))
    await store.mark_workspace_deleting("t1")
    assert await store.delete_workspace("t1") is True
    assert [(e.action, e.key_id) for e in await store.key_history()] == [
        ("created", "key_1"),
        ("created", "key_3"),
    ]
    await store.create_workspace(workspace("t1"))
    assert [e.tenant_id for e in await store.key_history()] == ["t2", "t10"]


async def test_tenant_ids_are_unique_ignoring_case(store: SettingsStore) -> None:
    """Issue 57 #8: a tenant id that differs from a stored one only in case is taken, in
    any org; ids without letters, and other ids, are not affected."""
    await provision(store, "Legacy-WS", "t-1")
    await store.create_org(org("other"))
    for taken in ("legacy-ws", "LEGACY-WS", "Legacy-WS"):
        with pytest.raises(AlreadyExistsError):
            await store.create_workspace(workspace(taken, "other"))
    with pytest.raises(AlreadyExistsError):
        await store.create_workspace(workspace("T-1"))
    await store.create_workspace(workspace("legacy-ws2"))
    await store.create_workspace(workspace("42"))
    assert (await store.get_workspace("Legacy-WS")) == workspace("Legacy-WS")
    assert await store.get_workspace("legacy-ws") is None
