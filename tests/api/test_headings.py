"""A passage's heading path (issue 60, item 5): the headings above it in a Markdown, HTML,
reStructuredText or Word document are recorded at ingest, returned with the passage and
its verified citation, named in its fenced evidence and redacted as its title is; an
archive carries them. Through the HTTP API with the real model, analyzer and Qdrant Edge."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import docx
import pytest

from ingest.extract import extract
from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision
from tests.api.test_transfer import _export, _import

pytestmark = pytest.mark.anyio

EMAIL = "ines.varga@example.com"
#: A small Markdown manual: nested headings, a section under a heading holding an email.
MANUAL = f"""# Heat pump manual

This manual covers the HP-20 heat pump for homes.

## Installation

### Mounting

Bolt the outdoor unit to a concrete base at least ten centimetres high.

### Wiring

Connect the brown wire to terminal L and the blue wire to terminal N before power-up.

## Maintenance

### Filters

Rinse the air filter under lukewarm water every three months.

## Support contact {EMAIL}

Warranty claims need the serial number printed under the front cover.
"""


async def _verified(tenant: Tenant, answer: dict[str, Any], passage_id: str) -> Any:
    response = await tenant.gw.client.post(
        "/v1/citations/verify",
        json={"turn_id": answer["turn_id"], "citations": [{"passage_id": passage_id}]},
        headers=tenant.headers(),
    )
    assert response.status_code == 200, response.text
    return response.json()


def _section(context: str, passage_id: str) -> str | None:
    """The `section` attribute of the passage's evidence block, unescaped."""
    opening = next(line for line in context.splitlines() if f'id="{passage_id}"' in line)
    found = re.search(r' section="([^"]*)"', opening)
    return html.unescape(found.group(1)) if found else None


async def _top(tenant: Tenant, question: str) -> tuple[dict[str, Any], dict[str, Any]]:
    response = await tenant.retrieve("bot", question)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["passages"], answer
    return answer, answer["passages"][0]


async def _manuals(gateway: Gateway, tenant_id: str = "acme-support") -> Tenant:
    tenant = await provision(gateway, "acme", tenant_id)
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    await tenant.doc("manuals", "hp20.md", MANUAL, title="Heat pump manual")
    return tenant


async def test_a_markdown_passage_carries_its_heading_path(gateway: Gateway) -> None:
    """A passage of a Markdown manual is returned with the headings above it, outermost
    first; its fenced evidence names them (`section="... > ..."`) and a verified citation
    of it returns them. A prose document's passages have none."""
    tenant = await _manuals(gateway)
    await tenant.doc("manuals", "note", "The office kettle is descaled every Friday morning.")
    answer, first = await _top(tenant, "Which terminal does the brown wire go to?")
    path = ["Heat pump manual", "Installation", "Wiring"]
    assert first["document_id"] == "hp20.md"
    assert first["headings"] == path
    assert _section(answer["context"], first["passage_id"]) == " > ".join(path)
    verified = await _verified(tenant, answer, first["passage_id"])
    assert verified["valid"] == [
        {"passage_id": first["passage_id"], "document_id": "hp20.md", "headings": path}
    ]
    answer, first = await _top(tenant, "How often is the kettle descaled?")
    assert first["document_id"] == "note"
    assert first["headings"] is None
    assert _section(answer["context"], first["passage_id"]) is None


async def test_a_heading_holding_pii_is_redacted_as_a_title_is(gateway: Gateway) -> None:
    """An email in a heading is replaced by its placeholder in the passage's headings, its
    fenced evidence and its verified citation, as in its text: it is nowhere in the
    answer."""
    tenant = await _manuals(gateway)
    answer, first = await _top(tenant, "What do warranty claims need?")
    assert first["headings"] == ["Heat pump manual", "Support contact <EMAIL_ADDRESS>"]
    assert EMAIL not in str(answer)
    assert _section(answer["context"], first["passage_id"]) == (
        "Heat pump manual > Support contact <EMAIL_ADDRESS>"
    )
    verified = await _verified(tenant, answer, first["passage_id"])
    assert verified["valid"][0]["headings"] == first["headings"]


