"""The console administers: KBs and agents created, arranged and deleted, documents uploaded
and deleted, each change in History; plain validation messages; state-aware toggles; an
abstention shown as an outcome. Over HTTP against the app (the browser flow is in
tests/browser)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import provision
from tests.api.test_console import admin, csrf_token, sign_in
from tests.support.property_files import docx_with

pytestmark = pytest.mark.anyio

_OUTCOME = re.compile(r'<li data-status="([a-z_]+)"><span class="file">([^<]*)</span>')


def outcomes(page: str) -> dict[str, str]:
    """File name -> status, from the documents page's outcome list."""
    return {html.unescape(name): status for status, name in _OUTCOME.findall(page)}


async def post(gw: Gateway, path: str, **form: str | list[str]) -> str:
    """Post a console form with the session's CSRF token; the page it ends on."""
    response = await gw.client.post(
        f"/console/{path}", data={**form, "csrf_token": await csrf_token(gw)}
    )
    assert response.status_code == 200, response.text
    return response.text


async def test_a_kb_is_created_and_files_uploaded_through_the_ingest_readers(
    gateway: Gateway,
) -> None:
    """Creating a KB leads to its documents page; an upload of several files answers one
    outcome per file: a latin-1 text, an HTML page and a reStructuredText file indexed (read
    as `kbgate ingest` reads them), an unsupported and an empty file failed with the reason;
    the same file again is `unchanged` (JSON for the console's script). Both answers carry
    the console's security headers."""
    tenant = await admin(gateway)
    created = await post(gateway, "knowledge-bases/new", kb_id="handbook", name="Handbook")
    assert "Created the knowledge base handbook" in created
    assert "No documents yet." in created
    leave = "Employés accrue 25 days of paid leave a year.".encode("latin-1")
    files = [
        ("files", ("leave policy.txt", leave, "text/plain")),
        ("files", ("parking.html", b"<title>Parking</title><p>Level two, east garage.</p>", "")),
        ("files", ("notes.rst", b"Notes\n=====\n\nThe *canteen* opens at noon.\n", "")),
        ("files", ("tool.exe", b"MZ\x90\x00", "application/octet-stream")),
        ("files", ("empty.txt", b"  \n", "text/plain")),
    ]
    token = await csrf_token(gateway)
    page = await gateway.client.post(
        "/console/documents/upload",
        data={"kb_id": "handbook", "classification": "internal", "csrf_token": token},
        files=files,
    )
    assert page.status_code == 200, page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert outcomes(page.text) == {
        "leave policy.txt": "indexed",
        "parking.html": "indexed",
        "notes.rst": "indexed",
        "tool.exe": "failed",
        "empty.txt": "failed",
    }
    assert "unsupported file type &#39;.exe&#39;" in page.text
    assert "no text to index" in page.text
    listed = await gateway.client.get(
        "/v1/knowledge-bases/handbook/documents", headers=tenant.headers()
    )
    ids = [doc["document_id"] for doc in listed.json()["documents"]]
    assert ids == ["leave-policy.txt", "notes.rst", "parking.html"]

    again = await gateway.client.post(
        "/console/documents/upload",
        data={"kb_id": "handbook", "classification": "internal", "csrf_token": token},
        files=[("files", ("leave policy.txt", leave, "text/plain"))],
        headers={"Accept": "application/json"},
    )
    assert again.headers["cache-control"] == "no-store"
    assert again.json() == {
        "results": [
            {
                "file": "leave policy.txt",
                "document_id": "leave-policy.txt",
                "status": "unchanged",
                "passages": 1,
                "reason": None,
            }
        ]
    }
    await post(gateway, "agents/new", agent_id="helper", knowledge_base_ids=["handbook"])
    turn = await tenant.retrieve("helper", "How many days of paid leave do employees accrue?")
    texts = [passage["text"] for passage in turn.json()["passages"]]
    assert any("Employés accrue 25 days" in text for text in texts)


