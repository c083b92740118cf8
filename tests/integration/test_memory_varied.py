"""Memory of a real gateway process stays flat while it ingests documents of very varied length.

onnxruntime's CPU arena keeps a block for every input shape it has seen, so a
long-lived process fed texts of every length can grow without bound. This ingests a
deterministic corpus of 5- to 3,000-word documents through the HTTP API of a real
`kbgate serve`, then the same documents again with new text of the same lengths (every
one replaced, so embedded again), and reads the process's peak resident set (VmHWM) from
/proc. The first pass is the warm-up; the
second must not raise the peak by more than a bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gateway_process import GatewayProcess
from tests.support.varied_corpus import Document, provision_varied_kb, rss_kib, varied_corpus

pytestmark = pytest.mark.ci

PLATFORM_KEY = "memory-varied-platform-key-01"
DOCUMENTS = 12
# Growth of the peak resident set (VmHWM) allowed on the second pass. The resident set at
# one instant swings by a hundred MiB with allocator timing, so the peak is what is bounded
# (VmRSS is printed beside it).
BOUND_MIB = 48


def _ingest(gateway: GatewayProcess, headers: dict[str, str], corpus: list[Document]) -> int:
    """Send every document, one after another (so the peak of a pass is set by its longest
    documents, not by which ones happened to overlap); the number of passages indexed."""

    def put(doc: Document) -> int:
        with gateway.client() as client:
            answer = client.put(
                f"/v1/knowledge-bases/varied/documents/{doc.doc_id}",
                json={"title": doc.title, "text": doc.text, "classification": "internal"},
                headers=headers,
            )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "indexed"
        return int(answer.json()["passages"])

    return sum(put(doc) for doc in corpus)


@pytest.mark.slow
def test_rss_is_flat_on_a_second_pass_of_varied_lengths(tmp_path: Path, model_dir: Path) -> None:
    """After a warm-up pass over 5- to 3,000-word documents, a second pass replacing every one
    with new text of the same length does not raise the gateway's peak resident set by more
    than BOUND_MIB."""
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_RATE_LIMIT_PER_S": "1000",
    }
    with GatewayProcess(tmp_path / "data", env) as gateway:
        with gateway.client() as client:
            headers = provision_varied_kb(client, PLATFORM_KEY)
        start = rss_kib(gateway.pid)
        first = _ingest(gateway, headers, varied_corpus(DOCUMENTS, seed=1))
        warm = rss_kib(gateway.pid)
        second = _ingest(gateway, headers, varied_corpus(DOCUMENTS, seed=2))
        end = rss_kib(gateway.pid)
        with gateway.client() as client:
            stats = client.get("/v1/knowledge-bases/varied/stats", headers=headers).json()
    assert stats["documents"] == DOCUMENTS
    assert stats["passages"] == second
    mib = {
        name: {k: v // 1024 for k, v in reading.items()}
        for name, reading in (("start", start), ("after_pass_1", warm), ("after_pass_2", end))
    }
    print(f"passages {first} + {second}; RSS MiB {mib}")  # noqa: T201 — the figures, in -s runs
    assert (end["VmHWM"] - warm["VmHWM"]) // 1024 < BOUND_MIB, mib
