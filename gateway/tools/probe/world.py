"""The probe world: its shape (orgs, workspaces, KBs, agents, keys, canary documents)
and who may see which canary (the oracle every answer is judged by)."""

from __future__ import annotations

import itertools
import re
import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.tools.probe.probe_topics import TOPICS
from ingest.payload import CLASSIFICATION_ORDER, Classification

# ---- the world's shape -----------------------------------------------------------------

CLASSIFICATIONS: tuple[str, ...] = tuple(label.value for label in CLASSIFICATION_ORDER)
ORGS = ("oa", "ob")
WORKSPACES_PER_ORG = 2
KB_MAIN = "kb-main"  # org collection
KB_COMMON = "kb-common"  # the shared collection
KB_EXTRA = "kb-extra"  # org collection; moved between agents
KB_GROUND = "kb-ground"  # shared collection; one or two passages, for exact grounding counts
SHARED_KBS = (KB_MAIN, KB_COMMON, KB_EXTRA, KB_GROUND)
STORAGE = {KB_MAIN: "org", KB_COMMON: "shared", KB_EXTRA: "org", KB_GROUND: "shared"}
AGENT_MAIN = "agent-main"
AGENT_EXTRA = "agent-extra"
AGENT_GROUND = "agent-ground"
SCRATCH = "doc-scratch"
PRINCIPAL_ROLES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # admin and ingest keys manage every document, so `restricted` is their only clearance
    ("admin", ("admin",), "restricted"),
    ("ingest", ("ingest",), "restricted"),
    *((f"retrieve@{label}", ("retrieve",), label) for label in CLASSIFICATIONS),
)
#: KB settings that make every retrieval answer with every passage the caller may see
#: (floors at zero, top_k at the bound, copies kept: two canary notes on one topic differ by
#: their code alone), so a response can be checked for completeness.
KB_SETTINGS: dict[str, Any] = {
    "top_k": 50,
    "score_threshold": 0.0,
    "keyword_floor": 0.0,
    "grounding_floor": 0.7,
    "drop_copies": False,
    # every planted document carries these fields, the same in every workspace, so a
    # filter on them selects as much elsewhere as here (`filter_probes`)
    "metadata_fields": {"region": "string", "year": "number"},
}
#: The fields every planted document carries.
DOC_FIELDS: dict[str, Any] = {"region": "probe", "year": 2024}
GROUNDING_TOP = 3
RATE_LIMIT_RETRIES = 5
RATE_LIMIT_MAX_WAIT_S = 10.0
#: After a state change, retrieval is probed with the keys of these clearances only.
LIGHT_CLEARANCES = frozenset({"public", "restricted"})
PHASES = (
    "strict-on",
    "strict-off",
    "toggle-1",
    "toggle-2",
    "moved",
    "writes",
    "migrating",
    "archive",
)
PLATFORM = "platform"
ANONYMOUS = "anonymous"
OPERATOR = "operator"
_TOKEN_ALPHABET = "bcdfghjkmnpqrstvwxz"  # noqa: S105 — not a secret: letters only, so no PII recognizer matches a marker
_TOKEN_LENGTH = 14

Kind = Literal["leak", "failure"]


# ---- the world model -------------------------------------------------------------------


def _rank(label: str) -> int:
    return CLASSIFICATION_ORDER.index(Classification(label))


