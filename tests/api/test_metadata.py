"""Document fields, a KB's schema of filterable fields, filters, validity and the context
budget, through the HTTP API with the real model and Qdrant Edge."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision
from tests.api.test_console import csrf_token, sign_in

pytestmark = pytest.mark.anyio

SCHEMA = {
    "region": "string",
    "year": "number",
    "draft": "boolean",
    "published": "datetime",
    "tags": "string_list",
}
PUMP = "The pump room is on level two. Each pump is inspected every month by the crew."
SITES = [
    "The north pump feeds the cooling loop of the eu plant and runs at night.",
    "A spare pump waits in the us warehouse beside the valve racks and filters.",
    "Pump seals at the apac depot are replaced after every flood season ends.",
    "The draft manual says the old pump on the roof drains the rain tank.",
]


async def _put(tenant: Tenant, doc_id: str, body: dict[str, Any], kb: str = "manuals") -> Any:
    return await tenant.gw.client.put(
        f"/v1/knowledge-bases/{kb}/documents/{doc_id}", json=body, headers=tenant.headers()
    )


async def _world(gw: Gateway, tenant_id: str = "acme-support", org: str = "acme") -> Tenant:
    tenant = await provision(gw, org, tenant_id)
    await tenant.kb("manuals", metadata_fields=SCHEMA)
    await tenant.agent("bot", ["manuals"])
    for number, region in enumerate(["eu", "us", "apac", "eu"]):
        response = await _put(
            tenant,
            f"pump-{number}",
            {
                "text": SITES[number],
                "classification": "internal",
                "metadata": {
                    "region": region,
                    "year": 2020 + number,
                    "draft": number == 3,
                    "published": f"2024-0{number + 1}-01T09:00:00+01:00",
                    "tags": [f"t{number}", "pumps"],
                    "owner": f"{tenant_id}-team",
                },
            },
        )
        assert response.status_code == 200, response.text
    return tenant


async def test_document_fields_are_stored_checked_and_returned(gateway: Gateway) -> None:
    """A document's fields come back with its passages: declared datetimes in UTC, an
    undeclared field as given; the KB's schema is in its settings and its history."""
    tenant = await _world(gateway)
    answer = await tenant.retrieve("bot", "which pump feeds the cooling loop")
    assert answer.status_code == 200, answer.text
    passages = answer.json()["passages"]
    assert passages
    by_id = {p["document_id"]: p["metadata"] for p in passages}
    assert by_id["pump-0"]["published"] == "2024-01-01T08:00:00Z"
    assert by_id["pump-0"]["owner"] == "acme-support-team"
    kb = (await gateway.client.get("/v1/knowledge-bases/manuals", headers=tenant.headers())).json()
    assert kb["settings"]["metadata_fields"] == SCHEMA
    history = await gateway.client.get(
        "/v1/workspace/changes", params={"object_id": "manuals"}, headers=tenant.headers()
    )
    assert any("metadata_fields" in change["fields"] for change in history.json()["changes"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"year": "2020"}}, "metadata.year"),
        ({"metadata": {"published": "last week"}}, "metadata.published"),
        ({"metadata": {"draft": 1}}, "metadata.draft"),
        ({"metadata": {"tenantId": "other"}}, "metadata.tenantId"),
        ({"metadata": {"document_id": "x"}}, "metadata.document_id"),
        ({"metadata": {"a.b": "x"}}, "metadata.a.b"),
        ({"metadata": {"nested": {"a": 1}}}, "metadata[...]"),
        ({"valid_from": "soon"}, "valid_from"),
        (
            {"valid_from": "2026-02-01", "valid_until": "2026-01-01"},
            "valid_until",
        ),
    ],
)
async def test_bad_fields_are_refused_naming_them(
    gateway: Gateway, body: dict[str, Any], field: str
) -> None:
    """A wrong type for a declared field, a reserved or malformed name, a nested value
    or a bad moment answers 422 naming the field, and writes nothing."""
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals", metadata_fields=SCHEMA)
    response = await _put(tenant, "doc", {"text": PUMP, "classification": "internal", **body})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    documents = await gateway.client.get(
        "/v1/knowledge-bases/manuals/documents", headers=tenant.headers()
    )
    assert documents.json()["documents"] == []


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"tenantId": "string"}, "metadata_fields.tenantId"),
        ({"classification": "string"}, "metadata_fields.classification"),
        ({"valid_until": "datetime"}, "metadata_fields.valid_until"),
        ({"region": "text"}, "metadata_fields[...]"),
    ],
)
async def test_a_schema_naming_a_reserved_key_or_an_unknown_type_is_refused(
    gateway: Gateway, schema: dict[str, str], field: str
) -> None:
    """Every payload contract key is reserved; types are the five the grammar knows."""
    tenant = await provision(gateway, "acme", "acme-support")
    response = await gateway.client.put(
        "/v1/knowledge-bases/manuals", json={"metadata_fields": schema}, headers=tenant.headers()
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


async def test_bulk_lines_carry_fields_and_fail_alone_on_bad_ones(gateway: Gateway) -> None:
    """The NDJSON path takes the same fields: a line with a wrong type fails naming it,
    the others are written with theirs."""
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals", metadata_fields=SCHEMA)
    await tenant.agent("bot", ["manuals"])
    lines = [
        {
            "document_id": "a",
            "text": PUMP,
            "classification": "internal",
            "metadata": {"region": "eu"},
        },
        {
            "document_id": "b",
            "text": PUMP + " More.",
            "classification": "internal",
            "metadata": {"year": "old"},
        },
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    response = await gateway.client.post(
        "/v1/knowledge-bases/manuals/documents",
        content=body,
        headers={**tenant.headers(), "Content-Type": "application/x-ndjson"},
    )
    results = [json.loads(line) for line in response.text.splitlines()]
    assert [r["status"] for r in results] == ["indexed", "failed"]
    assert results[1]["problem"]["field"] == "metadata.year"
    answer = (await tenant.retrieve("bot", "pump room inspection")).json()
    assert [p["metadata"] for p in answer["passages"]] == [{"region": "eu"}]


async def _documents_of(answer: Any) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {p["document_id"] for p in answer.json()["passages"]}


async def test_a_filter_narrows_the_turn_to_matching_documents(gateway: Gateway) -> None:
    """Only documents whose fields pass the filter answer, whatever the question."""
    tenant = await _world(gateway)
    question = "which pump feeds the cooling loop or waits in the warehouse"
    assert await _documents_of(await tenant.retrieve("bot", question, filter={"region": "eu"})) <= {
        "pump-0",
        "pump-3",
    }
    found = await _documents_of(
        await tenant.retrieve(
            "bot",
            question,
            filter={"$or": [{"year": {"$gte": 2022}}, {"tags": "t1"}], "draft": False},
        )
    )
    assert found
    assert found <= {"pump-1", "pump-2"}
    dated = await _documents_of(
        await tenant.retrieve(
            "bot", question, filter={"published": {"$lt": "2024-01-15T00:00:00Z"}}
        )
    )
    assert dated == {"pump-0"}


async def test_a_filter_naming_another_workspaces_document_finds_nothing(
    gateway: Gateway,
) -> None:
    """A filter is AND-ed inside the key's Scope: naming another workspace's document id,
    alone or OR-ed with the caller's own fields, never reaches it."""
    mine = await _world(gateway)
    theirs = await provision(gateway, "globex", "globex-ops")
    await theirs.kb("manuals", metadata_fields=SCHEMA)
    secret = "The globex reactor pump secret is kept in the vault behind the blue door."
    response = await _put(
        theirs,
        "globex-only",
        {"text": secret, "classification": "internal", "metadata": {"region": "eu"}},
    )
    assert response.status_code == 200
    alone = await mine.retrieve(
        "bot", "reactor pump secret vault", filter={"document_id": "globex-only"}
    )
    assert alone.status_code == 200
    assert alone.json()["passages"] == []
    assert alone.json()["abstained"]
    mixed = await mine.retrieve(
        "bot",
        "reactor pump secret vault blue door",
        filter={"$or": [{"document_id": {"$in": ["globex-only"]}}, {"region": "eu"}]},
    )
    assert await _documents_of(mixed) <= {"pump-0", "pump-3"}
    assert "globex" not in mixed.text


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"tenantId": "globex-ops"}, "filter.tenantId"),
        ({"$or": [{"region": "eu"}, {"org_id": "globex"}]}, "filter.org_id"),
        ({"classification": "restricted"}, "filter.classification"),
        ({"owner": "acme-support-team"}, "filter.owner"),
        ({"year": "2021"}, "filter.year"),
        ({"published": {"$gt": 5}}, "filter.published.$gt"),
        ({"region": {"$like": "e%"}}, "filter.region.$like"),
    ],
)
async def test_a_bad_filter_answers_422_naming_it(
    gateway: Gateway, document: dict[str, Any], field: str
) -> None:
    """Reserved keys, undeclared fields, wrong types and unknown operators: 422 naming
    the field, before anything is searched."""
    tenant = await _world(gateway)
    answer = await tenant.retrieve("bot", "pump", filter=document)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field
    grounding = await gateway.client.post(
        "/v1/grounding/check",
        json={"agent_id": "bot", "answer": "The pump room is on level two.", "filter": document},
        headers=tenant.headers(),
    )
    assert grounding.status_code == 422
    assert grounding.json()["field"] == field


