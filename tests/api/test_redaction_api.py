"""PII redaction over HTTP: the two gates on /v1/retrieve and /v1/redact, citations, telemetry."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.retrieval.evidence import escape_text
from gateway.safety.egress import MAX_EGRESS_CHARS
from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
BILLING = (
    f"Billing for the Aurora account goes to {EMAIL}; the company card on file is {CARD} "
    "and invoices are sent on the first working day of each month."
)
QUESTION = "Where does billing for the Aurora account go?"
# (workspace rag_pii_redaction, agent pii_redaction, redaction in force)
GATES = [(True, True, True), (True, False, True), (False, True, True), (False, False, False)]


async def _tenant(gw: Gateway, tenant_id: str = "support", *, workspace_gate: Any = None) -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    if workspace_gate is not None:
        await tenant.settings(rag_pii_redaction=workspace_gate)
    await tenant.kb("kb")
    await tenant.doc("kb", "billing", BILLING)
    await tenant.doc("kb", "tea", "Green tea contains catechins and some caffeine.")
    return tenant


async def _redact(tenant: Tenant, body: dict[str, Any], key: str = "all") -> Any:
    return await tenant.gw.client.post("/v1/redact", json=body, headers=tenant.headers(key))


@pytest.mark.parametrize(("workspace_gate", "agent_gate", "on"), GATES)
async def test_retrieve_gates(
    gateway: Gateway, workspace_gate: bool, agent_gate: bool, on: bool
) -> None:
    """Passages and context carry placeholders unless both gates are explicitly off."""
    tenant = await _tenant(gateway, workspace_gate=workspace_gate)
    await tenant.agent("bot", ["kb"], pii_redaction=agent_gate)
    response = await tenant.retrieve("bot", QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    billing = next(p for p in body["passages"] if p["document_id"] == "billing")
    assert body["effective"]["redaction"] is on
    if on:
        assert "<EMAIL_ADDRESS>" in billing["text"]
        assert "<CREDIT_CARD>" in billing["text"]
        assert EMAIL not in billing["text"]
        assert CARD not in billing["text"]
        assert escape_text("<EMAIL_ADDRESS>") in body["context"]
        assert escape_text("<CREDIT_CARD>") in body["context"]
        assert EMAIL not in body["context"]
        assert CARD not in body["context"]
    else:
        assert EMAIL in billing["text"]
        assert CARD in billing["text"]
        assert EMAIL in body["context"]
        assert CARD in body["context"]
        assert "<EMAIL_ADDRESS>" not in billing["text"]


async def test_retrieve_redacts_by_default(gateway: Gateway) -> None:
    """With neither gate set, redaction is on."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", QUESTION)).json()
    billing = next(p for p in body["passages"] if p["document_id"] == "billing")
    assert body["effective"]["redaction"] is True
    assert EMAIL not in billing["text"]
    assert "<EMAIL_ADDRESS>" in billing["text"]


@pytest.mark.parametrize(("workspace_gate", "agent_gate", "on"), GATES)
async def test_redact_endpoint_gates(
    gateway: Gateway, workspace_gate: bool, agent_gate: bool, on: bool
) -> None:
    """/v1/redact answers for text and for JSON values under the same two gates."""
    tenant = await _tenant(gateway, workspace_gate=workspace_gate)
    await tenant.agent("bot", ["kb"], pii_redaction=agent_gate)
    text = f"Send the receipt to {EMAIL}, card {CARD}."

    response = await _redact(tenant, {"agent_id": "bot", "text": text})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "value" not in body
    assert body["effective"]["redaction"] is on
    if on:
        assert body["text"] == "Send the receipt to <EMAIL_ADDRESS>, card <CREDIT_CARD>."
        assert body["redacted"] is True
        assert body["entities"] == [
            {"type": "CREDIT_CARD", "count": 1},
            {"type": "EMAIL_ADDRESS", "count": 1},
        ]
    else:
        assert body == {
            "text": text,
            "redacted": False,
            "entities": [],
            "effective": {"redaction": False, "entities": []},
        }

    arguments = {"to": [EMAIL, "ops@example.org"], "amount": 12, "card": CARD, "note": None}
    response = await _redact(tenant, {"agent_id": "bot", "value": arguments})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "text" not in body
    if on:
        assert body["value"] == {
            "to": ["<EMAIL_ADDRESS>", "<EMAIL_ADDRESS>"],
            "amount": 12,
            "card": "<CREDIT_CARD>",
            "note": None,
        }
        assert body["entities"] == [
            {"type": "CREDIT_CARD", "count": 1},
            {"type": "EMAIL_ADDRESS", "count": 2},
        ]
    else:
        assert body["value"] == arguments
        assert body["redacted"] is False


