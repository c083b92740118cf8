"""`kbgate kbs migration` on the embedded data dir: a KB moved to the re-quantized model
from the command line, its progress watched, switched and the old vectors retired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.embedder.embedding import MINILM_QUESTION_MODEL_NAME
from tests.integration.test_cli_quickstart import QUESTION, folder, kbgate  # noqa: F401

TARGET = MINILM_QUESTION_MODEL_NAME


@pytest.mark.ci
def test_a_kb_migrates_from_the_command_line(
    tmp_path: Path,
    folder: Path,  # noqa: F811 - the fixture imported above
    model_env: dict[str, str],
) -> None:
    """`kbs migration KB start --model M --watch` builds the new vectors and prints its
    progress; `show` prints both vector sets; `switch` without a golden set exits 1 and
    says to override; `switch --override` and `retire` take it through; `ask` answers from
    the new vectors; `kbs history` lists each step as the `cli` key's."""
    env = {**model_env, "KBGATE_DATA_DIR": str(tmp_path / "data")}
    assert kbgate("workspaces", "create", "demo", "docs", "--create-org", env=env).returncode == 0
    ingest = kbgate(
        "ingest", str(folder), "--create-kb", "docs", "--agent", "helper", "--tenant", "docs",
        "--classification", "internal", env=env,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr

    def migration(*args: str) -> dict[str, object]:
        ran = kbgate("kbs", "migration", "docs", *args, "--tenant", "docs", "--json", env=env)
        assert ran.returncode == 0, ran.stderr
        return dict(json.loads(ran.stdout))

    built = migration("start", "--model", TARGET, "--watch")
    assert built["status"] == "built"
    assert built["progress"] == {"done": 2, "total": 2, "rate": built["progress"]["rate"]}  # type: ignore[index]
    shown = kbgate("kbs", "migration", "docs", "--tenant", "docs", env=env)
    assert f"-> {TARGET}" in shown.stdout
    assert "2/2 passages (100%)" in shown.stdout
    refused = kbgate("kbs", "migration", "docs", "switch", "--tenant", "docs", env=env)
    assert refused.returncode == 1
    assert "override" in refused.stdout + refused.stderr
    assert migration("switch", "--override")["status"] == "switched"
    assert migration("retire")["status"] == "retired"
    answer = kbgate("ask", "helper", QUESTION, "--tenant", "docs", "--json", env=env)
    assert json.loads(answer.stdout)["passages"][0]["document_id"] == "leave.rst"
    history = kbgate("kbs", "history", "docs", "--tenant", "docs", "--json", env=env)
    steps = [(c["key_id"], c["action"]) for c in json.loads(history.stdout)["changes"]]
    assert steps[1:] == [
        ("cli", "model_migration_started"),
        ("cli", "model_migration_switched_with_override"),
        ("cli", "model_migration_retired"),
    ]