async def test_documents_are_listed_and_deleted_and_writing_them_needs_the_ingest_role(
    gateway: Gateway,
) -> None:
    """The documents page lists a KB's documents and deletes one; a key with the admin role
    alone sees each uploaded file fail for want of the ingest role, and cannot delete."""
    tenant = await admin(gateway)
    await tenant.kb("kb1")
    await tenant.doc("kb1", "a.txt", "Parking is on level two.")
    await tenant.doc("kb1", "b.txt", "The canteen opens at noon.")
    page = (await gateway.client.get("/console/documents", params={"kb_id": "kb1"})).text
    assert 'data-document="a.txt"' in page
    assert 'data-document="b.txt"' in page
    after = await post(gateway, "documents/delete", kb_id="kb1", document_id="a.txt")
    assert "Deleted a.txt" in after
    assert 'data-document="a.txt"' not in after

    admin_only = await tenant.issue("admin-only", ["admin"])
    await sign_in(gateway, admin_only)
    token = await csrf_token(gateway)
    refused = await gateway.client.post(
        "/console/documents/upload",
        data={"kb_id": "kb1", "classification": "internal", "csrf_token": token},
        files=[("files", ("c.txt", b"Desks are booked a day ahead.", "text/plain"))],
        headers={"Accept": "application/json"},
    )
    [result] = refused.json()["results"]
    assert result["status"] == "failed"
    assert "no ingest role" in result["reason"]
    delete = await gateway.client.post(
        "/console/documents/delete",
        data={"kb_id": "kb1", "document_id": "b.txt", "csrf_token": token},
    )
    assert delete.status_code == 403
    listed = await gateway.client.get("/v1/knowledge-bases/kb1/documents", headers=tenant.headers())
    assert [doc["document_id"] for doc in listed.json()["documents"]] == ["b.txt"]


async def test_agents_are_created_arranged_and_deleted_and_every_change_is_in_history(
    gateway: Gateway,
) -> None:
    """An agent is created with two KBs, gets a third attached, moved up and the first
    detached, in that order; deleting a KB detaches it. History lists each KB and agent
    change (console and API alike) with the key id, never a KB name; a taken id is refused
    in plain words with the typed value kept."""
    tenant = await admin(gateway)
    for kb_id in ("a", "b", "c"):
        await tenant.kb(kb_id, name=f"Secret name {kb_id}")
    await post(gateway, "agents/new", agent_id="bot", knowledge_base_ids=["a", "b"])
    await post(gateway, "agents/knowledge-bases", agent_id="bot", kb_id="c", action="attach")
    await post(gateway, "agents/knowledge-bases", agent_id="bot", kb_id="c", action="up")
    arranged = await post(
        gateway, "agents/knowledge-bases", agent_id="bot", kb_id="a", action="detach"
    )
    assert "Detached a: bot now uses c, b." in arranged
    agent = await gateway.client.get("/v1/agents/bot", headers=tenant.headers())
    assert agent.json()["knowledge_base_ids"] == ["c", "b"]

    taken = await gateway.client.post(
        "/console/agents/new", data={"agent_id": "bot", "csrf_token": await csrf_token(gateway)}
    )
    assert taken.status_code == 422
    assert "is taken: this workspace has one with this id" in taken.text
    assert 'value="bot"' in taken.text

    await tenant.kb("c", name="Secret name c", top_k=4)  # through the API
    await post(gateway, "knowledge-bases/delete", kb_id="b")
    agent = await gateway.client.get("/v1/agents/bot", headers=tenant.headers())
    assert agent.json()["knowledge_base_ids"] == ["c"]
    await post(gateway, "agents/delete", agent_id="bot")

    history = (await gateway.client.get("/console/history")).text
    rows = re.findall(r'<tr data-kind="([a-z_]+)" data-object="([^"]+)">(.*?)</tr>', history, re.S)
    changes = [(kind, obj, re.findall(r"<td>([^<]*)</td>", row)[-2]) for kind, obj, row in rows]
    assert changes == [
        ("agent", "bot", "deleted"),
        ("knowledge_base", "b", "deleted"),
        ("agent", "bot", "changed"),  # b detached by its deletion
        ("knowledge_base", "c", "changed"),
        ("agent", "bot", "changed"),
        ("agent", "bot", "changed"),
        ("agent", "bot", "changed"),
        ("agent", "bot", "created"),
        ("knowledge_base", "c", "created"),
        ("knowledge_base", "b", "created"),
        ("knowledge_base", "a", "created"),
    ]
    assert "fields: top_k" in history
    assert "knowledge bases now: c, b" in history
    assert "Secret name" not in history
    assert history.count("<code>key_") >= len(changes)


