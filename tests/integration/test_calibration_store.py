"""Golden sets, evaluations and the evaluation lease on both SettingsStores: SQLite in a
file, and a real redis-server (one per module, FLUSHDB before each test)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest
import redis.asyncio

from settings.golden import (
    EVALUATIONS_KEPT,
    Evaluation,
    EvaluationStatus,
    GoldenQuestion,
    GoldenSet,
    MeasuredLines,
)
from settings.migration import MigrationStatus, MigrationStep, ModelMigration
from settings.records import Org, SettingChange, Workspace
from settings.store import NotFoundError, SettingsStore
from settings.stores.redis.store import RedisStore
from settings.stores.sqlite.store import SqliteStore
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio

AT = "2026-06-01T00:00:00+00:00"
LEASE_S = 60.0


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SettingsStore]:
    opened: SettingsStore
    if request.param == "sqlite":
        opened = await SqliteStore.open(tmp_path / "settings.sqlite3")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        client = redis.asyncio.Redis.from_url(server.url)
        try:
            await client.flushdb()
        finally:
            await client.aclose()
        opened = RedisStore.connect(server.url, timeout_s=1.0)
    for tenant_id in ("t1", "t2"):
        if await opened.get_org("acme") is None:
            await opened.create_org(Org(org_id="acme", created_at=AT))
        await opened.create_workspace(Workspace(tenant_id=tenant_id, org_id="acme", created_at=AT))
    try:
        yield opened
    finally:
        await opened.close()


def golden(tenant_id: str, kb_id: str, *questions: str) -> GoldenSet:
    return GoldenSet(
        tenant_id=tenant_id,
        kb_id=kb_id,
        questions=[
            GoldenQuestion(question=q, document_ids=["doc:1", "a/b"], grades=[1, 3])
            for q in questions
        ],
        off_topic=["Off topic?"],
        updated_at=AT,
        updated_by="key_1",
    )


def evaluation(tenant_id: str, kb_id: str, evaluation_id: str) -> Evaluation:
    return Evaluation(
        evaluation_id=evaluation_id,
        tenant_id=tenant_id,
        kb_id=kb_id,
        key_id="key_1",
        created_at=AT,
        updated_at=AT,
    )


def finished(found: Evaluation) -> Evaluation:
    return msgspec.structs.replace(
        found, status=EvaluationStatus.DONE, report={"figures": [1.5, None]}
    )


async def test_golden_sets_are_per_workspace_and_kb(store: SettingsStore) -> None:
    """A golden set reads back equal, replaces the previous one, and is another workspace's
    or KB's as missing; an unknown workspace cannot have one."""
    first = golden("t1", "kb", "Q1?")
    await store.put_golden_set(first)
    assert await store.get_golden_set("t1", "kb") == first
    second = golden("t1", "kb", "Q2?", "Q3?")
    await store.put_golden_set(second)
    assert await store.get_golden_set("t1", "kb") == second
    assert await store.get_golden_set("t2", "kb") is None
    assert await store.get_golden_set("t1", "other") is None
    with pytest.raises(NotFoundError):
        await store.put_golden_set(golden("nobody", "kb", "Q?"))


async def test_one_running_evaluation_per_workspace(store: SettingsStore) -> None:
    """The lease admits one running evaluation per workspace: a second start names the
    holder and stores nothing; another workspace starts its own; once the first is
    finished (its lease given back) the next one starts."""
    assert await store.start_evaluation(evaluation("t1", "kb", "e1"), lease_s=LEASE_S) is None
    assert await store.start_evaluation(evaluation("t1", "kb2", "e2"), lease_s=LEASE_S) == "e1"
    assert await store.get_evaluation("t1", "e2") is None
    assert await store.start_evaluation(evaluation("t2", "kb", "e3"), lease_s=LEASE_S) is None
    first = await store.get_evaluation("t1", "e1")
    assert first is not None
    assert await store.update_evaluation(finished(first), lease_s=LEASE_S) is True
    assert await store.get_evaluation("t1", "e1") == finished(first)
    assert await store.start_evaluation(evaluation("t1", "kb", "e4"), lease_s=LEASE_S) is None
    assert await store.get_evaluation("t2", "e1") is None
    with pytest.raises(NotFoundError):
        await store.start_evaluation(evaluation("nobody", "kb", "e5"), lease_s=LEASE_S)


