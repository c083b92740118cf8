"""Cross-tenant isolation probes: one catalogue for the test suite and for `kbgate probe`.

A campaign provisions its own throwaway world on a gateway — two organizations, two
workspaces each, knowledge bases in the org collections and in `kb_shared` with the
*same* KB and document ids in every workspace, documents of every classification, each
carrying a unique canary token in its text and title — and then, as every principal
(keys of each role and clearance, the platform key, no key at all), tries to get every
other workspace's canaries back through every endpoint. It runs in phases: strict
isolation on, off, toggled mid-run, KBs moved between agents, documents rewritten and
deleted. Every probe is data: endpoint x principal x mode, with the status it must get,
the markers it may see, and a check of the body.

The invariant checked on every response: its raw text carries no canary the caller may
not see (another workspace's, one above the key's clearance, a legacy point under strict
isolation, one in a KB the agent does not search, a deleted one), no other workspace's
tenant id, key id or KB/agent id, no other organization's id, and no key at all; counts
(stats, document lists, grounding matches, settings history) equal exactly the caller's
own. Positive controls (the caller's own documents come back) keep a probe from passing
because nothing works at all.

The test suite (`tests/isolation`) drives a campaign through the in-process app, adds
legacy points (written without `orgId`, which the HTTP API cannot do) and scans the
captured logs too; `kbgate probe --url URL --platform-key KEY` drives the same campaign
over HTTP against any deployment. The campaign touches only what it created (ids
prefixed `probe-<random>`), deletes its documents when done and reports what it cannot
delete (there is no endpoint to delete an org, workspace, KB, agent or key).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import secrets
import statistics
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from gateway.probe_topics import TOPICS
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
#: (floors at zero, top_k at the bound), so a response can be checked for completeness.
KB_SETTINGS: dict[str, Any] = {
    "top_k": 50,
    "score_threshold": 0.0,
    "keyword_floor": 0.0,
    "grounding_floor": 0.7,
}
GROUNDING_TOP = 3
RATE_LIMIT_RETRIES = 5
RATE_LIMIT_MAX_WAIT_S = 10.0
#: After a state change, retrieval is probed with the keys of these clearances only.
LIGHT_CLEARANCES = frozenset({"public", "restricted"})
PHASES = ("strict-on", "strict-off", "toggle-1", "toggle-2", "moved", "writes")
PLATFORM = "platform"
ANONYMOUS = "anonymous"
OPERATOR = "operator"
_TOKEN_ALPHABET = "bcdfghjkmnpqrstvwxz"  # noqa: S105 — not a secret: letters only, so no PII recognizer matches a marker
_TOKEN_LENGTH = 14

Kind = Literal["leak", "failure"]

# ---- transport -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer: status and raw body text (what the leak scan reads)."""

    status: int
    text: str
    retry_after: float | None = None  # seconds, from a 429's Retry-After header

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None


class TransportError(RuntimeError):
    """The gateway could not be reached."""


class Transport(Protocol):
    """Sends one request; the key goes in `Authorization: Bearer`."""

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply: ...