async def test_redact_json_scalars_and_null(gateway: Gateway) -> None:
    """`value` may be any JSON value, null included; it comes back in the same shape."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    for value in [None, 3, True, "mail me at a@example.com", [[EMAIL]]]:
        body = (await _redact(tenant, {"agent_id": "bot", "value": value})).json()
        assert "value" in body
        if value == "mail me at a@example.com":
            assert body["value"] == "mail me at <EMAIL_ADDRESS>"
        elif value == [[EMAIL]]:
            assert body["value"] == [["<EMAIL_ADDRESS>"]]
        else:
            assert body["value"] == value
            assert body["redacted"] is False


@pytest.mark.parametrize(
    "body",
    [
        {"agent_id": "bot"},
        {"agent_id": "bot", "text": "x", "value": "x"},
        {"agent_id": "bot", "text": "x", "value": None},
        {"agent_id": "bot", "text": 5},
        {"agent_id": "bot", "text": "x", "extra": 1},
    ],
)
async def test_redact_needs_exactly_one_of_text_or_value(
    gateway: Gateway, body: dict[str, Any]
) -> None:
    """Neither, both, a non-string text or an unknown field: 422 problem details."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    response = await _redact(tenant, body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_redact_json_too_deep_is_422(gateway: Gateway) -> None:
    """A value nested beyond the limit is refused as invalid input, not a server error."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    value: Any = "x"
    for _ in range(100):
        value = [value]
    response = await _redact(tenant, {"agent_id": "bot", "value": value})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "value"


async def test_redact_size_is_bounded(gateway: Gateway) -> None:
    """Text, or the strings of a value, beyond the per-call limit answer 413."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    big = "a" * (MAX_EGRESS_CHARS + 1)
    response = await _redact(tenant, {"agent_id": "bot", "text": big})
    assert response.status_code == 413, response.text
    assert response.json()["field"] == "text"
    half = "b" * (MAX_EGRESS_CHARS // 2 + 1)
    response = await _redact(tenant, {"agent_id": "bot", "value": {"a": [half], "b": half}})
    assert response.status_code == 413, response.text
    assert response.json()["field"] == "value"


async def test_redact_other_workspaces_agent_is_404(gateway: Gateway) -> None:
    """Another workspace's agent answers exactly like an unknown one: 404."""
    owner = await _tenant(gateway, "owner")
    await owner.agent("bot", ["kb"])
    other = await provision(gateway, "acme", "other")
    foreign = await _redact(other, {"agent_id": "bot", "text": EMAIL})
    unknown = await _redact(other, {"agent_id": "nobody", "text": EMAIL})
    assert foreign.status_code == 404
    assert unknown.status_code == 404
    assert foreign.json() == unknown.json()


async def test_redact_needs_the_retrieve_role(gateway: Gateway) -> None:
    """An ingest-only key is refused (403); no key at all is 401."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    await tenant.issue("ingest", ["ingest"])
    assert (await _redact(tenant, {"agent_id": "bot", "text": "x"}, "ingest")).status_code == 403
    response = await gateway.client.post("/v1/redact", json={"agent_id": "bot", "text": "x"})
    assert response.status_code == 401


async def test_citation_quotes_check_against_redacted_text(gateway: Gateway) -> None:
    """The turn records what the model saw: a quote with placeholders is valid, raw PII is not."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", QUESTION)).json()
    billing = next(p for p in body["passages"] if p["document_id"] == "billing")
    passage_id = billing["passage_id"]
    response = await gateway.client.post(
        "/v1/citations/verify",
        json={
            "turn_id": body["turn_id"],
            "citations": [
                {"passage_id": passage_id, "quote": "account goes to <EMAIL_ADDRESS>"},
                {
                    "passage_id": passage_id,
                    "quote": "the company card on file is &lt;CREDIT_CARD&gt;",
                },
                {"passage_id": passage_id, "quote": f"account goes to {EMAIL}"},
            ],
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 200, response.text
    verdicts = response.json()
    assert [v["passage_id"] for v in verdicts["valid"]] == [passage_id, passage_id]
    assert verdicts["invalid"] == [{"passage_id": passage_id, "reason": "quote_not_found"}]


async def test_workspace_chooses_the_entity_types(gateway: Gateway) -> None:
    """`pii_entities` narrows what is redacted; unknown or empty lists are refused (422)."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    settings = await tenant.settings(pii_entities=["EMAIL_ADDRESS"])
    assert settings["effective"]["pii_entities"]["value"] == ["EMAIL_ADDRESS"]
    assert settings["effective"]["pii_entities"]["source"] == "workspace"

    body = (await tenant.retrieve("bot", QUESTION)).json()
    billing = next(p for p in body["passages"] if p["document_id"] == "billing")
    assert "<EMAIL_ADDRESS>" in billing["text"]
    assert CARD in billing["text"]
    redacted = (await _redact(tenant, {"agent_id": "bot", "text": f"{EMAIL} {CARD}"})).json()
    assert redacted["text"] == f"<EMAIL_ADDRESS> {CARD}"
    assert redacted["effective"]["entities"] == ["EMAIL_ADDRESS"]

    for bad in (["NOT_A_TYPE"], [], "EMAIL_ADDRESS"):
        response = await gateway.client.patch(
            "/v1/workspace/settings", json={"pii_entities": bad}, headers=tenant.headers()
        )
        assert response.status_code == 422, response.text
    reset = await tenant.settings(pii_entities=None)
    assert reset["effective"]["pii_entities"]["source"] == "platform"
    assert "CREDIT_CARD" in reset["effective"]["pii_entities"]["value"]


async def test_telemetry_counts_redactions_without_values(gateway: Gateway) -> None:
    """Metrics count redactions by entity type; neither metrics nor logs hold the values."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    assert (await tenant.retrieve("bot", QUESTION)).status_code == 200
    assert (
        await _redact(tenant, {"agent_id": "bot", "text": f"{EMAIL} {CARD}"})
    ).status_code == 200
    metrics = (await gateway.client.get("/metrics", headers=gateway.platform)).text
    assert 'kbgate_events_total{event="redacted_EMAIL_ADDRESS"} 2.0' in metrics
    assert 'kbgate_events_total{event="redacted_CREDIT_CARD"} 2.0' in metrics
    assert 'kbgate_stage_seconds_count{stage="turn_redact"} 1.0' in metrics
    assert 'kbgate_stage_seconds_count{stage="egress_redact"} 1.0' in metrics
    logs = gateway.logs.getvalue()
    # Fragments of the card a float never holds: a bare "4111" turns up in the digits of
    # the metrics' creation timestamps now and then.
    for secret in (EMAIL, CARD, "jane.doe", "4111 1111", CARD.replace(" ", "")):
        assert secret not in metrics
        assert secret not in logs


async def test_titles_are_redacted_like_texts(gateway: Gateway) -> None:
    """A title carrying PII comes back with placeholders, as the passage text does."""
    tenant = await provision(gateway, "acme", "titled")
    await tenant.kb("kb", score_threshold=0.0)
    await tenant.doc(
        "kb", "memo", "The refund policy covers thirty days.", title=f"Memo for {EMAIL}"
    )
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", "refund policy")).json()
    assert body["passages"][0]["title"] == "Memo for <EMAIL_ADDRESS>"
    assert EMAIL not in str(body)


PHONE = "(415) 555-0132"


@pytest.mark.parametrize(("workspace_gate", "agent_gate", "on"), [GATES[0], GATES[-1]])
async def test_document_fields_are_redacted_like_texts(
    gateway: Gateway, workspace_gate: bool, agent_gate: bool, on: bool
) -> None:
    """A document's string and list fields leave with the text's redaction (numbers as
    they are), while a filter still matches the stored values."""
    tenant = await provision(gateway, "acme", "fielded")
    await tenant.settings(rag_pii_redaction=workspace_gate)
    await tenant.kb(
        "kb", score_threshold=0.0, metadata_fields={"contact": "string", "owners": "string_list"}
    )
    await tenant.agent("bot", ["kb"], pii_redaction=agent_gate)
    put = await gateway.client.put(
        "/v1/knowledge-bases/kb/documents/memo",
        json={
            "text": "The refund policy covers thirty days.",
            "classification": "internal",
            "metadata": {
                "contact": f"Mail {EMAIL} or call {PHONE}",
                "owners": [EMAIL, PHONE, "billing"],
                "year": 2024,
            },
        },
        headers=tenant.headers(),
    )
    assert put.status_code == 200, put.text
    for narrowing in ({}, {"filter": {"owners": EMAIL}}, {"filter": {"contact": {"$ne": "x"}}}):
        body = (await tenant.retrieve("bot", "refund policy", **narrowing)).json()
        assert [p["document_id"] for p in body["passages"]] == ["memo"], narrowing
        fields = body["passages"][0]["metadata"]
        assert fields["year"] == 2024
        if on:
            assert fields["contact"] == "Mail <EMAIL_ADDRESS> or call <PHONE_NUMBER>"
            assert fields["owners"] == ["<EMAIL_ADDRESS>", "<PHONE_NUMBER>", "billing"]
            assert EMAIL not in str(body)
            assert PHONE not in str(body)
        else:
            assert fields["contact"] == f"Mail {EMAIL} or call {PHONE}"
            assert fields["owners"] == [EMAIL, PHONE, "billing"]
    missed = (await tenant.retrieve("bot", "refund policy", filter={"owners": "nobody"})).json()
    assert missed["passages"] == []


async def test_a_version_title_stays_a_version_beside_its_passage(gateway: Gateway) -> None:
    """A release's title and text hold a four-part version and a maintainer: the version
    stays in both, the maintainer's name and address are hidden in both."""
    tenant = await provision(gateway, "acme", "releases")
    await tenant.kb("kb", score_threshold=0.0)
    text = (
        "p11-kit (0.23.16.1-2) unstable; urgency=medium\n\n"
        "  * Restore the trust module's search path.\n\n"
        " -- Jane Doe <jane@example.org>  Sun, 30 Oct 2022 14:56:36 -0400\n"
    )
    await tenant.doc("kb", "p11-kit-0.23.16.1", text, title="p11-kit 0.23.16.1 by Jane Doe")
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", "trust module search path")).json()
    passage = body["passages"][0]
    assert passage["title"] == "p11-kit 0.23.16.1 by <PERSON>"
    assert "0.23.16.1-2" in passage["text"]
    assert "-0400" in passage["text"]
    assert "Jane Doe" not in str(body)
    assert "jane@example.org" not in str(body)


async def test_explain_says_which_recognizer_hid_each_span(gateway: Gateway) -> None:
    """An admin key asking `explain` gets each hidden span's offsets, type, recognizer and
    score; the redacted text is the same as without it."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    text = f"Thanks to Priya Raghunathan, mail {EMAIL} about 1.2.3.4-1."
    plain = (await _redact(tenant, {"agent_id": "bot", "text": text})).json()
    explained = await _redact(tenant, {"agent_id": "bot", "text": text, "explain": True})
    assert explained.status_code == 200, explained.text
    body = explained.json()
    assert (
        body["text"] == plain["text"] == "Thanks to <PERSON>, mail <EMAIL_ADDRESS> about 1.2.3.4-1."
    )
    assert "spans" not in plain
    spans = [(text[s["start"] : s["end"]], s["type"], s["recognizer"]) for s in body["spans"]]
    assert spans == [
        ("Priya Raghunathan", "PERSON", "CreditNameRecognizer"),
        (EMAIL, "EMAIL_ADDRESS", "OfflineEmailRecognizer"),
    ]
    assert all(0 < s["score"] <= 1 for s in body["spans"])


async def test_explain_needs_an_admin_key_and_text(gateway: Gateway) -> None:
    """A retrieve-only key asking `explain` is refused (403); `explain` on a JSON value is
    422 naming the field."""
    tenant = await _tenant(gateway)
    await tenant.agent("bot", ["kb"])
    await tenant.issue("reader", ["retrieve"])
    body = {"agent_id": "bot", "text": EMAIL, "explain": True}
    assert (await _redact(tenant, body, "reader")).status_code == 403
    response = await _redact(tenant, {"agent_id": "bot", "value": [EMAIL], "explain": True})
    assert response.status_code == 422
    assert response.json()["field"] == "explain"
