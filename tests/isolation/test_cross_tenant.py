"""Cross-tenant canaries on every endpoint, on Qdrant Edge, qdrant-client local mode and
(where Docker runs) a Qdrant server.

One probe campaign per engine (`campaign_run`, the catalogue `kbgate probe` runs too):
two organizations with two workspaces each, KBs in the org collections and in
`kb_shared` under the same KB and document ids everywhere, legacy points without
`orgId`, documents of every classification, each with a unique canary in its text and
title. Every other principal — keys of each role and clearance, the platform key, no
key, a forged key — tries to get each workspace's canaries, counts and ids back, while
strict isolation is on, off and toggled, KBs move between agents and documents are
rewritten and deleted. Each test below reads one slice of the campaign's findings.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.tools.probe.report import Finding, Record
from gateway.tools.probe.world import CLASSIFICATIONS, KB_COMMON, KB_MAIN
from tests.isolation.conftest import CampaignRun

pytestmark = pytest.mark.anyio


def _slice(
    run: CampaignRun, keep: Callable[[str, str], bool]
) -> tuple[list[Record], list[Finding]]:
    """The records and findings whose (endpoint, mode) `keep` selects."""
    records = [r for r in run.report.records if keep(r.endpoint, r.mode)]
    findings = [f for f in run.report.findings if keep(f.endpoint, f.mode)]
    return records, findings


def _lines(findings: list[Finding]) -> str:
    return "\n".join(f.line() for f in findings[:40])


def _assert_clean(run: CampaignRun, keep: Callable[[str, str], bool], minimum: int) -> None:
    records, findings = _slice(run, keep)
    assert len(records) >= minimum, f"only {len(records)} probes ran in this slice"
    assert not findings, f"{len(findings)} findings:\n{_lines(findings)}"


async def test_the_planted_world_has_every_shape_the_suite_needs(
    campaign_run: CampaignRun,
) -> None:
    """Two orgs x two workspaces; org and shared KBs with the same ids everywhere; every
    classification, held-back and legacy documents; and provisioning itself succeeded."""
    world = campaign_run.campaign.world
    assert campaign_run.report.setup_error is None
    assert len(world.orgs) == 2
    assert len(world.workspaces) == 4
    for ws in world.workspaces:
        docs = [d for d in world.docs if d.workspace == ws.label]
        for kb_id in (KB_MAIN, KB_COMMON):
            labels = {d.classification for d in docs if d.kb_id == kb_id and not d.legacy}
            assert set(CLASSIFICATIONS) <= labels
            assert any(d.legacy and d.kb_id == kb_id for d in docs)
        assert any(d.classification is None for d in docs)
    tokens = [d.token for d in world.docs]
    assert len(tokens) == len(set(tokens)), "every canary is unique"


async def test_retrieval_returns_exactly_the_callers_visible_documents(
    campaign_run: CampaignRun,
) -> None:
    """/v1/retrieve, with foreign canaries as the question, as variations, paraphrased, and
    replaying other workspaces' exact questions, returns no canary the key may not see and
    (for canary questions) every one it may: positive controls included."""
    _assert_clean(campaign_run, lambda e, _: e == "POST /v1/retrieve", minimum=200)


async def test_grounding_never_supports_or_counts_foreign_text(campaign_run: CampaignRun) -> None:
    """/v1/grounding/check with another workspace's document as the answer: never
    `supported`, `matches` equals the passages the caller can see, and no canary returns."""
    _assert_clean(campaign_run, lambda e, _: e == "POST /v1/grounding/check", minimum=120)


async def test_citations_refuse_foreign_turns_and_passages(campaign_run: CampaignRun) -> None:
    """/v1/citations/verify: another workspace's turn is 404; another workspace's passage
    ids in the caller's own turn are invalid; deleted passages are invalid."""
    _assert_clean(campaign_run, lambda e, _: e == "POST /v1/citations/verify", minimum=100)
    modes = {r.mode for r in campaign_run.report.records if r.endpoint.endswith("/verify")}
    assert "writes:own-turn-deleted" in modes


async def test_foreign_ids_answer_like_unknown_ones(campaign_run: CampaignRun) -> None:
    """KB, agent, document, key and workspace ids of another workspace answer 404 (or 403/422)
    on every endpoint, for every role, exactly as unknown ids do."""
    _assert_clean(campaign_run, lambda _, m: ":foreign-id:" in f"{m}:", minimum=300)


async def test_roles_and_credentials_are_enforced_on_every_endpoint(
    campaign_run: CampaignRun,
) -> None:
    """Keys without the role (403), the platform key (403), no key and a forged key (401)
    get nothing from any workspace endpoint."""
    _assert_clean(
        campaign_run, lambda _, m: m.endswith(("wrong-role", "no-credential")), minimum=150
    )


