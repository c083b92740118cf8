"""From a folder of files to an answered question with three `kbgate` commands, against a
real `kbgate serve` and against the embedded data dir; and the `kbs`/`agents` commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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


def _new_workspace(url: str) -> dict[str, Any]:
    """`workspaces create demo docs --create-org --issue-key` with the platform key: what
    it made (the org, the workspace, the key and its secret)."""
    setup = kbgate(
        "workspaces", "create", "demo", "docs", "--create-org", "--issue-key", "--json",
        env={"KBGATE_URL": url, "KBGATE_KEY": PLATFORM_KEY},
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr
    return dict(json.loads(setup.stdout))


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
        made = _new_workspace(gw.url)
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


@pytest.mark.ci
def test_the_same_commands_work_on_the_embedded_data_dir(
    tmp_path: Path, folder: Path, model_env: dict[str, str]
) -> None:
    """With no gateway serving the data dir, the same three commands (`--data-dir`, and
    `--tenant` for the workspace) create the workspace, ingest into a new KB attached to a
    new agent, and answer the question, `agents list` shows the agent and `settings set`
    changes a workspace setting, recorded in its history as the `cli` key's; a workspace
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
    changed = kbgate("settings", "set", "--turn-retention-s", "7200", "--tenant", "docs", env=env)
    assert changed.returncode == 0, changed.stderr
    history = kbgate("settings", "history", "--tenant", "docs", env=env)
    assert history.stdout.split("  ", 1)[1] == "cli  turn_retention_s: default -> 7200\n"
    kb_history = kbgate("kbs", "history", "--tenant", "docs", "--json", env=env)
    assert [
        (c["key_id"], c["object_id"], c["action"]) for c in json.loads(kb_history.stdout)["changes"]
    ] == [("cli", "docs", "created")]
    gone = kbgate("workspaces", "delete", "demo", "docs", "--yes", env=env)
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.startswith("deleted workspace docs in demo: 2 passages, 1 knowledge bases")
    after = kbgate("agents", "list", "--tenant", "docs", env=env)
    assert (after.returncode, after.stderr.strip()) == (
        2,
        f"kbgate: no workspace 'docs' in {env['KBGATE_DATA_DIR']}",
    )


@pytest.mark.ci
def test_an_embedded_ingest_on_a_full_disk_stops_and_says_what_to_do(
    tmp_path: Path, model_env: dict[str, str], folder: Path
) -> None:
    """`kbgate ingest --tenant` on a data dir whose disk is down to the free space kept
    (`KBGATE_MIN_FREE_DISK_MB` above what is free) writes nothing, stops early with exit 1
    and says to free space or lower the reserve, with no traceback."""
    env = {**model_env, "KBGATE_DATA_DIR": str(tmp_path / "data")}
    assert kbgate("workspaces", "create", "demo", "docs", "--create-org", env=env).returncode == 0
    free_mb = shutil.disk_usage(tmp_path).free // (1024 * 1024)
    full = {**env, "KBGATE_MIN_FREE_DISK_MB": str(free_mb + 1024)}
    ingest = kbgate(
        "ingest", str(folder), "--create-kb", "docs", "--tenant", "docs",
        "--classification", "internal", env=full,
    )  # fmt: skip
    assert ingest.returncode == 1, ingest.stdout + ingest.stderr
    assert "added 0" in ingest.stdout
    assert "is down to the free space kept" in ingest.stdout
    assert "KBGATE_MIN_FREE_DISK_MB" in ingest.stdout
    assert "Traceback" not in ingest.stderr


