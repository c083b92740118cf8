"""A real Qdrant server behind the TCP fault proxy, under a real gateway process (Docker only).

The gateway talks to a Qdrant container through `FaultProxy`; for each fault (delay past
KBGATE_QDRANT_TIMEOUT_S, drop, reset) a turn answers 503 with Retry-After and problem
details naming the index — never a partial or unscoped answer — and readiness says the index
is down; back on pass-through the same turn answers again, with no restart. Skipped cleanly
where no Docker engine runs (tests/api/test_index_faults.py covers the same rules with the
embedded engine everywhere).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from testcontainers.community.qdrant import QdrantContainer

from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_process import GatewayProcess
from tests.support.services import require_docker
from tests.support.workspace_http import workspace_headers

QDRANT_IMAGE = "qdrant/qdrant:v1.20.0"  # per-scope IDF needs Qdrant >= 1.19
PLATFORM_KEY = "qdrant-faults-platform-key-01"
TIMEOUT_S = 1.0
QUESTION = "When does the harbour ferry leave?"


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, model_dir: Path
) -> Iterator[tuple[FaultProxy, GatewayProcess, dict[str, str]]]:
    """Qdrant in a container, the proxy in front of its HTTP port, a gateway on the proxy
    with one workspace, KB, agent and document."""
    require_docker()
    root = tmp_path_factory.mktemp("qdrant-faults")
    with QdrantContainer(image=QDRANT_IMAGE) as container:
        port = int(container.get_exposed_port(6333))
        host = container.get_container_host_ip()
        with FaultProxy(port, upstream_host=host) as proxy:
            env = {
                "KBGATE_QDRANT_URL": f"http://127.0.0.1:{proxy.port}",
                "KBGATE_QDRANT_TIMEOUT_S": str(TIMEOUT_S),
                "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
                "KBGATE_MODEL_CACHE_DIR": str(model_dir),
            }
            with GatewayProcess(root / "data", env) as gateway:
                with gateway.client() as client:
                    headers = _provision(client)
                yield proxy, gateway, headers


def _provision(client: httpx.Client) -> dict[str, str]:
    headers = workspace_headers(client, PLATFORM_KEY, "acme", "acme-ws")
    client.put("/v1/knowledge-bases/harbour", json={}, headers=headers).raise_for_status()
    client.put(
        "/v1/knowledge-bases/harbour/documents/ferry",
        json={
            "text": "The harbour ferry leaves at seven every morning.",
            "classification": "public",
        },
        headers=headers,
    ).raise_for_status()
    client.put(
        "/v1/agents/bot", json={"knowledge_base_ids": ["harbour"]}, headers=headers
    ).raise_for_status()
    return headers


@pytest.mark.parametrize("fault", ["delay", "drop", "reset"])
def test_qdrant_faults_answer_503_then_recover(
    world: tuple[FaultProxy, GatewayProcess, dict[str, str]], fault: str
) -> None:
    """Under each fault a turn is 503 with Retry-After within the index timeout's reach and
    readiness reports the index down; on pass-through the turn finds the document again."""
    proxy, gateway, headers = world
    with gateway.client() as client:
        assert (
            client.post(
                "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
            ).status_code
            == 200
        )
        if fault == "delay":
            proxy.delay(3_000 * TIMEOUT_S)
        elif fault == "drop":
            proxy.drop()
        else:
            proxy.reset()
        try:
            started = time.perf_counter()
            turn = client.post(
                "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
            )
            assert turn.status_code == 503, turn.text
            assert time.perf_counter() - started < 10 * TIMEOUT_S
            assert int(turn.headers["retry-after"]) >= 1
            assert turn.json()["dependency"] == "index"
            assert "ferry" not in turn.text
            ready = client.get("/health/ready")
            assert ready.status_code == 503
            assert ready.json()["dependencies"]["index"]["status"] == "down"
        finally:
            proxy.passthrough()
        recovered = client.post(
            "/v1/retrieve", json={"agent_id": "bot", "question": QUESTION}, headers=headers
        )
        assert recovered.status_code == 200, recovered.text
        assert [p["document_id"] for p in recovered.json()["passages"]] == ["ferry"]
        assert client.get("/health/ready").status_code == 200
