"""PII analysed once at ingest, the workspace's policy applied per turn: names at both
gates, allow-lists, policy changes without re-indexing, passages stored before analysis,
and what is shown as in force."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.http.app import create_app
from gateway.runtime.services import build_services
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.index import collection_for
from ingest.payload import Classification, PassagePayload, PiiAnalysis, Scope
from ingest.sync import Document, DocumentWriter, Target
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

NAME = "Margaret Thompson"
NOTE = (
    f"Our account manager {NAME} approved the refund policy for the Aurora account; "
    "the staging replica listens on 203.0.113.77 and local tests bind to 127.0.0.1."
)
QUESTION = "Who approved the refund policy for the Aurora account?"
LEGACY_NOTE = f"Refund requests for the legacy plan are signed off by {NAME} on Fridays."


async def _workspace(gw: Gateway, tenant_id: str = "support") -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    await tenant.kb("kb", score_threshold=0.0)
    await tenant.doc("kb", "note", NOTE)
    await tenant.agent("bot", ["kb"])
    return tenant


async def _turn_text(
    tenant: Tenant, question: str = QUESTION, agent: str = "bot"
) -> tuple[str, str]:
    response = await tenant.retrieve(agent, question)
    assert response.status_code == 200, response.text
    body = response.json()
    (passage,) = [p for p in body["passages"] if p["document_id"] in {"note", "legacy"}]
    return passage["passage_id"], passage["text"]


async def _egress(tenant: Tenant, text: str) -> dict[str, Any]:
    response = await tenant.gw.client.post(
        "/v1/redact", json={"agent_id": "bot", "text": text}, headers=tenant.headers()
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _stored(gw: Gateway, tenant: Tenant, passage_id: str) -> PassagePayload:
    scope = Scope.of(
        org_id=tenant.org_id,
        tenant_id=tenant.tenant_id,
        kb_ids=["kb"],
        clearance=Classification.RESTRICTED,
    )
    found = await gw.services.index.fetch(collection_for("org", tenant.org_id), scope, [passage_id])
    return found[passage_id]


async def test_a_name_is_redacted_at_both_gates_when_the_policy_names_person(
    engine_gateway: Gateway,
) -> None:
    """With PERSON in the policy (the default) a name in a passage comes back as <PERSON>
    from a turn and from /v1/redact; a policy without PERSON keeps it at both."""
    tenant = await _workspace(engine_gateway)
    _, text = await _turn_text(tenant)
    assert NAME not in text
    assert "<PERSON>" in text
    egress = await _egress(tenant, NOTE)
    assert NAME not in egress["text"]
    assert "<PERSON>" in egress["text"]
    assert "PERSON" in egress["effective"]["entities"]

    await tenant.settings(pii_entities=["IP_ADDRESS", "EMAIL_ADDRESS"])
    _, text = await _turn_text(tenant)
    assert NAME in text
    assert "<IP_ADDRESS>" in text
    egress = await _egress(tenant, NOTE)
    assert NAME in egress["text"]
    assert "PERSON" not in egress["effective"]["entities"]


async def test_an_allow_listed_ip_stays_while_another_is_replaced(gateway: Gateway) -> None:
    """An allow-list of a CIDR range keeps 127.0.0.1 and still replaces 203.0.113.77, at both
    gates; the change is in the settings history."""
    tenant = await _workspace(gateway)
    settings = await tenant.settings(pii_allow_list=["127.0.0.0/8", "support@acme.com"])
    assert settings["effective"]["pii_allow_list"] == {
        "value": ["127.0.0.0/8", "support@acme.com"],
        "source": "workspace",
        "clamped": False,
    }
    _, text = await _turn_text(tenant)
    assert "127.0.0.1" in text
    assert "203.0.113.77" not in text
    assert "<IP_ADDRESS>" in text
    egress = await _egress(tenant, "Write to support@acme.com or jo@acme.com from ::1")
    assert egress["text"] == "Write to support@acme.com or <EMAIL_ADDRESS> from <IP_ADDRESS>"

    history = await gateway.client.get("/v1/workspace/settings/history", headers=tenant.headers())
    changes = [c for c in history.json()["changes"] if c["setting"] == "pii_allow_list"]
    assert [(c["old"], c["new"]) for c in changes] == [(None, ["127.0.0.0/8", "support@acme.com"])]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["re:(unclosed"], "not a regular expression"),
        (["re:.*"], "empty string"),
        (["ok", ""], "length >= 1"),
        (["ok", "   "], "1..200 characters"),
        (["x" * 201], "length <= 200"),
        ([f"v{i}" for i in range(101)], "length <= 100"),
        ("127.0.0.1", "Expected `array"),
    ],
)
async def test_bad_allow_list_entries_answer_422_and_change_nothing(
    gateway: Gateway, entries: Any, message: str
) -> None:
    """An entry that does not compile, matches everything, is empty or too long, or too many
    entries: 422 problem details naming the field; settings and history unchanged."""
    tenant = await _workspace(gateway)
    await tenant.settings(pii_allow_list=["127.0.0.0/8"])
    response = await gateway.client.patch(
        "/v1/workspace/settings", json={"pii_allow_list": entries}, headers=tenant.headers()
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["field"].startswith("pii_allow_list")
    assert message in problem["detail"]
    after = await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    assert after.json()["settings"]["pii_allow_list"] == ["127.0.0.0/8"]
    history = await gateway.client.get("/v1/workspace/settings/history", headers=tenant.headers())
    assert len([c for c in history.json()["changes"] if c["setting"] == "pii_allow_list"]) == 1


async def test_a_policy_change_applies_to_the_next_turn_with_no_reindex(
    engine_gateway: Gateway,
) -> None:
    """Allow-listing an address and dropping PERSON change the very next turn's text; the
    passage, its stored analysis and its indexing time stay exactly as written."""
    gw = engine_gateway
    tenant = await _workspace(gw)
    first_id, first = await _turn_text(tenant)
    before = await _stored(gw, tenant, first_id)
    assert "<IP_ADDRESS> and local tests bind to <IP_ADDRESS>" in first
    assert before.pii is not None
    assert before.pii.analyzer == gw.services.redactor.analyzer_version

    await tenant.settings(
        pii_allow_list=["127.0.0.1"], pii_entities=["IP_ADDRESS", "EMAIL_ADDRESS"]
    )
    second_id, second = await _turn_text(tenant)
    assert second_id == first_id
    assert "<IP_ADDRESS> and local tests bind to 127.0.0.1" in second
    assert NAME in second
    assert await _stored(gw, tenant, first_id) == before


async def test_passages_stored_before_analysis_are_never_returned_unredacted(
    engine_gateway: Gateway,
) -> None:
    """A passage written with no PII analysis (as before it existed), and one whose analysis
    another analyzer made and found nothing, come back redacted; their analyses are written
    back, so the next turn reads them."""
    gw = engine_gateway
    tenant = await provision(gw, "acme", "legacy")
    await tenant.kb("kb", score_threshold=0.0)
    await tenant.agent("bot", ["kb"])
    target = Target(org_id="acme", tenant_id="legacy", kb_id="kb", storage="org")
    unanalysed = DocumentWriter(gw.services.documents.writer.index, gw.services.embedder)
    unanalysed.put(target, Document("legacy", LEGACY_NOTE, Classification.INTERNAL))
    passage_id, text = await _turn_text(tenant, "Who signs off refunds for the legacy plan?")
    assert NAME not in text
    assert "<PERSON>" in text
    stored = await _stored(gw, tenant, passage_id)
    assert stored.pii is not None
    assert stored.pii.analyzer == gw.services.redactor.analyzer_version

    stale = PiiAnalysis(analyzer="pii-0-older", text=(), title=())
    await gw.services.index.set_pii(target.collection, target.write_scope(), {passage_id: stale})
    assert (await _stored(gw, tenant, passage_id)).pii == stale
    _, text = await _turn_text(tenant, "Who signs off refunds for the legacy plan?")
    assert NAME not in text
    assert (await _stored(gw, tenant, passage_id)).pii == stored.pii


class FailingAnalyzer:
    """The real redactor's identity (its types and analyzer version) and its anonymizer (the
    replacing, which runs no recognizer), failing every analysis."""

    def __init__(self, real: Redactor) -> None:
        self.anonymizer = real.anonymizer
        self.supported_entities = real.supported_entities
        self.analyzer_version = real.analyzer_version
        self.ner_model = real.ner_model

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("recognizer crashed")

        return fail


async def test_a_turn_runs_no_recognizer_and_failures_fail_closed(gateway: Gateway) -> None:
    """With every recognizer failing, a turn over analysed passages still answers, redacted
    from the stored spans; /v1/redact, ingest and a passage that needs analysis answer 503
    `redactor`, with no raw PII and nothing written."""
    tenant = await _workspace(gateway)
    await tenant.kb("old-kb", score_threshold=0.0)
    await tenant.agent("old-bot", ["old-kb"])
    target = Target(org_id="acme", tenant_id="support", kb_id="old-kb", storage="org")
    DocumentWriter(gateway.services.documents.writer.index, gateway.services.embedder).put(
        target, Document("legacy", LEGACY_NOTE, Classification.INTERNAL)
    )
    services = gateway.services
    wired = services.retrieval, services.egress, services.documents
    failing: Any = FailingAnalyzer(services.redactor)  # a Redactor that fails on purpose
    policies = dataclasses.replace(services.egress.policies, redactor=failing)
    redaction = dataclasses.replace(services.retrieval.redaction, policies=policies)
    services.retrieval = dataclasses.replace(services.retrieval, redaction=redaction)
    services.egress = dataclasses.replace(services.egress, policies=policies)
    services.documents = dataclasses.replace(
        services.documents,
        writer=DocumentWriter(services.documents.writer.index, services.embedder, analyzer=failing),
    )
    try:
        _, text = await _turn_text(tenant)
        egress = await gateway.client.post(
            "/v1/redact", json={"agent_id": "bot", "text": NOTE}, headers=tenant.headers()
        )
        put = await gateway.client.put(
            "/v1/knowledge-bases/kb/documents/new",
            json={"text": f"Call {NAME} about it.", "classification": "internal"},
            headers=tenant.headers(),
        )
        legacy = await tenant.retrieve("old-bot", "Who signs off refunds for the legacy plan?")
    finally:
        services.retrieval, services.egress, services.documents = wired
    assert NAME not in text
    assert "<PERSON>" in text
    for response in (egress, put, legacy):
        assert response.status_code == 503, response.text
        assert response.json()["dependency"] == "redactor"
        assert response.headers["retry-after"]
        assert NAME not in response.text
    stats = await gateway.client.get("/v1/knowledge-bases/kb/stats", headers=tenant.headers())
    assert stats.json()["documents"] == 1


async def test_in_force_lists_only_types_with_a_loaded_recognizer(
    tmp_path: Any, embedder: Embedder
) -> None:
    """Without the NER pipeline, PERSON is configured but not in force (clamped), and names
    pass; with it, PERSON is in force."""
    from litestar.testing import AsyncTestClient

    config = gateway_config(tmp_path / "data")
    services = await build_services(
        config,
        Telemetry(build_logger("WARNING")),
        embedder=embedder,
        redactor=Redactor.build(ner_models=()),
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            gw = Gateway(client=client, services=services, logs=None, config=config)  # type: ignore[arg-type]  # logs unused
            tenant = await _workspace(gw)
            settings = (await client.get("/v1/workspace/settings", headers=tenant.headers())).json()
            in_force = settings["effective"]["pii_entities"]
            assert "PERSON" not in in_force["value"]
            assert "IP_ADDRESS" in in_force["value"]
            assert in_force["clamped"] is True
            egress = await _egress(tenant, NOTE)
            assert "PERSON" not in egress["effective"]["entities"]
            assert NAME in egress["text"]
    finally:
        await services.close()


async def test_with_the_ner_pipeline_person_is_in_force(gateway: Gateway) -> None:
    """The project's NER pipeline is loaded offline: PERSON, LOCATION and ORGANIZATION are
    supported and the default PERSON is in force, unclamped."""
    assert gateway.services.redactor.ner_model is not None
    assert {"PERSON", "LOCATION", "ORGANIZATION"} <= gateway.services.redactor.supported_entities
    tenant = await _workspace(gateway)
    settings = (await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())).json()
    assert "PERSON" in settings["effective"]["pii_entities"]["value"]
    assert settings["effective"]["pii_entities"]["clamped"] is False


async def test_the_console_sets_the_allow_list_one_entry_per_line(gateway: Gateway) -> None:
    """The settings page edits the allow-list as lines: a bad pattern is shown at its field
    (422) and changes nothing; good lines are saved, in the settings history, and in force."""
    from tests.api.test_console import csrf_token, sign_in

    tenant = await _workspace(gateway)
    assert (await sign_in(gateway, tenant.keys["all"])).status_code == 303
    page = await gateway.client.get("/console/settings")
    assert 'id="setting-pii_allow_list"' in page.text
    assert "no recognizer loaded" not in page.text  # the NER pipeline is loaded

    form = {"csrf_token": await csrf_token(gateway), "setting": "pii_allow_list"}
    bad = await gateway.client.post(
        "/console/settings", data={**form, "value": "127.0.0.0/8\nre:(unclosed"}
    )
    assert bad.status_code == 422
    assert "not a regular expression" in bad.text
    assert "pii_allow_list" not in (await tenant.settings())["settings"]

    saved = await gateway.client.post(
        "/console/settings",
        data={**form, "value": "127.0.0.0/8\n\n  support@acme.com  \n"},
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    settings = await tenant.settings()
    assert settings["settings"]["pii_allow_list"] == ["127.0.0.0/8", "support@acme.com"]
    _, text = await _turn_text(tenant)
    assert "127.0.0.1" in text
    history = await gateway.client.get("/console/history")
    assert "pii_allow_list" in history.text
