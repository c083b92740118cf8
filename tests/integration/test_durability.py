"""Acknowledged writes survive `kill -9` of the gateway on the embedded engine."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess
from tests.support.workspace_http import workspace_headers

pytestmark = pytest.mark.ci

PLATFORM_KEY = "durability-platform-key-00001"
DOCS = {
    f"doc-{n}": f"Record {n}: the lighthouse keeper logged {n} ships passing the northern reef."
    for n in range(8)
}


def _setup(client: httpx.Client) -> dict[str, str]:
    headers = workspace_headers(client, PLATFORM_KEY, "acme", "ws")
    client.put("/v1/knowledge-bases/kb", json={"score_threshold": 0.0}, headers=headers)
    client.put("/v1/agents/bot", json={"knowledge_base_ids": ["kb"]}, headers=headers)
    return headers


def test_indexed_documents_survive_kill_9(tmp_path: Path) -> None:
    """Every document answered `indexed` before a SIGKILL is stored and retrievable after restart;
    a replacement interrupted by the kill converges when the document is sent again."""
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(tmp_path / "models"),
    }
    data = tmp_path / "data"
    first = GatewayProcess(data, env)
    first.start()
    try:
        with first.client() as client:
            headers = _setup(client)
            for doc_id, text in DOCS.items():
                answer = client.put(
                    f"/v1/knowledge-bases/kb/documents/{doc_id}",
                    json={"text": text, "classification": "internal"},
                    headers=headers,
                )
                assert answer.json()["status"] == "indexed"
    finally:
        first.kill()

    second = GatewayProcess(data, env)
    second.start()
    try:
        with second.client() as client:
            stats = client.get("/v1/knowledge-bases/kb/stats", headers=headers).json()
            assert stats["documents"] == len(DOCS)
            turn = client.post(
                "/v1/retrieve",
                json={"agent_id": "bot", "question": "How many ships did keeper record 5 log?"},
                headers=headers,
            ).json()
            assert "doc-5" in [p["document_id"] for p in turn["passages"]]
            again = client.put(
                "/v1/knowledge-bases/kb/documents/doc-3",
                json={"text": DOCS["doc-3"], "classification": "internal"},
                headers=headers,
            )
            assert again.json()["status"] == "unchanged"
    finally:
        second.stop()
