"""From a folder of files to an answered question with three `kbgate` commands, against a
real `kbgate serve` and against the embedded data dir; and the `kbs`/`agents` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.gateway_process import GatewayProcess

PLATFORM_KEY = "quickstart-platform-key-0123456789"
QUESTION = "How many days of paid leave do employees get?"


def kbgate(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The `kbgate` command with only the given KBGATE_* variables set."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("KBGATE_")}
    return subprocess.run(  # noqa: S603 — our own console script, fixed arguments
        [str(Path(sys.executable).with_name("kbgate")), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two documentation files in formats a newcomer might have: reStructuredText and HTML."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.rst").write_text(
        "Leave policy\n============\n\nEmployees accrue 25 days of paid leave a year. "
        "Unused days carry over until March.\n"
    )
    (docs / "parking.html").write_text(
        "<html><head><title>Parking</title></head><body><p>Staff parking is on level two "
        "of the east garage.</p></body></html>"
    )
    return docs


def test_three_commands_over_http_reach_an_answered_question(
    tmp_path: Path, folder: Path, model_env: dict[str, str]
) -> None:
    """With the platform key of a running gateway: `workspaces create --create-org
    --issue-key`, `ingest --create-kb --agent` and `ask` answer the question with the leave
    policy passage, none of them curl; an off-topic question abstains. A second `kbs
    create` of the same id is refused (exit 1), `--replace` replaces it; `kbs list`,
    `kbs show`, `agents list`, `agents show` and the deletions answer as the API does."""
    with GatewayProcess(
        tmp_path / "data", env={**model_env, "KBGATE_PLATFORM_KEY": PLATFORM_KEY}
    ) as gw:
        platform = {"KBGATE_URL": gw.url, "KBGATE_KEY": PLATFORM_KEY}
        setup = kbgate(
            "workspaces", "create", "demo", "docs", "--create-org", "--issue-key", "--json",
            env=platform,
        )  # fmt: skip
        assert setup.returncode == 0, setup.stderr
        made = json.loads(setup.stdout)
        assert made["org"]["org_id"] == "demo"
        assert made["key"]["roles"] == ["admin", "ingest", "retrieve"]
        workspace = {"KBGATE_URL": gw.url, "KBGATE_KEY": made["key"]["key"]}

        ingest = kbgate(
            "ingest", str(folder), "--create-kb", "docs", "--agent", "docs",
            "--classification", "internal", env=workspace,
        )  # fmt: skip
        assert ingest.returncode == 0, ingest.stderr
        assert "created knowledge base docs" in ingest.stderr
        assert "created agent docs answering from docs" in ingest.stderr
        assert "added 2" in ingest.stdout

        answer = kbgate("ask", "docs", QUESTION, env=workspace)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.startswith("1. Leave policy  [docs/leave.rst]")
        assert "25 days of paid leave" in answer.stdout
        off_topic = kbgate("ask", "docs", "What is the capital of Peru?", "--json", env=workspace)
        assert json.loads(off_topic.stdout)["abstained"] is True

        again = kbgate("kbs", "create", "docs", env=workspace)
        assert again.returncode == 1
        assert "409" in again.stderr
        replaced = kbgate("kbs", "create", "docs", "--top-k", "4", "--replace", env=workspace)
        assert replaced.returncode == 0, replaced.stderr
        shown = kbgate("kbs", "show", "docs", env=workspace)
        assert "2 documents, 2 passages, 0 held back" in shown.stdout
        assert "top_k: 4 (set by knowledge_base)" in shown.stdout
        listed = kbgate("kbs", "list", env=workspace)
        assert listed.stdout.splitlines() == [
            "docs  (no name)  storage org  2 documents, 2 passages"
        ]
        agents = kbgate("agents", "list", "--json", env=workspace)
        assert [a["agent_id"] for a in json.loads(agents.stdout)["agents"]] == ["docs"]
        agent = kbgate("agents", "show", "docs", "--json", env=workspace)
        assert json.loads(agent.stdout)["knowledge_bases_queried"] == ["docs"]
        gone = kbgate("kbs", "delete", "docs", env=workspace)
        assert "2 documents, 2 passages; taken out of 1 agents" in gone.stdout
        deleted = kbgate("agents", "delete", "docs", env=workspace)
        assert deleted.returncode == 0, deleted.stderr
        assert kbgate("agents", "show", "docs", env=workspace).returncode == 1


def test_the_same_commands_work_on_the_embedded_data_dir(
    tmp_path: Path, folder: Path, model_env: dict[str, str]
) -> None:
    """With no gateway serving the data dir, the same three commands (`--data-dir`, and
    `--tenant` for the workspace) create the workspace, ingest into a new KB attached to a
    new agent, and answer the question, and `agents list` shows the agent; a workspace
    command without `--tenant` exits 2; `workspaces delete` erases the workspace."""
    env = {**model_env, "KBGATE_DATA_DIR": str(tmp_path / "data")}
    setup = kbgate("workspaces", "create", "demo", "docs", "--create-org", env=env)
    assert setup.returncode == 0, setup.stderr
    assert setup.stdout.splitlines() == [
        "created organization demo",
        "created workspace docs in demo",
    ]
    ingest = kbgate(
        "ingest", str(folder), "--create-kb", "docs", "--agent", "helper", "--tenant", "docs",
        "--classification", "internal", env=env,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    assert "added 2" in ingest.stdout
    answer = kbgate("ask", "helper", QUESTION, "--tenant", "docs", "--json", env=env)
    assert answer.returncode == 0, answer.stderr
    passages = json.loads(answer.stdout)["passages"]
    assert passages[0]["document_id"] == "leave.rst"
    assert kbgate("ask", "helper", QUESTION, env=env).returncode == 2
    agents = kbgate("agents", "list", "--tenant", "docs", env=env)
    assert agents.stdout.splitlines() == ["helper  answers from docs"]
    gone = kbgate("workspaces", "delete", "demo", "docs", "--yes", env=env)
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.startswith("deleted workspace docs in demo: 2 passages, 1 knowledge bases")
    after = kbgate("agents", "list", "--tenant", "docs", env=env)
    assert (after.returncode, after.stderr.strip()) == (
        2,
        f"kbgate: no workspace 'docs' in {env['KBGATE_DATA_DIR']}",
    )
