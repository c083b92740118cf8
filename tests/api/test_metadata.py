"""Document fields, a KB's schema of filterable fields, filters, validity and the context
budget, through the HTTP API with the real model and Qdrant Edge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision

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