async def test_a_lease_that_runs_out_frees_the_workspace(store: SettingsStore) -> None:
    """An evaluation whose process stopped (no progress within the lease) no longer blocks
    the next; progress renews the lease."""
    assert await store.start_evaluation(evaluation("t1", "kb", "e1"), lease_s=0.5) is None
    running = await store.get_evaluation("t1", "e1")
    assert running is not None
    await asyncio.sleep(0.3)
    assert await store.update_evaluation(running, lease_s=0.5) is True
    await asyncio.sleep(0.3)
    assert await store.start_evaluation(evaluation("t1", "kb", "e2"), lease_s=0.5) == "e1"
    await asyncio.sleep(0.4)
    assert await store.start_evaluation(evaluation("t1", "kb", "e2"), lease_s=0.5) is None


async def test_evaluations_listed_newest_first_and_kept_bounded(store: SettingsStore) -> None:
    """A KB keeps its newest evaluations, newest first; older ones are dropped as new ones
    start, and updating a dropped one writes nothing."""
    ids = [f"e{n}" for n in range(EVALUATIONS_KEPT + 2)]
    for evaluation_id in ids:
        assert (
            await store.start_evaluation(evaluation("t1", "kb", evaluation_id), lease_s=LEASE_S)
            is None
        )
        started = await store.get_evaluation("t1", evaluation_id)
        assert started is not None
        await store.update_evaluation(finished(started), lease_s=LEASE_S)
    listed = [found.evaluation_id for found in await store.list_evaluations("t1", "kb")]
    assert listed == list(reversed(ids))[:EVALUATIONS_KEPT]
    assert await store.get_evaluation("t1", "e0") is None
    assert await store.update_evaluation(evaluation("t1", "kb", "e0"), lease_s=1) is False
    assert await store.get_evaluation("t1", "e0") is None
    assert await store.list_evaluations("t2", "kb") == []


async def test_deleting_calibration_removes_a_kbs_or_a_workspaces(store: SettingsStore) -> None:
    """Deleting one KB's calibration removes its golden set and evaluations and frees the
    lease its running evaluation held; the workspace's other KBs and other workspaces keep
    theirs; with no KB named, every KB of the workspace goes."""
    await store.put_golden_set(golden("t1", "kb", "Q?"))
    await store.put_golden_set(golden("t1", "kb2", "Q?"))
    await store.put_golden_set(golden("t2", "kb", "Q?"))
    await store.start_evaluation(evaluation("t1", "kb", "e1"), lease_s=LEASE_S)
    await store.start_evaluation(evaluation("t2", "kb", "e2"), lease_s=LEASE_S)
    assert await store.delete_calibration("t1", "kb") == 2
    assert await store.get_golden_set("t1", "kb") is None
    assert await store.get_evaluation("t1", "e1") is None
    assert await store.update_evaluation(evaluation("t1", "kb", "e1"), lease_s=1) is False
    assert await store.start_evaluation(evaluation("t1", "kb2", "e3"), lease_s=LEASE_S) is None
    assert await store.get_golden_set("t1", "kb2") is not None
    assert await store.delete_calibration("t1") == 2
    assert await store.get_golden_set("t1", "kb2") is None
    assert await store.list_evaluations("t1", "kb2") == []
    assert await store.get_golden_set("t2", "kb") is not None
    assert await store.get_evaluation("t2", "e2") is not None


def lines(tenant_id: str, kb_id: str, scope: str, dense: float = 0.5) -> MeasuredLines:
    return MeasuredLines(
        tenant_id=tenant_id,
        kb_id=kb_id,
        scope=scope,
        dense=dense,
        joint=dense + 0.05,
        points=120,
        measured_at=AT,
    )


async def test_measured_lines_are_kept_per_workspace_kb_and_scope(store: SettingsStore) -> None:
    """Lines read back only under the workspace, KB and Scope they were kept for, the
    latest replacing the earlier; none are kept for an unknown workspace."""
    await store.put_measured_lines(lines("t1", "kb", "s1"))
    await store.put_measured_lines(lines("t1", "kb", "s1", dense=0.55))
    await store.put_measured_lines(lines("t1", "kb", "s2", dense=0.42))
    assert await store.get_measured_lines("t1", "kb", "s1") == lines("t1", "kb", "s1", 0.55)
    assert await store.get_measured_lines("t1", "kb", "s2") == lines("t1", "kb", "s2", 0.42)
    assert await store.get_measured_lines("t2", "kb", "s1") is None
    assert await store.get_measured_lines("t1", "kb2", "s1") is None
    assert await store.get_measured_lines("t1", "kb", "s3") is None
    await store.put_measured_lines(lines("gone", "kb", "s1"))
    assert await store.get_measured_lines("gone", "kb", "s1") is None


