"""The workspace part of the catalogue: settings, history, agents, stats, document lists,
redaction, foreign ids, roles, outsiders, the public surface and the logs."""

from __future__ import annotations

import secrets
from typing import Any

from gateway.tools.probe.base import CampaignBase
from gateway.tools.probe.client import (
    Reply,
)
from gateway.tools.probe.report import (
    Issue,
    Probe,
    Record,
    _list,
    _obj,
)
from gateway.tools.probe.world import (
    AGENT_MAIN,
    KB_MAIN,
    KB_SETTINGS,
    OPERATOR,
    SHARED_KBS,
    Kind,
    ProbeKey,
    Workspace,
)

#: a KB's golden set and evaluations: (endpoint, path with {kb_id}, body); admin only
_CALIBRATION_ENDPOINTS: tuple[tuple[str, str, Any], ...] = (
    (
        "PUT /v1/knowledge-bases/{kb_id}/golden-set",
        "/v1/knowledge-bases/{kb_id}/golden-set",
        {"questions": [{"question": "probe question", "document_ids": ["doc-public"]}]},
    ),
    ("GET /v1/knowledge-bases/{kb_id}/golden-set", "/v1/knowledge-bases/{kb_id}/golden-set", None),
    (
        "POST /v1/knowledge-bases/{kb_id}/evaluations",
        "/v1/knowledge-bases/{kb_id}/evaluations",
        None,
    ),
    (
        "GET /v1/knowledge-bases/{kb_id}/evaluations",
        "/v1/knowledge-bases/{kb_id}/evaluations",
        None,
    ),
)
_MIGRATION = "/v1/knowledge-bases/{kb_id}/model-migration"
#: a KB's model migration under another workspace's KB id: every step answers 404
_MIGRATION_ENDPOINTS: tuple[tuple[str, str, Any], ...] = (
    (f"GET {_MIGRATION}", _MIGRATION, None),
    (f"POST {_MIGRATION}", _MIGRATION, {"model": "kbgate/all-MiniLM-L6-v2-int8-questions"}),
    (f"POST {_MIGRATION}/validate", f"{_MIGRATION}/validate", None),
    (f"POST {_MIGRATION}/switch", f"{_MIGRATION}/switch", {"override": True}),
    (f"POST {_MIGRATION}/rollback", f"{_MIGRATION}/rollback", None),
    (f"POST {_MIGRATION}/retire", f"{_MIGRATION}/retire", None),
    (f"DELETE {_MIGRATION}", _MIGRATION, None),
)