async def test_another_workspace_admin_can_neither_see_nor_change_these_objects(
    gateway: Gateway,
) -> None:
    """Documents, uploads, arrangements and deletions of another workspace's KB and agent
    answer 404 as unknown ids do, write nothing, and its history shows none of them."""
    owner = await provision(gateway, "acme", "owner")
    await owner.kb("secret-kb")
    await owner.doc("secret-kb", "doc", "Parking is on level two.")
    await owner.agent("owner-agent", ["secret-kb"])
    await admin(gateway, "intruder")
    token = await csrf_token(gateway)
    attempts = [
        await gateway.client.get("/console/documents", params={"kb_id": "secret-kb"}),
        await gateway.client.post(
            "/console/documents/upload",
            data={"kb_id": "secret-kb", "classification": "public", "csrf_token": token},
            files=[("files", ("x.txt", b"planted text", "text/plain"))],
        ),
        await gateway.client.post(
            "/console/documents/delete",
            data={"kb_id": "secret-kb", "document_id": "doc", "csrf_token": token},
        ),
        await gateway.client.post(
            "/console/agents/knowledge-bases",
            data={
                "agent_id": "owner-agent",
                "kb_id": "secret-kb",
                "action": "detach",
                "csrf_token": token,
            },
        ),
        await gateway.client.post(
            "/console/knowledge-bases/delete", data={"kb_id": "secret-kb", "csrf_token": token}
        ),
        await gateway.client.post(
            "/console/agents/delete", data={"agent_id": "owner-agent", "csrf_token": token}
        ),
    ]
    assert [response.status_code for response in attempts] == [404] * 6
    stats = await gateway.client.get("/v1/knowledge-bases/secret-kb/stats", headers=owner.headers())
    assert stats.json()["documents"] == 1
    agent = await gateway.client.get("/v1/agents/owner-agent", headers=owner.headers())
    assert agent.json()["knowledge_base_ids"] == ["secret-kb"]
    history = (await gateway.client.get("/console/history")).text
    assert "secret-kb" not in history
    assert "owner-agent" not in history


async def test_toggles_follow_the_state_and_a_refused_value_stays_in_its_field(
    gateway: Gateway,
) -> None:
    """A setting that is on offers "Turn off" only (and "Use default" once stored), one that is
    off offers "Turn on"; a refused count is explained in plain words and stays typed."""

    def toggle(page: str) -> str:
        found = re.search(
            r'id="setting-strict_rag_isolation".*?<div class="buttons toggle"'
            r' data-state="(on|off)">(.*?)</div>',
            page,
            re.S,
        )
        assert found is not None
        return found.group(1) + ": " + " / ".join(re.findall(r">([^<]+)</button>", found.group(2)))

    await admin(gateway)
    assert toggle((await gateway.client.get("/console/settings")).text) == "on: Turn off"
    turned = await post(gateway, "settings", setting="strict_rag_isolation", value="false")
    assert toggle(turned) == "off: Turn on / Use default"

    refused = await gateway.client.post(
        "/console/settings",
        data={
            "setting": "max_knowledge_bases_per_agent",
            "value": "lots",
            "csrf_token": await csrf_token(gateway),
        },
    )
    assert refused.status_code == 422
    assert "must be a whole number, such as 5, or left empty" in refused.text
    assert re.search(r'id="value-max_knowledge_bases_per_agent"[^>]*value="lots"', refused.text)
    assert "Expected" not in refused.text


async def test_an_abstention_is_shown_as_an_outcome_not_as_a_success(gateway: Gateway) -> None:
    """When no passage clears the floors the try page says the turn abstained, with the
    reason, in an outcome box: not in the green notice used for saved changes."""
    tenant = await admin(gateway)
    await tenant.kb("kb1", score_threshold=0.99, keyword_floor=1.0)
    await tenant.doc("kb1", "doc", "Parking is on level two of the east garage.")
    await tenant.agent("helper", ["kb1"])
    page = await post(gateway, "try", agent_id="helper", question="Where do staff park?")
    assert re.search(r'<p class="outcome abstained" id="abstention" role="status">', page)
    assert "<strong>Abstained:</strong>" in page
    assert 'class="notice"' not in page
    assert 'class="passage"' not in page