@pytest.mark.ci
def test_set_commands_change_only_the_settings_given(
    tmp_path: Path, model_env: dict[str, str]
) -> None:
    """Against a running gateway with a workspace key: `kbs set` and `agents set` change the
    settings they are given and keep the rest (`--reset` returns one to its default, an
    agent's KBs are added and taken out in order; `ask` then says why its agent abstains and
    what to change), `kbs history` and `agents history` list each change that went through
    with its key and fields, `settings set` changes workspace settings and `settings
    history` lists each change with its key (`--pii-operators` as TYPE=OPERATOR pairs; a
    pair without `=` exits 2). A setting both set and reset, a
    value the API refuses, an unknown KB or nothing to change exits 1 and changes nothing; a
    malformed `--fusion` exits 2."""
    with GatewayProcess(
        tmp_path / "data", env={**model_env, "KBGATE_PLATFORM_KEY": PLATFORM_KEY}
    ) as gw:
        made = _new_workspace(gw.url)
        workspace = {"KBGATE_URL": gw.url, "KBGATE_KEY": made["key"]["key"]}
        key_id = made["key"]["key_id"]

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return kbgate(*args, env=workspace)

        _knowledge_base_set(run)
        _agent_set(run)
        _kb_and_agent_histories(run, key_id)
        _workspace_settings_set(run, key_id)


Run = Callable[..., subprocess.CompletedProcess[str]]