async def test_an_agents_default_filter_applies_to_every_turn(gateway: Gateway) -> None:
    """An agent's filter is AND-ed with each turn's; a filter its KBs cannot take is
    refused when the agent is written."""
    tenant = await _world(gateway)
    await tenant.agent("public-bot", ["manuals"], filter={"draft": False})
    found = await _documents_of(
        await tenant.retrieve("public-bot", "the draft manual and the old pump on the roof")
    )
    assert "pump-3" not in found
    assert found
    narrowed = await _documents_of(
        await tenant.retrieve("public-bot", "the old pump", filter={"region": "eu"})
    )
    assert narrowed <= {"pump-0"}
    refused = await gateway.client.put(
        "/v1/agents/bad-bot",
        json={"knowledge_base_ids": ["manuals"], "filter": {"colour": "red"}},
        headers=tenant.headers(),
    )
    assert refused.status_code == 422
    assert refused.json()["field"] == "filter.colour"


async def test_grounding_checks_against_the_filtered_passages(gateway: Gateway) -> None:
    """The post-check searches what a turn with the same filter would: an answer drawn
    from a document the filter leaves out matches less."""
    tenant = await _world(gateway)
    answer = SITES[0]

    async def score(document: dict[str, Any] | None) -> float:
        body: dict[str, Any] = {"agent_id": "bot", "answer": answer}
        if document is not None:
            body["filter"] = document
        response = await gateway.client.post(
            "/v1/grounding/check", json=body, headers=tenant.headers()
        )
        assert response.status_code == 200, response.text
        return float(response.json()["score"] or 0.0)

    assert await score({"region": "us"}) < await score({"region": "eu"})