async def test_the_kb_form_sets_drop_copies_and_keeps_it_when_other_fields_change(
    gateway: Gateway,
) -> None:
    """The KB form turns `drop_copies` off; a later save that changes only top_k keeps it off
    (the form shows the stored choice); choosing the default clears it; a forged choice is
    refused with 422 and changes nothing."""
    tenant = await admin(gateway)
    await tenant.kb("kb1")
    await post(gateway, "knowledge-bases", kb_id="kb1", drop_copies="off")
    stored = await gateway.client.get("/v1/knowledge-bases/kb1", headers=tenant.headers())
    assert stored.json()["settings"] == {"drop_copies": False}
    assert stored.json()["effective"]["drop_copies"]["value"] is False
    page = (await gateway.client.get("/console/knowledge-bases")).text
    assert re.search(r'<option value="off" selected>off</option>', page)
    await post(gateway, "knowledge-bases", kb_id="kb1", top_k="4", drop_copies="off")
    kept = await gateway.client.get("/v1/knowledge-bases/kb1", headers=tenant.headers())
    assert kept.json()["settings"] == {"top_k": 4, "drop_copies": False}
    await post(gateway, "knowledge-bases", kb_id="kb1", top_k="4", drop_copies="")
    cleared = await gateway.client.get("/v1/knowledge-bases/kb1", headers=tenant.headers())
    assert cleared.json()["settings"] == {"top_k": 4}
    forged = await gateway.client.post(
        "/console/knowledge-bases",
        data={"kb_id": "kb1", "drop_copies": "maybe", "csrf_token": await csrf_token(gateway)},
    )
    assert forged.status_code == 422
    assert 'data-error-for="drop_copies"' in forged.text
    after = await gateway.client.get("/v1/knowledge-bases/kb1", headers=tenant.headers())
    assert after.json()["settings"] == {"top_k": 4}


async def test_an_uploaded_files_properties_and_front_matter_become_fields(
    gateway: Gateway, tmp_path: Path
) -> None:
    """A console upload carries the fields `kbgate ingest` reads from a file (its front
    matter, its document properties that fit the KB's schema); a property of another type
    than declared is left out, the upload still indexed."""
    tenant = await admin(gateway)
    await tenant.kb("handbook", metadata_fields={"keywords": "string_list", "subject": "number"})
    guide = docx_with(
        tmp_path / "guide.docx",
        ["Each pump in the pump room is inspected every month by the crew."],
        author="Bob Stone",
        subject="Pumps",
        keywords="pumps, maintenance",
    )
    notes = b"---\nregion: eu\n---\n# Notes\n\nThe canteen opens at noon.\n"
    answer = await gateway.client.post(
        "/console/documents/upload",
        data={
            "kb_id": "handbook",
            "classification": "internal",
            "csrf_token": await csrf_token(gateway),
        },
        files=[
            ("files", ("guide.docx", guide.read_bytes(), "")),
            ("files", ("notes.md", notes, "text/markdown")),
        ],
        headers={"Accept": "application/json"},
    )
    assert [r["status"] for r in answer.json()["results"]] == ["indexed", "indexed"]
    await post(gateway, "agents/new", agent_id="helper", knowledge_base_ids=["handbook"])
    pumps = await tenant.retrieve(
        "helper", "how often is a pump inspected", filter={"keywords": "pumps"}
    )
    passages = pumps.json()["passages"]
    assert [p["document_id"] for p in passages] == ["guide.docx"]
    assert passages[0]["metadata"]["keywords"] == ["pumps", "maintenance"]
    assert passages[0]["metadata"]["author"] == "<PERSON>"
    assert "subject" not in passages[0]["metadata"]
    canteen = await tenant.retrieve(
        "helper", "when does the canteen open", filter={"keywords": {"$exists": False}}
    )
    assert {p["document_id"]: p["metadata"] for p in canteen.json()["passages"]} == {
        "notes.md": {"region": "eu"}
    }
