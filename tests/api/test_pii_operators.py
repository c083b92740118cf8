"""How redacted values are replaced (`pii_operators`), over HTTP on real engines: `replace`,
`mask` and per-workspace pseudonyms in turns and at `/v1/redact`, titles agreeing with
their passages, bad values refused, and a pseudonym key that is the workspace's alone."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway, serving_stack
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

NAME = "Margaret Thompson"
EMAIL = "margaret.t@acme-billing.com"
TITLE = f"Refund approvals by {NAME}"
NOTE = (
    f"Our account manager {NAME} approved the refund policy for the Aurora account; "
    f"questions about it go to {EMAIL} before Friday."
)
QUESTION = "Who approved the refund policy for the Aurora account?"
PSEUDONYM = re.compile(r"<PERSON_[0-9a-f]{6}>")


@pytest.fixture(params=["edge+sqlite", "local+redis"])
async def stack_gateway(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[Gateway]:
    """The gateway on Qdrant Edge with SQLite, and on qdrant-client local mode with Redis."""
    async with serving_stack(request, tmp_path, embedder) as gw:
        yield gw


async def _workspace(gw: Gateway, tenant_id: str, **settings: Any) -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    await tenant.kb("kb", score_threshold=0.0)
    await tenant.doc("kb", "note", NOTE, title=TITLE)
    await tenant.agent("bot", ["kb"])
    if settings:
        await tenant.settings(**settings)
    return tenant


async def _passage(tenant: Tenant) -> dict[str, Any]:
    response = await tenant.retrieve("bot", QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    (passage,) = [p for p in body["passages"] if p["document_id"] == "note"]
    return {**passage, "context": body["context"]}


async def _egress(tenant: Tenant, text: str) -> dict[str, Any]:
    response = await tenant.gw.client.post(
        "/v1/redact", json={"agent_id": "bot", "text": text}, headers=tenant.headers()
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _pseudonym(text: str) -> str:
    (token,) = {str(found) for found in PSEUDONYM.findall(text)}
    return token


async def test_a_title_and_its_passage_give_a_name_the_same_pseudonym(gateway: Gateway) -> None:
    """With PERSON pseudonymised, a document whose title and text name the same person comes
    back from /v1/retrieve with one `<PERSON_xxxxxx>` token in the text, the title and the
    fenced context, and the name nowhere; /v1/redact gives the same token for it."""
    tenant = await _workspace(gateway, "support", pii_operators={"PERSON": "pseudonym"})
    passage = await _passage(tenant)
    token = _pseudonym(passage["text"])
    assert _pseudonym(passage["title"]) == token
    assert passage["title"] == f"Refund approvals by {token}"
    assert token.replace("<", "&lt;").replace(">", "&gt;") in passage["context"]  # fenced
    for field in ("text", "title", "context"):
        assert NAME not in passage[field]
    assert "<EMAIL_ADDRESS>" in passage["text"]  # types not named keep `replace`
    egress = await _egress(tenant, f"Please ask {NAME} again.")
    assert _pseudonym(egress["text"]) == token
    assert egress["entities"] == [{"type": "PERSON", "count": 1}]


async def test_mask_hides_every_character_and_replace_is_the_default(gateway: Gateway) -> None:
    """`mask` turns each character of a value into `*` (its length stays); with no
    `pii_operators` every type is replaced by `<TYPE>`; the effective value says which."""
    tenant = await _workspace(gateway, "support")
    passage = await _passage(tenant)
    assert "<PERSON>" in passage["text"]
    assert "<EMAIL_ADDRESS>" in passage["text"]
    before = await tenant.settings()
    assert before["effective"]["pii_operators"] == {
        "value": {},
        "source": "platform",
        "clamped": False,
    }

    after = await tenant.settings(pii_operators={"EMAIL_ADDRESS": "mask", "PERSON": "replace"})
    assert after["effective"]["pii_operators"]["value"] == {
        "EMAIL_ADDRESS": "mask",
        "PERSON": "replace",
    }
    passage = await _passage(tenant)
    assert f"go to {'*' * len(EMAIL)} before Friday" in passage["text"]
    assert "<PERSON>" in passage["text"]
    assert EMAIL not in passage["text"]
    egress = await _egress(tenant, "Mail ann@example.org today")
    assert egress["text"] == "Mail *************** today"
    assert egress["entities"] == [{"type": "EMAIL_ADDRESS", "count": 1}]


async def test_a_pseudonym_is_stable_in_a_workspace_and_differs_in_another(
    gateway: Gateway,
) -> None:
    """The same name gives the same token in every turn of one workspace, and another token
    in a second workspace holding the same document under the same setting."""
    first = await _workspace(gateway, "first", pii_operators={"PERSON": "pseudonym"})
    second = await _workspace(gateway, "second", pii_operators={"PERSON": "pseudonym"})
    token = _pseudonym((await _passage(first))["text"])
    assert _pseudonym((await _passage(first))["text"]) == token
    other = _pseudonym((await _passage(second))["text"])
    assert other != token
    assert _pseudonym((await _egress(second, f"Hi {NAME}, thanks."))["text"]) == other


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"PERSON": "hash"}, "Invalid enum value 'hash'"),
        ({"SHOE_SIZE": "mask"}, "Invalid enum value 'SHOE_SIZE'"),
        ("mask", "Expected `object"),
        (["PERSON", "mask"], "Expected `object"),
    ],
)
async def test_a_bad_pii_operators_value_answers_422_and_changes_nothing(
    gateway: Gateway, value: Any, message: str
) -> None:
    """An unknown operator, an unknown type or not a mapping: 422 problem details naming
    `pii_operators`; the stored setting, its history and the turn's text are unchanged."""
    tenant = await _workspace(gateway, "support", pii_operators={"PERSON": "pseudonym"})
    token = _pseudonym((await _passage(tenant))["text"])
    response = await gateway.client.patch(
        "/v1/workspace/settings", json={"pii_operators": value}, headers=tenant.headers()
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"].startswith("pii_operators")
    assert message in problem["detail"]
    settings = await tenant.settings()
    assert settings["settings"]["pii_operators"] == {"PERSON": "pseudonym"}
    history = await gateway.client.get("/v1/workspace/settings/history", headers=tenant.headers())
    changes = [c for c in history.json()["changes"] if c["setting"] == "pii_operators"]
    assert [(c["old"], c["new"]) for c in changes] == [(None, {"PERSON": "pseudonym"})]
    assert _pseudonym((await _passage(tenant))["text"]) == token


async def test_a_malformed_stored_value_replaces_every_type(gateway: Gateway) -> None:
    """A stored `pii_operators` the rules cannot read (written around the API) is ignored
    whole: every type is replaced by `<TYPE>`, nothing is shown."""
    tenant = await _workspace(gateway, "support")
    await gateway.services.store.update_workspace_settings(
        "support", {"pii_operators": {"PERSON": "keep"}}, key_id="test", at="2026-06-01T00:00:00Z"
    )
    gateway.services.settings.invalidate("support")
    passage = await _passage(tenant)
    assert "<PERSON>" in passage["text"]
    assert NAME not in passage["text"]
    shown = (await tenant.settings())["effective"]["pii_operators"]
    assert shown == {"value": {}, "source": "platform", "clamped": False}


async def test_a_re_created_workspace_gets_new_pseudonyms_and_its_key_is_never_shown(
    stack_gateway: Gateway,
) -> None:
    """Deleting a workspace deletes its pseudonym key: the same id created again gives the
    same name another token. The key is in no answer: settings, history or export."""
    gw = stack_gateway
    tenant = await _workspace(gw, "gone", pii_operators={"PERSON": "pseudonym"})
    token = _pseudonym((await _passage(tenant))["text"])
    key = await gw.services.store.pseudonym_key("gone")
    assert key is not None
    assert len(key) == 32
    spellings = [key.hex(), base64.b64encode(key).decode(), base64.urlsafe_b64encode(key).decode()]
    answers = [
        await gw.client.get("/v1/workspace/settings", headers=tenant.headers()),
        await gw.client.get("/v1/workspace/settings/history", headers=tenant.headers()),
        await gw.client.get("/v1/orgs/acme/workspaces/gone/export", headers=gw.platform),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        for spelling in spellings:
            assert spelling.encode() not in answer.content
    assert all(spelling not in gw.logs.getvalue() for spelling in spellings)

    deleted = await gw.client.delete("/v1/orgs/acme/workspaces/gone", headers=gw.platform)
    assert deleted.status_code == 200, deleted.text
    assert await gw.services.store.pseudonym_key("gone") is None

    again = await _workspace(gw, "gone", pii_operators={"PERSON": "pseudonym"})
    renewed = _pseudonym((await _passage(again))["text"])
    assert renewed != token
    assert await gw.services.store.pseudonym_key("gone") != key


async def test_the_console_shows_and_saves_each_types_operator(gateway: Gateway) -> None:
    """The settings page offers replace, mask and pseudonym per type, `replace` selected by
    default; saving sends the choices (replace left out), which are stored, in the history
    and in force at the next turn; an unknown operator is refused at the field (422) and
    changes nothing."""
    from tests.api.test_console import csrf_token, sign_in

    tenant = await _workspace(gateway, "support")
    assert (await sign_in(gateway, tenant.keys["all"])).status_code == 303
    page = await gateway.client.get("/console/settings")
    assert 'id="setting-pii_operators"' in page.text
    assert 'name="operator-PERSON"' in page.text
    assert '<option value="replace" selected>replace</option>' in page.text
    assert "replace for every type" in page.text

    form = {"csrf_token": await csrf_token(gateway), "setting": "pii_operators"}
    bad = await gateway.client.post(
        "/console/settings", data={**form, "operator-PERSON": "scramble"}
    )
    assert bad.status_code == 422
    assert "is not one of the allowed values" in bad.text
    assert "pii_operators" not in (await tenant.settings())["settings"]

    saved = await gateway.client.post(
        "/console/settings",
        data={
            **form,
            "operator-PERSON": "pseudonym",
            "operator-EMAIL_ADDRESS": "mask",
            "operator-IP_ADDRESS": "replace",
        },
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    stored = (await tenant.settings())["settings"]["pii_operators"]
    assert stored == {"PERSON": "pseudonym", "EMAIL_ADDRESS": "mask"}
    page = await gateway.client.get("/console/settings")
    assert "EMAIL_ADDRESS: mask, PERSON: pseudonym" in page.text
    passage = await _passage(tenant)
    assert PSEUDONYM.search(passage["text"])
    assert "*" * len(EMAIL) in passage["text"]
    history = await gateway.client.get("/console/history")
    assert "pii_operators" in history.text
