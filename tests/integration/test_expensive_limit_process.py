"""A workspace's expensive calls beyond its limit are refused at once, over HTTP against a real
gateway process, while another workspace's grounding check is accepted."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess
from tests.support.workspace_http import workspace_headers

pytestmark = pytest.mark.ci

PLATFORM_KEY = "expensive-limit-platform-key-01"
PASSAGES = {
    "tea": "Green tea contains catechins and a moderate amount of caffeine.",
    "coffee": "Espresso is a small volume of strongly extracted coffee.",
    "bread": "Sourdough rises on a starter of wild yeast and lactic acid bacteria.",
}
#: 300 short sentences (about 5,000 characters): about a second of work each on 2 cores.
LONG_ANSWER = " ".join(f"Tea {n} is fine." for n in range(300))


def _workspace(client: httpx.Client, tenant_id: str) -> dict[str, str]:
    headers = workspace_headers(client, PLATFORM_KEY, "acme", tenant_id)
    client.put("/v1/knowledge-bases/kb", json={}, headers=headers).raise_for_status()
    client.put(
        "/v1/agents/bot", json={"knowledge_base_ids": ["kb"]}, headers=headers
    ).raise_for_status()
    for doc_id, text in PASSAGES.items():
        client.put(
            f"/v1/knowledge-bases/kb/documents/{doc_id}",
            json={"text": text, "classification": "internal"},
            headers=headers,
        ).raise_for_status()
    return headers


def _check(url: str, headers: dict[str, str], answer: str) -> tuple[httpx.Response, float]:
    """One sentence-mode grounding check on its own connection; the answer and when it came."""
    with httpx.Client(base_url=url, timeout=120) as client:
        response = client.post(
            "/v1/grounding/check",
            json={"agent_id": "bot", "answer": answer, "mode": "sentences"},
            headers=headers,
        )
    return response, time.monotonic()


def test_calls_past_the_limit_get_429_while_another_workspace_is_served(
    tmp_path: Path, model_dir: Path
) -> None:
    """With 2 expensive calls per workspace (the default), four 300-sentence checks sent at
    once by workspace A: two are accepted (200), two answer 429 with Retry-After >= 1 at once,
    before the accepted ones end. A grounding check by workspace B sent while A's two still
    run answers 200."""
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_EXPENSIVE_PER_WORKSPACE": "2",
        "KBGATE_GROUNDING_MAX_SENTENCES": "300",
    }
    with GatewayProcess(tmp_path / "data", env) as gateway:
        with gateway.client(timeout=120) as client:
            a, b = _workspace(client, "a"), _workspace(client, "b")
        start = threading.Barrier(4)

        def a_check() -> tuple[httpx.Response, float]:
            start.wait()
            return _check(gateway.url, a, LONG_ANSWER)

        with ThreadPoolExecutor(5) as pool:
            flood: list[Future[tuple[httpx.Response, float]]] = [
                pool.submit(a_check) for _ in range(4)
            ]
            while sum(f.done() for f in flood) < 2:  # the refusals come back at once
                time.sleep(0.01)
            b_sent = time.monotonic()
            b_response, _ = pool.submit(_check, gateway.url, b, "Green tea has caffeine.").result()
            a_answers = [f.result() for f in flood]

    refused = [response for response, _ in a_answers if response.status_code == 429]
    accepted = [(response, ended) for response, ended in a_answers if response.status_code == 200]
    assert len(refused) == 2, [response.status_code for response, _ in a_answers]
    assert len(accepted) == 2
    assert all(int(response.headers["retry-after"]) >= 1 for response in refused)
    assert all(response.json()["status"] == 429 for response in refused)
    assert all(ended > b_sent for _, ended in accepted), "A's checks ended before B's was sent"
    assert b_response.status_code == 200, b_response.text
    assert b_response.json()["status"] in {"supported", "flagged"}  # checked, not skipped
