"""`kbgate` with document fields on the embedded data dir: a KB's schema declared with
`kbs create --fields`, Markdown front matter and the file's modification time carried by
`ingest`, and `ask --filter` narrowing the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_quickstart import kbgate

PUMPS = """---
title: Pumps
region: eu
year: 2024
tags: [maintenance, pumps]
---
# Pumps

The pump room is on level two. Each pump is inspected every month by the crew.
"""
VALVES = """---
region: us
year: 2019
---
# Valves

Each valve in the pump room is turned off before a pump is inspected by the crew.
"""


@pytest.mark.ci
def test_fields_from_front_matter_filter_an_ask(tmp_path: Path, model_env: dict[str, str]) -> None:
    """Front matter fields and `modified_at` reach the index; `ask --filter` keeps only
    the documents whose fields pass, an undeclared field is refused naming it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pumps.md").write_text(PUMPS)
    (docs / "valves.md").write_text(VALVES)
    env = {**model_env, "KBGATE_DATA_DIR": str(tmp_path / "data")}
    assert kbgate("workspaces", "create", "demo", "ops", "--create-org", env=env).returncode == 0
    made = kbgate(
        "kbs", "create", "docs", "--tenant", "ops",
        "--fields", "region=string,year=number,modified_at=datetime", env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    ingest = kbgate(
        "ingest", str(docs), "--kb", "docs", "--agent", "helper", "--tenant", "ops",
        "--classification", "internal", env=env,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    question = "How often is each pump inspected in the pump room?"
    both = kbgate("ask", "helper", question, "--tenant", "ops", "--json", env=env)
    assert both.returncode == 0, both.stderr
    found = {p["document_id"]: p["metadata"] for p in json.loads(both.stdout)["passages"]}
    assert set(found) == {"pumps.md", "valves.md"}
    assert found["pumps.md"]["tags"] == ["maintenance", "pumps"]
    assert found["pumps.md"]["modified_at"].endswith("Z")
    eu = kbgate(
        "ask", "helper", question, "--tenant", "ops", "--json",
        "--filter", '{"region": "eu", "year": {"$gte": 2020}}', env=env,
    )  # fmt: skip
    assert eu.returncode == 0, eu.stderr
    assert [p["document_id"] for p in json.loads(eu.stdout)["passages"]] == ["pumps.md"]
    refused = kbgate(
        "ask", "helper", question, "--tenant", "ops", "--filter", '{"colour": "red"}', env=env
    )
    assert refused.returncode == 1
    assert "filter.colour" in refused.stderr
