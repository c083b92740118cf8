"""`kbgate ingest` on the embedded data dir carries PDF, Word and PowerPoint document
properties as document fields: filterable when the KB declares them, redacted on the way
out like passage text, hostile ones dropped without failing the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingest.properties import MAX_KEYWORDS
from tests.integration.test_cli_quickstart import kbgate
from tests.support.property_files import (
    docx_with,
    hostile_docx,
    hostile_pdf,
    moment,
    pdf_with,
    pptx_with,
)

pytestmark = pytest.mark.ci

QUESTION = "How often are the pumps and valves in the pump room inspected by the crew?"


def _ask(env: dict[str, str], *extra: str) -> dict[str, dict[str, Any]]:
    asked = kbgate("ask", "helper", QUESTION, "--tenant", "ops", "--json", *extra, env=env)
    assert asked.returncode == 0, asked.stderr
    return {p["document_id"]: p["metadata"] for p in json.loads(asked.stdout)["passages"]}


def test_document_properties_arrive_as_filterable_fields(
    tmp_path: Path, model_env: dict[str, str]
) -> None:
    """Each file's author, subject, keywords, dates and language reach its passages; the
    declared ones filter an ask on their stored values (an author is shown redacted); the
    hostile files ingest with their bad properties dropped, a declared field of another
    type left out rather than failing the file."""
    docs = tmp_path / "docs"
    docs.mkdir()
    docx_with(
        docs / "guide.docx",
        ["Each pump in the pump room is inspected every month by the crew."],
        title="Pump guide",
        author="jane.roe@example.com",
        subject="Pump maintenance",
        keywords="pumps, maintenance",
        created=moment("2023-05-01T08:00:00"),
        language="en-GB",
    )
    pptx_with(
        docs / "valves.pptx",
        "Valves",
        "Each valve in the pump room is inspected every week by the crew.",
        author="Bob Stone",
        keywords="valves; safety",
        created=moment("2020-02-01T00:00:00"),
    )
    (docs / "manual.pdf").write_bytes(
        pdf_with(
            "The pump room crew inspects the pumps and the valves every month.",
            {
                "/Title": "Pump room manual",
                "/Subject": "42",
                "/Keywords": "pumps",
                "/CreationDate": "D:20240102030405Z",
            },
            lang="de",
        )
    )
    (docs / "hostile.pdf").write_bytes(
        hostile_pdf("The pump room crew inspects the valves of the pumps every week.")
    )
    hostile_docx(docs / "hostile.docx", ["The crew inspects each pump and valve in the pump room."])
    env = {**model_env, "KBGATE_DATA_DIR": str(tmp_path / "data")}
    assert kbgate("workspaces", "create", "demo", "ops", "--create-org", env=env).returncode == 0
    made = kbgate(
        "kbs", "create", "docs", "--tenant", "ops",
        "--fields", "author=string,keywords=string_list,created=datetime,subject=number",
        env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    ingest = kbgate(
        "ingest", str(docs), "--kb", "docs", "--agent", "helper", "--tenant", "ops",
        "--classification", "internal", "--json", env=env,
    )  # fmt: skip
    assert ingest.returncode == 0, ingest.stderr
    summary = json.loads(ingest.stdout)
    assert (summary["added"], summary["failed"]) == (5, 0), summary

    found = _ask(env)
    assert set(found) == {"guide.docx", "valves.pptx", "manual.pdf", "hostile.pdf", "hostile.docx"}
    guide = found["guide.docx"]
    assert guide["author"] == "<EMAIL_ADDRESS>"
    assert guide["keywords"] == ["pumps", "maintenance"]
    assert guide["created"] == "2023-05-01T08:00:00Z"
    assert guide["content_language"] == "en-GB"
    assert "subject" not in guide  # declared a number: a text subject is left out
    manual = found["manual.pdf"]
    assert "subject" not in manual  # "42" is text, never read as the declared number
    assert manual["content_language"] == "de"
    assert manual["created"] == "2024-01-02T03:04:05Z"
    hostile = found["hostile.pdf"]
    assert set(hostile) == {"modified", "modified_at"}
    assert set(found["hostile.docx"]) == {"keywords", "modified_at"}
    assert len(found["hostile.docx"]["keywords"]) == MAX_KEYWORDS

    by_author = _ask(env, "--filter", json.dumps({"author": "jane.roe@example.com"}))
    assert set(by_author) == {"guide.docx"}
    pumps = _ask(env, "--filter", json.dumps({"keywords": "pumps"}))
    assert set(pumps) == {"guide.docx", "manual.pdf"}
    recent = _ask(env, "--filter", json.dumps({"created": {"$gte": "2023-01-01T00:00:00Z"}}))
    assert set(recent) == {"guide.docx", "manual.pdf"}
