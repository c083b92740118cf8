"""With Redis down and nothing cached about a workspace, a turn falls back to a KB cap of 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.access.auth import principal_of
from gateway.admin import knowledge, provisioning, workspace
from gateway.retrieval.plan import plan_turn
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from settings.config import load_config
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.anyio


async def test_unknown_workspace_settings_fall_back_to_cap_3(
    tmp_path: Path, redis: RedisServer, embedder: Embedder
) -> None:
    """The stored cap (1) cannot be read and was never cached: the turn plans 3 KBs; once the
    workspace has been read, its last known cap (1) is used through the outage instead."""
    config = load_config(
        {},
        data_dir=tmp_path / "data",
        platform_key="x" * 20,
        redis_url=redis.url,
        redis_timeout_s=0.5,
    )
    services = await build_services(config, Telemetry(build_logger("INFO")), embedder=embedder)
    try:
        await provisioning.create_org(services.store, services.index, "acme")
        await provisioning.create_workspace(services.store, "acme", "ws", None)
        _, record = await provisioning.create_key(
            services.store,
            org_id="acme",
            tenant_id="ws",
            roles=["admin", "retrieve"],
            clearance=None,
        )
        principal = principal_of(record)
        for kb in ("k1", "k2", "k3", "k4"):
            await knowledge.put_knowledge_base(
                services.knowledge, principal, kb, name="", storage="org", settings={}
            )
        await knowledge.put_agent(
            services.knowledge, principal, "bot", ["k1", "k2", "k3", "k4"], {}
        )
        await workspace.change_settings(
            services.workspaces, principal, {"max_knowledge_bases_per_agent": 1}
        )
        await services.settings.agent("ws", "bot")
        for kb in ("k1", "k2", "k3"):
            await services.settings.knowledge_base("ws", kb)

        redis.stop()
        unknown = await plan_turn(services.planning, principal, "bot")
        assert unknown.workspace is None
        assert unknown.cap.value == 3
        assert [plan.kb.kb_id for plan in unknown.plans] == ["k1", "k2", "k3"]

        redis.start()
        await services.store.ping()  # as readiness does: Redis is used again at once
        await services.settings.workspace("ws")
        redis.stop()
        services.settings.invalidate_all()
        known = await plan_turn(services.planning, principal, "bot")
        assert known.cap.value == 1
        assert [plan.kb.kb_id for plan in known.plans] == ["k1"]
    finally:
        await services.close()