async def test_measured_lines_go_with_their_kbs_calibration(store: SettingsStore) -> None:
    """Deleting a KB's calibration removes its lines of every Scope; the workspace's other
    KBs keep theirs until the workspace's calibration goes; another workspace's stay."""
    for tenant_id, kb_id, scope in [("t1", "kb", "s1"), ("t1", "kb", "s2"), ("t1", "kb2", "s1"),
                                    ("t2", "kb", "s1")]:  # fmt: skip
        await store.put_measured_lines(lines(tenant_id, kb_id, scope))
    assert await store.delete_calibration("t1", "kb") == 0
    assert await store.get_measured_lines("t1", "kb", "s1") is None
    assert await store.get_measured_lines("t1", "kb", "s2") is None
    assert await store.get_measured_lines("t1", "kb2", "s1") is not None
    await store.delete_calibration("t1")
    assert await store.get_measured_lines("t1", "kb2", "s1") is None
    assert await store.get_measured_lines("t2", "kb", "s1") is not None


async def test_applied_changes_join_the_settings_history(store: SettingsStore) -> None:
    """Changes appended for a KB read back in the workspace's settings history after its
    own changes, with the KB and evaluation they name; another workspace's is untouched."""
    await store.update_workspace_settings(
        "t1", {"max_knowledge_bases_per_agent": 4}, key_id="k", at=AT
    )
    applied = [
        SettingChange(
            at=AT,
            key_id="key_1",
            setting="score_threshold",
            old=None,
            new=0.42,
            knowledge_base_id="kb",
            evaluation_id="e1",
        )
    ]
    await store.append_settings_history("t1", applied)
    history = await store.settings_history("t1")
    assert [change.setting for change in history] == [
        "max_knowledge_bases_per_agent",
        "score_threshold",
    ]
    assert history[-1] == applied[0]
    assert await store.settings_history("t2") == []


def migration(tenant_id: str, kb_id: str, status: MigrationStatus) -> ModelMigration:
    return ModelMigration(
        migration_id=f"mig_{tenant_id}_{kb_id}",
        tenant_id=tenant_id,
        kb_id=kb_id,
        source_model="kbgate/all-MiniLM-L6-v2-int8",
        target_model="kbgate/all-MiniLM-L6-v2-int8-questions",
        key_id="key_1",
        created_at=AT,
        updated_at=AT,
        status=status,
        steps=[MigrationStep(at=AT, key_id="key_1", action="started")],
    )


async def test_a_kbs_migration_is_kept_listed_while_building_and_goes_with_it(
    store: SettingsStore,
) -> None:
    """A KB's migration reads back under its workspace and KB only, the latest replacing
    the earlier; only building ones are listed for a start to resume; none is kept for an
    unknown workspace; deleting the KB's (or the workspace's) calibration removes it."""
    building = migration("t1", "kb", MigrationStatus.BUILDING)
    assert await store.put_migration(building)
    assert await store.put_migration(migration("t2", "kb", MigrationStatus.BUILT))
    assert await store.put_migration(migration("t1", "kb2", MigrationStatus.BUILDING))
    assert not await store.put_migration(migration("gone", "kb", MigrationStatus.BUILDING))
    assert await store.get_migration("t1", "kb") == building
    assert await store.get_migration("t1", "nope") is None
    listed = await store.building_migrations()
    assert [(m.tenant_id, m.kb_id) for m in listed] == [("t1", "kb"), ("t1", "kb2")]
    built = msgspec.structs.replace(building, status=MigrationStatus.BUILT, done=3, total=3)
    assert await store.put_migration(built)
    assert await store.get_migration("t1", "kb") == built
    assert [(m.tenant_id, m.kb_id) for m in await store.building_migrations()] == [("t1", "kb2")]
    await store.delete_calibration("t1", "kb")
    assert await store.get_migration("t1", "kb") is None
    assert await store.get_migration("t1", "kb2") is not None
    await store.delete_calibration("t1")
    assert await store.get_migration("t1", "kb2") is None
    assert await store.building_migrations() == []
    assert await store.get_migration("t2", "kb") is not None