async def test_expired_documents_do_not_answer_and_are_counted(gateway: Gateway) -> None:
    """A document past its `valid_until` does not answer now and is counted; asked as of
    a moment it was in force, it answers; one whose `valid_from` has not come does not."""
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    old = "The 2019 boiler procedure drains the tank through the red valve first."
    later = "The future boiler procedure drains the tank through the green valve."
    assert (
        await _put(
            tenant, "old", {"text": old, "classification": "internal", "valid_until": "2025-01-01"}
        )
    ).status_code == 200
    assert (
        await _put(
            tenant,
            "future",
            {"text": later, "classification": "internal", "valid_from": "2999-01-01T00:00:00Z"},
        )
    ).status_code == 200
    now = await tenant.retrieve("bot", "how is the boiler tank drained")
    assert await _documents_of(now) == set()
    assert now.json()["counts"]["passages_expired"] == 1
    then = await tenant.retrieve("bot", "how is the boiler tank drained", as_of="2024-06-01")
    assert await _documents_of(then) == {"old"}
    assert then.json()["counts"]["passages_expired"] == 0
    assert then.json()["effective"]["as_of"] == "2024-06-01T00:00:00Z"
    bad = await tenant.retrieve("bot", "boiler", as_of="yesterday")
    assert bad.status_code == 422
    assert bad.json()["field"] == "as_of"


