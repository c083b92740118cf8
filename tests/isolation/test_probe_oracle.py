"""The probe catalogue's oracle (`gateway.tools.probe.world.World`): who may see what,
without a gateway.

Every leak the suite and `kbgate probe` report is judged by these rules, so they are
pinned here on a hand-built world.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.tools.probe.campaign import Campaign
from gateway.tools.probe.client import Reply
from gateway.tools.probe.report import Finding, Record, Report
from gateway.tools.probe.world import (
    KB_COMMON,
    KB_EXTRA,
    KB_MAIN,
    Doc,
    ProbeKey,
    Viewer,
    Workspace,
    World,
)


def _world() -> tuple[World, Workspace, Workspace, Workspace]:
    world = World("probe-abc123", legacy=True)
    spaces = []
    for index, (label, org) in enumerate((("oa-w1", "oa"), ("oa-w2", "oa"), ("ob-w1", "ob"))):
        owner = ProbeKey(
            f"{label}/owner",
            label,
            frozenset({"admin"}),
            "restricted",
            "kbg_" + label,
            f"key_{index}",
        )
        ws = Workspace(label, f"probe-abc123-{org}", f"probe-abc123-{label}", index, owner)
        world.workspaces.append(ws)
        world.add_marker(ws.tenant_id, "tenant id", ws)
        world.add_marker(owner.secret or "", "key", ws)
        world.add_marker(owner.key_id, "key id", ws)
        spaces.append(ws)
    for org in ("probe-abc123-oa", "probe-abc123-ob"):
        world.orgs.append(org)
        world.add_marker(org, "org", None)
    for ws in spaces:
        for label in ("public", "restricted"):
            world.new_doc(ws, KB_MAIN, f"doc-{label}", label, passages=1, live=True)
        world.new_doc(ws, KB_COMMON, "doc-legacy", "internal", legacy=True, passages=1, live=True)
        world.new_doc(ws, KB_EXTRA, "doc-extra", "internal", passages=2, live=True)
        world.new_doc(ws, KB_MAIN, "doc-held", None)
        world.new_doc(ws, KB_MAIN, "doc-gone", "public", passages=1, live=False)
    return world, spaces[0], spaces[1], spaces[2]


def _ids(docs: list[Doc]) -> set[str]:
    return {d.doc_id for d in docs}


def test_visibility_follows_clearance_kbs_legacy_and_deletion() -> None:
    """A request sees its own live, indexed documents in the KBs it searches, up to its
    clearance; legacy points only without strict isolation; never another workspace's."""
    world, mine, _, _ = _world()
    searched = frozenset({KB_MAIN, KB_COMMON})
    assert _ids(world.visible(Viewer(mine.label, "public", searched))) == {"doc-public"}
    assert _ids(world.visible(Viewer(mine.label, "restricted", searched))) == {
        "doc-public",
        "doc-restricted",
    }
    mine.strict = False
    assert "doc-legacy" in _ids(world.visible(Viewer(mine.label, "internal", searched)))
    assert all(
        d.workspace == mine.label for d in world.visible(Viewer(mine.label, "restricted", searched))
    )
    assert world.visible(Viewer(None)) == []
    assert world.stats(mine, KB_MAIN) == (2, 2, 0)
    assert world.stats(mine, KB_EXTRA) == (1, 2, 0)


def test_the_scan_flags_foreign_and_hidden_markers_only() -> None:
    """Own tenant, org and key ids and visible canaries pass; another workspace's canary and
    tenant id, another org's id and any key are leaks; the same org's id is not."""
    world, mine, sibling, stranger = _world()
    viewer = Viewer(mine.label, "public", frozenset({KB_MAIN}))
    allowed = world.allowed(viewer)
    own = next(d for d in world.docs if d.workspace == mine.label and d.doc_id == "doc-public")
    hidden = next(
        d for d in world.docs if d.workspace == mine.label and d.doc_id == "doc-restricted"
    )
    foreign = next(d for d in world.docs if d.workspace == sibling.label)
    text = " ".join(
        [own.canary, mine.tenant_id, mine.org_id, mine.owner.key_id, hidden.canary, foreign.canary,
         stranger.org_id, sibling.tenant_id, mine.owner.secret or ""]
    )  # fmt: skip
    leaked = {marker.kind for _, marker in world.scan(text, allowed)}
    found = {m for m, _ in world.scan(text, allowed)}
    assert own.token not in found
    assert {hidden.token, foreign.token, stranger.org_id, sibling.tenant_id} <= found
    assert mine.tenant_id not in found
    assert mine.org_id not in found
    assert leaked == {"document", "org", "tenant id", "key"}
    reasons = {world.explain(marker, viewer) for _, marker in world.scan(text, allowed)}
    assert any("above the key's clearance (public)" in r for r in reasons)
    assert any("another workspace's document" in r for r in reasons)
    assert [d.doc_id for d in world.documents_in(f"x {foreign.title} y")] == [foreign.doc_id]


def test_exit_codes_put_leaks_first() -> None:
    """0 clean, 1 any leak (even with failures or a setup error), 2 setup failed, 3 only
    failures; distinct probes count endpoint x principal x mode."""
    report = Report("run", "here")
    report.records += [Record("GET /x", "p", "m", 200, 1.0), Record("GET /x", "p", "m", 200, 2.0)]
    assert (report.exit_code, len(report.distinct)) == (0, 1)
    report.findings.append(Finding("failure", "GET /x", "p", "m", "odd"))
    assert report.exit_code == 3
    report.setup_error = "no"
    assert report.exit_code == 2
    report.findings.append(Finding("leak", "GET /x", "p", "m", "canary"))
    assert report.exit_code == 1
    assert "result: LEAK (exit 1)" in report.render()


class _Limited:
    """A transport that answers 429 (Retry-After 0) `times` times, then 200."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply:
        self.calls += 1
        if self.calls <= self.times:
            return Reply(429, '{"status": 429}', retry_after=0.0)
        return Reply(200, "{}")


def test_rate_limits_are_waited_out_not_reported() -> None:
    """A 429 is retried after its Retry-After (a few times), so a rate-limited deployment
    is probed politely instead of failing; past the retries it is a failure, not a leak."""
    for times, status, findings in ((2, 200, 0), (99, 429, 1)):
        transport = _Limited(times)
        campaign = Campaign(transport, "platform-key-0123456789")
        probe = campaign._probe("GET /health/ready", campaign.anonymous, "/health/ready")
        reply = asyncio.run(campaign.execute(probe))
        assert reply is not None
        assert reply.status == status
        assert [f.kind for f in campaign.report.findings] == ["failure"] * findings
        assert len(campaign.report.records) == 1
