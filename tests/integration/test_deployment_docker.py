"""The deployed topology's Qdrant parts on real servers (Docker engines only).

Run them wherever a Docker engine answers: `uv run pytest -m docker`. Without one they
skip cleanly (the same checks run against a stand-in endpoint in test_deployment.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from testcontainers.community.qdrant import QdrantContainer
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from ingest.engines.blocking import BlockingIndex
from ingest.engines.server.index import CollectionLayout, ServerIndex
from ingest.index import (
    SHARED_COLLECTION,
    IncompatibleServerError,
    Leg,
    LegKind,
    Passage,
    SparseVector,
)
from ingest.payload import Classification, PassagePayload, Scope
from tests.support.redis_server import free_port
from tests.support.services import require_docker

pytestmark = pytest.mark.docker

SUPPORTED = "qdrant/qdrant:v1.20.0"
TOO_OLD = "qdrant/qdrant:v1.16.0"
SCOPE = Scope.of(org_id="acme", tenant_id="t1", kb_ids=["kb"], clearance=Classification.RESTRICTED)


def test_a_real_qdrant_1_16_is_refused_and_1_20_accepted(tmp_path: Path, model_dir: Path) -> None:
    """Qdrant 1.16.0 makes both the adapter and `kbgate serve` refuse, naming the version;
    1.20.0 connects."""
    require_docker()
    with QdrantContainer(image=TOO_OLD) as old:
        url = f"http://{old.rest_host_address}"
        with pytest.raises(IncompatibleServerError, match=r"1\.16\.0"):
            BlockingIndex.opening(lambda: ServerIndex.connect(url, None, 5))
        done = subprocess.run(  # noqa: S603 — our own console script, fixed arguments
            [str(Path(sys.executable).with_name("kbgate")), "serve"],
            env={
                "PATH": "/usr/bin:/bin",
                "KBGATE_QDRANT_URL": url,
                "KBGATE_DATA_DIR": str(tmp_path / "data"),
                "KBGATE_MODEL_CACHE_DIR": str(model_dir),
                "KBGATE_PORT": str(free_port()),
                "KBGATE_PLATFORM_KEY": "docker-test-platform-key",
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode != 0
        assert "1.16.0" in done.stderr
    with QdrantContainer(image=SUPPORTED) as new:
        BlockingIndex.opening(
            lambda: ServerIndex.connect(f"http://{new.rest_host_address}", None, 5)
        ).close()


def _node(network: Network, name: str, bootstrap: str | None) -> DockerContainer:
    command = f"./qdrant --uri http://{name}:6335"
    if bootstrap:
        command += f" --bootstrap http://{bootstrap}:6335"
    return (
        DockerContainer(SUPPORTED)
        .with_network(network)
        .with_network_aliases(name)
        .with_env("QDRANT__CLUSTER__ENABLED", "true")
        .with_command(command)
        .with_exposed_ports(6333)
    )


def _wait_peers(url: str, peers: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            cluster = httpx.get(f"{url}/cluster", timeout=3).json()["result"]
            if len(cluster.get("peers", {})) >= peers:
                return
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(1)
    raise AssertionError(f"the cluster did not reach {peers} peers")


@pytest.fixture
def cluster() -> Iterator[tuple[str, list[DockerContainer]]]:
    require_docker()
    with Network() as network:
        first = _node(network, "qdrant-1", None)
        first.start()
        nodes = [first]
        try:
            url = f"http://{first.get_container_host_ip()}:{first.get_exposed_port(6333)}"
            _wait_peers(url, 1)
            for name in ("qdrant-2", "qdrant-3"):
                node = _node(network, name, "qdrant-1")
                node.start()
                nodes.append(node)
            _wait_peers(url, 3)
            yield url, nodes
        finally:
            for node in nodes:
                node.stop()


def _passage(number: int) -> Passage:
    vector = [0.0] * 384
    vector[number % 384] = 1.0
    payload = PassagePayload(
        tenant_id="t1",
        org_id="acme",
        knowledge_base_id="kb",
        document_id=f"doc-{number}",
        document_version="v1",
        passage_index=0,
        classification=Classification.INTERNAL.value,
        text=f"passage {number}",
        title="",
        source="",
        checksum=f"c{number}",
        indexed_at="2026-12-01T00:00:00+00:00",
    )
    return Passage(
        point_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{number}")),
        dense=tuple(vector),
        sparse=SparseVector(indices=(number,), values=(1.0,)),
        payload=payload,
    )


def test_a_three_node_cluster_with_two_replicas_survives_a_node_down(
    cluster: tuple[str, list[DockerContainer]],
) -> None:
    """Collections created with 3 shards and replication 2 answer the same search, with
    every point, after one of the three nodes stops."""
    url, nodes = cluster
    index = BlockingIndex.opening(
        lambda: ServerIndex.connect(url, None, 10, layout=CollectionLayout(3, 2, 1))
    )
    index.upsert(SHARED_COLLECTION, [_passage(n) for n in range(60)])
    leg = Leg(kind=LegKind.DENSE, dense=_passage(7).dense, limit=5)
    before = index.query(SHARED_COLLECTION, SCOPE, [leg])
    assert index.count(SHARED_COLLECTION, SCOPE) == 60
    nodes[2].stop()
    time.sleep(3)
    after = index.query(SHARED_COLLECTION, SCOPE, [leg])
    assert index.count(SHARED_COLLECTION, SCOPE) == 60
    assert [hit.point_id for hit in after.legs[0]] == [hit.point_id for hit in before.legs[0]]
    index.close()