async def test_stats_lists_settings_and_history_are_exactly_the_callers_own(
    campaign_run: CampaignRun,
) -> None:
    """Stats, document lists, KB and agent lists, agents, settings, settings history and the
    KB and agent changes of KBs and agents whose ids every workspace shares: exactly the
    caller's own values and counts, in every phase."""
    endpoints = {
        "GET /v1/knowledge-bases/{kb_id}/stats",
        "GET /v1/knowledge-bases/{kb_id}/documents",
        "GET /v1/workspace/settings",
        "GET /v1/workspace/settings/history",
        "GET /v1/workspace/changes",
        "PATCH /v1/workspace/settings",
        "GET /v1/agents/{agent_id}",
        "GET /v1/knowledge-bases",
        "GET /v1/agents",
    }
    _assert_clean(campaign_run, lambda e, _: e in endpoints, minimum=300)


async def test_writes_to_shared_ids_touch_only_the_callers_documents(
    campaign_run: CampaignRun,
) -> None:
    """Rewriting and deleting a document whose KB and document ids exist in every workspace
    changes only the caller's (deleted passages = its own; others' stats unchanged)."""
    _assert_clean(
        campaign_run,
        lambda e, _: e.startswith(("PUT /v1/knowledge-bases", "DELETE /v1/knowledge-bases")),
        minimum=50,
    )


async def test_redaction_endpoint_reveals_nothing_foreign(campaign_run: CampaignRun) -> None:
    """/v1/redact with the caller's agent answers without foreign data; another workspace's
    agent id is 404."""
    assert campaign_run.campaign.redact_deployed, "POST /v1/redact must be probed"
    _assert_clean(campaign_run, lambda e, _: e == "POST /v1/redact", minimum=40)


async def test_metrics_readiness_and_logs_carry_no_tenant_data(campaign_run: CampaignRun) -> None:
    """/metrics, /health/ready and every log line of the run: no canary, tenant id, org id,
    KB or agent id of any workspace, and no key."""
    _assert_clean(
        campaign_run,
        lambda e, _: e in {"GET /metrics", "GET /health/ready", "READ logs"},
        minimum=10,
    )


@pytest.mark.parametrize(
    "phase", ["strict-on", "strict-off", "toggle-1", "toggle-2", "moved", "writes"]
)
async def test_every_phase_is_leak_free(campaign_run: CampaignRun, phase: str) -> None:
    """Strict isolation on, off, toggled mid-run (mixed, then inverted), KBs moved between
    agents, documents rewritten and deleted: no finding in any phase."""
    _assert_clean(campaign_run, lambda _, m: m.split(":")[0] == phase, minimum=100)


async def test_cleanup_deletes_every_planted_document(campaign_run: CampaignRun) -> None:
    """After the run every planted document is deleted and every KB's stats are zero; then
    both planted organizations are deleted (their four workspaces, every key, their
    collections), the keys answer 401, and nothing is left behind."""
    _assert_clean(campaign_run, lambda _, m: m.startswith("cleanup"), minimum=20)
    assert not any(d.live for d in campaign_run.campaign.world.docs)
    removed = campaign_run.report.removed
    keys = sum(len(ws.keys) for ws in campaign_run.campaign.world.workspaces)
    assert (removed["organizations"], removed["workspaces"], removed["keys"]) == (2, 4, keys)
    assert campaign_run.report.left_behind == []


async def test_a_recreated_workspace_sees_nothing_of_its_predecessor(
    campaign_run: CampaignRun,
) -> None:
    """Issue 57 #7: after the cleanup the probe creates a deleted organization and its
    workspace again under the same ids; its new admin sees no key history, key, settings
    change, KB or agent change, KB or agent of the deleted one."""
    _assert_clean(campaign_run, lambda _, m: m.startswith("lifecycle"), minimum=9)
    endpoints = {r.endpoint for r in campaign_run.report.records if r.mode.startswith("lifecycle")}
    assert {"GET /v1/keys/history", "GET /v1/workspace/settings/history"} <= endpoints


async def test_no_finding_at_all(campaign_run: CampaignRun) -> None:
    """The whole campaign: zero leaks and zero failures (exit code 0 for `kbgate probe`)."""
    report = campaign_run.report
    assert report.exit_code == 0, _lines(report.findings)


async def test_the_probes_bite_when_the_tenant_clause_is_dropped(
    campaign_run: CampaignRun,
) -> None:
    """Fault injection (test only): with the tenant clause removed from both adapters' scope
    filters, the same retrieval and grounding probes report leaks."""
    bite = campaign_run.bite
    assert bite is not None
    endpoints = {f.endpoint for f in bite.leaks}
    assert "POST /v1/retrieve" in endpoints
    assert "POST /v1/grounding/check" in endpoints
    assert bite.exit_code == 1