def new_token() -> str:
    """A random marker: letters only, so no redaction recognizer can rewrite it."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(_TOKEN_LENGTH))


@dataclass(slots=True)
class ProbeKey:
    """A credential the campaign holds: a workspace key, the platform key, or none."""

    label: str
    workspace: str | None
    roles: frozenset[str]
    clearance: str = "internal"
    secret: str | None = None
    key_id: str = ""

    def has(self, *roles: str) -> bool:
        return bool(self.roles & set(roles))


@dataclass(slots=True)
class Doc:
    """One planted document. `classification` None: sent without one, so held back."""

    workspace: str
    kb_id: str
    doc_id: str
    classification: str | None
    statement: str
    question: str
    token: str
    canary: str
    legacy: bool = False
    passages: int = 0
    live: bool = False

    @property
    def text(self) -> str:
        return f"{self.statement} The reference code {self.canary} marks this note."

    @property
    def title(self) -> str:
        return self.canary

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "title": self.title,
            "text": self.text,
            "source": "kbgate-probe",
            "metadata": DOC_FIELDS,
        }
        if self.classification is not None:
            body["classification"] = self.classification
        return body

    def describe(self) -> str:
        return f"{self.workspace} {self.kb_id}/{self.doc_id} ({self.classification or 'held back'})"


@dataclass(slots=True)
class Workspace:
    label: str
    org_id: str
    tenant_id: str
    index: int
    owner: ProbeKey
    principals: list[ProbeKey] = field(default_factory=list)
    strict: bool = True
    kb_cap: int = 3
    top_k: int = 50
    settings: dict[str, Any] = field(default_factory=dict)
    history: int = 0
    #: KB and agent changes the workspace's history holds
    changes: int = 0
    agents: dict[str, list[str]] = field(default_factory=dict)
    held_back: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    kbs: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[ProbeKey]:
        return [self.owner, *self.principals]


@dataclass(frozen=True, slots=True)
class Viewer:
    """What one request may see: a workspace's documents in some KBs up to a clearance.

    `workspace` None sees no tenant data at all (the platform key, anonymous callers,
    metrics and logs).
    """

    workspace: str | None
    clearance: str = "restricted"
    kbs: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Marker:
    kind: str
    workspace: str | None
    org_id: str | None
    doc: Doc | None = None


class World:
    """The planted world and the rules of who may see what (the probes' oracle)."""

    def __init__(self, run: str, *, legacy: bool) -> None:
        self.run = run
        self.legacy = legacy
        self.workspaces: list[Workspace] = []
        self.docs: list[Doc] = []
        self.orgs: list[str] = []
        self._topics = itertools.count()
        self._markers: dict[str, Marker] = {}
        self._pattern: re.Pattern[str] | None = None

    # -- building

    def workspace(self, label: str) -> Workspace:
        return next(ws for ws in self.workspaces if ws.label == label)

    def only_kb(self, ws: Workspace) -> str:
        return f"kb-only-{ws.label}-{self.run}"

    def only_agent(self, ws: Workspace) -> str:
        return f"agent-only-{ws.label}-{self.run}"

    def add_marker(
        self, text: str, kind: str, ws: Workspace | None, doc: Doc | None = None
    ) -> None:
        org = ws.org_id if ws else (text if kind == "org" else None)
        self._markers[text] = Marker(kind, ws.label if ws else None, org, doc)
        self._pattern = None

    def new_doc(
        self, ws: Workspace, kb_id: str, doc_id: str, classification: str | None, **kw: Any
    ) -> Doc:
        statement, question = TOPICS[next(self._topics) % len(TOPICS)]
        token = new_token()
        canary = f"canary-{ws.tenant_id}-{doc_id}-{token}"
        doc = Doc(ws.label, kb_id, doc_id, classification, statement, question, token, canary, **kw)
        self.docs.append(doc)
        self.add_marker(token, "document", ws, doc)
        return doc

    # -- the oracle

    def visible(self, viewer: Viewer) -> list[Doc]:
        """Documents a request by `viewer` may return: own, live, in its KBs, cleared."""
        if viewer.workspace is None:
            return []
        ws = self.workspace(viewer.workspace)
        return [
            doc
            for doc in self.docs
            if doc.workspace == ws.label
            and doc.live
            and doc.classification is not None
            and doc.kb_id in viewer.kbs
            and _rank(doc.classification) <= _rank(viewer.clearance)
            and not (doc.legacy and ws.strict)
        ]

    def allowed(self, viewer: Viewer) -> frozenset[str]:
        """Every marker `viewer` may meet in a response body."""
        if viewer.workspace is None:
            return frozenset()
        ws = self.workspace(viewer.workspace)
        own = {ws.tenant_id, ws.org_id, self.only_kb(ws), self.only_agent(ws)}
        own.update(key.key_id for key in ws.keys if key.key_id)
        own.update(doc.token for doc in self.visible(viewer))
        return frozenset(own)

    def stats(self, ws: Workspace, kb_id: str) -> tuple[int, int, int]:
        """documents, passages, held back: what the KB's stats must say, exactly."""
        docs = [d for d in self.docs if d.workspace == ws.label and d.kb_id == kb_id and d.live]
        return len(docs), sum(d.passages for d in docs), ws.held_back[kb_id]

    def live_ids(self, ws: Workspace, kb_id: str) -> list[str]:
        return sorted(
            d.doc_id for d in self.docs if d.workspace == ws.label and d.kb_id == kb_id and d.live
        )

    def by_token(self, token: str) -> Doc | None:
        marker = self._markers.get(token)
        return marker.doc if marker else None

    def _found(self, text: str) -> set[str]:
        if not self._markers:
            return set()
        if self._pattern is None:
            alternatives = sorted(self._markers, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, alternatives)))
        return set(self._pattern.findall(text))

    def scan(self, text: str, allowed: frozenset[str]) -> list[tuple[str, Marker]]:
        """Markers in `text` that are not in `allowed`."""
        return [(m, self._markers[m]) for m in sorted(self._found(text)) if m not in allowed]

    def documents_in(self, text: str) -> list[Doc]:
        """The planted documents whose canary token occurs in `text`."""
        return [doc for m in sorted(self._found(text)) if (doc := self._markers[m].doc) is not None]

    def explain(self, marker: Marker, viewer: Viewer) -> str:
        if marker.doc is None:
            owner = marker.workspace or marker.org_id or "the platform"
            return f"{marker.kind} of {owner}"
        doc = marker.doc
        if doc.workspace != viewer.workspace:
            return f"canary of another workspace's document: {doc.describe()}"
        reason = self._why_hidden(doc, viewer)
        return f"canary of the caller's own document {doc.describe()}, which is {reason}"

    def _why_hidden(self, doc: Doc, viewer: Viewer) -> str:
        if doc.classification is None:
            return "held back (never indexed)"
        if not doc.live:
            return "deleted or replaced"
        if _rank(doc.classification) > _rank(viewer.clearance):
            return f"above the key's clearance ({viewer.clearance})"
        if doc.kb_id not in viewer.kbs:
            return "in a knowledge base this request does not search"
        return "a legacy point (no orgId) under strict isolation"


# ---- legacy points (tests only) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyDocument:
    """A document to write without `orgId`, as releases before org ids did."""

    org_id: str
    tenant_id: str
    kb_id: str
    storage: str
    document_id: str
    title: str
    text: str
    classification: str


LegacyWriter = Callable[[LegacyDocument], Awaitable[int]]
LogReader = Callable[[], str]
