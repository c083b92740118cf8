"""`kbgate eval --url --kb` against a real `kbgate serve`: a golden set file uploaded, the
evaluation run and polled, its figures printed, its recommendation applied."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.cli import main
from tests.support.gateway_process import GatewayProcess
from tests.support.workspace_http import workspace_headers

PLATFORM_KEY = "eval-live-platform-key-0123456789"
DOCUMENTS = {
    "leave-policy": "Employees accrue 25 days of paid annual leave each year. Unused leave "
    "days carry over until the end of March.",
    "parking": "Staff parking is on level two of the east garage. Visitors park on level one.",
    "expenses": "Travel expenses are reimbursed within thirty days of submitting receipts.",
}
GOLDEN_CSV = (
    "question,document_ids,grades\n"
    "How many days of paid annual leave do employees get?,leave-policy,2\n"
    "Where is staff parking in the garage?,parking,\n"
    "When are travel expenses reimbursed?,expenses;missing-doc,1;1\n"
    "What is the capital of Australia?,,\n"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[tuple[str, str]]:
    """A gateway with a workspace holding the `policies` KB; its URL and an admin key."""
    data_dir = tmp_path_factory.mktemp("eval-live") / "data"
    env = {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": str(model_dir)}
    with GatewayProcess(data_dir, env=env) as gateway, gateway.client() as client:
        headers = workspace_headers(client, PLATFORM_KEY, "acme", "evaluated")
        assert client.put("/v1/knowledge-bases/policies", json={}, headers=headers).is_success
        for doc_id, text in DOCUMENTS.items():
            written = client.put(
                f"/v1/knowledge-bases/policies/documents/{doc_id}",
                json={"text": text, "classification": "internal"},
                headers=headers,
            )
            assert written.status_code == 200, written.text
        yield gateway.url, headers["Authorization"].removeprefix("Bearer ")


def test_eval_uploads_runs_prints_and_applies(
    served: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kbgate eval --url --kb --golden-set FILE --json --apply` stores the CSV golden set
    (three questions, one off-topic), reports its progress on stderr, prints the finished
    evaluation (figures per channel, recommendation) and applies it: the KB's settings
    then hold the recommended values."""
    url, key = served
    golden = tmp_path / "golden.csv"
    golden.write_text(GOLDEN_CSV)
    command = ["eval", "--url", url, "--kb", "policies", "--key", key]
    status = main([*command, "--golden-set", str(golden), "--json", "--apply"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "stored the golden set: 3 questions, 1 off-topic" in err
    assert re.search(r"kbgate eval: done (\d+)/\1\n", err), err
    evaluation = json.loads(out)
    assert evaluation["status"] == "done"
    report = evaluation["report"]
    assert report["counts"]["questions"] == 3
    assert report["counts"]["off_topic_source"] == "golden_set"
    assert report["counts"]["missing_documents"] == 1
    assert set(report["channels"]) == {"dense", "keyword", "fused"}
    changes = report["recommendation"]["changes"]
    applied = evaluation["applied"]
    assert {change["setting"] for change in applied["changes"]} == set(changes)
    kb = httpx.get(
        f"{url}/v1/knowledge-bases/policies", headers={"Authorization": f"Bearer {key}"}
    ).json()
    for name, value in changes.items():
        assert kb["settings"][name] == value


def test_eval_refusals_and_bad_arguments(
    served: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown KB exits 1 with the gateway's problem detail; no key exits 2; a golden set
    file that is not one exits 2 before anything is sent; a wrong key exits 1 (401)."""
    url, key = served
    assert main(["eval", "--url", url, "--kb", "nope", "--key", key]) == 1
    assert "refused, 404" in capsys.readouterr().err
    assert main(["eval", "--url", url, "--kb", "policies"]) == 2
    broken = tmp_path / "broken.csv"
    broken.write_text("question,ids\nQ?,a\n")
    assert (
        main(["eval", "--url", url, "--kb", "policies", "--key", key, "--golden-set", str(broken)])
        == 2
    )
    assert "question and document_ids" in capsys.readouterr().err
    assert main(["eval", "--url", url, "--kb", "policies", "--key", "kbg_wrong"]) == 1
    assert "refused, 401" in capsys.readouterr().err