class WorkspaceProbes(CampaignBase):
    """Probes of the workspace endpoints and the surfaces everyone can reach."""

    def workspace_probes(self, key: ProbeKey) -> list[Probe]:
        """The caller's own settings, history, KBs, stats, documents and agents: exactly its own."""
        ws = self.world.workspace(str(key.workspace))
        probes: list[Probe] = []
        if key.has("admin"):
            probes += [self._settings(key, ws), self._history(key, ws), self._agent(key, ws)]
            probes.append(self._changes(key, ws))
            probes.append(self._listed(key, "/v1/agents", "agents", "agent_id", sorted(ws.agents)))
        if key.has("admin", "ingest"):
            probes.append(
                self._listed(key, "/v1/knowledge-bases", "knowledge_bases", "kb_id", sorted(ws.kbs))
            )
            for kb_id in SHARED_KBS:
                probes += [self._stats(key, ws, kb_id), self._documents(key, ws, kb_id)]
        if key.has("retrieve") and self.redact_deployed:
            probes.append(self._redact(key))
        return probes

    def _settings(self, key: ProbeKey, ws: Workspace) -> Probe:
        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            issues = []
            if (answer.get("tenant_id"), answer.get("org_id")) != (ws.tenant_id, ws.org_id):
                issues.append(Issue("leak", f"settings of {answer.get('tenant_id')} returned"))
            strict = _obj(_obj(answer.get("effective")).get("strict_rag_isolation")).get("value")
            if strict != ws.strict:
                issues.append(Issue("failure", f"strict isolation {strict}, expected {ws.strict}"))
            return issues

        return self._probe("GET /v1/workspace/settings", key, "/v1/workspace/settings", check=check)

    def _history(self, key: ProbeKey, ws: Workspace) -> Probe:
        """The settings changes: made by the workspace's own keys, as many as it made."""
        return self._audit_list(key, ws, "/v1/workspace/settings/history", ws.history)

    def _changes(self, key: ProbeKey, ws: Workspace) -> Probe:
        """The KB and agent changes: made by the workspace's own keys, as many as it made."""
        return self._audit_list(key, ws, "/v1/workspace/changes", ws.changes)

    def _audit_list(self, key: ProbeKey, ws: Workspace, path: str, expected: int) -> Probe:
        """An audit list (`changes`) names no other workspace's key ids and holds exactly
        the `expected` entries."""
        own_ids = {k.key_id for k in ws.keys}

        def check(reply: Reply) -> list[Issue]:
            changes = _list(_obj(reply.json()).get("changes"))
            issues = []
            strangers = {str(_obj(c).get("key_id")) for c in changes} - own_ids
            if strangers:
                issues.append(Issue("leak", f"{path} names other workspaces' keys: {strangers}"))
            if len(changes) != expected:
                kind: Kind = "leak" if len(changes) > expected else "failure"
                issues.append(Issue(kind, f"{path}: {len(changes)} changes, expected {expected}"))
            return issues

        return self._probe(f"GET {path}", key, path, check=check)

    def _agent(self, key: ProbeKey, ws: Workspace) -> Probe:
        expected = ws.agents[AGENT_MAIN]

        def check(reply: Reply) -> list[Issue]:
            kb_ids = _obj(reply.json()).get("knowledge_base_ids")
            return (
                []
                if kb_ids == expected
                else [Issue("failure", f"agent KBs {kb_ids}, expected {expected}")]
            )

        return self._probe(
            "GET /v1/agents/{agent_id}", key, f"/v1/agents/{AGENT_MAIN}", check=check
        )

    def _listed(
        self, key: ProbeKey, path: str, field: str, id_field: str, expected: list[str]
    ) -> Probe:
        """A list endpoint names exactly the workspace's own ids."""

        def check(reply: Reply) -> list[Issue]:
            got = sorted(
                str(_obj(item).get(id_field)) for item in _list(_obj(reply.json()).get(field))
            )
            if got == expected:
                return []
            kind: Kind = "leak" if set(got) - set(expected) else "failure"
            return [Issue(kind, f"{path} lists {got}, own {expected}")]

        return self._probe(f"GET {path}", key, path, check=check)

    def _stats(self, key: ProbeKey, ws: Workspace, kb_id: str) -> Probe:
        expected = self.world.stats(ws, kb_id)

        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            got = (answer.get("documents"), answer.get("passages"), answer.get("held_back"))
            if got == expected:
                return []
            bigger = any(isinstance(g, int) and g > e for g, e in zip(got, expected, strict=True))
            kind: Kind = "leak" if bigger else "failure"
            return [
                Issue(kind, f"{kb_id} stats (documents, passages, held back) {got}, own {expected}")
            ]

        return self._probe(
            "GET /v1/knowledge-bases/{kb_id}/stats",
            key,
            f"/v1/knowledge-bases/{kb_id}/stats",
            mode=kb_id,
            check=check,
        )

    def _documents(self, key: ProbeKey, ws: Workspace, kb_id: str) -> Probe:
        expected = self.world.live_ids(ws, kb_id)

        def check(reply: Reply) -> list[Issue]:
            got = sorted(
                str(_obj(d).get("document_id")) for d in _list(_obj(reply.json()).get("documents"))
            )
            if got == expected:
                return []
            kind: Kind = "leak" if set(got) - set(expected) else "failure"
            return [Issue(kind, f"{kb_id} lists {got}, own {expected}")]

        return self._probe(
            "GET /v1/knowledge-bases/{kb_id}/documents",
            key,
            f"/v1/knowledge-bases/{kb_id}/documents",
            mode=kb_id,
            check=check,
        )

    def _redact(self, key: ProbeKey) -> Probe:
        body = {
            "agent_id": AGENT_MAIN,
            "text": "Write to probe.owner@example.com or call +1 415 555 0132 about the notes.",
        }

        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            return (
                []
                if isinstance(answer.get("redacted"), bool)
                else [Issue("failure", "no `redacted` flag")]
            )

        return self._probe("POST /v1/redact", key, "/v1/redact", body, check=check)

    def foreign_id_probes(self, key: ProbeKey) -> list[Probe]:
        """Ids that exist only in another workspace answer exactly like unknown ones."""
        probes: list[Probe] = []
        for other in self.world.workspaces:
            if other.label == key.workspace:
                continue
            kb, agent = self.world.only_kb(other), self.world.only_agent(other)
            probes += self._foreign_ids_for(key, other, kb, agent)
        return probes

    def _foreign_ids_for(self, key: ProbeKey, other: Workspace, kb: str, agent: str) -> list[Probe]:
        doc_path = f"/v1/knowledge-bases/{kb}/documents/doc-public"
        doc_body = {"text": "probe text", "classification": "public"}
        kb_path = f"/v1/knowledge-bases/{kb}"
        steps: list[tuple[str, str, Any, int]] = []
        if key.has("admin", "ingest"):
            steps += [
                ("GET /v1/knowledge-bases/{kb_id}", kb_path, None, 404),
                ("GET /v1/knowledge-bases/{kb_id}/stats", f"{kb_path}/stats", None, 404),
                ("GET /v1/knowledge-bases/{kb_id}/documents", f"{kb_path}/documents", None, 404),
            ]
        if key.has("ingest"):
            steps += [
                (
                    "PUT /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                    doc_path,
                    doc_body,
                    404,
                ),
                ("DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}", doc_path, None, 404),
            ]
        if key.has("admin"):
            steps += [
                ("GET /v1/agents/{agent_id}", f"/v1/agents/{agent}", None, 404),
                *self._foreign_calibration(kb),
                (
                    "PUT /v1/agents/{agent_id}",
                    f"/v1/agents/agent-attach-{self.run}",
                    {"knowledge_base_ids": [kb]},
                    422,
                ),
            ]
        if key.has("retrieve"):
            steps += [
                (
                    "POST /v1/retrieve",
                    "/v1/retrieve",
                    {"agent_id": agent, "question": "notes"},
                    404,
                ),
                (
                    "POST /v1/grounding/check",
                    "/v1/grounding/check",
                    {"agent_id": agent, "answer": "notes"},
                    404,
                ),
            ]
            if self.redact_deployed:
                steps.append(
                    (
                        "POST /v1/redact",
                        "/v1/redact",
                        {"agent_id": agent, "text": "notes"},
                        404,
                    )
                )
        steps += [
            (
                "POST /v1/keys",
                "/v1/keys",
                {"org_id": other.org_id, "tenant_id": other.tenant_id, "roles": ["retrieve"]},
                403,
            ),
            (
                "POST /v1/orgs/{org_id}/workspaces",
                f"/v1/orgs/{other.org_id}/workspaces",
                {"tenant_id": f"{self.run}-intruder"},
                403,
            ),
        ]
        return [
            self._probe(endpoint, key, path, body, expect, mode=f"foreign-id:{other.label}")
            for endpoint, path, body, expect in steps
        ]

    def _foreign_calibration(self, kb: str) -> list[tuple[str, str, Any, int]]:
        """A KB's golden set, evaluations and model migration under another workspace's KB
        id: 404, as for an unknown KB (evaluation ids of other workspaces: tests/isolation)."""
        return [
            (endpoint, path.format(kb_id=kb), body, 404)
            for endpoint, path, body in (*_CALIBRATION_ENDPOINTS, *_MIGRATION_ENDPOINTS)
        ]

    def role_probes(self, key: ProbeKey) -> list[Probe]:
        """Each workspace endpoint refuses a key without its role (403), on the caller's own ids."""
        return [
            self._probe(endpoint, key, path, body, 403, mode="wrong-role")
            for endpoint, roles, path, body in self._workspace_endpoints()
            if not key.has(*roles)
        ]

    def _workspace_endpoints(self) -> list[tuple[str, tuple[str, ...], str, Any]]:
        doc_path = f"/v1/knowledge-bases/{KB_MAIN}/documents/doc-role-probe"
        return [
            ("GET /v1/workspace/settings", ("admin",), "/v1/workspace/settings", None),
            (
                "PATCH /v1/workspace/settings",
                ("admin",),
                "/v1/workspace/settings",
                {"strict_rag_isolation": False},
            ),
            (
                "GET /v1/workspace/settings/history",
                ("admin",),
                "/v1/workspace/settings/history",
                None,
            ),
            ("GET /v1/workspace/changes", ("admin",), "/v1/workspace/changes", None),
            (
                "PUT /v1/knowledge-bases/{kb_id}",
                ("admin",),
                f"/v1/knowledge-bases/{KB_MAIN}",
                {"storage": "org", **KB_SETTINGS},
            ),
            ("GET /v1/knowledge-bases", ("admin", "ingest"), "/v1/knowledge-bases", None),
            ("GET /v1/agents", ("admin",), "/v1/agents", None),
            (
                "GET /v1/knowledge-bases/{kb_id}/stats",
                ("admin", "ingest"),
                f"/v1/knowledge-bases/{KB_MAIN}/stats",
                None,
            ),
            (
                "GET /v1/knowledge-bases/{kb_id}/documents",
                ("admin", "ingest"),
                f"/v1/knowledge-bases/{KB_MAIN}/documents",
                None,
            ),
            (
                "PUT /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                ("ingest",),
                doc_path,
                {"text": "role probe", "classification": "public"},
            ),
            (
                "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                ("ingest",),
                f"/v1/knowledge-bases/{KB_MAIN}/documents/doc-public",
                None,
            ),
            (
                "PUT /v1/agents/{agent_id}",
                ("admin",),
                f"/v1/agents/{AGENT_MAIN}",
                {"knowledge_base_ids": []},
            ),
            ("GET /v1/agents/{agent_id}", ("admin",), f"/v1/agents/{AGENT_MAIN}", None),
            *(
                (endpoint, ("admin",), path.format(kb_id=KB_MAIN), body)
                for endpoint, path, body in _CALIBRATION_ENDPOINTS
            ),
            (
                "POST /v1/retrieve",
                ("retrieve",),
                "/v1/retrieve",
                {"agent_id": AGENT_MAIN, "question": "canary"},
            ),
            (
                "POST /v1/grounding/check",
                ("retrieve",),
                "/v1/grounding/check",
                {"agent_id": AGENT_MAIN, "answer": "notes"},
            ),
            (
                "POST /v1/citations/verify",
                ("retrieve",),
                "/v1/citations/verify",
                {"turn_id": "turn_unknown", "citations": []},
            ),
            *(
                [
                    (
                        "POST /v1/redact",
                        ("retrieve",),
                        "/v1/redact",
                        {"agent_id": AGENT_MAIN, "text": "notes"},
                    )
                ]
                if self.redact_deployed
                else []
            ),
            (
                "POST /v1/keys",
                ("platform",),
                "/v1/keys",
                {"org_id": "x", "tenant_id": "x", "roles": ["admin"]},
            ),
        ]

    def outsider_probes(self) -> list[Probe]:
        """The platform key is refused on workspace endpoints; no key or a made-up one is 401."""
        probes = [
            self._probe(endpoint, self.platform, path, body, 403, mode="wrong-role")
            for endpoint, roles, path, body in self._workspace_endpoints()
            if "platform" not in roles
        ]
        forged = ProbeKey(
            "forged-key", None, frozenset(), secret="kbg_" + secrets.token_urlsafe(32)
        )
        for principal in (self.anonymous, forged):
            probes += [
                self._probe(endpoint, principal, path, body, 401, mode="no-credential")
                for endpoint, _, path, body in self._workspace_endpoints()
            ]
        return probes

    def surface_probes(self) -> list[Probe]:
        """Metrics, readiness and (in tests) logs: no tenant data of anyone, ever."""
        probes = [self._probe("GET /health/ready", self.anonymous, "/health/ready")]
        if self.metrics_exposed:
            probes.append(self._probe("GET /metrics", self.metrics_reader, "/metrics"))
        return probes

    async def scan_logs(self) -> None:
        if self.log_reader is None:
            return
        text = self.log_reader()
        probe = self._probe("READ logs", self.operator, "logs")
        self.report.records.append(Record(probe.endpoint, OPERATOR, probe.mode, 0, 0.0))
        for marker_text, marker in self.world.scan(text, frozenset()):
            self._file(
                probe,
                Issue(
                    "leak", self.world.explain(marker, probe.viewer) + f" [{marker_text[:6]}...]"
                ),
            )
