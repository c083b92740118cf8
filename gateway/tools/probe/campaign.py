"""The campaign runner: provision, probe phase by phase, clean up, report."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from gateway.tools.probe.archive_probes import ArchiveProbes
from gateway.tools.probe.client import (
    Reply,
    Transport,
)
from gateway.tools.probe.report import (
    Check,
    Issue,
    Probe,
    Report,
    SetupError,
    _list,
    _obj,
)
from gateway.tools.probe.retrieval_probes import RetrievalProbes
from gateway.tools.probe.setup import Provisioning
from gateway.tools.probe.workspace_probes import WorkspaceProbes
from gateway.tools.probe.world import (
    LIGHT_CLEARANCES,
    PHASES,
    SHARED_KBS,
    WORKSPACES_PER_ORG,
    ProbeKey,
    Viewer,
    Workspace,
)


class Campaign(Provisioning, RetrievalProbes, WorkspaceProbes, ArchiveProbes):
    """Provision, probe phase by phase, clean up. See the package docstring."""

    # -- whole runs

    async def run_campaign(
        self,
        phases: Sequence[str] = PHASES,
        *,
        before_cleanup: Callable[[], Awaitable[None]] | None = None,
    ) -> Report:
        """Provision, run the phases, clean up (always); `before_cleanup` runs last of all."""
        started = time.perf_counter()
        try:
            mark = time.perf_counter()
            await self.provision()
            self.report.provision_s = time.perf_counter() - mark
            self.progress(f"provisioned {self._world_line()} in {self.report.provision_s:.1f} s")
            for name in phases:
                await self.run_phase(name)
            if before_cleanup is not None:
                await before_cleanup()
        except SetupError as error:
            self.report.setup_error = str(error)
        finally:
            mark = time.perf_counter()
            await self.cleanup()
            self.report.cleanup_s = time.perf_counter() - mark
            self.report.total_s = time.perf_counter() - started
        return self.report

    def _world_line(self) -> str:
        docs = [d for d in self.world.docs if d.classification is not None]
        legacy = sum(d.legacy for d in docs)
        keys = sum(len(ws.keys) for ws in self.world.workspaces)
        return (
            f"{len(self.world.orgs)} orgs, {len(self.world.workspaces)} workspaces, "
            f"{sum(len(ws.kbs) for ws in self.world.workspaces)} KBs, {len(docs)} documents "
            f"({legacy} legacy), {keys} keys"
        )

    async def run_phase(self, name: str) -> None:
        """One phase: change the world as the phase says, then probe it."""
        self.phase = name
        before = len(self.report.records)
        started = time.perf_counter()
        if name == "archive":  # on an organization of its own: the world is left as it is
            await self.archive_check()
            self._phase_done(name, before, started)
            return
        full = name in {"strict-on", "strict-off"}
        depth = "first" if not self._probed else ("full" if full else "light")
        if name in {"strict-on", "strict-off"}:
            await self.set_strict(dict.fromkeys(self._labels(), name == "strict-on"))
        elif name.startswith("toggle"):
            await self.set_strict({ws.label: not ws.strict for ws in self._toggled(name)})
        elif name == "moved":
            await self.move_knowledge_bases()
        elif name == "writes":
            await self.write_and_delete()
        elif name == "migrating":
            await self.migrate_knowledge_bases()
        else:
            raise ValueError(f"unknown phase {name!r}")
        if full:
            await self.run_all(self.control_probes())
        await self.run_all(self.phase_probes(depth))
        self._probed = True
        await self.run_all(self.citation_probes())
        await self.run_all(self.surface_probes())
        self._phase_done(name, before, started)

    def _phase_done(self, name: str, before: int, started: float) -> None:
        seconds = time.perf_counter() - started
        count = len(self.report.records) - before
        self.report.phases.append((name, count, seconds))
        self.progress(
            f"phase {name}: {count} requests, {len(self.report.leaks)} leaks, "
            f"{len(self.report.failures)} failures so far ({seconds:.1f} s)"
        )

    def _labels(self) -> list[str]:
        return [ws.label for ws in self.world.workspaces]

    def _toggled(self, name: str) -> list[Workspace]:
        # toggle-1 flips the first workspace of each org, toggle-2 flips all: mixed, then inverted
        if name == "toggle-1":
            return [ws for ws in self.world.workspaces if ws.index % WORKSPACES_PER_ORG == 0]
        return list(self.world.workspaces)

    def phase_probes(self, depth: str) -> list[Probe]:
        """The probes of one phase. `depth`: "first" (every mode, foreign ids, roles and
        outsiders), "full" (every key, the main modes) or "light" (after a state change:
        the keys of the lowest and highest clearance, one combined request per agent)."""
        probes: list[Probe] = []
        for ws in self.world.workspaces:
            for key in ws.principals:
                if depth != "light" or key.clearance in LIGHT_CLEARANCES:
                    probes += self.retrieve_probes(key, depth=depth)
                    probes += self.grounding_probes(key, depth=depth)
                probes += self.workspace_probes(key)
                if depth == "first":
                    probes += self.foreign_id_probes(key)
                    probes += self.role_probes(key)
                    probes += self.filter_probes(key)
        if depth == "first":
            probes += self.outsider_probes()
        return probes

    # -- a spot check (the fault-injection self-test uses it)

    async def spot_check(self) -> Report:
        """Exact-canary retrievals and grounding for every retrieve key, into a fresh report."""
        saved, self.report = self.report, Report(self.run, self.report.target)
        self.phase = "spot"
        try:
            keys = self._retrievers()
            probes = [p for key in keys for p in self.retrieve_probes(key, depth="light")]
            probes += [p for key in keys for p in self.grounding_probes(key, depth="full")]
            await self.run_all(probes)
            return self.report
        finally:
            self.report = saved

    # -- cleanup

    async def cleanup(self) -> None:
        """Delete every planted document, detach every agent, check the stats are zero,
        then delete the planted organizations (and so everything in them)."""
        self.phase = "cleanup"
        live = [(self.world.workspace(d.workspace), d) for d in self.world.docs if d.live]
        await self.run_all(
            self._probe(
                "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                ws.owner,
                f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
                None,
                200,
                viewer=Viewer(ws.label),
            )
            for ws, doc in live
        )
        for _, doc in live:
            doc.live = False
        await self.run_all(
            self._probe(
                "PUT /v1/agents/{agent_id}",
                ws.owner,
                f"/v1/agents/{agent_id}",
                {"knowledge_base_ids": []},
                viewer=Viewer(ws.label),
            )
            for ws in self.world.workspaces
            for agent_id in ws.agents
        )
        for ws in self.world.workspaces:
            ws.agents = {agent_id: [] for agent_id in ws.agents}
        await self.run_all(
            self._stats(ws.owner, ws, kb_id) for ws in self.world.workspaces for kb_id in SHARED_KBS
        )
        await self.run_all(self.surface_probes())
        await self.scan_logs()
        await self.delete_world()

    async def delete_world(self) -> None:
        """Delete each planted organization through `DELETE /v1/orgs/{org_id}`: its
        workspaces with their KBs, agents, keys, turn records, settings and history, and
        its collection. Then the planted keys must answer 401 and each org 404; the report
        lists what went, and what could not be deleted."""
        removed: dict[str, int] = {}
        deleted: list[str] = []
        for org_id in self.world.orgs:
            reply = await self.execute(
                self._probe(
                    "DELETE /v1/orgs/{org_id}",
                    self.platform,
                    f"/v1/orgs/{org_id}",
                    None,
                    200,
                    also=[org_id],
                )
            )
            if reply is None or reply.status != 200:
                continue
            answer = reply.json()
            removed["organizations"] = removed.get("organizations", 0) + 1
            removed["collections"] = removed.get("collections", 0) + answer["collection_dropped"]
            removed["workspaces"] = removed.get("workspaces", 0) + answer["workspaces"]
            for kind, count in answer["deleted"].items():
                removed[kind] = removed.get(kind, 0) + count
            deleted.append(org_id)
        await self.run_all(self._gone_probes(deleted))
        self.report.removed = removed
        self._left_behind(deleted)
        await self.recreated_check(deleted)

    async def recreated_check(self, deleted: list[str]) -> None:
        """The lifecycle case: the first deleted organization and its first workspace are
        created again under the same ids, with a new admin key. That workspace must see
        nothing of its predecessor: its key history holds only its own key's creation, and
        its keys, settings history, KB and agent changes, KBs and agents are empty (any
        marker of the deleted world in an answer is a leak). Then it is deleted again."""
        heir_of = next((ws for ws in self.world.workspaces if ws.org_id in deleted), None)
        if heir_of is None:
            return
        self.phase = "lifecycle"
        org_id, tenant_id = heir_of.org_id, heir_of.tenant_id
        ids = [org_id, tenant_id]
        made = await self.execute(
            self._probe(
                "POST /v1/orgs", self.platform, "/v1/orgs", {"org_id": org_id}, 201, also=ids
            )
        )
        if made is None or made.status != 201:
            return
        try:
            await self._probe_heir(org_id, tenant_id, ids)
        finally:
            await self.execute(
                self._probe(
                    "DELETE /v1/orgs/{org_id}", self.platform, f"/v1/orgs/{org_id}", also=ids
                )
            )

    async def _probe_heir(self, org_id: str, tenant_id: str, ids: list[str]) -> None:
        created = await self.execute(
            self._probe(
                "POST /v1/orgs/{org_id}/workspaces",
                self.platform,
                f"/v1/orgs/{org_id}/workspaces",
                {"tenant_id": tenant_id},
                201,
                also=ids,
            )
        )
        if created is None or created.status != 201:
            return
        body = {"org_id": org_id, "tenant_id": tenant_id, "roles": ["admin"]}
        issued = await self.execute(
            self._probe("POST /v1/keys", self.platform, "/v1/keys", body, 201, also=ids)
        )
        if issued is None or issued.status != 201:
            return
        answer = _obj(issued.json())
        key_id = str(answer.get("key_id", ""))
        heir = ProbeKey("recreated/admin", None, frozenset({"admin"}), "restricted")
        heir.secret = str(answer.get("key", ""))
        own = [*ids, key_id]

        def only_own_key(reply: Reply) -> list[Issue]:
            events = _list(_obj(reply.json()).get("events"))
            seen = [(_obj(e).get("action"), _obj(e).get("key_id")) for e in events]
            if seen != [("created", key_id)]:
                return [Issue("leak", f"the re-created workspace's key history holds {seen}")]
            return []

        def empty(field: str, what: str) -> Check:
            def check(reply: Reply) -> list[Issue]:
                found = _list(_obj(reply.json()).get(field))
                if field == "keys":
                    found = [k for k in found if _obj(k).get("key_id") != key_id]
                if found:
                    return [Issue("leak", f"the re-created workspace lists {len(found)} {what}")]
                return []

            return check

        probes = [
            self._probe(
                "GET /v1/keys/history", heir, "/v1/keys/history", also=own, check=only_own_key
            )
        ]
        for endpoint, field, what in (
            ("GET /v1/keys", "keys", "keys of its predecessor"),
            ("GET /v1/workspace/settings/history", "changes", "settings changes"),
            ("GET /v1/workspace/changes", "changes", "KB and agent changes"),
            ("GET /v1/knowledge-bases", "knowledge_bases", "knowledge bases"),
            ("GET /v1/agents", "agents", "agents"),
        ):
            path = endpoint.split(maxsplit=1)[1]
            probes.append(
                self._probe(
                    endpoint, heir, path, also=own, check=empty(field, what), mode="recreated"
                )
            )
        await self.run_all(probes)

    def _gone_probes(self, deleted: list[str]) -> list[Probe]:
        """Each planted workspace's owner key answers 401 (one key each: 401s count against
        the caller's address's failed-authentication budget); each deleted org 404."""
        probes = [
            self._probe(
                "GET /v1/workspace/settings",
                ws.owner,
                "/v1/workspace/settings",
                None,
                401,
                mode="gone",
            )
            for ws in self.world.workspaces
            if ws.org_id in deleted
        ]
        probes += [
            self._probe(
                "DELETE /v1/orgs/{org_id}",
                self.platform,
                f"/v1/orgs/{org_id}",
                None,
                404,
                mode="gone",
                also=[org_id],
            )
            for org_id in deleted
        ]
        return probes

    def _left_behind(self, deleted: list[str]) -> None:
        """What a failed organization deletion left (nothing when all went)."""
        left = []
        for org_id in (org for org in self.world.orgs if org not in deleted):
            tenants = [ws.tenant_id for ws in self.world.workspaces if ws.org_id == org_id]
            left.append(
                f"organization {org_id} (its deletion failed; see the failures above), with "
                f"its workspaces: {', '.join(tenants)}"
            )
        self.report.left_behind = left


async def run_campaign(
    transport: Transport,
    platform_key: str,
    *,
    target: str = "in-process",
    phases: Sequence[str] = PHASES,
    concurrency: int = 4,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Provision, probe every phase, clean up; the report says what leaked."""
    campaign = Campaign(
        transport, platform_key, target=target, concurrency=concurrency, progress=progress
    )
    return await campaign.run_campaign(phases)
