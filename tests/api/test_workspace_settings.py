"""Workspace, KB and agent settings over HTTP: validation, effective values, audit, isolation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio


async def test_settings_show_stored_and_effective_values(gateway: Gateway) -> None:
    """GET shows what is stored and what is in force, with the rule behind each value."""
    old = await provision(gateway, "acme", "old", created_at="2026-05-24T23:00:00Z")
    new = await provision(gateway, "acme", "new", created_at="2026-05-25T00:00:00Z")
    old_view = (await gateway.client.get("/v1/workspace/settings", headers=old.headers())).json()
    new_view = (await gateway.client.get("/v1/workspace/settings", headers=new.headers())).json()
    assert old_view["settings"] == {}
    assert old_view["effective"]["strict_rag_isolation"] == {
        "value": False,
        "source": "created_at",
        "clamped": False,
    }
    assert new_view["effective"]["strict_rag_isolation"]["value"] is True
    assert new_view["effective"]["max_knowledge_bases_per_agent"]["value"] == 3
    assert new_view["effective"]["rag_pii_redaction"]["value"] is True


async def test_patch_changes_only_what_is_sent_and_null_resets(gateway: Gateway) -> None:
    """PATCH sets the fields sent, keeps the others, and null returns a setting to its default."""
    tenant = await provision(gateway, "acme", "ws")
    first = await tenant.settings(max_knowledge_bases_per_agent=20, rag_pii_redaction=False)
    assert first["settings"] == {"max_knowledge_bases_per_agent": 20, "rag_pii_redaction": False}
    assert first["effective"]["max_knowledge_bases_per_agent"] == {
        "value": 10,
        "source": "workspace",
        "clamped": True,
    }
    second = await tenant.settings(max_knowledge_bases_per_agent=None)
    assert second["settings"] == {"rag_pii_redaction": False}
    assert second["effective"]["max_knowledge_bases_per_agent"]["value"] == 3


async def test_history_records_who_when_old_and_new(gateway: Gateway) -> None:
    """Every change is audited with the key id (never the key), time, old and new value."""
    tenant = await provision(gateway, "acme", "ws")
    await tenant.settings(strict_rag_isolation=False)
    await tenant.settings(strict_rag_isolation=True)
    await tenant.settings(strict_rag_isolation=True)  # no change: no entry
    history = (
        await gateway.client.get("/v1/workspace/settings/history", headers=tenant.headers())
    ).json()["changes"]
    assert [(c["setting"], c["old"], c["new"]) for c in history] == [
        ("strict_rag_isolation", None, False),
        ("strict_rag_isolation", False, True),
    ]
    assert all(c["key_id"].startswith("key_") for c in history)
    assert tenant.keys["all"] not in str(history)


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        (
            "/v1/workspace/settings",
            "PATCH",
            {"strict_rag_isolation": "yes"},
            "strict_rag_isolation",
        ),
        (
            "/v1/workspace/settings",
            "PATCH",
            {"max_knowledge_bases_per_agent": -1},
            "max_knowledge_bases_per_agent",
        ),
        (
            "/v1/workspace/settings",
            "PATCH",
            {"max_knowledge_bases_per_agent": 2.5},
            "max_knowledge_bases_per_agent",
        ),
        ("/v1/workspace/settings", "PATCH", {"surprise": 1}, "surprise"),
        ("/v1/knowledge-bases/kb", "PUT", {"top_k": -3}, "top_k"),
        ("/v1/knowledge-bases/kb", "PUT", {"top_k": 0}, "top_k"),
        ("/v1/knowledge-bases/kb", "PUT", {"top_k": True}, "top_k"),
        ("/v1/knowledge-bases/kb", "PUT", {"score_threshold": 1.5}, "score_threshold"),
        ("/v1/knowledge-bases/kb", "PUT", {"score_threshold": -0.1}, "score_threshold"),
        ("/v1/knowledge-bases/kb", "PUT", {"keyword_floor": -1}, "keyword_floor"),
        ("/v1/knowledge-bases/kb", "PUT", {"fusion": {"dense": -1}}, "fusion.dense"),
        ("/v1/knowledge-bases/kb", "PUT", {"storage": "cloud"}, "storage"),
        ("/v1/agents/bot", "PUT", {"knowledge_base_ids": ["kb"], "top_k": "5"}, "top_k"),
        ("/v1/agents/bot", "PUT", {"knowledge_base_ids": ["kb", "kb"]}, "knowledge_base_ids"),
        ("/v1/agents/bot", "PUT", {"knowledge_base_ids": ["missing"]}, "knowledge_base_ids"),
        (
            "/v1/agents/bot",
            "PUT",
            {"knowledge_base_ids": ["kb"], "pii_redaction": 0},
            "pii_redaction",
        ),
    ],
)
async def test_invalid_settings_are_422_and_change_nothing(
    gateway: Gateway, path: str, method: str, body: dict[str, object], field: str
) -> None:
    """Wrong types, out-of-type numbers, unknown fields and unknown KBs: 422 naming the field."""
    tenant = await provision(gateway, "acme", "ws")
    await tenant.kb("kb", top_k=5)
    await tenant.agent("bot", ["kb"], top_k=4)
    before_ws = (
        await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    ).json()
    response = await gateway.client.request(method, path, json=body, headers=tenant.headers())
    assert response.status_code == 422, response.text
    assert field.rsplit(".", maxsplit=1)[-1] in str(response.json()["field"])
    after_ws = (await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())).json()
    assert after_ws == before_ws
    kb = await gateway.services.store.get_knowledge_base("ws", "kb")
    agent = await gateway.services.store.get_agent("ws", "bot")
    assert kb is not None
    assert kb.settings == {"top_k": 5}
    assert agent is not None
    assert agent.settings == {"top_k": 4}


async def test_non_finite_numbers_are_refused(gateway: Gateway) -> None:
    """NaN, Infinity and overflowing numbers are not JSON numbers kbgate accepts: 4xx."""
    tenant = await provision(gateway, "acme", "ws")
    for raw in (
        b'{"score_threshold": NaN}',
        b'{"score_threshold": Infinity}',
        b'{"keyword_floor": 1e999}',
    ):
        response = await gateway.client.put(
            "/v1/knowledge-bases/kb",
            content=raw,
            headers={**tenant.headers(), "Content-Type": "application/json"},
        )
        assert 400 <= response.status_code < 500, raw
    assert await gateway.services.store.get_knowledge_base("ws", "kb") is None


async def test_another_workspaces_kb_cannot_be_attached_or_read(gateway: Gateway) -> None:
    """A KB of another workspace is unknown here: not attachable (422), not readable (404)."""
    alpha = await provision(gateway, "acme", "alpha")
    beta = await provision(gateway, "globex", "beta")
    await beta.kb("beta-kb")
    attach = await gateway.client.put(
        "/v1/agents/bot", json={"knowledge_base_ids": ["beta-kb"]}, headers=alpha.headers()
    )
    assert attach.status_code == 422
    read = await gateway.client.get("/v1/knowledge-bases/beta-kb", headers=alpha.headers())
    unknown = await gateway.client.get("/v1/knowledge-bases/nope", headers=alpha.headers())
    assert read.status_code == unknown.status_code == 404
    assert read.json() == unknown.json()
    stats = await gateway.client.get("/v1/knowledge-bases/beta-kb/stats", headers=alpha.headers())
    assert stats.status_code == 404


async def test_same_kb_id_in_two_workspaces_stays_separate(gateway: Gateway) -> None:
    """Two workspaces may both own a KB called `kb`; each sees and changes only its own."""
    alpha = await provision(gateway, "acme", "alpha")
    beta = await provision(gateway, "acme", "beta")
    await alpha.kb("kb", top_k=3)
    await beta.kb("kb", top_k=9)
    a = (await gateway.client.get("/v1/knowledge-bases/kb", headers=alpha.headers())).json()
    b = (await gateway.client.get("/v1/knowledge-bases/kb", headers=beta.headers())).json()
    assert (a["settings"]["top_k"], b["settings"]["top_k"]) == (3, 9)


async def test_settings_need_the_admin_role(gateway: Gateway) -> None:
    """Retrieve and ingest keys cannot read or change workspace settings (403)."""
    tenant = await provision(gateway, "acme", "ws")
    await tenant.issue("retrieve", ["retrieve"])
    await tenant.issue("ingest", ["ingest"])
    for key in ("retrieve", "ingest"):
        assert (
            await gateway.client.get("/v1/workspace/settings", headers=tenant.headers(key))
        ).status_code == 403
        assert (
            await gateway.client.patch(
                "/v1/workspace/settings",
                json={"rag_pii_redaction": False},
                headers=tenant.headers(key),
            )
        ).status_code == 403
    platform = await gateway.client.get("/v1/workspace/settings", headers=gateway.platform)
    assert platform.status_code == 403


async def test_storage_cannot_move_while_documents_exist(gateway: Gateway) -> None:
    """Moving a KB between org and shared storage is refused (409) while it holds passages."""
    tenant = await provision(gateway, "acme", "ws")
    await tenant.kb("kb")
    await tenant.doc("kb", "d1", "Some text worth keeping.")
    moved = await gateway.client.put(
        "/v1/knowledge-bases/kb", json={"storage": "shared"}, headers=tenant.headers()
    )
    assert moved.status_code == 409
    assert moved.json()["field"] == "storage"


async def test_changes_list_each_kb_and_agent_change_of_the_callers_workspace(
    gateway: Gateway,
) -> None:
    """GET /v1/workspace/changes lists every KB and agent change of the caller's workspace,
    oldest first, with the key id and the fields set but no value; filters by kind and id;
    is admin-only; and shows another workspace none of it, though it uses the same ids."""
    tenant = await provision(gateway, "acme", "ws")
    other = await provision(gateway, "acme", "other")
    await tenant.kb("handbook", top_k=5)
    await tenant.kb("handbook", top_k=7)
    await tenant.kb("faq")
    await tenant.agent("bot", ["handbook", "faq"])
    await tenant.kb("faq")  # unchanged: no entry
    deleted = await gateway.client.delete("/v1/knowledge-bases/faq", headers=tenant.headers())
    assert deleted.status_code == 200
    await other.kb("handbook", top_k=9)

    def listed(answer: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(c["kind"], c["object_id"], c["action"], tuple(c["fields"])) for c in answer]

    async def changes(query: str = "") -> list[dict[str, Any]]:
        response = await gateway.client.get(
            f"/v1/workspace/changes{query}", headers=tenant.headers()
        )
        assert response.status_code == 200, response.text
        return list(response.json()["changes"])

    everything = await changes()
    assert listed(everything) == [
        ("knowledge_base", "handbook", "created", ("storage", "top_k")),
        ("knowledge_base", "handbook", "changed", ("top_k",)),
        ("knowledge_base", "faq", "created", ("storage",)),
        ("agent", "bot", "created", ("knowledge_base_ids",)),
        ("agent", "bot", "changed", ("knowledge_base_ids",)),
        ("knowledge_base", "faq", "deleted", ()),
    ]
    assert everything[3]["knowledge_base_ids"] == ["handbook", "faq"]
    assert everything[4]["knowledge_base_ids"] == ["handbook"]
    assert "7" not in str([c["fields"] for c in everything]), "values are never listed"
    assert {c["key_id"] for c in everything} == {everything[0]["key_id"]}
    assert tenant.keys["all"] not in str(everything)

    agents_only = await changes("?kind=agent")
    assert [c["object_id"] for c in agents_only] == ["bot", "bot"]
    faq_only = await changes("?kind=knowledge_base&object_id=faq")
    assert [c["action"] for c in faq_only] == ["created", "deleted"]

    theirs = (await gateway.client.get("/v1/workspace/changes", headers=other.headers())).json()[
        "changes"
    ]
    assert listed(theirs) == [("knowledge_base", "handbook", "created", ("storage", "top_k"))]
    assert theirs[0]["key_id"] not in {c["key_id"] for c in everything}

    reader = await tenant.issue("reader", ["retrieve"])
    refused = await gateway.client.get(
        "/v1/workspace/changes", headers={"Authorization": f"Bearer {reader}"}
    )
    assert refused.status_code == 403
    bad = await gateway.client.get("/v1/workspace/changes?kind=document", headers=tenant.headers())
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("application/problem+json")