class UrllibTransport:
    """HTTP(S) through the standard library, off the event loop."""

    def __init__(self, base_url: str, timeout_s: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    async def request(self, method: str, path: str, *, key: str | None, body: Any) -> Reply:
        return await asyncio.to_thread(self._send, method, path, key, body)

    def _send(self, method: str, path: str, key: str | None, body: Any) -> Reply:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(  # noqa: S310 — the scheme was checked to be http(s)
            self.base_url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # noqa: S310 — as above
                return Reply(answer.status, answer.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            return Reply(error.code, text, retry_after_s(error.headers.get("Retry-After")))
        except (urllib.error.URLError, OSError) as error:
            raise TransportError(f"{method} {path}: {error}") from error


def retry_after_s(header: str | None) -> float | None:
    """A Retry-After header in seconds (the HTTP-date form counts as one second)."""
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return 1.0


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
        body: dict[str, Any] = {"title": self.title, "text": self.text, "source": "kbgate-probe"}
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


# ---- probes and findings ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Issue:
    kind: Kind
    detail: str


Check = Callable[[Reply], list[Issue]]


@dataclass(frozen=True, slots=True)
class Probe:
    """One request and what must hold of its answer."""

    endpoint: str
    principal: ProbeKey
    mode: str
    method: str
    path: str
    body: Any = None
    expect: int = 200
    viewer: Viewer = Viewer(None)
    allowed: frozenset[str] = frozenset()
    check: Check | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    endpoint: str
    principal: str
    mode: str
    detail: str

    def line(self) -> str:
        return f"[{self.kind}] {self.endpoint} as {self.principal} ({self.mode}): {self.detail}"


@dataclass(frozen=True, slots=True)
class Record:
    endpoint: str
    principal: str
    mode: str
    status: int
    ms: float


@dataclass
class Report:
    """Everything a campaign ran and found."""

    run: str
    target: str
    records: list[Record] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    phases: list[tuple[str, int, float]] = field(default_factory=list)
    setup_error: str | None = None
    rate_limited: int = 0
    provision_s: float = 0.0
    cleanup_s: float = 0.0
    total_s: float = 0.0

    @property
    def leaks(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "leak"]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "failure"]

    @property
    def distinct(self) -> set[tuple[str, str, str]]:
        return {(r.endpoint, r.principal, r.mode) for r in self.records}

    @property
    def exit_code(self) -> int:
        """0 clean, 1 a leak, 2 setup failed, 3 no leak but some probes could not vouch."""
        if self.leaks:
            return 1
        if self.setup_error is not None:
            return 2
        return 3 if self.failures else 0

    def by_endpoint(self) -> dict[str, list[float]]:
        timings: dict[str, list[float]] = defaultdict(list)
        for record in self.records:
            timings[record.endpoint].append(record.ms)
        return dict(sorted(timings.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "target": self.target,
            "requests": len(self.records),
            "distinct_probes": len(self.distinct),
            "endpoints": len({r.endpoint for r in self.records}),
            "principals": len({r.principal for r in self.records}),
            "modes": len({r.mode for r in self.records}),
            "leaks": len(self.leaks),
            "failures": len(self.failures),
            "rate_limited": self.rate_limited,
            "exit_code": self.exit_code,
            "provision_s": round(self.provision_s, 2),
            "cleanup_s": round(self.cleanup_s, 2),
            "total_s": round(self.total_s, 2),
            "phases": [
                {"phase": name, "requests": count, "seconds": round(seconds, 2)}
                for name, count, seconds in self.phases
            ],
            "by_endpoint": {
                endpoint: {
                    "requests": len(ms),
                    "median_ms": round(statistics.median(ms), 1),
                    "p95_ms": round(_percentile(ms, 0.95), 1),
                }
                for endpoint, ms in self.by_endpoint().items()
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "findings": [
                {
                    "kind": f.kind,
                    "endpoint": f.endpoint,
                    "principal": f.principal,
                    "mode": f.mode,
                    "detail": f.detail,
                }
                for f in self.findings
            ],
            "notes": self.notes,
            "left_behind": self.left_behind,
            "setup_error": self.setup_error,
        }

    def render(self, *, limit: int = 40) -> str:
        lines = [f"kbgate probe {self.run} against {self.target}"]
        if self.setup_error:
            lines.append(f"setup failed: {self.setup_error}")
        lines.append(f"provisioned in {self.provision_s:.1f} s")
        lines.extend(
            f"  phase {name:<11} {count:5d} requests  {seconds:6.1f} s"
            for name, count, seconds in self.phases
        )
        lines.append(
            f"probes: {len(self.records)} requests, {len(self.distinct)} distinct "
            f"(endpoint x principal x mode) over {len({r.endpoint for r in self.records})} "
            f"endpoints and {len({r.principal for r in self.records})} principals"
        )
        for endpoint, ms in self.by_endpoint().items():
            lines.append(
                f"  {endpoint:<52} {len(ms):5d}  median {statistics.median(ms):7.1f} ms"
                f"  p95 {_percentile(ms, 0.95):7.1f} ms"
            )
        if self.rate_limited:
            lines.append(f"rate limited {self.rate_limited} times (waited out, then retried)")
        lines.append(f"leaks: {len(self.leaks)}")
        lines.extend("  " + f.line() for f in self.leaks[:limit])
        lines.append(f"failures (not leaks, but the probe cannot vouch): {len(self.failures)}")
        lines.extend("  " + f.line() for f in self.failures[:limit])
        lines.extend(f"note: {note}" for note in self.notes)
        if self.left_behind:
            lines.append("left behind (no delete endpoint exists for these):")
            lines.extend(f"  {item}" for item in self.left_behind)
        lines.append(f"cleanup {self.cleanup_s:.1f} s, total {self.total_s:.1f} s")
        verdict = {0: "PASS", 1: "LEAK", 2: "SETUP FAILED", 3: "INCONCLUSIVE"}[self.exit_code]
        lines.append(f"result: {verdict} (exit {self.exit_code})")
        return "\n".join(lines) + "\n"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class SetupError(RuntimeError):
    """Provisioning the probe world failed; nothing was probed."""


async def _all(steps: Iterable[Awaitable[Any]]) -> None:
    """Run setup steps concurrently; when one fails, let the others finish, then raise."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


# ---- checks (what must hold of a body) -------------------------------------------------


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Turn:
    turn_id: str
    workspace: str
    principal: str
    agent_id: str
    phase: str
    passages: tuple[tuple[str, str], ...]  # (passage id, document token)


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


# ---- the campaign ----------------------------------------------------------------------


class Campaign:
    """Provision, probe phase by phase, clean up. See the module docstring."""

    def __init__(
        self,
        transport: Transport,
        platform_key: str,
        *,
        target: str = "in-process",
        run: str | None = None,
        legacy_writer: LegacyWriter | None = None,
        log_reader: LogReader | None = None,
        concurrency: int = 4,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.transport = transport
        self.run = run or f"probe-{secrets.token_hex(3)}"
        self.world = World(self.run, legacy=legacy_writer is not None)
        self.report = Report(self.run, target)
        self.platform = ProbeKey(PLATFORM, None, frozenset({"platform"}), secret=platform_key)
        self.anonymous = ProbeKey(ANONYMOUS, None, frozenset())
        self.operator = ProbeKey(OPERATOR, None, frozenset())
        self.legacy_writer = legacy_writer
        self.log_reader = log_reader
        self.concurrency = max(1, concurrency)
        self.progress = progress or (lambda _: None)
        self.turns: list[Turn] = []
        self.controls: dict[str, dict[str, Any]] = {}
        self.redact_deployed = True
        self.metrics_exposed = True
        #: who reads /metrics for the scan: anonymous where it is open, else the platform key
        self.metrics_reader = self.anonymous
        self.phase = "provision"
        self._probed = False
        self._rotor = itertools.count()
        self._semaphore = asyncio.Semaphore(self.concurrency)

    # -- running probes

    async def execute(self, probe: Probe) -> Reply | None:
        """Send one probe, record it, and file what is wrong with the answer.

        A 429 (a per-key rate limit) is waited out as its Retry-After says, a few times:
        the probe should be polite to a production deployment, not fail on it.
        """
        async with self._semaphore:
            for attempt in itertools.count(1):
                started = time.perf_counter()
                try:
                    reply = await self.transport.request(
                        probe.method, probe.path, key=probe.principal.secret, body=probe.body
                    )
                except TransportError as error:
                    self._file(probe, Issue("failure", str(error)))
                    return None
                elapsed = (time.perf_counter() - started) * 1000
                if reply.status != 429 or attempt > RATE_LIMIT_RETRIES:
                    break
                self.report.rate_limited += 1
                wait = 1.0 if reply.retry_after is None else reply.retry_after
                await asyncio.sleep(min(wait, RATE_LIMIT_MAX_WAIT_S))
        self.report.records.append(
            Record(probe.endpoint, probe.principal.label, probe.mode, reply.status, elapsed)
        )
        for issue in self.judge(probe, reply):
            self._file(probe, issue)
        return reply

    def judge(self, probe: Probe, reply: Reply) -> list[Issue]:
        issues = [
            Issue("leak", self.world.explain(marker, probe.viewer) + f" [{text[:6]}...]")
            for text, marker in self.world.scan(reply.text, probe.allowed)
        ]
        if reply.status != probe.expect:
            denied = probe.expect in {401, 403, 404, 422}
            kind: Kind = "leak" if denied and 200 <= reply.status < 300 else "failure"
            issues.append(
                Issue(kind, f"answered {reply.status}, expected {probe.expect}: {reply.text[:160]}")
            )
        elif probe.check is not None:
            try:
                issues.extend(probe.check(reply))
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                issues.append(
                    Issue("failure", f"unexpected answer ({error!r}): {reply.text[:160]}")
                )
        return issues

    def _file(self, probe: Probe, issue: Issue) -> None:
        self.report.findings.append(
            Finding(issue.kind, probe.endpoint, probe.principal.label, probe.mode, issue.detail)
        )

    async def run_all(self, probes: Iterable[Probe]) -> None:
        await asyncio.gather(*(self.execute(probe) for probe in probes))

    async def setup_call(self, probe: Probe) -> Any:
        """A provisioning step: it must succeed, or the campaign stops."""
        reply = await self.execute(probe)
        if reply is None or reply.status != probe.expect:
            status = "no answer" if reply is None else f"{reply.status} {reply.text[:200]}"
            raise SetupError(f"{probe.method} {probe.path} as {probe.principal.label}: {status}")
        return reply.json()

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
        else:
            raise ValueError(f"unknown phase {name!r}")
        if full:
            await self.run_all(self.control_probes())
        await self.run_all(self.phase_probes(depth))
        self._probed = True
        await self.run_all(self.citation_probes())
        await self.run_all(self.surface_probes())
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

    # -- provisioning

    async def provision(self) -> None:
        world = self.world
        for org in ORGS:
            org_id = f"{self.run}-{org}"
            await self.setup_call(
                self._probe("POST /v1/orgs", self.platform, "/v1/orgs", {"org_id": org_id}, 201)
            )
            world.orgs.append(org_id)
            world.add_marker(org_id, "org", None)
            for number in range(1, WORKSPACES_PER_ORG + 1):
                await self._provision_workspace(org, org_id, number)
        await _all(self._provision_content(ws) for ws in world.workspaces)
        self.redact_deployed = await self._route_exists_redact()
        self.metrics_exposed = await self._metrics_exposed()

    async def _provision_workspace(self, org: str, org_id: str, number: int) -> None:
        label = f"{org}-w{number}"
        tenant_id = f"{self.run}-{label}"
        path = f"/v1/orgs/{org_id}/workspaces"
        await self.setup_call(
            self._probe(
                "POST /v1/orgs/{org_id}/workspaces",
                self.platform,
                path,
                {"tenant_id": tenant_id},
                201,
                also=[org_id],
            )
        )
        owner = ProbeKey(f"{label}/owner", label, frozenset({"admin", "ingest", "retrieve"}))
        ws = Workspace(label, org_id, tenant_id, len(self.world.workspaces), owner)
        self.world.workspaces.append(ws)
        self.world.add_marker(tenant_id, "tenant id", ws)
        await self._issue(ws, owner, "restricted")
        for name, roles, clearance in PRINCIPAL_ROLES:
            key = ProbeKey(f"{label}/{name}", label, frozenset(roles), clearance)
            await self._issue(ws, key, clearance)
            ws.principals.append(key)

    async def _issue(self, ws: Workspace, key: ProbeKey, clearance: str) -> None:
        body = {
            "org_id": ws.org_id,
            "tenant_id": ws.tenant_id,
            "roles": sorted(key.roles),
            "clearance": clearance,
        }
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "POST /v1/keys", self.platform, "/v1/keys", body, 201, viewer=Viewer(ws.label)
                )
            )
        )
        key.secret = str(answer.get("key", ""))
        key.key_id = str(answer.get("key_id", ""))
        key.clearance = str(answer.get("clearance", clearance))
        if not key.secret or not key.key_id:
            raise SetupError("POST /v1/keys answered without a key or key id")
        self.world.add_marker(key.secret, "key", ws)
        self.world.add_marker(key.key_id, "key id", ws)

    async def _provision_content(self, ws: Workspace) -> None:
        await self.patch_settings(
            ws, {"strict_rag_isolation": True, "max_knowledge_bases_per_agent": 3}
        )
        self.world.add_marker(self.world.only_kb(ws), "knowledge base id", ws)
        self.world.add_marker(self.world.only_agent(ws), "agent id", ws)
        for kb_id in (*SHARED_KBS, self.world.only_kb(ws)):
            storage = STORAGE.get(kb_id, "org")
            answer = _obj(
                await self.setup_call(
                    self._probe(
                        "PUT /v1/knowledge-bases/{kb_id}",
                        ws.owner,
                        f"/v1/knowledge-bases/{kb_id}",
                        {"storage": storage, **KB_SETTINGS},
                        201,
                    )
                )
            )
            top_k = _obj(_obj(answer.get("effective")).get("top_k")).get("value")
            ws.top_k = min(ws.top_k, int(top_k)) if isinstance(top_k, int) else ws.top_k
            ws.kbs.append(kb_id)
        await self._plant_documents(ws)
        agents = {
            AGENT_MAIN: [KB_MAIN, KB_COMMON],
            AGENT_EXTRA: [KB_EXTRA],
            AGENT_GROUND: [KB_GROUND],
            self.world.only_agent(ws): [self.world.only_kb(ws)],
        }
        for agent_id, kb_ids in agents.items():
            await self.put_agent(ws, agent_id, kb_ids, expect=201)

    async def _plant_documents(self, ws: Workspace) -> None:
        world = self.world
        docs = [world.new_doc(ws, KB_MAIN, f"doc-{label}", label) for label in CLASSIFICATIONS]
        docs.append(world.new_doc(ws, KB_MAIN, SCRATCH, "internal"))
        docs += [world.new_doc(ws, KB_COMMON, f"doc-{label}", label) for label in CLASSIFICATIONS]
        docs.append(world.new_doc(ws, KB_EXTRA, "doc-extra", "internal"))
        # a different number of documents per workspace, so no two workspaces' counts agree
        docs += [
            world.new_doc(ws, KB_EXTRA, f"doc-filler-{n}", CLASSIFICATIONS[n % 4])
            for n in range(ws.index)
        ]
        docs.append(world.new_doc(ws, KB_GROUND, "doc-ground-public", "public"))
        docs.append(world.new_doc(ws, KB_GROUND, "doc-ground-restricted", "restricted"))
        await _all(self.put_document(ws, doc) for doc in docs)
        held = [world.new_doc(ws, KB_MAIN, f"doc-held-{n}", None) for n in range(ws.index + 1)]
        for doc in held:
            await self.put_document(ws, doc)
        if self.legacy_writer is not None:
            for kb_id in (KB_MAIN, KB_COMMON):
                await self._plant_legacy(
                    ws, world.new_doc(ws, kb_id, "doc-legacy", "internal", legacy=True)
                )

    async def _plant_legacy(self, ws: Workspace, doc: Doc) -> None:
        assert self.legacy_writer is not None  # noqa: S101 — checked by the caller; for mypy
        doc.passages = await self.legacy_writer(
            LegacyDocument(
                org_id=ws.org_id,
                tenant_id=ws.tenant_id,
                kb_id=doc.kb_id,
                storage=STORAGE[doc.kb_id],
                document_id=doc.doc_id,
                title=doc.title,
                text=doc.text,
                classification=str(doc.classification),
            )
        )
        doc.live = doc.passages > 0

    async def put_document(self, ws: Workspace, doc: Doc, key: ProbeKey | None = None) -> None:
        """Index (or hold back) one document with the workspace's own key; must succeed."""
        held = doc.classification is None
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "PUT /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                    key or ws.owner,
                    f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
                    doc.body(),
                    200,
                    viewer=Viewer(ws.label),
                )
            )
        )
        status = answer.get("status")
        if status != ("held_back" if held else "indexed"):
            raise SetupError(f"document {doc.describe()} answered status {status!r}")
        if held:
            ws.held_back[doc.kb_id] += 1
            return
        doc.passages = int(answer.get("passages", 0))
        doc.live = doc.passages > 0

    async def put_agent(
        self, ws: Workspace, agent_id: str, kb_ids: list[str], *, expect: int = 200
    ) -> None:
        await self.setup_call(
            self._probe(
                "PUT /v1/agents/{agent_id}",
                ws.owner,
                f"/v1/agents/{agent_id}",
                {"knowledge_base_ids": kb_ids},
                expect,
                viewer=Viewer(ws.label),
            )
        )
        ws.agents[agent_id] = list(kb_ids)

    async def patch_settings(self, ws: Workspace, changes: Mapping[str, Any]) -> None:
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "PATCH /v1/workspace/settings",
                    ws.owner,
                    "/v1/workspace/settings",
                    dict(changes),
                    200,
                    viewer=Viewer(ws.label),
                )
            )
        )
        for name, value in changes.items():
            if ws.settings.get(name) != value:
                ws.history += 1
            ws.settings[name] = value
        effective = _obj(answer.get("effective"))
        ws.strict = bool(_obj(effective.get("strict_rag_isolation")).get("value"))
        cap = _obj(effective.get("max_knowledge_bases_per_agent")).get("value")
        ws.kb_cap = cap if isinstance(cap, int) else ws.kb_cap
        if "strict_rag_isolation" in changes and ws.strict != changes["strict_rag_isolation"]:
            raise SetupError(f"{ws.label}: strict isolation did not change as asked")

    async def set_strict(self, wanted: Mapping[str, bool]) -> None:
        await _all(
            self.patch_settings(self.world.workspace(label), {"strict_rag_isolation": on})
            for label, on in wanted.items()
        )

    async def _route_exists_redact(self) -> bool:
        ws = self.world.workspaces[0]
        body = {"agent_id": AGENT_MAIN, "text": "nothing to see"}
        reply = await self.transport.request("POST", "/v1/redact", key=ws.owner.secret, body=body)
        if reply.status == 404:
            self.report.notes.append(
                "POST /v1/redact answered 404 for the caller's own agent: the route is not "
                "deployed here, so its probes were skipped"
            )
            return False
        return True

    async def _metrics_exposed(self) -> bool:
        """Whether /metrics can be scanned: without credentials, or else with the platform
        key (the gateway keeps it behind a credential); `metrics_reader` is who reads it."""
        statuses = []
        for reader in (self.anonymous, self.platform):
            reply = await self.transport.request("GET", "/metrics", key=reader.secret, body=None)
            if reply.status == 200:
                self.metrics_reader = reader
                return True
            statuses.append(str(reply.status))
        self.report.notes.append(
            f"GET /metrics answered {' and '.join(statuses)} without credentials and with the "
            "platform key: not exposed here, so it was not scanned"
        )
        return False

    # -- phase changes

    async def move_knowledge_bases(self) -> None:
        """kb-main leaves agent-main and joins agent-extra, in every workspace."""
        await _all(
            step
            for ws in self.world.workspaces
            for step in (
                self.put_agent(ws, AGENT_MAIN, [KB_COMMON]),
                self.put_agent(ws, AGENT_EXTRA, [KB_EXTRA, KB_MAIN]),
            )
        )

    async def write_and_delete(self) -> None:
        """Rewrite and delete documents whose ids every workspace shares.

        The first workspace of each org rewrites `kb-main/doc-scratch` (a new canary) and
        then deletes it; every workspace deletes `kb-common/doc-public`. The other
        workspaces' documents with the same ids must not change (their stats, lists and
        retrievals are checked right after).
        """
        writers = [ws for ws in self.world.workspaces if ws.index % WORKSPACES_PER_ORG == 0]
        for ws in writers:
            old = self._doc(ws, KB_MAIN, SCRATCH)
            new = self.world.new_doc(ws, KB_MAIN, SCRATCH, "internal")
            await self.put_document(ws, new, key=self._key(ws, "ingest"))
            old.live = False
        deletions = [(ws, self._doc(ws, KB_MAIN, SCRATCH)) for ws in writers]
        deletions += [(ws, self._doc(ws, KB_COMMON, "doc-public")) for ws in self.world.workspaces]
        await self.run_all(self._delete_probe(ws, doc) for ws, doc in deletions)
        for _, doc in deletions:
            doc.live = False
        # deleting again: the document is gone here, though others still hold that id
        await self.run_all(
            self._probe(
                "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                self._key(ws, "ingest"),
                f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
                None,
                404,
                mode="again",
                viewer=Viewer(ws.label),
            )
            for ws, doc in deletions
        )

    def _delete_probe(self, ws: Workspace, doc: Doc) -> Probe:
        def check(reply: Reply) -> list[Issue]:
            deleted = _obj(reply.json()).get("deleted_passages")
            if deleted == doc.passages:
                return []
            kind: Kind = (
                "leak" if isinstance(deleted, int) and deleted > doc.passages else "failure"
            )
            return [Issue(kind, f"deleted {deleted} passages; this workspace had {doc.passages}")]

        return self._probe(
            "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
            self._key(ws, "ingest"),
            f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
            None,
            200,
            mode="shared-id",
            viewer=Viewer(ws.label),
            check=check,
        )

    def _doc(self, ws: Workspace, kb_id: str, doc_id: str) -> Doc:
        return next(
            d
            for d in self.world.docs
            if d.workspace == ws.label and d.kb_id == kb_id and d.doc_id == doc_id and d.live
        )

    def _key(self, ws: Workspace, name: str) -> ProbeKey:
        return next(key for key in ws.principals if key.label == f"{ws.label}/{name}")

    # -- the catalogue

    def _probe(
        self,
        endpoint: str,
        principal: ProbeKey,
        path: str,
        body: Any = None,
        expect: int = 200,
        *,
        mode: str = "",
        viewer: Viewer | None = None,
        check: Check | None = None,
        also: Iterable[str] = (),
    ) -> Probe:
        """A probe in the current phase; `also`: markers this answer may carry besides."""
        seen = viewer or Viewer(principal.workspace)
        return Probe(
            endpoint=endpoint,
            principal=principal,
            mode=f"{self.phase}:{mode}" if mode else self.phase,
            method=endpoint.split(maxsplit=1)[0],
            path=path,
            body=body,
            expect=expect,
            viewer=seen,
            allowed=self.world.allowed(seen) | frozenset(also),
            check=check,
        )

    def _viewer(self, key: ProbeKey, agent_id: str) -> Viewer:
        ws = self.world.workspace(str(key.workspace))
        kbs = frozenset(ws.agents.get(agent_id, [])[: ws.kb_cap])
        return Viewer(ws.label, key.clearance, kbs)

    def _retrievers(self) -> list[ProbeKey]:
        return [key for ws in self.world.workspaces for key in ws.principals if key.has("retrieve")]

    def _foreign(self, ws_label: str) -> list[Doc]:
        return [d for d in self.world.docs if d.workspace != ws_label]

    def _pick(self, pool: Sequence[Doc], count: int) -> list[Doc]:
        """`count` documents from `pool`, starting somewhere new every call (a rotation)."""
        if not pool:
            return []
        start = next(self._rotor) * 7
        return [pool[(start + n) % len(pool)] for n in range(min(count, len(pool)))]

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
        if depth == "first":
            probes += self.outsider_probes()
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

    def workspace_probes(self, key: ProbeKey) -> list[Probe]:
        """The caller's own settings, history, KBs, stats, documents and agents: exactly its own."""
        ws = self.world.workspace(str(key.workspace))
        probes: list[Probe] = []
        if key.has("admin"):
            probes += [self._settings(key, ws), self._history(key, ws), self._agent(key, ws)]
        if key.has("admin", "ingest"):
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
        own_ids = {k.key_id for k in ws.keys}
        expected = ws.history

        def check(reply: Reply) -> list[Issue]:
            changes = _list(_obj(reply.json()).get("changes"))
            issues = []
            strangers = {str(_obj(c).get("key_id")) for c in changes} - own_ids
            if strangers:
                issues.append(
                    Issue("leak", f"history names key ids of other workspaces: {strangers}")
                )
            if len(changes) != expected:
                kind: Kind = "leak" if len(changes) > expected else "failure"
                issues.append(
                    Issue(kind, f"{len(changes)} changes in history, expected {expected}")
                )
            return issues

        return self._probe(
            "GET /v1/workspace/settings/history",
            key,
            "/v1/workspace/settings/history",
            check=check,
        )

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
            (
                "PUT /v1/knowledge-bases/{kb_id}",
                ("admin",),
                f"/v1/knowledge-bases/{KB_MAIN}",
                {"storage": "org", **KB_SETTINGS},
            ),
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
        """Delete every planted document, detach every agent, check the stats are zero."""
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
        self._left_behind()

    def _left_behind(self) -> None:
        world = self.world
        if not world.orgs:
            return
        keys = [k.key_id for ws in world.workspaces for k in ws.keys]
        self.report.left_behind = [
            f"organizations (and their empty collections kb_org_<id>): {', '.join(world.orgs)}",
            f"workspaces: {', '.join(ws.tenant_id for ws in world.workspaces)}",
            f"knowledge bases, now empty, in each workspace: {', '.join(SHARED_KBS)} and "
            f"kb-only-<workspace>-{self.run}; held-back counters stay as they were",
            f"agents, now attached to no knowledge base: {AGENT_MAIN}, {AGENT_EXTRA}, "
            f"{AGENT_GROUND}, agent-only-<workspace>-{self.run}",
            f"{len(keys)} workspace keys (cannot be revoked over the API; they reach only the "
            f"empty workspaces above): {', '.join(keys)}",
            f"{sum(ws.history for ws in world.workspaces)} settings-history entries",
        ]


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