def _word_manual(path: Path) -> Path:
    document = docx.Document()
    document.core_properties.title = "Boiler handbook"
    document.add_heading("Boiler handbook", level=0)
    document.add_heading("Safety", level=1)
    document.add_paragraph("Keep the boiler room door closed while the burner runs.")
    document.add_heading("Servicing", level=1)
    document.add_heading("Descaling", level=2)
    document.add_paragraph("Descale the heat exchanger with citric acid once a year.")
    document.save(str(path))
    return path


POND = ["Garden pond guide", "Winter", "Ice"]
BIKES = ["Bicycle workshop notes", "Brakes", "Pads"]
HTML_PAGE = """<html><head><title>Garden pond guide</title></head><body>
<h1>Garden pond guide</h1><p>Ponds need care through the year.</p>
<h2>Winter</h2><h3>Ice</h3><p>Float a ball on the water so the ice never closes fully.</p>
<h2>Summer</h2><p>Top the pond up with rain water during dry weeks.</p>
</body></html>"""

RST_PAGE = """Bicycle workshop notes
======================

Notes from the volunteer workshop.

Brakes
------

Pads
~~~~

Replace the brake pads once the groove on their surface is worn away.
"""


async def test_word_html_and_rst_passages_carry_their_heading_paths(
    gateway: Gateway, tmp_path: Path
) -> None:
    """Headings of a Word document (its "Heading N" styles), an HTML page (`<h1>`..`<h6>`)
    and a reStructuredText file (its section titles), read as `kbgate ingest` reads them,
    reach their passages."""
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    files = {
        "boiler.docx": _word_manual(tmp_path / "boiler.docx"),
        "pond.html": tmp_path / "pond.html",
        "bikes.rst": tmp_path / "bikes.rst",
    }
    files["pond.html"].write_text(HTML_PAGE, encoding="utf-8")
    files["bikes.rst"].write_text(RST_PAGE, encoding="utf-8")
    for doc_id, file in files.items():
        extracted = extract(file)
        await tenant.doc("manuals", doc_id, extracted.text, title=extracted.title)
    cases = [
        ("How is the heat exchanger descaled?", "boiler.docx", ["Servicing", "Descaling"]),
        ("How do I stop the pond ice closing?", "pond.html", POND),
        ("When are brake pads replaced?", "bikes.rst", BIKES),
    ]
    for question, doc_id, headings in cases:
        answer, first = await _top(tenant, question)
        assert (first["document_id"], first["headings"]) == (doc_id, headings), question
        assert _section(answer["context"], first["passage_id"]) == " > ".join(headings)
        verified = await _verified(tenant, answer, first["passage_id"])
        assert verified["valid"][0]["headings"] == headings


async def test_an_archive_carries_heading_paths(gateway: Gateway) -> None:
    """An exported workspace's passages keep their heading paths through an import (the
    analysis made again, the headings still redacted)."""
    await _manuals(gateway, "alpha")
    exported = await _export(gateway, "/v1/orgs/acme/workspaces/alpha/export", gateway.platform)
    assert exported.status_code == 200, exported.text
    imported = await _import(gateway, "acme", "moved", exported.content)
    assert imported.status_code == 201, imported.text
    moved = Tenant(gateway, "acme", "moved")
    await moved.issue("all", ["admin", "ingest", "retrieve"], "restricted")
    _, first = await _top(moved, "Which terminal does the brown wire go to?")
    assert first["headings"] == ["Heat pump manual", "Installation", "Wiring"]
    _, first = await _top(moved, "What do warranty claims need?")
    assert first["headings"] == ["Heat pump manual", "Support contact <EMAIL_ADDRESS>"]