async def test_a_budget_is_filled_best_first_and_counted(gateway: Gateway) -> None:
    """A budget sends the best passages that fit and counts what it sent and left out;
    one that nothing fits abstains; a budget naming no unit or both is refused."""
    tenant = await _world(gateway)
    question = "which pump feeds the cooling loop or waits in the warehouse"
    whole = (await tenant.retrieve("bot", question)).json()
    assert len(whole["passages"]) >= 2
    first = whole["passages"][0]
    size = len(first["text"]) + len(first["title"])
    tight = await tenant.retrieve("bot", question, budget={"characters": size})
    assert tight.status_code == 200, tight.text
    body = tight.json()
    assert [p["passage_id"] for p in body["passages"]][:1] == [first["passage_id"]]
    counts = body["counts"]
    assert counts["characters_sent"] <= size
    assert counts["passages_sent"] == len(body["passages"])
    assert counts["passages_sent"] + counts["passages_left_out"] == len(whole["passages"])
    assert counts["characters_left_out"] > 0
    assert first["passage_id"] in body["context"]
    tokens = (await tenant.retrieve("bot", question, budget={"tokens": 10_000})).json()
    assert tokens["counts"]["passages_left_out"] == 0
    assert tokens["counts"]["tokens_sent"] == sum(
        -(-(len(p["text"]) + len(p["title"])) // 4) for p in tokens["passages"]
    )
    nothing = (await tenant.retrieve("bot", question, budget={"characters": 1})).json()
    assert nothing["abstained"]
    assert nothing["reason"] == "over_budget"
    for bad in ({}, {"tokens": 10, "characters": 10}, {"tokens": 0}):
        refused = await tenant.retrieve("bot", question, budget=bad)
        assert refused.status_code == 422
        assert refused.json()["field"].startswith("budget")


LANGUAGE_DOCS = {
    "pump-en": "The pump is inspected every month and its seals are replaced each year.",
    "pump-de": "Die Pumpe wird jeden Monat geprüft und ihre Dichtungen jedes Jahr ersetzt.",
    "pump-fr": "La pompe est contrôlée chaque mois et ses joints sont remplacés chaque année.",
}


async def _languages(gw: Gateway, **rules: Any) -> Tenant:
    tenant = await provision(gw, "acme", "acme-support")
    await tenant.kb("manuals", language=rules)
    await tenant.agent("bot", ["manuals"])
    for doc_id, text in LANGUAGE_DOCS.items():
        assert (
            await _put(tenant, doc_id, {"text": text, "classification": "internal"})
        ).status_code == 200
    return tenant


async def test_a_turn_reports_the_questions_language_and_a_kb_can_restrict(
    gateway: Gateway,
) -> None:
    """Each passage's language is detected at ingest; a KB restricted to German answers
    only its German passage; the turn reports the question's language."""
    tenant = await _languages(gateway, restrict=["de"])
    answer = await tenant.retrieve("bot", "Wie oft wird die Pumpe geprüft?")
    assert await _documents_of(answer) == {"pump-de"}
    assert answer.json()["effective"]["language"] == "de"
    english = await tenant.retrieve("bot", "How often is the pump inspected and its seals?")
    assert english.json()["effective"]["language"] == "en"
    assert await _documents_of(english) <= {"pump-de"}


async def test_a_kb_can_prefer_the_questions_language(gateway: Gateway) -> None:
    """With `prefer: question`, passages in the question's language come first."""
    tenant = await _languages(gateway, prefer="question")
    for question, first in [
        ("La pompe est contrôlée combien de fois ?", "pump-fr"),
        ("Wie oft wird die Pumpe geprüft?", "pump-de"),
    ]:
        answer = await tenant.retrieve("bot", question)
        assert answer.status_code == 200
        assert answer.json()["passages"][0]["document_id"] == first


async def test_an_unknown_language_code_is_refused(gateway: Gateway) -> None:
    tenant = await provision(gateway, "acme", "acme-support")
    response = await gateway.client.put(
        "/v1/knowledge-bases/manuals",
        json={"language": {"restrict": ["xx"]}},
        headers=tenant.headers(),
    )
    assert response.status_code == 422
    assert response.json()["field"] == "language"


async def test_export_and_import_carry_fields_schema_and_filters(gateway: Gateway) -> None:
    """An archive holds the KB's schema and language rules, the agent's filter and each
    passage's fields and validity; the imported workspace filters as the first did. A
    passage whose declared field has the wrong type is refused (422 `archive`)."""
    tenant = await _world(gateway)
    await tenant.agent("bot", ["manuals"], filter={"draft": False})
    exported = await gateway.client.get(
        "/v1/orgs/acme/workspaces/acme-support/export", headers=gateway.platform
    )
    assert exported.status_code == 200, exported.text
    imported = await gateway.client.post(
        "/v1/orgs/acme/workspaces/acme-copy/import",
        content=exported.content,
        headers={**gateway.platform, "Content-Type": "application/gzip"},
    )
    assert imported.status_code == 201, imported.text
    copy = Tenant(gateway, "acme", "acme-copy")
    await copy.issue("all", ["admin", "ingest", "retrieve"], clearance="restricted")
    kb = (await gateway.client.get("/v1/knowledge-bases/manuals", headers=copy.headers())).json()
    assert kb["settings"]["metadata_fields"] == SCHEMA
    question = "which pump feeds the cooling loop or waits in the warehouse"
    answer = await copy.retrieve("bot", question, filter={"region": "eu"})
    assert await _documents_of(answer) <= {"pump-0"}
    assert answer.json()["passages"][0]["metadata"]["owner"] == "acme-support-team"

    def wrong_type(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for line in lines:
            if line.get("kind") == "passage":
                line["payload"]["metadata"]["year"] = "last year"
        return lines

    lines = [json.loads(line) for line in gzip.decompress(exported.content).splitlines()]
    tampered = gzip.compress(
        b"".join(json.dumps(line).encode() + b"\n" for line in wrong_type(lines))
    )
    refused = await gateway.client.post(
        "/v1/orgs/acme/workspaces/acme-bad/import",
        content=tampered,
        headers={**gateway.platform, "Content-Type": "application/gzip"},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "archive"


async def test_the_console_edits_the_schema_and_filters_a_try(gateway: Gateway) -> None:
    """The KB page's `filterable fields` sets the schema (a reserved name refused at the
    field); *Try a question* takes a filter, shows each passage's fields, and names a
    bad filter's field."""
    tenant = await _world(gateway)
    signed = await sign_in(gateway, tenant.keys["all"])
    assert signed.status_code == 303
    saved = await gateway.client.post(
        "/console/knowledge-bases",
        data={
            "kb_id": "manuals",
            "metadata_fields": "region=string, year=number, tags=string_list",
            "csrf_token": await csrf_token(gateway),
        },
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    kb = (await gateway.client.get("/v1/knowledge-bases/manuals", headers=tenant.headers())).json()
    assert kb["settings"]["metadata_fields"] == {
        "region": "string",
        "year": "number",
        "tags": "string_list",
    }
    page = (await gateway.client.get("/console/knowledge-bases")).text
    assert "region=string, year=number, tags=string_list" in page
    refused = await gateway.client.post(
        "/console/knowledge-bases",
        data={
            "kb_id": "manuals",
            "metadata_fields": "tenantId=string",
            "csrf_token": await csrf_token(gateway),
        },
    )
    assert refused.status_code == 422
    assert 'data-error-for="metadata_fields"' in refused.text
    tried = await gateway.client.post(
        "/console/try",
        data={
            "agent_id": "bot",
            "question": "which pump feeds the cooling loop or waits in the warehouse",
            "filter": '{"region": "us"}',
            "csrf_token": await csrf_token(gateway),
        },
    )
    assert tried.status_code == 200, tried.text
    assert "pump-1" in tried.text
    assert "pump-0" not in tried.text
    assert "passage-fields" in tried.text
    bad = await gateway.client.post(
        "/console/try",
        data={
            "agent_id": "bot",
            "question": "pumps",
            "filter": '{"colour": "red"}',
            "csrf_token": await csrf_token(gateway),
        },
    )
    assert bad.status_code == 422
    assert "filter.colour" in bad.text


def _paged_pdf(pages: list[str]) -> bytes:
    """A PDF of one line of Helvetica text per page, built by hand."""
    count = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (4 + 2 * n) for n in range(count)), count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for number, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * number)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


async def test_a_pdf_passage_cites_its_page(gateway: Gateway) -> None:
    """A PDF's pages reach its passages: the passage, its fenced evidence and a verified
    citation name the page it starts on."""
    from ingest.extract import pdf_text

    pages = [
        "The boiler manual starts with the safety rules for every operator on duty. " * 12,
        "Cleaning the burner needs the gas valve closed and the flue cooled down first. " * 12,
        "The pressure relief valve is tested every spring by lifting its lever by hand. " * 12,
    ]
    text, _ = pdf_text(_paged_pdf(pages))
    assert text.count("\f") == 2
    tenant = await provision(gateway, "acme", "acme-support")
    await tenant.kb("manuals")
    await tenant.agent("bot", ["manuals"])
    put = await _put(tenant, "boiler.pdf", {"text": text, "classification": "internal"})
    assert put.status_code == 200, put.text
    answer = (await tenant.retrieve("bot", "How is the pressure relief valve tested?")).json()
    first = answer["passages"][0]
    assert first["page"] == 3
    assert 'page="3"' in answer["context"]
    verified = await gateway.client.post(
        "/v1/citations/verify",
        json={"turn_id": answer["turn_id"], "citations": [{"passage_id": first["passage_id"]}]},
        headers=tenant.headers(),
    )
    assert verified.json()["valid"] == [
        {"passage_id": first["passage_id"], "document_id": "boiler.pdf", "page": 3}
    ]