# ---- the `kbgate probe` command --------------------------------------------------------

_EPILOG = """\
The probe provisions its own throwaway organizations and workspaces (ids start with
probe-<random>), plants canary documents, and tries every endpoint as every one of its
keys to get another workspace's canaries, counts or ids back. It touches only what it
created, deletes its documents when done and lists what the API cannot delete.

exit status: 0 no leak; 1 a leak was found; 2 bad arguments or provisioning failed;
3 no leak, but some probes could not vouch (unexpected answers, e.g. errors).
"""


def add_probe_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `kbgate probe --url URL --platform-key KEY`."""
    parser = subparsers.add_parser(
        "probe",
        help="probe a live deployment for cross-tenant leaks (isolation test)",
        description="Run the cross-tenant isolation probes against a running gateway.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_probe_command)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", required=True, help="the gateway's base URL, e.g. http://host:8080"
    )
    parser.add_argument(
        "--platform-key",
        default=None,
        help="the platform key (default: the KBGATE_PLATFORM_KEY environment variable)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        dest="json_path",
        help="also write the report as JSON here",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default 60)"
    )
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated phases to run, in order (default: all of {','.join(PHASES)})",
    )


def run_probe_command(args: argparse.Namespace) -> int:
    key = args.platform_key or os.environ.get("KBGATE_PLATFORM_KEY")
    if not key:
        sys.stderr.write("kbgate probe: give --platform-key or set KBGATE_PLATFORM_KEY\n")
        return 2
    phases = [name.strip() for name in str(args.phases).split(",") if name.strip()]
    unknown = [name for name in phases if name not in PHASES]
    if len(set(phases)) != len(phases):
        unknown.append("(a phase twice)")
    if unknown or not phases:
        sys.stderr.write(f"kbgate probe: unknown phases {unknown}; choose from {list(PHASES)}\n")
        return 2
    return probe(
        args.url,
        key,
        json_path=args.json_path,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        phases=phases,
    )


def probe(
    url: str,
    platform_key: str,
    *,
    json_path: Path | None = None,
    concurrency: int = 4,
    timeout_s: float = 60.0,
    phases: Sequence[str] = PHASES,
    out: TextIO | None = None,
) -> int:
    """Run the whole campaign against `url` over HTTP; print the report; return the exit code."""
    stream = out or sys.stdout
    try:
        transport = UrllibTransport(url, timeout_s)
    except ValueError as error:
        stream.write(f"kbgate probe: {error}\n")
        return 2

    def say(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    report = asyncio.run(
        run_campaign(
            transport,
            platform_key,
            target=url,
            phases=phases,
            concurrency=concurrency,
            progress=say,
        )
    )
    stream.write(report.render())
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gateway.probe --url URL [--platform-key KEY]`."""
    parser = argparse.ArgumentParser(
        prog="kbgate probe",
        description=__doc__,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    return run_probe_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
