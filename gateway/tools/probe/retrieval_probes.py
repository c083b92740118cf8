"""The retrieval part of the catalogue: positive controls, foreign and hidden canaries
asked every way, grounding checks and citation checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.tools.probe.base import CampaignBase
from gateway.tools.probe.client import (
    Reply,
)
from gateway.tools.probe.report import (
    Issue,
    Probe,
    Turn,
    _list,
    _obj,
)
from gateway.tools.probe.world import (
    AGENT_EXTRA,
    AGENT_GROUND,
    AGENT_MAIN,
    GROUNDING_TOP,
    KB_GROUND,
    Doc,
    ProbeKey,
)
from ingest.payload import PayloadKey


class RetrievalProbes(CampaignBase):
    """Probes of /v1/retrieve, /v1/grounding and the citation check."""

    def control_probes(self) -> list[Probe]:
        """Each workspace's restricted key finds its own canaries (positive controls)."""
        probes = []
        for ws in self.world.workspaces:
            key = self._key(ws, "retrieve@restricted")
            viewer = self._viewer(key, AGENT_MAIN)
            own = self.world.visible(viewer)
            picked = self._pick(own, 3)
            if not picked:
                continue
            body = {
                "agent_id": AGENT_MAIN,
                "question": picked[0].canary,
                "variations": [d.canary for d in picked[1:]],
            }
            self.controls[ws.label] = body
            probes.append(self._retrieve(key, AGENT_MAIN, body, "control", complete=True))
        return probes

    def retrieve_probes(self, key: ProbeKey, *, depth: str) -> list[Probe]:
        """Foreign and hidden own canaries asked exactly, as variations, paraphrased, and
        other workspaces' questions replayed word for word."""
        if not key.has("retrieve"):
            return []
        if depth == "light":
            agents = (
                [AGENT_MAIN, AGENT_EXTRA] if self.phase in {"moved", "writes"} else [AGENT_MAIN]
            )
            return [self._combined(key, agent_id) for agent_id in agents]
        ws = self.world.workspace(str(key.workspace))
        foreign = self._foreign(ws.label)
        probes = [
            self._retrieve(
                key, AGENT_MAIN, self._ask(self._pick(foreign, 3)), "exact", complete=True
            ),
            self._retrieve(
                key,
                AGENT_MAIN,
                self._ask(self._pick(self._hidden(key, AGENT_MAIN), 3)),
                "own-hidden",
                complete=True,
            ),
        ]
        own = self.world.visible(self._viewer(key, AGENT_MAIN))
        neutral = own[0].question if own else "What do the notes say?"
        variation = {
            "agent_id": AGENT_MAIN,
            "question": neutral,
            "variations": [d.canary for d in self._pick(foreign, 2)],
        }
        probes.append(self._retrieve(key, AGENT_MAIN, variation, "variation", complete=True))
        if depth != "first":
            return probes
        paraphrase = self._pick(foreign, 2)
        probes.append(
            self._retrieve(
                key,
                AGENT_MAIN,
                {
                    "agent_id": AGENT_MAIN,
                    "question": paraphrase[0].question,
                    "variations": [d.question for d in paraphrase[1:]],
                },
                "paraphrase",
                complete=False,
            )
        )
        others = [body for label, body in self.controls.items() if label != ws.label]
        if others:
            replay = others[next(self._rotor) % len(others)]
            probes.append(self._retrieve(key, AGENT_MAIN, replay, "replay", complete=True))
        return probes

    def filter_probes(self, key: ProbeKey) -> list[Probe]:
        """Filters that try to widen the key's Scope: another workspace's document ids
        OR-ed in, a filter every planted document passes, with foreign canaries asked
        (200, own documents only); reserved keys naming another tenant or org, type
        confusion and deep nesting (422, nothing searched)."""
        if not key.has("retrieve"):
            return []
        ws = self.world.workspace(str(key.workspace))
        foreign = self._pick(self._foreign(ws.label), 3)
        other = next((w for w in self.world.workspaces if w.label != ws.label), ws)
        asked = self._ask(foreign)
        widening = [
            ("or-foreign-ids", {"$or": [{"document_id": {"$in": [d.doc_id for d in foreign]}},
                                        {"region": "probe"}]}),
            ("matches-everything", {"region": {"$ne": "nowhere"}, "year": {"$gte": 0}}),
            ("not-nothing", {"$not": {"region": "nowhere"}}),
        ]  # fmt: skip
        probes = [
            self._retrieve(key, AGENT_MAIN, {**asked, "filter": where}, f"filter-{mode}",
                           complete=False)
            for mode, where in widening
        ]  # fmt: skip
        deep: dict[str, Any] = {"region": "probe"}
        for _ in range(12):
            deep = {"$or": [deep, {"region": "probe"}]}
        refused = [
            (
                "reserved-tenant",
                {"$or": [{"region": "probe"}, {PayloadKey.TENANT_ID.value: other.tenant_id}]},
            ),
            ("reserved-tenant-snake", {"tenant_id": other.tenant_id}),
            ("reserved-org", {"org_id": other.org_id}),
            ("reserved-clearance", {"classification": {"$in": ["restricted"]}}),
            ("type-confusion", {"year": {"$in": ["2024", {"$ne": None}]}}),
            ("operator-injection", {"region": {"$where": "true"}}),
            ("deep-nesting", deep),
        ]
        probes += [
            self._probe(
                "POST /v1/retrieve",
                key,
                "/v1/retrieve",
                {**asked, "filter": where},
                422,
                mode=f"filter-{mode}",
                viewer=self._viewer(key, AGENT_MAIN),
            )
            for mode, where in refused
        ]
        return probes

    def _hidden(self, key: ProbeKey, agent_id: str) -> list[Doc]:
        """The caller's own documents this agent and key must not return."""
        shown = {d.token for d in self.world.visible(self._viewer(key, agent_id))}
        return [d for d in self.world.docs if d.workspace == key.workspace and d.token not in shown]

    def _combined(self, key: ProbeKey, agent_id: str) -> Probe:
        """One request: a foreign canary as the question, a hidden own one and another
        foreign one as variations."""
        foreign = self._pick(self._foreign(str(key.workspace)), 2)
        hidden = self._pick(self._hidden(key, agent_id), 1)
        body = self._ask([foreign[0], *hidden, *foreign[1:]], agent_id)
        return self._retrieve(key, agent_id, body, "exact+hidden", complete=True)

    @staticmethod
    def _ask(docs: Sequence[Doc], agent_id: str = AGENT_MAIN) -> dict[str, Any]:
        if not docs:
            return {"agent_id": agent_id, "question": "canary reference code"}
        return {
            "agent_id": agent_id,
            "question": docs[0].canary,
            "variations": [d.canary for d in docs[1:]],
        }

    def _retrieve(
        self, key: ProbeKey, agent_id: str, body: dict[str, Any], mode: str, *, complete: bool
    ) -> Probe:
        """A retrieval: only visible canaries, and (for canary questions) all of them."""
        viewer = self._viewer(key, agent_id)
        expected = self.world.visible(viewer)
        ws = self.world.workspace(str(key.workspace))
        whole = complete and len(expected) <= ws.top_k
        phase = self.phase

        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            issues, seen = self._attribute(_list(answer.get("passages")))
            missing = {d.token for d in expected} - {t for _, t in seen}
            if whole and missing:
                names = sorted(d.describe() for d in expected if d.token in missing)
                issues.append(Issue("failure", f"own visible documents missing: {names}"))
            if seen and isinstance(answer.get("turn_id"), str):
                self.turns.append(
                    Turn(str(answer["turn_id"]), ws.label, key.label, agent_id, phase, tuple(seen))
                )
            return issues

        return self._probe(
            "POST /v1/retrieve",
            key,
            "/v1/retrieve",
            body,
            200,
            mode=mode,
            viewer=viewer,
            check=check,
        )

    def _attribute(self, passages: list[Any]) -> tuple[list[Issue], list[tuple[str, str]]]:
        """Map every returned passage to a planted document by its canary."""
        issues: list[Issue] = []
        seen: list[tuple[str, str]] = []
        for raw in passages:
            passage = _obj(raw)
            content = f"{passage.get('title', '')} {passage.get('text', '')}"
            docs = self.world.documents_in(content)
            if not docs:
                issues.append(
                    Issue(
                        "leak",
                        f"a passage that is none of the caller's documents: "
                        f"{passage.get('knowledge_base_id')}/{passage.get('document_id')}",
                    )
                )
                continue
            doc = docs[0]
            where = (passage.get("knowledge_base_id"), passage.get("document_id"))
            if where != (doc.kb_id, doc.doc_id):
                issues.append(Issue("failure", f"passage of {doc.describe()} labelled {where}"))
            seen.append((str(passage.get("passage_id")), doc.token))
        return issues, seen

    def grounding_probes(self, key: ProbeKey, *, depth: str) -> list[Probe]:
        """Foreign texts as answers: never supported, and matches count own passages only."""
        if not key.has("retrieve"):
            return []
        foreign = self._foreign(str(key.workspace))
        grounds = [d for d in foreign if d.kb_id == KB_GROUND] or foreign
        probes = [self._grounding(key, AGENT_GROUND, self._pick(grounds, 1)[0], "foreign-text")]
        if depth != "light":
            probes.append(
                self._grounding(key, AGENT_MAIN, self._pick(foreign, 1)[0], "foreign-text")
            )
        return probes

    def _grounding(self, key: ProbeKey, agent_id: str, doc: Doc, mode: str) -> Probe:
        viewer = self._viewer(key, agent_id)
        passages = sum(d.passages for d in self.world.visible(viewer))
        expected = min(GROUNDING_TOP, passages)

        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            issues = []
            matches, status = answer.get("matches"), answer.get("status")
            if isinstance(matches, int) and matches > expected:
                issues.append(
                    Issue(
                        "leak",
                        f"grounding counted {matches} matches; the caller can "
                        f"see {passages} passages through {agent_id}",
                    )
                )
            elif matches != expected:
                issues.append(Issue("failure", f"grounding matches {matches}, expected {expected}"))
            if status == "supported":
                issues.append(
                    Issue("leak", f"another workspace's text {doc.describe()} was judged supported")
                )
            if expected == 0 and status != "skipped":
                issues.append(Issue("failure", f"status {status} with nothing to search"))
            return issues

        body = {"agent_id": agent_id, "answer": doc.text}
        return self._probe(
            "POST /v1/grounding/check",
            key,
            "/v1/grounding/check",
            body,
            200,
            mode=f"{mode}:{agent_id}",
            viewer=viewer,
            check=check,
        )

    def citation_probes(self) -> list[Probe]:
        """Foreign turns are 404; foreign passages in an own turn are invalid."""
        probes: list[Probe] = []
        phase_turns = [t for t in self.turns if t.phase == self.phase]
        for key in self._retrievers():
            ws_label = str(key.workspace)
            foreign = [t for t in phase_turns if t.workspace != ws_label]
            if foreign:
                turn = foreign[next(self._rotor) % len(foreign)]
                body = {
                    "turn_id": turn.turn_id,
                    "citations": [{"passage_id": p} for p, _ in turn.passages],
                }
                probes.append(
                    self._probe(
                        "POST /v1/citations/verify",
                        key,
                        "/v1/citations/verify",
                        body,
                        404,
                        mode="foreign-turn",
                    )
                )
            own = self._own_turn(key)
            if own is not None:
                probes.append(self._citations(key, own, foreign))
        return probes

    def _own_turn(self, key: ProbeKey) -> Turn | None:
        """The key's latest turn; in the writes phase, one from before the deletions."""
        mine = [t for t in self.turns if t.principal == key.label and t.agent_id == AGENT_MAIN]
        if self.phase == "writes":
            mine = [t for t in mine if t.phase != "writes"]
        return mine[-1] if mine else None

    def _citations(self, key: ProbeKey, turn: Turn, foreign: Sequence[Turn]) -> Probe:
        viewer = self._viewer(key, turn.agent_id)
        still = {d.token for d in self.world.visible(viewer)}
        expected: dict[str, str | None] = {
            pid: (None if token in still else "passage_deleted") for pid, token in turn.passages
        }
        strangers = [pid for t in foreign[:3] for pid, _ in t.passages[:2]]
        expected.update(dict.fromkeys(strangers, "not_returned_in_turn"))
        body = {"turn_id": turn.turn_id, "citations": [{"passage_id": pid} for pid in expected]}

        def check(reply: Reply) -> list[Issue]:
            answer = _obj(reply.json())
            got: dict[str, str | None] = {
                str(_obj(v).get("passage_id")): None for v in _list(answer.get("valid"))
            }
            got.update(
                {
                    str(_obj(v).get("passage_id")): str(_obj(v).get("reason"))
                    for v in _list(answer.get("invalid"))
                }
            )
            issues = [
                Issue("leak", f"another workspace's passage {pid} was accepted as a citation")
                for pid in strangers
                if pid in got and got[pid] is None
            ]
            wrong = {
                pid: (got.get(pid, "absent"), want)
                for pid, want in expected.items()
                if got.get(pid, "absent") != want and pid not in strangers
            }
            if wrong:
                issues.append(Issue("failure", f"citation verdicts (got, expected): {wrong}"))
            return issues

        mode = "own-turn-deleted" if self.phase == "writes" else "own-turn-foreign-passages"
        return self._probe(
            "POST /v1/citations/verify",
            key,
            "/v1/citations/verify",
            body,
            200,
            mode=mode,
            viewer=viewer,
            check=check,
        )