def _knowledge_base_set(run: Run) -> None:
    def shown_kb() -> dict[str, Any]:
        return dict(json.loads(run("kbs", "show", "docs", "--json").stdout))

    created = run("kbs", "create", "docs", "--top-k", "4", "--keyword-floor", "0.3")
    assert created.returncode == 0, created.stderr
    changed = run(
        "kbs", "set", "docs", "--name", "Docs", "--score-threshold", "0.5",
        "--fusion", "1,0.3", "--drop-copies", "off", "--reset", "top_k",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.startswith("updated knowledge base docs\n")
    assert "  score_threshold: 0.5 (set by knowledge_base)" in changed.stdout
    assert "  drop_copies: off (set by knowledge_base)" in changed.stdout
    kb = shown_kb()
    assert kb["name"] == "Docs"
    assert kb["settings"] == {
        "keyword_floor": 0.3,
        "score_threshold": 0.5,
        "fusion": {"dense": 1.0, "keyword": 0.3},
        "drop_copies": False,
    }
    assert kb["effective"]["top_k"]["source"] == "platform"

    both = run("kbs", "set", "docs", "--top-k", "3", "--reset", "top_k")
    assert (both.returncode, both.stderr.strip()) == (
        1,
        "kbgate: refused, 422: both set and reset (top_k)",
    )
    refused = run("kbs", "set", "docs", "--score-threshold", "2")
    assert refused.returncode == 1
    assert "422" in refused.stderr
    assert "score_threshold" in refused.stderr
    assert shown_kb()["settings"] == kb["settings"]
    assert run("kbs", "set", "docs", "--fusion", "1").returncode == 2
    missing = run("kbs", "set", "nope", "--top-k", "3")
    assert missing.returncode == 1
    assert "404" in missing.stderr


def _agent_set(run: Run) -> None:
    assert run("kbs", "create", "faq").returncode == 0
    assert run("agents", "create", "helper", "--kb", "docs").returncode == 0
    added = run("agents", "set", "helper", "--add-kb", "faq", "--top-k", "5", "--json")
    assert added.returncode == 0, added.stderr
    agent = json.loads(added.stdout)
    assert (agent["knowledge_base_ids"], agent["settings"]) == (["docs", "faq"], {"top_k": 5})
    moved = run("agents", "set", "helper", "--remove-kb", "docs", "--pii-redaction", "off")
    assert moved.returncode == 0, moved.stderr
    agent = json.loads(run("agents", "show", "helper", "--json").stdout)
    assert agent["knowledge_base_ids"] == ["faq"]
    assert agent["settings"] == {"top_k": 5, "pii_redaction": False}
    absent = run("agents", "set", "helper", "--remove-kb", "docs")
    assert absent.returncode == 1
    assert "does not answer from docs" in absent.stderr

    unanswered = run("ask", "helper", "What is the capital of Peru?")
    assert unanswered.returncode == 0, unanswered.stderr
    assert unanswered.stdout.startswith("abstained (nothing_above_floors): no passage cleared")
    assert "kbgate kbs set KB_ID --score-threshold" in unanswered.stdout
    assert run("agents", "set", "helper", "--remove-kb", "faq").returncode == 0
    alone = run("ask", "helper", "What is the capital of Peru?")
    assert alone.stdout.strip() == (
        "abstained (no_knowledge_base): agent helper has no knowledge base to search; "
        "attach one: kbgate agents set helper --add-kb KB_ID"
    )


def _kb_and_agent_histories(run: Run, key_id: str) -> None:
    kb_history = run("kbs", "history", "docs")
    assert kb_history.returncode == 0, kb_history.stderr
    assert [line.split("  ", 2)[1:] for line in kb_history.stdout.splitlines()] == [
        [key_id, "knowledge base docs created: keyword_floor, storage, top_k"],
        [key_id, "knowledge base docs changed: drop_copies, fusion, name, score_threshold, top_k"],
    ]
    agent_history = run("agents", "history")
    assert [line.split("  ", 2)[2] for line in agent_history.stdout.splitlines()] == [
        "agent helper created: knowledge_base_ids (knowledge bases now: docs)",
        "agent helper changed: knowledge_base_ids, top_k (knowledge bases now: docs, faq)",
        "agent helper changed: knowledge_base_ids, pii_redaction (knowledge bases now: faq)",
        "agent helper changed: knowledge_base_ids (knowledge bases now: none)",
    ]
    assert run("agents", "history", "nobody").stdout == "no changes yet\n"


def _workspace_settings_set(run: Run, key_id: str) -> None:
    before = run("settings", "show")
    assert before.returncode == 0, before.stderr
    assert "  rag_pii_redaction: on (set by platform)" in before.stdout
    workspace_set = run(
        "settings", "set", "--rag-pii-redaction", "off", "--pii-entities",
        "PERSON,EMAIL_ADDRESS", "--turn-retention-s", "7200", "--json",
    )  # fmt: skip
    assert workspace_set.returncode == 0, workspace_set.stderr
    assert json.loads(workspace_set.stdout)["settings"] == {
        "rag_pii_redaction": False,
        "pii_entities": ["PERSON", "EMAIL_ADDRESS"],
        "turn_retention_s": 7200,
    }
    operators = run("settings", "set", "--pii-operators", "PERSON=pseudonym,EMAIL_ADDRESS=mask")
    assert operators.returncode == 0, operators.stderr
    assert "  pii_operators: EMAIL_ADDRESS mask, PERSON pseudonym (set by workspace)" in (
        operators.stdout
    )
    unknown = run("settings", "set", "--pii-operators", "PERSON=hash")
    assert unknown.returncode == 1
    assert "pii_operators" in unknown.stderr
    assert run("settings", "set", "--pii-operators", "PERSON").returncode == 2
    reset = run("settings", "set", "--reset", "pii_entities")
    assert reset.returncode == 0, reset.stderr
    assert run("settings", "set").returncode == 1
    bad = run("settings", "set", "--turn-retention-s", "0")
    assert bad.returncode == 1
    assert "turn_retention_s" in bad.stderr
    after = json.loads(run("settings", "show", "--json").stdout)
    assert after["settings"] == {
        "rag_pii_redaction": False,
        "turn_retention_s": 7200,
        "pii_operators": {"PERSON": "pseudonym", "EMAIL_ADDRESS": "mask"},
    }

    history = run("settings", "history")
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert [line.split("  ", 2)[1:] for line in lines] == [
        [key_id, "rag_pii_redaction: default -> off"],
        [key_id, "pii_entities: default -> PERSON, EMAIL_ADDRESS"],
        [key_id, "turn_retention_s: default -> 7200"],
        [key_id, "pii_operators: default -> PERSON pseudonym, EMAIL_ADDRESS mask"],
        [key_id, "pii_entities: PERSON, EMAIL_ADDRESS -> default"],
    ]
