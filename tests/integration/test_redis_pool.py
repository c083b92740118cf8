"""One Redis connection pool per gateway process."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import RedisServer

PLATFORM_KEY = "redis-pool-test-platform-key"


@pytest.mark.slow
def test_every_redis_user_of_a_gateway_shares_one_pool(tmp_path: Path, model_dir: Path) -> None:
    """Calls that go through the settings store, the per-key and per-workspace rate limits,
    the failed-authentication counter and the console's sessions, one after another, leave
    the gateway holding at most three Redis connections: the settings invalidation
    subscription's and its one pool's (which opens a second only while two commands of one
    request overlap). A client per user held at least four: one each, and the subscription."""
    with RedisServer(tmp_path / "redis") as server:
        env = {
            "KBGATE_REDIS_URL": server.url,
            "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        }
        with GatewayProcess(tmp_path / "data", env) as gateway, gateway.client() as client:
            platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
            assert client.post("/v1/orgs", json={"org_id": "pool"}, headers=platform).is_success
            created = client.post(
                "/v1/orgs/pool/workspaces", json={"tenant_id": "pool-ws"}, headers=platform
            )
            assert created.is_success
            issued = client.post(
                "/v1/keys",
                json={"org_id": "pool", "tenant_id": "pool-ws", "roles": ["admin"]},
                headers=platform,
            )
            key = issued.json()["key"]
            admin = {"Authorization": f"Bearer {key}"}
            assert client.get("/v1/workspace/settings", headers=admin).status_code == 200
            refused = client.get("/v1/workspace/settings", headers={"Authorization": "Bearer x"})
            assert refused.status_code == 401
            signed_in = client.post(
                "/console/login",
                data={"key": key},
                headers={"Origin": gateway.url},
                follow_redirects=False,
            )
            assert signed_in.status_code == 303
            with redis.Redis.from_url(server.url) as probe:
                own = probe.client_id()
                connections = [c for c in probe.client_list() if int(c["id"]) != own]
        assert 2 <= len(connections) <= 3, [(c["id"], c["cmd"]) for c in connections]
        assert sum(c["cmd"] == "subscribe" for c in connections) == 1
